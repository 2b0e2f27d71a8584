"""GPU correctness of the loss family (cross-entropy): every reduction, ignore_index, label
smoothing, class weights, int32 / int64 targets, strided rows, the fused gradient and the
backward from the saved logsumexp, against torch.nn.functional.cross_entropy in float64 and
torch.autograd; out-of-range targets give NaN; V = 128256 once."""
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ref as R  # noqa: E402

F = torch.nn.functional
errors = bc.errors
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]
DEV = "cuda"
TOL = {torch.float64: (1e-11, 1e-12), torch.float32: (2e-5, 1e-6), torch.float16: (3e-3, 1e-4),
       torch.bfloat16: (1.6e-2, 1e-3)}


def _case(n, v, dt, key, ignore_frac=0.2, ignore_index=-100, tdt=torch.int64):
    g = R.gen(key)
    x = (3 * torch.randn(n, v, generator=g, device=DEV, dtype=torch.float64)).to(dt)
    t = torch.randint(0, v, (n,), generator=g, device=DEV)
    t = torch.where(torch.rand(n, generator=g, device=DEV) < ignore_frac, torch.full_like(t, ignore_index), t)
    return x, t.to(tdt)


def _ref(x, t, **kw):
    xd = x.double().requires_grad_(True)
    w = kw.pop("weight", None)
    loss = F.cross_entropy(xd, t.long(), weight=None if w is None else w.double(), **kw)
    return xd, loss


def _close(got, ref, dt, what, scale=1.0):
    r, a = TOL[dt]
    torch.testing.assert_close(got.double(), ref.double(), rtol=r, atol=a * scale, equal_nan=True,
                               msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float64, torch.float16], ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
def test_forward_and_grad_match_torch(dt, reduction, smoothing, weighted):
    n, v = 37, 5003
    x, t = _case(n, v, dt, f"ce/{dt}/{reduction}/{smoothing}/{weighted}", tdt=torch.int32 if weighted else torch.int64)
    w = (torch.rand(v, generator=R.gen("w"), device=DEV, dtype=torch.float64) + 0.5).to(dt) if weighted else None
    xd, ref = _ref(x, t, weight=w, reduction=reduction, label_smoothing=smoothing)
    gl = torch.randn(ref.shape, generator=R.gen("gl"), device=DEV, dtype=torch.float64).to(dt)
    (gref,) = torch.autograd.grad(ref, xd, gl.double())
    loss, grad, lse = bc.cross_entropy(x, t, weight=w, reduction=reduction, label_smoothing=smoothing,
                                       return_grad=True, grad_loss=gl, return_lse=True)
    s = n if reduction == "sum" else 1.0
    _close(loss, ref.to(dt), dt, "loss", s)
    _close(grad, gref.to(dt), dt, "fused grad")
    _close(lse, torch.logsumexp(x.double(), -1), torch.float64 if dt == torch.float64 else torch.float32, "lse", 10)
    out = R.poison(x.shape, dt)
    g2 = bc.cross_entropy_backward(gl, x, t, lse, weight=w, reduction=reduction, label_smoothing=smoothing, out=out)
    assert g2 is out
    _close(out, gref.to(dt), dt, "backward")
    only = bc.cross_entropy(x, t, weight=w, reduction=reduction, label_smoothing=smoothing)
    _close(only, ref.to(dt), dt, "loss only", s)


@pytest.mark.parametrize("n,v", [(1, 1), (7, 7), (3, 262144), (4097, 64)])
def test_shapes(n, v):
    x, t = _case(n, v, torch.float32, f"shapes/{n}/{v}", ignore_frac=0.0)
    xd, ref = _ref(x, t)
    loss, grad = bc.cross_entropy(x, t, return_grad=True)
    (gref,) = torch.autograd.grad(ref, xd)
    _close(loss, ref, torch.float32, "loss")
    _close(grad, gref, torch.float32, "grad")


def test_strided_rows_and_ignore_index():
    base, t = _case(16, 1030, torch.bfloat16, "strided", ignore_index=7)
    x = base[:, :1000]
    t = torch.where(t >= 1000, torch.full_like(t, 7), t)
    xd, ref = _ref(x, t, ignore_index=7)
    _close(bc.cross_entropy(x, t, ignore_index=7), ref.to(torch.bfloat16), torch.bfloat16, "strided")
    x2 = torch.randn(16 * 1000 + 1, device=DEV)[1:].view(16, 1000)  # misaligned: scalar loads
    xd, ref = _ref(x2, t, ignore_index=7)
    _close(bc.cross_entropy(x2, t, ignore_index=7), ref.float(), torch.float32, "misaligned")


