"""Host tests of the RoPE family (no GPU): select() refusals naming the argument, SKU names,
descriptor identity, the frequencies helper against transformers' (when installed), the registry
entry and the torch op's registration."""
import math

import pytest

bc = pytest.importorskip("baracuda")
from baracuda import errors  # noqa: E402

S = bc.TensorSpec


def D(q=(2, 16, 8, 128), k=(2, 16, 2, 128), dtype=bc.bfloat16, **kw):
    return bc.RopeDescriptor(S(q, dtype), S(k, dtype) if k else None, **kw)


REFUSALS = [
    ("int-q", lambda: D(dtype=bc.int32), errors.InvalidDType, ["q is int32"]),
    ("f64-q", lambda: D(dtype=bc.float64), errors.InvalidDType, ["q is float64"]),
    ("k-dtype", lambda: bc.RopeDescriptor(S((4, 2, 64), bc.bfloat16), S((4, 2, 64), bc.float16)),
     errors.InvalidDType, ["k is float16", "q's dtype"]),
    ("rank", lambda: D(q=(16, 128), k=None), errors.InvalidArgument, ["q has shape", "[tokens, heads, head_dim]"]),
    ("k-lead", lambda: D(k=(2, 15, 2, 128)), errors.InvalidArgument, ["k has shape"]),
    ("k-dim", lambda: D(k=(2, 16, 2, 64)), errors.InvalidArgument, ["k has shape"]),
    ("odd-rd", lambda: D(rotary_dim=7), errors.InvalidArgument, ["rotary_dim is 7"]),
    ("big-rd", lambda: D(rotary_dim=130), errors.InvalidArgument, ["rotary_dim is 130"]),
    ("huge-d", lambda: D(q=(4, 2, 512), k=None), errors.Unsupported, ["rotary_dim 512 is over 256"]),
    ("style", lambda: D(style="half"), errors.InvalidArgument, ["style is 'half'"]),
    ("last-stride", lambda: bc.RopeDescriptor(S((4, 2, 64), bc.bfloat16, (256, 128, 2))), errors.Unsupported,
     ["along head_dim"]),
    ("pos-dtype", lambda: D(positions=True, positions_dtype=bc.float32), errors.InvalidDType, ["positions is float32"]),
    ("cache-dtype", lambda: D(cache=True, cache_dtype=bc.float16, cache_positions=8), errors.InvalidDType,
     ["cos / sin are float16"]),
    ("theta", lambda: D(freqs=bc.RopeFrequencies(theta=0.0)), errors.InvalidArgument, ["theta is 0"]),
    ("scaling", lambda: D(freqs=bc.RopeFrequencies(scaling="ntk")), errors.InvalidArgument, ["scaling is 'ntk'"]),
    ("llama3-orig", lambda: D(freqs=bc.RopeFrequencies(scaling="llama3", factor=8.0)), errors.InvalidArgument,
     ["original_max_positions"]),
    ("append-heads", lambda: D(k_cache=S((10, 16, 4, 128), bc.bfloat16)), errors.InvalidArgument,
     ["k_cache has shape", "kv_heads and head_dim must match"]),
    ("append-dtype", lambda: D(k_cache=S((10, 16, 2, 128), bc.float16)), errors.InvalidDType,
     ["k_cache is float16 but k is bfloat16"]),
    ("append-no-k", lambda: D(k=None, k_cache=S((10, 16, 2, 128), bc.bfloat16)), errors.InvalidArgument,
     ["the cache append needs k"]),
    ("append-v-pages", lambda: D(k_cache=S((10, 16, 2, 128), bc.bfloat16), v=S((2, 16, 2, 96), bc.bfloat16),
                                 v_cache=S((9, 16, 2, 96), bc.bfloat16)), errors.InvalidArgument,
     ["v_cache has shape", "k_cache's pages and page_size"]),
    ("append-slots", lambda: D(k_cache=S((10, 16, 2, 128), bc.bfloat16), slot_dtype=bc.float32), errors.InvalidDType,
     ["slot_mapping is float32"]),
    ("append-scales-16bit", lambda: D(k_cache=S((10, 16, 2, 128), bc.bfloat16), kv_scales=True),
     errors.InvalidArgument, ["k_scale / v_scale quantize into an fp8 cache", "k_cache is bfloat16"]),
    ("append-fp8-mixed", lambda: D(k_cache=S((10, 16, 2, 128), bc.float8_e4m3fn), v=S((2, 16, 2, 128), bc.bfloat16),
                                   v_cache=S((10, 16, 2, 128), bc.float8_e5m2)), errors.InvalidDType,
     ["v_cache is float8_e5m2; expected k_cache's float8_e4m3fn"]),
]


