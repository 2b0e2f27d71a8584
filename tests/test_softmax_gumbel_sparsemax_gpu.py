"""GPU correctness of gumbel_softmax (seeded), gumbel_noise and sparsemax (forward and backward) in the
softmax family: the noise against an independent numpy Philox reference (tests/_philox.py), values
against float64 references computed from the same noise, reproducibility, the sampling distribution,
hard one-hot, sparsemax against a float64 sort-based reference, backward against torch.autograd in
float64, every path (rows_warp, rows_block, rows_global), any axis, strided inputs, NaN / inf rows,
zero-size. Outputs are poisoned (NaN) before every run."""
import math
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _philox as P  # noqa: E402
import _ref as R  # noqa: E402

errors = bc.errors
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]
DEV = "cuda"
FP = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
TOL = {torch.float64: (1e-12, 1e-12), torch.float32: (2e-5, 2e-6), torch.float16: (2e-3, 2e-4),
       torch.bfloat16: (1.6e-2, 2e-3)}
# Row lengths that hit every path: rows_warp (k = 1, 2, 4), rows_block (k = 1 .. 8), rows_global.
LENS = [1, 2, 5, 33, 127, 200, 511, 513, 1000, 4097, 20001, 40000]


def _x(shape, dt, key, scale=3.0):
    g = R.gen(key)
    return (scale * torch.randn(shape, generator=g, device=DEV, dtype=torch.float64)).to(dt)


# gumbel_softmax in f32: z = (x + g) / tau carries the f32 roundings of the noise (libm logf), of the
# sum and of the product with 1 / tau, amplified by 1 / tau: a few ulp of |z| <= ~80 in the exponent.
GTOL = dict(TOL)
GTOL[torch.float32] = (6e-5, 6e-6)


def _close(got, ref, dt, what, equal_nan=False, tol=TOL):
    r, a = tol[dt]
    torch.testing.assert_close(got.double(), ref.to(dt).double(), rtol=r, atol=a, equal_nan=equal_nan,
                               msg=lambda m: f"{what}: {m}")


def _noise_ref(shape, seed, offset, dt):
    return torch.as_tensor(P.gumbel(tuple(shape), seed, offset, f64=dt == torch.float64), device=DEV)


# ---- gumbel_noise ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (33, 127), (2, 3, 4, 5), ()])
def test_noise_matches_numpy_philox(shape, dt):
    like = torch.zeros(shape, device=DEV, dtype=dt)
    for seed, offset in [(0, 0), (1234, 0), (2**64 - 1, 7), (99, 2**40 + 3)]:
        g = bc.gumbel_noise(like, seed=seed, offset=offset)
        assert g.dtype == dt and g.shape == like.shape
        ref = _noise_ref(shape, seed, offset, dt)
        tol = (1e-12, 1e-12) if dt == torch.float64 else (1e-6, 1e-6)  # libm logf vs numpy log
        torch.testing.assert_close(g.double(), ref, rtol=tol[0], atol=tol[1])
        assert torch.isfinite(g).all()


def test_noise_of_half_logits_is_f32_and_strided_out():
    x = torch.zeros(6, 9, device=DEV, dtype=torch.bfloat16)
    g = bc.gumbel_noise(x, seed=5, offset=1)
    assert g.dtype == torch.float32
    out = torch.full((9, 6), math.nan, device=DEV).t()  # transposed out: same logical values
    bc.gumbel_noise(out=out, seed=5, offset=1)
    assert torch.equal(out, g)


def test_noise_distribution():
    g = bc.gumbel_noise(torch.zeros(1 << 22, device=DEV), seed=7).double()
    assert abs(g.mean().item() - np.euler_gamma) < 3e-3
    assert abs(g.std().item() - math.pi / math.sqrt(6)) < 3e-3
    u = torch.exp(-torch.exp(-g))  # the CDF: uniform on (0, 1)
    hist = torch.histc(u.float(), bins=64, min=0, max=1)
    expected = g.numel() / 64
    assert ((hist - expected).abs() / math.sqrt(expected)).max() < 6  # 6 sigma per bin


# ---- gumbel_softmax forward ------------------------------------------------------------------------------

def _gumbel_ref(x, dim, tau, seed, offset):
    g = _noise_ref(x.shape, seed, offset, x.dtype)
    return torch.softmax((x.double() + g) / tau, dim)