def test_all_ignored_and_empty():
    x = torch.randn(4, 10, device=DEV)
    t = torch.full((4,), -100, device=DEV, dtype=torch.int64)
    assert math.isnan(bc.cross_entropy(x, t).item())  # 0 / 0, as torch
    assert bc.cross_entropy(x, t, reduction="sum").item() == 0.0
    e = torch.empty(0, 10, device=DEV)
    te = torch.empty(0, device=DEV, dtype=torch.int64)
    assert math.isnan(bc.cross_entropy(e, te).item())
    assert bc.cross_entropy(e, te, reduction="none").shape == (0,)


def test_bad_target_gives_nan_not_a_crash():
    x = torch.randn(4, 10, device=DEV)
    t = torch.tensor([1, 99, 2, -5], device=DEV)
    per_row = bc.cross_entropy(x, t, reduction="none")
    torch.cuda.synchronize()
    assert torch.isnan(per_row[1]) and torch.isnan(per_row[3]) and not torch.isnan(per_row[0])
    assert math.isnan(bc.cross_entropy(x, t).item())


def test_nan_and_inf_logits():
    x = torch.randn(3, 300, device=DEV)
    x[0, 5] = math.nan
    x[1, :] = -math.inf
    t = torch.tensor([1, 2, 3], device=DEV)
    res = bc.cross_entropy(x, t, reduction="none")
    ref = F.cross_entropy(x.double(), t, reduction="none")
    torch.testing.assert_close(res.double(), ref, equal_nan=True, rtol=2e-5, atol=1e-6)


def test_large_vocab_bf16():
    x, t = _case(64, 128256, torch.bfloat16, "vocab", ignore_frac=0.1)
    xd, ref = _ref(x, t, label_smoothing=0.1)
    (gref,) = torch.autograd.grad(ref, xd)
    loss, grad = bc.cross_entropy(x, t, label_smoothing=0.1, return_grad=True)
    _close(loss, ref.to(torch.bfloat16), torch.bfloat16, "loss")
    _close(grad, gref.to(torch.bfloat16), torch.bfloat16, "grad")


def test_deterministic():
    x, t = _case(300, 50000, torch.bfloat16, "det")
    a = bc.cross_entropy(x, t)
    b = bc.cross_entropy(x, t)
    assert torch.equal(a, b)


def test_errors():
    x = torch.randn(4, 10, device=DEV)
    with pytest.raises(errors.InvalidDType, match="target"):
        bc.cross_entropy(x, torch.zeros(4, device=DEV))
    with pytest.raises(errors.InvalidArgument, match="target must have shape"):
        bc.cross_entropy(x, torch.zeros(5, device=DEV, dtype=torch.int64))
    with pytest.raises(errors.InvalidArgument, match="reduction"):
        bc.cross_entropy(x, torch.zeros(4, device=DEV, dtype=torch.int64), reduction="avg")
    with pytest.raises(errors.Unsupported, match="unit stride"):
        bc.cross_entropy(x.t(), torch.zeros(10, device=DEV, dtype=torch.int64))


# ---- the cluster path of cross-entropy (sm_90: rows_cluster) ----------------------------------------
@pytest.mark.parametrize("n,v,dt", [(300, 128256, torch.bfloat16), (264, 32000, torch.float16),
                                    (300, 50001, torch.float32), (270, 5003, torch.float64)])
def test_cross_entropy_cluster_path(n, v, dt):
    """Enough rows for the one-read cluster path, through the plan API with padded (16-byte) rows
    for the logits and the gradient: for odd V the last CTA's slice ends mid-vector."""
    width = (v + 7) // 8 * 8 + 8
    base, t = _case(n, width, dt, f"cluster/{n}/{v}/{dt}")
    x = base[:, :v]
    t = torch.where(t >= v, torch.full_like(t, -100), t)
    spec = lambda a: bc.TensorSpec(tuple(a.shape), bc.dtype(a.dtype), [int(s) for s in a.stride()])  # noqa: E731
    lse_dt = torch.float64 if dt == torch.float64 else torch.float32
    for smoothing in (0.0, 0.1):
        gbase = R.poison((n, width), dt)
        g = gbase[:, :v]
        plan = bc.LossPlan.select(bc.LossDescriptor("cross_entropy", spec(x), spec(t), label_smoothing=smoothing,
                                                    with_grad=True, grad_input=spec(g)))
        if torch.cuda.get_device_capability()[0] >= 9 and "sm_9" in plan.sku.arch:
            assert plan.sku.layout == "rows_cluster", plan.sku.precision.math
        lse = R.poison((n,), lse_dt)
        out = R.poison((), dt)
        ws = torch.empty(plan.workspace_bytes(), device=DEV, dtype=torch.uint8)
        plan.run(x, t, lse, ws, out=out, grad_input=g)
        xd, ref = _ref(x, t, label_smoothing=smoothing)
        (gref,) = torch.autograd.grad(ref, xd)
        _close(out, ref.to(dt), dt, f"loss (smoothing {smoothing})")
        _close(g, gref.to(dt), dt, f"grad (smoothing {smoothing})")
        _close(lse, torch.logsumexp(x.double(), -1), lse_dt, "lse", 10)
        assert torch.isnan(gbase[:, v:]).all(), "the padding columns of grad_input were written"
    per_row = bc.cross_entropy(x, t, reduction="none")
    _close(per_row, F.cross_entropy(x.double(), t, reduction="none").to(dt), dt, "none")


