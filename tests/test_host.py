"""Host tests: everything that needs no GPU. They run in CI on every push.

select() decisions and refusals, SKU contents, descriptor identity, DLPack rejections,
dtype conversion, the error classes, the registry, `python -m baracuda`, the functional
API. Tensors that look like CUDA tensors are faked with hand-made DLPack capsules; every
run() here is refused (or has nothing to do) before anything reaches the device, so the
fakes' addresses are never dereferenced.
"""
import importlib.metadata
import subprocess
import sys

import numpy as np
import pytest

import baracuda as bc
from baracuda import errors

S = bc.TensorSpec
D = bc.ElementwiseDescriptor
P = bc.ElementwisePlan
f16, bf16, f32, f64 = bc.float16, bc.bfloat16, bc.float32, bc.float64
i32 = bc.int32
BOOL = bc.DType.bool

OPS = {row["name"]: row for row in bc.elementwise_ops()}
REAL_DTYPES = [d for d in bc.DType.__members__.values() if d not in (bc.complex64, bc.complex128)]


def T(shape, dtype, strides=None):
    """A TensorSpec as plain data, for parametrize lists (made into a TensorSpec inside the test,
    so pytest does not hold nanobind objects until interpreter exit)."""
    return (tuple(shape), dtype, None if strides is None else list(strides))


def mk(t):
    return S(t[0], t[1], t[2])


def select(op, inputs, out, params=None, pref=None):
    return P.select(D(op, inputs, out, params or {}), pref)


def refused(exc, fn, *needles):
    """fn() raises exactly `exc` (not a subclass) and the message contains every needle."""
    with pytest.raises(errors.BaracudaError) as info:
        fn()
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    msg = str(info.value)
    for n in needles:
        assert n in msg, f"{n!r} not in {msg!r}"
    return msg


# ---- select(): refusals ----------------------------------------------------------------------

REFUSALS = [
    # (id, op, inputs, out, params, preference, exception, words the message must contain)
    ("unknown-op", "nope", [T((4, 8), f32)], T((4, 8), f32), {}, None,
     errors.InvalidArgument, ["unknown op", "'nope'"]),
    ("wrong-arity", "silu", [T((4, 8), f32)] * 2, T((4, 8), f32), {}, None,
     errors.InvalidArgument, ["silu", "takes 1 input", "got 2"]),
    ("unknown-param", "elu", [T((4, 8), f32)], T((4, 8), f32), {"beta": 1.0}, None,
     errors.InvalidArgument, ["unknown parameter 'beta'", "alpha"]),
    ("dtype-not-supported", "silu", [T((4, 8), i32)], T((4, 8), i32), {}, None,
     errors.InvalidDType, ["x is int32", "supported:", "float32"]),
    ("fp8-not-supported", "add", [T((8,), bc.float8_e4m3fn)] * 2, T((8,), bc.float8_e4m3fn), {}, None,
     errors.InvalidDType, ["a is float8_e4m3fn", "supported:"]),
    ("mismatched-input-dtypes", "add", [T((4, 8), f32), T((4, 8), f16)], T((4, 8), f32), {}, None,
     errors.InvalidDType, ["b is float16", "a is float32"]),
    ("out-dtype", "silu", [T((4, 8), f32)], T((4, 8), f16), {}, None,
     errors.InvalidDType, ["out must be float32", "float16"]),
    ("compare-out-not-bool", "lt", [T((4, 8), f32)] * 2, T((4, 8), f32), {}, None,
     errors.InvalidDType, ["out must be bool"]),
    ("where-cond-not-bool", "where", [T((4, 8), f32)] * 3, T((4, 8), f32), {}, None,
     errors.InvalidDType, ["cond must be bool", "float32"]),
    ("not-broadcastable", "add", [T((4, 8), f32), T((3, 8), f32)], T((4, 8), f32), {}, None,
     errors.InvalidArgument, ["b of shape (3, 8)", "does not broadcast"]),
    ("wrong-out-shape", "add", [T((4, 8), f32), T((1, 8), f32)], T((4, 7), f32), {}, None,
     errors.InvalidArgument, ["out must have the broadcast shape (4, 8)", "(4, 7)"]),
    ("out-overlaps-itself", "silu", [T((4, 8), f32)], T((4, 8), f32, [0, 1]), {}, None,
     errors.InvalidArgument, ["out has overlapping elements", "(0, 1)"]),
    ("out-overlaps-itself-2", "neg", [T((4, 8), f32)], T((4, 8), f32, [4, 1]), {}, None,
     errors.InvalidArgument, ["out has overlapping elements"]),
    ("rank-above-12", "silu", [T((1,) * 13, f32)], T((1,) * 13, f32), {}, None,
     errors.Unsupported, ["x has rank 13", "12"]),
    ("complex-input", "silu", [T((4, 8), bc.complex64)], T((4, 8), bc.complex64), {}, None,
     errors.Unsupported, ["x is complex64", "complex"]),
    ("complex-cast-target", "cast", [T((4, 8), f32)], T((4, 8), bc.complex128), {}, None,
     errors.Unsupported, ["out is complex128"]),
    ("negative-dim", "silu", [T((4, -8), f32)], T((4, -8), f32), {}, None,
     errors.InvalidArgument, ["x has a negative dimension", "(4, -8)"]),
    ("strides-rank", "silu", [T((4, 8), f32, [1])], T((4, 8), f32), {}, None,
     errors.InvalidArgument, ["x has 1 strides for rank 2"]),
    ("gated-odd-axis", "swiglu", [T((4, 7), f32)], T((4, 3), f32), {}, None,
     errors.InvalidArgument, ["odd size 7", "axis 1"]),
    ("gated-axis-range", "swiglu", [T((4, 8), f32)], T((4, 4), f32), {"axis": 2}, None,
     errors.InvalidArgument, ["axis 2 is out of range"]),
    ("gated-out-shape", "swiglu", [T((4, 8), f32)], T((4, 8), f32), {}, None,
     errors.InvalidArgument, ["out must have shape (4, 4)"]),
    ("wrt-out-of-range", "add_backward", [T((4, 8), f32)] * 3, T((4, 8), f32), {"wrt": 2}, None,
     errors.InvalidArgument, ["wrt must be in [0, 1], got 2"]),
    ("where-wrt-cond", "where_backward", [T((4, 8), f32), T((4, 8), BOOL), T((4, 8), f32), T((4, 8), f32)],
     T((4, 8), f32), {"wrt": 0}, None, errors.InvalidArgument, ["wrt must be in [1, 2], got 0"]),
    ("backward-grad-shape", "mul_backward", [T((4, 7), f32), T((4, 8), f32), T((4, 8), f32)], T((4, 8), f32),
     {"wrt": 0}, None, errors.InvalidArgument, ["grad_out must have shape (4, 8)"]),
    ("backward-out-shape", "mul_backward", [T((4, 8), f32), T((4, 8), f32), T((8,), f32)], T((4, 8), f32),
     {"wrt": 1}, None, errors.InvalidArgument, ["out (the gradient of x1) must have shape (8,)"]),
    ("forbidden-backend", "silu", [T((4, 8), f32)], T((4, 8), f32), {},
     dict(forbid=[bc.Backend.bespoke]), errors.Unsupported, ["bespoke", "forbids"]),
]