@pytest.mark.parametrize("dt", FP, ids=str)
@pytest.mark.parametrize("n", LENS)
def test_gumbel_soft_rows(n, dt):
    x = _x((9, n), dt, f"gs/{n}/{dt}")
    for tau in (1.0, 0.37, 4.0):
        seed, offset = 1000 + n, 3
        ref = _gumbel_ref(x, -1, tau, seed, offset)
        out = R.poison(x.shape, dt)
        res = bc.gumbel_softmax(x, tau, dim=-1, seed=seed, offset=offset, out=out)
        assert res is out
        _close(out, ref, dt, f"gumbel_softmax {dt} n={n} tau={tau}", tol=GTOL)
        sums = out.double().sum(-1)
        torch.testing.assert_close(sums, torch.ones_like(sums), rtol=0, atol=2e-2 if dt in (
            torch.float16, torch.bfloat16) else 1e-5)


@pytest.mark.parametrize("dt", FP, ids=str)
@pytest.mark.parametrize("n", [1, 3, 64, 300, 1000, 5000, 40000])
def test_gumbel_hard(n, dt):
    x = _x((17, n), dt, f"gh/{n}/{dt}", scale=0.5)
    out = R.poison(x.shape, dt)
    soft = R.poison(x.shape, dt)
    y, ys = bc.gumbel_softmax(x, 0.5, True, -1, seed=11, offset=n, out=out, soft_out=soft)
    assert y is out and ys is soft
    _close(ys, _gumbel_ref(x, -1, 0.5, 11, n), dt, "y_soft", tol=GTOL)
    idx = ys.argmax(-1)  # torch: the first index of the maximum of the rounded y_soft
    onehot = torch.zeros_like(ys).scatter_(-1, idx[:, None], 1.0)
    assert torch.equal(y, onehot), f"hard {dt} {n}"
    # the same through return_soft, and the soft output of a hard call equals the soft call
    y2, ys2 = bc.gumbel_softmax(x, 0.5, True, -1, seed=11, offset=n, return_soft=True)
    assert torch.equal(y2, y) and torch.equal(ys2, ys)
    assert torch.equal(bc.gumbel_softmax(x, 0.5, False, -1, seed=11, offset=n), ys)
    assert torch.equal(bc.gumbel_softmax(x, 0.5, True, -1, seed=11, offset=n), y)


def test_gumbel_hard_ties_take_the_first_index():
    # equal logits and a tau so large that many y_soft round to the same bf16 value
    x = torch.zeros(64, 300, device=DEV, dtype=torch.bfloat16)
    y, ys = bc.gumbel_softmax(x, 1000.0, True, seed=3, return_soft=True)
    idx = ys.argmax(-1)
    assert torch.equal(y.argmax(-1), idx)
    assert (y.sum(-1) == 1).all()


def test_gumbel_reproducible_and_seeded():
    x = _x((64, 3000), torch.bfloat16, "rep")
    a = bc.gumbel_softmax(x, seed=1, offset=0)
    b = bc.gumbel_softmax(x, seed=1, offset=0)
    assert torch.equal(a.view(torch.int16), b.view(torch.int16))
    assert not torch.equal(a, bc.gumbel_softmax(x, seed=2, offset=0))
    assert not torch.equal(a, bc.gumbel_softmax(x, seed=1, offset=1))
    # the same values whatever the layout or path: a transposed copy along dim 0, a padded row
    xt = x.t().contiguous().t()
    torch.testing.assert_close(bc.gumbel_softmax(xt, seed=1), a, rtol=0, atol=0)
    big = torch.full((64, 3008), math.nan, device=DEV, dtype=torch.bfloat16)
    big[:, :3000] = x
    torch.testing.assert_close(bc.gumbel_softmax(big[:, :3000], seed=1), a, rtol=0, atol=0)


def test_gumbel_same_noise_for_every_path(monkeypatch):
    # f32 rows of 4096: rows_block; the noise is keyed by the logical index, so rows_block and the
    # strided view of the same logical tensor give identical results.
    x = _x((8, 4096), torch.float32, "paths")
    a = bc.gumbel_softmax(x, seed=77, offset=5)
    xs = torch.empty(4096, 8, device=DEV).t()
    xs.copy_(x)
    b = bc.gumbel_softmax(xs, seed=77, offset=5)
    torch.testing.assert_close(b, a, rtol=0, atol=0)


