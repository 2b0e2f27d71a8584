"""GPU correctness of the loss family (cross-entropy): every reduction, ignore_index, label
smoothing, class weights, int32 / int64 targets, strided rows, the fused gradient and the
backward from the saved logsumexp, against torch.nn.functional.cross_entropy in float64 and
torch.autograd; out-of-range targets give NaN with check_targets=False (the error with the check is
tests/test_loss_targets_gpu.py); V = 128256 once."""
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
    xd = x.detach().double().requires_grad_(True)
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
    per_row = bc.cross_entropy(x, t, reduction="none", check_targets=False)
    torch.cuda.synchronize()
    assert torch.isnan(per_row[1]) and torch.isnan(per_row[3]) and not torch.isnan(per_row[0])
    assert math.isnan(bc.cross_entropy(x, t, check_targets=False).item())


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
        plan = bc.LossPlan.select(bc.CrossEntropyLossDescriptor("cross_entropy", spec(x), spec(t),
                                                                label_smoothing=smoothing, with_grad=True,
                                                                grad_input=spec(g)))
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
    plan = bc.LossPlan.select(bc.CrossEntropyLossDescriptor("cross_entropy", spec(x), spec(t), reduction="none"))
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
    loss, grad = bc.cross_entropy(x, t, reduction="none", return_grad=True, check_targets=False,
                                  grad_loss=torch.ones(300, device=DEV, dtype=torch.bfloat16))
    xd = x.detach().double().requires_grad_(True)
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
    xd = xt.detach().double().requires_grad_(True)
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


def test_gradient_of_a_broadcast_operand_over_an_empty_batch_is_zero():
    # x [4] broadcast over an empty batch [0, 4]: its gradient sums no terms, so it is 0 (as
    # torch's autograd gives), written over the poisoned buffer, not left unwritten.
    for reduction in ("mean", "sum", "none"):
        x = torch.randn(4, device=DEV, dtype=torch.float64, requires_grad=True)
        t = torch.randn(0, 4, device=DEV, dtype=torch.float64)
        go = torch.ones((0, 4) if reduction == "none" else (), device=DEV, dtype=torch.float64)
        torch.autograd.backward(F.mse_loss(x, t.expand(0, 4), reduction=reduction), go)
        gx = torch.full((4,), float("nan"), device=DEV, dtype=torch.float64)
        bc.mse_loss_backward(go, x.detach(), t, reduction=reduction, out=gx)
        assert torch.equal(gx, x.grad), (reduction, gx, x.grad)
        g2 = torch.full((4,), float("nan"), device=DEV, dtype=torch.float64)
        bc.margin_ranking_loss_backward(go, torch.randn(0, 4, device=DEV, dtype=torch.float64), x.detach(),
                                        torch.ones(0, 4, device=DEV, dtype=torch.float64), reduction=reduction,
                                        wrt="input2", out=g2)
        assert torch.equal(g2, torch.zeros_like(g2)), (reduction, g2)


_BC_DT = {torch.bfloat16: bc.bfloat16, torch.float16: bc.float16, torch.float32: bc.float32,
          torch.float64: bc.float64}


def _pw_layout(name, pos, kw, reduction):
    s = lambda t: bc.TensorSpec(tuple(t.shape), _BC_DT[t.dtype], list(t.stride()))  # noqa: E731
    extra = [s(kw["pos_weight"])] if "pos_weight" in kw else []
    w = s(kw["weight"]) if "weight" in kw else None
    return bc.LossPlan.select(bc.PointwiseLossDescriptor(name, s(pos[0]), s(pos[1]), w, extra=extra, reduction=reduction)).sku.layout


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
    # a broadcast input's gradient is summed to its shape
    xb = torch.randn(5, device=DEV)
    xd = xb.detach().double().requires_grad_(True)
    (gref,) = torch.autograd.grad(F.mse_loss(xd.expand(4, 5), x.double()), xd)
    _pw_close(bc.mse_loss_backward(torch.ones((), device=DEV), xb, x), gref, torch.float32, "broadcast input grad")


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
    xd = x.detach().double().requires_grad_(True)
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
    per_row = bc.nll_loss(x, t, reduction="none", check_targets=False)
    assert torch.isnan(per_row[1]) and torch.isnan(per_row[3]) and not torch.isnan(per_row[0])
    assert math.isnan(bc.nll_loss(torch.empty(0, 10, device=DEV), torch.empty(0, device=DEV, dtype=torch.int64)).item())


# ---- row losses: cosine embedding, multi margin, multilabel margin, multilabel soft margin, triplet ------
ROW = ["cosine_embedding_loss", "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
       "triplet_margin_loss"]
ROW_TOL = {torch.float64: (1e-10, 1e-12), torch.float32: (5e-5, 2e-6), torch.float16: (4e-3, 2e-4),
           torch.bfloat16: (2e-2, 2e-3)}


def _row_close(got, ref, dt, what, n=1):
    r, a = ROW_TOL[dt]
    torch.testing.assert_close(got.double(), ref.double(), rtol=r, atol=a * max(1, n), equal_nan=True,
                               msg=lambda m: f"{what}: {m}")


def _multilabel_targets(rows, c, g):
    """Per row: k distinct classes (k uniform in [0, C]), one repeated now and then, then -1, then
    garbage in [-1, C) that torch ignores."""
    u = torch.rand(rows, c, generator=g, device=DEV)
    perm = torch.argsort(u, dim=1)
    k = torch.randint(0, c + 1, (rows, 1), generator=g, device=DEV)
    col = torch.arange(c, device=DEV).expand(rows, c)
    junk = torch.randint(-1, c, (rows, c), generator=g, device=DEV)
    y = torch.where(col < k, perm, torch.where(col == k, torch.full_like(perm, -1), junk))
    rep = (torch.rand(rows, generator=g, device=DEV) < 0.3) & (k[:, 0] >= 2)
    if c >= 2:  # a repeat needs two columns (k >= 2 implies it; the column index must exist too)
        y[rep, 1] = y[rep, 0]
    return y


