"""Host tests of the loss family (no GPU): select() of the cross-entropy paths and knobs, nll_loss
and the pointwise losses (validation messages, SKU contents, geometry), the registry entries.
(The first cross-entropy host tests live in test_softmax_host.py.)"""
import pytest

bc = pytest.importorskip("baracuda")
from baracuda import errors  # noqa: E402

S = bc.TensorSpec
f16, bf16, f32, f64 = bc.float16, bc.bfloat16, bc.float32, bc.float64


def refused(exc, fn, *needles):
    with pytest.raises(errors.BaracudaError) as info:
        fn()
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    for n in needles:
        assert n in str(info.value), (n, str(info.value))


def ce(shape=(8192, 128256), dt=bf16, **kw):
    grad = S(shape, dt) if kw.get("with_grad") else None
    return bc.LossPlan.select(bc.LossDescriptor("cross_entropy", S(shape, dt), S((shape[0],), bc.int64),
                                                grad_input=grad, **kw))


def _sm90_build():
    return "sm_9" in ce((4, 1000)).sku.arch


def test_cross_entropy_cluster_selection(monkeypatch):
    monkeypatch.delenv("BARACUDA_CE_CFG", raising=False)
    if not _sm90_build():
        pytest.skip("this build has no sm_90 kernels")
    devs = bc.devices()
    if devs and devs[0]["sm"] < 90:
        pytest.skip("the current device is below sm_90")
    # forward only, many rows of >= 16384 classes: the streaming kernel
    assert ce().sku.layout == "rows_stream"
    assert ce((4096, 32000)).sku.layout == "rows_stream"
    # with the gradient: the one-read cluster path
    fused = ce(with_grad=True)
    assert fused.sku.layout == "rows_cluster"
    assert "a cluster of 8 CTA(s) x 256 threads x 8 16-byte vectors" in fused.sku.precision.math
    # label smoothing keeps the forward on the cluster path too
    assert ce(label_smoothing=0.1).sku.layout == "rows_cluster"
    assert "cluster of 2 CTA(s)" in ce((4096, 32000), label_smoothing=0.1).sku.precision.math
    # few rows: the chunked kernels (whole GPU)
    assert ce((4, 128256)).sku.layout == "rows_chunked"
    # rows beyond 16 CTAs of 2048 vectors: chunked
    assert ce((1024, 600000)).sku.layout != "rows_cluster"
    # rows that are not 16-byte aligned: no vectors, no cluster
    odd = bc.LossPlan.select(bc.LossDescriptor("cross_entropy", S((4096, 1001), f32, [1001, 1]),
                                               S((4096,), bc.int64)))
    assert odd.sku.layout != "rows_cluster"


def test_cross_entropy_knobs(monkeypatch):
    if not _sm90_build():
        pytest.skip("this build has no sm_90 kernels")
    devs = bc.devices()
    if devs and devs[0]["sm"] < 90:
        pytest.skip("the current device is below sm_90")
    monkeypatch.setenv("BARACUDA_CE_CFG", "path=chunked")
    assert ce().sku.layout in ("rows", "rows_chunked")
    monkeypatch.setenv("BARACUDA_CE_CFG", "path=cluster,k=4,threads=512")
    assert "x 512 threads x 4 16-byte" in ce().sku.precision.math
    monkeypatch.setenv("BARACUDA_CE_CFG", "path=cluster,k=8,threads=128")
    assert "a cluster of 16 CTA(s) x 128 threads" in ce().sku.precision.math
    monkeypatch.setenv("BARACUDA_CE_CFG", "path=cluster,k=8,threads=256,cluster=4")  # does not fit
    assert ce().sku.layout != "rows_cluster"
    monkeypatch.setenv("BARACUDA_CE_CFG", "bogus,k=3")  # ignored: the defaults
    assert ce().sku.layout == "rows_stream"
    assert ce(with_grad=True).sku.layout == "rows_cluster"


def pw(op, shape=(4, 5), dt=f32, target=None, weight=None, extra=(), reduction="mean", grad=False, grad_loss=None,
       **kw):
    t = target if target is not None else S(shape, dt)
    return bc.LossPlan.select(bc.LossDescriptor(
        op, S(shape, dt), t, weight, reduction, extra=list(extra), grad_input=S(shape, dt) if grad else None,
        grad_loss=grad_loss, **kw))