def test_gumbel_distribution():
    # argmax frequencies of many hard samples match softmax(logits)
    logits = torch.tensor([1.0, 0.0, -1.0, 2.0, 0.5, -3.0, 0.0, 1.5], device=DEV)
    n = 200000
    x = logits.expand(n, 8).contiguous()
    y = bc.gumbel_softmax(x, 1.0, True, seed=2024)
    freq = y.double().mean(0)
    p = torch.softmax(logits.double(), 0)
    sigma = torch.sqrt(p * (1 - p) / n)
    assert ((freq - p).abs() / sigma).max() < 5, (freq, p)
    # soft samples: E[y] is not softmax(logits) in general, but the argmax of y_soft follows it too
    ys = bc.gumbel_softmax(x, 0.5, False, seed=2025)
    freq2 = torch.bincount(ys.argmax(-1), minlength=8).double() / n
    assert ((freq2 - p).abs() / sigma).max() < 5


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dt", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_gumbel_any_axis(dim, dt):
    x = _x((5, 37, 19), dt, f"gax/{dim}")
    ref = _gumbel_ref(x, dim, 0.8, 9, 1)
    out = R.poison(x.shape, dt)
    bc.gumbel_softmax(x, 0.8, dim=dim, seed=9, offset=1, out=out)
    _close(out, ref, dt, f"dim {dim}", tol=GTOL)


@pytest.mark.parametrize("layout", ["t", "slice", "perm3"])
def test_gumbel_strided(layout):
    if layout == "t":
        x = _x((130, 70), torch.float32, "gt").t()
    elif layout == "slice":
        x = _x((40, 260), torch.float32, "gsl")[:, ::2]
    else:
        x = _x((6, 7, 8, 9), torch.float32, "gp").permute(2, 0, 3, 1)
    for dim in (-1, 0):
        out = R.poison(x.shape, torch.float32)
        bc.gumbel_softmax(x, dim=dim, seed=4, offset=2, out=out)
        _close(out, _gumbel_ref(x, dim, 1.0, 4, 2), torch.float32, f"{layout} dim {dim}", tol=GTOL)


@pytest.mark.parametrize("n", [5, 700, 40000])
def test_gumbel_nan_inf_rows(n):
    x = _x((5, n), torch.float32, f"gnan/{n}")
    x[0, n // 2] = math.nan
    x[1, :] = -math.inf
    x[2, n - 1] = math.inf
    x[3, : max(n - 2, 1)] = -math.inf  # -inf elements get 0
    for hard in (False, True):
        y, ys = bc.gumbel_softmax(x, 1.0, hard, seed=1, return_soft=True)
        for r in range(3):
            assert torch.isnan(y[r]).all() and torch.isnan(ys[r]).all(), (hard, r)
        assert torch.isfinite(y[3:]).all()
        assert (ys[3, : max(n - 2, 1)] == 0).all() if n > 2 else True
    # the noise of rows 3.. is the noise at their own logical index in x
    g = _noise_ref(x.shape, 1, 0, torch.float32)[3:]
    ref = torch.softmax(x[3:].double() + g, -1)
    _close(bc.gumbel_softmax(x, seed=1)[3:], ref, torch.float32, "finite rows next to NaN rows", tol=GTOL)


def test_gumbel_empty_and_scalar():
    for shape, dim in [((0, 5), -1), ((5, 0), -1), ((5, 0), 0)]:
        x = torch.empty(shape, device=DEV)
        assert bc.gumbel_softmax(x, dim=dim, seed=0).shape == x.shape
        assert bc.gumbel_noise(x, seed=0).shape == x.shape
    x = torch.tensor(2.5, device=DEV)
    assert bc.gumbel_softmax(x, seed=0).item() == 1.0


def test_gumbel_errors():
    x = torch.randn(4, 5, device=DEV)
    with pytest.raises(TypeError):
        bc.gumbel_softmax(x)  # seed is required
    with pytest.raises(errors.InvalidArgument, match="seed"):
        bc.gumbel_softmax(x, seed=-1)
    with pytest.raises(errors.InvalidArgument, match="tau"):
        bc.gumbel_softmax(x, 0.0, seed=1)
    with pytest.raises(errors.InvalidArgument, match="axis"):
        bc.gumbel_softmax(x, dim=2, seed=1)
    with pytest.raises(errors.InvalidDType):
        bc.gumbel_softmax(x.to(torch.int32), seed=1)
    plan = bc.SoftmaxPlan.select(bc.SoftmaxDescriptor("gumbel_softmax", [bc.TensorSpec((4, 5), bc.float32)], -1,
                                                      bc.TensorSpec((4, 5), bc.float32)))
    with pytest.raises(errors.InvalidArgument, match="needs a seed"):
        plan.run(torch.empty(4, 5, device=DEV), x)
    with pytest.raises(errors.InvalidArgument, match="soft_out"):
        plan.run(torch.empty(4, 5, device=DEV), x, seed=1, soft_out=torch.empty(4, 5, device=DEV))
    with pytest.raises(errors.InvalidArgument, match="overlaps"):
        y = torch.empty(4, 5, device=DEV)
        bc.gumbel_softmax(x, seed=1, out=y, soft_out=y)


def test_gumbel_plan_run_and_graph_replay():
    x = _x((32, 1000), torch.bfloat16, "graph")
    d = bc.SoftmaxDescriptor("gumbel_softmax", [bc.TensorSpec((32, 1000), bc.bfloat16)], -1,
                             bc.TensorSpec((32, 1000), bc.bfloat16), tau=0.5, hard=False)
    plan = bc.SoftmaxPlan.select(d)
    assert plan.sku.layout == "rows_block"
    out = R.poison(x.shape, torch.bfloat16)
    plan.run(out, x, seed=8, offset=9)
    assert torch.equal(out, bc.gumbel_softmax(x, 0.5, seed=8, offset=9))
    s = torch.cuda.Stream()
    out2 = R.poison(x.shape, torch.bfloat16)
    with torch.cuda.stream(s):
        plan.run(out2, x, seed=8, offset=9)  # warm-up outside capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            plan.run(out2, x, seed=8, offset=9)
    out2.fill_(math.nan)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out2, out)


