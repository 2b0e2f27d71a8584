"""Host tests of the reduction family (no GPU): select-time validation with messages that name
the argument, the kernel a plan picks (rows / columns / strided, split passes), the workspace,
descriptor identity, the op table and the functional API's surface."""
import pytest

import baracuda as bc
from baracuda import errors

S = bc.TensorSpec
D = bc.ReductionDescriptor
P = bc.ReductionPlan
f16, bf16, f32, f64 = bc.float16, bc.bfloat16, bc.float32, bc.float64
i8, i32, i64, BOOL = bc.int8, bc.int32, bc.int64, bc.DType.bool
OPS = {row["name"]: row for row in bc.reduction_ops()}


def select(op, x, out, axes=None, keepdim=False, params=None, pref=None, **kw):
    return P.select(D(op, x, out, axes, keepdim, params or {}, **kw), pref)


def refused(exc, fn, *needles):
    with pytest.raises(errors.BaracudaError) as info:
        fn()
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    for n in needles:
        assert n in str(info.value), f"{n!r} not in {str(info.value)!r}"
    return str(info.value)


# ---- refusals ----------------------------------------------------------------------------------

def test_axis_out_of_range():
    refused(errors.InvalidArgument, lambda: select("sum", S((4, 8), f32), S((4,), f32), [2]), "sum:", "axes", "2",
            "rank 2")
    refused(errors.InvalidArgument, lambda: select("sum", S((4, 8), f32), S((4,), f32), [-3]), "axes", "-3")


def test_duplicate_axes():
    refused(errors.InvalidArgument, lambda: select("mean", S((4, 8), f32), S((), f32), [1, -1]), "mean:", "axes",
            "twice")
    refused(errors.InvalidArgument, lambda: select("amax", S((4, 8, 2), f32), S((8,), f32), [0, 2, 0]), "axes")


def test_wrong_out_shape():
    refused(errors.InvalidArgument, lambda: select("sum", S((4, 8), f32), S((8,), f32), [1]), "out", "(4,)", "(8,)")
    refused(errors.InvalidArgument, lambda: select("sum", S((4, 8), f32), S((4,), f32), [1], True), "out", "(4, 1)")
    refused(errors.InvalidArgument, lambda: select("sum", S((4, 8), f32), S((1, 1), f32)), "out", "()")


def test_wrong_out_dtype():
    refused(errors.InvalidDType, lambda: select("sum", S((4, 8), f32), S((4,), f16), [1]), "out", "float16")
    refused(errors.InvalidDType, lambda: select("sum", S((4, 8), i32), S((4,), i32), [1]), "out", "int64")
    refused(errors.InvalidDType, lambda: select("any", S((4, 8), f32), S((4,), f32), [1]), "out", "bool")
    refused(errors.InvalidDType, lambda: select("argmax", S((4, 8), f32), S((4,), f32), [1]), "out", "int64", "int32")
    refused(errors.InvalidDType, lambda: select("count_nonzero", S((4, 8), f32), S((4,), i32), [1]), "out")
    refused(errors.InvalidDType, lambda: select("sum_to_shape", S((4, 8), f32), S((8,), f64)), "out")


def test_unsupported_dtype():
    refused(errors.InvalidDType, lambda: select("mean", S((4, 8), i32), S((4,), i32), [1]), "mean:", "x", "int32",
            "supported")
    refused(errors.InvalidDType, lambda: select("norm2", S((4, 8), BOOL), S((4,), BOOL), [1]), "x", "bool")
    refused(errors.InvalidDType, lambda: select("var", S((4, 8), bc.float8_e4m3fn), S((4,), bc.float8_e4m3fn), [1]),
            "x")
    refused(errors.Unsupported, lambda: select("sum", S((4, 8), bc.complex64), S((4,), bc.complex64), [1]), "complex")


def test_int32_argmax_needs_indices_that_fit():
    # The last index of the reduced axis must fit int32; the kernel keeps int64 indices, so an
    # int64 out takes any length.
    ok, over = 1 << 31, (1 << 31) + 1
    assert select("argmax", S((ok,), bf16), S((), i32), [0])
    refused(errors.InvalidArgument, lambda: select("argmin", S((3, over), bf16), S((3,), i32), [1]), "argmin:",
            "out is int32", "2147483649 elements", "int64")
    assert select("argmax", S((3, over), bf16), S((3,), i64), [1])