@pytest.mark.parametrize("case", REFUSALS, ids=[c[0] for c in REFUSALS])
def test_select_refuses(case):
    _, op, inputs, out, params, pref, exc, needles = case
    pref = bc.PlanPreference(**pref) if pref is not None else None
    refused(exc, lambda: select(op, [mk(t) for t in inputs], mk(out), params, pref), *needles)


def test_refusals_are_builtin_exceptions_too():
    with pytest.raises(ValueError):
        select("add", [S((4, 8), f32), S((3, 8), f32)], S((4, 8), f32))
    with pytest.raises(TypeError):
        select("silu", [S((4, 8), i32)], S((4, 8), i32))
    with pytest.raises(NotImplementedError):
        select("silu", [S((4, 8), bc.complex64)], S((4, 8), bc.complex64))


# Broadcast gradients that a plan may split over blocks (partial sums in a workspace): the
# bias-gradient shapes. Which of them need a workspace is the plan's decision.
BIAS_GRADS = [((1 << 16, 64), (64,)), ((1 << 14, 256), (256,)), ((1 << 16, 8), (8,)), ((4096, 512), (512,))]


def _bias_grad(full, part, dt=bf16, pref=None):
    return select("add_backward", [S(full, dt), S(full, dt), S(part, dt)], S(part, dt), {"wrt": 1}, pref)


def test_workspace_limit_is_honoured():
    # A workspace limit never makes a broadcast gradient unselectable: the plan splits its
    # reduction less (or not at all, needing no workspace) to fit.
    for full, part in BIAS_GRADS:
        free = _bias_grad(full, part)
        for limit in (0, 256, 4096):
            plan = _bias_grad(full, part, pref=bc.PlanPreference(workspace_limit=limit))
            assert plan.workspace_bytes() <= limit
            assert plan.workspace_bytes() <= free.workspace_bytes()
            assert plan.sku.precision.accumulator_dtype == f32


def test_other_backends_may_be_forbidden():
    plan = select("silu", [S((4, 8), f32)], S((4, 8), f32),
                  pref=bc.PlanPreference(forbid=[bc.Backend.cublaslt, bc.Backend.cudnn], require_deterministic=True))
    assert plan.sku.backend == bc.Backend.bespoke


# ---- select(): decisions and SKU contents ---------------------------------------------------

def test_sku_contents_contiguous():
    plan = select("silu", [S((4, 8), bf16)], S((4, 8), bf16))
    k = plan.sku
    assert k.name == "ew.unary.contiguous"
    assert k.category == "elementwise"
    assert k.op == "silu"
    assert k.layout == "contiguous"
    assert k.dtypes == [bf16, bf16]  # output first
    assert k.backend == bc.Backend.bespoke
    assert k.arch.startswith(("sm_", "compute_"))
    archs = bc.build_info()["cuda_archs"].split(",")
    # CMake's "90-virtual" (PTX only, CI's host-test build) is reported as compute_90
    assert k.arch.split(",") == [f"compute_{a[:-8]}" if a.endswith("-virtual") else f"sm_{a.removesuffix('-real')}"
                                 for a in archs]
    pg = k.precision
    assert pg.deterministic and pg.bit_stable
    assert pg.compute_dtype == f32 and pg.accumulator_dtype == f32
    assert "bfloat16" in pg.math
    assert plan.workspace_bytes() == 0
    assert plan.descriptor == D("silu", [S((4, 8), bf16)], S((4, 8), bf16))
    assert "ew.unary.contiguous" in repr(k)


@pytest.mark.parametrize("op,inputs,out,layout", [
    ("silu", [T((4, 8), f32)], T((4, 8), f32), "contiguous"),
    ("silu", [T((4, 8), f32, [1, 4])], T((4, 8), f32), "transposed_tiled"),    # transposed input
    ("cast", [T((4, 8), f32, [1, 4])], T((4, 8), f16), "transposed_tiled"),
    ("silu", [T((4, 8), f32, [1, 4])], T((4, 8), f32, [1, 4]), "contiguous"),  # same permutation everywhere
    ("silu", [T((4, 8), f32, [16, 1])], T((4, 8), f32), "inner_contiguous"),   # row padding
    ("silu", [T((4, 8), f32, [-8, 1])], T((4, 8), f32), "inner_contiguous"),   # negative row stride
    ("silu", [T((4, 8), f32, [8, -1])], T((4, 8), f32), "strided"),            # reversed rows
    ("silu", [T((4, 4), f32, [8, 2])], T((4, 4), f32), "strided"),             # inner stride 2
    ("silu", [T((4, 1, 8), f32, [8, 99, 1])], T((4, 1, 8), f32), "contiguous"),  # size-1 dim's stride ignored
    ("silu", [T((0, 8), f32)], T((0, 8), f32), "contiguous"),
    ("add", [T((4, 8), f32), T((4, 8), f32)], T((4, 8), f32), "contiguous"),
    ("add", [T((4, 8), f32), T((8,), f32)], T((4, 8), f32), "inner_contiguous"),    # broadcast row
    ("add", [T((4, 8), f32), T((4, 1), f32)], T((4, 8), f32), "inner_contiguous"),  # broadcast column
    ("add", [T((4, 8), f32, [1, 4]), T((8,), f32)], T((4, 8), f32), "strided"),     # transposed + broadcast
    ("add", [T((4, 8), f32), T((), f32)], T((4, 8), f32), "contiguous"),      # one broadcast element
    ("add", [T((4, 8), f32), T((1, 1), f32)], T((4, 8), f32), "contiguous"),
    ("where", [T((4, 8), BOOL), T((4, 8), f32), T((), f32)], T((4, 8), f32), "contiguous"),
    ("swiglu", [T((4, 8), f32)], T((4, 4), f32), "inner_contiguous"),         # halves of each row
    ("fill", [], T((4, 8), f32, [1, 4]), "contiguous"),
    ("fill", [], T((4, 8), f32, [16, 1]), "inner_contiguous"),
    ("fill", [], T((4, 8), f32, [2, 8]), "strided"),
])
def test_layout_decision(op, inputs, out, layout):
    plan = select(op, [mk(t) for t in inputs], mk(out))
    assert plan.sku.layout == layout
    assert plan.sku.name == f"ew.{OPS[op]['category']}.{layout}"