# ---- gumbel_softmax backward -------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", FP, ids=str)
@pytest.mark.parametrize("n", [1, 7, 100, 513, 5000, 40000])
def test_gumbel_backward_vs_autograd(n, dt):
    x = _x((6, n), dt, f"gb/{n}/{dt}")
    tau = 0.7
    g = _noise_ref(x.shape, 21, 2, dt)
    xd = x.detach().double().requires_grad_(True)
    ysd = torch.softmax((xd + g) / tau, -1)
    gy = _x(x.shape, torch.float64, f"gby/{n}", 1.0)
    (ref,) = torch.autograd.grad(ysd, xd, gy)
    _, ys = bc.gumbel_softmax(x, tau, seed=21, offset=2, return_soft=True)
    out = R.poison(x.shape, dt)
    bc.gumbel_softmax_backward(gy.to(dt), ys, tau, -1, out=out)
    # reference from the same rounded inputs, in float64
    yd, gyd = ys.double(), gy.to(dt).double()
    exp = yd * (gyd - (gyd * yd).sum(-1, keepdim=True)) / tau
    _close(out, exp, dt, f"gumbel backward {dt} {n}")
    if dt == torch.float64:
        _close(out, ref, dt, "gumbel backward vs autograd")


def test_gumbel_hard_straight_through_backward():
    # torch's hard estimator y_hard - y_soft.detach() + y_soft: the gradient flows to y_soft
    x = _x((8, 50), torch.float64, "st")
    g = _noise_ref(x.shape, 5, 0, torch.float64)
    xd = x.clone().requires_grad_(True)
    ys = torch.softmax((xd + g) / 0.5, -1)
    hard = torch.zeros_like(ys).scatter_(-1, ys.argmax(-1, keepdim=True), 1.0)
    yst = hard - ys.detach() + ys
    gy = _x(x.shape, torch.float64, "stg", 1.0)
    (ref,) = torch.autograd.grad(yst, xd, gy)
    y, ys_ours = bc.gumbel_softmax(x, 0.5, True, seed=5, return_soft=True)
    torch.testing.assert_close(y, hard)
    _close(bc.gumbel_softmax_backward(gy, ys_ours, 0.5), ref, torch.float64, "straight-through")


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gumbel_backward_any_axis(dim):
    x = _x((9, 40, 7), torch.float32, f"gba/{dim}")
    _, ys = bc.gumbel_softmax(x, 2.0, dim=dim, seed=1, return_soft=True)
    gy = _x(x.shape, torch.float32, f"gbay/{dim}", 1.0)
    out = R.poison(x.shape, torch.float32)
    bc.gumbel_softmax_backward(gy, ys, 2.0, dim, out=out)
    yd, gyd = ys.double(), gy.double()
    _close(out, yd * (gyd - (gyd * yd).sum(dim, keepdim=True)) / 2.0, torch.float32, f"dim {dim}")