@pytest.mark.parametrize("n,v,dt", [(37, 128256, torch.bfloat16), (5, 40003, torch.float16),
                                    (9, 50001, torch.float32), (3, 5003, torch.float64)])
def test_cross_entropy_stream_path(n, v, dt, monkeypatch):
    """The streaming forward (BARACUDA_CE_CFG=path=stream): padded rows (odd V ends mid-vector),
    special values, ignored rows; loss and lse against float64."""
    monkeypatch.setenv("BARACUDA_CE_CFG", "path=stream,iters=1")
    width = (v + 7) // 8 * 8 + 8
    base, t = _case(n, width, dt, f"stream/{n}/{v}/{dt}")
    x = base[:, :v]
    t = torch.where(t >= v, torch.full_like(t, -100), t)
    x[0, v - 1] = 1e4 if dt != torch.float16 else 6e4  # the row's max in the partial last vector
    if n > 3:
        x[1, 3] = math.nan
        x[2, :] = -math.inf
        t[1] = t[2] = 0  # not ignored: the NaN reaches the loss
        t[3] = -100
    spec = lambda a: bc.TensorSpec(tuple(a.shape), bc.dtype(a.dtype), [int(s) for s in a.stride()])  # noqa: E731
    plan = bc.LossPlan.select(bc.LossDescriptor("cross_entropy", spec(x), spec(t), reduction="none"))
    assert plan.sku.layout == "rows_stream", plan.sku.precision.math
    lse_dt = torch.float64 if dt == torch.float64 else torch.float32
    lse = R.poison((n,), lse_dt)
    out = R.poison((n,), dt)
    ws = torch.empty(plan.workspace_bytes(), device=DEV, dtype=torch.uint8)
    plan.run(x, t, lse, ws, out=out)
    ref = F.cross_entropy(x.double(), t, reduction="none")
    lref = torch.logsumexp(x.double(), -1)
    ok = torch.isfinite(lref)
    ok[:4 if n > 3 else 0] = False
    _close(out[ok], ref[ok].to(dt), dt, "stream loss")
    _close(lse[ok], lref[ok], lse_dt, "stream lse", 10)
    if n > 3:
        assert torch.isnan(lse[1]) and torch.isnan(out[1]) and torch.isnan(lse[2]) and torch.isnan(out[2])
        assert out[3].item() == 0
    _close(out[:1], ref[:1].to(dt), dt, "stream loss row 0")
    mean = bc.cross_entropy(x[4:] if n > 3 else x, t[4:] if n > 3 else t)
    _close(mean, F.cross_entropy((x[4:] if n > 3 else x).double(), t[4:] if n > 3 else t).to(dt), dt, "stream mean")


def test_cross_entropy_cluster_special_rows():
    """NaN / +inf / all -inf rows, bad targets and ignored rows on the cluster path."""
    x = torch.randn(300, 40000, device=DEV, generator=R.gen("cl-special")).to(torch.bfloat16)
    x[0, 17] = math.nan
    x[1, 39999] = math.inf
    x[2, :] = -math.inf
    t = torch.randint(0, 40000, (300,), device=DEV, generator=R.gen("cl-t"))
    t[3] = -100
    t[4] = 40000  # out of range: NaN row
    loss, grad = bc.cross_entropy(x, t, reduction="none", return_grad=True, grad_loss=torch.ones(300, device=DEV,
                                                                                                 dtype=torch.bfloat16))
    xd = x.double().requires_grad_(True)
    tt = t.clone()
    tt[4] = -100
    ref = F.cross_entropy(xd, tt, reduction="none")
    (gref,) = torch.autograd.grad(ref.sum(), xd)
    assert torch.isnan(loss[0]) and torch.isnan(loss[1]) and torch.isnan(loss[2]) and torch.isnan(loss[4])
    assert loss[3].item() == 0 and torch.all(grad[3] == 0)
    assert torch.isnan(grad[4]).all()
    ok = torch.ones(300, dtype=torch.bool, device=DEV)
    ok[[0, 1, 2, 3, 4]] = False
    _close(loss[ok], ref[ok].to(torch.bfloat16), torch.bfloat16, "loss")
    _close(grad[ok], gref[ok].to(torch.bfloat16), torch.bfloat16, "grad")
    assert torch.isnan(grad[0]).all() and torch.isnan(grad[2]).all()