def test_tensors_past_2_to_the_31_elements():
    # Shapes, strides and offsets are int64: a 2^32-element view selects like any other
    # (select allocates nothing). Non-contiguous launches that large run as pieces under 2^31
    # elements, each on the kernel its layout takes (the GPU test checks the values).
    big = (1 << 16, 1 << 16)
    assert select("silu", [S(big, bf16)], S(big, bf16)).sku.layout == "contiguous"
    k = select("add", [S(big, bf16), S((1 << 16,), bf16)], S(big, bf16)).sku
    assert k.layout == "inner_contiguous"
    assert select("silu", [S(big, f32, [1, 1 << 16])], S(big, f32)).sku.layout == "transposed_tiled"
    assert select("silu", [S(big, f32, [1 << 17, 2])], S(big, f32)).sku.layout == "strided"
    # A dim cut into chunks (2^29-element inner blocks, 4 of them per outer index), one of one index.
    k = select("add", [S((2, 4, 1 << 29), bc.int8), S((2, 1, 1 << 29), bc.int8)], S((2, 4, 1 << 29), bc.int8)).sku
    assert k.layout == "inner_contiguous"


def test_gated_halves_along_axis_0_are_contiguous():
    plan = select("swiglu", [S((2, 6), f32)], S((1, 6), f32), {"axis": 0})
    assert plan.sku.layout == "contiguous"


def test_sku_dtypes_output_first():
    assert select("lt", [S((3,), f16)] * 2, S((3,), BOOL)).sku.dtypes == [BOOL, f16, f16]
    assert select("cast", [S((3,), f32)], S((3,), bc.float8_e5m2)).sku.dtypes == [bc.float8_e5m2, f32]
    assert select("fill", [], S((3,), bc.int64)).sku.dtypes == [bc.int64]
    assert select("where", [S((3,), BOOL), S((3,), f64), S((3,), f64)], S((3,), f64)).sku.dtypes == [f64, BOOL, f64, f64]


def test_precision_compute_dtypes():
    assert select("silu", [S((4,), f16)], S((4,), f16)).sku.precision.compute_dtype == f32
    assert select("silu", [S((4,), f64)], S((4,), f64)).sku.precision.compute_dtype == f64
    assert select("add", [S((4,), i32)] * 2, S((4,), i32)).sku.precision.compute_dtype == i32


def test_broadcast_backward_sums_in_f32():
    # bf16 gradient of a broadcast operand: the per-element gradient is mapped and summed in f32
    # (a map-reduce plan), in a fixed order.
    plan = select("add_backward", [S((4, 8), bf16), S((4, 8), bf16), S((8,), bf16)], S((8,), bf16), {"wrt": 1})
    k = plan.sku
    assert k.layout in ("reduce_rows", "reduce_columns")
    assert k.name == f"ew.binary_backward.{k.layout}"
    assert k.precision.accumulator_dtype == f32
    assert k.precision.compute_dtype == f32
    assert k.precision.deterministic and k.precision.bit_stable
    assert "summed in float32" in k.precision.math
    assert plan.workspace_bytes() % 256 == 0
    # f64 accumulates in f64; a (N, 1) column operand is reduced too.
    plan64 = select("mul_backward", [S((4, 8), f64), S((4, 1), f64), S((4, 8), f64)], S((4, 1), f64), {"wrt": 0})
    assert plan64.sku.layout in ("reduce_rows", "reduce_columns")
    assert plan64.sku.precision.accumulator_dtype == f64
    # where's gradient w.r.t. a broadcast b, and the empty product (gradient = zeros).
    wb = select("where_backward", [S((4, 8), f32), S((4, 8), BOOL), S((4, 8), f32), S((8,), f32)], S((8,), f32),
                {"wrt": 2})
    assert wb.sku.layout in ("reduce_rows", "reduce_columns")
    empty = select("add_backward", [S((0, 8), f32), S((0, 8), f32), S((8,), f32)], S((8,), f32), {"wrt": 1})
    assert empty.workspace_bytes() == 0


def test_broadcast_gradient_layouts():
    # A bias gradient keeps the innermost dim (columns); an (M, 1) gradient sums rows.
    assert _bias_grad((4, 8), (8,)).sku.layout == "reduce_columns"
    assert _bias_grad((4096, 512), (4096, 1)).sku.layout == "reduce_rows"
    # Many rows over few columns: the plan splits the rows over blocks, with partial sums in a
    # workspace; a zero workspace limit keeps one split and the same kernel.
    many = _bias_grad((1 << 16, 64), (64,))
    assert many.sku.layout == "reduce_columns" and many.workspace_bytes() > 0
    capped = _bias_grad((1 << 16, 64), (64,), pref=bc.PlanPreference(workspace_limit=0))
    assert capped.sku.layout == "reduce_columns" and capped.workspace_bytes() == 0


