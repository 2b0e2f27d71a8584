"""Host tests of the paged-attention family (no GPU): select() refusals naming the operand, the
split schedule and its SKU, descriptor identity, the registry entry."""
import pytest

bc = pytest.importorskip("baracuda")
from baracuda import errors  # noqa: E402

S = bc.TensorSpec
bf16 = bc.bfloat16


def D(q=(4, 1, 32, 128), cache=(100, 16, 8, 128), vcache=None, out=None, max_pages=64, dtype=bf16, cdtype=None,
      cstrides=None, **kw):
    return bc.PagedAttentionDescriptor(S(q, dtype), S(cache, cdtype or dtype, cstrides),
                                       S(vcache or cache, cdtype or dtype, cstrides), S(out or q, dtype), max_pages,
                                       **kw)


REFUSALS = [
    ("dtype", lambda: D(dtype=bc.float64), errors.InvalidDType, ["q is float64", "bfloat16, float16 or float32"]),
    ("mma-f32", lambda: D(dtype=bc.float32, kernel="mma"), errors.Unsupported, ["the mma kernel takes", "float32"]),
    ("mma-dim", lambda: D(q=(4, 1, 32, 80), cache=(100, 16, 8, 80), kernel="mma"), errors.Unsupported,
     ["head_dim 80", "kernel='auto' or 'rowwise'"]),
    ("kernel-name", lambda: D(kernel="fast"), errors.InvalidArgument, ["kernel must be"]),
    ("cache-dtype", lambda: D(cdtype=bc.float16), errors.InvalidDType, ["k_cache is float16", "q's dtype"]),
    ("q-rank", lambda: D(q=(4, 32 * 128), out=(4, 32 * 128)), errors.InvalidArgument, ["q has shape"]),
    ("out-shape", lambda: D(out=(4, 1, 32, 64)), errors.InvalidArgument, ["out has shape"]),
    ("cache-rank", lambda: D(cache=(1600, 8, 128)), errors.InvalidArgument, ["k_cache has shape", "page_size"]),
    ("v-shape", lambda: D(vcache=(100, 16, 8, 64)), errors.InvalidArgument, ["v_cache has shape"]),
    ("head-dim", lambda: D(cache=(100, 16, 8, 64)), errors.InvalidArgument, ["k_cache has head_dim 64"]),
    ("unsupported-dim", lambda: D(q=(4, 1, 32, 512), cache=(100, 16, 8, 512)), errors.Unsupported,
     ["head_dim 512", "at most 256"]),
    ("gqa", lambda: D(cache=(100, 16, 5, 128)), errors.InvalidArgument, ["not a multiple", "5 kv heads"]),
    ("page-size", lambda: D(cache=(100, 0, 8, 128)), errors.InvalidArgument, ["page_size 0"]),
    ("window", lambda: D(window_left=-3), errors.InvalidArgument, ["window sizes"]),
    ("softcap", lambda: D(softcap=-1.0), errors.InvalidArgument, ["softcap"]),
    ("scale", lambda: D(scale=float("inf")), errors.InvalidArgument, ["scale must be finite"]),
    ("splits", lambda: D(num_splits=-1), errors.InvalidArgument, ["num_splits"]),
    ("last-stride", lambda: D(cstrides=(32768, 2048, 256, 2)), errors.Unsupported, ["contiguous along head_dim"]),
    ("fp8-mixed", lambda: bc.PagedAttentionDescriptor(S((4, 1, 32, 128), bf16), S((100, 16, 8, 128), bc.float8_e4m3fn),
                                 S((100, 16, 8, 128), bc.float8_e5m2), S((4, 1, 32, 128), bf16), 64),
     errors.InvalidDType, ["v_cache is float8_e5m2", "k_cache's fp8"]),
    ("scales-16bit", lambda: D(kv_scales=True), errors.InvalidArgument, ["dequantize fp8 caches"]),
]


def test_fp8_cache_plan():
    p = bc.PagedAttentionPlan.select(D(cdtype=bc.float8_e4m3fn, kv_scales=True, scale_per_head=True))
    assert p.sku.name.startswith("paged_attention.decode.mma_sync.d128.")
    assert p.sku.name.endswith(".float8_e4m3fn_cache")
    assert "kv_scales=per_head" in repr(p.descriptor)


