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
    return bc.LossPlan.select(bc.CrossEntropyLossDescriptor("cross_entropy", S(shape, dt), S((shape[0],), bc.int64),
                                                grad_input=grad, **kw))


def _sm90_build():
    return any(int(a.split("_")[1].rstrip("a")) >= 90 for a in ce((4, 1000)).sku.arch.split(","))


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
    odd = bc.LossPlan.select(bc.CrossEntropyLossDescriptor("cross_entropy", S((4096, 1001), f32, [1001, 1]),
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
    monkeypatch.setenv("BARACUDA_CE_CFG", "k=3")  # an out-of-range value is ignored: the defaults
    assert ce().sku.layout == "rows_stream"
    monkeypatch.setenv("BARACUDA_CE_CFG", "bogus,k=3")  # an unknown key is refused by name
    with pytest.raises(errors.InvalidArgument, match="'bogus' in the environment variable BARACUDA_CE_CFG"):
        ce()
    monkeypatch.delenv("BARACUDA_CE_CFG")
    d = bc.CrossEntropyLossDescriptor("cross_entropy", S((8192, 128256), bf16), S((8192,), bc.int64))
    assert bc.LossPlan.select(d, bc.PlanPreference(tuning="path=chunked")).sku.layout != "rows_stream"
    assert ce(with_grad=True).sku.layout == "rows_cluster"


def pw(op, shape=(4, 5), dt=f32, target=None, weight=None, extra=(), reduction="mean", grad=False, grad_loss=None,
       **kw):
    t = target if target is not None else S(shape, dt)
    return bc.LossPlan.select(bc.PointwiseLossDescriptor(
        op, S(shape, dt), t, weight, reduction=reduction, extra=list(extra), grad_input=S(shape, dt) if grad else None,
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
    # a broadcast input's gradient is summed to its shape (no longer refused)
    summed = bc.LossPlan.select(bc.PointwiseLossDescriptor(
        "mse_loss_backward", S((5,), f32), S((4, 5), f32), grad_input=S((5,), f32), grad_loss=S((), f32)))
    assert summed.sku.layout == "pointwise_reduce" and "summed over its broadcast dims" in summed.sku.precision.math
    refused(errors.InvalidArgument, lambda: bc.LossPlan.select(bc.PointwiseLossDescriptor(
        "mse_loss_backward", S((4, 5), f32), S((4, 5), f32), grad_input=S((4, 5), f32, [0, 1]),
        grad_loss=S((), f32))), "overlapping")
    refused(errors.InvalidArgument, lambda: pw("hinge"), "unknown op", "mse_loss")


def test_nll_select_and_refusals():
    d = bc.CrossEntropyLossDescriptor("nll_loss", S((64, 10), f32), S((64,), bc.int32), S((10,), f32))
    p = bc.LossPlan.select(d)
    assert p.sku.layout == "rows" and p.sku.op == "nll_loss" and p.sku.dtypes[-1] == bc.int32
    assert p.workspace_bytes() >= 256
    refused(errors.InvalidArgument, lambda: bc.LossPlan.select(bc.CrossEntropyLossDescriptor(
        "nll_loss", S((64, 10, 3), f32), S((64,), bc.int64))), "[N, C]")
    refused(errors.InvalidDType, lambda: bc.LossPlan.select(bc.CrossEntropyLossDescriptor(
        "nll_loss", S((64, 10), f32), S((64,), f32))), "target is float32")
    refused(errors.InvalidArgument, lambda: bc.LossPlan.select(bc.CrossEntropyLossDescriptor(
        "nll_loss", S((64, 10), f32), S((64,), bc.int64), S((9,), f32))), "weight must have shape [10]")
    refused(errors.InvalidArgument, lambda: bc.LossPlan.select(bc.CrossEntropyLossDescriptor(
        "nll_loss_backward", S((64, 10), f32), S((64,), bc.int64), grad_input=S((64, 10), f32))), "grad_loss")
    b = bc.LossPlan.select(bc.CrossEntropyLossDescriptor("nll_loss_backward", S((64, 10), f32), S((64,), bc.int64),
                                             reduction="none", grad_input=S((64, 10), f32),
                                             grad_loss=S((64,), f32)))
    assert b.sku.op == "nll_loss_backward"


# ---- row losses (cosine embedding, multi margin, multilabel margin, multilabel soft margin, triplet) ----
I64, I32 = bc.int64, bc.int32
ROW = ["cosine_embedding_loss", "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
       "triplet_margin_loss"]


def row_desc(op, shape=(8, 100), dt=f32, reduction="mean", target=None, weight=None, extra=None, grad_loss=None,
             **kw):
    base = op[:-len("_backward")] if op.endswith("_backward") else op
    n = shape[0] if len(shape) == 2 else None
    if target is None:
        if base == "cosine_embedding_loss":
            target = S((n,) if n is not None else (), I64)
        elif base == "multi_margin_loss":
            target = S((n,) if n is not None else (), I64)
        elif base == "multilabel_margin_loss":
            target = S(shape, I64)
        else:
            target = S(shape, dt)  # soft margin target / triplet positive
    if extra is None:
        extra = [S(shape, dt)] if base in ("cosine_embedding_loss", "triplet_margin_loss") else []
    if op.endswith("_backward") and grad_loss is None:
        grad_loss = S((n,) if reduction == "none" and n is not None else (), dt)
    return bc.RowLossDescriptor(op, S(shape, dt), target, weight, reduction=reduction, extra=list(extra),
                                grad_loss=grad_loss, **kw)


def row(op, *a, **kw):
    return bc.LossPlan.select(row_desc(op, *a, **kw))


@pytest.mark.parametrize("op", ROW)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dt", [f32, bf16, f16, f64], ids=str)
def test_row_select(op, reduction, dt):
    p = row(op, reduction=reduction, dt=dt)
    want = "rows_warp"  # multilabel margin too: 100 classes <= 512, a warp per row
    assert p.sku.category == "loss" and p.sku.op == op and p.sku.layout == want
    assert p.sku.name == f"loss.{op}.{want}"
    assert p.sku.precision.deterministic and p.sku.precision.bit_stable
    assert p.sku.precision.accumulator_dtype == (f64 if dt == f64 else f32)
    assert p.workspace_bytes() >= 256
    b = row(op + "_backward", reduction=reduction, dt=dt)
    assert b.sku.op == op + "_backward" and "gradients per element" in b.sku.precision.math


def test_row_geometry():
    assert row("cosine_embedding_loss", (8, 4096)).sku.layout == "rows_block"
    assert row("triplet_margin_loss", (8, 1024)).sku.layout == "rows_warp"
    # long rows: a warp per row when there are enough rows to fill the GPU, else a block
    assert row("multi_margin_loss", (4096, 2048), bf16).sku.layout == "rows_warp"
    assert row("multi_margin_loss", (4095, 2048), bf16).sku.layout == "rows_block"
    assert row("cosine_embedding_loss", (65536, 16384), bf16).sku.layout == "rows_warp"
    assert row("cosine_embedding_loss", (65536, 16385), bf16).sku.layout == "rows_block"
    assert row("triplet_margin_loss_backward", (65536, 2048), bf16, wrt=["anchor"]).sku.layout == "rows_warp"
    assert "8-element 16-byte vector" in row("cosine_embedding_loss", (8, 1024), bf16).sku.precision.math
    assert "4-element 16-byte vector" in row("multi_margin_loss", (8, 1000)).sku.precision.math
    # a column-strided operand, a row stride that is not 16-byte aligned: one element per load
    tr = S((8, 100), f32, [1, 8])
    assert "one element per load" in bc.LossPlan.select(bc.RowLossDescriptor(
        "cosine_embedding_loss", tr, S((8,), I64), extra=[S((8, 100), f32)])).sku.precision.math
    odd = S((8, 100), f32, [101, 1])
    assert "one element per load" in bc.LossPlan.select(bc.RowLossDescriptor(
        "triplet_margin_loss", odd, S((8, 100), f32), extra=[S((8, 100), f32)])).sku.precision.math
    # single samples [D] / [C]
    assert row("cosine_embedding_loss", (100,), target=S((), f32)).sku.layout == "rows_warp"
    assert row("multi_margin_loss", (10,), target=S((1,), I32)).sku.dtypes[-1] == I32
    assert row("multilabel_margin_loss", (10,)).sku.layout == "rows_warp"
    assert row("multilabel_margin_loss", (4, 512)).sku.layout == "rows_warp"
    assert row("multilabel_margin_loss", (4, 513)).sku.layout == "rows_shared"
    assert row("multilabel_margin_loss", (4, 8192)).sku.layout == "rows_shared"
    assert row("multilabel_margin_loss", (4, 6144), f64).sku.layout == "rows_shared"


def test_row_backward_wrt():
    b = row("cosine_embedding_loss_backward", wrt=["input1", "input2"], grads=[S((8, 100), f32), S((8, 100), f32)])
    assert b.descriptor.wrt == ["input1", "input2"]
    row("cosine_embedding_loss_backward", wrt=["input2"])  # grads default: contiguous, the operand's shape
    row("triplet_margin_loss_backward", wrt=["anchor", "positive", "negative"])
    row("triplet_margin_loss_backward", wrt=["negative", "input"], swap=True, p=1.5)
    row("multilabel_soft_margin_loss_backward", wrt=["input", "target"], weight=S((100,), f32))
    refused(errors.InvalidArgument, lambda: row("multi_margin_loss_backward", wrt=["target"]),
            "wrt 'target' is not a differentiable operand", "expected one of input")
    refused(errors.InvalidArgument, lambda: row("cosine_embedding_loss_backward", wrt=["input", "input1"]), "twice")
    refused(errors.InvalidArgument, lambda: row("cosine_embedding_loss_backward", wrt=["input1", "input2"],
                                                grads=[S((8, 100), f32)]), "one spec per wrt entry")
    refused(errors.InvalidArgument, lambda: row("cosine_embedding_loss_backward", grads=[S((8, 100), f32)]),
            "wrt is empty")
    refused(errors.InvalidDType, lambda: row("triplet_margin_loss_backward", wrt=["positive"],
                                             grads=[S((8, 100), f64)]), "gradient w.r.t. positive must be float32")
    refused(errors.InvalidArgument, lambda: row("triplet_margin_loss_backward", wrt=["positive"],
                                                grads=[S((8, 99), f32)]), "must have the shape of positive")
    refused(errors.InvalidArgument, lambda: row("triplet_margin_loss_backward", wrt=["negative"],
                                                grads=[S((8, 100), f32, [0, 1])]), "overlapping")
    refused(errors.InvalidArgument, lambda: bc.LossPlan.select(bc.RowLossDescriptor(
        "multi_margin_loss_backward", S((8, 10), f32), S((8,), I64))), "grad_loss is required")
    refused(errors.InvalidArgument, lambda: row("multi_margin_loss_backward", reduction="none",
                                                grad_loss=S((), f32)), "grad_loss must have shape")
    refused(errors.InvalidDType, lambda: row("multi_margin_loss_backward", grad_loss=S((), f64)), "grad_loss must be")


def test_row_refusals():
    refused(errors.InvalidArgument, lambda: row("cosine_embedding_loss", extra=[S((8, 99), f32)]),
            "input2 must have the shape of input1")
    refused(errors.InvalidDType, lambda: row("cosine_embedding_loss", extra=[S((8, 100), f64)]), "input2 is float64")
    refused(errors.InvalidArgument, lambda: row("cosine_embedding_loss", target=S((9,), I64)),
            "target must have shape")
    refused(errors.InvalidDType, lambda: row("cosine_embedding_loss", target=S((8,), bc.uint8)), "target is uint8")
    refused(errors.InvalidArgument, lambda: row("cosine_embedding_loss", (2, 3, 4)), "flatten the leading dims")
    refused(errors.InvalidArgument, lambda: row("cosine_embedding_loss", (8, 0)), "0 features")
    refused(errors.InvalidArgument, lambda: row("cosine_embedding_loss", extra=[]), "extra operand", "input2")
    refused(errors.InvalidArgument, lambda: row("cosine_embedding_loss", weight=S((100,), f32)), "takes no weight")
    refused(errors.InvalidArgument, lambda: row("cosine_embedding_loss", swap=True), "swap")
    refused(errors.InvalidDType, lambda: row("cosine_embedding_loss", dt=bc.int32, extra=[S((8, 100), bc.int32)]),
            "input1 is int32")
    refused(errors.InvalidArgument, lambda: row("multi_margin_loss", p=3.0), "p 3", "expected 1 or 2")
    refused(errors.InvalidDType, lambda: row("multi_margin_loss", target=S((8,), f32)), "target is float32",
            "int64 or int32")
    refused(errors.InvalidArgument, lambda: row("multi_margin_loss", target=S((8, 1), I64)), "target must have shape")
    refused(errors.InvalidArgument, lambda: row("multi_margin_loss", weight=S((99,), f32)), "weight must have shape")
    refused(errors.InvalidDType, lambda: row("multi_margin_loss", weight=S((100,), f64)), "weight is float64")
    refused(errors.InvalidArgument, lambda: row("multi_margin_loss", reduction="batchmean"), "reduction 'batchmean'")
    refused(errors.InvalidArgument, lambda: row("multi_margin_loss", margin=float("inf")), "margin")
    refused(errors.InvalidArgument, lambda: row("multilabel_margin_loss", target=S((8, 99), I64)),
            "target must have the shape of input")
    refused(errors.InvalidDType, lambda: row("multilabel_margin_loss", target=S((8, 100), f32)), "target is float32")
    refused(errors.Unsupported, lambda: row("multilabel_margin_loss", (4, 8193)), "8193 classes", "at most 8192")
    refused(errors.Unsupported, lambda: row("multilabel_margin_loss", (4, 6145), f64), "at most 6144")
    refused(errors.InvalidDType, lambda: row("multilabel_soft_margin_loss", target=S((8, 100), f64)),
            "target is float64")
    refused(errors.InvalidArgument, lambda: row("multilabel_soft_margin_loss", weight=S((8, 100), f32)),
            "weight must have shape [100]")
    refused(errors.InvalidArgument, lambda: row("triplet_margin_loss", p=0.0), "expected p > 0")
    refused(errors.Unsupported, lambda: row("triplet_margin_loss", p=float("inf")), "p = inf")
    refused(errors.InvalidArgument, lambda: row("triplet_margin_loss", extra=[S((8, 101), f32)]),
            "negative must have the shape of anchor")
    refused(errors.InvalidArgument, lambda: row("triplet_margin_loss", target=S((8, 101), f32)),
            "positive must have the shape of anchor")
    refused(errors.InvalidArgument, lambda: row("triplet_margin_loss", extra=[]), "negative")


# ---- gradients w.r.t. the other operands of the pointwise losses ---------------------------------------
def test_pointwise_wrt_select():
    def sel(op, shape=(4, 5), target=None, extra=(), wrt=(), grads=(), reduction="mean", **kw):
        return bc.LossPlan.select(bc.PointwiseLossDescriptor(
            op, S(shape, f32), target if target is not None else S(shape, f32), None, reduction=reduction,
            extra=list(extra),
            grad_loss=S(shape if reduction == "none" else (), f32), wrt=list(wrt), grads=list(grads), **kw))
    # mean / sum: the target's gradient of an odd loss runs on the vector path (negated)
    assert sel("mse_loss_backward", wrt=["input", "target"]).sku.layout == "pointwise_contiguous"
    assert sel("mse_loss_backward", wrt=["target"]).sku.layout == "pointwise_contiguous"
    both = sel("mse_loss_backward", wrt=["input", "target"], reduction="none")
    assert both.sku.layout == "pointwise_contiguous+pointwise_rows"  # a dense target's gradient: 16-byte rows
    assert sel("kl_div_backward", wrt=["target"]).sku.layout == "pointwise_rows"
    # one value per row: var [N] against [N, D] (16-byte rows) runs the rows kernels, its own gradient
    # a warp per row over 16-byte vectors; rows that are not 16-byte aligned stay strided
    g = sel("gaussian_nll_loss_backward", (64, 256), extra=[S((64,), f32)], wrt=["input", "target", "var"],
            param=1e-6)
    assert g.sku.layout == "pointwise_rows+pointwise_reduce_rows" and g.workspace_bytes() == 0
    assert "16-byte vectors along the row" in g.sku.precision.math
    fwd = bc.LossPlan.select(bc.PointwiseLossDescriptor("gaussian_nll_loss", S((64, 256), f32), S((64, 256), f32), None,
                                               reduction="mean", extra=[S((64,), f32)], param=1e-6))
    assert fwd.sku.layout == "pointwise_rows" and "rows: 4-element 16-byte vector" in fwd.sku.precision.math
    odd = sel("gaussian_nll_loss_backward", (64, 257), extra=[S((64,), f32)], wrt=["input", "var"], param=1e-6)
    assert odd.sku.layout == "pointwise_strided+pointwise_reduce"
    one = sel("gaussian_nll_loss_backward", (1, 4096), extra=[S((1,), f32)], wrt=["var"], param=1e-6)
    assert one.sku.layout == "pointwise_reduce_rows"
    b = sel("mse_loss_backward", target=S((5,), f32), wrt=["target"], grads=[S((5,), f32)])
    assert b.sku.layout == "pointwise_reduce" and "gradient w.r.t. target summed" in b.sku.precision.math
    assert "thread(s) per element" in b.sku.precision.math  # the kept dim innermost: a thread per output
    col = sel("mse_loss_backward", (100000, 64), target=S((64,), f32), wrt=["target"], grads=[S((64,), f32)])
    assert "second kernel" in col.sku.precision.math and col.workspace_bytes() > 256
    row_ = sel("gaussian_nll_loss_backward", extra=[S((4,), f32)], wrt=["var"], param=1e-6)
    assert "warp(s) per element" in row_.sku.precision.math
    # a [1] var over 2^22 elements: split sums with a workspace
    big = sel("gaussian_nll_loss_backward", (1024, 4096), extra=[S((1,), f32)], wrt=["var"], param=1e-6)
    assert big.sku.layout == "pointwise_reduce" and big.workspace_bytes() > 256
    assert "second kernel" in big.sku.precision.math
    # var of input.shape[:-1]: its gradient has var's shape
    sel("gaussian_nll_loss_backward", extra=[S((4,), f32)], wrt=["var", "input", "target"], param=1e-6)
    sel("margin_ranking_loss_backward", extra=[S((5,), f32)], wrt=["input1", "input2", "target"])
    sel("kl_div_backward", wrt=["target"], log_target=True)
    sel("poisson_nll_loss_backward", wrt=["target"], full=True, param=1e-8)
    sel("binary_cross_entropy_with_logits_backward", wrt=["target"], extra=[S((5,), f32)])
    sel("binary_cross_entropy_backward", wrt=["target"])
    for op in ("hinge_embedding_loss_backward", "soft_margin_loss_backward"):
        refused(errors.InvalidArgument, lambda: sel(op, wrt=["target"]), "wrt 'target' is not a differentiable")
    refused(errors.InvalidArgument, lambda: sel("mse_loss_backward", wrt=["var"]), "expected one of input, target")
    refused(errors.InvalidArgument, lambda: bc.LossPlan.select(bc.PointwiseLossDescriptor(
        "mse_loss", S((4, 5), f32), S((4, 5), f32), wrt=["target"])), "wrt / grads")
    refused(errors.InvalidArgument, lambda: sel("mse_loss_backward", wrt=["target"], grads=[S((4,), f32)]),
            "must have the shape of target")
    refused(errors.InvalidArgument, lambda: sel("gaussian_nll_loss_backward", extra=[S((4,), f32)], wrt=["var"],
                                                grads=[S((4, 1), f32)], param=1e-6), "must have the shape of var")


def test_row_descriptor_identity():
    a = row_desc("triplet_margin_loss", p=1.0)
    assert a == row_desc("triplet_margin_loss", p=1.0) and hash(a) == hash(row_desc("triplet_margin_loss", p=1.0))
    assert a != row_desc("triplet_margin_loss", p=2.0)
    assert row_desc("triplet_margin_loss", swap=True) != row_desc("triplet_margin_loss")
    assert row_desc("triplet_margin_loss", eps=1e-3) != row_desc("triplet_margin_loss")
    w1 = row_desc("triplet_margin_loss_backward", wrt=["anchor"])
    w2 = row_desc("triplet_margin_loss_backward", wrt=["anchor", "negative"])
    assert w1 != w2 and hash(w1) != hash(w2)
    assert row_desc("triplet_margin_loss", p=1.5).p == 1.5 and row_desc("triplet_margin_loss", swap=True).swap


def test_registry_lists_the_row_losses():
    fam = {f["name"]: f for f in bc.families()}["loss"]
    ops = {o["op"] for o in fam["ops"]}
    assert set(ROW) <= ops
    for name in ROW:
        assert callable(getattr(bc, name)) and callable(getattr(bc, name + "_backward"))


def test_descriptor_identity():
    a = bc.PointwiseLossDescriptor("huber_loss", S((4, 5), f32), S((4, 5), f32), param=0.5)
    b = bc.PointwiseLossDescriptor("huber_loss", S((4, 5), f32), S((4, 5), f32), param=0.5)
    c = bc.PointwiseLossDescriptor("huber_loss", S((4, 5), f32), S((4, 5), f32), param=0.7)
    assert a == b and hash(a) == hash(b) and a != c
    k1 = bc.PointwiseLossDescriptor("kl_div", S((4, 5), f32), S((4, 5), f32), log_target=True)
    k2 = bc.PointwiseLossDescriptor("kl_div", S((4, 5), f32), S((4, 5), f32))
    assert k1 != k2 and k1.log_target and not k2.log_target


def test_registry_lists_the_losses():
    fam = {f["name"]: f for f in bc.families()}["loss"]
    ops = {o["op"] for o in fam["ops"]}
    assert {"cross_entropy", "nll_loss"} | set(POINTWISE) <= ops
    for name in ["nll_loss"] + POINTWISE:
        assert callable(getattr(bc, name)) and callable(getattr(bc, name + "_backward"))


# ---- CTC loss -------------------------------------------------------------------------------------
i64, i32 = bc.int64, bc.int32


def ctc(lp=(50, 4, 20), dt=f32, targets=None, il=None, tl=None, op="ctc_loss", **kw):
    T, N, C = lp if len(lp) == 3 else (lp[0], 0, 0)
    targets = targets if targets is not None else S((N, 7), i64)
    il = il if il is not None else S((N,), i64)
    tl = tl if tl is not None else S((N,), i64)
    return bc.CtcLossPlan.select(bc.CtcLossDescriptor(op, S(lp, dt), targets, il, tl, **kw))


@pytest.mark.parametrize("dt", [f16, bf16, f32, f64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_select(dt, reduction):
    p = ctc(dt=dt, reduction=reduction)
    acc = f64 if dt == f64 else f32
    assert p.sku.category == "loss" and p.sku.op == "ctc_loss"
    assert p.sku.layout == "alpha_per_sample" and p.sku.name == "loss.ctc_loss.alpha_per_sample"
    assert p.sku.dtypes == [dt, dt, i64]
    assert p.sku.precision.accumulator_dtype == acc and p.sku.precision.compute_dtype == acc
    assert p.sku.precision.deterministic and p.sku.precision.bit_stable
    assert "15 extended labels" in p.sku.precision.math  # 2 * 7 + 1
    assert p.log_alpha_shape() == [4, 50, 15] and p.log_alpha_dtype() == acc
    assert p.workspace_bytes() % 256 == 0
    if reduction == "none":
        assert p.workspace_bytes() == 0
    else:
        assert p.workspace_bytes() >= 256 and "fixed order" in p.sku.precision.math
    gl = S((4,) if reduction == "none" else (), dt)
    b = ctc(dt=dt, reduction=reduction, op="ctc_loss_backward", grad_loss=gl, grad_log_probs=S((50, 4, 20), dt))
    assert b.sku.layout == "beta_per_sample+grad_rows" and b.sku.op == "ctc_loss_backward"
    # meta + class map + next map + log_beta (f32 / f64) at least
    assert b.workspace_bytes() >= 4 * 50 * 15 * (8 if dt == f64 else 4) + 4 * 20 * 4
    assert "torch's formula" in b.sku.precision.math


def test_ctc_geometry():
    # concatenated targets: the bound comes from max_target_length (clamped to the total)
    p = ctc(targets=S((30,), i32), max_target_length=12)
    assert p.log_alpha_shape() == [4, 50, 25] and p.sku.dtypes[-1] == i32
    assert ctc(targets=S((30,), i64), max_target_length=1000).log_alpha_shape() == [4, 50, 61]
    # padded: max_target_length may shrink S
    assert ctc(max_target_length=3).log_alpha_shape() == [4, 50, 7]
    assert ctc(max_target_length=0).log_alpha_shape() == [4, 50, 1]
    # strided operands are accepted (a transposed log_probs view, strided lengths)
    q = ctc(lp=(50, 4, 20), targets=S((4, 7), i64, [1, 4]), il=S((4,), i32, [2]))
    assert q.sku.layout == "alpha_per_sample"
    bc.CtcLossPlan.select(bc.CtcLossDescriptor("ctc_loss", S((50, 4, 20), f32, [20, 1000, 1]), S((4, 7), i64),
                                               S((4,), i64), S((4,), i64)))
    # long label sequences: 512 threads, fewer gathered steps; empty shapes select
    big = ctc(targets=S((4, 1000), i64))
    assert "one block of 512 threads" in big.sku.precision.math and "2001 extended" in big.sku.precision.math
    assert ctc(lp=(0, 0, 5), targets=S((0, 3), i64), il=S((0,), i64), tl=S((0,), i64)).log_alpha_shape() == [0, 0, 7]


def test_ctc_refusals():
    refused(errors.InvalidArgument, lambda: bc.CtcLossPlan.select(bc.CtcLossDescriptor(
        "ctc_loss", S((50, 20), f32), S((7,), i64), S((1,), i64), S((1,), i64))), "[T, N, C]")
    refused(errors.InvalidDType, lambda: ctc(dt=bc.int32), "log_probs is int32", "f32")
    refused(errors.InvalidArgument, lambda: ctc(blank=20), "blank 20 is outside [0, C)", "C = 20")
    refused(errors.InvalidArgument, lambda: ctc(blank=-1), "blank -1")
    refused(errors.InvalidDType, lambda: ctc(targets=S((4, 7), f32)), "targets is float32")
    refused(errors.InvalidArgument, lambda: ctc(targets=S((5, 7), i64)), "N = 4")
    refused(errors.InvalidArgument, lambda: ctc(targets=S((4, 7, 2), i64)), "[N, S]", "concatenated")
    refused(errors.InvalidArgument, lambda: ctc(il=S((5,), i64)), "input_lengths must have shape [4]")
    refused(errors.InvalidDType, lambda: ctc(tl=S((4,), f32)), "target_lengths is float32")
    refused(errors.InvalidArgument, lambda: ctc(targets=S((30,), i64)), "max_target_length is required")
    refused(errors.InvalidArgument, lambda: ctc(max_target_length=8), "exceeds", "S = 7")
    refused(errors.InvalidArgument, lambda: ctc(reduction="avg"), "reduction 'avg'")
    refused(errors.InvalidArgument, lambda: ctc(op="ctc"), "unknown op 'ctc'")
    refused(errors.Unsupported, lambda: bc.CtcLossPlan.select(
        bc.CtcLossDescriptor("ctc_loss", S((50, 4, 20), f32), S((4, 7), i64), S((4,), i64), S((4,), i64)),
        bc.PlanPreference(forbid=[bc.Backend.bespoke])), "bespoke", "forbids")
    refused(errors.Unsupported, lambda: ctc(targets=S((4, 100000), i64)), "shared memory", "labels are supported")
    bwd = dict(op="ctc_loss_backward", grad_log_probs=S((50, 4, 20), f32))
    refused(errors.InvalidArgument, lambda: ctc(reduction="none", grad_loss=S((), f32), **bwd),
            "grad_loss must have shape (4,)")
    refused(errors.InvalidDType, lambda: ctc(grad_loss=S((), f64), **bwd), "grad_loss must be float32")
    refused(errors.InvalidDType, lambda: ctc(op="ctc_loss_backward", grad_loss=S((), f32),
                                             grad_log_probs=S((50, 4, 20), f16)), "grad_log_probs must be float32")
    refused(errors.InvalidArgument, lambda: ctc(op="ctc_loss_backward", grad_loss=S((), f32),
                                                grad_log_probs=S((50, 4, 21), f32)), "shape of log_probs")
    refused(errors.InvalidArgument, lambda: ctc(op="ctc_loss_backward", grad_loss=S((), f32),
                                                grad_log_probs=S((50, 4, 20), f32, [20, 0, 1])), "overlapping")
    # the Python wrapper refuses host (numpy) log_probs before anything else
    np = pytest.importorskip("numpy")
    refused(errors.InvalidArgument, lambda: bc.ctc_loss(np.zeros((5, 2, 3), np.float32), np.zeros((2, 2), np.int64),
                                                        [5, 5], [2, 2]), "numpy")


def test_ctc_descriptor_identity_and_registry():
    a = bc.CtcLossDescriptor("ctc_loss", S((50, 4, 20), f32), S((4, 7), i64), S((4,), i64), S((4,), i64))
    b = bc.CtcLossDescriptor("ctc_loss", S((50, 4, 20), f32), S((4, 7), i64), S((4,), i64), S((4,), i64))
    c = bc.CtcLossDescriptor("ctc_loss", S((50, 4, 20), f32), S((4, 7), i64), S((4,), i64), S((4,), i64),
                             zero_infinity=True)
    d = bc.CtcLossDescriptor("ctc_loss", S((50, 4, 20), f32), S((4, 7), i64), S((4,), i64), S((4,), i64), blank=3)
    assert a == b and hash(a) == hash(b) and a != c and a != d
    assert c.zero_infinity and d.blank == 3 and a.max_target_length == -1 and a.reduction == "mean"
    assert "CtcLossDescriptor(ctc_loss" in repr(a)
    fam = {f["name"]: f for f in bc.families()}["loss"]
    row = {o["op"]: o for o in fam["ops"]}["ctc_loss"]
    assert row["backward"] and len(row["dtypes"]) == 4 and all(d in row["dtypes"] for d in (f16, bf16, f32, f64))
    assert callable(bc.ctc_loss) and callable(bc.ctc_loss_backward)
    assert bc.CtcLossPlan is bc._C.CtcLossPlan


# ---- run(): aliasing and presence, refused before anything reaches the device ----------------------
# Fake CUDA tensors (tests/_fake.py) at distinct addresses; every run below must be refused.
from _fake import FakeTensor  # noqa: E402

_BUF = [0x7F0000000000 + k * (256 << 20) for k in range(8)]


def fake(shape, dt=f32, k=0, strides=None, offset=0, device=0):
    return FakeTensor(shape, dt, strides, addr=_BUF[k] + offset, device=device)


def test_cross_entropy_run_refuses_aliasing_and_unselected_tensors():
    N, V = 64, 1000
    x, t, lse, out, g = fake((N, V), k=0), fake((N,), i64, k=1), fake((N,), k=2), fake((N,), k=3), fake((N, V), k=4)
    fused = ce((N, V), f32, with_grad=True, reduction="none")
    ws = fake((fused.workspace_bytes(),), bc.uint8, k=5)
    run = fused.run
    # the fused forward's cluster kernel reads logits after other warps wrote gradients: no in place
    refused(errors.InvalidArgument, lambda: run(x, t, lse, ws, out=out, grad_input=x), "grad_input overlaps input")
    refused(errors.InvalidArgument, lambda: run(x, t, fake((N,), k=2, strides=[0]), ws, out=out, grad_input=g),
            "lse has overlapping elements")
    refused(errors.InvalidArgument, lambda: run(x, t, lse, ws, out=fake((N,), k=3, strides=[0]), grad_input=g),
            "out has overlapping elements")
    refused(errors.InvalidArgument, lambda: run(x, t, lse, ws, out=fake((N,), k=4), grad_input=g), "overlaps")
    refused(errors.InvalidArgument, lambda: run(x, t, lse, fake((fused.workspace_bytes(),), bc.uint8, k=0), out=out,
                                                grad_input=g), "workspace overlaps input")
    refused(errors.InvalidArgument, lambda: run(x, t, lse, ws, out=out, grad_input=g, weight=fake((V,), k=6)),
            "weight is given", "selected without it")
    plain = ce((N, V), f32, reduction="none")
    refused(errors.InvalidArgument, lambda: plain.run(x, t, lse, ws, out=out, grad_input=g), "grad_input is given")
    # the backward may write the gradient over the logits (same view), not over what it reads
    bwd = bc.LossPlan.select(bc.CrossEntropyLossDescriptor("cross_entropy_backward", S((N, V), f32), S((N,), i64),
                                               reduction="none", has_grad_loss=True, grad_input=S((N, V), f32)))
    bws = fake((max(bwd.workspace_bytes(), 1),), bc.uint8, k=5)
    refused(errors.InvalidArgument, lambda: bwd.run(x, t, fake((N,), k=4, offset=64), bws, grad_input=g,
                                                    grad_loss=fake((N,), k=3)), "grad_input overlaps lse")
    refused(errors.InvalidArgument, lambda: bwd.run(x, t, lse, bws, grad_input=fake((N, V), k=0, offset=4 * V),
                                                    grad_loss=fake((N,), k=3)), "grad_input overlaps input")


def test_nll_pointwise_row_and_ctc_runs_refuse_aliasing():
    # nll_loss: a per-row out with stride 0 would collapse the rows
    nll = bc.LossPlan.select(bc.CrossEntropyLossDescriptor("nll_loss", S((64, 10), f32), S((64,), i64),
                                                           reduction="none"))
    ws = fake((max(nll.workspace_bytes(), 256),), bc.uint8, k=5)
    refused(errors.InvalidArgument, lambda: nll.run(fake((64, 10)), fake((64,), i64, k=1), None, ws,
                                                    out=fake((64,), k=3, strides=[0])), "out has overlapping elements")
    # pointwise, reduction none: out may be the input itself, not a shifted view of it
    mse = bc.LossPlan.select(bc.PointwiseLossDescriptor("mse_loss", S((64, 10), f32), S((64, 10), f32),
                                                        reduction="none"))
    refused(errors.InvalidArgument, lambda: mse.run(fake((64, 10)), fake((64, 10), k=1), None, None,
                                                    out=fake((64, 10), k=0, offset=4)),
            "out overlaps input without being the same view")
    # every operand by name, as every plan's run takes them; lse and workspace default to none
    refused(errors.InvalidArgument, lambda: mse.run(input=fake((64, 10)), target=fake((64, 10), k=1),
                                                    out=fake((64, 10), k=0, offset=4)),
            "out overlaps input without being the same view")
    # pointwise backward: a gradient over the (scalar) upstream gradient every thread reads
    mse_b = bc.LossPlan.select(bc.PointwiseLossDescriptor("mse_loss_backward", S((64, 10), f32), S((64, 10), f32),
                                                 grad_loss=S((), f32), grad_input=S((64, 10), f32)))
    refused(errors.InvalidArgument, lambda: mse_b.run(fake((64, 10)), fake((64, 10), k=1), None, None,
                                                      grad_input=fake((64, 10), k=3), grad_loss=fake((), k=3)),
            "grad_input overlaps grad_loss")
    # row losses: the gradient must not overlap grad_loss (read once per row), a per-row out no stride 0
    rb = row("multi_margin_loss_backward", reduction="none", grad_input=S((8, 100), f32))
    refused(errors.InvalidArgument, lambda: rb.run(fake((8, 100)), fake((8,), i64, k=1), None, None,
                                                   grad_input=fake((8, 100), k=3), grad_loss=fake((8,), k=3, offset=64)),
            "overlaps grad_loss")
    rf = row("multi_margin_loss", reduction="none")
    refused(errors.InvalidArgument, lambda: rf.run(fake((8, 100)), fake((8,), i64, k=1), None, None,
                                                   out=fake((8,), k=3, strides=[0])), "out has overlapping elements")
    refused(errors.InvalidArgument, lambda: rf.run(fake((8, 100)), fake((8,), i64, k=1), None, None,
                                                   out=fake((8,), k=3), weight=fake((100,), k=6)), "weight is given")
    # ctc_loss, reduction none: one loss per sample
    p = ctc(reduction="none")
    la = fake(tuple(p.log_alpha_shape()), f32, k=4)
    refused(errors.InvalidArgument, lambda: p.run(fake((50, 4, 20)), fake((4, 7), i64, k=1), fake((4,), i64, k=2),
                                                  fake((4,), i64, k=2, offset=64), la, None,
                                                  out=fake((4,), k=3, strides=[0])), "out has overlapping elements")


def test_each_kind_has_its_descriptor():
    S = bc.TensorSpec
    x, t, ti = S((8, 100), f32), S((8, 100), f32), S((8,), bc.int64)
    cases = [(bc.CrossEntropyLossDescriptor("cross_entropy", x, ti), "rows"),
             (bc.CrossEntropyLossDescriptor("nll_loss", x, ti), "rows"),
             (bc.PointwiseLossDescriptor("mse_loss", x, t), "pointwise"),
             (bc.RowLossDescriptor("multi_margin_loss", x, ti, margin=0.5), "rows")]
    for d, layout in cases:
        p = bc.LossPlan.select(d)
        assert p.sku.layout.startswith(layout), (d, p.sku.layout)
        assert type(p.descriptor) is type(d) and p.descriptor == d and hash(p.descriptor) == hash(d)
        assert d.op in repr(d) and type(d).__name__ in repr(d)
    # an op given to another kind's descriptor names the one that takes it
    for d, want in [(bc.PointwiseLossDescriptor("cross_entropy", x, ti), "CrossEntropyLossDescriptor"),
                    (bc.CrossEntropyLossDescriptor("mse_loss", x, t), "PointwiseLossDescriptor"),
                    (bc.PointwiseLossDescriptor("triplet_margin_loss", x, t), "RowLossDescriptor"),
                    (bc.RowLossDescriptor("huber_loss_backward", x, t), "PointwiseLossDescriptor")]:
        refused(errors.InvalidArgument, lambda d=d: bc.LossPlan.select(d), type(d).__name__, want)
    # fields read back; descriptors of different kinds never compare equal
    r = bc.RowLossDescriptor("triplet_margin_loss", x, t, extra=[x], margin=1.5, p=1.0, eps=1e-3, swap=True)
    assert (r.margin, r.p, r.eps, r.swap, r.weight, r.grad_loss) == (1.5, 1.0, 1e-3, True, None, None)
    assert r != bc.RowLossDescriptor("triplet_margin_loss", x, t, extra=[x], margin=1.5, p=1.0, eps=1e-3)
    c = bc.CrossEntropyLossDescriptor("cross_entropy", x, ti, S((100,), f32), label_smoothing=0.1, ignore_index=3)
    assert (c.weight, c.label_smoothing, c.ignore_index) == (S((100,), f32), 0.1, 3)
    assert bc.PointwiseLossDescriptor("l1_loss", x, t) != bc.RowLossDescriptor("l1_loss", x, t)