@pytest.mark.parametrize("name,make,exc,needles", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_name_the_argument(name, make, exc, needles):
    with pytest.raises(errors.BaracudaError) as info:
        bc.RopePlan.select(make())
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    for n in needles:
        assert n in str(info.value), f"{n!r} not in {str(info.value)!r}"


def test_sku_and_identity():
    p = bc.RopePlan.select(D())
    assert p.sku.name == "rope.neox.theta" and p.sku.op == "rope" and p.workspace_bytes() == 0
    assert bc.RopePlan.select(D(style="gptj", cache=True, cache_positions=4, inverse=True)).sku.name == "rope.gptj.cache"
    assert bc.RopePlan.select(D(inverse=True)).sku.op == "rope_backward"
    assert D() == D() and hash(D()) == hash(D())
    assert D() != D(rotary_dim=64) and D() != D(freqs=bc.RopeFrequencies(theta=5e5))
    # A cache's angles do not depend on theta: equal descriptors.
    assert D(cache=True, cache_positions=4) == D(cache=True, cache_positions=4, freqs=bc.RopeFrequencies(theta=5.0))
    assert "style=neox" in repr(D())
    assert list(bc.RopePlan.select(D(q=(0, 8, 64), k=None)).descriptor.q.shape) == [0, 8, 64]


def test_fp8_cache_append_sku_and_identity():
    fp8 = dict(k_cache=S((10, 16, 2, 128), bc.float8_e4m3fn), v=S((2, 16, 2, 128), bc.bfloat16),
               v_cache=S((10, 16, 2, 128), bc.float8_e4m3fn))
    p = bc.RopePlan.select(D(kv_scales=True, scale_per_head=True, **fp8))
    assert p.sku.name == "rope.neox.theta.append.float8_e4m3fn_cache"
    assert "fp8(x / scale)" in p.sku.precision.math and "kv_scales=per_head" in repr(p.descriptor)
    assert D(**fp8) != D(kv_scales=True, **fp8) != D(kv_scales=True, scale_per_head=True, **fp8)
    assert D(**fp8) == D(scale_per_head=True, **fp8), "scale_per_head means nothing without scales"
    with pytest.raises(errors.InvalidArgument, match="kv_scales without k_cache"):
        D(kv_scales=True)


def test_tuning_knobs_in_sku_and_refusals():
    """PlanPreference.tuning sets the tokens per block and a persistent grid; the SKU says so; a bad
    value or an unknown key is refused by name."""
    def pref(t):
        return bc.PlanPreference(tuning=t)
    assert bc.RopePlan.select(D(), pref("tpb=8,persistent=1")).sku.name == "rope.neox.theta.tpb8.persistent"
    assert bc.RopePlan.select(D(), pref("persistent=0")).sku.name == "rope.neox.theta"
    for bad, needle in (("tpb=0", "tpb"), ("tpb=17", "tpb"), ("persistent=2", "persistent"), ("blocks=4", "blocks")):
        with pytest.raises(errors.InvalidArgument, match=needle):
            bc.RopePlan.select(D(), pref(bad))


def test_frequencies():
    inv, af = bc.rope_frequencies(8, theta=10000.0)
    assert inv == pytest.approx([10000.0 ** (-i / 4) for i in range(4)]) and af == 1.0
    inv4, _ = bc.rope_frequencies(8, scaling={"rope_type": "linear", "factor": 4.0})
    assert inv4 == pytest.approx([v / 4 for v in inv])
    _, af = bc.rope_frequencies(8, scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64})
    assert af == pytest.approx(0.1 * math.log(4.0) + 1)
    with pytest.raises(errors.Unsupported, match="rope_type 'longrope'"):
        bc.rope_frequencies(8, scaling={"rope_type": "longrope"})
    with pytest.raises(errors.InvalidArgument, match="scaling must be a dict"):
        bc.rope_frequencies(8, scaling=4.0)