# ---- pointwise losses --------------------------------------------------------------------------------
def _sign(g, shape):
    return torch.where(torch.rand(shape, generator=g, device=DEV) < 0.5, -1.0, 1.0).double()


def _inputs(name, shape, g):
    """float64 operands in each loss's domain: (positional operands, keyword operands)."""
    r = lambda *s: torch.randn(*s, generator=g, device=DEV, dtype=torch.float64)  # noqa: E731
    u = lambda *s: torch.rand(*s, generator=g, device=DEV, dtype=torch.float64)  # noqa: E731
    last = shape[-1:] if shape else ()
    if name in ("mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss"):
        return [r(shape), r(shape)], {}
    if name == "binary_cross_entropy":
        return [u(shape) * 0.98 + 0.01, u(shape)], {"weight": u(shape) + 0.5}
    if name == "binary_cross_entropy_with_logits":
        return [3 * r(shape), u(shape)], {"weight": u(last) + 0.5, "pos_weight": u(last) + 0.5}
    if name == "kl_div":
        t = torch.softmax(r(shape), -1) if shape else u(shape)
        t = torch.where(u(shape) < 0.1, torch.zeros_like(t), t)  # xlogy(0, 0) = 0
        return [torch.log_softmax(r(shape), -1) if shape else -u(shape), t], {}
    if name == "poisson_nll_loss":
        return [r(shape), torch.floor(4 * u(shape))], {}
    if name == "gaussian_nll_loss":
        return [r(shape), r(shape), u(shape) + 0.05], {}
    if name == "margin_ranking_loss":
        return [r(shape), r(shape), _sign(g, shape)], {}
    if name in ("hinge_embedding_loss", "soft_margin_loss"):
        return [r(shape), _sign(g, shape)], {}
    raise AssertionError(name)


PARAMS = {"huber_loss": {"delta": 0.7}, "smooth_l1_loss": {"beta": 0.6}, "margin_ranking_loss": {"margin": 0.3},
          "hinge_embedding_loss": {"margin": 0.8}}
POINTWISE = ["mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss", "binary_cross_entropy",
             "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss", "gaussian_nll_loss",
             "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss"]
PW_TOL = {torch.float64: (1e-10, 1e-12), torch.float32: (3e-5, 1e-6), torch.float16: (4e-3, 1e-4),
          torch.bfloat16: (2e-2, 1e-3)}


def _pw_close(got, ref, dt, what, n=1):
    r, a = PW_TOL[dt]
    torch.testing.assert_close(got.double(), ref.double(), rtol=r, atol=a * max(1, n), equal_nan=True,
                               msg=lambda m: f"{what}: {m}")


def _pw_check(name, shape, dt, reduction, key, extra_kw=None):
    g = R.gen(key)
    pos, kw = _inputs(name, shape, g)
    kw.update(PARAMS.get(name, {}))
    kw.update(extra_kw or {})
    tfn = getattr(F, name)
    # The reference sees the operands rounded to dt (what baracuda reads), in float64.
    pos = [p.to(dt).double() for p in pos]
    kw = {k: (v.to(dt).double() if torch.is_tensor(v) else v) for k, v in kw.items()}
    pos[0].requires_grad_(True)
    ref = tfn(*pos, reduction=reduction, **kw)
    n = ref.numel() if reduction == "none" else math.prod(shape)
    go = torch.randn(ref.shape, generator=g, device=DEV, dtype=torch.float64).to(dt)
    (gref,) = torch.autograd.grad(ref, pos[0], go.double()) if pos[0].numel() else (torch.zeros_like(pos[0]),)
    bpos = [p.detach().to(dt) for p in pos]
    bkw = {k: (v.to(dt) if torch.is_tensor(v) else v) for k, v in kw.items()}
    got = getattr(bc, name)(*bpos, reduction=reduction, **bkw)
    assert got.shape == ref.shape and got.dtype == dt
    _pw_close(got, ref.detach().to(dt), dt, f"{name} {reduction}", n if reduction == "sum" else 1)
    out = R.poison(tuple(shape), dt)
    gb = getattr(bc, name + "_backward")(go, *bpos, reduction=reduction, out=out, **bkw)
    assert gb is out
    _pw_close(out, gref.to(dt), dt, f"{name}_backward {reduction}")


@pytest.mark.parametrize("name", POINTWISE)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dt", [torch.float64, torch.float32], ids=str)
def test_pointwise_matches_torch(name, reduction, dt):
    _pw_check(name, (7, 4097), dt, reduction, f"pw/{name}/{reduction}/{dt}")