def test_broadcast_inputs_larger_than_one_grid():
    # A stride-0 x can ask for more outputs than a grid has blocks: fewer threads per output
    # keep the launch in range, and what still does not fit is refused (not launched short).
    b = bc.DType.bool
    wide = select("any", S(((1 << 32) + 5, 2048), b, [0, 1]), S(((1 << 32) + 5,), b), [1])
    assert wide.sku.name == "red.strided.g32", wide.sku.name
    assert select("sum", S(((1 << 34) + 3, 100), bf16, [0, 1]), S(((1 << 34) + 3,), f32), [1]).sku.name == \
        "red.strided.g4"
    refused(errors.Unsupported, lambda: select("sum", S((1 << 40, 100), bf16, [0, 1]), S((1 << 40,), f32), [1]),
            "sum:", "1099511627776 outputs", "blocks")
    refused(errors.Unsupported, lambda: select("sum", S((1 << 40, 1 << 40), bf16, [0, 0]), S((), f32)),
            "more than 2^63 - 1 elements")
    # the statistics pass of a backward plan takes the same limit
    refused(errors.Unsupported, lambda: select("amax_backward", S((1 << 40, 100), bf16, [0, 1]), S((1 << 40, 100), bf16),
                                               [1], grad_out=S((1 << 40,), bf16), y=S((1 << 40,), bf16)),
            "amax_backward:", "outputs")


def test_argmax_takes_one_axis():
    refused(errors.InvalidArgument, lambda: select("argmax", S((4, 8, 2), f32), S((8,), i64), [0, 2]), "axes", "one")


def test_empty_without_identity():
    refused(errors.InvalidArgument, lambda: select("amax", S((4, 0), f32), S((4,), f32), [1]), "amax", "no identity")
    refused(errors.InvalidArgument, lambda: select("argmin", S((0,), f32), S((), i64)), "argmin")
    # sum of nothing is 0: fine
    assert select("sum", S((4, 0), f32), S((4,), f32), [1]).workspace_bytes() == 0


def test_unknown_op_and_param():
    refused(errors.InvalidArgument, lambda: select("nope", S((4,), f32), S((), f32)), "unknown op", "nope")
    refused(errors.InvalidArgument, lambda: select("sum", S((4,), f32), S((), f32), params={"correction": 1}),
            "unknown parameter", "correction")
    select("var", S((4, 8), f32), S((4,), f32), [1], params={"correction": 0})


def test_to_shape_validation():
    refused(errors.InvalidArgument, lambda: select("sum_to_shape", S((4, 8), f32), S((8,), f32), [0]), "axes",
            "empty")
    refused(errors.InvalidArgument, lambda: select("sum_to_shape", S((4, 8), f32), S((3,), f32)), "out",
            "broadcast-compatible")
    refused(errors.InvalidArgument, lambda: select("sum_to_shape", S((8,), f32), S((2, 8), f32)), "out",
            "more dims")
    assert P.select(D("sum_to_shape", S((4, 5, 6), f32), S((5, 1), f32))).sku.op == "sum_to_shape"


def test_backward_validation():
    x = S((4, 8), f32)
    refused(errors.InvalidArgument, lambda: select("sum_backward", x, x, [1], grad_out=S((8,), f32)), "grad_out",
            "(4,)")
    refused(errors.InvalidArgument, lambda: select("norm2_backward", x, x, [1], grad_out=S((4,), f32),
                                                   y=S((4, 1), f32)), "y", "(4,)")
    refused(errors.InvalidArgument, lambda: select("mean_backward", x, S((4,), f32), [1], grad_out=S((4,), f32)),
            "out")
    refused(errors.InvalidDType, lambda: select("sum_backward", x, x, [1], grad_out=S((4,), f16)), "grad_out", "float16")
    plan = select("std_backward", x, x, [1], True, {"correction": 0}, grad_out=S((4, 1), f32), y=S((4, 1), f32))
    assert plan.num_inputs == 3
    assert select("sum_backward", x, x, [1], grad_out=S((4,), f32)).num_inputs == 2


def test_overlapping_out_refused():
    refused(errors.InvalidArgument, lambda: select("sum", S((4, 8), f32), S((4, 8), f32, [0, 0]), None, True),
            "out")


def test_forbidding_bespoke_is_unsupported():
    pref = bc.PlanPreference(forbid=[bc.Backend.bespoke])
    refused(errors.Unsupported, lambda: select("sum", S((4, 8), f32), S((4,), f32), [1], pref=pref), "bespoke")


# ---- kernel choice -----------------------------------------------------------------------------

