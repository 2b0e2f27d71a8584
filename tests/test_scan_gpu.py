"""GPU correctness of the scan family against float64 / int64 torch references.

cumsum, cumprod, logcumsumexp, cummax, cummin over every float dtype (and integers where torch
has them), along leading / middle / last axes, lengths 1, 7, 65, 4097, 262144 (the split path),
short rows (several per warp), columns with and without the split pass, transposed / sliced
inputs and strided outputs, empty tensors, 0-d tensors, NaN / inf propagation vs torch, cummax /
cummin indices (ties and NaN) vs torch, every backward vs torch.autograd in float64 (cumprod with
zeros), one CuPy and one JAX call. Outputs are poisoned before each run.

A parallel scan adds in a different order than a sequential one: float results are compared with
the float64 reference within (one rounding of the output) + ACC x (the prefix sum of |x|) for
cumsum, ACC x |prefix product| x (1 + i / 64) for cumprod, ACC x (|y| + 1) for logcumsumexp.
"""
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ref as R  # noqa: E402
from _ref import DEV  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]

F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
I8, U8, I16, I32, I64, BOOL = torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool
FLOATS = [F16, BF16, F32, F64]
ACC = {F16: 3e-5, BF16: 3e-5, F32: 3e-5, F64: 1e-12}

# (shape, dim): rows (short: several per warp; medium; long: split), columns (split and not), middle
CASES = [
    ((1,), 0), ((7,), 0), ((4097,), -1), ((262144,), 0), ((3, 70001), 1), ((33, 65), -1), ((33, 65), 0),
    ((64, 3), -1), ((5, 7, 9), 1), ((2000, 24), 0), ((4096, 64), 0), ((6, 40000), 0), ((5, 1), 1), ((9, 2, 5), -1),
]


def _cid(c):
    return f"{'x'.join(map(str, c[0]))}-d{c[1]}"


def make(op, shape, dt, g):
    if op == "cumprod":
        if dt.is_floating_point:
            return torch.exp(0.05 * torch.randn(shape, generator=g, device=DEV, dtype=F64)).to(dt)
        return (torch.randint(0, 2, shape, generator=g, device=DEV) * 2 - 1).to(dt)
    if op in ("cummax", "cummin") and dt.is_floating_point:
        return ((torch.randn(shape, generator=g, device=DEV, dtype=F64) * 4).round() / 2).to(dt)  # ties
    if op == "logcumsumexp":
        return (3 * torch.randn(shape, generator=g, device=DEV, dtype=F64)).to(dt)
    return R.make(shape, dt, "normal", g)


def reference(op, x, dim):
    """(value, scale): float64 / int64 reference and the scale of the accumulation error."""
    if not x.is_floating_point():
        t = x.long()
        v = torch.cumsum(t, dim) if op == "cumsum" else torch.cumprod(t, dim)
        return v, None
    t = x.double()
    if op == "cumsum":
        return torch.cumsum(t, dim), torch.cumsum(t.abs(), dim)
    if op == "cumprod":
        v = torch.cumprod(t, dim)
        shape = [1] * x.ndim
        shape[dim] = x.shape[dim]
        pos = torch.arange(x.shape[dim], device=DEV, dtype=F64).reshape(shape)
        return v, v.abs() * (1 + (pos + 1) / 64)
    if op == "logcumsumexp":
        v = torch.logcumsumexp(t, dim)
        return v, v.abs() + 1
    raise KeyError(op)