def _row_spec(name, shape, g, v):
    """float64 operands and the torch / baracuda calls of one row loss. v: variant knobs."""
    r = lambda *s: torch.randn(*s, generator=g, device=DEV, dtype=torch.float64)  # noqa: E731
    u = lambda *s: torch.rand(*s, generator=g, device=DEV, dtype=torch.float64)  # noqa: E731
    lead, c = shape[:-1], shape[-1]
    rows = lead[0] if lead else 1
    if name == "cosine_embedding_loss":
        y = torch.where(torch.rand(lead, generator=g, device=DEV) < 0.5, -1, 1).to(torch.int64)
        if v.get("float_target"):
            y = y.double()
        m = v.get("margin", 0.2)
        return dict(floats=[r(shape), r(shape)], wrt=("input1", "input2"), idx=(0, 1), conv_y=v.get("float_target"),
                    F=lambda fl, y_, red: F.cosine_embedding_loss(fl[0], fl[1], y_, margin=m, reduction=red),
                    B=lambda fl, y_, red: bc.cosine_embedding_loss(fl[0], fl[1], y_, m, reduction=red),
                    Bb=lambda go, fl, y_, red, wrt, out: bc.cosine_embedding_loss_backward(
                        go, fl[0], fl[1], y_, m, reduction=red, wrt=wrt, out=out), y=y)
    if name == "multi_margin_loss":
        y = torch.randint(0, c, lead, generator=g, device=DEV)
        p, w = v.get("p", 1), (u(c) + 0.5 if v.get("weighted") else None)
        return dict(floats=[r(shape)] + ([w] if w is not None else []), wrt=("input",), idx=(0,), y=y,
                    F=lambda fl, y_, red: F.multi_margin_loss(fl[0], y_, p=p, margin=0.7,
                                                              weight=fl[1] if len(fl) > 1 else None, reduction=red),
                    B=lambda fl, y_, red: bc.multi_margin_loss(fl[0], y_, p, 0.7, fl[1] if len(fl) > 1 else None,
                                                               reduction=red),
                    Bb=lambda go, fl, y_, red, wrt, out: bc.multi_margin_loss_backward(
                        go, fl[0], y_, p, 0.7, fl[1] if len(fl) > 1 else None, reduction=red, wrt=wrt, out=out))
    if name == "multilabel_margin_loss":
        y = _multilabel_targets(rows, c, g).reshape(shape)
        # torch's CUDA backward races (thread 0 adds the last target's gradient while the other
        # threads scale by grad_output: pytorch/pytorch#84202); its CPU kernel is serial. The CPU
        # round trip is differentiable, so the gradients still reach the leaves on DEV.
        return dict(floats=[r(shape)], wrt=("input",), idx=(0,), y=y,
                    F=lambda fl, y_, red: F.multilabel_margin_loss(fl[0].cpu(), y_.cpu(), reduction=red).to(DEV),
                    B=lambda fl, y_, red: bc.multilabel_margin_loss(fl[0], y_, reduction=red),
                    Bb=lambda go, fl, y_, red, wrt, out: bc.multilabel_margin_loss_backward(
                        go, fl[0], y_, reduction=red, wrt=wrt, out=out))
    if name == "multilabel_soft_margin_loss":
        t = torch.where(u(shape) < 0.4, torch.zeros(shape, device=DEV, dtype=torch.float64), u(shape))
        t = torch.where(u(shape) < 0.3, torch.ones_like(t), t)
        w = u(c) + 0.5 if v.get("weighted") else None
        return dict(floats=[3 * r(shape), t] + ([w] if w is not None else []), wrt=("input", "target"), idx=(0, 1),
                    y=None,
                    F=lambda fl, y_, red: F.multilabel_soft_margin_loss(fl[0], fl[1], weight=fl[2] if len(fl) > 2
                                                                        else None, reduction=red),
                    B=lambda fl, y_, red: bc.multilabel_soft_margin_loss(fl[0], fl[1], fl[2] if len(fl) > 2 else None,
                                                                         reduction=red),
                    Bb=lambda go, fl, y_, red, wrt, out: bc.multilabel_soft_margin_loss_backward(
                        go, fl[0], fl[1], fl[2] if len(fl) > 2 else None, reduction=red, wrt=wrt, out=out))
    if name == "triplet_margin_loss":
        p, swap = v.get("p", 2), v.get("swap", False)
        return dict(floats=[r(shape), r(shape), r(shape)], wrt=("anchor", "positive", "negative"), idx=(0, 1, 2),
                    y=None,
                    F=lambda fl, y_, red: F.triplet_margin_loss(fl[0], fl[1], fl[2], margin=1.0, p=p, swap=swap,
                                                                reduction=red),
                    B=lambda fl, y_, red: bc.triplet_margin_loss(fl[0], fl[1], fl[2], 1.0, p, swap=swap,
                                                                 reduction=red),
                    Bb=lambda go, fl, y_, red, wrt, out: bc.triplet_margin_loss_backward(
                        go, fl[0], fl[1], fl[2], 1.0, p, swap=swap, reduction=red, wrt=wrt, out=out))
    raise AssertionError(name)


def _row_check(name, shape, dt, reduction, key, variant=None, view=None):
    """Forward and backward (every differentiable operand at once, into poisoned buffers) against
    torch in float64 on the same dt-rounded values. view(t) may return a strided view of t."""
    g = R.gen(key)
    spec = _row_spec(name, tuple(shape), g, variant or {})
    view = view or (lambda t: t)
    floats = [f.to(dt).double() for f in spec["floats"]]
    y = spec["y"]
    if y is not None and spec.get("conv_y"):
        y = y.to(dt)
    # only the differentiable operands: torch refuses requires_grad on multi_margin_loss's weight
    leaves = [f.clone().requires_grad_(i in spec["idx"]) for i, f in enumerate(floats)]
    ref = spec["F"](leaves, None if y is None else (y.double() if y.is_floating_point() else y), reduction)
    go = torch.randn(ref.shape, generator=g, device=DEV, dtype=torch.float64).to(dt)
    want = [leaves[i] for i in spec["idx"]]
    grefs = torch.autograd.grad(ref, want, go.double()) if ref.numel() and floats[0].numel() else \
        [torch.zeros_like(w) for w in want]
    # the differentiable operands come first; class weights after them are not viewed
    fl = [view(f.to(dt)) if i < len(spec["idx"]) else f.to(dt) for i, f in enumerate(floats)]
    got = spec["B"](fl, y, reduction)
    assert got.shape == ref.shape and got.dtype == dt, (got.shape, ref.shape)
    n = math.prod(ref.shape) if reduction == "none" else (shape[0] if len(shape) == 2 else 1)
    # triplet: the loss is margin + d_ap - d_an, a difference of norms of size ~sqrt(2 D) rounded in
    # the compute type, so its absolute error scales with them
    cancel = math.sqrt(2 * shape[-1]) if name == "triplet_margin_loss" else 1
    _row_close(got, ref.detach().to(dt), dt, f"{name} {reduction}", (n if reduction == "sum" else 1) * cancel)
    outs = tuple(view(R.poison(tuple(shape), dt)) for _ in spec["wrt"])
    res = spec["Bb"](go, fl, y, reduction, spec["wrt"], outs)
    assert len(res) == len(outs) and all(a is b for a, b in zip(res, outs))
    for nm, o, gr in zip(spec["wrt"], outs, grefs):
        _row_close(o, gr.to(dt), dt, f"{name}_backward {reduction} w.r.t. {nm}")
    # one gradient (a str wrt): a tensor, the same values
    one = spec["Bb"](go, fl, y, reduction, spec["wrt"][-1], None)
    _row_close(one, grefs[-1].to(dt), dt, f"{name}_backward {reduction} w.r.t. {spec['wrt'][-1]} alone")


ROW_VARIANTS = {"cosine_embedding_loss": [{}, {"float_target": True, "margin": -0.3}],
                "multi_margin_loss": [{"p": 1}, {"p": 2, "weighted": True}],
                "multilabel_margin_loss": [{}],
                "multilabel_soft_margin_loss": [{}, {"weighted": True}],
                "triplet_margin_loss": [{}, {"p": 1, "swap": True}, {"p": 1.5}, {"p": 3, "swap": True}]}


@pytest.mark.parametrize("name", ROW)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dt", [torch.float64, torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_row_losses_match_torch(name, reduction, dt):
    for k, v in enumerate(ROW_VARIANTS[name]):
        # a warp per row (D <= 1024, odd: vector body + tail) and a block per row (D > 1024)
        for shape in ((37, 129), (5, 3001)):
            if name == "multilabel_margin_loss" and shape[1] > 1024 and dt != torch.float32:
                continue  # O(C^2) per row: once is enough
            _row_check(name, shape, dt, reduction, f"row/{name}/{reduction}/{dt}/{k}/{shape}", v)


@pytest.mark.parametrize("name", ROW)
def test_row_losses_single_sample_and_odd_sizes(name):
    for shape in ((1,), (7,), (300,), (1, 1), (3, 2), (1, 8)):
        for red in ("none", "mean", "sum"):
            _row_check(name, shape, torch.float64, red, f"row1/{name}/{shape}/{red}")


def test_row_multi_margin_target_shapes():
    x = torch.randn(10, device=DEV, dtype=torch.float64)
    for t in (torch.tensor(3, device=DEV), torch.tensor([3], device=DEV)):
        for red in ("none", "mean"):
            ref = F.multi_margin_loss(x, t, reduction=red)
            got = bc.multi_margin_loss(x, t, reduction=red)
            assert got.shape == ref.shape
            _row_close(got, ref, torch.float64, f"1-d target {tuple(t.shape)} {red}")


