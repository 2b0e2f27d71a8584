"""GPU correctness of the norm family (RMSNorm, LayerNorm): forward against float64 torch
references, the fused residual add (both outputs), saved statistics, backward against
torch.autograd in float64, layouts (strided / misaligned rows, many rows, long rows), empty
inputs, NaN containment, determinism, and one call each from CuPy and JAX. Outputs are
poisoned (NaN-filled) before every run so unwritten elements show up.
"""
import os
import re
import sys

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ref as R  # noqa: E402

F = torch.nn.functional
errors = bc.errors
DEV = "cuda"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]

DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
# (rtol, atol) of outputs rounded to their dtype, against the float64 reference.
TOL = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
EPS = {"rms_norm": 1e-6, "layer_norm": 1e-5}


def make(shape, dt, g, scale=1.0, shift=0.0):
    return (torch.randn(shape, generator=g, device=DEV, dtype=torch.float64) * scale + shift).to(dt)


def poison(shape, dt):
    return torch.full(shape, float("nan"), device=DEV, dtype=dt)


def stats_dt(dt):
    return torch.float64 if dt == torch.float64 else torch.float32


def ref_forward(op, h, w=None, b=None, eps=None):
    """float64 reference of op on the float64 values of h; returns (y, mean, rstd)."""
    h = h.double()
    eps = EPS[op] if eps is None else eps
    H = h.shape[-1]
    wd = None if w is None else w.double()
    if op == "layer_norm":
        y = F.layer_norm(h, (H,), wd, None if b is None else b.double(), eps)
        mean = h.mean(-1)
        rstd = torch.rsqrt(h.var(-1, unbiased=False) + eps)
        return y, mean, rstd
    rstd = torch.rsqrt(h.pow(2).mean(-1) + eps)
    if hasattr(F, "rms_norm"):
        y = F.rms_norm(h, (H,), wd, eps)
    else:
        y = h * rstd.unsqueeze(-1) * (1 if wd is None else wd)
    return y, None, rstd


def close(got, ref, dt, name, scale_atol=False, rtol=None):
    """got (dtype dt) equals ref (float64) rounded to dt, within TOL[dt]."""
    assert got.dtype == dt, (name, got.dtype, dt)
    assert tuple(got.shape) == tuple(ref.shape), (name, tuple(got.shape), tuple(ref.shape))
    t = TOL[dt] if rtol is None else rtol
    exp = ref.to(dt).double()
    atol = t * max(1.0, float(exp.abs().max())) if (scale_atol and exp.numel()) else t
    torch.testing.assert_close(got.double(), exp, rtol=t, atol=atol, equal_nan=True, msg=lambda m: f"{name}: {m}")


def call(op, x, w=None, b=None, **kw):
    if op == "rms_norm":
        return bc.rms_norm(x, w, **kw)
    return bc.layer_norm(x, w, b, **kw)


# ---- forward ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("H", [1, 7, 64, 4097, 8192])
@pytest.mark.parametrize("dtname", list(DT))
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_forward(op, dtname, H):
    dt = DT[dtname]
    g = R.gen(f"norm/fwd/{op}/{dtname}/{H}")
    x = make((37, H), dt, g, 2.0, 0.5)
    w = make((H,), dt, g, 0.5, 1.0)
    b = make((H,), dt, g) if op == "layer_norm" else None
    y = poison((37, H), dt)
    res = call(op, x, w, b, out=y)
    assert res is y
    ref, _, _ = ref_forward(op, x, w, b)
    close(y, ref, dt, f"{op} {dtname} H={H}")


@pytest.mark.parametrize("H", [16384, 65536, 262144])
@pytest.mark.parametrize("dtname", ["bfloat16", "float32"])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_long_rows(op, dtname, H):
    dt = DT[dtname]
    g = R.gen(f"norm/long/{op}/{dtname}/{H}")
    x = make((3, H), dt, g, 1.0, 3.0)  # a large mean: LayerNorm must not use E[x^2] - E[x]^2
    w = make((H,), dt, g)
    b = make((H,), dt, g) if op == "layer_norm" else None
    y = call(op, x, w, b)
    ref, _, _ = ref_forward(op, x, w, b)
    close(y, ref, dt, f"{op} H={H}", rtol=TOL[dt] * (3 if dt == torch.float32 else 1))


def test_layer_norm_large_mean_is_accurate():
    """A mean of 1e4 with unit spread: E[x^2] - E[x]^2 in f32 would lose everything."""
    g = R.gen("norm/largemean")
    x = make((8, 4096), torch.float32, g, 1.0, 1e4)
    y, mean, rstd = bc.layer_norm(x, save_stats=True)
    ref, rm, rr = ref_forward("layer_norm", x)
    # The mean of values near 1e4 is only known to f32's ulp there (~1e-3), and y inherits that
    # absolute error: bound ours by torch's own f32 error on the same data, not by 1e-4.
    theirs = F.layer_norm(x, (x.shape[-1],), eps=EPS["layer_norm"])
    err, err_torch = (y.double() - ref).abs().max().item(), (theirs.double() - ref).abs().max().item()
    assert err <= 2 * err_torch + 1e-6, (err, err_torch)
    torch.testing.assert_close(rstd.double(), rr, rtol=1e-4, atol=0)