POINTWISE = ["mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss", "binary_cross_entropy",
             "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss", "gaussian_nll_loss",
             "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss"]


@pytest.mark.parametrize("op", POINTWISE)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_pointwise_select(op, reduction):
    extra = [S((4, 5), f32)] if op in ("gaussian_nll_loss", "margin_ranking_loss") else []
    param = 1.0 if op == "huber_loss" else 0.0
    p = pw(op, reduction=reduction, extra=extra, param=param)
    assert p.sku.category == "loss" and p.sku.op == op
    assert p.sku.layout == "pointwise_contiguous"
    assert p.sku.name == f"loss.{op}.pointwise_contiguous"
    assert p.sku.precision.deterministic and p.sku.precision.accumulator_dtype == f32
    assert p.workspace_bytes() >= 256
    gl = S((4, 5) if reduction == "none" else (), f32)
    b = pw(op + "_backward", reduction=reduction, extra=extra, param=param, grad=True, grad_loss=gl)
    assert b.sku.op == op + "_backward"


def test_pointwise_geometry():
    assert pw("mse_loss", (4, 5, 6), target=S((5, 1), f32)).sku.layout == "pointwise_strided"
    assert "1 merged dim" in pw("mse_loss", (4, 5, 6)).sku.precision.math
    assert pw("mse_loss", (4, 5), target=S((4, 5), f32, [1, 4])).sku.layout == "pointwise_strided"
    p = pw("mse_loss", (1 << 24,), target=S((1 << 24,), f32, [2]))
    assert p.sku.layout == "pointwise_strided"
    assert "1024 block partial(s)" in p.sku.precision.math  # stage-1 blocks capped: fixed order
    # contiguous: every operand dense, no broadcasting; 16-byte vectors, one wave of partial blocks
    p = pw("mse_loss", (1 << 24,), dt=bf16)
    assert p.sku.layout == "pointwise_contiguous" and "8-element 16-byte vector" in p.sku.precision.math
    assert "1024 block partial(s)" not in p.sku.precision.math
    assert pw("mse_loss", (4, 5), target=S((5,), f32)).sku.layout == "pointwise_strided"  # broadcast
    assert pw("binary_cross_entropy_with_logits", (4, 5), weight=S((5,), f32)).sku.layout == "pointwise_strided"
    assert pw("binary_cross_entropy_with_logits", (4, 5), weight=S((4, 5), f32),
              extra=[S((4, 5), f32)]).sku.layout == "pointwise_contiguous"
    gl = S((4, 5), f32, [1, 4])  # a transposed grad_loss makes reduction none's backward strided
    assert pw("mse_loss_backward", (4, 5), reduction="none", grad=True, grad_loss=gl).sku.layout == \
        "pointwise_strided"
    assert pw("mse_loss_backward", (4, 5), reduction="mean", grad=True,
              grad_loss=S((), f32)).sku.layout == "pointwise_contiguous"
    assert pw("mse_loss", (0,)).workspace_bytes() >= 256
    # gaussian: var of input.shape[:-1] gets a trailing 1
    assert pw("gaussian_nll_loss", (4, 5), extra=[S((4,), f32)]).sku.op == "gaussian_nll_loss"
    assert pw("kl_div", (4, 5), reduction="batchmean").sku.op == "kl_div"