@pytest.mark.parametrize("name", POINTWISE)
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=str)
def test_pointwise_half(name, dt):
    _pw_check(name, (33, 129), dt, "mean", f"pwh/{name}/{dt}")
    _pw_check(name, (33, 129), dt, "none", f"pwh-none/{name}/{dt}")


@pytest.mark.parametrize("shape", [(1,), (7,), (4097,), (262144,), (3, 5, 7)])
def test_pointwise_sizes(shape):
    for name in ("mse_loss", "binary_cross_entropy_with_logits", "gaussian_nll_loss"):
        for red in ("mean", "sum"):
            _pw_check(name, shape, torch.float32, red, f"pws/{name}/{shape}/{red}")


@pytest.mark.parametrize("variant", [dict(log_input=False), dict(full=True), dict(log_input=False, full=True)])
def test_poisson_variants(variant):
    g = R.gen(f"poisson/{variant}")
    x = torch.rand(40, 50, generator=g, device=DEV, dtype=torch.float64) + 0.1
    if variant.get("log_input", True):
        x = torch.randn(40, 50, generator=g, device=DEV, dtype=torch.float64)
    t = torch.floor(6 * torch.rand(40, 50, generator=g, device=DEV, dtype=torch.float64))
    xd = x.clone().requires_grad_(True)
    for red in ("none", "mean", "sum"):
        ref = F.poisson_nll_loss(xd, t, reduction=red, **variant)
        go = torch.ones_like(ref)
        (gref,) = torch.autograd.grad(ref, xd, go)
        _pw_close(bc.poisson_nll_loss(x, t, reduction=red, **variant), ref.detach(), torch.float64, f"poisson {red}")
        _pw_close(bc.poisson_nll_loss_backward(go, x, t, reduction=red, **variant), gref, torch.float64,
                  f"poisson backward {red}")


def test_kl_div_log_target_and_batchmean():
    g = R.gen("kl")
    x = torch.log_softmax(torch.randn(16, 100, generator=g, device=DEV, dtype=torch.float64), -1)
    t = torch.log_softmax(torch.randn(16, 100, generator=g, device=DEV, dtype=torch.float64), -1)
    xd = x.clone().requires_grad_(True)
    for red in ("batchmean", "mean", "sum", "none"):
        ref = F.kl_div(xd, t, reduction=red, log_target=True)
        (gref,) = torch.autograd.grad(ref, xd, torch.ones_like(ref))
        _pw_close(bc.kl_div(x, t, reduction=red, log_target=True), ref.detach(), torch.float64, f"kl {red}")
        _pw_close(bc.kl_div_backward(torch.ones_like(ref), x, t, reduction=red, log_target=True), gref,
                  torch.float64, f"kl backward {red}")
    ref = F.kl_div(x, t.exp(), reduction="batchmean")
    _pw_close(bc.kl_div(x, t.exp(), reduction="batchmean"), ref, torch.float64, "kl batchmean prob target")


def test_gaussian_var_shapes_and_full():
    g = R.gen("gauss")
    x = torch.randn(10, 6, generator=g, device=DEV, dtype=torch.float64)
    y = torch.randn(10, 6, generator=g, device=DEV, dtype=torch.float64)
    for var in (torch.rand(10, generator=g, device=DEV, dtype=torch.float64) + 0.1,   # input.shape[:-1]
                torch.rand(10, 1, generator=g, device=DEV, dtype=torch.float64) + 0.1,  # last dim 1
                torch.rand(10, 6, generator=g, device=DEV, dtype=torch.float64) * 1e-3):  # some below eps
        for full in (False, True):
            xd = x.clone().requires_grad_(True)
            ref = F.gaussian_nll_loss(xd, y, var, full=full, eps=1e-4)
            (gref,) = torch.autograd.grad(ref, xd)
            _pw_close(bc.gaussian_nll_loss(x, y, var, full=full, eps=1e-4), ref.detach(), torch.float64,
                      f"gaussian {tuple(var.shape)} {full}")
            _pw_close(bc.gaussian_nll_loss_backward(torch.ones((), device=DEV, dtype=torch.float64), x, y, var,
                                                    full=full, eps=1e-4), gref, torch.float64, "gaussian backward")