def test_workspace_only_for_split_broadcast_gradients():
    # Elementwise plans need no workspace except a broadcast gradient split over blocks.
    full = select("add_backward", [S((4, 8), bf16), S((4, 8), bf16), S((8,), bf16)], S((4, 8), bf16), {"wrt": 0})
    assert full.workspace_bytes() == 0
    assert "reduce" not in full.sku.name
    assert full.sku.precision.accumulator_dtype == full.sku.precision.compute_dtype == f32
    assert select("silu", [S((1 << 20,), bf16)], S((1 << 20,), bf16)).workspace_bytes() == 0
    assert select("silu_backward", [S((4, 8), bf16)] * 2, S((4, 8), bf16)).workspace_bytes() == 0
    assert select("swiglu_backward", [S((4, 4), bf16), S((4, 8), bf16)], S((4, 8), bf16)).workspace_bytes() == 0
    assert select("where_backward", [S((4, 8), f32), S((4, 8), BOOL), S((4, 8), f32), S((4, 8), f32)],
                  S((4, 8), f32), {"wrt": 2}).workspace_bytes() == 0
    for full_shape, part in BIAS_GRADS:
        plan = _bias_grad(full_shape, part)
        if plan.workspace_bytes() > 0:
            assert plan.sku.layout == "reduce_columns"


def _valid_descriptor(row, dt):
    """A minimal descriptor for op `row` whose data operand has dtype `dt`."""
    name, cat = row["name"], row["category"]
    x, h = (4, 8), (4, 4)
    params = {}
    if cat == "fill":
        return D(name, [], S(x, dt)), []
    if cat == "cast":
        return D(name, [S(x, dt)], S(x, f32)), []
    if cat in ("unary", "predicate", "binary", "compare"):
        ins = [S(x, dt)] * row["arity"]
        return D(name, ins, S(x, BOOL if cat in ("predicate", "compare") else dt)), []
    if cat == "ternary":
        ins = [S(x, BOOL), S(x, dt), S(x, dt)] if name == "where" else [S(x, dt)] * 3
        return D(name, ins, S(x, dt)), []
    if cat == "gated":
        return D(name, [S(x, dt)], S(h, dt)), []
    if cat == "gated_backward":
        return D(name, [S(h, dt), S(x, dt)], S(x, dt)), []
    if cat == "unary_backward":
        return D(name, [S(x, dt), S(x, dt)], S(x, dt)), []
    if cat == "binary_backward":
        return D(name, [S(x, dt)] * 3, S(x, dt), {"wrt": 1}), []
    if cat == "ternary_backward":
        if name == "where_backward":
            return D(name, [S(x, dt), S(x, BOOL), S(x, dt), S(x, dt)], S(x, dt), {"wrt": 2}), []
        return D(name, [S(x, dt)] * 4, S(x, dt), {"wrt": 2}), []
    raise AssertionError(f"unknown category {cat}")


def test_every_listed_dtype_selects_and_every_other_is_refused():
    """The op table tells the truth: select() accepts exactly the dtypes each op lists."""
    for row in OPS.values():
        for dt in REAL_DTYPES:
            desc, _ = _valid_descriptor(row, dt)
            if dt in row["dtypes"]:
                plan = P.select(desc)
                assert plan.sku.op == row["name"]
                assert plan.sku.category == "elementwise"
                assert plan.sku.backend == bc.Backend.bespoke
                assert plan.sku.precision.deterministic
                assert plan.sku.dtypes == [desc.out.dtype] + [s.dtype for s in desc.inputs]
            else:
                with pytest.raises(errors.InvalidDType, match="supported:"):
                    P.select(desc)


def test_cast_covers_every_pair():
    cast = OPS["cast"]["dtypes"]
    for src in cast:
        for dst in cast:
            k = select("cast", [S((5,), src)], S((5,), dst)).sku
            assert k.dtypes == [dst, src]


def test_params_take_defaults_and_overrides():
    assert OPS["elu"]["params"] == [("alpha", 1.0)]
    assert OPS["hardtanh"]["params"] == [("min_val", -1.0), ("max_val", 1.0)]
    select("elu", [S((4,), f32)], S((4,), f32), {"alpha": 0.5})
    select("hardtanh", [S((4,), f32)], S((4,), f32), {"max_val": 6.0})


# ---- descriptors are values ------------------------------------------------------------------

def test_descriptors_hashable_and_equal_when_equal():
    a = D("add", [S((4, 8), f32), S((8,), f32)], S((4, 8), f32), {"alpha": 2.0})
    b = D("add", [S((4, 8), f32), S((8,), f32)], S((4, 8), f32), {"alpha": 2.0})
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    cache = {a: "plan"}
    assert cache[b] == "plan"
    assert a != D("add", [S((4, 8), f32), S((8,), f32)], S((4, 8), f32), {"alpha": 3.0})
    assert a != D("sub", [S((4, 8), f32), S((8,), f32)], S((4, 8), f32), {"alpha": 2.0})
    assert a != D("add", [S((4, 8), f16), S((8,), f16)], S((4, 8), f16), {"alpha": 2.0})
    assert a != D("add", [S((4, 8), f32, [1, 4]), S((8,), f32)], S((4, 8), f32), {"alpha": 2.0})


def test_tensor_spec_value_semantics():
    assert S((4, 8), f32) == S((4, 8), f32, [8, 1])  # explicit row-major strides == default
    assert hash(S((4, 8), f32)) == hash(S((4, 8), f32, [8, 1]))
    assert S((4, 8), f32) != S((4, 8), f32, [1, 4])
    assert S((4, 8), f32) != S((4, 8), f16)
    s = S([2, 3, 4], bf16)
    assert s.shape == [2, 3, 4] and s.dtype == bf16 and s.strides == [12, 4, 1]
    assert "bfloat16" in repr(s)


def test_descriptor_fields():
    d = D("elu", [S((4,), f32)], S((4,), f32), {"alpha": 0.5})
    assert d.op == "elu" and d.params == {"alpha": 0.5}
    assert d.inputs == [S((4,), f32)] and d.out == S((4,), f32)
    assert "elu" in repr(d)


def test_plan_preference_defaults():
    p = bc.PlanPreference()
    assert p.prefer == [] and p.forbid == []
    assert not p.require_deterministic and not p.allow_tf32
    assert p.workspace_limit == -1


