"""Host tests of the attention family (no GPU): select() decisions and refusals naming the operand,
SKU names (flash / rowwise, tiles), workspace sizes, descriptor identity, the registry entry, the
functional API's argument checks, and the torch op's fake kernel (shapes, errors while tracing)."""
import pytest

bc = pytest.importorskip("baracuda")
from baracuda import errors  # noqa: E402

S = bc.TensorSpec
f16, bf16, f32, f64 = bc.float16, bc.bfloat16, bc.float32, bc.float64
FLASH = bc.features()["fa2"]


def D(op="attention", q=(2, 100, 8, 128), k=(2, 120, 2, 128), v=None, out=None, dtype=bf16, qs=None, **kw):
    v = v or k
    out = out or tuple(q[:-1]) + (v[-1],)
    return bc.AttentionDescriptor(op, S(q, dtype, qs), S(k, dtype), S(v, dtype), S(out, dtype), **kw)


def refused(exc, desc_fn, *needles):
    with pytest.raises(errors.BaracudaError) as info:
        bc.AttentionPlan.select(desc_fn())
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    for n in needles:
        assert n in str(info.value), f"{n!r} not in {str(info.value)!r}"


REFUSALS = [
    ("unknown-op", lambda: D(op="attn"), errors.InvalidArgument, ["unknown op 'attn'"]),
    ("int-q", lambda: D(dtype=bc.int32), errors.InvalidDType, ["q is int32"]),
    ("k-dtype", lambda: bc.AttentionDescriptor("attention", S((1, 4, 2, 64), bf16), S((1, 4, 2, 64), f16),
                                               S((1, 4, 2, 64), bf16), S((1, 4, 2, 64), bf16)),
     errors.InvalidDType, ["k is float16", "q's dtype"]),
    ("rank", lambda: D(q=(100, 8, 128)), errors.InvalidArgument, ["q has shape", "[batch, seq, heads, head_dim]"]),
    ("gqa", lambda: D(k=(2, 120, 3, 128)), errors.InvalidArgument, ["8 heads, not a multiple of k's 3"]),
    ("head-dim", lambda: D(k=(2, 120, 2, 64)), errors.InvalidArgument, ["k has head_dim 64 but q has 128"]),
    ("v-shape", lambda: D(v=(2, 119, 2, 128)), errors.InvalidArgument, ["v has shape"]),
    ("batch", lambda: D(k=(3, 120, 2, 128)), errors.InvalidArgument, ["k has batch 3 but q has 2"]),
    ("out-shape", lambda: D(out=(2, 100, 8, 64)), errors.InvalidArgument, ["out has shape", "(2, 100, 8, 128)"]),
    ("last-stride", lambda: D(q=(2, 100, 8, 128), qs=(102400, 1024, 128, 2)), errors.Unsupported,
     ["q has stride 2 along head_dim"]),
    ("scale", lambda: D(scale=float("inf")), errors.InvalidArgument, ["scale must be finite"]),
    ("softcap", lambda: D(softcap=-1.0), errors.InvalidArgument, ["softcap must be a finite number >= 0"]),
    ("alignment", lambda: D(causal=True, causal_alignment="middle"), errors.InvalidArgument, ["causal_alignment"]),
    ("window", lambda: D(window_left=-2), errors.InvalidArgument, ["window sizes must be >= 0, or -1"]),
    ("kernel", lambda: D(kernel="cuda"), errors.InvalidArgument, ["kernel must be 'auto', 'cudnn', 'flash' or 'rowwise'"]),
    ("cudnn-softcap", lambda: D(kernel="cudnn", softcap=2.0), errors.Unsupported, ["kernel='cudnn' is not available"]),
    ("cudnn-f32", lambda: D(kernel="cudnn", dtype=f32), errors.Unsupported, ["kernel='cudnn' is not available"]),
    ("flash-f32", lambda: D(dtype=f32, kernel="flash"), errors.Unsupported, ["kernel='flash' is not available"]),
    ("flash-d80", lambda: D(q=(1, 4, 2, 80), k=(1, 4, 2, 80), kernel="flash"), errors.Unsupported,
     ["head_dim 64, 96, 128 or 256"]),
    ("flash-bwd-d256", lambda: D(op="attention_backward", q=(1, 4, 2, 256), k=(1, 4, 2, 256), kernel="flash"),
     errors.Unsupported, ["head_dim 64, 96 or 128"]),
    ("tile", lambda: D(tile="m1n1"), errors.InvalidArgument, ["tile 'm1n1'", "m64n64"]),
    ("tile-bwd", lambda: D(op="attention_backward", tile="m128n32"), errors.InvalidArgument,
     ["tile 'm128n32'", "the flash backward has", "m64n64"]),
    ("too-wide", lambda: D(q=(1, 4, 2, 320), k=(1, 4, 2, 320), dtype=f32), errors.Unsupported,
     ["head_dim 320 is above 256"]),
    ("workspace", lambda: D(op="attention_backward"), None, None),
]