def test_smooth_l1_beta_zero_and_bce_logits_no_weights():
    g = R.gen("beta0")
    x = torch.randn(300, generator=g, device=DEV, dtype=torch.float64)
    y = torch.randn(300, generator=g, device=DEV, dtype=torch.float64)
    _pw_close(bc.smooth_l1_loss(x, y, beta=0.0), F.smooth_l1_loss(x, y, beta=0.0), torch.float64, "beta 0")
    t = torch.rand(300, generator=g, device=DEV, dtype=torch.float64)
    xl = 20 * x  # large logits: the stable softplus
    _pw_close(bc.binary_cross_entropy_with_logits(xl, t), F.binary_cross_entropy_with_logits(xl, t), torch.float64,
              "bce logits")
    xd = xl.clone().requires_grad_(True)
    (gref,) = torch.autograd.grad(F.binary_cross_entropy_with_logits(xd, t, reduction="sum"), xd)
    _pw_close(bc.binary_cross_entropy_with_logits_backward(torch.ones((), device=DEV, dtype=torch.float64), xl, t,
                                                           reduction="sum"), gref, torch.float64, "bce logits bwd")


def test_bce_clamps_logs_at_minus_100():
    x = torch.tensor([0.0, 1.0, 0.5, 1e-50], device=DEV, dtype=torch.float64)
    t = torch.tensor([1.0, 0.0, 0.5, 1.0], device=DEV, dtype=torch.float64)
    _pw_close(bc.binary_cross_entropy(x, t, reduction="none"), F.binary_cross_entropy(x, t, reduction="none"),
              torch.float64, "bce clamp")


def test_pointwise_broadcast_and_strided():
    g = R.gen("bcast")
    x = torch.randn(4, 5, 6, generator=g, device=DEV)
    y = torch.randn(5, 1, generator=g, device=DEV)
    for red in ("none", "mean", "sum"):
        ref = F.mse_loss(x.double(), y.double().expand(4, 5, 6), reduction=red)
        _pw_close(bc.mse_loss(x, y, reduction=red), ref, torch.float32, f"broadcast {red}", 120 if red == "sum" else 1)
    xt = torch.randn(64, 33, generator=g, device=DEV).t()  # transposed input
    yt = torch.randn(33, 64, generator=g, device=DEV)
    xd = xt.double().requires_grad_(True)
    ref = F.l1_loss(xd, yt.double(), reduction="sum")
    (gref,) = torch.autograd.grad(ref, xd)
    _pw_close(bc.l1_loss(xt, yt, reduction="sum"), ref.detach(), torch.float32, "strided", 64 * 33)
    out = R.poison((64, 33), torch.float32).t()  # a transposed gradient output
    bc.l1_loss_backward(torch.ones((), device=DEV), xt, yt, reduction="sum", out=out)
    _pw_close(out, gref, torch.float32, "strided backward")
    # margin ranking with a broadcast target
    a, b = torch.randn(8, 16, generator=g, device=DEV), torch.randn(8, 16, generator=g, device=DEV)
    tgt = torch.ones(16, device=DEV)
    tgt[::2] = -1
    ref = F.margin_ranking_loss(a.double(), b.double(), tgt.double().expand(8, 16), margin=0.2, reduction="none")
    _pw_close(bc.margin_ranking_loss(a, b, tgt, margin=0.2, reduction="none"), ref, torch.float32, "ranking bcast")


def test_pointwise_nan_propagation():
    x = torch.randn(64, device=DEV, dtype=torch.float64)
    y = torch.randn(64, device=DEV, dtype=torch.float64)
    x[3] = math.nan
    y[9] = math.nan
    for name in ("mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss", "soft_margin_loss"):
        got = getattr(bc, name)(x, y, reduction="none")
        ref = getattr(F, name)(x, y, reduction="none")
        _pw_close(got, ref, torch.float64, name)
        assert math.isnan(getattr(bc, name)(x, y).item())
    p = torch.rand(64, device=DEV, dtype=torch.float64)
    p[5] = math.nan
    t = torch.rand(64, device=DEV, dtype=torch.float64)
    # torch refuses NaN in binary_cross_entropy (a device-side assert on CUDA, which would poison
    # the context; an error on the CPU): the reference is torch's on the other elements, NaN at 5.
    ref = F.binary_cross_entropy(torch.nan_to_num(p, nan=0.5), t, reduction="none")
    ref[5] = math.nan
    _pw_close(bc.binary_cross_entropy(p, t, reduction="none"), ref, torch.float64, "bce nan")
    _pw_close(bc.binary_cross_entropy_with_logits(x, t, reduction="none"),
              F.binary_cross_entropy_with_logits(x, t, reduction="none"), torch.float64, "bce logits nan")
    s = torch.ones(64, device=DEV, dtype=torch.float64)
    _pw_close(bc.hinge_embedding_loss(x, s, reduction="none"), F.hinge_embedding_loss(x, s, reduction="none"),
              torch.float64, "hinge nan")
    _pw_close(bc.margin_ranking_loss(x, y, s, reduction="none"), F.margin_ranking_loss(x, y, s, reduction="none"),
              torch.float64, "ranking nan")