def test_row_reductions_pick_rows():
    # Aligned rows of 8..64 vectors take the short-rows kernel: 8 lanes per row, 8 / P rows per group.
    short = select("sum", S((32768, 64), bf16), S((32768,), bf16), [1]).sku
    assert short.layout == "rows" and short.name.startswith("red.rows.g8.r8")
    mid = select("amax", S((32768, 512), bf16), S((32768,), bf16), [-1]).sku
    assert mid.layout == "rows" and mid.name.startswith("red.rows.g8.r1")
    assert ".g8.r4" in select("sum", S((100, 64), f32), S((100,), f32), [1]).sku.name  # 16 vectors of f32
    # Not a multiple of 8 vectors, or rows that are not all 16-byte aligned: the generic kernels.
    assert ".g4" in select("sum", S((100, 40), bf16), S((100,), bf16), [1]).sku.name
    assert ".g32" in select("sum", S((100, 520), bf16), S((100,), bf16), [1]).sku.name
    assert ".g32" in select("sum", S((100, 512), bf16, [516, 1]), S((100,), bf16), [1]).sku.name
    assert ".g32" in select("sum", S((32768, 4096), bf16), S((32768,), bf16), [1]).sku.name
    long = select("mean", S((8192, 16384), bf16), S((8192,), bf16), [1]).sku
    assert long.layout == "rows" and ".g256" in long.name and "split" not in long.name
    # The compute-heavy ops keep a warp per row up to 4096 vectors (warp_max_heavy), then a block.
    assert ".g32" in select("logsumexp", S((8192, 16384), bf16), S((8192,), bf16), [1]).sku.name
    assert ".g32" in select("var", S((8192, 16384), bf16), S((8192,), bf16), [1]).sku.name
    assert ".g32" in select("argmax", S((8192, 16384), bf16), S((8192,), i64), [1]).sku.name
    assert ".g256" in select("logsumexp", S((8192, 65536), bf16), S((8192,), bf16), [1]).sku.name
    assert ".g256" in select("amax", S((8192, 16384), bf16), S((8192,), bf16), [1]).sku.name


def test_leading_axis_default_columns():
    # Columns default: 8 row slices per block, rows split until about 2048 blocks run.
    a = select("sum", S((16384, 8192), bf16), S((8192,), bf16), [0])
    assert a.sku.layout == "columns" and ".v8.y8" in a.sku.name and "split" in a.sku.name


def test_tuning_knobs_change_the_choice(monkeypatch):
    monkeypatch.setenv("BARACUDA_REDUCTION_CFG", "short_max=0,warp_max=4096,col_wy=8")
    assert ".g32" in select("sum", S((32768, 512), bf16), S((32768,), bf16), [1]).sku.name
    assert ".g32" in select("sum", S((8192, 16384), bf16), S((8192,), bf16), [1]).sku.name
    assert ".y8" in select("sum", S((16384, 8192), bf16), S((8192,), bf16), [0]).sku.name
    monkeypatch.setenv("BARACUDA_REDUCTION_CFG", "col_wy=4")
    assert ".y4" in select("sum", S((16384, 8192), bf16), S((8192,), bf16), [0]).sku.name
    # warp_max alone moves every op's limit; warp_max_heavy only logsumexp / var / std / arg*.
    monkeypatch.setenv("BARACUDA_REDUCTION_CFG", "warp_max=512")
    assert ".g256" in select("logsumexp", S((8192, 16384), bf16), S((8192,), bf16), [1]).sku.name
    monkeypatch.setenv("BARACUDA_REDUCTION_CFG", "warp_max=512,warp_max_heavy=4096")
    assert ".g32" in select("logsumexp", S((8192, 16384), bf16), S((8192,), bf16), [1]).sku.name
    assert ".g256" in select("sum", S((8192, 16384), bf16), S((8192,), bf16), [1]).sku.name
    monkeypatch.setenv("BARACUDA_REDUCTION_CFG", "warp_max_heavy=64")
    assert ".g256" in select("var", S((8192, 16384), bf16), S((8192,), bf16), [1]).sku.name
    assert ".g32" in select("sum", S((100, 520), bf16), S((100,), bf16), [1]).sku.name
    monkeypatch.setenv("BARACUDA_REDUCTION_CFG", "col_wy=1,col_blocks=4096,col_rows=8")
    a = select("sum", S((16384, 8192), bf16), S((8192,), bf16), [0])
    assert ".y1" in a.sku.name and a.workspace_bytes() > 0
    monkeypatch.setenv("BARACUDA_REDUCTION_CFG", "garbage,split_blocks=64")
    with pytest.raises(errors.InvalidArgument, match="'garbage' in the environment variable"):
        select("sum", S((1 << 28,), bf16), S((), bf16))
    monkeypatch.setenv("BARACUDA_REDUCTION_CFG", "split_blocks=64")
    full = select("sum", S((1 << 28,), bf16), S((), bf16))
    assert "split" in full.sku.name and full.workspace_bytes() <= 64 * 4 + 256
    monkeypatch.delenv("BARACUDA_REDUCTION_CFG")
    assert select("sum", S((1 << 28,), bf16), S((), bf16)).workspace_bytes() > 64 * 4 + 256