# ---- DLPack: what run() refuses before touching the device -----------------------------------

from _fake import FakeTensor  # noqa: E402


MiB = 1 << 20
OUT, IN0, IN1, IN2, WS = (0x7F0000000000 + k * 64 * MiB for k in range(5))


@pytest.fixture(scope="module")
def silu_plan():
    return select("silu", [S((4, 8), f32)], S((4, 8), f32))


def test_run_refuses_cpu_output(silu_plan):
    x = np.zeros((4, 8), np.float32)
    refused(errors.InvalidArgument, lambda: silu_plan.run(x, FakeTensor((4, 8), addr=IN0)), "out",
            "expected a CUDA tensor, got a CPU tensor")
    # inputs are imported first: with both on the CPU the input is named, not the output
    refused(errors.InvalidArgument, lambda: silu_plan.run(x, x), "x: expected a CUDA tensor, got a CPU tensor")


def test_run_refuses_cpu_input(silu_plan):
    x = np.zeros((4, 8), np.float32)
    refused(errors.InvalidArgument, lambda: silu_plan.run(FakeTensor((4, 8), addr=OUT), x),
            "x", "expected a CUDA tensor, got a CPU tensor")


def test_run_refuses_pinned_host_input(silu_plan):
    refused(errors.InvalidArgument,
            lambda: silu_plan.run(FakeTensor((4, 8), addr=OUT), FakeTensor((4, 8), addr=IN0, device_type=3)),
            "x", "pinned host tensor")


def test_run_refuses_non_tensors(silu_plan):
    refused(errors.InvalidArgument, lambda: silu_plan.run([1.0] * 32, FakeTensor((4, 8), addr=IN0)),
            "out", "DLPack", "list")
    refused(errors.InvalidArgument, lambda: silu_plan.run(FakeTensor((4, 8), addr=OUT), "x"),
            "x", "DLPack", "str")


def test_run_refuses_read_only_output(silu_plan):
    y = np.zeros((4, 8), np.float32)
    y.flags.writeable = False
    refused(errors.InvalidArgument, lambda: silu_plan.run(y, FakeTensor((4, 8), addr=IN0)), "out", "read-only")


@pytest.mark.parametrize("bad,needles,exc", [
    (dict(shape=(4, 9)), ["x has shape (4, 9)", "selected for (4, 8)"], errors.InvalidArgument),
    (dict(shape=(4, 8), dtype=f64), ["x is float64", "selected for float32"], errors.InvalidDType),
    (dict(shape=(4, 8), strides=[1, 4]), ["x has strides (1, 4)", "(8, 1)"], errors.InvalidArgument),
    (dict(shape=(4, 8), device=1), ["x is on cuda:1", "out is on cuda:0"], errors.InvalidArgument),
    (dict(shape=(4, 8), code_bits=(1, 16)), ["x", "no baracuda equivalent"], errors.InvalidDType),
    (dict(shape=(4, 8), lanes=2), ["x", "lanes"], errors.Unsupported),
    (dict(shape=(1,) * 13), ["x", "rank 13"], errors.Unsupported),
])
def test_run_checks_tensors_against_the_plan(silu_plan, bad, needles, exc):
    refused(exc, lambda: silu_plan.run(FakeTensor((4, 8), addr=OUT), FakeTensor(addr=IN0, **bad)), *needles)


def test_run_refuses_wrong_input_count(silu_plan):
    refused(errors.InvalidArgument,
            lambda: silu_plan.run(FakeTensor((4, 8), addr=OUT), FakeTensor((4, 8), addr=IN0),
                                  FakeTensor((4, 8), addr=IN1)),
            "silu", "run() got 2 inputs", "takes 1")


def test_run_refuses_partial_overlap(silu_plan):
    refused(errors.InvalidArgument,
            lambda: silu_plan.run(FakeTensor((4, 8), addr=OUT), FakeTensor((4, 8), addr=OUT + 4)),
            "out overlaps x", "in-place")


def test_run_refuses_gated_in_place():
    plan = select("swiglu", [S((4, 8), f32)], S((4, 4), f32))
    refused(errors.InvalidArgument,
            lambda: plan.run(FakeTensor((4, 4), addr=OUT), FakeTensor((4, 8), addr=OUT)), "out overlaps x")


def test_run_checks_the_workspace():
    plan = next((p for p in (_bias_grad(f, b, f32) for f, b in BIAS_GRADS) if p.workspace_bytes() > 0), None)
    if plan is None:
        pytest.skip("no elementwise plan of this build needs a workspace (no split broadcast gradient)")
    need = plan.workspace_bytes()
    full, part = plan.descriptor.inputs[0].shape, plan.descriptor.out.shape
    args = (FakeTensor(part, addr=OUT), FakeTensor(full, addr=IN0), FakeTensor(full, addr=IN1),
            FakeTensor(part, addr=IN2))
    refused(errors.InvalidArgument, lambda: plan.run(*args), "workspace", f"needs {need} bytes, got 0")
    small = FakeTensor((need - 1,), dtype=bc.uint8, addr=WS)
    refused(errors.InvalidArgument, lambda: plan.run(*args, workspace=small), "workspace", f"got {need - 1}")
    unaligned = FakeTensor((2 * need,), dtype=bc.uint8, addr=WS + 16)
    refused(errors.InvalidArgument, lambda: plan.run(*args, workspace=unaligned), "256-byte aligned")
    overlapping = FakeTensor((need,), dtype=bc.uint8, addr=IN0)
    refused(errors.InvalidArgument, lambda: plan.run(*args, workspace=overlapping), "workspace overlaps grad_out")


def test_run_refuses_aliasing_in_a_broadcast_gradient():
    plan = select("add_backward", [S((4, 8), f32), S((4, 8), f32), S((8,), f32)], S((8,), f32), {"wrt": 1})
    refused(errors.InvalidArgument,
            lambda: plan.run(FakeTensor((8,), addr=IN2), FakeTensor((4, 8), addr=IN0), FakeTensor((4, 8), addr=IN1),
                             FakeTensor((8,), addr=IN2)),
            "out overlaps x1")