def test_pointwise_empty():
    e = torch.empty(0, device=DEV)
    for name in ("mse_loss", "l1_loss", "soft_margin_loss"):
        assert math.isnan(getattr(bc, name)(e, e).item())  # 0 / 0, as torch
        assert getattr(bc, name)(e, e, reduction="sum").item() == 0.0
        assert getattr(bc, name)(e, e, reduction="none").shape == (0,)
        assert getattr(bc, name + "_backward")(torch.ones((), device=DEV), e, e).shape == (0,)


_BC_DT = {torch.bfloat16: bc.bfloat16, torch.float16: bc.float16, torch.float32: bc.float32,
          torch.float64: bc.float64}


def _pw_layout(name, pos, kw, reduction):
    s = lambda t: bc.TensorSpec(tuple(t.shape), _BC_DT[t.dtype], list(t.stride()))  # noqa: E731
    extra = [s(kw["pos_weight"])] if "pos_weight" in kw else []
    w = s(kw["weight"]) if "weight" in kw else None
    return bc.LossPlan.select(bc.LossDescriptor(name, s(pos[0]), s(pos[1]), w, reduction, extra=extra)).sku.layout


@pytest.mark.parametrize("name", ["mse_loss", "smooth_l1_loss", "binary_cross_entropy_with_logits"])
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float32], ids=str)
def test_pointwise_contiguous_path(name, dt):
    """The contiguous (16-byte vector) path is selected for dense operands and agrees with the strided
    kernels on an odd length (vector body + scalar tail) and on a misaligned view (x[1:]: falls back)."""
    n = 1000003
    g = R.gen(f"pw-contig/{name}/{dt}")
    pos, kw = _inputs(name, (n + 1,), g)
    kw.update(PARAMS.get(name, {}))
    if name == "smooth_l1_loss":
        kw = {"beta": 0.6}
    full = [p.to(dt) for p in pos]
    fkw = {k: v.to(dt) if torch.is_tensor(v) else v for k, v in kw.items()}
    dense = [p[:n].clone() for p in full]                       # fresh: 16-byte aligned
    dkw = {k: v[:n].clone() if torch.is_tensor(v) else v for k, v in fkw.items()}
    view = [p[1:] for p in full]                                # contiguous, 2 / 4 bytes off alignment
    vkw = {k: v[1:] if torch.is_tensor(v) else v for k, v in fkw.items()}

    def strided(t):  # the same values with stride 2: the strided kernels
        s = torch.empty(2 * t.numel(), device=DEV, dtype=t.dtype)
        s[::2] = t
        return s[::2]
    sp = [strided(p) for p in dense]
    skw = {k: strided(v) if torch.is_tensor(v) else v for k, v in dkw.items()}
    assert _pw_layout(name, dense, dkw, "none") == "pointwise_contiguous"
    assert _pw_layout(name, view, vkw, "none") == "pointwise_contiguous"  # select cannot see the pointer
    assert _pw_layout(name, sp, skw, "none") == "pointwise_strided"
    fn, bfn = getattr(bc, name), getattr(bc, name + "_backward")
    ulp = torch.finfo(dt).eps
    refd = [p.double() for p in dense]
    rkw = {k: v.double() if torch.is_tensor(v) else v for k, v in dkw.items()}
    go = torch.randn(n, generator=g, device=DEV, dtype=torch.float64).to(dt)
    for ops, okw, what in ((dense, dkw, "aligned"), (view[:], vkw, "x[1:]")):
        if what == "x[1:]":  # the view holds the values of dense shifted by one: compare against its own strided copy
            sp_v = [strided(p.clone()) for p in ops]
            skw_v = {k: strided(v.clone()) if torch.is_tensor(v) else v for k, v in okw.items()}
        else:
            sp_v, skw_v = sp, skw
        # reduction none and every backward: the same per-element math; equal up to one rounding
        a = fn(*ops, reduction="none", **okw)
        b = fn(*sp_v, reduction="none", **skw_v)
        torch.testing.assert_close(a.double(), b.double(), rtol=ulp, atol=0.0, msg=lambda m: f"{what} none: {m}")
        for red in ("none", "mean"):
            gl = go if red == "none" else go[:1].reshape(())
            ga = bfn(gl, *ops, reduction=red, out=R.poison((n,), dt), **okw)
            gb = bfn(gl, *sp_v, reduction=red, out=R.poison((n,), dt), **skw_v)
            torch.testing.assert_close(ga.double(), gb.double(), rtol=ulp, atol=0.0,
                                       msg=lambda m: f"{what} backward {red}: {m}")
        # mean / sum: a different (fixed) summation order; both close to the float64 result
        for red in ("mean", "sum"):
            a = fn(*ops, reduction=red, **okw)
            b = fn(*sp_v, reduction=red, **skw_v)
            if what == "aligned":
                ref = getattr(F, name)(*refd, reduction=red, **rkw)
                _pw_close(a, ref.to(dt), dt, f"{name} contiguous {red}", n if red == "sum" else 1)
            _pw_close(a, b, dt, f"{name} {what} {red} contiguous vs strided", n if red == "sum" else 1)
            assert torch.equal(a, fn(*ops, reduction=red, **okw))  # deterministic