@pytest.mark.parametrize("name", ROW)
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16], ids=str)
def test_row_losses_strided(name, dt):
    """Padded rows (16-byte aligned: vectors with a tail; not aligned: scalar loads), a transposed
    view (column stride != 1) and a view one element off alignment; strided gradient buffers."""
    n, d = 19, 203
    views = {"pad8": lambda t: torch.nn.functional.pad(t, (0, 8 - d % 8 + 8))[:, :d],
             "pad3": lambda t: torch.nn.functional.pad(t, (0, 3))[:, :d],
             "transposed": lambda t: t.t().contiguous().t(),
             "offset1": lambda t: torch.nn.functional.pad(t, (1, 12))[:, 1:d + 1]}  # 16-byte rows, odd pointer
    for vname, fn in views.items():
        _row_check(name, (n, d), dt, "mean", f"rowv/{name}/{dt}/{vname}", None, fn)
        _row_check(name, (n, d), dt, "none", f"rowv-none/{name}/{dt}/{vname}", None, fn)


def test_multilabel_margin_repeats_and_last_target():
    """Semantics pinned by a plain loop (torch's CUDA backward races on the last target): a
    repeated target counts each time, garbage after the -1 is ignored, every target's gradient is
    scaled by grad_output."""
    g = R.gen("mlm-loop")
    n, c = 6, 300  # > 256 classes: two rounds of the block's columns
    x = torch.randn(n, c, generator=g, device=DEV, dtype=torch.float64)
    y = torch.full((n, c), -1, device=DEV, dtype=torch.int64)
    lists = [[5, 5, 299], [0], [], [299, 7, 7, 7, 260], list(range(c)), [3, 280, 3]]
    for i, lst in enumerate(lists):
        y[i, :len(lst)] = torch.tensor(lst, device=DEV, dtype=torch.int64)
    y[1, 2:] = 299  # after the -1: ignored
    go = torch.randn(n, generator=g, device=DEV, dtype=torch.float64) * 3
    xs, gos, loss, grad = x.tolist(), go.tolist(), [], [[0.0] * c for _ in range(n)]
    for i, lst in enumerate(lists):
        tset, s = set(lst), 0.0
        for t in lst:
            for j in range(c):
                z = 1 - xs[i][t] + xs[i][j]
                if j not in tset and z > 0:
                    s += z
                    grad[i][j] += gos[i] / c
                    grad[i][t] -= gos[i] / c
        loss.append(s / c)
    ref_loss = torch.tensor(loss, device=DEV, dtype=torch.float64)
    ref_grad = torch.tensor(grad, device=DEV, dtype=torch.float64)
    _row_close(bc.multilabel_margin_loss(x, y, reduction="none"), ref_loss, torch.float64, "loop loss")
    out = R.poison((n, c), torch.float64)
    bc.multilabel_margin_loss_backward(go, x, y, reduction="none", out=out)
    _row_close(out, ref_grad, torch.float64, "loop grad")


def test_row_bad_targets_give_nan():
    x = torch.randn(4, 10, device=DEV)
    t = torch.tensor([1, 10, 2, -1], device=DEV)
    per_row = bc.multi_margin_loss(x, t, reduction="none", check_targets=False)
    assert torch.isnan(per_row[1]) and torch.isnan(per_row[3]) and not torch.isnan(per_row[0])
    assert math.isnan(bc.multi_margin_loss(x, t, check_targets=False).item())
    g = bc.multi_margin_loss_backward(torch.ones(4, device=DEV), x, t, reduction="none", check_targets=False)
    assert torch.isnan(g[1]).all() and torch.isnan(g[3]).all() and not torch.isnan(g[0]).any()
    y = torch.full((4, 10), -1, device=DEV, dtype=torch.int64)
    y[0, :2] = torch.tensor([3, 4])
    y[1, :2] = torch.tensor([3, 10])        # >= C before the -1: NaN
    y[2, :3] = torch.tensor([3, -2, 99])    # the list ends at a value below -1: NaN (torch refuses)
    y[3, :4] = torch.tensor([5, -1, 99, -7])  # garbage after the -1 is ignored
    per_row = bc.multilabel_margin_loss(x, y, reduction="none", check_targets=False)
    assert torch.isnan(per_row[1]) and torch.isnan(per_row[2])
    ok = y.clone()
    ok[3, 2:] = -1
    ref = F.multilabel_margin_loss(x.double()[[0, 3]], ok[[0, 3]], reduction="none")
    _row_close(per_row[[0, 3]], ref.float(), torch.float32, "multilabel valid rows")
    g = bc.multilabel_margin_loss_backward(torch.ones(4, device=DEV), x, y, reduction="none", check_targets=False)
    assert torch.isnan(g[1]).all() and torch.isnan(g[2]).all() and not torch.isnan(g[[0, 3]]).any()


@pytest.mark.parametrize("name", [n for n in ROW if n != "multilabel_margin_loss"])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16], ids=str)
def test_row_losses_warp_long_rows(name, dt):
    """Rows of 1025..16384 elements with >= 4096 rows take a warp per row (8 rows per block, batched
    16-byte loads): odd lengths (vector body + partial last vector), a padded view (16-byte rows)
    and an odd pointer (one element per load)."""
    pads = {"dense": None, "pad8": lambda t: torch.nn.functional.pad(t, (0, 8 - t.shape[1] % 8 + 8))[:, :t.shape[1]],
            "offset1": lambda t: torch.nn.functional.pad(t, (1, 12))[:, 1:t.shape[1] + 1]}
    for shape in ((4096, 1031), (4100, 2053)):
        for vname, fn in pads.items():
            if vname != "dense" and shape[1] != 1031:
                continue
            for red in ("none", "mean"):
                _row_check(name, shape, dt, red, f"roww/{name}/{dt}/{shape}/{vname}/{red}", None, fn)


def test_multi_margin_warp_long_rows_bad_targets():
    """A warp per row (4096 x 1031): the target's load overlaps the row's; bad targets give NaN rows
    (loss and gradient) and leave the other rows exact."""
    g = R.gen("mm-warp-bad")
    x = torch.randn(4096, 1031, generator=g, device=DEV, dtype=torch.float64)
    t = torch.randint(0, 1031, (4096,), generator=g, device=DEV)
    t[[5, 77, 4095]] = torch.tensor([-1, 1031, 1 << 40], device=DEV)
    t[[6, 8]] = torch.tensor([0, 1030], device=DEV)  # first and last class
    ok = torch.ones(4096, dtype=torch.bool, device=DEV)
    ok[[5, 77, 4095]] = False
    for dt in (torch.float64, torch.bfloat16):
        xd = x.to(dt)
        with pytest.raises(errors.InvalidArgument, match=r"target\[5\] = -1 "):
            bc.multi_margin_loss(xd, t, reduction="none", check_targets=True)
        per_row = bc.multi_margin_loss(xd, t, reduction="none", check_targets=False)
        assert torch.isnan(per_row[~ok]).all() and not torch.isnan(per_row[ok]).any()
        ref = F.multi_margin_loss(xd.double()[ok], t[ok], reduction="none")
        _row_close(per_row[ok], ref.to(dt), dt, f"multi margin warp rows {dt}")
        go = torch.randn(4096, generator=g, device=DEV, dtype=torch.float64).to(dt)
        gr = bc.multi_margin_loss_backward(go, xd, t, reduction="none", check_targets=False)
        assert torch.isnan(gr[~ok]).all() and not torch.isnan(gr[ok]).any()
        xl = xd.double()[ok].requires_grad_(True)
        (gref,) = torch.autograd.grad(F.multi_margin_loss(xl, t[ok], reduction="none"), xl, go.double()[ok])
        _row_close(gr[ok], gref.to(dt), dt, f"multi margin warp rows backward {dt}")