def check(res, ref, scale, label, dt_acc=None):
    assert tuple(res.shape) == tuple(ref.shape), f"{label}: shape {tuple(res.shape)} != {tuple(ref.shape)}"
    if not res.dtype.is_floating_point:
        assert res.dtype == I64, f"{label}: dtype {res.dtype}"
        bad = res != ref
        assert not bool(bad.any()), f"{label}: {int(bad.sum())} elements differ"
        return
    got = res.double()
    exp_r = ref.to(res.dtype).double()
    acc = ACC[dt_acc or res.dtype]
    bound = R.TOL[res.dtype][0] * ref.abs() + (0 if scale is None else acc * scale) + 1e-300
    nan_ok = torch.isnan(got) == torch.isnan(exp_r)
    assert bool(nan_ok.all()), f"{label}: NaN at different places ({int((~nan_ok).sum())})"
    inf = torch.isinf(exp_r)
    assert bool((got[inf] == exp_r[inf]).all()), f"{label}: infinities differ"
    fin = ~torch.isnan(exp_r) & ~inf
    bad = ((got - exp_r).abs() > bound) & fin
    if bool(bad.any()):
        i = bad.nonzero()[0].tolist()
        raise AssertionError(f"{label}: {int(bad.sum())} of {bad.numel()} outside tolerance; first at {i}: got "
                             f"{got[tuple(i)].item()!r}, expected {ref[tuple(i)].item()!r} (bound "
                             f"{bound[tuple(i)].item():.3g})")


def out_dtype(op, dt):
    return dt if dt.is_floating_point else I64


SWEEP = [(op, dt, c) for op in ("cumsum", "cumprod", "logcumsumexp") for dt in FLOATS for c in CASES
         if not (op == "cumprod" and math.prod(c[0]) > 100000)]


@pytest.mark.parametrize("op,dt,case", SWEEP, ids=[f"{o}-{str(d)[6:]}-{_cid(c)}" for o, d, c in SWEEP])
def test_forward_float(op, dt, case):
    shape, dim = case
    g = R.gen(f"{op}-{dt}-{case}")
    x = make(op, shape, dt, g)
    ref, scale = reference(op, x, dim)
    out = R.poison(shape, dt)
    res = getattr(bc, op)(x, dim, out=out)
    assert res is out
    check(res, ref, scale, f"{op} {dt} {case}")
    fresh = getattr(bc, op)(x, dim)
    assert fresh.dtype == dt and fresh.shape == x.shape
    check(fresh, ref, scale, f"{op} {dt} {case} (allocated)")


@pytest.mark.parametrize("dt", [I8, U8, I16, I32, I64, BOOL])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("case", [((7,), 0), ((33, 65), -1), ((33, 65), 0), ((3, 70001), 1), ((2000, 24), 0)],
                         ids=_cid)
def test_forward_int(op, dt, case):
    shape, dim = case
    g = R.gen(f"{op}-{dt}-{case}")
    x = make(op, shape, dt, g) if dt != BOOL else torch.rand(shape, generator=g, device=DEV) < 0.5
    ref, _ = reference(op, x, dim)
    res = getattr(bc, op)(x, dim)
    assert res.dtype == I64  # like torch
    assert torch.equal(res, getattr(torch, op)(x, dim)), f"{op} {dt} {case}: differs from torch"
    check(res, ref, None, f"{op} {dt} {case}")


def test_cumsum_half_into_float32():
    g = R.gen("half-f32")
    x = R.make((40, 3000), BF16, "normal", g)
    res = bc.cumsum(x, 1, dtype=torch.float32)
    assert res.dtype == F32
    check(res, torch.cumsum(x.double(), 1), torch.cumsum(x.double().abs(), 1), "cumsum bf16->f32", F32)


EXT_DTYPES = FLOATS + [I8, U8, I32, I64]


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("dt", EXT_DTYPES)
@pytest.mark.parametrize("case", CASES[:-2], ids=_cid)
def test_cummax_cummin_vs_torch(op, dt, case):
    shape, dim = case
    if math.prod(shape) > 100000 and dt not in (F32, BF16):
        pytest.skip("long cases: two dtypes suffice")
    g = R.gen(f"{op}-{dt}-{case}")
    x = make(op, shape, dt, g) if dt.is_floating_point else R.make(shape, dt, "normal", g)
    v_out, i_out = R.poison(shape, dt), R.poison(shape, I64)
    v, i = getattr(bc, op)(x, dim, out=(v_out, i_out))
    assert v is v_out and i is i_out
    tv, ti = getattr(torch, op)(x, dim)
    assert torch.equal(v, tv), f"{op} {dt} {case}: values differ"
    assert torch.equal(i, ti), f"{op} {dt} {case}: indices differ ({int((i != ti).sum())})"


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("shape,dim,dt", [((4, 300), 1, F32), ((300, 5), 0, F32), ((2, 20000), 1, F32),
                                          ((3, 2056), 1, BF16), ((5, 1030), 1, I16)])
