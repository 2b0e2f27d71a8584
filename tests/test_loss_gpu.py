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