def test_run_refuses_bad_stream(silu_plan):
    refused(errors.InvalidArgument,
            lambda: silu_plan.run(FakeTensor((4, 8), addr=OUT), FakeTensor((4, 8), addr=IN0), stream="s"),
            "stream", "str")


def test_every_plan_runs_operands_by_name():
    """The plans whose run() took its operands by position (elementwise, reduction, softmax, scan) take
    them by name too, as every plan's run does: the names of the op's functional form, an empty run
    completing, and what run() takes in the error for an unknown keyword or a mix of the two forms."""
    ew = select("add", [S((0, 8), f32), S((0, 8), f32)], S((0, 8), f32))
    ew.run(out=FakeTensor((0, 8), addr=OUT), a=FakeTensor((0, 8), addr=IN0), b=FakeTensor((0, 8), addr=IN1))
    silu = select("silu", [S((4, 8), f32)], S((4, 8), f32))
    out, x = FakeTensor((4, 8), addr=OUT), FakeTensor((4, 8), addr=IN0)
    refused(errors.InvalidArgument, lambda: silu.run(out=out, y=x), "unknown keyword 'y'", "takes out=, x=,")
    refused(errors.InvalidArgument, lambda: silu.run(out, x=x), "by position and 'x' by name")
    refused(errors.InvalidArgument, lambda: silu.run(out=out), "x: expected a CUDA tensor, got None")
    cpu = np.zeros((4, 8), np.float32)
    red = bc.ReductionPlan.select(bc.ReductionDescriptor("sum", S((4, 8), f32), S((4,), f32), axes=[1]))
    refused(errors.InvalidArgument, lambda: red.run(out=cpu[:, 0], x=x), "out: expected a CUDA tensor")
    refused(errors.InvalidArgument, lambda: red.run(out=out, input=x), "unknown keyword 'input'", "x=")
    sm = bc.SoftmaxPlan.select(bc.SoftmaxDescriptor("softmax", [S((4, 8), f32)], -1, S((4, 8), f32)))
    refused(errors.InvalidArgument, lambda: sm.run(out=cpu, x=x), "out: expected a CUDA tensor")
    smb = bc.SoftmaxPlan.select(bc.SoftmaxDescriptor("softmax_backward", [S((4, 8), f32), S((4, 8), f32)], -1,
                                                     S((4, 8), f32)))
    refused(errors.InvalidArgument, lambda: smb.run(grad_x=out, grad_out=x, y=cpu), "y: expected a CUDA tensor")
    refused(errors.InvalidArgument, lambda: sm.run(out=out, x=x, workspace=x), "takes no workspace")
    gumbel = bc.SoftmaxPlan.select(bc.SoftmaxDescriptor("gumbel_softmax", [S((0, 8), f32)], -1, S((0, 8), f32)))
    empty_out, empty_x = FakeTensor((0, 8), addr=OUT), FakeTensor((0, 8), addr=IN0)
    gumbel.run(out=empty_out, x=empty_x, seed=np.int64(3), offset=1)  # any integer type
    for bad in (2.5, -1, "7"):
        refused(errors.InvalidArgument, lambda: gumbel.run(out=empty_out, x=empty_x, seed=bad), "seed must be an int")
    refused(errors.InvalidArgument, lambda: gumbel.run(empty_out, empty_x, seed=1, offset=-2), "offset must be an int")
    scan = bc.ScanPlan.select(bc.ScanDescriptor("cumsum", [S((4, 8), f32)], [S((4, 8), f32)], 1))
    refused(errors.InvalidArgument, lambda: scan.run(out=out, x=cpu), "x: expected a CUDA tensor")
    refused(errors.InvalidArgument, lambda: scan.run(out=out, y=x), "unknown keyword 'y'", "out=, x=")


def test_run_of_an_empty_tensor_launches_nothing():
    plan = select("silu", [S((0, 8), f32)], S((0, 8), f32))
    plan.run(FakeTensor((0, 8), addr=OUT), FakeTensor((0, 8), addr=IN0))


# ---- functional API --------------------------------------------------------------------------

def test_functional_refuses_cpu_and_non_tensors():
    x = np.zeros((4, 8), np.float32)
    refused(errors.InvalidArgument, lambda: bc.silu(x), "CPU")
    refused(errors.InvalidArgument, lambda: bc.add(1.0, 2.0), "add", "CUDA tensor")
    with pytest.raises(TypeError, match="beta"):  # a real signature: Python names the stray keyword
        bc.silu(x, beta=1.0)
    with pytest.raises(TypeError, match="'b'"):
        bc.add(x)
    refused(errors.InvalidArgument, lambda: bc.mul(x, x), "mul", "argument 0", "numpy")


class _BareDLPack:  # speaks DLPack but has no .shape / .dtype
    def __dlpack__(self, **kwargs):
        raise AssertionError("must be refused before any import")

    def __dlpack_device__(self):
        return (2, 0)


def test_functional_refuses_objects_without_shape_and_dtype():
    refused(errors.InvalidArgument, lambda: bc.exp(_BareDLPack()), "exp", "argument 0", "_BareDLPack", ".shape")


def test_every_op_has_a_documented_function():
    for name, row in OPS.items():
        fn = getattr(bc, name, None)
        assert callable(fn), f"baracuda.{name} is missing"
        assert fn.__name__ == name
        assert fn.__doc__ and fn.__doc__.strip(), f"baracuda.{name} has no docstring"
        if name not in ("cast", "fill"):  # generated from the table: signature line first
            assert fn.__doc__.startswith(name + "("), fn.__doc__
    for name in ("cast", "fill", "full_like"):
        assert callable(getattr(bc, name)) and getattr(bc, name).__doc__


def test_classes_have_docstrings():
    for cls in (bc.ElementwiseDescriptor, bc.ElementwisePlan, bc.TensorSpec, bc.KernelSku,
                bc.PrecisionGuarantee, bc.PlanPreference, bc.DType, bc.Backend):
        assert cls.__doc__, cls.__name__
    assert bc.ElementwisePlan.select.__doc__ and bc.ElementwisePlan.run.__doc__


def test_broadcast_shape():
    assert bc.broadcast_shape((4, 1), (8,)) == (4, 8)
    assert bc.broadcast_shape((), (3,)) == (3,)
    with pytest.raises(errors.InvalidArgument):
        bc.broadcast_shape((4, 8), (3, 8))