def test_cummax_nan_and_inf_follow_torch(op, shape, dim, dt):
    # bf16 / int16 rows of a multiple of 8: the 8-wide vector path; rounded values give many ties
    g = R.gen(f"{op}-nan-{shape}")
    x = R.with_specials(((torch.randn(shape, generator=g, device=DEV) * 4).round() / 2), g, frac=0.02)
    x = x.to(dt) if dt.is_floating_point else torch.nan_to_num(x, 0.0, 50.0, -50.0).to(dt)
    v, i = getattr(bc, op)(x, dim)
    tv, ti = getattr(torch, op)(x, dim)
    assert torch.equal(torch.isnan(v), torch.isnan(tv)), f"{op}: NaN positions differ"
    fin = ~torch.isnan(tv)
    assert torch.equal(v[fin], tv[fin]), f"{op}: values differ"
    assert torch.equal(i, ti), f"{op}: NaN / inf indices differ from torch ({int((i != ti).sum())})"


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "logcumsumexp"])
@pytest.mark.parametrize("dt", [F32, BF16])
def test_nan_inf_propagation_like_torch(op, dt):
    g = R.gen(f"nan-{op}-{dt}")
    x = R.with_specials(make(op, (16, 513), F32, g), g, frac=0.01).to(dt)
    res = getattr(bc, op)(x, 1)
    ref = getattr(torch, op)(x.double(), 1)
    exp = ref.to(dt).double()
    assert torch.equal(torch.isnan(res.double()), torch.isnan(exp)), f"{op}: NaN positions differ"
    inf = torch.isinf(exp)
    assert torch.equal(res.double()[inf], exp[inf]), f"{op}: infinities differ"


@pytest.mark.parametrize("dt", FLOATS)
def test_logcumsumexp_special_runs(dt):
    """Rows that drive each branch of the (max, sum) state: all -inf, a -inf run, +inf (one and two),
    a NaN, every element a new maximum, a falling row, and a 200-unit spread that underflows exp."""
    g = R.gen(f"lcse-runs-{dt}")
    x = 3 * torch.randn((9, 4097), generator=g, device=DEV, dtype=F64)
    x[0] = -math.inf
    x[1, :1000] = -math.inf
    x[2, 500] = math.inf
    x[3, 37:39] = math.inf
    x[4, ::2] -= 200
    x[5, 3000] = math.nan
    x[6] = torch.linspace(-300, 300, 4097, device=DEV, dtype=F64)
    x[7] = torch.linspace(300, -300, 4097, device=DEV, dtype=F64)
    x[8, 1:] = -math.inf
    x = x.to(dt)
    ref, scale = reference("logcumsumexp", x, 1)
    out = R.poison(x.shape, dt)
    check(bc.logcumsumexp(x, 1, out=out), ref, scale, f"logcumsumexp runs {dt}")
    xt = x.t().contiguous()  # the same rows down the columns path
    check(bc.logcumsumexp(xt, 0), ref.t(), scale.t(), f"logcumsumexp runs columns {dt}")


