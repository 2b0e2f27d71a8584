"""Class-index targets out of range: the functional losses raise InvalidArgument naming the first
offending entry with check_targets=True (opt-in: a small pass and a host sync), and give NaN rows
by default (no host sync, graph-capturable). cross_entropy, nll_loss, multi_margin_loss, multilabel_margin_loss, forward and backward,
from torch, CuPy and JAX."""
import math
import os
import re
import sys

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ref as R  # noqa: E402

errors = bc.errors
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]
DEV = "cuda"


def _logits(n, c, seed=0):
    g = torch.Generator(device=DEV).manual_seed(seed)
    return torch.randn(n, c, generator=g, device=DEV)


def _raises(fn, entry, value):
    with pytest.raises(errors.InvalidArgument, match=re.escape(f"target{entry} = {value}")):
        fn()


@pytest.mark.parametrize("tdt", [torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("bad", [11, -3, 2**31 - 1])
def test_cross_entropy_and_nll(tdt, bad):
    x = _logits(6, 11)
    t = torch.tensor([0, 3, -100, 10, bad, 1], device=DEV, dtype=tdt)
    lse = torch.empty(6, device=DEV)
    g = torch.ones((), device=DEV)
    _raises(lambda: bc.cross_entropy(x, t, check_targets=True), [4], bad)
    _raises(lambda: bc.cross_entropy(x, t, return_grad=True, check_targets=True), [4], bad)
    _raises(lambda: bc.cross_entropy_backward(g, x, t, lse, check_targets=True), [4], bad)
    _raises(lambda: bc.nll_loss(x, t, check_targets=True), [4], bad)
    _raises(lambda: bc.nll_loss_backward(g, x, t, check_targets=True), [4], bad)
    # -100 is ignore_index: no error; another ignore_index makes -100 the offender
    ok = t.clone()
    ok[4] = 2
    assert math.isfinite(bc.cross_entropy(x, ok).item())
    assert math.isfinite(bc.nll_loss(x, ok).item())
    _raises(lambda: bc.cross_entropy(x, ok, ignore_index=-1, check_targets=True), [2], -100)
    # an in-range ignore_index is just a class (and -100 is then out of range)
    ok[2] = 3
    assert math.isfinite(bc.cross_entropy(x, ok, ignore_index=3).item())
    # without the check: no sync, the bad row is NaN and the others are right
    per_row = bc.cross_entropy(x, t, reduction="none", check_targets=False)
    assert torch.isnan(per_row[4]) and not torch.isnan(per_row[[0, 1, 3, 5]]).any()
    assert math.isnan(bc.nll_loss(x, t, check_targets=False).item())
    # the default: no check, no host sync; the bad row is NaN (forward and gradient)
    per_row = bc.cross_entropy(x, t, reduction="none")
    assert torch.isnan(per_row[4]) and not torch.isnan(per_row[[0, 1, 3, 5]]).any()
    assert math.isnan(bc.nll_loss(x, t).item())
    assert math.isnan(bc.cross_entropy(x, t).item())


def test_margin_losses():
    x = _logits(4, 5)
    g = torch.ones((), device=DEV)
    y = torch.tensor([0, 4, 5, 1], device=DEV)
    _raises(lambda: bc.multi_margin_loss(x, y, check_targets=True), [2], 5)
    _raises(lambda: bc.multi_margin_loss_backward(g, x, y, check_targets=True), [2], 5)
    assert math.isnan(bc.multi_margin_loss(x, y, check_targets=False).item())
    assert math.isfinite(bc.multi_margin_loss(x, y.clamp(max=4)).item())
    # multilabel: the list ends at the first negative entry, which must be -1; entries after it
    # are not looked at (99 and -7 below are fine)
    ok = torch.tensor([[0, 2, -1, 99, -7], [4, 3, 2, 1, 0], [-1, 50, 50, 50, 50], [1, 1, -1, -1, 3]], device=DEV)
    assert math.isfinite(bc.multilabel_margin_loss(x, ok).item())
    too_big = ok.clone()
    too_big[1, 3] = 5
    _raises(lambda: bc.multilabel_margin_loss(x, too_big, check_targets=True), [1, 3], 5)
    _raises(lambda: bc.multilabel_margin_loss_backward(g, x, too_big, check_targets=True), [1, 3], 5)
    below = ok.clone()
    below[3, 2] = -2
    _raises(lambda: bc.multilabel_margin_loss(x, below, check_targets=True), [3, 2], -2)
    assert math.isnan(bc.multilabel_margin_loss(x, below, check_targets=False).item())
    # one row ([C] input, [C] target)
    _raises(lambda: bc.multilabel_margin_loss(x[0], torch.tensor([0, 9, -1, 0, 0], device=DEV), check_targets=True), [1], 9)


def test_empty_targets_and_plans_never_sync():
    x = torch.empty(0, 7, device=DEV)
    t = torch.empty(0, dtype=torch.int64, device=DEV)
    assert bc.cross_entropy(x, t, reduction="none").shape == (0,)
    # the plan API never checks values (no sync; graph-capturable): NaN rows
    x = _logits(3, 7)
    t = torch.tensor([1, 70, 2], device=DEV)
    assert torch.isnan(bc.cross_entropy(x, t, reduction="none", check_targets=False)[1])


def test_cupy_and_jax_targets():
    cp = pytest.importorskip("cupy")
    x = cp.asarray(_logits(3, 4).cpu().numpy())
    t = cp.asarray([1, 4, 0], dtype=cp.int64)
    _raises(lambda: bc.cross_entropy(x, t, check_targets=True), [1], 4)
    jax, dev = R.jax_gpu()
    import numpy as np
    xj = jax.device_put(np.asarray(cp.asnumpy(x)), dev)
    tj = jax.device_put(np.array([-2, 1, 0], dtype=np.int32), dev)
    _raises(lambda: bc.nll_loss(xj, tj, check_targets=True), [0], -2)


def test_targets_the_check_cannot_read_are_named_by_the_loss():
    """A CPU target is refused by the loss itself, as `target` (the check's own launches do not
    name it first); a float or misshapen target by the plan, before any value is looked at."""
    x = _logits(4, 5)
    g = torch.ones((), device=DEV)
    t_cpu = torch.tensor([0, 1, 2, 3])
    for call in (lambda: bc.cross_entropy(x, t_cpu), lambda: bc.nll_loss(x, t_cpu),
                 lambda: bc.multi_margin_loss(x, t_cpu), lambda: bc.multi_margin_loss_backward(g, x, t_cpu),
                 lambda: bc.multilabel_margin_loss(x, t_cpu.repeat(4, 5)[:, :5] % 5)):
        with pytest.raises(errors.InvalidArgument, match=r"\btarget: expected a CUDA tensor, got a CPU tensor"):
            call()
    with pytest.raises(errors.InvalidDType, match="target is float32"):
        bc.multi_margin_loss(x, torch.zeros(4, device=DEV))
    # a target of the wrong shape is named as such, not as values out of range
    with pytest.raises(errors.InvalidArgument, match="target") as e:
        bc.multi_margin_loss(x, torch.full((5,), 99, device=DEV))
    assert "outside" not in str(e.value)
