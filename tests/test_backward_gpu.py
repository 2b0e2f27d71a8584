"""GPU correctness of the backward ops against torch.autograd in float64.

Every `*_backward` row of the op table: unary, binary (with broadcast operands whose
gradient is summed back to their shape), ternary, where, gated. Inputs are random (never
on a kink such as relu's 0, never a tie of max / min / clamp bounds), in float32,
bfloat16 and float64; the reference differentiates torch's own op on float64 copies of
the same values.
"""
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _ref.py, whatever the import mode
import _ref as R  # noqa: E402  (needs torch and baracuda)
from _ref import DEV, OPS  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]

GRAD_DTYPES = ["float32", "bfloat16", "float64"]
BACKWARD = {n: r for n, r in OPS.items() if r["category"].endswith("_backward")}
UNARY_BW = [n for n, r in BACKWARD.items() if r["category"] == "unary_backward"]
BINARY_BW = [n for n, r in BACKWARD.items() if r["category"] == "binary_backward"]
TERNARY_BW = [n for n, r in BACKWARD.items() if r["category"] == "ternary_backward" and n != "where_backward"]
GATED_BW = [n for n, r in BACKWARD.items() if r["category"] == "gated_backward"]


def _fwd(name):
    return name[: -len("_backward")]


def autograd_ref(fwd, inputs, go, params=None):
    """Per-input (reference gradient, sum of |terms|) from torch.autograd in float64.

    Every differentiable input is expanded to the broadcast shape before differentiating,
    so the unreduced per-element terms are known: their sum over the broadcast dims is
    the reference, and the sum of their magnitudes bounds the rounding error of any
    summation order.
    """
    gated = OPS[fwd]["category"] == "gated"
    leaves, grads_for = [], []
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            d = t.detach().double()
            leaves.append((d if gated else d.expand(tuple(go.shape))).clone().requires_grad_(True))
            grads_for.append(t)
        else:
            leaves.append(t)
    y = R.REF_GRAD.get(fwd, R.REF[fwd])(*leaves, **(params or {}))
    diff = [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]
    terms = torch.autograd.grad(y, diff, go.double(), allow_unused=True)
    out = []
    for t, leaf, g in zip(grads_for, diff, terms):
        g = torch.zeros_like(leaf) if g is None else g
        tgt = tuple(t.shape)
        if tgt == tuple(g.shape):
            out.append((g, g.abs()))
        elif tgt == ():
            out.append((g.sum(), g.abs().sum()))
        else:
            out.append((g.sum_to_size(tgt), g.abs().sum_to_size(tgt)))
    return out


def assert_grad(got, ref, l1, dt, name):
    """|got - ref| <= atol + rtol * max(|ref|, sum |terms|), elementwise."""
    assert isinstance(got, torch.Tensor) and got.dtype == dt, (type(got), getattr(got, "dtype", None))
    assert tuple(got.shape) == tuple(ref.shape), f"{name}: shape {tuple(got.shape)} != {tuple(ref.shape)}"
    rtol, atol = R.tolerance(name, dt)
    err = (got.double() - ref).abs()
    bound = atol + rtol * torch.maximum(ref.abs(), l1)
    bad = ~(err <= bound)  # NaN counts as bad
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        raise AssertionError(f"{name} {dt}: {int(bad.sum())} of {bad.numel()} gradients off; first flat index {i}: "
                             f"got {got.flatten()[i].item()!r}, expected {ref.flatten()[i].item()!r} "
                             f"(bound {bound.flatten()[i].item():.3g})")


def _check(name, inputs, go, params=None, skip_first=False):
    dt = go.dtype
    refs = autograd_ref(_fwd(name), inputs, go, params)
    got = getattr(bc, name)(go, *inputs, **(params or {}))
    got = list(got) if isinstance(got, tuple) else [got]
    if skip_first:
        assert got[0] is None, "where_backward: no gradient for the condition"
        got = got[1:]
    assert len(got) == len(refs), (len(got), len(refs))
    for k, (gr, (ref, l1)) in enumerate(zip(got, refs)):
        assert_grad(gr, ref, l1, dt, f"{name}[{k}]")


# ---- unary -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtname", GRAD_DTYPES)
@pytest.mark.parametrize("name", UNARY_BW)
def test_unary_backward(name, dtname):
    dt = R.tdtype(dtname)
    g = R.gen(f"ubw/{name}/{dtname}")
    fwd = _fwd(name)
    x = R.make_inputs(fwd, dt, [(33, 65)], g)[0]
    go = R.make((33, 65), dt, "normal", g)
    _check(name, [x], go, R.PARAMS.get(fwd, {}))