@pytest.mark.parametrize("shape", [(3, 1 << 21), (2, (1 << 21) + 5), (1, 1 << 23)], ids=lambda s: "x".join(map(str, s)))
def test_split_rows_exact_under_repeats(shape):
    """Long rows through the split (segment totals, their scan, the rescan) on exact data, run
    repeatedly: int32 -> int64 sums, and f32 sums of small integers (exact in any order below
    2^24), must equal torch bit for bit every time; so must cummax's values and indices."""
    g = R.gen(f"split-exact-{shape}")
    xi = torch.randint(-1000, 1000, shape, generator=g, device=DEV, dtype=I32)
    xf = torch.randint(-3, 4, shape, generator=g, device=DEV).to(F32)
    ti, tf = torch.cumsum(xi, 1), torch.cumsum(xf.double(), 1).float()
    for _ in range(4):
        assert torch.equal(bc.cumsum(xi, 1), ti)
        assert torch.equal(bc.cumsum(xf, 1), tf)
    v, i = bc.cummax(xf, 1)
    tv, tix = torch.cummax(xf, 1)
    assert torch.equal(v, tv) and torch.equal(i, tix)


def test_split_rows_unaligned_take_scalar_loads():
    """A bf16 row 2 bytes off 16-byte alignment: the plan chose 16-byte vectors for the split; the
    run takes scalar loads over the same segments."""
    g = R.gen("split-unaligned")
    n = 1 << 20
    flat = R.make((4 * n + 8,), BF16, "normal", g)
    x = flat[1:1 + 4 * n].view(4, n)
    ref, scale = reference("cumsum", x, 1)
    check(bc.cumsum(x, 1), ref, scale, "cumsum unaligned long rows")
    xa = flat[:4 * n].view(4, n)
    check(bc.cumsum(xa, 1), *reference("cumsum", xa, 1), "cumsum aligned long rows")


def test_transposed_sliced_inputs_and_strided_outputs():
    g = R.gen("strided")
    base = R.make((65, 130), F32, "normal", g)
    for x, dim in ((base.t(), -1), (base.t(), 0), (base[:, ::2], 1), (base[::3, 1:], 0), (base.t()[5:, ::2], 1)):
        ref, scale = reference("cumsum", x, dim)
        res = bc.cumsum(x, dim)
        check(res, ref, scale, f"cumsum strided {tuple(x.stride())} dim {dim}")
        out = R.poison((x.shape[1], x.shape[0]), F32).t()  # a transposed output
        assert bc.cumsum(x, dim, out=out) is out
        check(out, ref, scale, f"cumsum strided out {tuple(x.stride())} dim {dim}")
        v, i = bc.cummax(x, dim)
        tv, ti = torch.cummax(x, dim)
        assert torch.equal(v, tv) and torch.equal(i, ti)


def test_empty_and_zero_dim():
    for shape, dim in (((0, 5), 0), ((0, 5), 1), ((5, 0), 1), ((5, 0), 0), ((2, 0, 3), -1)):
        x = torch.randn(shape, device=DEV)
        for op in ("cumsum", "cumprod", "logcumsumexp"):
            res = getattr(bc, op)(x, dim)
            assert res.shape == x.shape and res.dtype == x.dtype
        v, i = bc.cummax(x, dim)
        assert v.shape == x.shape and i.shape == x.shape and i.dtype == I64
    s = torch.tensor(2.5, device=DEV)
    out = R.poison((), F32)
    assert bc.cumsum(s, 0, out=out) is out and out.item() == 2.5
    assert bc.cumsum(s, -1).item() == 2.5
    v, i = bc.cummin(s, 0)
    assert v.item() == 2.5 and i.item() == 0


def test_out_overlapping_input_refused():
    x = torch.randn(8, 64, device=DEV)
    with pytest.raises(bc.errors.InvalidArgument, match="in place"):
        bc.cumsum(x, 1, out=x)


# ---- backward -------------------------------------------------------------------------------------

BW_CASES = [((6, 50), 1), ((6, 50), 0), ((4, 5, 6), 1), ((3, 4097), -1), ((2, 70001), 1), ((7,), 0), ((1,), 0),
            ((2000, 24), 0)]


def _fwd(op, x, dim):
    return getattr(torch, op)(x, dim)