# ---- dtypes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("src,want", [
    ("bf16", bc.bfloat16), ("bfloat16", bc.bfloat16), ("float32", f32), ("f32", f32), ("half", f16),
    ("double", f64), ("int64", bc.int64), ("bool", BOOL), ("e4m3", bc.float8_e4m3fn),
    ("float8_e5m2", bc.float8_e5m2), ("uint32", bc.uint32), ("complex64", bc.complex64),
    (np.float16, f16), (np.float32, f32), (np.float64, f64), (np.int8, bc.int8), (np.uint8, bc.uint8),
    (np.int16, bc.int16), (np.int32, i32), (np.int64, bc.int64), (np.uint32, bc.uint32), (np.bool_, BOOL),
    (np.dtype("float32"), f32), (np.dtype("<i8"), bc.int64), (np.complex128, bc.complex128),
    (bc.bfloat16, bc.bfloat16),
])
def test_dtype_conversion(src, want):
    assert bc.dtype(src) == want


@pytest.mark.parametrize("src", ["quux", np.uint16, np.float128 if hasattr(np, "float128") else "float128", 3])
def test_dtype_conversion_refused(src):
    refused(errors.InvalidDType, lambda: bc.dtype(src), "dtype", "cannot convert")


def test_dtype_conversion_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert bc.dtype(ml_dtypes.bfloat16) == bc.bfloat16
    assert bc.dtype(ml_dtypes.float8_e4m3fn) == bc.float8_e4m3fn
    assert bc.dtype(ml_dtypes.float8_e5m2) == bc.float8_e5m2


def test_dtype_conversion_torch():
    torch = pytest.importorskip("torch")
    assert bc.dtype(torch.bfloat16) == bc.bfloat16
    assert bc.dtype(torch.float16) == f16
    assert bc.dtype(torch.int64) == bc.int64
    assert bc.dtype(torch.bool) == BOOL


def test_dtype_sizes():
    sizes = {BOOL: 1, bc.int8: 1, bc.uint8: 1, bc.int16: 2, i32: 4, bc.int64: 8, bc.uint32: 4, f16: 2, bf16: 2,
             f32: 4, f64: 8, bc.float8_e4m3fn: 1, bc.float8_e5m2: 1, bc.complex64: 8, bc.complex128: 16}
    assert set(sizes) == set(bc.DType.__members__.values())
    for d, n in sizes.items():
        assert bc._C.dtype_size(d) == n


# ---- errors ----------------------------------------------------------------------------------

def test_error_hierarchy():
    assert issubclass(errors.InvalidArgument, errors.BaracudaError)
    assert issubclass(errors.InvalidArgument, ValueError)
    assert issubclass(errors.InvalidDType, errors.InvalidArgument)
    assert issubclass(errors.InvalidDType, TypeError)
    assert issubclass(errors.Unsupported, NotImplementedError)
    assert issubclass(errors.CudaError, RuntimeError)
    assert issubclass(errors.OutOfMemory, MemoryError)
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.BaracudaError)
    assert bc.errors is errors


# ---- registry, build facts, CLI --------------------------------------------------------------

def test_features_default_build():
    f = bc.features()
    assert set(f) == {"cudnn", "cutlass", "nccl", "fa2", "marlin", "mamba", "sweep_kernels", "xla_ffi"}
    # xla_ffi: on where jaxlib's headers were found at build time; cudnn and cutlass (AUTO): where their
    # headers were (.ci/run fetches them; cutlass also needs a 90 arch)
    toggles = {k: v for k, v in f.items() if k not in ("xla_ffi", "cudnn", "cutlass")}
    assert isinstance(f["cudnn"], bool) and isinstance(f["xla_ffi"], bool) and isinstance(f["cutlass"], bool)
    # our flash-attention kernels are on by default; NCCL and the unbuilt families are off
    assert toggles == {"nccl": False, "fa2": True, "marlin": False, "mamba": False, "sweep_kernels": False}, f


def test_build_info():
    info = bc.build_info()
    assert info["version"] == bc.__version__ == importlib.metadata.version("baracuda")
    assert info["cuda_archs"] and all(a.strip().removesuffix("-virtual").removesuffix("-real").rstrip("a").isdigit()
                                      for a in info["cuda_archs"].split(","))
    assert info["cuda_runtime_version"] >= 12000
    assert {**info["features"], "xla_ffi": bc.features()["xla_ffi"]} == bc.features()


def test_devices_without_gpu_is_empty_not_an_error():
    devs = bc.devices()
    assert isinstance(devs, list)
    if not devs:
        assert bc._C.device_probe_message()
    for d in devs:
        assert {"ordinal", "name", "sm", "multiprocessors", "total_memory"} <= set(d)


def test_registry_matches_op_table():
    fams = bc.families()
    names = [f["name"] for f in fams]
    assert names[0] == "elementwise" and len(set(names)) == len(names)
    assert {"gemm", "softmax", "loss", "norm", "reduction"} <= set(names)
    for f in fams:
        assert f["plan"].endswith("Plan") and f["summary"] and f["ops"], f["name"]
    ew = fams[0]
    assert ew["plan"] == "ElementwisePlan" and ew["summary"]
    forward = {r["name"]: r for r in OPS.values() if not r["category"].endswith("_backward")}
    assert {o["op"] for o in ew["ops"]} == set(forward)
    for o in ew["ops"]:
        row = forward[o["op"]]
        assert o["kind"] == row["category"]
        assert o["dtypes"] == row["dtypes"]
        assert o["backward"] == bool(row["backward"])
        assert o["backend"] == bc.Backend.bespoke
        assert set(o["layouts"]) == {"contiguous", "strided"}
    for row in OPS.values():
        if row["backward"]:
            assert row["backward"] in OPS, f"{row['name']}: backward {row['backward']} is not in the table"
        assert len(row["params"]) <= 4