# ---- sparsemax ------------------------------------------------------------------------------------------

def sparsemax_ref(x, dim=-1):
    """float64 sort-based reference (numpy), on the row shifted by its max: t = (cumsum(z_sorted)[k] - 1) / k
    for the largest k with 1 + k z_(k) > cumsum_k."""
    z = np.moveaxis(x.double().cpu().numpy(), dim, -1)
    shp = z.shape
    z = z.reshape(-1, shp[-1]) if shp[-1] else z.reshape(-1, 0)
    out = np.zeros_like(z)
    for r in range(z.shape[0]):
        row = z[r]
        if np.isnan(row).any() or np.isposinf(row).any() or np.isneginf(row).all():
            out[r] = np.nan
            continue
        row = row - row.max()  # shifted: exact for large magnitudes too
        s = np.sort(row)[::-1]
        fin = s[np.isfinite(s)]
        css = np.cumsum(fin)
        k = np.arange(1, fin.size + 1)
        support = 1 + k * fin > css
        kz = k[support][-1]
        t = (css[kz - 1] - 1) / kz
        out[r] = np.maximum(row - t, 0)
    out = out.reshape(shp)
    return torch.as_tensor(np.moveaxis(out, -1, dim), device=DEV)


class _SparsemaxRef(torch.autograd.Function):
    """A torch float64 sparsemax with the textbook Jacobian, for autograd references."""
    @staticmethod
    def forward(ctx, x, dim):
        y = sparsemax_ref(x, dim).to(x.dtype)
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        s = (y > 0).to(gy.dtype)
        mean = (gy * s).sum(ctx.dim, keepdim=True) / s.sum(ctx.dim, keepdim=True)
        return s * (gy - mean), None


@pytest.mark.parametrize("dt", FP, ids=str)
@pytest.mark.parametrize("n", LENS)
def test_sparsemax_rows(n, dt):
    for scale in (0.1, 1.0, 30.0):
        x = _x((9, n), dt, f"sm/{n}/{dt}/{scale}", scale)
        ref = sparsemax_ref(x)
        out = R.poison(x.shape, dt)
        res = bc.sparsemax(x, -1, out=out)
        assert res is out
        # the reference of the rounded input, compared in the output's precision
        _close(out, ref, dt, f"sparsemax {dt} n={n} scale={scale}")
        sums = out.double().sum(-1)
        # t carries one rounding of the compute type, shifting every y of the support by it
        tol = 5e-2 if dt in (torch.float16, torch.bfloat16) else 1e-4 + (n * 2.4e-7 if dt == torch.float32 else 0)
        assert (sums - 1).abs().max() < tol
        assert (out >= 0).all()


@pytest.mark.parametrize("dt", [torch.float32, torch.float64], ids=str)
def test_sparsemax_exact_support(dt):
    # support membership and values match the float64 reference (same set of nonzeros where the margin
    # to the threshold is not within rounding)
    x = _x((64, 777), dt, "supp", 2.0)
    y = bc.sparsemax(x)
    ref = sparsemax_ref(x)
    margin = (ref > 1e-5) | (ref == 0) & (x.double() < x.double().max(-1, keepdim=True).values - 2)
    assert torch.equal((y > 0)[margin], (ref > 0)[margin])
    _close(y, ref, dt, "exact support")