@pytest.mark.parametrize("name, fn, exc, needles", [r for r in REFUSALS if r[2] is not None], ids=lambda v: str(v)[:30])
def test_select_refusals(name, fn, exc, needles):
    if not FLASH and name.startswith(("flash", "tile")):
        pytest.skip("no flash kernels in this build")
    if name == "cudnn-softcap" and bc.devices():
        pytest.skip("on a GPU machine cuDNN takes softcap (tests/test_attention_gpu.py covers it)")
    refused(exc, fn, *needles)


def test_backward_workspace_limit():
    pref = bc.PlanPreference(workspace_limit=16)
    with pytest.raises(errors.Unsupported, match="bytes of workspace"):
        bc.AttentionPlan.select(D(op="attention_backward"), pref)


def select_ours(desc):
    return bc.AttentionPlan.select(desc, bc.PlanPreference(forbid=[bc.Backend.cudnn]))


def hopper_tiles():
    """Whether select() offers the sm_90a tiles (an H100 / H200 in a build with them): they come first."""
    try:
        select_ours(D(tile="w64n64"))
        return True
    except errors.InvalidArgument:
        return False


@pytest.mark.skipif(not FLASH, reason="no flash kernels in this build")
def test_kernel_choice_and_sku():
    """Among our kernels (cuDNN forbidden: on a GPU machine it would take the plain cases)."""
    hopper = hopper_tiles()
    # short masked spans and varlen: w64n64 before w128n128 on sm_90; the mma.sync forward: m128n64 first
    # (m128n128 at d 64, session 50) for a plain score, m64n64 for a softcap / ALiBi / negative scale and
    # for d 64 under a short mask, on sm_90 too (sessions 48, 49); the backward: w64n64 on sm_90, else
    # mma.sync's one tile
    plain_first = "w64n64" if hopper else "m128n64"
    bwd_first = "w64n64" if hopper else "m64n64"
    p = select_ours(D(causal=True))
    assert p.sku.name == f"attention.flash.{plain_first}.d128" and p.sku.category == "attention"
    for general in (dict(softcap=30.0), dict(scale=-0.1), dict(alibi=1)):
        for causal in (True, False):
            assert select_ours(D(causal=causal, **general)).sku.name == "attention.flash.m64n64.d128", general
    assert p.sku.layout == "bshd" and p.sku.precision.deterministic and p.workspace_bytes() == 0
    # d 64 under a causal span of 512 keys or fewer: m64n64 first (sessions 47, 49); a longer one keeps m128n128
    short64 = select_ours(D(q=(2, 100, 8, 64), k=(2, 120, 2, 64), causal=True))
    assert short64.sku.name == "attention.flash.m64n64.d64"
    window64 = select_ours(D(q=(2, 600, 8, 64), k=(2, 600, 2, 64), causal=True, window_left=128))
    assert window64.sku.name == "attention.flash.m64n64.d64"
    long64 = select_ours(D(q=(2, 100, 8, 64), k=(2, 1024, 2, 64), causal=True))
    assert long64.sku.name == f"attention.flash.{'w128n128' if hopper else 'm128n128'}.d64"
    m128n64_d64 = select_ours(D(q=(2, 100, 8, 64), k=(2, 120, 2, 64), tile="m128n64"))
    assert m128n64_d64.sku.name == "attention.flash.m128n64.d64"
    assert select_ours(D(tile="m128n32")).sku.name == "attention.flash.m128n32.d128"
    # d 256: the warp-specialized sm_90a tile (named by its shape, w128n64) on sm_90, else mma.sync's m64n32;
    # a general score keeps the mma.sync tile first
    d256 = dict(q=(2, 100, 8, 256), k=(2, 120, 2, 256))
    assert select_ours(D(**d256)).sku.name == f"attention.flash.{'w128n64' if hopper else 'm64n32'}.d256"
    assert select_ours(D(softcap=30.0, **d256)).sku.name == "attention.flash.m64n32.d256"
    assert select_ours(D(kernel="rowwise")).sku.name == "attention.rowwise.forward"
    assert select_ours(D(dtype=f32)).sku.name == "attention.rowwise.forward"
    assert select_ours(D(q=(1, 4, 2, 48), k=(1, 4, 2, 48))).sku.name == "attention.rowwise.forward"
    # a stride that is not a multiple of 8 elements: rowwise
    odd = D(q=(2, 100, 8, 128), qs=(102408, 1028, 128, 1))
    assert select_ours(odd).sku.name == "attention.rowwise.forward"
    b = select_ours(D(op="attention_backward"))
    assert b.sku.name == f"attention.flash_backward.{bwd_first}.d128"
    assert select_ours(D(op="attention_backward", tile="m64n64")).sku.name == "attention.flash_backward.m64n64.d128"
    assert b.workspace_bytes() == 2 * 8 * 100 * 4  # delta: one f32 per query row
    assert select_ours(D(op="attention_backward", q=(1, 4, 2, 256), k=(1, 4, 2, 256))).sku.name == \
        "attention.rowwise.backward"
    v = select_ours(bc.AttentionDescriptor(
        "attention", S((300, 8, 64), f16), S((500, 2, 64), f16), S((500, 2, 64), f16), S((300, 8, 64), f16),
        varlen=True, batch=3, max_seqlen_q=200, max_seqlen_k=300))
    assert v.sku.layout == "varlen" and v.sku.name == f"attention.flash.{'w64n64' if hopper else 'm128n128'}.d64"
    assert select_ours(bc.AttentionDescriptor(
        "attention_backward", S((300, 8, 64), f16), S((500, 2, 64), f16), S((500, 2, 64), f16),
        S((300, 8, 64), f16), varlen=True, batch=3, max_seqlen_q=200, max_seqlen_k=300)).workspace_bytes() == 8 * 300 * 4