@pytest.mark.parametrize("H", [128, 512, 4096, 8192, 16384, 65536])
@pytest.mark.parametrize("dtname", ["bfloat16", "float16"])
def test_layer_norm_one_pass_variance_falls_back(dtname, H):
    """16-bit LayerNorm takes E[x^2] - mean^2 from one reduction only where that is well
    conditioned: rows with |mean| of 1, 3.5 and 5 std (the last beyond the switch), a constant row
    (variance 0 from cancellation) and a row at 60 std, mixed so that neighbouring rows of one
    block (two rows per thread group at H = 4096) take different branches."""
    dt = DT[dtname]
    g = R.gen(f"norm/onepass/{dtname}/{H}")
    rows = 24
    shifts = torch.tensor([1.0, 3.5, 5.0, 60.0, 0.0, -5.0] * 4, dtype=torch.float64, device=DEV)
    x = (torch.randn(rows, H, generator=g, device=DEV, dtype=torch.float64) + shifts[:, None]).to(dt)
    x[4] = 7.25  # constant: variance 0
    w, b = make((H,), dt, g), make((H,), dt, g)
    y, mean, rstd = bc.layer_norm(x, w, b, save_stats=True)
    ref, rm, rr = ref_forward("layer_norm", x, w, b)
    close(y, ref, dt, f"layer_norm one-pass {dtname} H={H}")
    torch.testing.assert_close(rstd.double(), rr, rtol=1e-4, atol=0)
    torch.testing.assert_close(mean.double(), rm, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("wdt", [None, "same", "float32"])
@pytest.mark.parametrize("bdt", [None, "same", "float32"])
@pytest.mark.parametrize("H", [64, 4096])
def test_weight_bias_presence_and_dtypes(wdt, bdt, H):
    dt = torch.bfloat16
    g = R.gen(f"norm/wb/{wdt}/{bdt}/{H}")
    x = make((9, H), dt, g)
    pick = {None: None, "same": dt, "float32": torch.float32}
    w = None if wdt is None else make((H,), pick[wdt], g, 0.5, 1.0)
    b = None if bdt is None else make((H,), pick[bdt], g)
    y = bc.layer_norm(x, w, b)
    close(y, ref_forward("layer_norm", x, w, b)[0], dt, "layer_norm")
    if bdt is None:
        y = bc.rms_norm(x, w)
        close(y, ref_forward("rms_norm", x, w)[0], dt, "rms_norm")


@pytest.mark.parametrize("shape", [(100003, 128), (4, 5, 6, 64), (2, 3, 4097), (1, 512)])
def test_many_rows_and_leading_dims(shape):
    g = R.gen(f"norm/rows/{shape}")
    x = make(shape, torch.bfloat16, g)
    w = make(shape[-1:], torch.bfloat16, g)
    for op in ("rms_norm", "layer_norm"):
        y = call(op, x, w)
        close(y, ref_forward(op, x, w)[0], torch.bfloat16, f"{op} {shape}")


@pytest.mark.parametrize("layout", ["slice", "offset", "3d-slice"])
@pytest.mark.parametrize("H", [64, 4096, 4097])
def test_strided_rows(layout, H):
    """Rows with a row stride larger than H (a slice of a wider tensor), and misaligned rows."""
    dt = torch.float16
    g = R.gen(f"norm/strided/{layout}/{H}")
    if layout == "slice":
        x = make((33, H + 40), dt, g)[:, 8:8 + H]
        y = poison((33, H + 24), dt)[:, :H]
    elif layout == "offset":  # base pointer 1 element off: the looped scalar path
        x = make((33 * H + 1,), dt, g)[1:].view(33, H)
        y = poison((33 * H + 1,), dt)[1:].view(33, H)
    else:
        x = make((3, 11, 2 * H), dt, g)[:, :, :H]
        y = poison((3, 11, H), dt)
    w = make((H,), torch.float32, g)
    for op in ("rms_norm", "layer_norm"):
        res = call(op, x, w, out=y)
        assert res is y
        close(y, ref_forward(op, x, w)[0], dt, f"{op} {layout}")
        same = call(op, x.contiguous(), w)
        torch.testing.assert_close(y, same, rtol=2e-3, atol=2e-3)


def test_unit_last_stride_required():
    x = torch.randn(64, 32, device=DEV).t()
    with pytest.raises(errors.Unsupported, match="unit stride"):
        bc.rms_norm(x)


@pytest.mark.parametrize("dtname", ["bfloat16", "float32", "float64"])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
@pytest.mark.parametrize("H", [7, 512, 4096])
def test_residual_fused(op, dtname, H):
    dt = DT[dtname]
    g = R.gen(f"norm/res/{op}/{dtname}/{H}")
    x, r = make((21, H), dt, g), make((21, H), dt, g, 3.0)
    w = make((H,), dt, g)
    outs = call(op, x, w, residual=r)
    assert isinstance(outs, tuple) and len(outs) == 2
    y, ro = outs
    h_ref = (x.double() + r.double()).to(dt)
    close(ro, h_ref.double(), dt, "residual_out")
    close(y, ref_forward(op, ro, w)[0], dt, "y of residual_out")  # y normalizes exactly residual_out
    close(y, ref_forward(op, h_ref, w)[0], dt, "y")
    # In place, vLLM style: y over x, residual updated.
    x2, r2 = x.clone(), r.clone()
    out2 = call(op, x2, w, residual=r2, out=x2, residual_out=r2)
    assert out2[0] is x2 and out2[1] is r2
    assert torch.equal(x2, y) and torch.equal(r2, ro)


@pytest.mark.parametrize("dtname", ["bfloat16", "float32", "float64"])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_saved_stats(op, dtname):
    dt = DT[dtname]
    g = R.gen(f"norm/stats/{op}/{dtname}")
    x, r = make((5, 6, 1000), dt, g, 2.0, 1.0), make((5, 6, 1000), dt, g)
    outs = call(op, x, None, residual=r, save_stats=True)
    n = 4 if op == "layer_norm" else 3
    assert len(outs) == n
    ro = outs[1]
    _, mean, rstd = ref_forward(op, ro)
    sd = stats_dt(dt)
    assert outs[-1].dtype == sd and tuple(outs[-1].shape) == (5, 6)
    t = 1e-12 if dt == torch.float64 else 1e-5
    torch.testing.assert_close(outs[-1].double(), rstd, rtol=t, atol=t)
    if op == "layer_norm":
        torch.testing.assert_close(outs[2].double(), mean, rtol=t, atol=t)
    # Without residual: (y, [mean,] rstd).
    outs = call(op, x, save_stats=True)
    assert len(outs) == n - 1
    torch.testing.assert_close(outs[-1].double(), ref_forward(op, x)[2], rtol=t, atol=t)


def test_eps_is_used():
    x = torch.full((4, 64), 1e-3, device=DEV)
    y = bc.rms_norm(x, eps=1.0)
    torch.testing.assert_close(y, x / (1e-6 + 1.0) ** 0.5)


def test_zero_rows_and_empty():
    x = torch.empty(0, 64, device=DEV)
    assert bc.rms_norm(x).shape == (0, 64)
    y, mean, rstd = bc.layer_norm(x, save_stats=True)
    assert y.shape == (0, 64) and mean.shape == (0,) and rstd.shape == (0,)
    w = torch.randn(64, device=DEV)
    gx, gw = bc.rms_norm_backward(torch.empty(0, 64, device=DEV), x, rstd, w)
    assert gx.shape == (0, 64)
    assert torch.equal(gw, torch.zeros(64, device=DEV))  # an empty sum is zero, as torch gives
    gx, gw, gb = bc.layer_norm_backward(torch.empty(0, 64, device=DEV), x, mean, rstd, w, w)
    assert torch.equal(gw, torch.zeros(64, device=DEV)) and torch.equal(gb, torch.zeros(64, device=DEV))


@pytest.mark.parametrize("H", [64, 4096, 65536])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_nan_stays_in_its_row(op, H):
    x = torch.randn(8, H, device=DEV, dtype=torch.bfloat16)
    x[3, H // 2] = float("nan")
    y = call(op, x)
    assert torch.isnan(y[3]).all()
    assert not torch.isnan(y[torch.arange(8, device=DEV) != 3]).any()
    ref = F.layer_norm(x.float(), (H,)) if op == "layer_norm" else None
    if ref is not None:
        assert torch.equal(torch.isnan(y), torch.isnan(ref))


# ---- long rows: the thread-block cluster forward (sm_90; the register / looped kernels elsewhere) -----
# H >= 16384 with 16-byte aligned rows takes the cluster path by default (norm.<op>.row_cluster.c*):
# a row split over 2 / 4 / 8 blocks, their sums combined in rank order. 65528 pads the last
# block; 65544 fits no cluster shape (the looped kernel); f64 65536 is looped too.
_BC = {torch.float32: bc.float32, torch.float16: bc.float16, torch.bfloat16: bc.bfloat16, torch.float64: bc.float64}
# (cluster, tpr, items): every cluster shape the launcher instantiates (kClusterShapes).
CLUSTER_SHAPES = [(2, 256, 4), (4, 256, 2), (2, 512, 2), (4, 256, 4), (8, 256, 2), (4, 512, 4), (8, 256, 4),
                  (8, 512, 2), (8, 512, 4)]


def fwd_plan_run(op, x, w, b, r, save_stats, eps=None, y=None, ro=None):
    """One forward through the plan API (select sees the current BARACUDA_NORM_CFG); poisoned outputs."""
    dt = x.dtype
    rows, H = x.shape
    eps = EPS[op] if eps is None else eps
    d = bc.NormDescriptor(op, bc.TensorSpec(tuple(x.shape), _BC[dt], list(x.stride())),
                          weight=None if w is None else _BC[w.dtype], bias=None if b is None else _BC[b.dtype],
                          residual=r is not None, eps=eps, save_stats=save_stats)
    plan = bc.NormPlan.select(d)
    y = poison((rows, H), dt) if y is None else y
    if r is not None and ro is None:
        ro = poison((rows, H), dt)
    sd = stats_dt(dt)
    mean = poison((rows,), sd) if (save_stats and op == "layer_norm") else None
    rstd = poison((rows,), sd) if save_stats else None
    plan.run(y=y, x=x, weight=w, bias=b, residual=r, residual_out=ro, mean=mean, rstd=rstd)
    return plan, y, ro, mean, rstd


def check_fwd(op, x, w, b, r, y, ro, mean, rstd, name, rtol=None):
    dt = x.dtype
    h = x
    if r is not None:
        h = (x.double() + r.double()).to(dt)  # one rounding of the exact sum (as x.float() + r.float() for 16-bit)
        assert torch.equal(ro, h), f"{name}: residual_out"
    ref, rm, rr = ref_forward(op, h, w, b)
    t = TOL[dt] * (3 if dt == torch.float32 else 1) if rtol is None else rtol
    close(y, ref, dt, name, rtol=t)
    # f32 stats of rows up to 65536 long: f32 sums (per thread, then trees) against exact ones.
    rt, mt = (1e-12, 1e-12) if dt == torch.float64 else (1e-4, 2e-5)
    if rstd is not None:
        torch.testing.assert_close(rstd.double(), rr, rtol=rt, atol=0, msg=lambda m: f"{name} rstd: {m}")
    if mean is not None:
        torch.testing.assert_close(mean.double(), rm, rtol=mt, atol=mt, msg=lambda m: f"{name} mean: {m}")


@pytest.mark.parametrize("rows", [1, 3, 300])
@pytest.mark.parametrize("H", [16384, 65536, 65528, 65544])
@pytest.mark.parametrize("dtname", list(DT))
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_cluster_long_rows(op, dtname, H, rows, monkeypatch):
    monkeypatch.delenv("BARACUDA_NORM_CFG", raising=False)
    dt = DT[dtname]
    g = R.gen(f"norm/cluster/{op}/{dtname}/{H}/{rows}")
    x = make((rows, H), dt, g, 1.5, 2.0)  # a mean well off zero: LayerNorm's two passes matter
    layer = op == "layer_norm"
    # 1) weight (+ bias) in x's dtype, stats saved, no residual.
    w = make((H,), dt, g, 0.5, 1.0)
    b = make((H,), dt, g) if layer else None
    plan, y, ro, mean, rstd = fwd_plan_run(op, x, w, b, None, True)
    check_fwd(op, x, w, b, None, y, ro, mean, rstd, f"{op} {dtname} {rows}x{H}")
    # 2) f32 weight / bias (16-bit x), residual, stats.
    w32 = make((H,), torch.float32, g, 0.5, 1.0)
    b32 = make((H,), torch.float32, g) if layer else None
    r = make((rows, H), dt, g, 2.0)
    plan, y, ro, mean, rstd = fwd_plan_run(op, x, w32, b32, r, True)
    check_fwd(op, x, w32, b32, r, y, ro, mean, rstd, f"{op} {dtname} {rows}x{H} residual f32-params")
    # 3) no weight, no bias, no stats; twice: the same bits (fixed summation order). Without a
    #    residual, 16-bit rows of 2048 vectors take the one-block kernel (512 x 4), not the cluster.
    bare, y1, _, _, _ = fwd_plan_run(op, x, None, None, None, False)
    _, y2, _, _, _ = fwd_plan_run(op, x, None, None, None, False)
    check_fwd(op, x, None, None, None, y1, None, None, None, f"{op} {dtname} {rows}x{H} bare")
    assert torch.equal(y1, y2)
    cluster = dt != torch.float64 and H != 65544 or (dt == torch.float64 and H == 16384)
    assert (plan.sku.layout == "row_cluster") == cluster, plan.sku.name  # the residual plan of 2)
    bare_cluster = cluster and not (dt != torch.float32 and H in (16384, 65536, 65528))
    assert (bare.sku.layout == "row_cluster") == bare_cluster, bare.sku.name


def cluster_row_len(dt, cs, tpr, items, pad):
    """H of a row that fills a cluster shape: all cs x tpr x items 16-byte vectors ("exact"), one
    vector fewer ("one"), or all but one vector of the last block's share ("last-block-nearly-idle")."""
    V = 16 // torch.empty((), dtype=dt).element_size()
    share = tpr * items
    return (cs * share - {"exact": 0, "one": 1, "last-block-nearly-idle": share - 1}[pad]) * V


@pytest.mark.parametrize("pad", ["exact", "one", "last-block-nearly-idle"])
@pytest.mark.parametrize("dtname", list(DT))
@pytest.mark.parametrize("shape", CLUSTER_SHAPES, ids=[f"c{c}t{t}x{i}" for c, t, i in CLUSTER_SHAPES])
def test_cluster_shapes(shape, dtname, pad, monkeypatch):
    """Every instantiated cluster shape (the benchmark sweep's knobs), with a padded last block."""
    cs, tpr, items = shape
    dt = DT[dtname]
    H = cluster_row_len(dt, cs, tpr, items, pad)
    monkeypatch.setenv("BARACUDA_NORM_CFG", f"cluster={cs},tpr={tpr},items={items}")
    g = R.gen(f"norm/cluster-shape/{shape}/{dtname}/{pad}")
    rows = 5
    x = make((rows, H), dt, g, 1.0, -3.0)
    r = make((rows, H), dt, g)
    for op in ("rms_norm", "layer_norm"):
        w = make((H,), dt, g, 0.5, 1.0)
        b = make((H,), torch.float32, g) if op == "layer_norm" else None
        plan, y, ro, mean, rstd = fwd_plan_run(op, x, w, b, r, True)
        assert plan.sku.name == f"norm.{op}.row_cluster.c{cs}t{tpr}x{items}", plan.sku.name
        check_fwd(op, x, w, b, r, y, ro, mean, rstd, f"{op} {dtname} c{cs}t{tpr}x{items} H={H}")


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_cluster_strided_misaligned_and_in_place(op, monkeypatch):
    monkeypatch.delenv("BARACUDA_NORM_CFG", raising=False)
    dt, H, rows = torch.bfloat16, 65536, 7
    g = R.gen(f"norm/cluster-layouts/{op}")
    w = make((H,), dt, g, 0.5, 1.0)
    b = make((H,), dt, g) if op == "layer_norm" else None
    # A 16-byte aligned row stride larger than H (a slice of a wider tensor): still the cluster path.
    xw = make((rows, H + 64), dt, g)
    x = xw[:, 8:8 + H]
    rw = make((rows, H + 16), dt, g)
    r = rw[:, :H]
    plan, y, ro, mean, rstd = fwd_plan_run(op, x, w, b, r, True)
    assert plan.sku.layout == "row_cluster", plan.sku.name
    check_fwd(op, x, w, b, r, y, ro, mean, rstd, f"{op} strided")
    # The same rows contiguous: the same bits (same kernel, same order).
    _, yc, roc, _, _ = fwd_plan_run(op, x.contiguous(), w, b, r.contiguous(), True)
    assert torch.equal(y, yc) and torch.equal(ro, roc)
    # In place, vLLM style (y over x, residual_out over residual): the same bits.
    x2, r2 = x.contiguous(), r.contiguous()
    fwd_plan_run(op, x2, w, b, r2, False, y=x2, ro=r2)
    assert torch.equal(x2, yc) and torch.equal(r2, roc)
    # Base pointer one element off (not 16-byte aligned): the looped scalar kernel runs instead.
    flat = make((rows * H + 1,), dt, g)
    xm = flat[1:].view(rows, H)
    plan, y, ro, mean, rstd = fwd_plan_run(op, xm, w, b, None, True)
    check_fwd(op, xm, w, b, None, y, ro, mean, rstd, f"{op} misaligned")


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_cluster_nan_and_constant_rows(op, monkeypatch):
    """A NaN stays in its row (every row is its own cluster); a constant row gives LayerNorm's
    y = 0 exactly (zero deviations times the finite rstd = 1 / sqrt(eps))."""
    monkeypatch.delenv("BARACUDA_NORM_CFG", raising=False)
    H = 65536
    x = torch.randn(6, H, device=DEV, dtype=torch.bfloat16)
    x[2, H - 1] = float("nan")  # in the last block of the cluster
    x[4] = 0.25
    y = call(op, x)
    assert torch.isnan(y[2]).all()
    keep = torch.tensor([0, 1, 3, 4, 5], device=DEV)
    assert not torch.isnan(y[keep]).any()
    if op == "layer_norm":
        assert torch.equal(y[4], torch.zeros(H, device=DEV, dtype=torch.bfloat16))


# ---- backward ---------------------------------------------------------------------------------------

def autograd(op, x, w, b, go, eps=None):
    xd = x.detach().double().requires_grad_(True)
    wd = None if w is None else w.detach().double().requires_grad_(True)
    bd = None if b is None else b.detach().double().requires_grad_(True)
    y, _, _ = ref_forward(op, xd, wd, bd, eps)
    leaves = [t for t in (xd, wd, bd) if t is not None]
    grads = torch.autograd.grad(y, leaves, go.double())
    out = {"x": grads[0]}
    i = 1
    if wd is not None:
        out["w"] = grads[i]
        i += 1
    if bd is not None:
        out["b"] = grads[i]
    xhat = (y.detach() - (0 if bd is None else bd.detach())) / (1 if wd is None else wd.detach())
    return out, xhat


def check_sum(got, ref, l1, dt, name):
    """A column sum: |got - ref| <= tol * |ref| + c * sum |terms| (c: the accumulator's rounding)."""
    assert got.dtype == dt and tuple(got.shape) == tuple(ref.shape), (name, got.dtype, tuple(got.shape))
    c = 1e-12 if dt == torch.float64 else 2e-5
    bound = TOL[dt] * ref.abs() + c * l1 + (1e-12 if dt == torch.float64 else 1e-6)
    bad = ~((got.double() - ref).abs() <= bound)
    assert not bad.any(), f"{name}: {int(bad.sum())} off; first {got.flatten()[bad.flatten()][0].item()} vs " \
                          f"{ref.flatten()[bad.flatten()][0].item()}"


@pytest.mark.parametrize("H", [1, 7, 64, 1000, 4097, 8192, 16384])
@pytest.mark.parametrize("dtname", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_backward(op, dtname, H):
    dt = DT[dtname]
    g = R.gen(f"norm/bwd/{op}/{dtname}/{H}")
    rows = 300 if H <= 8192 else 40
    x = make((rows, H), dt, g, 2.0, 0.5)
    w = make((H,), dt, g, 0.5, 1.0)
    b = make((H,), dt, g) if op == "layer_norm" else None
    go = make((rows, H), dt, g)
    outs = call(op, x, w, b, save_stats=True)
    ref, xhat = autograd(op, x, w, b, go)
    gxo = poison((rows, H), dt)
    if op == "rms_norm":
        gx, gw = bc.rms_norm_backward(go, x, outs[1], w, out=gxo)
    else:
        gx, gw, gb = bc.layer_norm_backward(go, x, outs[1], outs[2], w, b, out=gxo)
        check_sum(gb, ref["b"], go.double().abs().sum(0), dt, "grad_bias")
    assert gx is gxo
    close(gx, ref["x"], dt, f"grad_x {op} {dtname} H={H}", scale_atol=True)
    check_sum(gw, ref["w"], (go.double() * xhat).abs().sum(0), dt, "grad_weight")


@pytest.mark.parametrize("H", [128, 512, 4096, 8192, 16384, 65536])
@pytest.mark.parametrize("dtname", ["bfloat16", "float16"])
def test_layer_norm_backward_large_mean(dtname, H):
    """16-bit LayerNorm backward evaluates grad_x as rstd (gy w + k - c2r x), k = c2r mean - c1
    (mean folded into one constant): rows whose |mean| is 0, 5, 60 and 300 std, where c2r x and
    k nearly cancel, against autograd on the same 16-bit x; every backward kernel class (warp
    groups, blocks, prefetching blocks, clusters) by H."""
    dt = DT[dtname]
    g = R.gen(f"norm/bwd/largemean/{dtname}/{H}")
    rows = 16
    shifts = torch.tensor([0.0, 5.0, 60.0, -300.0] * 4, dtype=torch.float64, device=DEV)
    x = (torch.randn(rows, H, generator=g, device=DEV, dtype=torch.float64) + shifts[:, None]).to(dt)
    w, b = make((H,), dt, g, 0.5, 1.0), make((H,), dt, g)
    go = make((rows, H), dt, g)
    _, mean, rstd = bc.layer_norm(x, w, b, save_stats=True)
    ref, xhat = autograd("layer_norm", x, w, b, go)
    gxo = poison((rows, H), dt)
    gx, gw, gb = bc.layer_norm_backward(go, x, mean, rstd, w, b, out=gxo)
    close(gx, ref["x"], dt, f"grad_x large mean {dtname} H={H}", scale_atol=True)
    check_sum(gw, ref["w"], (go.double() * xhat).abs().sum(0), dt, "grad_weight")
    check_sum(gb, ref["b"], go.double().abs().sum(0), dt, "grad_bias")


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_backward_without_weight_and_f32_params(op):
    g = R.gen(f"norm/bwd/params/{op}")
    x, go = make((50, 256), torch.bfloat16, g), make((50, 256), torch.bfloat16, g)
    outs = call(op, x, save_stats=True)
    ref, _ = autograd(op, x, None, None, go)
    if op == "rms_norm":
        gx, gw = bc.rms_norm_backward(go, x, outs[1])
    else:
        gx, gw, gb = bc.layer_norm_backward(go, x, outs[1], outs[2])
        assert gb is None
    assert gw is None
    close(gx, ref["x"], torch.bfloat16, "grad_x", scale_atol=True)
    # float32 weight / bias with bf16 x: float32 gradients.
    w = make((256,), torch.float32, g, 0.5, 1.0)
    b = make((256,), torch.float32, g) if op == "layer_norm" else None
    outs = call(op, x, w, b, save_stats=True)
    ref, xhat = autograd(op, x, w, b, go)
    if op == "rms_norm":
        gx, gw = bc.rms_norm_backward(go, x, outs[1], w)
    else:
        gx, gw, gb = bc.layer_norm_backward(go, x, outs[1], outs[2], w, b)
        check_sum(gb, ref["b"], go.double().abs().sum(0), torch.float32, "grad_bias")
    check_sum(gw, ref["w"], (go.double() * xhat).abs().sum(0), torch.float32, "grad_weight")


@pytest.mark.parametrize("rows,H,dtname,pdt", [
    (16384, 128, "bfloat16", None),     # ~1000 partial rows over 128 columns
    (20000, 100, "float16", "float32"),  # H % 4 != 0: one column per thread; float32 parameters
    (6000, 36, "float64", None),         # float64 partials, two columns per thread
    (3000, 4096, "float32", None),
    (300, 65536, "bfloat16", None),      # the cluster kernel's partials (one row per cluster)
])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_param_grads_from_many_partials(op, rows, H, dtname, pdt):
    """grad_weight / grad_bias are the column sums of the backward kernel's partial rows (one
    finish launch for both): shapes from few to a thousand partial rows, every column-group width,
    against float64 autograd; a second run gives the same bits."""
    dt = DT[dtname]
    pt = DT[pdt] if pdt else dt
    g = R.gen(f"norm/bwd/partials/{op}/{rows}/{H}")
    x, go = make((rows, H), dt, g, 1.0, 0.5), make((rows, H), dt, g)
    w = make((H,), pt, g, 0.5, 1.0)
    b = make((H,), pt, g) if op == "layer_norm" else None
    outs = call(op, x, w, b, save_stats=True)
    ref, xhat = autograd(op, x, w, b, go)
    def run():
        if op == "rms_norm":
            return bc.rms_norm_backward(go, x, outs[1], w)[1:]
        return bc.layer_norm_backward(go, x, outs[1], outs[2], w, b)[1:]
    got = run()
    check_sum(got[0], ref["w"], (go.double() * xhat).abs().sum(0), pt, f"grad_weight {rows}x{H}")
    if op == "layer_norm":
        check_sum(got[1], ref["b"], go.double().abs().sum(0), pt, f"grad_bias {rows}x{H}")
    again = run()
    for a, c in zip(got, again):
        assert torch.equal(a, c)


@pytest.mark.parametrize("rows,H", [(300, 65536), (4096, 1024), (20000, 128), (3000, 1001)])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_finish_launch_variants(op, rows, H, monkeypatch):
    """The dweight / dbias finish launched plainly, programmatically (PDL) and triggered as the row
    kernel starts (fpdl=0 / 1 / 2; the cluster, register, small-group and looped paths by shape):
    the same bits; other slice counts (fty): the same sums to rounding, against float64 autograd."""
    dt = torch.bfloat16
    layer = op == "layer_norm"
    g = R.gen(f"norm/bwd/finish/{op}/{rows}/{H}")
    x, go = make((rows, H), dt, g, 1.0, 0.5), make((rows, H), dt, g)
    w = make((H,), dt, g, 0.5, 1.0)
    b = make((H,), dt, g) if layer else None
    outs = call(op, x, w, b, save_stats=True)
    ref, xhat = autograd(op, x, w, b, go)
    spec = bc.TensorSpec((rows, H), bc.bfloat16)
    got = {}
    for cfg in ["fpdl=0", "fpdl=1", "fpdl=2", "", "fty=1", "fty=32,fpdl=0"]:
        if cfg:
            monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", cfg)
        else:
            monkeypatch.delenv("BARACUDA_NORM_BWD_CFG", raising=False)
        plan = bc.NormPlan.select(bc.NormDescriptor(op + "_backward", spec, weight=bc.bfloat16,
                                                    bias=bc.bfloat16 if layer else None))
        ws = torch.empty(max(1, plan.workspace_bytes()), device=DEV, dtype=torch.uint8)
        gx, gw = poison((rows, H), dt), poison((H,), dt)
        gb = poison((H,), dt) if layer else None
        plan.run(grad_x=gx, grad_out=go, x=x, mean=outs[1] if layer else None, rstd=outs[-1], weight=w,
                 grad_weight=gw, grad_bias=gb, workspace=ws)
        check_sum(gw, ref["w"], (go.double() * xhat).abs().sum(0), dt, f"grad_weight {cfg}")
        if layer:
            check_sum(gb, ref["b"], go.double().abs().sum(0), dt, f"grad_bias {cfg}")
        got[cfg] = (gx, gw, gb)
    close(got[""][0], ref["x"], dt, f"grad_x {op} {rows}x{H}", scale_atol=True)
    for cfg in ("fpdl=1", "fpdl=2", ""):
        for a, c in zip(got[cfg], got["fpdl=0"]):
            assert a is None or torch.equal(a, c), cfg


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_backward_fused_residual(op):
    """h = x + residual; y = norm(h): grad_x (= grad_residual of the caller) includes the gradient
    arriving at residual_out."""
    g = R.gen(f"norm/bwd/res/{op}")
    x, r = make((64, 1024), torch.float64, g), make((64, 1024), torch.float64, g)
    w = make((1024,), torch.float64, g)
    outs = call(op, x, w, residual=r, save_stats=True)
    y, ro = outs[0], outs[1]
    go, gro = make((64, 1024), torch.float64, g), make((64, 1024), torch.float64, g)
    xd, rd = x.clone().requires_grad_(True), r.clone().requires_grad_(True)
    h = xd + rd
    yr, _, _ = ref_forward(op, h, w)
    close(y, yr.detach(), torch.float64, "y")
    close(ro, h.detach(), torch.float64, "residual_out")
    torch.autograd.backward([yr, h], [go, gro])
    if op == "rms_norm":
        gx, _ = bc.rms_norm_backward(go, ro, outs[2], w, grad_residual=gro)
    else:
        gx, _, _ = bc.layer_norm_backward(go, ro, outs[2], outs[3], w, grad_residual=gro)
    close(gx, xd.grad, torch.float64, "grad_x")
    close(gx, rd.grad, torch.float64, "grad_residual")


@pytest.mark.parametrize("H", [128, 4096, 65536])
def test_backward_is_deterministic(H):
    g = R.gen(f"norm/det/{H}")
    rows = 2048 if H < 65536 else 64
    x, go = make((rows, H), torch.bfloat16, g), make((rows, H), torch.bfloat16, g)
    w, b = make((H,), torch.bfloat16, g), make((H,), torch.bfloat16, g)
    _, mean, rstd = bc.layer_norm(x, w, b, save_stats=True)
    a = bc.layer_norm_backward(go, x, mean, rstd, w, b)
    c = bc.layer_norm_backward(go, x, mean, rstd, w, b)
    for u, v in zip(a, c):
        assert torch.equal(R.bits(u), R.bits(v))


# ---- long rows, backward: a persistent grid of thread-block clusters (sm_90) ---------------------------
# Rows of more than 2048 16-byte vectors (bf16 H > 16384, f32 H > 8192, f64 H > 4096) up to 8192
# take norm.<op>_backward.row_cluster.c*: a row split over 4 / 8 blocks, each accumulating dweight /
# dbias of its columns over the rows of its cluster (cluster c: rows c, c + G, ...).
# (cluster, tpr, items): every backward cluster shape the launcher instantiates (kBwdClusterShapes).
BWD_CLUSTER_SHAPES = [(4, 256, 3), (4, 256, 4), (8, 256, 3), (8, 256, 4)]


def bwd_plan_run(op, go, x, w, b, gres=None, layer_stats=None, gx=None):
    """One backward through the plan API (select sees the current BARACUDA_NORM_BWD_CFG); poisoned
    outputs. Returns (plan, grad_x, grad_weight, grad_bias)."""
    dt = x.dtype
    rows, H = x.shape
    mean, rstd = layer_stats
    d = bc.NormDescriptor(op + "_backward", bc.TensorSpec(tuple(x.shape), _BC[dt], list(x.stride())),
                          weight=None if w is None else _BC[w.dtype], bias=None if b is None else _BC[b.dtype],
                          residual=gres is not None)
    plan = bc.NormPlan.select(d)
    ws = torch.full((max(1, plan.workspace_bytes()),), 0xFF, device=DEV, dtype=torch.uint8)  # NaN partials
    gx = poison((rows, H), dt) if gx is None else gx
    gw = None if w is None else poison((H,), w.dtype)
    gb = None if b is None else poison((H,), b.dtype)
    plan.run(grad_x=gx, grad_out=go, x=x, mean=mean, rstd=rstd, weight=w, grad_weight=gw, grad_bias=gb,
             grad_residual=gres, workspace=ws)
    return plan, gx, gw, gb


def check_bwd(op, go, x, w, b, gres, gx, gw, gb, name):
    dt = x.dtype
    ref, xhat = autograd(op, x, w, b, go)
    want = ref["x"] + (0 if gres is None else gres.double())
    close(gx, want, dt, f"{name} grad_x", scale_atol=True)
    if w is not None:
        check_sum(gw, ref["w"], (go.double() * xhat).abs().sum(0), w.dtype, f"{name} grad_weight")
    if b is not None:
        check_sum(gb, ref["b"], go.double().abs().sum(0), b.dtype, f"{name} grad_bias")


def fwd_stats(op, x):
    outs = call(op, x, save_stats=True)
    return (outs[1], outs[2]) if op == "layer_norm" else (None, outs[1])


@pytest.mark.parametrize("rows,clusters", [(1, 0), (5, 0), (37, 4)])
@pytest.mark.parametrize("pad", ["exact", "one", "last-block-nearly-idle"])
@pytest.mark.parametrize("dtname", list(DT))
@pytest.mark.parametrize("shape", BWD_CLUSTER_SHAPES, ids=[f"c{c}t{t}x{i}" for c, t, i in BWD_CLUSTER_SHAPES])
def test_bwd_cluster_shapes(shape, dtname, pad, rows, clusters, monkeypatch):
    """Every instantiated backward cluster shape, padded rows, 1 row, and rows that do not divide
    among the clusters (37 rows over 4 clusters: 10, 9, 9, 9); grad_residual; f32 weight / bias."""
    cs, tpr, items = shape
    dt = DT[dtname]
    H = cluster_row_len(dt, cs, tpr, items, pad)
    cfg = f"cluster={cs},tpr={tpr},items={items}" + (f",clusters={clusters}" if clusters else "")
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", cfg)
    g = R.gen(f"norm/bwd-cluster-shape/{shape}/{dtname}/{pad}/{rows}")
    x = make((rows, H), dt, g, 1.5, 0.75)
    go = make((rows, H), dt, g)
    gres = make((rows, H), dt, g)
    for op in ("rms_norm", "layer_norm"):
        w = make((H,), dt, g, 0.5, 1.0)
        b = make((H,), torch.float32, g) if op == "layer_norm" else None
        stats = fwd_stats(op, x)
        plan, gx, gw, gb = bwd_plan_run(op, go, x, w, b, gres, stats)
        assert plan.sku.name == f"norm.{op}_backward.row_cluster.c{cs}t{tpr}x{items}", plan.sku.name
        # Default grid: the clusters resident at once (more than 5 on any sm_90 part), one per row at most.
        want_clusters = min(rows, clusters) if clusters else rows
        assert f"persistent grid of {want_clusters} clusters" in plan.sku.precision.math, plan.sku.precision.math
        check_bwd(op, go, x, w, b, gres, gx, gw, gb, f"{op} {dtname} c{cs}t{tpr}x{items} {rows}x{H}")


def _bwd_long_rows(op, dt, rows, H, key):
    """x, grad_out, weight, bias (LayerNorm) and the forward's saved stats for a backward test."""
    g = R.gen(key)
    x = make((rows, H), dt, g, 2.0, -1.0)
    go = make((rows, H), dt, g)
    w = make((H,), dt, g, 0.5, 1.0)
    b = make((H,), dt, g) if op == "layer_norm" else None
    return x, go, w, b, fwd_stats(op, x)


@pytest.mark.parametrize("dtname", ["bfloat16", "float16", "float32", "float64"])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_bwd_cluster_default_long_rows(op, dtname, monkeypatch):
    """The default path for the longest rows of each dtype (8192 vectors) over more rows than
    clusters; the same bits twice; close to the one-block xs kernel (cluster=1) / the loop."""
    monkeypatch.delenv("BARACUDA_NORM_BWD_CFG", raising=False)
    dt = DT[dtname]
    V = 16 // torch.empty((), dtype=dt).element_size()
    H, rows = 8192 * V, 61
    x, go, w, b, stats = _bwd_long_rows(op, dt, rows, H, f"norm/bwd-cluster-default/{op}/{dtname}")
    plan, gx, gw, gb = bwd_plan_run(op, go, x, w, b, None, stats)
    assert plan.sku.name == f"norm.{op}_backward.row_cluster.c8t256x4", plan.sku.name
    # The persistent grid: the clusters resident at once (2 blocks per SM at most: SMs / 4 clusters of
    # 8), fewer than the rows here, so every cluster takes 2 or 3 of the 61 rows.
    m = re.search(r"persistent grid of (\d+) clusters", plan.sku.precision.math)
    sms = torch.cuda.get_device_properties(DEV).multi_processor_count
    assert m and 8 <= int(m.group(1)) <= min(rows, sms // 4 + 1), plan.sku.precision.math
    check_bwd(op, go, x, w, b, None, gx, gw, gb, f"{op} {dtname} default {rows}x{H}")
    _, gx2, gw2, gb2 = bwd_plan_run(op, go, x, w, b, None, stats)
    assert torch.equal(R.bits(gx), R.bits(gx2)) and torch.equal(R.bits(gw), R.bits(gw2))
    if b is not None:
        assert torch.equal(R.bits(gb), R.bits(gb2))
    # The old path stays reachable: cluster=1 gives the one-block xs kernel (16-bit) or the loop.
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", "cluster=1")
    plan1, gx1, gw1, gb1 = bwd_plan_run(op, go, x, w, b, None, stats)
    assert "row_cluster" not in plan1.sku.name, plan1.sku.name
    check_bwd(op, go, x, w, b, None, gx1, gw1, gb1, f"{op} {dtname} cluster=1 {rows}x{H}")


@pytest.mark.parametrize("H", [65536, 65528])
@pytest.mark.parametrize("dtname", ["bfloat16", "float16"])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_bwd_cluster_weight_in_shared_memory(op, dtname, H, monkeypatch):
    """The specialized backward cluster kernel reads its block's weight from shared memory (copied
    with the first row; the default) or per row from global memory (pshared=0): the same bits,
    right against float64; a padded row (65528: the last block's last vector is outside)."""
    dt = DT[dtname]
    x, go, w, b, stats = _bwd_long_rows(op, dt, 61, H, f"norm/bwd-cluster-ws/{op}/{dtname}/{H}")
    outs = []
    for cfg in ("", "pshared=0"):
        monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", cfg)
        plan, gx, gw, gb = bwd_plan_run(op, go, x, w, b, None, stats)
        assert "row_cluster.c8t256x4" in plan.sku.name, plan.sku.name
        check_bwd(op, go, x, w, b, None, gx, gw, gb, f"{op} {dtname} {H} [{cfg}]")
        outs.append((gx, gw, gb))
    for u, v in zip(*outs):
        assert (u is None) == (v is None)
        if u is not None:
            assert torch.equal(R.bits(u), R.bits(v)), f"{op} {dtname} {H}: shared-memory weight vs global"


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_bwd_cluster_layouts_and_params(op, monkeypatch):
    """bf16 H = 65536: no weight (grad_x only), f32 weight / bias, a strided (sliced) x, grad_x in
    place over grad_residual, and a misaligned base pointer (the looped kernel, same workspace)."""
    monkeypatch.delenv("BARACUDA_NORM_BWD_CFG", raising=False)
    dt, H, rows = torch.bfloat16, 65536, 29
    g = R.gen(f"norm/bwd-cluster-layouts/{op}")
    x = make((rows, H), dt, g, 1.0, 0.5)
    go = make((rows, H), dt, g)
    stats = fwd_stats(op, x)
    # No weight / bias.
    plan, gx, gw, gb = bwd_plan_run(op, go, x, None, None, None, stats)
    assert plan.sku.layout == "row_cluster", plan.sku.name
    check_bwd(op, go, x, None, None, None, gx, gw, gb, f"{op} bare")
    # f32 weight / bias; x and grad_out as slices of wider rows (16-byte aligned row strides).
    w = make((H,), torch.float32, g, 0.5, 1.0)
    b = make((H,), torch.float32, g) if op == "layer_norm" else None
    xw = make((rows, H + 64), dt, g)
    xs = xw[:, 8:8 + H]
    gow = make((rows, H + 16), dt, g)
    gos = gow[:, :H]
    stats_s = fwd_stats(op, xs)
    plan, gx, gw, gb = bwd_plan_run(op, gos, xs, w, b, None, stats_s)
    assert plan.sku.layout == "row_cluster", plan.sku.name
    check_bwd(op, gos, xs, w, b, None, gx, gw, gb, f"{op} strided f32-params")
    # grad_x written over grad_residual (in place).
    gres = make((rows, H), dt, g)
    keep = gres.clone()
    plan, gx, gw, gb = bwd_plan_run(op, go, x, w, b, gres, stats, gx=gres)
    check_bwd(op, go, x, w, b, keep, gx, gw, gb, f"{op} in place")
    # Misaligned base pointer: the looped kernel (its partials fit the plan's workspace).
    flat = make((rows * H + 1,), dt, g)
    xm = flat[1:].view(rows, H)
    stats_m = fwd_stats(op, xm)
    plan, gx, gw, gb = bwd_plan_run(op, go, xm, w, b, None, stats_m)
    check_bwd(op, go, xm, w, b, None, gx, gw, gb, f"{op} misaligned")


# ---- the forward that prefetches a block's next row (prefetch=1; persistent grid, no residual) -------------
# (tpr, items): every instantiated prefetching shape (fwd_prefetch_supported).
PREFETCH_SHAPES = [(256, 4), (512, 2), (512, 4), (1024, 4), (1024, 8)]


@pytest.mark.parametrize("dtname", list(DT))
@pytest.mark.parametrize("shape", PREFETCH_SHAPES, ids=[f"t{t}x{i}" for t, i in PREFETCH_SHAPES])
def test_fwd_prefetch_shapes(shape, dtname, monkeypatch):
    """More rows than the persistent grid holds (each block loops, its next row copied while the
    current one is reduced), a row one vector short of the block (padded lanes); the same bits as
    the kernel without the prefetch; a residual plan ignores the knob."""
    tpr, items = shape
    dt = DT[dtname]
    V = 16 // torch.empty((), dtype=dt).element_size()
    H = (tpr * items - 1) * V
    blocks_per_sm = min(2048 // tpr, max(1, 65536 // ((48 + 4 * items) * tpr)), 228 * 1024 // (tpr * items * 16 + 1536))
    rows = 132 * blocks_per_sm * 2 + 7  # two and a bit rounds of the grid
    g = R.gen(f"norm/fwd-prefetch/{shape}/{dtname}")
    x = make((rows, H), dt, g, 1.5, 2.0)
    cfg = f"tpr={tpr},items={items},rows=1"
    for op in ("rms_norm", "layer_norm"):
        w = make((H,), dt, g, 0.5, 1.0)
        b = make((H,), dt, g) if op == "layer_norm" else None
        monkeypatch.setenv("BARACUDA_NORM_CFG", cfg + ",cluster=1,prefetch=1")
        plan, y, _, mean, rstd = fwd_plan_run(op, x, w, b, None, True)
        assert plan.sku.name == f"norm.{op}.row_registers.t{tpr}x{items}p", plan.sku.name
        check_fwd(op, x, w, b, None, y, None, mean, rstd, f"{op} {dtname} t{tpr}x{items}p {rows}x{H}")
        # Against the generic kernel without the prefetch (the prefetching kernels are generic).
        monkeypatch.setenv("BARACUDA_NORM_CFG", cfg + ",cluster=1,prefetch=0,spec=0")
        plan0, y0, _, mean0, rstd0 = fwd_plan_run(op, x, w, b, None, True)
        assert plan0.sku.name == f"norm.{op}.row_registers.t{tpr}x{items}", plan0.sku.name
        assert torch.equal(R.bits(y), R.bits(y0)) and torch.equal(R.bits(rstd), R.bits(rstd0))
        # With a residual the prefetching kernel does not exist: the knob is ignored.
        monkeypatch.setenv("BARACUDA_NORM_CFG", cfg + ",cluster=1,prefetch=1")
        r = make((rows, H), dt, g)
        planr, yr, ro, meanr, rstdr = fwd_plan_run(op, x, w, b, r, True)
        assert not planr.sku.name.endswith("p"), planr.sku.name
        check_fwd(op, x, w, b, r, yr, ro, meanr, rstdr, f"{op} {dtname} t{tpr}x{items} residual")


# ---- the forward with parameters through shared memory (1024 x 8): pshared=1 (the last parameter
# resident, a persistent grid), pshared=2 (weight / bias copied into a ring ahead of the output loop)
PARAM_SMEM_CASES = [(1024, 8, 65536, 1), (1024, 8, 65528, 1), (1024, 8, 60000, 1), (1024, 8, 65536, 2),
                    (1024, 8, 65528, 2), (1024, 8, 60000, 2), (512, 4, 16384, 2), (512, 4, 16376, 2),
                    (256, 4, 8192, 2), (256, 4, 8184, 2)]


@pytest.mark.parametrize("dtname", ["bfloat16", "float16"])
@pytest.mark.parametrize("tpr,items,H,mode", PARAM_SMEM_CASES, ids=[f"t{t}x{i}-{h}-p{m}" for t, i, h, m in PARAM_SMEM_CASES])
def test_fwd_param_smem(tpr, items, H, mode, dtname, monkeypatch):
    """More rows than the persistent grid (each block loops over rows: the resident parameter
    copied once, the ring reused row after row), rows short of the block (padded lanes, the ring's
    empty groups); bit-equal to the kernel reading the parameters from global memory; f32
    parameters and a residual (no such kernel: the knob is ignored) stay correct."""
    dt = DT[dtname]
    rows = 132 * 2 + 7
    g = R.gen(f"norm/fwd-pshared/{H}/{dtname}")
    x = make((rows, H), dt, g, 1.5, 2.0)
    x[5, 7] = float("nan")
    cfg = f"tpr={tpr},items={items},rows=1,cluster=1"
    shape = f"t{tpr}x{items}"
    for op in ("rms_norm", "layer_norm"):
        w = make((H,), dt, g, 0.5, 1.0)
        b = make((H,), dt, g) if op == "layer_norm" else None
        monkeypatch.setenv("BARACUDA_NORM_CFG", cfg + f",pshared={mode}")
        plan, y, _, mean, rstd = fwd_plan_run(op, x, w, b, None, True)
        assert plan.sku.name == f"norm.{op}.row_registers.{shape}" + "sq"[mode - 1], plan.sku.name
        keep = torch.ones(rows, dtype=torch.bool, device=DEV)
        keep[5] = False
        check_fwd(op, x[keep], w, b, None, y[keep], None, None if mean is None else mean[keep], rstd[keep],
                  f"{op} {dtname} pshared {rows}x{H}")
        assert bool(torch.isnan(y[5]).all()), f"{op}: the NaN row"
        monkeypatch.setenv("BARACUDA_NORM_CFG", cfg + ",pshared=0")
        plan0, y0, _, mean0, rstd0 = fwd_plan_run(op, x, w, b, None, True)
        assert plan0.sku.name == f"norm.{op}.row_registers.{shape}", plan0.sku.name
        assert torch.equal(R.bits(y), R.bits(y0)) and torch.equal(R.bits(rstd), R.bits(rstd0))
        monkeypatch.setenv("BARACUDA_NORM_CFG", cfg + f",pshared={mode}")
        # f32 parameters: the plain kernel.
        wf = w.float()
        bf = None if b is None else b.float()
        planf, yf, _, meanf, rstdf = fwd_plan_run(op, x[6:], wf, bf, None, True)
        assert planf.sku.name.endswith(shape), planf.sku.name
        check_fwd(op, x[6:], wf, bf, None, yf, None, meanf, rstdf, f"{op} {dtname} pshared f32 params")
        # With a residual there is no such kernel: the knob is ignored.
        r = make((rows, H), dt, g)
        planr, yr, ro, meanr, rstdr = fwd_plan_run(op, x[6:], w, b, r[6:], True)
        assert not planr.sku.name.endswith(("s", "q")), planr.sku.name
        check_fwd(op, x[6:], w, b, r[6:], yr, ro, meanr, rstdr, f"{op} {dtname} pshared residual")


# ---- the backward that prefetches a group's next row (prefetch=1; block groups: grad_out and x behind the
# accumulators in shared memory; small groups: in registers) -------------------------------------------
# (tpr, items): every instantiated prefetching backward shape (bwd_prefetch_supported).
BWD_PREFETCH_SHAPES = [(128, 4), (256, 2), (256, 4), (512, 1), (512, 2), (512, 3), (512, 4), (16, 1), (32, 2)]


@pytest.mark.parametrize("dtname", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", BWD_PREFETCH_SHAPES, ids=[f"t{t}x{i}" for t, i in BWD_PREFETCH_SHAPES])
def test_bwd_prefetch_shapes(shape, dtname, monkeypatch):
    """Rows for several rounds of the backward grid (each block loops over rows, the next one's
    grad_out and x copied while this one is reduced), a row one vector short of the block, a fused
    grad_residual; grad_x has the same bits as the kernel without the prefetch."""
    tpr, items = shape
    dt = DT[dtname]
    V = 16 // torch.empty((), dtype=dt).element_size()
    H = (tpr * items - 1) * V
    rows = 132 * (2048 // tpr) * 2 + 5  # more than two rounds of the largest grid it may get
    g = R.gen(f"norm/bwd-prefetch/{shape}/{dtname}")
    x = make((rows, H), dt, g, 1.5, 0.5)
    go = make((rows, H), dt, g)
    gres = make((rows, H), dt, g)
    for op in ("rms_norm", "layer_norm"):
        w = make((H,), dt, g, 0.5, 1.0)
        b = make((H,), dt, g) if op == "layer_norm" else None
        stats = fwd_stats(op, x)
        cfg = f"tpr={tpr},items={items}"
        monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", cfg + ",cluster=1,prefetch=1")
        plan, gx, gw, gb = bwd_plan_run(op, go, x, w, b, gres, stats)
        assert plan.sku.name == f"norm.{op}_backward.row_registers.t{tpr}x{items}p", plan.sku.name
        check_bwd(op, go, x, w, b, gres, gx, gw, gb, f"{op} {dtname} t{tpr}x{items}p {rows}x{H}")
        monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", cfg + ",cluster=1,prefetch=0")
        plan0, gx0, gw0, gb0 = bwd_plan_run(op, go, x, w, b, gres, stats)
        assert plan0.sku.name == f"norm.{op}_backward.row_registers.t{tpr}x{items}", plan0.sku.name
        # grad_x row by row in the same order; grad_weight / grad_bias partials follow the grid,
        # which the prefetch's shared memory may shrink, so they are checked against the reference.
        assert torch.equal(R.bits(gx), R.bits(gx0))
        check_bwd(op, go, x, w, b, gres, gx0, gw0, gb0, f"{op} {dtname} t{tpr}x{items}")


# (tpr, items): the backward shapes with register accumulators (bwd_regacc_supported; 16-bit):
# block groups, and the small groups (8 / 4 rows per block, the accumulators added in shared
# memory at the end; their prefetch is into registers).
BWD_REGACC_SHAPES = [(128, 4), (256, 2), (512, 2), (16, 1), (32, 2)]


@pytest.mark.parametrize("prefetch", [0, 1])
@pytest.mark.parametrize("dtname", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", BWD_REGACC_SHAPES, ids=[f"t{t}x{i}" for t, i in BWD_REGACC_SHAPES])
def test_bwd_regacc_shapes(shape, dtname, prefetch, monkeypatch):
    """dweight / dbias accumulated in registers (regacc=1), with a 16-bit weight held in registers
    and with a float32 weight / no weight (loaded per row / absent): rows for several rounds of
    the grid, a row one vector short of the block, a fused grad_residual; grad_x has the bits of
    the shared-memory kernel."""
    tpr, items = shape
    dt = DT[dtname]
    H = (tpr * items - 1) * 8
    rows = 132 * (2048 // tpr) + 3
    g = R.gen(f"norm/bwd-regacc/{shape}/{dtname}/{prefetch}")
    x = make((rows, H), dt, g, 1.5, 0.5)
    go = make((rows, H), dt, g)
    gres = make((rows, H), dt, g)
    for op, wdt in (("rms_norm", dt), ("layer_norm", dt), ("layer_norm", torch.float32), ("rms_norm", None)):
        w = None if wdt is None else make((H,), wdt, g, 0.5, 1.0)
        b = make((H,), wdt, g) if op == "layer_norm" else None
        stats = fwd_stats(op, x)
        cfg = f"tpr={tpr},items={items},cluster=1,prefetch={prefetch}"
        monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", cfg + ",regacc=1")
        plan, gx, gw, gb = bwd_plan_run(op, go, x, w, b, gres, stats)
        want = f"norm.{op}_backward.row_registers.t{tpr}x{items}a" + ("p" if prefetch else "")
        assert plan.sku.name == want, plan.sku.name
        check_bwd(op, go, x, w, b, gres, gx, gw, gb, f"{want} {dtname} w={wdt} {rows}x{H}")
        monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", cfg + ",regacc=0")
        plan0, gx0, _, _ = bwd_plan_run(op, go, x, w, b, gres, stats)
        assert plan0.sku.name.endswith(f"t{tpr}x{items}" + ("p" if prefetch else "")), plan0.sku.name
        assert torch.equal(R.bits(gx), R.bits(gx0))


# ---- operand-specialized kernels (16-bit weight / bias fixed at compile time; spec=0 forbids them) -------
# (H, rows): one per specialized shape of fwd_spec_shape / bwd_spec_shape (bf16 defaults).
SPEC_SHAPES = [(128, 1000), (512, 700), (2048, 600), (4096, 600), (8192, 300), (16384, 150), (65536, 20)]


@pytest.mark.parametrize("dtname", ["bfloat16", "float16"])
@pytest.mark.parametrize("H,rows", SPEC_SHAPES, ids=[f"H{h}" for h, _ in SPEC_SHAPES])
def test_operand_specialized_kernels(H, rows, dtname, monkeypatch):
    """The default plans with a 16-bit weight (and bias) run kernels whose operand checks are
    compile-time constants: right against float64, as is the generic kernel of the same
    configuration (spec=0), and within a rounding of it; forward (with saved stats) and backward."""
    dt = DT[dtname]
    g = R.gen(f"norm/spec/{H}/{dtname}")
    x = make((rows, H), dt, g, 1.5, 0.5)
    go = make((rows, H), dt, g)
    for op in ("rms_norm", "layer_norm"):
        w = make((H,), dt, g, 0.5, 1.0)
        b = make((H,), dt, g) if op == "layer_norm" else None
        runs = []
        for cfg in ("", "spec=0"):
            monkeypatch.setenv("BARACUDA_NORM_CFG", cfg)
            monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", cfg)
            plan, y, _, mean, rstd = fwd_plan_run(op, x, w, b, None, True)
            bplan, gx, gw, gb = bwd_plan_run(op, go, x, w, b, None, (mean, rstd))
            # With a residual: the cluster forward at H >= 16384 (specialized), else generic.
            rplan, yr, ro, _, rstdr = fwd_plan_run(op, x, w, b, go, True)
            runs.append((plan.sku.name + bplan.sku.name + rplan.sku.name, y, mean, rstd, gx, gw, gb, yr, ro, rstdr))
        (n0, *a), (n1, *c) = runs
        # the same configurations, specialized or not (the parameter ring, suffix q, and the resident
        # last parameter, suffix s, the default of an H200-class device at 1024 x 8, exist only specialized)
        assert re.sub(r"(t\d+x\d+)[qs]", r"\1", n0) == n1, (n0, n1)
        for out, kind in ((a, "specialized"), (c, "generic")):
            check_fwd(op, x, w, b, None, out[0], None, out[1], out[2], f"{op} {dtname} {rows}x{H} {kind}")
            check_bwd(op, go, x, w, b, None, out[3], out[4], out[5], f"{op} {dtname} {rows}x{H} {kind}")
            check_fwd(op, x, w, b, go, out[6], out[7], None, out[8], f"{op} {dtname} {rows}x{H} {kind} residual")
        # The same arithmetic; the compiler may contract a product and a sum into one FMA where the
        # generic kernel had a presence branch between them: at most a rounding of the output apart.
        for u, v in zip(a, c):
            assert (u is None) == (v is None)
            if u is not None:
                tol = 2.0 ** -7 if u.dtype == torch.bfloat16 else 2.0 ** -10
                torch.testing.assert_close(u.double(), v.double(), rtol=tol, atol=tol * v.double().abs().max().item(),
                                           msg=lambda m: f"{op} {dtname} H={H}: specialized vs generic: {m}")


# ---- tuning variants (BARACUDA_NORM_CFG / BARACUDA_NORM_BWD_CFG, read by select) -------------------------
# Every variant the benchmark sweep may pick must be correct: odd row counts exercise the
# partially filled row groups (rows=2 batches, several groups per block).
VARIANTS = [
    ("fwd", 4096, "tpr=256,items=2,rows=2"), ("fwd", 4096, "tpr=128,items=4,rows=2"),
    ("fwd", 4096, "tpr=512,items=1,rows=2"), ("fwd", 4096, "tpr=128,items=4,rows=1"),
    ("fwd", 512, "tpr=32,items=2,rows=2"), ("fwd", 512, "tpr=128,items=1,rows=2"),
    ("fwd", 128, "tpr=16,items=1,rows=4"), ("fwd", 64, "tpr=8,items=1,rows=4"),
    ("fwd", 65536, "tpr=1024,items=8"), ("fwd", 4000, "tpr=1024,items=1"),
    ("bwd", 4096, "tpr=512,items=1"), ("bwd", 4096, "tpr=128,items=4,regacc=0"), ("bwd", 4096, "tpr=256,items=2,regacc=0"),
    ("bwd", 512, "tpr=32,items=2"), ("bwd", 512, "tpr=128,items=1"), ("bwd", 128, "tpr=16,items=1,prefetch=0"),
    ("bwd", 128, "tpr=16,items=1,prefetch=1"),
    ("bwd", 16384, "tpr=1024,items=2,xs=1"), ("bwd", 65536, "tpr=1024,items=8,xs=1"),
    ("bwd", 4000, "tpr=1024,items=1"),
]


@pytest.mark.parametrize("kind,H,cfg", VARIANTS, ids=[f"{k}-{h}-{c}" for k, h, c in VARIANTS])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_tuning_variants(op, kind, H, cfg, monkeypatch):
    dt = torch.bfloat16
    rows = 131 if H <= 4096 else 5
    g = R.gen(f"norm/variant/{op}/{kind}/{H}/{cfg}")
    x = make((rows, H), dt, g, 2.0, 0.5)
    w = make((H,), dt, g, 0.5, 1.0)
    b = make((H,), dt, g) if op == "layer_norm" else None
    spec = bc.TensorSpec((rows, H), bc.bfloat16)
    if kind == "fwd":
        monkeypatch.setenv("BARACUDA_NORM_CFG", cfg)
        r = make((rows, H), dt, g)
        plan = bc.NormPlan.select(bc.NormDescriptor(op, spec, weight=bc.bfloat16, bias=bc.bfloat16 if b is not None else None,
                                                    residual=True, eps=EPS[op], save_stats=True))
        want = "t" + cfg.replace("tpr=", "").replace(",items=", "x").replace(",rows=1", "").replace(",rows=", "r")
        assert plan.sku.name.endswith(want), (plan.sku.name, want)
        y, ro = poison((rows, H), dt), poison((rows, H), dt)
        mean = poison((rows,), torch.float32) if op == "layer_norm" else None
        rstd = poison((rows,), torch.float32)
        plan.run(y=y, x=x, weight=w, bias=b, residual=r, residual_out=ro, mean=mean, rstd=rstd)
        h = (x.float() + r.float()).to(dt)
        assert torch.equal(ro, h)
        ref, rm, rr = ref_forward(op, h, w, b)
        close(y, ref, dt, f"{op} {cfg}")
        torch.testing.assert_close(rstd.double(), rr, rtol=1e-4, atol=0)
        if op == "layer_norm":
            torch.testing.assert_close(mean.double(), rm, rtol=1e-5, atol=1e-5)
        return
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", cfg)
    go = make((rows, H), dt, g)
    gres = make((rows, H), dt, g)
    outs = call(op, x, w, b, save_stats=True)
    ref, xhat = autograd(op, x, w, b, go)
    plan = bc.NormPlan.select(bc.NormDescriptor(op + "_backward", spec, weight=bc.bfloat16,
                                                bias=bc.bfloat16 if b is not None else None, residual=True))
    want = "t" + (cfg.replace("tpr=", "").replace(",items=", "x").replace(",xs=1", "xs").replace(",regacc=0", "")
                  .replace(",prefetch=0", "").replace(",prefetch=1", "p"))
    assert plan.sku.name.endswith(want), (plan.sku.name, want)
    ws = torch.empty(max(1, plan.workspace_bytes()), device=DEV, dtype=torch.uint8)
    gx, gw = poison((rows, H), dt), poison((H,), dt)
    gb = poison((H,), dt) if b is not None else None
    plan.run(grad_x=gx, grad_out=go, x=x, mean=outs[1] if b is not None else None, rstd=outs[-1], weight=w,
             grad_weight=gw, grad_bias=gb, grad_residual=gres, workspace=ws)
    close(gx, ref["x"] + gres.double(), dt, f"grad_x {op} {cfg}", scale_atol=True)
    check_sum(gw, ref["w"], (go.double() * xhat).abs().sum(0), dt, "grad_weight")
    if b is not None:
        check_sum(gb, ref["b"], go.double().abs().sum(0), dt, "grad_bias")


# ---- plan API, errors at run(), other frameworks --------------------------------------------------------

def test_plan_api_and_sku():
    x = torch.randn(16, 4096, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(4096, device=DEV, dtype=torch.bfloat16)
    d = bc.NormDescriptor("rms_norm", bc.TensorSpec((16, 4096), bc.bfloat16), weight=bc.bfloat16, save_stats=True)
    plan = bc.NormPlan.select(d)
    assert plan.sku.layout == "row_registers" and plan.sku.category == "norm"
    y = torch.empty_like(x)
    rstd = torch.empty(16, device=DEV)
    plan.run(y=y, x=x, weight=w, rstd=rstd)
    close(y, ref_forward("rms_norm", x, w)[0], torch.bfloat16, "plan y")
    with pytest.raises(errors.InvalidArgument, match="weight"):
        plan.run(y=y, x=x, weight=w[:100], rstd=rstd)
    with pytest.raises(errors.InvalidArgument, match="rstd"):
        plan.run(y=y, x=x, weight=w)
    with pytest.raises(errors.InvalidArgument, match="residual_out overlaps x"):
        bc.rms_norm(x, w, residual=x.clone(), residual_out=x)
    bw = bc.NormPlan.select(bc.NormDescriptor("rms_norm_backward", bc.TensorSpec((16, 4096), bc.bfloat16),
                                              weight=bc.bfloat16))
    assert bw.workspace_bytes() > 0
    with pytest.raises(errors.InvalidArgument, match="workspace"):
        bw.run(grad_x=torch.empty_like(x), grad_out=x, x=x, rstd=rstd, weight=w, grad_weight=torch.empty_like(w))


def test_weight_of_wrong_length_names_weight():
    x = torch.randn(4, 64, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="weight has shape"):
        bc.layer_norm(x, torch.randn(63, device=DEV))


def test_cupy_input():
    cp = R.cupy_gpu()
    x = cp.random.standard_normal((33, 1000), dtype=cp.float32)
    w = cp.random.standard_normal((1000,), dtype=cp.float32)
    y, rstd = bc.rms_norm(x, w, save_stats=True)
    assert isinstance(y, cp.ndarray) and isinstance(rstd, cp.ndarray)
    xt, wt = torch.from_dlpack(x), torch.from_dlpack(w)
    close(torch.from_dlpack(y), ref_forward("rms_norm", xt, wt)[0], torch.float32, "cupy y")


def test_outputs_that_overlap_themselves_are_refused():
    # Output rows that share memory (row stride 0, or smaller than H) would race: refused at run.
    x, go = torch.randn(4, 64, device=DEV), torch.randn(4, 64, device=DEV)
    shared = torch.empty(64, device=DEV).expand(4, 64)
    short = torch.empty(4 * 32 + 32, device=DEV).as_strided((4, 64), (32, 1))
    for y in (shared, short):
        with pytest.raises(errors.InvalidArgument, match="y has overlapping elements"):
            bc.rms_norm(x, out=y)
    _, rstd = bc.rms_norm(x, save_stats=True)
    with pytest.raises(errors.InvalidArgument, match="grad_x has overlapping elements"):
        bc.rms_norm_backward(go, x, rstd, out=short)
    # A broadcast x is a valid input, but not in place (its rows are one row).
    xb = torch.randn(64, device=DEV).expand(4, 64)
    close(bc.layer_norm(xb), ref_forward("layer_norm", xb)[0], torch.float32, "broadcast x")
    with pytest.raises(errors.InvalidArgument, match="y has overlapping elements"):
        bc.layer_norm(xb, out=xb)


def test_reversed_views_are_refused():
    # CuPy makes views with negative strides; the row and plane kernels walk forwards only, so
    # they are refused (never read as forward rows / planes). CuPy's DLPack export of such a view
    # may be broken (huge positive strides, before cupy/cupy#10228): the import reads CuPy's own
    # byte strides then, so the refusal is the same either way.
    cp = R.cupy_gpu()
    x = cp.random.standard_normal((8, 64), dtype=cp.float32)
    with pytest.raises(errors.Unsupported, match="negative row stride"):
        bc.rms_norm(x[::-1])
    with pytest.raises(errors.Unsupported, match="y with strides .* negative row stride"):
        bc.layer_norm(x, out=cp.empty((8, 64), dtype=cp.float32)[::-1])
    img = cp.random.standard_normal((2, 4, 16), dtype=cp.float32)
    with pytest.raises(errors.Unsupported, match="negative stride"):
        bc.instance_norm(img[:, :, ::-1])
    with pytest.raises(errors.Unsupported, match="y with strides .* negative stride"):
        bc.group_norm(img, 2, out=cp.empty((2, 4, 16), dtype=cp.float32)[:, :, ::-1])


def test_jax_input():
    jax, dev = R.jax_gpu()
    import numpy as np

    xn = np.random.default_rng(0).standard_normal((17, 512)).astype(np.float32)
    x = jax.device_put(xn, dev)
    y = bc.layer_norm(x)
    assert isinstance(y, jax.Array)
    ref = ref_forward("layer_norm", torch.from_numpy(xn).to(DEV))[0]
    close(torch.from_numpy(np.asarray(y)).to(DEV), ref, torch.float32, "jax y")


# ---- GroupNorm / InstanceNorm / BatchNorm ---------------------------------------------------------------
# x [N, C, *spatial], contiguous or channels-last; float64 references from torch (F.group_norm,
# F.instance_norm, F.batch_norm on float64 copies, their autograd for the backward).

def chan_layout(x, layout):
    """x in the given memory layout: 'nc' (contiguous) or 'cl' (channels-last, any rank >= 3)."""
    if layout == "nc" or x.dim() < 3:
        return x.contiguous()
    perm = [0] + list(range(2, x.dim())) + [1]  # N, *spatial, C in memory
    inv = [0, x.dim() - 1] + list(range(1, x.dim() - 1))
    return x.permute(perm).contiguous().permute(inv)


def is_channels_last(t):
    return t.dim() >= 3 and t.shape[1] > 1 and t.stride(1) == 1


def group_stats_ref(x, G, eps):
    xd = x.double().reshape(x.shape[0], G, -1)
    return xd.mean(-1), torch.rsqrt(xd.var(-1, unbiased=False) + eps)


def batch_stats_ref(x, eps):
    xd = x.double().transpose(0, 1).reshape(x.shape[1], -1)
    return xd.mean(-1), torch.rsqrt(xd.var(-1, unbiased=False) + eps), xd.var(-1, unbiased=True)


def dbl(t):
    return None if t is None else t.detach().double()


def copy64(t):
    """A float64 copy that never aliases t (t.double() is t itself for float64)."""
    return None if t is None else t.detach().double().clone()


GN_SHAPES = [((2, 6, 7, 9), 3), ((3, 64, 32, 32), 8), ((1, 4, 1), 2), ((1, 5, 3), 1), ((4, 12, 13), 12),
             ((2, 8, 3, 5, 7), 4), ((5, 3, 1, 1), 3), ((2, 32, 1000), 32), ((6, 10), 5)]


@pytest.mark.parametrize("layout", ["nc", "cl"])
@pytest.mark.parametrize("dtname", list(DT))
@pytest.mark.parametrize("shape,G", GN_SHAPES, ids=[f"{s}-G{g}" for s, g in GN_SHAPES])
def test_group_norm_forward(shape, G, dtname, layout):
    dt = DT[dtname]
    g = R.gen(f"cnorm/gn/{shape}/{G}/{dtname}/{layout}")
    C = shape[1]
    x = chan_layout(make(shape, dt, g, 2.0, 0.5), layout)
    w, b = make((C,), dt, g, 0.5, 1.0), make((C,), dt, g)
    y, mean, rstd = bc.group_norm(x, G, w, b, save_stats=True)
    ref = F.group_norm(x.double(), G, w.double(), b.double(), 1e-5)
    close(y, ref, dt, f"group_norm {shape} G={G}")
    assert is_channels_last(y) == is_channels_last(x)  # outputs keep x's layout
    rm, rr = group_stats_ref(x, G, 1e-5)
    sd = stats_dt(dt)
    assert mean.dtype == sd and tuple(mean.shape) == (shape[0], G) and tuple(rstd.shape) == (shape[0], G)
    st = 1e-10 if dt == torch.float64 else 2e-5
    torch.testing.assert_close(mean.double(), rm, rtol=st, atol=st)
    torch.testing.assert_close(rstd.double(), rr, rtol=st, atol=st)


@pytest.mark.parametrize("dtname", ["bfloat16", "float32"])
@pytest.mark.parametrize("layout", ["nc", "cl"])
def test_group_norm_large(dtname, layout):
    dt = DT[dtname]
    g = R.gen(f"cnorm/gn-large/{dtname}/{layout}")
    x = chan_layout(make((8, 256, 64, 64), dt, g, 1.5, 2.0), layout)
    w, b = make((256,), torch.float32, g, 0.5, 1.0), make((256,), torch.float32, g)
    out = poison((8, 256, 64, 64), dt)
    res = bc.group_norm(x, 32, w, b, out=out)
    assert res is out
    close(out, F.group_norm(x.double(), 32, w.double(), b.double(), 1e-5), dt, "group_norm large")


@pytest.mark.parametrize("wdt", [None, "same", "float32"])
@pytest.mark.parametrize("bdt", [None, "same", "float32"])
def test_group_norm_weight_bias_presence(wdt, bdt):
    dt = torch.bfloat16
    g = R.gen(f"cnorm/gn-wb/{wdt}/{bdt}")
    x = make((3, 16, 9, 5), dt, g)
    pick = {None: None, "same": dt, "float32": torch.float32}
    w = None if wdt is None else make((16,), pick[wdt], g, 0.5, 1.0)
    b = None if bdt is None else make((16,), pick[bdt], g)
    y = bc.group_norm(x, 4, w, b)
    close(y, F.group_norm(x.double(), 4, dbl(w), dbl(b), 1e-5), dt, "group_norm wb")


def test_group_norm_large_mean_is_accurate():
    """A mean of 1e4 with unit spread over 2^20 values a group: no E[x^2] - E[x]^2 collapse."""
    g = R.gen("cnorm/gn-largemean")
    x = make((2, 4, 512, 512), torch.float32, g, 1.0, 1e4)
    y, mean, rstd = bc.group_norm(x, 2, save_stats=True)
    _, rr = group_stats_ref(x, 2, 1e-5)
    torch.testing.assert_close(rstd.double(), rr, rtol=3e-4, atol=0)  # f32 chunk means at 1e4: ulp 1e-3
    ref = F.group_norm(x.double(), 2, eps=1e-5)
    theirs = F.group_norm(x, 2, eps=1e-5)
    err, err_torch = (y.double() - ref).abs().max().item(), (theirs.double() - ref).abs().max().item()
    # y inherits the mean's rounding at 1e4 (f32 ulp ~1e-3): bound by torch's f32 error or that ulp.
    assert err <= max(2 * err_torch, 4e-3), (err, err_torch)


@pytest.mark.parametrize("layout", ["nc", "cl"])
@pytest.mark.parametrize("dtname", list(DT))
@pytest.mark.parametrize("shape", [(2, 6, 7, 9), (3, 5, 17), (1, 8, 4, 4, 3)])
@pytest.mark.parametrize("running", [False, True])
def test_instance_norm_forward(shape, dtname, layout, running):
    dt = DT[dtname]
    g = R.gen(f"cnorm/in/{shape}/{dtname}/{layout}/{running}")
    C = shape[1]
    x = chan_layout(make(shape, dt, g, 2.0, 0.5), layout)
    w, b = make((C,), dt, g, 0.5, 1.0), make((C,), dt, g)
    rdt = torch.float32 if dt != torch.float64 else dt
    rm = make((C,), rdt, g) if running else None
    rv = (make((C,), rdt, g).abs() + 0.5) if running else None
    rm_ref, rv_ref = copy64(rm), copy64(rv)  # torch updates these in place
    ref = F.instance_norm(x.double(), rm_ref, rv_ref, w.double(), b.double(), True, 0.2, 1e-5)
    y, mean, rstd = bc.instance_norm(x, rm, rv, w, b, True, 0.2, 1e-5, save_stats=True)
    close(y, ref, dt, f"instance_norm {shape}")
    assert tuple(mean.shape) == (shape[0], C)
    em, er = group_stats_ref(x, C, 1e-5)
    st = 1e-10 if dt == torch.float64 else 2e-5
    torch.testing.assert_close(rstd.double(), er, rtol=st, atol=st)
    if running:
        rt = 1e-10 if dt == torch.float64 else 2e-6
        torch.testing.assert_close(rm.double(), rm_ref, rtol=rt, atol=rt)
        torch.testing.assert_close(rv.double(), rv_ref, rtol=rt, atol=rt)


@pytest.mark.parametrize("dtname", ["float32", "bfloat16", "float64"])
def test_instance_norm_running_stats_mode(dtname):
    """use_input_stats=False: normalized with running_mean / running_var, nothing updated."""
    dt = DT[dtname]
    g = R.gen(f"cnorm/in-eval/{dtname}")
    x = make((3, 7, 11, 2), dt, g, 2.0)
    rm, rv = make((7,), dt, g), make((7,), dt, g).abs() + 0.5
    w, b = make((7,), dt, g), make((7,), dt, g)
    rm0, rv0 = rm.clone(), rv.clone()
    y = bc.instance_norm(x, rm, rv, w, b, use_input_stats=False)
    ref = F.instance_norm(x.double(), rm.double(), rv.double(), w.double(), b.double(), False, 0.1, 1e-5)
    close(y, ref, dt, "instance_norm eval")
    assert torch.equal(rm, rm0) and torch.equal(rv, rv0)


def test_instance_norm_refuses_one_spatial_value():
    x = torch.randn(4, 3, 1, 1, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="more than 1 spatial element"):
        bc.instance_norm(x)


BN_SHAPES = [(2, 6, 7, 9), (3, 64, 32, 32), (4, 5), (256, 512), (7, 3, 1), (1, 4, 1, 2), (5, 3, 4, 4, 2),
             (2, 32, 1000), (64, 128, 7, 7)]


@pytest.mark.parametrize("layout", ["nc", "cl"])
@pytest.mark.parametrize("dtname", list(DT))
@pytest.mark.parametrize("shape", BN_SHAPES, ids=[str(s) for s in BN_SHAPES])
def test_batch_norm_training(shape, dtname, layout):
    dt = DT[dtname]
    g = R.gen(f"cnorm/bn/{shape}/{dtname}/{layout}")
    C = shape[1]
    x = chan_layout(make(shape, dt, g, 2.0, 0.5), layout)
    w, b = make((C,), dt, g, 0.5, 1.0), make((C,), dt, g)
    rdt = torch.float32 if dtname in ("bfloat16", "float16") else dt  # AMP style: f32 running stats
    rm, rv = make((C,), rdt, g), make((C,), rdt, g).abs() + 0.5
    rm_ref, rv_ref = copy64(rm), copy64(rv)  # torch updates these in place
    ref = F.batch_norm(x.double(), rm_ref, rv_ref, w.double(), b.double(), True, 0.1, 1e-5)
    out = poison(shape, dt)
    y, mean, rstd = bc.batch_norm(x, rm, rv, w, b, training=True, save_stats=True, out=out)
    assert y is out
    close(y, ref, dt, f"batch_norm {shape}")
    em, er, _ = batch_stats_ref(x, 1e-5)
    st = 1e-10 if dt == torch.float64 else 2e-5
    assert tuple(mean.shape) == (C,) and mean.dtype == stats_dt(dt)
    torch.testing.assert_close(mean.double(), em, rtol=st, atol=st)
    torch.testing.assert_close(rstd.double(), er, rtol=st, atol=st)
    rt = 1e-10 if dt == torch.float64 else 2e-6
    torch.testing.assert_close(rm.double(), rm_ref, rtol=rt, atol=rt)  # updated in place, unbiased var
    torch.testing.assert_close(rv.double(), rv_ref, rtol=rt, atol=rt)


@pytest.mark.parametrize("dtname", ["bfloat16", "float32"])
@pytest.mark.parametrize("layout", ["nc", "cl"])
def test_batch_norm_large(dtname, layout):
    dt = DT[dtname]
    g = R.gen(f"cnorm/bn-large/{dtname}/{layout}")
    x = chan_layout(make((8, 256, 64, 64), dt, g, 1.5, 3.0), layout)
    rm, rv = torch.zeros(256, device=DEV), torch.ones(256, device=DEV)
    rm_ref, rv_ref = copy64(rm), copy64(rv)
    y = bc.batch_norm(x, rm, rv, training=True, momentum=0.3)
    close(y, F.batch_norm(x.double(), rm_ref, rv_ref, None, None, True, 0.3, 1e-5), dt, "batch_norm large")
    torch.testing.assert_close(rm.double(), rm_ref, rtol=2e-6, atol=2e-6)
    torch.testing.assert_close(rv.double(), rv_ref, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("layout", ["nc", "cl"])
@pytest.mark.parametrize("dtname", list(DT))
@pytest.mark.parametrize("shape", [(2, 6, 7, 9), (4, 5), (7, 3, 1), (3, 16, 33)])
def test_batch_norm_inference(shape, dtname, layout):
    dt = DT[dtname]
    g = R.gen(f"cnorm/bn-eval/{shape}/{dtname}/{layout}")
    C = shape[1]
    x = chan_layout(make(shape, dt, g, 2.0, 0.5), layout)
    w, b = make((C,), torch.float32, g, 0.5, 1.0), make((C,), dt, g)
    rm, rv = make((C,), dt, g), make((C,), dt, g).abs() + 0.5
    rm0, rv0 = rm.clone(), rv.clone()
    y = bc.batch_norm(x, rm, rv, w, b, training=False)
    close(y, F.batch_norm(x.double(), rm.double(), rv.double(), w.double(), b.double(), False, 0.1, 1e-5), dt,
          f"batch_norm eval {shape}")
    assert torch.equal(rm, rm0) and torch.equal(rv, rv0)


def test_batch_norm_without_running_stats_in_training():
    g = R.gen("cnorm/bn-norunning")
    x = make((4, 6, 5, 5), torch.float32, g)
    y = bc.batch_norm(x, training=True)
    close(y, F.batch_norm(x.double(), None, None, None, None, True, 0.1, 1e-5), torch.float32, "batch_norm")


def test_batch_norm_refusals():
    x = torch.randn(1, 4, 1, 1, device=DEV)
    rm, rv = torch.zeros(4, device=DEV), torch.ones(4, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="more than 1 value per channel"):
        bc.batch_norm(x, rm, rv, training=True)
    x = torch.randn(2, 4, 3, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="running_mean and running_var"):
        bc.batch_norm(x, training=False)
    with pytest.raises(errors.Unsupported, match="momentum=None"):
        bc.batch_norm(x, rm, rv, training=True, momentum=None)
    with pytest.raises(errors.InvalidArgument, match="running_var"):
        bc.batch_norm(x, rm, torch.ones(5, device=DEV), training=True)
    with pytest.raises(errors.InvalidDType, match="running_mean"):
        bc.batch_norm(x, rm.half(), rv, training=True)


def test_group_norm_refusals():
    x = torch.randn(2, 6, 4, 4, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="does not divide"):
        bc.group_norm(x, 4)
    with pytest.raises(errors.InvalidArgument, match="weight"):
        bc.group_norm(x, 3, torch.ones(5, device=DEV))
    with pytest.raises(errors.Unsupported, match="layouts"):
        bc.group_norm(x.transpose(2, 3), 3)  # spatial dims do not collapse
    with pytest.raises(errors.Unsupported, match="layouts"):
        bc.group_norm(torch.randn(2, 6, 4, 8, device=DEV)[..., ::2], 3)  # neither unit stride
    if torch.cuda.device_count() > 1:
        with pytest.raises(errors.InvalidArgument, match="cuda:1"):
            bc.group_norm(x, 3, torch.ones(6, device="cuda:1"))


@pytest.mark.parametrize("shape", [(0, 6, 4), (3, 6, 0), (0, 6)])
def test_channel_norms_empty(shape):
    x = torch.randn(shape, device=DEV)
    y = bc.group_norm(x, 3)
    assert tuple(y.shape) == shape
    y, mean, rstd = bc.group_norm(x, 3, save_stats=True)
    assert tuple(mean.shape) == (shape[0], 3)
    if mean.numel():
        assert torch.isnan(mean).all() and torch.isnan(rstd).all()  # statistics of empty sets
    rm, rv = torch.zeros(6, device=DEV), torch.ones(6, device=DEV)
    y = bc.batch_norm(x, rm, rv, training=True)
    assert tuple(y.shape) == shape and torch.equal(rm, torch.zeros(6, device=DEV))  # untouched, as torch
    go = torch.randn(shape, device=DEV)
    w = torch.ones(6, device=DEV)
    if len(shape) == 3:
        gx, gw, gb = bc.group_norm_backward(go, x, mean, rstd, 3, w, w)
        assert tuple(gx.shape) == shape and torch.equal(gw, torch.zeros(6, device=DEV)) and not gb.any()


def test_channel_norm_in_place_and_determinism():
    g = R.gen("cnorm/inplace")
    x = make((4, 32, 15, 15), torch.bfloat16, g)
    w, b = make((32,), torch.bfloat16, g), make((32,), torch.bfloat16, g)
    y = bc.group_norm(x, 8, w, b)
    assert torch.equal(y, bc.group_norm(x, 8, w, b))  # bit-stable
    x2 = x.clone()
    assert bc.group_norm(x2, 8, w, b, out=x2) is x2 and torch.equal(x2, y)
    big = torch.empty(x.numel() + 1, dtype=x.dtype, device=DEV)
    big[:-1] = x.flatten()
    with pytest.raises(errors.InvalidArgument, match="overlaps"):
        bc.group_norm(big[:-1].view(x.shape), 8, w, b, out=big[1:].view(x.shape))  # shifted by one element


def test_channel_norm_mixed_layouts():
    """y / grad_out / grad_x may have another layout than x."""
    g = R.gen("cnorm/mixed")
    x = chan_layout(make((3, 16, 10, 12), torch.float32, g), "cl")
    out = poison((3, 16, 10, 12), torch.float32)  # contiguous
    bc.batch_norm(x, training=True, out=out)
    close(out, F.batch_norm(x.double(), None, None, None, None, True, 0.1, 1e-5), torch.float32, "mixed")
    y, mean, rstd = bc.group_norm(x, 4, save_stats=True)
    go = make((3, 16, 10, 12), torch.float32, g)  # contiguous while x is channels-last
    gx, _, _ = bc.group_norm_backward(go, x, mean, rstd, 4)
    gx2, _, _ = bc.group_norm_backward(chan_layout(go, "cl"), x, mean, rstd, 4)
    torch.testing.assert_close(gx, gx2, rtol=1e-5, atol=1e-6)


# ---- backward of the channel norms -------------------------------------------------------------------

def chan_autograd(fn, x, w, b, go):
    xd = x.detach().double().requires_grad_(True)
    wd = None if w is None else w.detach().double().requires_grad_(True)
    bd = None if b is None else b.detach().double().requires_grad_(True)
    y = fn(xd, wd, bd)
    leaves = [t for t in (xd, wd, bd) if t is not None]
    grads = torch.autograd.grad(y, leaves, go.double())
    out = {"x": grads[0]}
    i = 1
    if wd is not None:
        out["w"] = grads[i]
        i += 1
    if bd is not None:
        out["b"] = grads[i]
    return out


def per_channel_l1(t):
    return t.double().abs().transpose(0, 1).reshape(t.shape[1], -1).sum(-1)


@pytest.mark.parametrize("layout", ["nc", "cl"])
@pytest.mark.parametrize("dtname", ["float32", "bfloat16", "float16", "float64"])
@pytest.mark.parametrize("shape,G", GN_SHAPES, ids=[f"{s}-G{g}" for s, g in GN_SHAPES])
def test_group_norm_backward(shape, G, dtname, layout):
    dt = DT[dtname]
    g = R.gen(f"cnorm/gn-bwd/{shape}/{G}/{dtname}/{layout}")
    C = shape[1]
    x = chan_layout(make(shape, dt, g, 2.0, 0.5), layout)
    w, b = make((C,), dt, g, 0.5, 1.0), make((C,), torch.float32, g)
    go = chan_layout(make(shape, dt, g), layout)
    _, mean, rstd = bc.group_norm(x, G, w, b, save_stats=True)
    gxo = poison(shape, dt)
    gx, gw, gb = bc.group_norm_backward(go, x, mean, rstd, G, w, b, out=gxo)
    assert gx is gxo and gw.dtype == dt and gb.dtype == torch.float32
    ref = chan_autograd(lambda a, ww, bb: F.group_norm(a, G, ww, bb, 1e-5), x, w, b, go)
    # dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w: with 1..2 elements per group the
    # terms cancel to ~0 while each is ~rstd |g|, so the rounding error scales with that, not |dx|.
    amp = float(rstd.max()) * float(go.double().abs().max()) * float(w.double().abs().max())
    atol = TOL[dt] * max(1.0, float(ref["x"].abs().max()), amp)
    torch.testing.assert_close(gx.double(), ref["x"].to(dt).double(), rtol=TOL[dt], atol=atol, equal_nan=True,
                               msg=lambda m: f"grad_x group_norm {shape}: {m}")
    xhat = F.group_norm(x.double(), G, eps=1e-5)
    check_sum(gw, ref["w"], per_channel_l1(go.double() * xhat), dt, "grad_weight")
    check_sum(gb, ref["b"], per_channel_l1(go), torch.float32, "grad_bias")  # f32 bias: f32 grad


@pytest.mark.parametrize("dtname", ["float32", "bfloat16", "float64"])
def test_group_norm_backward_without_weight(dtname):
    dt = DT[dtname]
    g = R.gen(f"cnorm/gn-bwd-now/{dtname}")
    x, go = make((3, 12, 9, 7), dt, g), make((3, 12, 9, 7), dt, g)
    _, mean, rstd = bc.group_norm(x, 4, save_stats=True)
    gx, gw, gb = bc.group_norm_backward(go, x, mean, rstd, 4)
    assert gw is None and gb is None
    ref = chan_autograd(lambda a, ww, bb: F.group_norm(a, 4, None, None, 1e-5), x, None, None, go)
    close(gx, ref["x"], dt, "grad_x group_norm without weight", scale_atol=True)


@pytest.mark.parametrize("layout", ["nc", "cl"])
@pytest.mark.parametrize("dtname", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("shape", [(2, 6, 7, 9), (3, 5, 17), (1, 8, 4, 4, 3)])
def test_instance_norm_backward(shape, dtname, layout):
    dt = DT[dtname]
    g = R.gen(f"cnorm/in-bwd/{shape}/{dtname}/{layout}")
    C = shape[1]
    x = chan_layout(make(shape, dt, g, 2.0, 0.5), layout)
    w, b = make((C,), dt, g, 0.5, 1.0), make((C,), dt, g)
    go = make(shape, dt, g)
    _, mean, rstd = bc.instance_norm(x, weight=w, bias=b, save_stats=True)
    gx, gw, gb = bc.instance_norm_backward(go, x, mean, rstd, w, b)
    ref = chan_autograd(lambda a, ww, bb: F.instance_norm(a, None, None, ww, bb, True, 0.1, 1e-5), x, w, b, go)
    close(gx, ref["x"], dt, f"grad_x instance_norm {shape}", scale_atol=True)
    xhat = F.instance_norm(x.double(), eps=1e-5)
    check_sum(gw, ref["w"], per_channel_l1(go.double() * xhat), dt, "grad_weight")
    check_sum(gb, ref["b"], per_channel_l1(go), dt, "grad_bias")


@pytest.mark.parametrize("layout", ["nc", "cl"])
@pytest.mark.parametrize("dtname", ["float32", "bfloat16", "float16", "float64"])
@pytest.mark.parametrize("shape", [(2, 6, 7, 9), (3, 64, 32, 32), (4, 5), (256, 512), (7, 3, 1), (2, 32, 1000)])
def test_batch_norm_backward_training(shape, dtname, layout):
    dt = DT[dtname]
    g = R.gen(f"cnorm/bn-bwd/{shape}/{dtname}/{layout}")
    C = shape[1]
    x = chan_layout(make(shape, dt, g, 2.0, 0.5), layout)
    w, b = make((C,), dt, g, 0.5, 1.0), make((C,), dt, g)
    go = chan_layout(make(shape, dt, g), layout)
    _, mean, rstd = bc.batch_norm(x, weight=w, bias=b, training=True, save_stats=True)
    gxo = poison(shape, dt)
    gx, gw, gb = bc.batch_norm_backward(go, x, mean, rstd, w, b, out=gxo)
    assert gx is gxo
    ref = chan_autograd(lambda a, ww, bb: F.batch_norm(a, None, None, ww, bb, True, 0.1, 1e-5), x, w, b, go)
    close(gx, ref["x"], dt, f"grad_x batch_norm {shape}", scale_atol=True)
    xhat = F.batch_norm(x.double(), None, None, None, None, True, 0.1, 1e-5)
    check_sum(gw, ref["w"], per_channel_l1(go.double() * xhat), dt, "grad_weight")
    check_sum(gb, ref["b"], per_channel_l1(go), dt, "grad_bias")


@pytest.mark.parametrize("layout", ["nc", "cl"])
@pytest.mark.parametrize("dtname", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("with_params", [True, False])
def test_batch_norm_backward_inference(dtname, layout, with_params):
    dt = DT[dtname]
    g = R.gen(f"cnorm/bn-bwd-eval/{dtname}/{layout}/{with_params}")
    shape, C = (3, 16, 9, 11), 16
    x = chan_layout(make(shape, dt, g, 2.0, 0.5), layout)
    rdt = torch.float32 if dt != torch.float64 else dt
    rm, rv = make((C,), rdt, g), make((C,), rdt, g).abs() + 0.5
    w = make((C,), dt, g, 0.5, 1.0) if with_params else None
    b = make((C,), dt, g) if with_params else None
    go = make(shape, dt, g)
    gx, gw, gb = bc.batch_norm_backward(go, x, rm, None, w, b, training=False, running_var=rv, eps=1e-5)
    ref = chan_autograd(lambda a, ww, bb: F.batch_norm(a, rm.double(), rv.double(), ww, bb, False, 0.1, 1e-5),
                        x, w, b, go)
    close(gx, ref["x"], dt, "grad_x batch_norm eval", scale_atol=True)
    # training=None (the default) infers inference from rstd=None: the same bits
    gx2 = bc.batch_norm_backward(go, x, rm, None, w, b, running_var=rv, eps=1e-5)[0]
    assert torch.equal(gx2, gx)
    if with_params:
        xhat = F.batch_norm(x.double(), rm.double(), rv.double(), None, None, False, 0.1, 1e-5)
        check_sum(gw, ref["w"], per_channel_l1(go.double() * xhat), dt, "grad_weight")
        check_sum(gb, ref["b"], per_channel_l1(go), dt, "grad_bias")
    else:
        assert gw is None and gb is None


def test_batch_norm_backward_large_is_deterministic():
    g = R.gen("cnorm/bn-bwd-large")
    x = chan_layout(make((8, 256, 64, 64), torch.bfloat16, g), "cl")
    go = chan_layout(make((8, 256, 64, 64), torch.bfloat16, g), "cl")
    w, b = make((256,), torch.float32, g), make((256,), torch.float32, g)
    _, mean, rstd = bc.batch_norm(x, weight=w, bias=b, training=True, save_stats=True)
    a = bc.batch_norm_backward(go, x, mean, rstd, w, b)
    c = bc.batch_norm_backward(go, x, mean, rstd, w, b)
    for u, v in zip(a, c):
        assert torch.equal(u, v)
    ref = chan_autograd(lambda t, ww, bb: F.batch_norm(t, None, None, ww, bb, True, 0.1, 1e-5), x, w, b, go)
    close(a[0], ref["x"], torch.bfloat16, "grad_x large", scale_atol=True)


def test_channel_norm_plan_api():
    x = torch.randn(4, 8, 6, 6, device=DEV)
    d = bc.ChannelNormDescriptor("group_norm", bc.TensorSpec(tuple(x.shape), bc.float32), num_groups=2,
                                 save_stats=True)
    p = bc.ChannelNormPlan.select(d)
    assert p.sku.layout == "nc_planes" and p.workspace_bytes() > 0
    y = torch.full_like(x, float("nan"))
    mean, rstd = torch.empty(4, 2, device=DEV), torch.empty(4, 2, device=DEV)
    ws = torch.empty(p.workspace_bytes(), dtype=torch.uint8, device=DEV)
    p.run(y=y, x=x, mean=mean, rstd=rstd, workspace=ws)
    close(y, F.group_norm(x.double(), 2, eps=1e-5), torch.float32, "plan run")
    with pytest.raises(errors.InvalidArgument, match="workspace"):
        p.run(y=y, x=x, mean=mean, rstd=rstd)


@pytest.mark.parametrize("dtname", ["bfloat16", "float32", "float64"])
def test_channel_norm_misaligned_and_mixed_planes(dtname):
    """NC* x one element off 16-byte alignment (the scalar plane kernels) and an NC* x with a
    channels-last out / grad_x: same results as the aligned vector path, up to rounding."""
    dt = DT[dtname]
    g = R.gen(f"cnorm/misaligned/{dtname}")
    shape = (3, 16, 16, 16)
    n = 3 * 16 * 16 * 16
    x_al = make(shape, dt, g, 2.0, 1.0)
    x_mis = torch.empty(n + 1, dtype=dt, device=DEV)[1:].view(shape)
    x_mis.copy_(x_al)
    w, b = make((16,), dt, g), make((16,), dt, g)
    ref = F.group_norm(x_al.double(), 4, w.double(), b.double(), 1e-5)
    for x in (x_al, x_mis):
        close(bc.group_norm(x, 4, w, b), ref, dt, "group_norm planes")
        out = chan_layout(poison(shape, dt), "cl")
        bc.group_norm(x, 4, w, b, out=out)
        close(out, ref, dt, "group_norm planes, channels-last out")
    go = make(shape, dt, g)
    _, mean, rstd = bc.batch_norm(x_al, weight=w, bias=b, training=True, save_stats=True)
    ref_g = chan_autograd(lambda a, ww, bb: F.batch_norm(a, None, None, ww, bb, True, 0.1, 1e-5), x_al, w, b, go)
    for x in (x_al, x_mis):
        gxo = chan_layout(poison(shape, dt), "cl")
        gx, gw, gb = bc.batch_norm_backward(go, x, mean, rstd, w, b, out=gxo)
        close(gx, ref_g["x"], dt, "grad_x planes", scale_atol=True)
        check_sum(gw, ref_g["w"], per_channel_l1(go.double() * F.batch_norm(
            x_al.double(), None, None, None, None, True, 0.1, 1e-5)), dt, "grad_weight")


@pytest.mark.parametrize("layout", ["nc", "cl"])
@pytest.mark.parametrize("dtname", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("op,shape,G", [("instance_norm", (16, 64, 9, 9), 64), ("group_norm", (64, 32, 5, 5), 16),
                                        ("batch_norm", (4, 1024, 3, 3), 0)])
def test_channel_norm_many_small_units(op, shape, G, dtname, layout):
    """>= 1024 statistic units with few partials each: the warp-per-unit finalize kernels."""
    dt = DT[dtname]
    g = R.gen(f"cnorm/many/{op}/{dtname}/{layout}")
    C = shape[1]
    x = chan_layout(make(shape, dt, g, 2.0, 0.5), layout)
    w, b = make((C,), dt, g, 0.5, 1.0), make((C,), dt, g)
    go = make(shape, dt, g)
    rdt = torch.float32 if dt != torch.float64 else dt
    rm, rv = make((C,), rdt, g), make((C,), rdt, g).abs() + 0.5
    rm_ref, rv_ref = copy64(rm), copy64(rv)  # torch updates these in place
    if op == "instance_norm":
        y, mean, rstd = bc.instance_norm(x, rm, rv, w, b, True, 0.1, 1e-5, save_stats=True)
        gx, gw, gb = bc.instance_norm_backward(go, x, mean, rstd, w, b)
        fn = lambda a, ww, bb: F.instance_norm(a, None, None, ww, bb, True, 0.1, 1e-5)  # noqa: E731
        yref = F.instance_norm(x.double(), rm_ref, rv_ref, w.double(), b.double(), True, 0.1, 1e-5)
    elif op == "group_norm":
        y, mean, rstd = bc.group_norm(x, G, w, b, save_stats=True)
        gx, gw, gb = bc.group_norm_backward(go, x, mean, rstd, G, w, b)
        fn = lambda a, ww, bb: F.group_norm(a, G, ww, bb, 1e-5)  # noqa: E731
        yref = fn(x.double(), w.double(), b.double())
    else:
        y, mean, rstd = bc.batch_norm(x, rm, rv, w, b, training=True, save_stats=True)
        gx, gw, gb = bc.batch_norm_backward(go, x, mean, rstd, w, b)
        fn = lambda a, ww, bb: F.batch_norm(a, None, None, ww, bb, True, 0.1, 1e-5)  # noqa: E731
        yref = F.batch_norm(x.double(), rm_ref, rv_ref, w.double(), b.double(), True, 0.1, 1e-5)
    close(y, yref, dt, f"{op} many units")
    if op != "group_norm":
        rt = 1e-10 if dt == torch.float64 else 2e-6
        torch.testing.assert_close(rm.double(), rm_ref, rtol=rt, atol=rt)
        torch.testing.assert_close(rv.double(), rv_ref, rtol=rt, atol=rt)
    ref = chan_autograd(fn, x, w, b, go)
    close(gx, ref["x"], dt, f"grad_x {op} many units", scale_atol=True)
    xhat = fn(x.double(), None, None)
    check_sum(gw, ref["w"], per_channel_l1(go.double() * xhat), dt, "grad_weight")
    check_sum(gb, ref["b"], per_channel_l1(go), dt, "grad_bias")


def channels_last_at(src, offset):
    """A copy of src in channels-last memory (N, *spatial, C; 2-D stays [N, C]) starting `offset`
    elements into a fresh buffer (offset 1: off 16-byte alignment, the scalar column kernels)."""
    perm = [0] + list(range(2, src.dim())) + [1] if src.dim() >= 3 else list(range(src.dim()))
    inv = [perm.index(i) for i in range(src.dim())]
    buf = torch.empty(src.numel() + offset, dtype=src.dtype, device=DEV)
    t = buf[offset:].view([src.shape[i] for i in perm]).permute(inv)
    t.copy_(src)
    return t


# C * elem_size a multiple of 16 (C = 8, 24: the 16-byte vector column kernels for every dtype) or
# not (C = 7, 12: scalar for 16-bit types, C = 12 vector for f32 / f64); odd spatial sizes; S = 1;
# a 2-D [N, C] batch.
CL_VEC_CASES = [((3, 8, 5, 7), 2), ((2, 24, 9, 11), 6), ((5, 7, 3, 5), 7), ((3, 12, 13, 3), 4),
                ((4, 24, 1, 1), 3), ((2, 16, 1031), 4), ((37, 24), 0)]


@pytest.mark.parametrize("where", ["aligned", "offset", "mixed"])
@pytest.mark.parametrize("dtname", list(DT))
@pytest.mark.parametrize("shape,G", CL_VEC_CASES, ids=[f"{s}-G{g}" for s, g in CL_VEC_CASES])
def test_channels_last_vector_columns(shape, G, dtname, where):
    """Channels-last x: aligned (vector column kernels when C allows), one element off alignment
    (scalar column kernels on the vector partition), and NC* out / grad_out / grad_x (scalar)."""
    dt = DT[dtname]
    g = R.gen(f"cnorm/clvec/{shape}/{G}/{dtname}/{where}")
    C = shape[1]
    off = 1 if where == "offset" else 0
    src = make(shape, dt, g, 2.0, 0.5)
    x = channels_last_at(src, off)
    w, b = make((C,), dt, g, 0.5, 1.0), make((C,), dt, g)
    go_src = make(shape, dt, g)
    go = go_src.contiguous() if where == "mixed" else channels_last_at(go_src, off)

    def out_buf():
        return poison(shape, dt) if where == "mixed" else channels_last_at(poison(shape, dt), off)

    xd = src.double()
    # BatchNorm training forward / backward.
    out = out_buf()
    y, mean, rstd = bc.batch_norm(x, weight=w, bias=b, training=True, save_stats=True, out=out)
    assert y is out
    close(y, F.batch_norm(xd, None, None, w.double(), b.double(), True, 0.1, 1e-5), dt, f"batch_norm cl {shape}")
    em, er, _ = batch_stats_ref(src, 1e-5)
    st = 1e-10 if dt == torch.float64 else 2e-5
    torch.testing.assert_close(mean.double(), em, rtol=st, atol=st)
    torch.testing.assert_close(rstd.double(), er, rtol=st, atol=st)
    gxo = out_buf()
    gx, gw, gb = bc.batch_norm_backward(go, x, mean, rstd, w, b, out=gxo)
    assert gx is gxo
    fn = lambda a, ww, bb: F.batch_norm(a, None, None, ww, bb, True, 0.1, 1e-5)  # noqa: E731
    ref = chan_autograd(fn, src, w, b, go_src)
    close(gx, ref["x"], dt, f"grad_x batch_norm cl {shape}", scale_atol=True)
    check_sum(gw, ref["w"], per_channel_l1(go_src.double() * fn(xd, None, None)), dt, "grad_weight")
    check_sum(gb, ref["b"], per_channel_l1(go_src), dt, "grad_bias")
    # BatchNorm inference (apply only).
    rdt = torch.float32 if dt != torch.float64 else dt
    rm, rv = make((C,), rdt, g), make((C,), rdt, g).abs() + 0.5
    out = out_buf()
    bc.batch_norm(x, rm, rv, w, b, training=False, out=out)
    close(out, F.batch_norm(xd, rm.double(), rv.double(), w.double(), b.double(), False, 0.1, 1e-5), dt,
          f"batch_norm eval cl {shape}")
    if G == 0:
        return
    # GroupNorm forward / backward.
    out = out_buf()
    y, mean, rstd = bc.group_norm(x, G, w, b, save_stats=True, out=out)
    assert y is out
    close(y, F.group_norm(xd, G, w.double(), b.double(), 1e-5), dt, f"group_norm cl {shape}")
    gxo = out_buf()
    gx, gw, gb = bc.group_norm_backward(go, x, mean, rstd, G, w, b, out=gxo)
    assert gx is gxo
    fn = lambda a, ww, bb: F.group_norm(a, G, ww, bb, 1e-5)  # noqa: E731
    ref = chan_autograd(fn, src, w, b, go_src)
    amp = float(rstd.max()) * float(go_src.double().abs().max()) * float(w.double().abs().max())
    atol = TOL[dt] * max(1.0, float(ref["x"].abs().max()), amp)
    torch.testing.assert_close(gx.double(), ref["x"].to(dt).double(), rtol=TOL[dt], atol=atol, equal_nan=True,
                               msg=lambda m: f"grad_x group_norm cl {shape}: {m}")
    check_sum(gw, ref["w"], per_channel_l1(go_src.double() * fn(xd, None, None)), dt, "grad_weight")
    check_sum(gb, ref["b"], per_channel_l1(go_src), dt, "grad_bias")


@pytest.mark.parametrize("dtname", ["bfloat16", "float32"])
def test_channels_last_vector_columns_deterministic(dtname):
    """The vector column kernels on a multi-wave shape: bitwise repeatable, and close to the scalar
    column kernels on the same data one element off alignment."""
    dt = DT[dtname]
    g = R.gen(f"cnorm/clvec-det/{dtname}")
    shape = (6, 96, 23, 29)
    src, go_src = make(shape, dt, g, 1.5, 3.0), make(shape, dt, g)
    w, b = make((96,), torch.float32, g, 0.5, 1.0), make((96,), torch.float32, g)
    res = {}
    for off in (0, 1):
        x, go = channels_last_at(src, off), channels_last_at(go_src, off)
        runs = []
        for _ in range(2):
            y, mean, rstd = bc.batch_norm(x, weight=w, bias=b, training=True, save_stats=True)
            runs.append((y, mean, rstd) + tuple(bc.batch_norm_backward(go, x, mean, rstd, w, b)))
        for u, v in zip(*runs):
            assert torch.equal(u, v)
        res[off] = runs[0]
    for u, v in zip(res[0], res[1]):
        torch.testing.assert_close(u.double(), v.double(), rtol=TOL[dt], atol=TOL[dt] * 10)


@pytest.mark.parametrize("layout", ["cl", "nc"])
@pytest.mark.parametrize("dtname", ["bfloat16", "float32"])
@pytest.mark.parametrize("shape", [(6, 64, 7, 7), (4, 24, 5, 3), (3, 8, 15, 17)],
                         ids=["6x64x7x7", "4x24x5x3", "3x8x15x17"])
def test_batch_norm_rows_across_samples(shape, dtname, layout):
    """BatchNorm over samples of every stride. Channels-last x runs its N x S rows as one range
    (flat rows): dense, or x a strided sample slice (n stride 2 x S x C: the kernels split row
    indices into (n, s)); grad_out / grad_x in either layout while x is strided. NC* x with
    small planes runs as folded columns [1, C * S, N] when every operand has contiguous planes
    (x dense or sample-strided, grad_out NC*), else the per-plane kernels (grad_out
    channels-last); 4x24x5x3 bf16 (C * S = 360, not a multiple of 8) stays per-plane."""
    dt = DT[dtname]
    g = R.gen(f"cnorm/bn-flat/{shape}/{dtname}/{layout}")
    N, C = shape[0], shape[1]
    src2 = make((2 * N,) + shape[1:], dt, g, 2.0, 0.5)
    big = channels_last_at(src2, 0) if layout == "cl" else src2
    w, b = make((C,), dt, g, 0.5, 1.0), make((C,), dt, g)
    go_src = make(shape, dt, g)
    dense = channels_last_at(big[::2].contiguous(), 0) if layout == "cl" else big[::2].contiguous()
    for x in (dense, big[::2]):
        src = x.contiguous()
        xd = src.double()
        rm, rv = torch.zeros(C, device=DEV), torch.ones(C, device=DEV)
        rm_ref, rv_ref = copy64(rm), copy64(rv)
        y, mean, rstd = bc.batch_norm(x, rm, rv, w, b, training=True, save_stats=True)
        close(y, F.batch_norm(xd, rm_ref, rv_ref, w.double(), b.double(), True, 0.1, 1e-5), dt,
              f"batch_norm flat rows {shape} x strides {x.stride()}")
        torch.testing.assert_close(rv.double(), rv_ref, rtol=2e-6, atol=2e-6)
        for go in (channels_last_at(go_src, 0), go_src.contiguous()):
            gx, gw, gb = bc.batch_norm_backward(go, x, mean, rstd, w, b)
            fn = lambda a, ww, bb: F.batch_norm(a, None, None, ww, bb, True, 0.1, 1e-5)  # noqa: E731
            ref = chan_autograd(fn, src, w, b, go_src)
            close(gx, ref["x"], dt, f"grad_x flat rows {shape} go strides {go.stride()}", scale_atol=True)
            check_sum(gw, ref["w"], per_channel_l1(go_src.double() * fn(xd, None, None)), dt, "grad_weight")
            check_sum(gb, ref["b"], per_channel_l1(go_src), dt, "grad_bias")
        y = bc.batch_norm(x, rm, rv, w, b, training=False)
        close(y, F.batch_norm(xd, rm.double(), rv.double(), w.double(), b.double(), False, 0.1, 1e-5), dt,
              f"batch_norm eval flat rows {shape}")