def _bw_input(op, shape, g):
    x64 = torch.randn(shape, generator=g, device=DEV, dtype=F64)
    if op == "cumprod":
        x64 = torch.exp(0.05 * x64)
        flat = x64.reshape(-1)
        flat[0] = 0.0  # a zero at the start of the first slice
        if flat.numel() > 60:
            flat[37] = 0.0  # two zeros in one slice along either axis
            flat[41] = 0.0
            flat[-1] = 0.0  # and one at the very end
    return x64


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "logcumsumexp"])
@pytest.mark.parametrize("case", BW_CASES, ids=_cid)
@pytest.mark.parametrize("dt", [F64, F32, BF16])
def test_backward_vs_autograd(op, case, dt):
    shape, dim = case
    if op == "cumprod" and math.prod(shape) > 20000:
        pytest.skip("products of long slices under- / overflow")
    g = R.gen(f"bw-{op}-{case}-{dt}")
    x = _bw_input(op, shape, g).to(dt)
    xr = x.detach().double().requires_grad_(True)
    y = _fwd(op, xr, dim)
    go = torch.randn(y.shape, generator=g, device=DEV, dtype=F64)
    (ref,) = torch.autograd.grad(y, xr, go)
    out = R.poison(shape, dt)
    if op == "cumsum":
        res = bc.cumsum_backward(go.to(dt), dim, out=out)
    else:
        yd = _fwd(op, x, dim) if dt != BF16 else y.detach().to(dt)
        res = getattr(bc, op + "_backward")(go.to(dt), x, yd, dim, out=out)
    assert res is out
    if dt == F64:
        torch.testing.assert_close(res, ref, rtol=1e-9, atol=1e-9 * (ref.abs().amax().item() + 1))
    else:
        tol = {F32: 1e-4, BF16: 4e-2}[dt]
        scale = ref.abs().amax().item() + 1e-30
        torch.testing.assert_close(res.double(), ref, rtol=tol, atol=tol * scale,
                                   msg=lambda m: f"{op}_backward {dt} {case}: {m}")


def test_cumprod_backward_zero_handling_exact_cases():
    x = torch.tensor([[2.0, 0.0, 3.0, 0.0, 5.0], [0.0, 1.5, 2.0, 4.0, 1.0], [1.0, 2.0, 3.0, 4.0, 0.0],
                      [1.0, 2.0, 0.5, 4.0, 3.0]], device=DEV, dtype=F64)
    xr = x.clone().requires_grad_(True)
    y = torch.cumprod(xr, 1)
    go = torch.arange(1, 21, device=DEV, dtype=F64).reshape(4, 5) / 7
    (ref,) = torch.autograd.grad(y, xr, go)
    res = bc.cumprod_backward(go, x, y.detach(), 1)
    torch.testing.assert_close(res, ref, rtol=1e-12, atol=1e-12)


# ---- other frameworks ------------------------------------------------------------------------------

def test_cupy_cumsum():
    cp = R.cupy_gpu()
    import numpy as np

    a = np.random.default_rng(11).standard_normal((65, 3000)).astype(np.float32)
    s = bc.cumsum(cp.asarray(a), 1)
    assert isinstance(s, cp.ndarray) and s.shape == a.shape and s.dtype == np.float32
    ref = a.astype(np.float64).cumsum(1)
    bound = 1e-5 * np.abs(ref) + 3e-5 * np.abs(a.astype(np.float64)).cumsum(1)
    assert (np.abs(cp.asnumpy(s) - ref) <= bound).all()


def test_jax_logcumsumexp():
    jax, dev = R.jax_gpu()
    import numpy as np

    a = np.random.default_rng(12).standard_normal((33, 129)).astype(np.float32)
    r = bc.logcumsumexp(jax.device_put(a, dev), 0)
    assert isinstance(r, jax.Array) and r.shape == a.shape
    ref = np.logaddexp.accumulate(a.astype(np.float64), axis=0)
    np.testing.assert_allclose(np.asarray(r), ref, rtol=2e-5, atol=2e-5)