def test_cudnn_without_library_or_device():
    """Without libcudnn or a device (CI), kernel='cudnn' says why and 'auto' takes our kernels; the
    preference can forbid cuDNN and then never reaches for it."""
    try:
        p = bc.AttentionPlan.select(D(causal=True))
    except errors.BaracudaError as e:  # pragma: no cover (a build without flash kernels)
        pytest.skip(str(e))
    if p.sku.backend == bc.Backend.cudnn:
        pytest.skip("cuDNN loads and a device is present: the GPU tests cover it")
    with pytest.raises(errors.Unsupported, match="kernel='cudnn' is not available") as info:
        bc.AttentionPlan.select(D(kernel="cudnn"))
    msg = str(info.value)
    assert ("BARACUDA_ENABLE_CUDNN" in msg) if not bc.features()["cudnn"] else ("cuDNN" in msg or "device" in msg)
    with pytest.raises(errors.Unsupported, match="forbids cuDNN"):
        bc.AttentionPlan.select(D(kernel="cudnn"), bc.PlanPreference(forbid=[bc.Backend.cudnn]))


def test_descriptor_identity_and_registry():
    a, b = D(causal=True, window_left=5), D(causal=True, window_left=5)
    assert a == b and hash(a) == hash(b) and a != D(causal=True)
    assert "causal=True" in repr(a) and "window=(5, -1)" in repr(a)
    fam = {f["name"]: f for f in bc.families()}["attention"]
    assert fam["plan"] == "AttentionPlan"
    assert {o["op"] for o in fam["ops"]} == {"attention"}


