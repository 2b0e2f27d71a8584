"""Host tests of the KV-cache family (no GPU): select() refusals naming the operand, the SKU,
descriptor identity, the registry entry and the torch op's registration."""
import pytest

bc = pytest.importorskip("baracuda")
from baracuda import errors  # noqa: E402

S = bc.TensorSpec
bf16 = bc.bfloat16


def D(key=(7, 2, 64), cache=(10, 16, 2, 64), value=None, value_cache=None, dtype=bf16, cdtype=None, cstrides=None,
      **kw):
    return bc.KvCacheDescriptor(S(key, dtype), S(cache, cdtype or dtype, cstrides),
                                None if value is None else S(value, dtype),
                                None if value_cache is None else S(value_cache, dtype), **kw)


REFUSALS = [
    ("key-rank", lambda: D(key=(7, 128)), errors.InvalidArgument, ["key has shape", "[tokens, kv_heads, head_dim]"]),
    ("cache-rank", lambda: D(cache=(160, 2, 64)), errors.InvalidArgument, ["key_cache has shape", "page_size"]),
    ("heads", lambda: D(cache=(10, 16, 4, 64)), errors.InvalidArgument, ["kv_heads and head_dim must match"]),
    ("dtype", lambda: D(cdtype=bc.float16), errors.InvalidDType, ["key_cache is float16 but key is bfloat16"]),
    ("slot-dtype", lambda: D(slot_dtype=bc.float32), errors.InvalidDType, ["slot_mapping is float32"]),
    ("value-tokens", lambda: D(value=(6, 2, 64), value_cache=(10, 16, 2, 64)), errors.InvalidArgument,
     ["value has shape"]),
    ("value-pages", lambda: D(value=(7, 2, 32), value_cache=(9, 16, 2, 32)), errors.InvalidArgument,
     ["value_cache has shape"]),
    ("overlap", lambda: D(cstrides=(64, 64, 64, 1)), errors.InvalidArgument, ["share memory"]),
    ("last-stride", lambda: D(cstrides=(4096, 256, 128, 2)), errors.Unsupported, ["contiguous along head_dim"]),
    ("scales-copy", lambda: D(scales=True), errors.InvalidArgument, ["quantize into an fp8 cache"]),
    ("fp8-source", lambda: D(dtype=bc.float8_e4m3fn, cdtype=bc.float8_e5m2), errors.InvalidDType,
     ["key_cache is float8_e5m2 but key is float8_e4m3fn"]),
    ("mixed", lambda: bc.KvCacheDescriptor(S((7, 2, 64), bf16), S((10, 16, 2, 64), bc.float8_e4m3fn), S((7, 2, 64), bf16),
                                           S((10, 16, 2, 64), bf16)), errors.InvalidDType,
     ["both be copies or both fp8 quantizations"]),
]


def test_fp8_quantizing_append_plan():
    p = bc.KvCachePlan.select(D(cdtype=bc.float8_e4m3fn, scales=True, scale_per_head=True))
    assert p.sku.name == "kv_cache.append.paged_fp8" and "scales=per_head" in repr(p.descriptor)
    assert bc.KvCachePlan.select(D(cdtype=bc.float8_e5m2)).sku.name == "kv_cache.append.paged_fp8"


@pytest.mark.parametrize("name,make,exc,needles", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_name_the_operand(name, make, exc, needles):
    with pytest.raises(errors.BaracudaError) as info:
        bc.KvCachePlan.select(make())
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    for n in needles:
        assert n in str(info.value), f"{n!r} not in {str(info.value)!r}"


def test_value_pairs_and_sku():
    with pytest.raises(errors.InvalidArgument, match="value and value_cache go together"):
        bc.KvCacheDescriptor(S((7, 2, 64), bf16), S((10, 16, 2, 64), bf16), S((7, 2, 64), bf16), None)
    p = bc.KvCachePlan.select(D(value=(7, 2, 32), value_cache=(10, 16, 2, 32), slot_dtype=bc.int32))
    assert p.sku.name == "kv_cache.append.paged" and p.workspace_bytes() == 0 and p.descriptor.has_value
    # a heads-first cache [pages, heads, page_size, D] as its permuted view
    assert bc.KvCachePlan.select(D(cstrides=(2048, 64, 1024, 1))).sku.op == "append"
    assert D() == D() and hash(D()) == hash(D()) and D() != D(slot_dtype=bc.int32)
    assert "slot_mapping=int64" in repr(D())
    fam = {f["name"]: f for f in bc.families()}["kv_cache"]
    assert fam["plan"] == "KvCachePlan"


def test_functional_argument_rules():
    with pytest.raises(errors.InvalidArgument, match="value and value_cache go together"):
        bc.kv_cache_append(None, object(), None, None, None)
    torch = pytest.importorskip("torch")
    import baracuda.torch as bt
    assert "kv_cache_append" in bt.OPS and hasattr(torch.ops.baracuda, "kv_cache_append")