@pytest.mark.parametrize("name", ["softplus_backward", "elu_backward", "leaky_relu_backward", "hardtanh_backward",
                                  "pow_scalar_backward", "threshold_backward"])
def test_unary_backward_default_params(name):
    g = R.gen(f"ubw-default/{name}")
    x = R.make_inputs(_fwd(name), torch.float32, [(1000,)], g)[0]
    _check(name, [x], R.make((1000,), torch.float32, g=g))


def test_unary_backward_layouts():
    g = R.gen("ubw-layout")
    x = R.make((65, 33), torch.float32, "act", g).t()
    go = R.make((33, 65), torch.float32, g=g)
    _check("gelu_backward", [x], go)  # transposed x, contiguous grad
    _check("silu_backward", [x], R.make((65, 33), torch.float32, g=g).t())
    _check("exp_backward", [x[1:]], go[1:])  # misaligned rows
    for n in (1, 7, 4097):
        _check("sigmoid_backward", [R.make((n,), torch.bfloat16, "act", g)], R.make((n,), torch.bfloat16, g=g))


# ---- binary ----------------------------------------------------------------------------------------

def _binary_inputs(fwd, dt, shapes, g):
    a, b = R.make_inputs(fwd, dt, list(shapes), g)
    go = R.make(torch.broadcast_shapes(a.shape, b.shape), dt, "normal", g)
    return a, b, go


@pytest.mark.parametrize("shapes", [((33, 65), (33, 65)), ((4, 1, 8), (3, 8))], ids=["same", "both-broadcast"])
@pytest.mark.parametrize("dtname", GRAD_DTYPES)
@pytest.mark.parametrize("name", BINARY_BW)
def test_binary_backward(name, dtname, shapes):
    dt = R.tdtype(dtname)
    fwd = _fwd(name)
    a, b, go = _binary_inputs(fwd, dt, shapes, R.gen(f"bbw/{name}/{dtname}/{shapes}"))
    _check(name, [a, b], go, R.PARAMS.get(fwd, {}))


REDUCTIONS = {
    "leading": ((5, 6, 7), (6, 7)),
    "middle": ((5, 6, 7), (5, 1, 7)),
    "trailing": ((5, 6, 7), (5, 6, 1)),
    "lead+trail": ((5, 6, 7), (1, 6, 1)),
    "middle-wide": ((8, 16, 64), (8, 1, 64)),
    "scalar": ((5, 6, 7), ()),
    "bias": ((1000, 300), (300,)),
    "column": ((300, 1000), (300, 1)),
    "long-rows": ((3, 5000), (3, 1)),
    "rank4": ((2, 3, 4, 40), (3, 1, 40)),
    "reversed": ((7,), (5, 6, 7)),  # a is the broadcast one
}


@pytest.mark.parametrize("case", list(REDUCTIONS))
@pytest.mark.parametrize("name", ["add_backward", "sub_backward", "mul_backward", "div_backward",
                                  "maximum_backward", "pow_backward", "hypot_backward", "logaddexp_backward",
                                  "atan2_backward", "copysign_backward", "silu_mul_backward", "gelu_mul_backward",
                                  "gelu_tanh_mul_backward"])
def test_binary_backward_reduced_to_shape(name, case):
    fwd = _fwd(name)
    a, b, go = _binary_inputs(fwd, torch.float32, REDUCTIONS[case], R.gen(f"reduce/{name}/{case}"))
    _check(name, [a, b], go, R.PARAMS.get(fwd, {}))


@pytest.mark.parametrize("dtname", ["bfloat16", "float16", "float32", "float64"])
@pytest.mark.parametrize("name", ["add_backward", "mul_backward"])
def test_bias_gradient(name, dtname):
    """(N, C) + (C,) with N=1000, C=300: the bias gradient is a sum over 1000 rows."""
    dt = R.tdtype(dtname)
    fwd = _fwd(name)
    a, b, go = _binary_inputs(fwd, dt, ((1000, 300), (300,)), R.gen(f"bias/{name}/{dtname}"))
    _check(name, [a, b], go, R.PARAMS.get(fwd, {}))
    _check(name, [a.t(), b[:, None]], go.t(), R.PARAMS.get(fwd, {}))  # strided grad_out and a, column bias


def test_binary_backward_python_scalar():
    g = R.gen("bbw-scalar")
    a, go = R.make((33, 65), torch.float32, g=g), R.make((33, 65), torch.float32, g=g)
    ga, gb = bc.mul_backward(go, a, 3.0)
    assert tuple(gb.shape) == ()
    R.assert_matches(ga, go.double() * 3.0, "mul_backward")
    torch.testing.assert_close(gb.double(), (go.double() * a.double()).sum(), rtol=1e-5, atol=1e-4)