def test_long_row_splits_with_workspace():
    plan = select("sum", S((262144,), bf16), S((), bf16))
    assert plan.sku.layout == "rows" and "split" in plan.sku.name and plan.workspace_bytes() > 0
    full = select("sum", S((1 << 30,), f32), S((), f32))
    assert "split" in full.sku.name and 0 < full.workspace_bytes() <= 1 << 20
    # A zero workspace limit gives a one-pass plan.
    pref = bc.PlanPreference(workspace_limit=0)
    one = select("sum", S((262144,), bf16), S((), bf16), pref=pref)
    assert one.workspace_bytes() == 0 and "split" not in one.sku.name


def test_leading_axis_picks_columns():
    plan = select("sum", S((16384, 8192), bf16), S((8192,), bf16), [0])
    assert plan.sku.layout == "columns" and ".v8" in plan.sku.name
    few = select("sum", S((100000, 16), f32), S((16,), f32), [0])
    assert few.sku.layout == "columns" and "split" in few.sku.name and few.workspace_bytes() > 0
    odd = select("sum", S((64, 7), f32), S((7,), f32), [0])
    assert odd.sku.layout == "columns" and ".v1" in odd.sku.name


def test_transposed_and_sliced_inputs():
    t = select("sum", S((64, 128), f32, [1, 64]), S((64,), f32), [1])  # reduce along the strided dim
    assert t.sku.layout == "columns"
    s = select("sum", S((64, 64), f32, [128, 2]), S((64,), f32), [1])  # every other column
    assert s.sku.layout == "strided"
    m = select("sum", S((4, 6, 8), f32), S((6,), f32), [0, 2])  # middle kept
    assert m.sku.layout == "strided"
    # adjacent reduced dims merge into one row
    r = select("sum", S((4, 6, 8), f32), S((4,), f32), [1, 2])
    assert r.sku.layout == "rows"


def test_precision_guarantee():
    pg = select("sum", S((64, 64), bf16), S((64,), bf16), [1]).sku.precision
    assert pg.accumulator_dtype == f32 and pg.deterministic and pg.bit_stable
    assert select("sum", S((64, 64), f64), S((64,), f64), [1]).sku.precision.accumulator_dtype == f64
    assert select("sum", S((64, 64), i8), S((64,), i64), [1]).sku.precision.accumulator_dtype == i64


# ---- identity, table, functional surface -----------------------------------------------------

def test_descriptor_identity():
    a = D("var", S((4, 8), f32), S((4,), f32), [1], False, {"correction": 0.0})
    b = D("var", S((4, 8), f32), S((4,), f32), [1], False, {"correction": 0.0})
    c = D("var", S((4, 8), f32), S((4,), f32), [-1], False, {"correction": 0.0})
    assert a == b and hash(a) == hash(b) and a != c
    assert "var" in repr(a) and "axes=[1]" in repr(a)
    assert D("sum", S((4,), f32), S((), f32), 0).axes == [0]


def test_op_table_and_registry():
    for name in ("sum", "mean", "amax", "amin", "prod", "norm2", "logsumexp", "var", "std", "argmax", "argmin",
                 "any", "all", "count_nonzero", "sum_to_shape", "amax_to_shape", "amin_to_shape", "prod_to_shape"):
        assert name in OPS, name
        assert callable(getattr(bc, name)), name
        assert OPS[name]["doc"] in getattr(bc, name).__doc__
    for name, row in OPS.items():
        if row["backward"]:
            assert row["backward"] in OPS and callable(getattr(bc, row["backward"]))
    fam = {f["name"]: f for f in bc.families()}["reduction"]
    assert fam["plan"] == "ReductionPlan"
    assert {o["op"] for o in fam["ops"]} >= {"sum", "argmax", "sum_to_shape"}
    assert dict(OPS["var"]["params"]) == {"correction": 1.0}


def test_functional_refuses_numpy():
    np = pytest.importorskip("numpy")
    with pytest.raises(errors.InvalidArgument, match="numpy"):
        bc.sum(np.ones(4, np.float32))
