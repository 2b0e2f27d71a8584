"""GPU correctness of the KV-cache append against torch indexing: both cache layouts (pages-first
and heads-first as a permuted view), int32 / int64 slots, padding (-1) and out-of-range slots
skipped with every other byte of the caches left as it was, strided sources (k / v sliced from a
fused qkv projection), key only (MLA), f32 / bf16 / fp8, empty inputs, the torch op (opcheck,
torch.compile) and capture in a CUDA graph."""
import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")

errors = bc.errors
DEV = "cuda"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]


def gen(seed):
    g = torch.Generator(device=DEV)
    g.manual_seed(seed)
    return g


def reference(cache, src, slots):
    """cache [pages, page_size, H, D] (a view) after writing src at slots, in torch."""
    want = cache.clone()
    pages, page_size = cache.shape[:2]
    for t, s in enumerate(slots.tolist()):
        if 0 <= s < pages * page_size:
            want[s // page_size, s % page_size] = src[t]
    return want


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float32, torch.float8_e4m3fn])
@pytest.mark.parametrize("heads_first", [False, True])
@pytest.mark.parametrize("sdt", [torch.int32, torch.int64])
def test_append_matches_indexing(dt, heads_first, sdt):
    g = gen(1)
    tokens, hq, hkv, d, pages, page_size = 37, 8, 2, 64, 12, 16
    qkv = torch.randn(tokens, hq + 2 * hkv, d, generator=g, device=DEV).to(dt)
    k, v = qkv[:, hq:hq + hkv], qkv[:, hq + hkv:]  # strided views of the fused projection
    shape = (pages, hkv, page_size, d) if heads_first else (pages, page_size, hkv, d)
    kc_store = torch.randn(shape, generator=g, device=DEV).to(dt)
    vc_store = torch.randn(shape, generator=g, device=DEV).to(dt)
    kc = kc_store.transpose(1, 2) if heads_first else kc_store
    vc = vc_store.transpose(1, 2) if heads_first else vc_store
    slots = torch.randperm(pages * page_size, generator=g, device=DEV)[:tokens].to(sdt)
    slots[3] = -1                        # padding
    slots[5] = pages * page_size + 7     # past the cache: skipped, never written out of bounds
    want_k, want_v = reference(kc, k, slots), reference(vc, v, slots)
    bc.kv_cache_append(k, v, kc, vc, slots)
    assert torch.equal(kc.view(torch.uint8) if dt.itemsize == 1 else kc, want_k.view(torch.uint8)
                       if dt.itemsize == 1 else want_k)
    assert torch.equal(vc.view(torch.uint8) if dt.itemsize == 1 else vc, want_v.view(torch.uint8)
                       if dt.itemsize == 1 else want_v)


def test_key_only_odd_rows_and_empty():
    g = gen(2)
    k = torch.randn(9, 3, 10, generator=g, device=DEV, dtype=torch.float16)  # 20-byte rows: 4-byte copies
    kc = torch.zeros(4, 5, 3, 10, device=DEV, dtype=torch.float16)
    slots = torch.tensor([0, 19, 7, -3, 4, 5, 6, 11, 2], device=DEV)
    want = reference(kc, k, slots)
    bc.kv_cache_append(k, None, kc, None, slots)
    assert torch.equal(kc, want)
    bc.kv_cache_append(k[:0], None, kc, None, slots[:0])
    assert torch.equal(kc, want)


def test_errors_and_torch_op():
    import baracuda.torch as bt
    k = torch.zeros(4, 2, 64, device=DEV, dtype=torch.bfloat16)
    kc = torch.zeros(3, 16, 2, 64, device=DEV, dtype=torch.bfloat16)
    with pytest.raises(errors.InvalidArgument, match="slot_mapping has shape"):
        bc.kv_cache_append(k, None, kc, None, torch.zeros(5, dtype=torch.int64, device=DEV))
    with pytest.raises(errors.InvalidDType, match="key_cache is float32"):
        bc.kv_cache_append(k, None, kc.float(), None, torch.zeros(4, dtype=torch.int64, device=DEV))
    slots = torch.tensor([1, 17, 40, -1], device=DEV)
    v = torch.randn(4, 2, 64, device=DEV, dtype=torch.bfloat16)
    vc = torch.zeros_like(kc)
    torch.library.opcheck(torch.ops.baracuda.kv_cache_append, (k + 1, v, kc, vc, slots))
    kc.zero_()
    vc.zero_()
    f = torch.compile(lambda a, b, c, d, s: bt.kv_cache_append(a, b, c, d, s), fullgraph=True)
    f(k + 1, v, kc, vc, slots)
    assert torch.equal(kc, reference(torch.zeros_like(kc), k + 1, slots))
    assert torch.equal(vc, reference(torch.zeros_like(vc), v, slots))


def test_captured_in_a_cuda_graph():
    g = gen(3)
    k = torch.randn(8, 2, 128, generator=g, device=DEV, dtype=torch.bfloat16)
    kc = torch.zeros(4, 16, 2, 128, device=DEV, dtype=torch.bfloat16)
    slots = torch.arange(8, device=DEV)
    plan = bc.KvCachePlan.select(bc.KvCacheDescriptor(bc.TensorSpec((8, 2, 128), bc.bfloat16),
                                                      bc.TensorSpec((4, 16, 2, 128), bc.bfloat16)))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        plan.run(key=k, key_cache=kc, slot_mapping=slots)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.run(key=k, key_cache=kc, slot_mapping=slots)
    k.copy_(torch.randn(8, 2, 128, generator=g, device=DEV))  # a new step: new keys at the next slots
    slots.add_(8)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(kc[0, 8:16], k)