@pytest.mark.parametrize("c", [1, 31, 32, 33, 64, 129, 256, 300, 511, 512, 513])
def test_multilabel_margin_warp_and_block_sizes(c):
    """A warp per row up to 512 classes (the row and the target list in registers, the list read 32
    entries at a time until its -1), a block above: every list length up to C (C: no -1 at all),
    the class >= C / entry < -1 checks in any 32-entry chunk, repeats, garbage after the -1."""
    g = R.gen(f"mlm-sizes/{c}")
    rows = 64
    x = torch.randn(rows, c, generator=g, device=DEV, dtype=torch.float64)
    y = _multilabel_targets(rows, c, g)
    y[0] = torch.randperm(c, generator=torch.Generator().manual_seed(c)).to(DEV)  # a full list, no -1
    if c >= 2:
        y[1, :] = -1
        y[1, : c // 2 + 1] = torch.arange(c // 2 + 1, device=DEV) % c
        y[1, c // 2] = y[1, 0]  # a repeat late in the list
    bad = []
    if c > 40:
        y[2, :41] = torch.arange(41, device=DEV)
        y[2, 40] = c          # a class >= C in the second chunk
        y[2, 41:] = -1
        y[3, :37] = torch.arange(37, device=DEV)
        y[3, 37] = -2         # the list ends below -1 in the second chunk
        bad = [2, 3]
    good = [i for i in range(rows) if i not in bad]
    go = torch.randn(rows, generator=g, device=DEV, dtype=torch.float64)
    for dt in (torch.float64, torch.float32):
        xd = x.to(dt)
        if bad:  # the opt-in check names the first bad entry (row 2's class >= C)
            with pytest.raises(errors.InvalidArgument, match=rf"target\[2, 40\] = {c} "):
                bc.multilabel_margin_loss(xd, y, reduction="none", check_targets=True)
            with pytest.raises(errors.InvalidArgument, match=r"target\[0, 37\] = -2 "):  # row 3 of y
                bc.multilabel_margin_loss(xd[3:], y[3:], reduction="none", check_targets=True)
        per_row = bc.multilabel_margin_loss(xd, y, reduction="none", check_targets=False)
        xl = xd.double()[good].cpu().requires_grad_(True)
        ref = F.multilabel_margin_loss(xl, y[good].cpu(), reduction="none")
        _row_close(per_row[good], ref.to(DEV).to(dt), dt, f"mlm C={c} {dt}")
        assert torch.isnan(per_row[bad]).all()
        (gref,) = torch.autograd.grad(ref, xl, go[good].cpu())
        gr = bc.multilabel_margin_loss_backward(go.to(dt), xd, y, reduction="none", check_targets=False)
        _row_close(gr[good], gref.to(DEV).to(dt), dt, f"mlm C={c} {dt} backward")
        assert torch.isnan(gr[bad]).all()
        for red in ("mean", "sum"):
            yg = y[good]
            ref = F.multilabel_margin_loss(xd.double()[good].cpu(), yg.cpu(), reduction=red).to(DEV)
            _row_close(bc.multilabel_margin_loss(xd[good], yg, reduction=red), ref.to(dt), dt, f"mlm C={c} {red}",
                       len(good) if red == "sum" else 1)


def test_row_losses_empty_batch():
    for name in ROW:
        spec = _row_spec(name, (0, 6), R.gen(f"empty/{name}"), {})
        fl = [f.float() for f in spec["floats"]]
        if name == "multi_margin_loss":
            fl = fl[:1]
        assert math.isnan(spec["B"](fl, spec["y"], "mean").item())  # 0 / 0, as torch
        assert spec["B"](fl, spec["y"], "sum").item() == 0.0
        assert spec["B"](fl, spec["y"], "none").shape == (0,)
        res = spec["Bb"](torch.ones((), device=DEV), fl, spec["y"], "mean", spec["wrt"], None)
        assert all(r.shape == (0, 6) for r in res)


def test_row_losses_deterministic():
    x1, x2 = (torch.randn(4096, 1000, device=DEV, generator=R.gen(f"det-row{i}")) for i in range(2))
    y = torch.where(torch.rand(4096, device=DEV) < 0.5, -1, 1)
    assert torch.equal(bc.cosine_embedding_loss(x1, x2, y), bc.cosine_embedding_loss(x1, x2, y))
    a = bc.triplet_margin_loss_backward(torch.ones((), device=DEV), x1, x2, x1.flip(0), wrt=("anchor", "negative"))
    b = bc.triplet_margin_loss_backward(torch.ones((), device=DEV), x1, x2, x1.flip(0), wrt=("anchor", "negative"))
    assert all(torch.equal(p, q) for p, q in zip(a, b))


def test_row_losses_errors():
    x = torch.randn(4, 5, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="input2 must have the shape of input1"):
        bc.cosine_embedding_loss(x, torch.randn(4, 6, device=DEV), torch.ones(4, device=DEV))
    with pytest.raises(errors.InvalidArgument, match="expected 1 or 2"):
        bc.multi_margin_loss(x, torch.zeros(4, device=DEV, dtype=torch.int64), p=3)
    with pytest.raises(errors.InvalidDType, match="target is float32"):
        bc.multilabel_margin_loss(x, torch.zeros(4, 5, device=DEV))
    with pytest.raises(errors.InvalidArgument, match="not a differentiable"):
        bc.multi_margin_loss_backward(torch.ones((), device=DEV), x, torch.zeros(4, device=DEV, dtype=torch.int64),
                                      wrt="target")
    with pytest.raises(errors.InvalidArgument, match="overlaps"):
        bc.cosine_embedding_loss_backward(torch.ones((), device=DEV), x, x.clone(), torch.ones(4, device=DEV),
                                          out=x)


# ---- gradients w.r.t. the other operands of the pointwise losses ------------------------------------------
def _wrt_inputs(name, shape, g):
    """float64 operands (positional), keyword operands, the differentiable names and their indices."""
    r = lambda *s: torch.randn(*s, generator=g, device=DEV, dtype=torch.float64)  # noqa: E731
    u = lambda *s: torch.rand(*s, generator=g, device=DEV, dtype=torch.float64)  # noqa: E731
    if name in ("mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss"):
        return [r(shape), r(shape)], {}, ("input", "target")
    if name == "binary_cross_entropy":
        return [u(shape) * 0.98 + 0.01, u(shape)], {"weight": u(shape) + 0.5}, ("input", "target")
    if name == "binary_cross_entropy_with_logits":
        last = shape[-1:]
        return [3 * r(shape), u(shape)], {"weight": u(last) + 0.5, "pos_weight": u(last) + 0.5}, ("input", "target")
    if name == "kl_div":
        return [torch.log_softmax(r(shape), -1), u(shape) + 0.05], {}, ("input", "target")  # targets > 0
    if name == "poisson_nll_loss":
        return [r(shape), 4 * u(shape)], {}, ("input", "target")
    if name == "gaussian_nll_loss":
        return [r(shape), r(shape), u(shape) + 0.05], {}, ("input", "target", "var")
    if name == "margin_ranking_loss":
        return [r(shape), r(shape), _sign(g, shape)], {}, ("input1", "input2", "target")
    raise AssertionError(name)


WRT_OPS = ["mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss", "gaussian_nll_loss", "margin_ranking_loss"]


def _wrt_check(name, pos, kw, names, dt, reduction, key, extra_kw=None):
    g = R.gen(key)
    kw = dict(kw)
    kw.update(PARAMS.get(name, {}))
    kw.update(extra_kw or {})
    pos = [p.to(dt).double() for p in pos]
    kw = {k: (v.to(dt).double() if torch.is_tensor(v) else v) for k, v in kw.items()}
    leaves = [p.clone().requires_grad_(True) for p in pos]
    ref = getattr(F, name)(*leaves, reduction=reduction, **kw)
    go = torch.randn(ref.shape, generator=g, device=DEV, dtype=torch.float64).to(dt)
    idx = list(range(len(names)))
    grefs = torch.autograd.grad(ref, [leaves[i] for i in idx], go.double())
    bpos = [p.to(dt) for p in pos]
    bkw = {k: (v.to(dt) if torch.is_tensor(v) else v) for k, v in kw.items()}
    outs = tuple(R.poison(tuple(bpos[i].shape), dt) for i in idx)
    res = getattr(bc, name + "_backward")(go, *bpos, reduction=reduction, wrt=names, out=outs, **bkw)
    assert len(res) == len(outs) and all(a is b for a, b in zip(res, outs))
    for nm, o, gr in zip(names, outs, grefs):
        summed = gr.numel() < ref.numel() if reduction == "none" else gr.numel() < max(p.numel() for p in pos)
        # a summed gradient adds up to numel / size terms: scale the absolute tolerance
        scale = (max(p.numel() for p in pos) // max(gr.numel(), 1)) if summed else 1
        _pw_close(o, gr.to(dt), dt, f"{name}_backward {reduction} w.r.t. {nm}", scale)


@pytest.mark.parametrize("name", WRT_OPS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dt", [torch.float64, torch.float32, torch.bfloat16], ids=str)
def test_pointwise_grad_wrt_every_operand(name, reduction, dt):
    g = R.gen(f"wrt/{name}/{reduction}/{dt}")
    pos, kw, names = _wrt_inputs(name, (33, 129), g)
    _wrt_check(name, pos, kw, names, dt, reduction, f"wrt-go/{name}/{reduction}/{dt}")


@pytest.mark.parametrize("variant", [dict(log_input=False), dict(full=True), dict(log_input=False, full=True)])
def test_poisson_target_grad_variants(variant):
    g = R.gen(f"wrt-poisson/{variant}")
    x = torch.randn(40, 50, generator=g, device=DEV, dtype=torch.float64)
    if not variant.get("log_input", True):
        x = x.abs() + 0.1
    t = 5 * torch.rand(40, 50, generator=g, device=DEV, dtype=torch.float64) + 0.01  # > 0: no 0 * log(0)
    for red in ("none", "mean", "sum"):
        _wrt_check("poisson_nll_loss", [x, t], {}, ("input", "target"), torch.float64, red, f"wrt-p/{red}", variant)


def test_kl_div_log_target_grad_target():
    g = R.gen("wrt-kl")
    x = torch.log_softmax(torch.randn(16, 100, generator=g, device=DEV, dtype=torch.float64), -1)
    t = torch.log_softmax(torch.randn(16, 100, generator=g, device=DEV, dtype=torch.float64), -1)
    for red in ("batchmean", "mean", "sum", "none"):
        _wrt_check("kl_div", [x, t], {}, ("input", "target"), torch.float64, red, f"wrt-kl/{red}",
                   {"log_target": True})


def test_pointwise_grad_of_broadcast_operands():
    """Gradients summed to a broadcast operand's shape: a [D] target, a [1] var over ~4M elements
    (split sums + a second kernel), var of input.shape[:-1] and [N, 1], a [D] input2, a [D] input."""
    g = R.gen("wrt-bcast")
    r = lambda *s: torch.randn(*s, generator=g, device=DEV, dtype=torch.float64)  # noqa: E731
    u = lambda *s: torch.rand(*s, generator=g, device=DEV, dtype=torch.float64)  # noqa: E731
    for red in ("none", "mean", "sum"):
        x, t = r(64, 300), r(300)
        xd, td = x.clone().requires_grad_(True), t.clone().requires_grad_(True)
        ref = F.mse_loss(xd, td.expand(64, 300), reduction=red)
        go = torch.randn(ref.shape, generator=g, device=DEV, dtype=torch.float64)
        gx, gt = torch.autograd.grad(ref, (xd, td), go)
        ox, ot = bc.mse_loss_backward(go, x, t, reduction=red, wrt=("input", "target"))
        _pw_close(ox, gx, torch.float64, f"mse input {red}")
        _pw_close(ot, gt, torch.float64, f"mse [D] target {red}", 64)
        # a [D] input against an [N, D] target
        oi = bc.mse_loss_backward(go, t, x, reduction=red)
        td2 = t.clone().requires_grad_(True)
        (gi,) = torch.autograd.grad(F.mse_loss(td2.expand(64, 300), x, reduction=red), td2, go)
        _pw_close(oi, gi, torch.float64, f"mse [D] input {red}", 64)
    # a [D] target over many rows: a thread per output, split sums + the second kernel
    x, t = r(100000, 64).float(), r(64).float()
    td = t.detach().double().requires_grad_(True)
    (gt,) = torch.autograd.grad(F.mse_loss(x.double(), td.expand(100000, 64)), td)
    got = bc.mse_loss_backward(torch.ones((), device=DEV), x, t, wrt="target")
    _pw_close(got, gt.float(), torch.float32, "mse [64] target over 100000 rows", 100)
    # var of input.shape[:-1] ((1,) over 2^22 elements: split sums), and [N, 1]
    big, mid = (r(1, 1 << 22), r(1, 1 << 22)), (r(1024, 4097), r(1024, 4097))
    for (x, y), var in ((big, u(1) + 0.5), (mid, u(1024) + 0.1), (mid, u(1024, 1) + 0.1)):
        for dt in (torch.float64, torch.float32):
            xv, yv, vv = x.to(dt), y.to(dt), var.to(dt)
            vd = vv.detach().double().requires_grad_(True)
            ref = F.gaussian_nll_loss(xv.double(), yv.double(), vd, eps=1e-4)
            (gv,) = torch.autograd.grad(ref, vd)
            got = bc.gaussian_nll_loss_backward(torch.ones((), device=DEV, dtype=dt), xv, yv, vv, eps=1e-4, wrt="var")
            assert got.shape == vv.shape
            _pw_close(got, gv.to(dt), dt, f"gaussian var {tuple(var.shape)} {dt}", 1 if dt == torch.float64 else 100)
    a, b = r(8, 16), r(16)
    tgt = torch.where(u(8, 16) < 0.5, -1.0, 1.0).double()  # python scalars give float32; operands share a dtype
    bd = b.clone().requires_grad_(True)
    (gb,) = torch.autograd.grad(F.margin_ranking_loss(a, bd.expand(8, 16), tgt, margin=0.1, reduction="sum"), bd)
    _pw_close(bc.margin_ranking_loss_backward(torch.ones((), device=DEV, dtype=torch.float64), a, b, tgt, 0.1,
                                              reduction="sum", wrt="input2"), gb, torch.float64, "ranking input2")


@pytest.mark.parametrize("dt", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_pointwise_rows_path_gaussian_var_per_row(dt, reduction):
    """var [N] (one per row) against [N, D]: the rows kernels (16-byte vectors along each row, var
    broadcast) for the loss and the input / target gradients, a warp per row for var's gradient
    (split over several warps for few long rows); odd D (partial last vector), D below a vector
    (strided), many rows, one row."""
    g = R.gen(f"rows-gauss/{dt}/{reduction}")
    r = lambda *s: torch.randn(*s, generator=g, device=DEV, dtype=torch.float64)  # noqa: E731
    u = lambda *s: torch.rand(*s, generator=g, device=DEV, dtype=torch.float64)  # noqa: E731
    # (37, 1031), (5, 4097), (3, 7): rows not 16-byte aligned, the strided kernels; (1, 4099): one row
    # with a partial last vector
    for n, d in ((37, 1031), (4097, 64), (5, 4097), (3, 7), (2, 70000), (1, 4096), (1, 4099), (64, 1)):
        x, y, var = r(n, d), r(n, d), u(n) + 0.05
        if n == 3:
            var[1] = 1e-9  # below eps: clamped (the gradient still flows, as torch)
        key = f"rows-gauss/{dt}/{reduction}/{n}x{d}"
        _wrt_check("gaussian_nll_loss", [x, y, var], {}, ("input", "target", "var"), dt, reduction, key)
        xs, ys, vs = x.to(dt), y.to(dt), var.to(dt)
        ref = F.gaussian_nll_loss(xs.double(), ys.double(), vs.double(), reduction=reduction)
        _pw_close(bc.gaussian_nll_loss(xs, ys, vs, reduction=reduction), ref.to(dt), dt,
                  f"gaussian {n}x{d} {reduction}", n * d if reduction == "sum" else 1)
        if n == 37:  # var [N, 1] and full=True
            v1 = vs.reshape(n, 1)
            ref = F.gaussian_nll_loss(xs.double(), ys.double(), v1.double(), full=True, reduction=reduction)
            _pw_close(bc.gaussian_nll_loss(xs, ys, v1, full=True, reduction=reduction), ref.to(dt), dt,
                      f"gaussian [N, 1] full {reduction}", n * d if reduction == "sum" else 1)
            _wrt_check("gaussian_nll_loss", [x, y, var.reshape(n, 1)], {}, ("input", "target", "var"), dt, reduction,
                       key + "/n1")


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16], ids=str)
def test_pointwise_rows_path_views(dt):
    """Padded rows (row stride a multiple of the vector: the rows kernels) and views one element
    off alignment (the strided fallback on the same plan) give torch's values."""
    g = R.gen(f"rows-views/{dt}")
    n, d = 33, 1003  # row stride 1016: 16-byte rows, a partial last vector in each
    r = lambda *s: torch.randn(*s, generator=g, device=DEV, dtype=torch.float64)  # noqa: E731
    views = {"pad": lambda t: torch.nn.functional.pad(t, (0, 13))[:, :d],
             "offset1": lambda t: torch.nn.functional.pad(t, (1, 12))[:, 1:d + 1]}
    for vname, fn in views.items():
        x, y = fn(r(n, d).to(dt)), fn(r(n, d).to(dt))
        var = (torch.rand(n, generator=g, device=DEV, dtype=torch.float64) + 0.1).to(dt)
        for red in ("none", "mean", "sum"):
            ref = F.gaussian_nll_loss(x.double(), y.double(), var.double(), reduction=red)
            _pw_close(bc.gaussian_nll_loss(x, y, var, reduction=red), ref.to(dt), dt, f"{vname} {red}",
                      n * d if red == "sum" else 1)
            leaves = [t.detach().double().requires_grad_(True) for t in (x, y, var)]
            lo = F.gaussian_nll_loss(*leaves, reduction=red)
            go = torch.randn(lo.shape, generator=g, device=DEV, dtype=torch.float64).to(dt)
            grefs = torch.autograd.grad(lo, leaves, go.double())
            got = bc.gaussian_nll_loss_backward(go, x, y, var, reduction=red, wrt=("input", "target", "var"))
            for nm, o, gr in zip(("input", "target", "var"), got, grefs):
                _pw_close(o, gr.to(dt), dt, f"{vname} {red} grad {nm}", d if nm == "var" else 1)
        # a [N, 1] target of mse: broadcast along the rows
        t1 = r(n, 1).to(dt)
        for red in ("none", "mean"):
            ref = F.mse_loss(x.double(), t1.double().expand(n, d), reduction=red)
            _pw_close(bc.mse_loss(x, t1, reduction=red), ref.to(dt), dt, f"{vname} mse [N, 1] {red}")


@pytest.mark.parametrize("dt", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_pointwise_rows_path_row_broadcast_weights(dt, reduction):
    """[D] weight / pos_weight against [N, D] rows whose length is a multiple of the vector (the rows
    kernels, the weights as vectors with row stride 0), and a [D] target's gradient next to them."""
    _pw_check("binary_cross_entropy_with_logits", (33, 136), dt, reduction, f"rows-bcew/{dt}/{reduction}")
    _pw_check("binary_cross_entropy_with_logits", (2, 4104), dt, reduction, f"rows-bcew2/{dt}/{reduction}")
    g = R.gen(f"rows-wrt/{dt}/{reduction}")
    pos, kw, names = _wrt_inputs("binary_cross_entropy_with_logits", (65, 264), g)
    _wrt_check("binary_cross_entropy_with_logits", pos, kw, names, dt, reduction, f"rows-wrt-go/{dt}/{reduction}")
    pos, kw, names = _wrt_inputs("kl_div", (9, 1001), g)  # one dense row of 9009: the target's gradient
    _wrt_check("kl_div", pos, kw, names, dt, reduction, f"rows-wrt-kl/{dt}/{reduction}")


def test_pointwise_grad_wrt_refusals():
    x = torch.randn(4, 5, device=DEV)
    for name in ("hinge_embedding_loss", "soft_margin_loss"):
        with pytest.raises(errors.InvalidArgument, match="not a differentiable"):
            getattr(bc, name + "_backward")(torch.ones((), device=DEV), x, torch.ones(4, 5, device=DEV), wrt="target")
    with pytest.raises(errors.InvalidArgument, match="overlaps"):
        bc.mse_loss_backward(torch.ones((), device=DEV), x, x.clone(), wrt=("input", "target"), out=(x, None))
    with pytest.raises(errors.InvalidArgument, match="one per name"):
        bc.mse_loss_backward(torch.ones((), device=DEV), x, x.clone(), wrt=("input", "target"), out=(None,))


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


# ---- CTC loss -------------------------------------------------------------------------------------
# Reference: torch's CPU ctc_loss in float64 on the same (rounded) log-probabilities, and
# torch.autograd for the gradient (torch's convention: exp(lp) - posterior / p, as if through a
# log_softmax). f32 recursions over T steps lose ~T ulps of the running log-likelihood, which the
# gradient's exp(log_sum + nll - lp) turns into a relative error: tolerances grow with T.
CTC_LOSS_TOL = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
CTC_GRAD_BASE = {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
POISON = 12345.0  # never a legitimate loss or gradient, exact enough in every dtype


def _ctc_case(T, N, C, S, key, dt=torch.float32, blank=0, tdt=torch.int64, ldt=torch.int64):
    """Random log_softmax inputs [T, N, C]; padded labels [N, S], never the blank, ~30% repeated
    neighbours; sample 0 has the longest target (S) and the full input (T); other lengths random,
    all feasible when T >= 2 S + 1."""
    g = R.gen(key)
    lp = torch.log_softmax(2 * torch.randn(T, N, C, generator=g, device=DEV, dtype=torch.float64), -1).to(dt)
    r = torch.randint(0, C - 1, (N, S), generator=g, device=DEV)
    labels = r + (r >= blank).long()
    rep = torch.rand(N, S, generator=g, device=DEV) < 0.3
    if S:
        rep[:, 0] = False
    labels = torch.where(rep, labels.roll(1, dims=1), labels)
    tl = torch.randint(0, S + 1, (N,), generator=g, device=DEV)
    il = torch.randint(T // 2, T + 1, (N,), generator=g, device=DEV)
    if N:
        tl[0], il[0] = S, T
    return lp, labels.to(tdt), il.to(ldt), tl.to(ldt)


def _ctc_concat(labels, tl):
    """The concatenated form of padded labels."""
    return torch.cat([labels[i, :int(tl[i])] for i in range(labels.shape[0])])


def _ctc_ref(lp, targets, il, tl, **kw):
    x = lp.detach().double().cpu().requires_grad_(True)
    loss = F.ctc_loss(x, targets.cpu().long(), il.cpu().long(), tl.cpu().long(), **kw)
    return x, loss


def _ctc_close(got, ref, tol, what):
    ref = ref.double().cpu()
    got = got.double().cpu()
    fin = ref[torch.isfinite(ref)]
    scale = float(fin.abs().max()) if fin.numel() else 1.0
    torch.testing.assert_close(got, ref, rtol=tol, atol=tol * max(scale, 1e-30), equal_nan=True,
                               msg=lambda m: f"{what}: {m}")


def _ctc_grad_tol(dt, T):
    return CTC_GRAD_BASE[dt] + (0.0 if dt == torch.float64 else 1e-5 * T)


@pytest.mark.parametrize("dt", [torch.float64, torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("concat", [False, True], ids=["padded", "concatenated"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_matches_torch(dt, reduction, concat, zero_infinity):
    T, N, C, S = 61, 7, 11, 9
    lp, tg, il, tl = _ctc_case(T, N, C, S, f"ctc/{dt}/{reduction}/{concat}/{zero_infinity}", dt, blank=3,
                               tdt=torch.int32 if concat else torch.int64,
                               ldt=torch.int32 if zero_infinity else torch.int64)
    tl[N - 1], il[N - 1] = S, 3  # sample N - 1: too short for its labels, an infinite loss
    if concat:
        tg = _ctc_concat(tg, tl)
    x, ref = _ctc_ref(lp, tg, il, tl, blank=3, reduction=reduction, zero_infinity=zero_infinity)
    assert zero_infinity or reduction != "none" or math.isinf(ref[N - 1].item())
    gl = torch.randn(ref.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64).to(dt).double()
    (gref,) = torch.autograd.grad(ref, x, gl)
    loss, la = bc.ctc_loss(lp, tg, il, tl, blank=3, reduction=reduction, zero_infinity=zero_infinity,
                           return_log_alpha=True)
    assert loss.dtype == dt and tuple(loss.shape) == tuple(ref.shape)
    _ctc_close(loss, ref.detach(), CTC_LOSS_TOL[dt], "loss")
    assert la.dtype == (torch.float64 if dt == torch.float64 else torch.float32)
    out = R.poison(lp.shape, dt, POISON)
    got = bc.ctc_loss_backward(gl.to(dt).to(DEV), lp, tg, il, tl, la, blank=3, reduction=reduction,
                               zero_infinity=zero_infinity, out=out)
    assert got is out
    _ctc_close(out, gref, _ctc_grad_tol(dt, T), "grad")
    for n in range(N):  # past each input length the gradient is exactly 0
        assert bool((out[int(il[n]):, n] == 0).all())


@pytest.mark.parametrize("dt", [torch.float64, torch.float32], ids=str)
def test_ctc_large(dt):
    T, N, C, S = 500, 16, 100, 100
    lp, tg, il, tl = _ctc_case(T, N, C, S, f"ctc/large/{dt}", dt, blank=0)
    x, ref = _ctc_ref(lp, tg, il, tl)
    (gref,) = torch.autograd.grad(ref, x)
    loss, la = bc.ctc_loss(lp, tg, il, tl, return_log_alpha=True)
    _ctc_close(loss, ref.detach(), CTC_LOSS_TOL[dt], "loss")
    grad = bc.ctc_loss_backward(torch.ones((), device=DEV, dtype=dt), lp, tg, il, tl, la)
    _ctc_close(grad, gref, _ctc_grad_tol(dt, T), "grad")
    # log_alpha against torch's own (sample 0 has the longest target: the same width)
    # log_alpha against torch's own inside each sample's lattice (t < il, s < 2 tl + 1; torch leaves
    # the rest unspecified); sample 0 has the longest target, so the widths agree
    la_ref = torch.ops.aten._ctc_loss(lp.double().cpu(), tg.cpu(), il.tolist(), tl.tolist(), 0, False)[1]
    assert tuple(la.shape) == tuple(la_ref.shape)
    t_idx = torch.arange(T)[None, :, None]
    s_idx = torch.arange(la.shape[2])[None, None, :]
    inside = (t_idx < il.cpu()[:, None, None]) & (s_idx < 2 * tl.cpu()[:, None, None] + 1)
    got, want = la.cpu()[inside], la_ref[inside]
    assert bool((torch.isneginf(got) == torch.isneginf(want)).all())
    fin = torch.isfinite(want)
    _ctc_close(got[fin], want[fin], 10 * CTC_LOSS_TOL[dt], "log_alpha")


def test_ctc_edge_cases():
    T, N, C, S = 23, 8, 6, 5
    g = R.gen("ctc/edges")
    lp = torch.log_softmax(torch.randn(T, N, C, generator=g, device=DEV, dtype=torch.float64), -1)
    tg = torch.tensor([[1, 1, 1, 2, 2],   # repeats need blanks between them: 9 steps at least
                       [1, 2, 3, 4, 5],
                       [3, 0, 0, 0, 0],   # padding with the blank is never read
                       [1, 1, 1, 1, 1],
                       [2, 3, 2, 3, 2],
                       [5, 5, 4, 4, 1],
                       [1, 2, 1, 2, 1],
                       [4, 4, 4, 4, 4]], device=DEV)
    il = torch.tensor([T, 0, 0, 9, 5, 7, 1, 8], device=DEV)  # 0 with and without labels, exact fits, too short
    tl = torch.tensor([5, 0, 1, 5, 5, 5, 1, 5], device=DEV)
    for zi in (False, True):
        for reduction in ("none", "mean", "sum"):
            x, ref = _ctc_ref(lp, tg, il, tl, reduction=reduction, zero_infinity=zi)
            loss, la = bc.ctc_loss(lp, tg, il, tl, reduction=reduction, zero_infinity=zi, return_log_alpha=True)
            _ctc_close(loss, ref.detach(), 1e-10, f"edges loss zi={zi} {reduction}")
            gl = torch.rand(ref.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64) + 0.5
            (gref,) = torch.autograd.grad(ref, x, gl)
            out = R.poison(lp.shape, torch.float64, POISON)
            bc.ctc_loss_backward(gl.to(DEV), lp, tg, il, tl, la, reduction=reduction, zero_infinity=zi, out=out)
            _ctc_close(out, gref, 1e-9, f"edges grad zi={zi} {reduction}")
    # lengths as Python lists and as CPU tensors: the same result as device tensors
    a = bc.ctc_loss(lp, tg, il, tl, reduction="none")
    b = bc.ctc_loss(lp, tg, il.tolist(), tl.tolist(), reduction="none")
    c = bc.ctc_loss(lp, tg.cpu(), il.cpu(), tl.cpu(), reduction="none")
    torch.testing.assert_close(a, b, equal_nan=True)
    torch.testing.assert_close(a, c, equal_nan=True)


def test_ctc_unbatched_strided_and_empty():
    T, C, S = 40, 9, 6
    g = R.gen("ctc/unbatched")
    store = torch.empty(3, T, 2 * C, device=DEV, dtype=torch.float64)
    store[:, :, ::2] = torch.log_softmax(torch.randn(3, T, C, generator=g, device=DEV, dtype=torch.float64), -1)
    lp3 = store.permute(1, 0, 2)[:, :, ::2]  # [T, 3, C], no unit stride anywhere
    tg = torch.randint(1, C, (3, S), generator=g, device=DEV)
    il, tl = [T, 30, 17], [6, 4, 0]
    x, ref = _ctc_ref(lp3, tg, torch.tensor(il), torch.tensor(tl), reduction="sum")
    (gref,) = torch.autograd.grad(ref, x)
    loss, la = bc.ctc_loss(lp3, tg, il, tl, reduction="sum", return_log_alpha=True)
    _ctc_close(loss, ref.detach(), 1e-10, "strided loss")
    out = torch.full((3, T, C), POISON, device=DEV, dtype=torch.float64).permute(1, 0, 2)  # a strided output
    bc.ctc_loss_backward(1.0, lp3, tg, il, tl, la, reduction="sum", out=out)
    _ctc_close(out, gref, 1e-9, "strided grad")
    # unbatched: log_probs [T, C], targets [S], lengths as ints (reference: the batch of one)
    lp1, tg1 = lp3[:, 1], tg[1, :4]
    x1, ref1 = _ctc_ref(lp1[:, None], tg1[None], torch.tensor([30]), torch.tensor([4]), reduction="none")
    l1, la1 = bc.ctc_loss(lp1, tg1, 30, 4, reduction="none", return_log_alpha=True)
    assert tuple(l1.shape) == () and la1.shape[0] == 1
    _ctc_close(l1, ref1.detach()[0], 1e-10, "unbatched loss")
    (g1ref,) = torch.autograd.grad(ref1, x1, torch.ones(1, dtype=torch.float64))
    g1 = bc.ctc_loss_backward(torch.ones((), device=DEV, dtype=torch.float64), lp1, tg1, 30, 4, la1,
                              reduction="none")
    assert tuple(g1.shape) == (T, C)
    _ctc_close(g1, g1ref[:, 0], 1e-9, "unbatched grad")
    # no samples: mean is NaN, sum 0, none empty (as torch)
    e = torch.empty(T, 0, C, device=DEV, dtype=torch.float64)
    et = torch.empty(0, S, device=DEV, dtype=torch.int64)
    assert math.isnan(bc.ctc_loss(e, et, [], []).item())
    assert bc.ctc_loss(e, et, [], [], reduction="sum").item() == 0.0
    assert tuple(bc.ctc_loss(e, et, [], [], reduction="none").shape) == (0,)


def test_ctc_bad_lengths_and_labels():
    T, N, C, S = 20, 4, 5, 3
    lp, tg, il, tl = _ctc_case(T, N, C, S, "ctc/bad", torch.float32)
    tl[2] = 2  # sample 2 (made invalid below) starts valid
    # host lengths: torch's errors
    with pytest.raises(errors.InvalidArgument, match=r"input_lengths\[1\] = 21 is outside \[0, T = 20\]"):
        bc.ctc_loss(lp, tg, [20, 21, 5, 5], tl.tolist())
    with pytest.raises(errors.InvalidArgument, match="exceeds the padded targets' width"):
        bc.ctc_loss(lp, tg, il.tolist(), [1, 4, 1, 1])
    with pytest.raises(errors.InvalidArgument, match="add up to"):
        bc.ctc_loss(lp, tg.reshape(-1)[:5], il.tolist(), [1, 1, 1, 1])
    with pytest.raises(errors.InvalidArgument, match="one per sample"):
        bc.ctc_loss(lp, tg, il.tolist()[:3], tl.tolist())
    with pytest.raises(errors.InvalidDType, match="input_lengths is float32"):
        bc.ctc_loss(lp, tg, il.float(), tl)
    # device lengths / labels are not checked on the host: the invalid sample is NaN, the rest exact
    ref = _ctc_ref(lp, tg, il, tl, reduction="none")[1].detach()
    for bad_il, bad_tl, bad_tg in [(T + 1, None, None), (-1, None, None), (None, S + 1, None), (None, -2, None),
                                   (None, None, C), (None, None, -1)]:
        il2, tl2, tg2 = il.clone(), tl.clone(), tg.clone()
        if bad_il is not None:
            il2[2] = bad_il
        if bad_tl is not None:
            tl2[2] = bad_tl
        if bad_tg is not None:
            tl2[2] = S
            tg2[2, 1] = bad_tg
        loss, la = bc.ctc_loss(lp, tg2, il2, tl2, reduction="none", return_log_alpha=True)
        assert torch.isnan(loss[2]), (bad_il, bad_tl, bad_tg)
        keep = [0, 1, 3]
        _ctc_close(loss[keep], ref[keep], CTC_LOSS_TOL[torch.float32], "valid samples")
        grad = bc.ctc_loss_backward(torch.ones(N, device=DEV), lp, tg2, il2, tl2, la, reduction="none")
        assert bool(torch.isnan(grad[:, 2]).all()) and bool(torch.isfinite(grad[:, keep]).all())
    # concatenated device lengths that do not add up: every sample NaN, nothing read out of bounds
    flat = torch.cat([tg[i, :int(tl[i])] for i in range(N)])
    tl3 = tl.clone()
    tl3[0] += 1
    loss = bc.ctc_loss(lp, flat, il, tl3, reduction="none", max_target_length=S + 1)
    assert bool(torch.isnan(loss).all())


def test_ctc_deterministic_and_plan_api():
    T, N, C, S = 97, 5, 13, 11
    lp, tg, il, tl = _ctc_case(T, N, C, S, "ctc/plan", torch.float32)
    spec = lambda t: bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), [int(s) for s in t.stride()])  # noqa: E731
    desc = bc.CtcLossDescriptor("ctc_loss", spec(lp), spec(tg), spec(il), spec(tl), reduction="mean")
    plan = bc.CtcLossPlan.select(desc)
    ws = torch.empty(plan.workspace_bytes(), device=DEV, dtype=torch.uint8)
    outs = []
    for _ in range(2):
        out = torch.full((), POISON, device=DEV)
        la = torch.full(plan.log_alpha_shape(), POISON, device=DEV)
        plan.run(lp, tg, il, tl, la, ws, out=out)
        outs.append((out.clone(), la.clone()))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    la = outs[0][1]
    assert not bool((la == POISON).any())  # written whole: -inf outside each sample's lattice
    for n in range(N):
        assert bool(torch.isneginf(la[n, int(il[n]):]).all())
        assert bool(torch.isneginf(la[n, :, 2 * int(tl[n]) + 1:]).all())
    _ctc_close(outs[0][0], _ctc_ref(lp, tg, il, tl)[1].detach(), CTC_LOSS_TOL[torch.float32], "plan loss")
    bdesc = bc.CtcLossDescriptor("ctc_loss_backward", spec(lp), spec(tg), spec(il), spec(tl), reduction="mean",
                                 grad_loss=bc.TensorSpec((), bc.float32), grad_log_probs=spec(lp))
    bplan = bc.CtcLossPlan.select(bdesc)
    bws = torch.empty(bplan.workspace_bytes(), device=DEV, dtype=torch.uint8)
    grads = []
    for _ in range(2):
        g = torch.full_like(lp, POISON)
        bplan.run(lp, tg, il, tl, la, bws, grad_loss=torch.ones((), device=DEV), grad_log_probs=g)
        grads.append(g)
    assert torch.equal(grads[0], grads[1])
    with pytest.raises(errors.InvalidArgument, match="log_alpha must have shape"):
        plan.run(lp, tg, il, tl, la[:, :-1], ws, out=torch.empty((), device=DEV))
    with pytest.raises(errors.InvalidArgument, match="workspace"):
        plan.run(lp, tg, il, tl, la.clone(), None, out=torch.empty((), device=DEV))
    with pytest.raises(errors.InvalidArgument, match="log_probs"):
        plan.run(lp.cpu(), tg, il, tl, la.clone(), ws, out=torch.empty((), device=DEV))


def test_functional_losses_share_the_core_cache():
    """nll, pointwise and row losses, forward and backward, select through the core's loss cache
    (loss_call): a repeated call adds no plan, a new op or parameter adds one; the results match torch."""
    import torch.nn.functional as F
    g = torch.Generator(device=DEV).manual_seed(36)
    x = torch.randn(8, 5, device=DEV, generator=g)
    y = torch.randn(8, 5, device=DEV, generator=g)
    t = torch.randint(0, 5, (8,), device=DEV, generator=g)
    size = bc._C.loss_cache_size
    bc.mse_loss(x, y)
    n = size()

    def grew(k):  # the cache is LRU with 4096 entries: a long session may have filled it
        assert size() == min(n + k, 4096), (size(), n, k)

    torch.testing.assert_close(bc.mse_loss(x, y), F.mse_loss(x, y))
    grew(0)
    torch.testing.assert_close(bc.huber_loss(x, y, delta=0.5), F.huber_loss(x, y, delta=0.5))
    torch.testing.assert_close(bc.huber_loss(x, y, delta=0.25), F.huber_loss(x, y, delta=0.25))
    grew(2)  # the parameter is part of the key
    gi = bc.mse_loss_backward(torch.ones((), device=DEV), x, y)
    torch.testing.assert_close(gi, 2 * (x - y) / x.numel())
    lp = torch.log_softmax(x, 1)
    torch.testing.assert_close(bc.nll_loss(lp, t), F.nll_loss(lp, t))
    torch.testing.assert_close(bc.multi_margin_loss(x, t), F.multi_margin_loss(x, t))
    grew(5)
    bc.nll_loss(lp, t)
    bc.multi_margin_loss(x, t)
    grew(5)