def test_op_table_covers_the_issue_scope():
    names = set(OPS)
    for op in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "relu", "gelu", "gelu_tanh", "silu", "mish",
               "sigmoid", "softplus", "hardswish", "elu", "leaky_relu", "hardtanh", "threshold", "pow_scalar",
               "affine", "add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2", "remainder",
               "floor_divide", "fmod", "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or",
               "bitwise_xor", "logical_and", "logical_or", "logical_xor", "logical_not", "where", "clamp", "lerp",
               "addcmul", "addcdiv", "fma", "cast", "fill", "swiglu", "geglu", "reglu", "glu"):
        assert op in names, op
    assert sum(1 for r in OPS.values() if r["category"] == "unary") >= 50


def test_cli_reports_build_and_families():
    r = subprocess.run([sys.executable, "-m", "baracuda"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert f"baracuda {bc.__version__}" in out
    assert "elementwise" in out and "ElementwisePlan" in out
    assert "features" in out and ("cudnn=off" in out or "cudnn=on" in out) and "nccl=off" in out
    assert "sm_" in out or "compute_" in out
    assert "libraries     cuBLASLt" in out and "cuBLAS" in out
    if not bc.devices():
        assert "devices       none" in out


def test_get_include_and_library_dir():
    import pathlib

    assert (pathlib.Path(bc.get_include()) / "baracuda" / "elementwise.h").is_file()
    assert any(p.name == "libbaracuda.so" for p in pathlib.Path(bc.get_library_dir()).iterdir())


def test_run_checks_the_workspace_layout_and_device():
    # run() sees the workspace as one block of bytes: a strided or broadcast tensor, or one on
    # another device than the operands, is refused when the bindings import it.
    plan = bc.ReductionPlan.select(bc.ReductionDescriptor("sum", S((1 << 24,), f32), S((), f32), [0]))
    need = plan.workspace_bytes()
    assert need > 0
    x, out = FakeTensor((1 << 24,), addr=IN0), FakeTensor((), addr=OUT)
    for bad in (FakeTensor((need,), dtype=bc.uint8, strides=[0], addr=WS),
                FakeTensor((need,), dtype=bc.uint8, strides=[2], addr=WS)):
        refused(errors.InvalidArgument, lambda: plan.run(out, x, workspace=bad), "workspace: expected a contiguous")
    refused(errors.InvalidArgument, lambda: plan.run(out, x, workspace=FakeTensor((need,), dtype=bc.uint8, addr=WS,
                                                                                    device=1)),
            "workspace: is on cuda:1 but the operands are on cuda:0")


def test_run_refuses_a_pointer_inside_an_element(silu_plan):
    # a DLPack view that starts mid-element (a byte offset into another dtype's buffer)
    refused(errors.InvalidArgument, lambda: silu_plan.run(FakeTensor((4, 8), addr=OUT), FakeTensor((4, 8), addr=IN0 + 2)),
            "x: its data pointer is not aligned to its 4-byte elements")


def test_scalars_that_integer_data_would_mangle_are_refused():
    # a fill or alpha is converted to the integer dtype: 2.5, 300 into int8 or 0.5 are refused
    for dt, value in ((bc.int32, 2.5), (bc.int8, 300.0), (bc.uint8, -1.0), (bc.int32, float("nan"))):
        refused(errors.InvalidArgument, lambda: select("fill", [], S((4, 8), dt), {"value": value}), "fill: value",
                "not a whole number in the range of")
    assert select("fill", [], S((4, 8), bc.int8), {"value": -128.0})
    assert select("fill", [], S((4, 8), f32), {"value": 2.5})
    refused(errors.InvalidArgument, lambda: select("add", [S((4, 8), i32)] * 2, S((4, 8), i32), {"alpha": 0.5}),
            "add: alpha")
    assert select("add", [S((4, 8), f32)] * 2, S((4, 8), f32), {"alpha": 0.5})


def test_index_parameters_must_be_whole_numbers():
    refused(errors.InvalidArgument, lambda: select("swiglu", [S((4, 8), f32)], S((4, 4), f32), {"axis": 0.5}),
            "axis must be a whole number")


def test_broadcast_gradients_larger_than_one_grid_are_refused():
    # grad_out expanded (stride 0) over 2^32 + 1 outputs: more blocks than one launch has
    k = (1 << 32) + 1
    g, a = S((4096, k), f16, [0, 0]), S((4096, 1), f16)
    refused(errors.Unsupported, lambda: select("add_backward", [g, a, S((k,), f16)], S((k,), f16), {"wrt": 1}),
            "outputs, more than one launch")
    # and logical sizes past int64
    huge = S((4, 1 << 62), f16, [0, 0])
    refused(errors.Unsupported, lambda: select("add_backward", [huge, S((1, 1 << 62), f16, [0, 0]), S((4, 1), f16)],
                                               S((4, 1), f16), {"wrt": 1}), "more than 2^63 - 1 elements")


@pytest.mark.skipif(bool(bc.devices()), reason="fake tensors must never reach a real device")
def test_functional_plan_cache_is_bounded_lru():
    # Every call selects (a miss inserts), then fails at the launch on this GPU-less machine.
    def call(n):
        try:
            bc._C.elementwise_call("neg", FakeTensor((n,), addr=OUT), (FakeTensor((n,), addr=IN0),), {})
        except errors.BaracudaError:
            pass
    base = bc._C.elementwise_cache_size()
    call(3)
    call(3)
    assert bc._C.elementwise_cache_size() == base + 1  # a hit does not insert
    for n in range(10, 4200):  # past the capacity: the oldest go, the cache stays full
        call(n)
    assert bc._C.elementwise_cache_size() == 4096


def test_wrap_refuses_a_negative_shape_and_keeps_its_owner():
    """_C.wrap (the DLPack view over a CuPy pool allocation for bf16 / fp8) checks its shape and holds
    the owner alive as long as the array."""
    import gc
    import weakref

    with pytest.raises(bc.errors.InvalidArgument, match="negative"):
        bc._C.wrap(0, [2, -1], bc.bfloat16, 0, object())

    class Owner:
        pass

    owner = Owner()
    ref = weakref.ref(owner)
    arr = bc._C.wrap(0, [0], bc.bfloat16, 0, owner)
    del owner
    gc.collect()
    assert ref() is not None, "the array dropped its owner"
    del arr
    gc.collect()
    assert ref() is None