def test_sparsemax_special_rows():
    n = 300
    x = torch.zeros(10, n, device=DEV)
    x[1] = 5.0                                 # all ties: 1/n each
    x[2, 7] = 10.0                             # one dominant element: one-hot
    x[3, :2] = 1.0                             # two tied leaders: 0.5 each
    x[4] = torch.linspace(0, 1e-3, n)          # nearly flat
    x[5] = torch.arange(n, dtype=torch.float32) * 1e6  # huge magnitudes, gaps >> 1
    x[6] = 1e5 + torch.arange(n, dtype=torch.float32) * 0.125  # large offset, small gaps (f32 exact)
    x[7] = -(2.0 ** -torch.arange(n, dtype=torch.float32).clamp(max=120))  # geometric gaps
    x[8, : n // 2] = -math.inf
    x[9] = -1e30
    y = bc.sparsemax(x)
    ref = sparsemax_ref(x)
    torch.testing.assert_close(y.double(), ref, rtol=2e-5, atol=2e-6)
    torch.testing.assert_close(y[1], torch.full((n,), 1.0 / n, device=DEV))
    assert y[2, 7] == 1 and y[2].sum() == 1
    assert y[3, 0] == 0.5 and y[3, 1] == 0.5
    assert (y[8, : n // 2] == 0).all()


@pytest.mark.parametrize("n", [1, 40, 5000, 40000])
def test_sparsemax_nan_inf_rows(n):
    x = _x((5, n), torch.float32, f"snan/{n}")
    x[0, n // 2] = math.nan
    x[1, :] = -math.inf
    x[2, n - 1] = math.inf
    y = bc.sparsemax(x)
    assert torch.isnan(y[:3]).all()
    torch.testing.assert_close(y[3:].double(), sparsemax_ref(x[3:]), rtol=2e-5, atol=2e-6)


def test_sparsemax_one_element_rows_and_empty():
    x = _x((100, 1), torch.bfloat16, "one")
    assert (bc.sparsemax(x) == 1).all()
    for shape, dim in [((0, 5), -1), ((5, 0), -1), ((5, 0), 0)]:
        t = torch.empty(shape, device=DEV)
        assert bc.sparsemax(t, dim).shape == t.shape
        assert bc.sparsemax_backward(t, t, dim).shape == t.shape
    assert bc.sparsemax(torch.tensor(-3.0, device=DEV)).item() == 1.0


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float32], ids=str)
def test_sparsemax_large_rows(dt):
    x = _x((3, 262144 + 5), dt, "big", 4.0)
    out = R.poison(x.shape, dt)
    bc.sparsemax(x, out=out)
    _close(out, sparsemax_ref(x), dt, "262149-element rows")


@pytest.mark.parametrize("dim", [0, 1, 2, -2])
@pytest.mark.parametrize("dt", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_sparsemax_any_axis(dim, dt):
    x = _x((5, 37, 19), dt, f"sax/{dim}")
    out = R.poison(x.shape, dt)
    bc.sparsemax(x, dim, out=out)
    _close(out, sparsemax_ref(x, dim), dt, f"dim {dim}")


@pytest.mark.parametrize("layout", ["t", "slice", "offset", "perm3"])
def test_sparsemax_strided(layout):
    if layout == "t":
        x = _x((130, 70), torch.float32, "st").t()
    elif layout == "slice":
        x = _x((40, 260), torch.float32, "ssl")[:, ::2]
    elif layout == "offset":
        x = _x((40 * 64 + 1,), torch.float32, "soff")[1:].view(40, 64)
    else:
        x = _x((6, 7, 8, 9), torch.float32, "sp").permute(2, 0, 3, 1)
    for dim in (-1, 0):
        out = R.poison(x.shape, torch.float32)
        bc.sparsemax(x, dim, out=out)
        _close(out, sparsemax_ref(x, dim), torch.float32, f"{layout} dim {dim}")


def test_sparsemax_in_place_and_deterministic():
    x = _x((17, 1000), torch.float32, "inpl")
    ref = sparsemax_ref(x)
    a = bc.sparsemax(x)
    bc.sparsemax(x, out=x)
    _close(x, ref, torch.float32, "in place")
    assert torch.equal(a, x)


@pytest.mark.parametrize("dt", FP, ids=str)
@pytest.mark.parametrize("n", [1, 2, 33, 513, 5000, 40000])
def test_sparsemax_backward(n, dt):
    x = _x((7, n), dt, f"sb/{n}/{dt}", 2.0)
    y = bc.sparsemax(x)
    gy = _x(x.shape, dt, f"sbg/{n}", 1.0)
    out = R.poison(x.shape, dt)
    bc.sparsemax_backward(gy, y, -1, out=out)
    yd, gyd = y.double(), gy.double()
    s = (yd > 0).double()
    exp = s * (gyd - (gyd * s).sum(-1, keepdim=True) / s.sum(-1, keepdim=True))
    _close(out, exp, dt, f"sparsemax backward {dt} {n}")
    if dt == torch.float64:  # against autograd through the float64 reference
        xd = x.detach().double().requires_grad_(True)
        (ref,) = torch.autograd.grad(_SparsemaxRef.apply(xd, -1), xd, gyd)
        _close(out, ref, dt, "vs autograd")


def test_sparsemax_backward_finite_differences():
    x = _x((4, 30), torch.float64, "fd", 1.0)
    y = bc.sparsemax(x)
    gy = _x(x.shape, torch.float64, "fdg", 1.0)
    gx = bc.sparsemax_backward(gy, y)
    eps = 1e-6
    for r in range(4):
        for i in range(30):
            xp, xm = x.clone(), x.clone()
            xp[r, i] += eps
            xm[r, i] -= eps
            fd = ((bc.sparsemax(xp) - bc.sparsemax(xm)) * gy).sum() / (2 * eps)
            assert abs(fd.item() - gx[r, i].item()) < 1e-5, (r, i)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sparsemax_backward_any_axis(dim):
    x = _x((9, 40, 7), torch.float32, f"sba/{dim}")
    y = bc.sparsemax(x, dim)
    gy = _x(x.shape, torch.float32, f"sbay/{dim}", 1.0)
    out = R.poison(x.shape, torch.float32)
    bc.sparsemax_backward(gy, y, dim, out=out)
    yd, gyd = y.double(), gy.double()
    s = (yd > 0).double()
    exp = s * (gyd - (gyd * s).sum(dim, keepdim=True) / s.sum(dim, keepdim=True))
    _close(out, exp, torch.float32, f"dim {dim}")


def test_sparsemax_errors():
    x = torch.randn(4, 5, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="axis"):
        bc.sparsemax(x, 2)
    with pytest.raises(errors.InvalidDType, match="x is int32"):
        bc.sparsemax(torch.ones(4, 5, device=DEV, dtype=torch.int32))
    with pytest.raises(errors.InvalidDType):
        bc.sparsemax_backward(x, x.double())
    with pytest.raises(errors.InvalidArgument, match="overlaps"):
        y = _x((17, 101), torch.float32, "ov")
        bc.sparsemax(y[:, :100], -1, out=y[:, 1:])
    with pytest.raises(errors.InvalidArgument, match="numpy"):
        bc.sparsemax(np.zeros((3, 4), dtype=np.float32))


# ---- other frameworks ----------------------------------------------------------------------------

def test_cupy_inputs():
    cp = pytest.importorskip("cupy")
    x = _x((7, 1000), torch.float32, "cupy")
    xc = cp.asarray(x.cpu().numpy())
    y = bc.gumbel_softmax(xc, 0.7, seed=31, offset=4)
    assert isinstance(y, cp.ndarray)
    _close(torch.as_tensor(cp.asnumpy(y), device=DEV), _gumbel_ref(x, -1, 0.7, 31, 4), torch.float32,
           "gumbel_softmax cupy", tol=GTOL)
    # the same bits as the torch call on the same data
    assert torch.equal(torch.as_tensor(cp.asnumpy(y), device=DEV), bc.gumbel_softmax(x, 0.7, seed=31, offset=4))
    s = bc.sparsemax(xc, 0)
    assert isinstance(s, cp.ndarray)
    _close(torch.as_tensor(cp.asnumpy(s), device=DEV), sparsemax_ref(x, 0), torch.float32, "sparsemax cupy")
    gy = cp.asarray(_x((7, 1000), torch.float32, "cupy-gy").cpu().numpy())
    gx = bc.sparsemax_backward(gy, s, 0)
    assert isinstance(gx, cp.ndarray)
    assert torch.equal(torch.as_tensor(cp.asnumpy(gx), device=DEV),
                       bc.sparsemax_backward(torch.as_tensor(cp.asnumpy(gy), device=DEV),
                                             torch.as_tensor(cp.asnumpy(s), device=DEV), 0))


def test_jax_inputs():
    jax, dev = R.jax_gpu()
    x = _x((5, 333), torch.float32, "jax")
    xj = jax.device_put(x.cpu().numpy(), dev)
    y = bc.gumbel_softmax(xj, 1.3, dim=0, seed=8, offset=2)
    assert isinstance(y, jax.Array)
    _close(torch.as_tensor(np.asarray(y), device=DEV), _gumbel_ref(x, 0, 1.3, 8, 2), torch.float32,
           "gumbel_softmax jax", tol=GTOL)
    s = bc.sparsemax(xj)
    assert isinstance(s, jax.Array)
    _close(torch.as_tensor(np.asarray(s), device=DEV), sparsemax_ref(x), torch.float32, "sparsemax jax")