@pytest.mark.parametrize("scaling", [
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8192},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
])
def test_frequencies_match_transformers(scaling):
    torch = pytest.importorskip("torch")
    tr = pytest.importorskip("transformers")
    try:
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    except ImportError:
        pytest.skip("this transformers has no ROPE_INIT_FUNCTIONS")
    cfg = tr.LlamaConfig(hidden_size=1024, num_attention_heads=8, max_position_embeddings=32768)
    setattr(cfg, "rope_parameters" if hasattr(cfg, "rope_parameters") else "rope_scaling", dict(scaling, rope_theta=5e5))
    want, want_af = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](cfg, "cpu")
    inv, af = bc.rope_frequencies(128, theta=500000.0, scaling=scaling)
    torch.testing.assert_close(torch.tensor(inv, dtype=torch.float64), want.double(), rtol=2e-6, atol=0)
    assert af == pytest.approx(float(want_af), rel=1e-6)


def test_registry_and_torch_op():
    fam = {f["name"]: f for f in bc.families()}["rope"]
    assert fam["plan"] == "RopePlan" and fam["summary"]
    torch = pytest.importorskip("torch")
    import baracuda.torch as bt
    assert "rope" in bt.OPS and hasattr(torch.ops.baracuda, "rope")
    assert bt.routes()["rope"] is bt.rope


def test_rotary_embedding_module_from_config():
    pytest.importorskip("torch")
    tr = pytest.importorskip("transformers")
    import baracuda.torch as bt
    cfg = tr.LlamaConfig(hidden_size=1024, num_attention_heads=8, max_position_embeddings=32768)
    m = bt.RotaryEmbedding.from_config(cfg)
    assert m.scaling is None and m.rotary_dim is None and m.style == "neox"
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    key = "rope_parameters" if hasattr(cfg, "rope_parameters") else "rope_scaling"
    setattr(cfg, key, dict(scaling, rope_theta=5e5))
    m = bt.RotaryEmbedding.from_config(cfg)
    assert m.theta == 5e5 and m.scaling["rope_type"] == "llama3" and "theta=500000.0" in repr(m)
    with pytest.raises(errors.Unsupported, match="rope_type 'dynamic'"):
        bt.RotaryEmbedding(scaling={"rope_type": "dynamic", "factor": 2.0})


def test_cache_append_descriptor():
    kc, vc = S((10, 16, 2, 128), bc.bfloat16), S((10, 16, 2, 96), bc.bfloat16)
    a = D(k_cache=kc, v=S((2, 16, 2, 96), bc.bfloat16), v_cache=vc, positions=True)
    p = bc.RopePlan.select(a)
    assert p.sku.name == "rope.neox.theta.append" and a.kv_cache and "k_cache=" in repr(a)
    assert a == D(k_cache=kc, v=S((2, 16, 2, 96), bc.bfloat16), v_cache=vc, positions=True) and a != D(positions=True)
    with pytest.raises(errors.InvalidArgument, match="v and v_cache go together"):
        D(k_cache=kc, v=S((2, 16, 2, 96), bc.bfloat16))