def test_pointwise_deterministic():
    x = torch.randn(1 << 20, device=DEV, generator=R.gen("det-pw"))
    y = torch.randn(1 << 20, device=DEV, generator=R.gen("det-pw2"))
    assert torch.equal(bc.mse_loss(x, y), bc.mse_loss(x, y))


def test_pointwise_errors():
    x = torch.randn(4, 5, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="broadcast"):
        bc.mse_loss(x, torch.randn(3, device=DEV))
    with pytest.raises(errors.InvalidDType, match="target is float64"):
        bc.mse_loss(x, torch.randn(4, 5, device=DEV, dtype=torch.float64))
    with pytest.raises(errors.InvalidArgument, match="shape of input"):
        bc.binary_cross_entropy(torch.rand(4, 5, device=DEV), torch.rand(5, device=DEV))
    with pytest.raises(errors.InvalidArgument, match="reduction 'batchmean'"):
        bc.mse_loss(x, x, reduction="batchmean")
    with pytest.raises(errors.Unsupported, match="broadcast"):
        bc.mse_loss_backward(torch.ones((), device=DEV), torch.randn(5, device=DEV), x)


# ---- nll_loss -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_matches_torch(dt, reduction, weighted):
    n, c = 4097, 37
    g = R.gen(f"nll/{dt}/{reduction}/{weighted}")
    x = torch.log_softmax(torch.randn(n, c, generator=g, device=DEV, dtype=torch.float64), -1).to(dt)
    t = torch.randint(0, c, (n,), generator=g, device=DEV)
    t = torch.where(torch.rand(n, generator=g, device=DEV) < 0.2, torch.full_like(t, 5), t)
    w = (torch.rand(c, generator=g, device=DEV, dtype=torch.float64) + 0.5).to(dt) if weighted else None
    xd = x.double().requires_grad_(True)
    ref = F.nll_loss(xd, t, weight=None if w is None else w.double(), ignore_index=5, reduction=reduction)
    go = torch.randn(ref.shape, generator=g, device=DEV, dtype=torch.float64).to(dt)
    (gref,) = torch.autograd.grad(ref, xd, go.double())
    got = bc.nll_loss(x, t.to(torch.int32) if weighted else t, w, ignore_index=5, reduction=reduction)
    _pw_close(got, ref.detach().to(dt), dt, "nll", n if reduction == "sum" else 1)
    out = R.poison((n, c), dt)
    bc.nll_loss_backward(go, x, t, w, ignore_index=5, reduction=reduction, out=out)
    _pw_close(out, gref.to(dt), dt, "nll backward")


def test_nll_bad_target_and_empty():
    x = torch.randn(4, 10, device=DEV)
    t = torch.tensor([1, 99, 2, -5], device=DEV)
    per_row = bc.nll_loss(x, t, reduction="none")
    assert torch.isnan(per_row[1]) and torch.isnan(per_row[3]) and not torch.isnan(per_row[0])
    assert math.isnan(bc.nll_loss(torch.empty(0, 10, device=DEV), torch.empty(0, device=DEV, dtype=torch.int64)).item())


# ---- other frameworks ----------------------------------------------------------------------------
def test_pointwise_from_cupy_and_jax():
    np = pytest.importorskip("numpy")
    a = np.random.default_rng(3).standard_normal((17, 33)).astype(np.float32)
    b = np.random.default_rng(4).standard_normal((17, 33)).astype(np.float32)
    ref = F.huber_loss(torch.from_numpy(a).double(), torch.from_numpy(b).double(), delta=0.5).item()
    ran = []
    try:
        import cupy as cp
        if cp.cuda.runtime.getDeviceCount() > 0:
            r = bc.huber_loss(cp.asarray(a), cp.asarray(b), delta=0.5)
            assert isinstance(r, cp.ndarray)
            assert abs(float(r) - ref) <= 3e-5 * abs(ref)
            ran.append("cupy")
    except ImportError:
        pass
    try:
        import jax
        dev = jax.devices("gpu")[0]
        r = bc.huber_loss(jax.device_put(a, dev), jax.device_put(b, dev), delta=0.5)
        assert isinstance(r, jax.Array)
        assert abs(float(r) - ref) <= 3e-5 * abs(ref)
        ran.append("jax")
    except (ImportError, RuntimeError):
        pass
    if not ran:
        pytest.skip("neither CuPy nor JAX with a GPU")