def test_binary_backward_empty():
    """Broadcast gradient of an empty product: zeros of the operand's shape, not garbage."""
    f32, S = bc.float32, bc.TensorSpec
    go, a, b = (torch.empty(0, 3, device=DEV), torch.empty(0, 3, device=DEV), torch.randn(3, device=DEV))
    plan = bc.ElementwisePlan.select(bc.ElementwiseDescriptor(
        "add_backward", [S((0, 3), f32), S((0, 3), f32), S((3,), f32)], S((3,), f32), {"wrt": 1}))
    ws = plan.workspace_bytes()
    gb = torch.full((3,), math.nan, device=DEV)
    plan.run(gb, go, a, b, workspace=torch.empty(ws, dtype=torch.uint8, device=DEV) if ws else None)
    torch.cuda.synchronize()
    assert torch.equal(gb, torch.zeros(3, device=DEV)), gb
    ga, gb = bc.mul_backward(go, a, b)
    assert tuple(ga.shape) == (0, 3) and torch.equal(gb, torch.zeros(3, device=DEV))
    ga, gb = bc.add_backward(torch.empty(2, 0, device=DEV), torch.empty(2, 0, device=DEV), torch.empty(0, device=DEV))
    assert tuple(ga.shape) == (2, 0) and tuple(gb.shape) == (0,)


@pytest.mark.parametrize("dtname", ["float32", "bfloat16"])
def test_reduced_gradient_is_deterministic(dtname):
    dt = R.tdtype(dtname)
    for shapes in ((1000, 300), (300,)), ((3, 5000), (3, 1)), ((64, 33, 40), (33, 1)):
        a, b, go = _binary_inputs("mul", dt, shapes, R.gen(f"det/{dtname}/{shapes}"))
        first = bc.mul_backward(go, a, b)[1]
        for _ in range(3):
            assert torch.equal(R.bits(bc.mul_backward(go, a, b)[1]), R.bits(first))


# ---- ternary, where, gated ---------------------------------------------------------------------------

TERNARY_SHAPES = [((33, 65),) * 3, ((4, 1, 8), (3, 8), (8,)), ((5, 6), (), (5, 1)), ((300,), (200, 300), (200, 1))]


@pytest.mark.parametrize("shapes", TERNARY_SHAPES, ids=["same", "bcast", "scalar", "bias"])
@pytest.mark.parametrize("dtname", GRAD_DTYPES)
@pytest.mark.parametrize("name", TERNARY_BW)
def test_ternary_backward(name, dtname, shapes):
    dt = R.tdtype(dtname)
    fwd = _fwd(name)
    g = R.gen(f"tbw/{name}/{dtname}/{shapes}")
    xs = R.make_inputs(fwd, dt, list(shapes), g)
    go = R.make(torch.broadcast_shapes(*(t.shape for t in xs)), dt, "normal", g)
    _check(name, xs, go, R.PARAMS.get(fwd, {}))


@pytest.mark.parametrize("shapes", [((33, 65),) * 3, ((33, 65), (65,), (33, 1)), ((4, 1, 8), (3, 1), (8,)),
                                    ((33, 1), (), (65,))], ids=["same", "bcast", "bcast3", "scalar"])
@pytest.mark.parametrize("dtname", GRAD_DTYPES)
def test_where_backward(dtname, shapes):
    dt = R.tdtype(dtname)
    g = R.gen(f"wbw/{dtname}/{shapes}")
    cond, a, b = R.make_inputs("where", dt, list(shapes), g)
    go = R.make(torch.broadcast_shapes(cond.shape, a.shape, b.shape), dt, "normal", g)
    _check("where_backward", [cond, a, b], go, skip_first=True)


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("dtname", GRAD_DTYPES)
@pytest.mark.parametrize("name", GATED_BW)
def test_gated_backward(name, dtname, axis):
    dt = R.tdtype(dtname)
    g = R.gen(f"gbw/{name}/{dtname}/{axis}")
    x = R.make((6, 10, 8), dt, "act", g)
    half = list(x.shape)
    half[axis] //= 2
    go = R.make(tuple(half), dt, "normal", g)
    _check(name, [x], go, dict(axis=axis))
    xt = R.make((8, 10, 6), dt, "act", g).transpose(0, 2)  # same shape, strided
    _check(name, [xt], go, dict(axis=axis))