def test_pointwise_refusals():
    refused(errors.InvalidArgument, lambda: pw("mse_loss", (4, 5), target=S((3,), f32)), "does not broadcast")
    refused(errors.InvalidDType, lambda: pw("mse_loss", target=S((4, 5), f64)), "target is float64")
    refused(errors.InvalidDType, lambda: pw("mse_loss", dt=bc.int32, target=S((4, 5), bc.int32)), "input is int32")
    refused(errors.InvalidArgument, lambda: pw("mse_loss", reduction="batchmean"), "reduction 'batchmean'")
    refused(errors.InvalidArgument, lambda: pw("mse_loss", weight=S((4, 5), f32)), "takes no weight")
    refused(errors.InvalidArgument, lambda: pw("binary_cross_entropy", target=S((5,), f32)), "shape of input")
    refused(errors.InvalidArgument, lambda: pw("gaussian_nll_loss"), "extra operand", "var")
    refused(errors.InvalidArgument, lambda: pw("margin_ranking_loss"), "input2")
    refused(errors.InvalidArgument, lambda: pw("huber_loss", param=0.0), "delta must be > 0")
    refused(errors.InvalidArgument, lambda: pw("smooth_l1_loss", param=-1.0), "beta")
    refused(errors.InvalidArgument, lambda: pw("poisson_nll_loss", param=-1.0), "eps")
    refused(errors.InvalidArgument, lambda: pw("mse_loss_backward", grad=True), "grad_loss")
    refused(errors.InvalidArgument, lambda: pw("mse_loss_backward", grad=True, reduction="none",
                                               grad_loss=S((), f32)), "grad_loss must have shape (4, 5)")
    refused(errors.Unsupported, lambda: bc.LossPlan.select(bc.LossDescriptor(
        "mse_loss_backward", S((5,), f32), S((4, 5), f32), grad_input=S((5,), f32), grad_loss=S((), f32))),
        "broadcast")
    refused(errors.InvalidArgument, lambda: bc.LossPlan.select(bc.LossDescriptor(
        "mse_loss_backward", S((4, 5), f32), S((4, 5), f32), grad_input=S((4, 5), f32, [0, 1]),
        grad_loss=S((), f32))), "overlapping")
    refused(errors.InvalidArgument, lambda: pw("hinge"), "unknown op", "mse_loss")


def test_nll_select_and_refusals():
    d = bc.LossDescriptor("nll_loss", S((64, 10), f32), S((64,), bc.int32), S((10,), f32))
    p = bc.LossPlan.select(d)
    assert p.sku.layout == "rows" and p.sku.op == "nll_loss" and p.sku.dtypes[-1] == bc.int32
    assert p.workspace_bytes() >= 256
    refused(errors.InvalidArgument, lambda: bc.LossPlan.select(bc.LossDescriptor(
        "nll_loss", S((64, 10, 3), f32), S((64,), bc.int64))), "[N, C]")
    refused(errors.InvalidDType, lambda: bc.LossPlan.select(bc.LossDescriptor(
        "nll_loss", S((64, 10), f32), S((64,), f32))), "target is float32")
    refused(errors.InvalidArgument, lambda: bc.LossPlan.select(bc.LossDescriptor(
        "nll_loss", S((64, 10), f32), S((64,), bc.int64), S((9,), f32))), "weight must have shape [10]")
    refused(errors.InvalidArgument, lambda: bc.LossPlan.select(bc.LossDescriptor(
        "nll_loss_backward", S((64, 10), f32), S((64,), bc.int64), grad_input=S((64, 10), f32))), "grad_loss")
    b = bc.LossPlan.select(bc.LossDescriptor("nll_loss_backward", S((64, 10), f32), S((64,), bc.int64),
                                             reduction="none", grad_input=S((64, 10), f32),
                                             grad_loss=S((64,), f32)))
    assert b.sku.op == "nll_loss_backward"


def test_descriptor_identity():
    a = bc.LossDescriptor("huber_loss", S((4, 5), f32), S((4, 5), f32), param=0.5)
    b = bc.LossDescriptor("huber_loss", S((4, 5), f32), S((4, 5), f32), param=0.5)
    c = bc.LossDescriptor("huber_loss", S((4, 5), f32), S((4, 5), f32), param=0.7)
    assert a == b and hash(a) == hash(b) and a != c
    k1 = bc.LossDescriptor("kl_div", S((4, 5), f32), S((4, 5), f32), log_target=True)
    k2 = bc.LossDescriptor("kl_div", S((4, 5), f32), S((4, 5), f32))
    assert k1 != k2 and k1.log_target and not k2.log_target


def test_registry_lists_the_losses():
    fam = {f["name"]: f for f in bc.families()}["loss"]
    ops = {o["op"] for o in fam["ops"]}
    assert {"cross_entropy", "nll_loss"} | set(POINTWISE) <= ops
    for name in ["nll_loss"] + POINTWISE:
        assert callable(getattr(bc, name)) and callable(getattr(bc, name + "_backward"))