def test_functional_argument_checks():
    import numpy as np
    x = np.zeros((1, 4, 2, 64), dtype=np.float32)
    with pytest.raises(errors.InvalidArgument, match="q is a numpy"):
        bc.attention(x, x, x)
    torch = pytest.importorskip("torch")
    q = torch.zeros(1, 4, 2, 64)
    with pytest.raises(errors.Unsupported, match="dropout"):
        bc.attention(q, q, q, dropout_p=0.1)
    with pytest.raises(errors.InvalidArgument, match="go together"):
        bc.attention(q[0], q[0], q[0], cu_seqlens_q=torch.zeros(2, dtype=torch.int32))
    with pytest.raises(errors.InvalidArgument, match="max_seqlen_q and max_seqlen_k"):
        bc.attention(q[0], q[0], q[0], cu_seqlens_q=torch.zeros(2, dtype=torch.int32),
                     cu_seqlens_k=torch.zeros(2, dtype=torch.int32))
    with pytest.raises(errors.InvalidArgument, match="window must be"):
        bc.attention(q, q, q, window=3)
    with pytest.raises(errors.InvalidArgument, match="q: expected a CUDA tensor"):
        bc.attention(q, q, q)
    with pytest.raises(errors.Unsupported, match="attn_mask"):
        bc.scaled_dot_product_attention(q, q, q, attn_mask=q)


def test_torch_fake_kernel():
    torch = pytest.importorskip("torch")
    bt = pytest.importorskip("baracuda.torch")
    ops = torch.ops.baracuda
    m = lambda *s, dtype=torch.bfloat16: torch.empty(s, dtype=dtype, device="meta")  # noqa: E731
    assert {"attention", "attention_backward"} <= set(bt.OPS)
    extra = (None,) * 5
    score = (None, True, "bottom_right", -1, -1, 0.0, 0, 0)
    out, lse = ops.attention(m(2, 10, 8, 64), m(2, 12, 2, 64), m(2, 12, 2, 64), *extra, *score, "auto", False)
    assert out.shape == (2, 10, 8, 64) and lse.shape == (2, 8, 10) and lse.dtype == torch.float32
    gq, gk, gv, gs = ops.attention_backward(m(2, 10, 8, 64), m(2, 10, 8, 64), m(2, 12, 2, 64), m(2, 12, 2, 64),
                                            out, lse, *extra, *score, True)
    assert gq.shape == (2, 10, 8, 64) and gk.shape == (2, 12, 2, 64) and gs.shape == (0,)
    with pytest.raises(errors.InvalidArgument, match="not a multiple"):
        ops.attention(m(2, 10, 8, 64), m(2, 12, 3, 64), m(2, 12, 3, 64), *extra, *score, "auto", False)
    cu = m(4, dtype=torch.int32)
    out, lse = ops.attention(m(30, 8, 64), m(40, 2, 64), m(40, 2, 64), cu, cu, None, None, None,
                             None, False, "bottom_right", -1, -1, 0.0, 16, 20, "auto", False)
    assert out.shape == (30, 8, 64) and lse.shape == (8, 30)
    assert "attention" in bt.routes() and "scaled_dot_product_attention" in bt.routes()


@pytest.mark.parametrize("cu_q, cu_k, needle", [
    ([1, 5, 9], [0, 5, 9], "cu_seqlens_q must start at 0"),
    ([0, 5, 3], [0, 5, 9], "cu_seqlens_q decreases at index 2"),
    ([0, 5, 30], [0, 5, 9], "sequence 1 has 25 rows (from cu_seqlens_q), more than max_seqlen_q = 16"),
    ([0, 5, 9], [0, 5, 40], "cu_seqlens_k ends at 40, past the tensor's 20 rows"),
])
def test_opt_in_seqlens_check(cu_q, cu_k, needle):
    torch = pytest.importorskip("torch")
    q, k = torch.zeros(24, 4, 64), torch.zeros(20, 2, 64)
    cq, ck = torch.tensor(cu_q, dtype=torch.int32), torch.tensor(cu_k, dtype=torch.int32)
    with pytest.raises(errors.InvalidArgument) as info:  # the check runs before the tensors are imported
        bc.attention(q, k, k, cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=16, max_seqlen_k=40, check_seqlens=True)
    assert needle in str(info.value)
    # without the opt-in the offsets are not read on the host: the CPU tensor is what is refused
    with pytest.raises(errors.InvalidArgument, match="expected a CUDA tensor"):
        bc.attention(q, k, k, cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=16, max_seqlen_k=40)