@pytest.mark.parametrize("name,make,exc,needles", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_name_the_operand(name, make, exc, needles):
    with pytest.raises(errors.BaracudaError) as info:
        bc.PagedAttentionPlan.select(make())
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    for n in needles:
        assert n in str(info.value), f"{n!r} not in {str(info.value)!r}"


def test_split_schedule_and_sku():
    # a small batch over a long table splits; each split is whole 64-key tiles; the SKU says how many
    p = bc.PagedAttentionPlan.select(D(q=(1, 1, 32, 128), max_pages=512))
    assert p.num_splits > 1 and p.workspace_bytes() > 0
    assert p.sku.name == f"paged_attention.decode.mma_sync.d128.s{p.num_splits}"
    assert f"{p.num_splits} split(s) of" in p.sku.precision.math
    # explicit splits, clamped to the tiles there are
    assert bc.PagedAttentionPlan.select(D(max_pages=64, num_splits=3)).num_splits == 3
    assert bc.PagedAttentionPlan.select(D(max_pages=2, num_splits=50)).num_splits == 1
    one = bc.PagedAttentionPlan.select(D(num_splits=1))
    assert one.num_splits == 1 and one.workspace_bytes() == 0
    # a max_seqlen_k hint below the table's capacity means fewer splits
    assert (bc.PagedAttentionPlan.select(D(q=(1, 1, 32, 128), max_pages=512, max_seqlen_k=256)).num_splits
            <= p.num_splits)
    # PlanPreference.tuning overrides the split count
    four = bc.PagedAttentionPlan.select(D(max_pages=64), bc.PlanPreference(tuning="splits=4"))
    assert four.num_splits == 4 and four.sku.name.endswith(".s4")
    with pytest.raises(errors.InvalidArgument, match="splits must be >= 1"):
        bc.PagedAttentionPlan.select(D(), bc.PlanPreference(tuning="splits=0"))
    with pytest.raises(errors.InvalidArgument, match="not a tuning key"):
        bc.PagedAttentionPlan.select(D(), bc.PlanPreference(tuning="warps=3"))


def test_layouts_and_identity():
    # a heads-first cache [pages, kv_heads, page_size, D] as its permuted view; one token as [B, Hq, D]
    hf = (16 * 8 * 128, 128, 16 * 128, 1)
    assert bc.PagedAttentionPlan.select(D(cstrides=hf)).sku.category == "paged_attention"
    assert bc.PagedAttentionPlan.select(D(q=(4, 32, 128))).num_splits >= 1
    assert D() == D() and hash(D()) == hash(D()) and D() != D(causal=False)
    assert "max_pages=64" in repr(D())


def test_registry_and_functions():
    fam = {f["name"]: f for f in bc.families()}["paged_attention"]
    assert fam["plan"] == "PagedAttentionPlan, AttentionMergePlan"
    assert callable(bc.paged_attention) and "paged_attention" in bc.__all__


def test_rowwise_kernel_takes_f32_and_other_head_dims():
    for d in (D(dtype=bc.float32), D(q=(4, 1, 32, 80), cache=(100, 16, 8, 80)), D(kernel="rowwise", num_splits=4)):
        p = bc.PagedAttentionPlan.select(d)
        assert p.sku.name == "paged_attention.decode.rowwise" and p.num_splits == 1 and p.workspace_bytes() == 0
    assert bc.PagedAttentionPlan.select(D()).sku.name.startswith("paged_attention.decode.mma_sync.d128.")
    assert "kernel='rowwise'" in repr(D(kernel="rowwise"))


def test_fp8_caches_take_128_key_tiles():
    """By default where each split keeps 4+ 64-key tiles (one request over many splits keeps 64 and
    its parallelism; 16-bit caches 64 above head dim 64); by tuning anywhere over an fp8 cache."""
    fp8 = dict(cdtype=bc.float8_e4m3fn)
    long_splits = bc.PagedAttentionPlan.select(D(max_pages=512, num_splits=4, **fp8))
    assert long_splits.sku.name.endswith(".float8_e4m3fn_cache.t128"), long_splits.sku.name
    short_splits = bc.PagedAttentionPlan.select(D(max_pages=512, num_splits=64, **fp8))
    assert short_splits.sku.name.endswith(".s64.float8_e4m3fn_cache"), short_splits.sku.name
    assert not bc.PagedAttentionPlan.select(D(max_pages=512, num_splits=4)).sku.name.endswith(".t128")
    for splits in (0, 3):
        p = bc.PagedAttentionPlan.select(D(max_pages=512, num_splits=splits, **fp8), bc.PlanPreference(tuning="tile=128"))
        assert p.sku.name.endswith(".float8_e4m3fn_cache.t128"), p.sku.name
        keys = int(p.sku.precision.math.split(" split(s) of ")[1].split()[0])
        assert keys % 128 == 0 and keys * p.num_splits >= 512 * 16, (keys, p.num_splits)
    with pytest.raises(errors.InvalidArgument,
                       match="tuning tile must be 64 .or 128 over an fp8 cache or at head dim 64., got '128'"):
        bc.PagedAttentionPlan.select(D(), bc.PlanPreference(tuning="tile=128"))
    assert not bc.PagedAttentionPlan.select(D(**fp8), bc.PlanPreference(tuning="tile=64")).sku.name.endswith("t64")


def test_head_dim_64_takes_128_key_tiles():
    """A 16-bit cache at head dim 64: a 128-key tile is a 64-key d128 tile's bytes, taken by the same
    rule as fp8 caches' (4+ 64-key tiles per split), or by tuning."""
    d64 = dict(q=(4, 1, 32, 64), cache=(100, 16, 8, 64))
    assert bc.PagedAttentionPlan.select(D(max_pages=512, num_splits=4, **d64)).sku.name.endswith(".d64.s4.t128")
    assert not bc.PagedAttentionPlan.select(D(max_pages=512, num_splits=64, **d64)).sku.name.endswith(".t128")
    tuned = bc.PagedAttentionPlan.select(D(max_pages=512, num_splits=64, **d64), bc.PlanPreference(tuning="tile=128"))
    assert tuned.sku.name.endswith(".t128"), tuned.sku.name
    assert not bc.PagedAttentionPlan.select(D(max_pages=512, num_splits=4, **d64),
                                            bc.PlanPreference(tuning="tile=64")).sku.name.endswith(".t128")


def test_many_query_rows_take_64_row_blocks():
    """128+ query rows per kv head (q heads per kv head x query tokens): 64-row blocks ('prefill' in the
    SKU) where cuDNN does not take the call: an fp8 cache, kernel='mma', or fewer than 64 tokens."""
    many = dict(q=(2, 32, 32, 128))  # 4 q heads per kv head x 32 tokens = 128 rows
    for d in (D(**many), D(cdtype=bc.float8_e4m3fn, **many), D(kernel="mma", q=(2, 512, 32, 128), max_pages=64)):
        p = bc.PagedAttentionPlan.select(d)
        assert p.sku.name.startswith("paged_attention.prefill.mma_sync.d128."), p.sku.name
        assert "64-row blocks" in p.sku.precision.math
    few = bc.PagedAttentionPlan.select(D(q=(2, 31, 32, 128))).sku.name  # 124 rows
    assert few.startswith("paged_attention.decode.mma_sync.d128."), few
    # tuning takes either way, and says which
    assert "decode" in bc.PagedAttentionPlan.select(D(**many), bc.PlanPreference(tuning="rows=16")).sku.name
    assert "prefill" in bc.PagedAttentionPlan.select(D(), bc.PlanPreference(tuning="rows=64")).sku.name
    with pytest.raises(errors.InvalidArgument, match="tuning rows must be 16 or 64, got '32'"):
        bc.PagedAttentionPlan.select(D(), bc.PlanPreference(tuning="rows=32"))
    # the rowwise kernel has no row blocks
    assert bc.PagedAttentionPlan.select(D(kernel="rowwise", **many)).sku.name == "paged_attention.decode.rowwise"


def test_fp8_caches_pick_their_kernel():
    """fp8 caches: the tensor cores under 'auto' for 16-bit q, the rowwise kernel when asked for or for f32 q."""
    auto = bc.PagedAttentionPlan.select(D(cdtype=bc.float8_e4m3fn)).sku.name
    assert auto.startswith("paged_attention.decode.mma_sync.d128.") and auto.endswith("_cache")
    rw = bc.PagedAttentionPlan.select(D(cdtype=bc.float8_e4m3fn, kernel="rowwise")).sku.name
    assert rw == "paged_attention.decode.rowwise.float8_e4m3fn_cache"
    f32 = bc.PagedAttentionPlan.select(D(dtype=bc.float32, cdtype=bc.float8_e4m3fn)).sku.name
    assert f32 == "paged_attention.decode.rowwise.float8_e4m3fn_cache"
    mma = bc.PagedAttentionPlan.select(D(cdtype=bc.float8_e5m2, kernel="mma")).sku.name
    assert mma.startswith("paged_attention.decode.mma_sync.d128.") and mma.endswith("_cache")
    with pytest.raises(errors.Unsupported, match="the mma kernel takes"):
        bc.PagedAttentionPlan.select(D(dtype=bc.float32, cdtype=bc.float8_e4m3fn, kernel="mma"))
    # a prefill over fp8 caches: cuDNN reads a bf16 pool of the pages, so f16 q is refused there by name
    # (its rule comes before any device is asked for); 'auto' keeps it on ours
    prefill = dict(q=(4, 96, 32, 128), dtype=bc.float16, cdtype=bc.float8_e4m3fn)
    if bc.features().get("cudnn"):
        with pytest.raises(errors.Unsupported, match="fp8 caches under bfloat16 q only"):
            bc.PagedAttentionPlan.select(D(**prefill, kernel="cudnn"))
    assert "mma_sync" in bc.PagedAttentionPlan.select(D(**prefill)).sku.name


def _merge_desc(shape=(6, 4, 64), dt=bc.bfloat16, lse=True, **over):
    S = bc.TensorSpec
    specs = dict(out_a=S(shape, dt), lse_a=S(shape[:-1], bc.float32), out_b=S(shape, dt),
                 lse_b=S(shape[:-1], bc.float32), out=S(shape, dt))
    specs.update(over)
    return bc.AttentionMergeDescriptor(**specs, lse=S(shape[:-1], bc.float32) if lse else None)


def test_merge_plan_and_refusals():
    """merge_attention_states: a plan of the paged-attention family; shapes and dtypes named on refusal."""
    p = bc.AttentionMergePlan.select(_merge_desc())
    assert p.sku.name == "paged_attention.merge_states" and p.workspace_bytes() == 0
    assert _merge_desc() == _merge_desc() and hash(_merge_desc()) == hash(_merge_desc())
    assert bc.AttentionMergePlan.select(_merge_desc((2, 3, 5, 4, 128), bc.float32, lse=False))
    S = bc.TensorSpec
    with pytest.raises(errors.InvalidArgument, match="at most 3 leading dims"):
        bc.AttentionMergePlan.select(_merge_desc((1, 2, 3, 4, 5, 64)))
    with pytest.raises(errors.InvalidDType, match="out_a is float64"):
        bc.AttentionMergePlan.select(_merge_desc(dt=bc.float64))
    with pytest.raises(errors.InvalidDType, match="lse_b is bfloat16; expected float32"):
        bc.AttentionMergePlan.select(_merge_desc(lse_b=S((6, 4), bc.bfloat16)))
    with pytest.raises(errors.InvalidArgument, match=r"lse_a has shape \(6, 5\); expected \(6, 4\)"):
        bc.AttentionMergePlan.select(_merge_desc(lse_a=S((6, 5), bc.float32)))
    with pytest.raises(errors.InvalidDType, match="out_b is float16"):
        bc.AttentionMergePlan.select(_merge_desc(out_b=S((6, 4, 64), bc.float16)))
    with pytest.raises(errors.Unsupported, match="out must be contiguous along head_dim"):
        bc.AttentionMergePlan.select(_merge_desc(out=S((6, 4, 64), bc.bfloat16, (256, 1, 4))))
    assert "merge_attention_states" in bc.__all__ and callable(bc.merge_attention_states)


def test_e4m3_software_decode_is_exact():
    """The sm_80 path of cuda/common/dtype_traits.cuh's e4m3x2_to_half2_sw (sm_89+ use the cvt), step
    by step in numpy for every byte pair's two lanes: a byte's exponent and mantissa moved into f16's
    fields, times 2^8 in f16, NaN bytes to 0x7fff; against the format's definition (bias 7, subnormals
    at exponent 0, no inf, NaN at S.1111.111), bit for bit."""
    np = pytest.importorskip("numpy")

    def by_definition(b):
        s = -1.0 if b & 0x80 else 1.0
        e, m = (b >> 3) & 0xF, b & 0x7
        if e == 0xF and m == 0x7:
            return np.uint16(0x7FFF)
        v = s * (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
        return np.array(v, dtype=np.float16).view(np.uint16)

    bits = np.arange(1 << 16, dtype=np.uint32)  # byte 0 in the low lane, byte 1 in the high one
    w = ((bits & 0xFF) << 8) | ((bits & 0xFF00) << 16)
    mag = (w & 0x7F007F00) >> 1
    lo = ((w & 0x8000) | (mag & 0xFFFF)).astype(np.uint16)
    hi = (((w >> 16) & 0x8000) | (mag >> 16)).astype(np.uint16)
    k256 = np.float16(256)
    rlo = (lo.view(np.float16) * k256).view(np.uint16).copy()
    rhi = (hi.view(np.float16) * k256).view(np.uint16).copy()
    rlo[(mag & 0xFFFF) == 0x3F80] = 0x7FFF
    rhi[(mag >> 16) == 0x3F80] = 0x7FFF
    want = np.array([by_definition(b) for b in range(256)], dtype=np.uint16)
    assert np.array_equal(rlo, want[bits & 0xFF]) and np.array_equal(rhi, want[bits >> 8])
