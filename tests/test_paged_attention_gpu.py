"""GPU correctness of paged decode attention against an f64 reference built by gathering each
request's pages: head dims, GQA ratios (1, 4, 8, MQA), 1 to 8 query tokens (causal among them or
not), page sizes (1, 16, 13: not a power of two), lengths from 0 to past one split, random page
order, both cache layouts, sliding window, softcap, ALiBi, sinks, lse, forced splits (merge),
bad page ids hidden (never read), seq_lens clamped, the torch op (opcheck, torch.compile) and
capture in a CUDA graph replayed with longer contexts."""
import math

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


def spec(t):
    return bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype), tuple(t.stride()))


def make_case(seed, batch, sq, hq, hkv, d, page_size, lens, dt=torch.bfloat16, heads_first=False, spare_pages=3):
    """Random q and caches; each request's pages drawn in random order from one pool."""
    g = gen(seed)
    max_pages = max(1, max((n + page_size - 1) // page_size for n in lens))
    pages = batch * max_pages + spare_pages
    perm = torch.randperm(pages, generator=g, device=DEV).to(torch.int32)
    table = perm[:batch * max_pages].view(batch, max_pages).contiguous()
    shape = (pages, hkv, page_size, d) if heads_first else (pages, page_size, hkv, d)
    kc = torch.randn(shape, generator=g, device=DEV).to(dt)
    vc = torch.randn(shape, generator=g, device=DEV).to(dt)
    if heads_first:
        kc, vc = kc.transpose(1, 2), vc.transpose(1, 2)
    q = torch.randn(batch, sq, hq, d, generator=g, device=DEV).to(dt)
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    return q, kc, vc, table, seq_lens


def reference(q, kc, vc, table, seq_lens, *, causal=True, scale=None, window=(-1, -1), softcap=0.0, alibi=None,
              sinks=None):
    """(out, lse) in f64: request by request, keys gathered from the pages."""
    batch, sq, hq, d = q.shape
    page_size, hkv = kc.shape[1], kc.shape[2]
    group = hq // hkv
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    wl, wr = window
    if causal:
        wr = 0
    out = torch.zeros(batch, sq, hq, d, dtype=torch.float64, device=q.device)
    lse = torch.full((batch, hq, sq), -math.inf, dtype=torch.float64, device=q.device)
    for b in range(batch):
        n = max(0, min(int(seq_lens[b]), table.shape[1] * page_size))
        j = torch.arange(n, device=q.device)
        pg = table[b, (j // page_size)].long()
        k = kc[pg, j % page_size].double()  # [n, hkv, d]
        v = vc[pg, j % page_size].double()
        for i in range(sq):
            pos = n - sq + i
            vis = torch.ones(n, dtype=torch.bool, device=q.device)
            if wl >= 0:
                vis &= j >= pos - wl
            if wr >= 0:
                vis &= j <= pos + wr
            for h in range(hq):
                s = (k[:, h // group] @ q[b, i, h].double()) * scale
                if softcap:
                    s = softcap * torch.tanh(s / softcap)
                if alibi is not None:
                    s = s - float(alibi[h]) * (pos - j).abs().double()
                s = torch.where(vis, s, torch.tensor(-math.inf, dtype=torch.float64, device=q.device))
                logits = s if sinks is None else torch.cat([s, sinks[h].double().view(1)])
                if not torch.isfinite(logits).any():
                    continue
                m = logits.max()
                e = torch.exp(logits - m)
                den = e.sum()
                lse[b, h, i] = m + torch.log(den)
                out[b, i, h] = (e[:n] / den) @ v[:, h // group]
    return out, lse


def check(got, want, dt, what="out", magnitude=1.0):
    """Absolute tolerance for values of order one; `magnitude` scales it for larger values."""
    tol = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-4}[dt] * max(1.0, magnitude)
    err = (got.double() - want).abs().max().item() if got.numel() else 0.0
    assert err <= tol, f"{what}: max error {err} > {tol}"


CASES = [  # (batch, sq, hq, hkv, d, page_size, lens)
    (3, 1, 8, 2, 128, 16, [37, 1, 200]),
    (2, 1, 32, 8, 128, 16, [1000, 513]),
    (4, 1, 8, 8, 64, 16, [5, 64, 65, 130]),       # MHA
    (2, 1, 16, 1, 64, 13, [100, 27]),             # MQA, odd page size
    (2, 1, 8, 2, 128, 12, [100, 250]),            # a page size not a power of two at d128 (absent rows: zero row)
    (2, 4, 8, 2, 128, 16, [50, 4]),               # 4 query tokens (speculative), 16 rows per kv head
    (2, 8, 8, 1, 96, 1, [9, 300]),                # 8 tokens x 8 heads: 4 row groups; page_size 1
    (1, 3, 4, 4, 256, 32, [77]),
    (3, 1, 8, 2, 128, 16, [0, 3, 40]),            # an empty request
    (2, 100, 8, 2, 128, 16, [300, 100]),          # chunked prefill: 100 new tokens over 200 cached / none
]


@pytest.mark.parametrize("case", CASES, ids=[f"b{c[0]}q{c[1]}h{c[2]}/{c[3]}d{c[4]}p{c[5]}" for c in CASES])
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
def test_matches_f64_reference(case, dt):
    batch, sq, hq, hkv, d, page_size, lens = case
    q, kc, vc, table, seq_lens = make_case(11, batch, sq, hq, hkv, d, page_size, lens, dt)
    out, lse = bc.paged_attention(q, kc, vc, table, seq_lens, return_lse=True)
    want, want_lse = reference(q, kc, vc, table, seq_lens)
    check(out, want, dt)
    fin = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse), fin)
    check(lse[fin], want_lse[fin], torch.float16, "lse")


@pytest.mark.parametrize("splits", [1, 2, 5, 40])
def test_splits_merge(splits):
    q, kc, vc, table, seq_lens = make_case(12, 3, 2, 8, 2, 128, 16, [1500, 70, 640])
    out, lse = bc.paged_attention(q, kc, vc, table, seq_lens, num_splits=splits, return_lse=True)
    want, want_lse = reference(q, kc, vc, table, seq_lens)
    check(out, want, torch.bfloat16)
    check(lse, want_lse, torch.float16, "lse")


def test_heads_first_and_strided_q():
    q, kc, vc, table, seq_lens = make_case(13, 2, 1, 8, 2, 64, 16, [90, 33], heads_first=True)
    qkv = torch.randn(2, 1, 12, 64, device=DEV, dtype=torch.bfloat16)
    q = qkv[:, :, :8]  # a slice of a fused projection
    out = bc.paged_attention(q, kc, vc, table, seq_lens)
    check(out, reference(q, kc, vc, table, seq_lens)[0], torch.bfloat16)
    out3 = bc.paged_attention(q[:, 0], kc, vc, table, seq_lens)  # [B, Hq, D]: one token
    assert out3.shape == (2, 8, 64) and torch.equal(out3, out[:, 0])


def check_score_rules(opts, dt, seed, d, sq=3, **kw):
    """bc.paged_attention with `opts` (alibi / sinks: True draws them) against the f64 reference."""
    opts = dict(opts)
    q, kc, vc, table, seq_lens = make_case(seed, 2, sq, 8, 2, d, 16, [300, 45], dt)
    g = gen(seed + 1)
    alibi = torch.rand(8, generator=g, device=DEV) * 0.2 if opts.pop("alibi", False) else None
    sinks = torch.randn(8, generator=g, device=DEV) * 2 if opts.pop("sinks", False) else None
    out, lse = bc.paged_attention(q, kc, vc, table, seq_lens, alibi_slopes=alibi, sinks=sinks, return_lse=True,
                                  **opts, **kw)
    want, want_lse = reference(q, kc, vc, table, seq_lens, alibi=alibi, sinks=sinks,
                               **{"window": (-1, -1), **opts})
    check(out, want, dt)
    fin = torch.isfinite(want_lse)
    check(lse[fin], want_lse[fin], torch.float32 if dt == torch.float32 else torch.float16, "lse")


@pytest.mark.parametrize("opts", [
    dict(causal=False), dict(window=(20, -1)), dict(window=(5, 0), causal=False), dict(softcap=8.0),
    dict(scale=0.3), dict(alibi=True), dict(sinks=True), dict(alibi=True, sinks=True, softcap=20.0, window=(31, -1))],
    ids=lambda o: ",".join(o))
def test_score_rules(opts):
    for splits in (1, 3):
        check_score_rules(opts, torch.bfloat16, 14, 128, num_splits=splits)


HAS_CUDNN = bc.features().get("cudnn", False)


@pytest.mark.skipif(not HAS_CUDNN, reason="no cuDNN backend in this build")
@pytest.mark.parametrize("opts", [dict(), dict(causal=False), dict(window=(20, -1)), dict(sinks=True),
                                  dict(scale=0.3, window=(40, 3), causal=False)], ids=lambda o: ",".join(o) or "causal")
@pytest.mark.parametrize("dt,heads_first", [(torch.bfloat16, False), (torch.float16, True)], ids=["bf16", "f16-hf"])
def test_cudnn_prefill(opts, dt, heads_first):
    """A chunked prefill on cuDNN's paged attention (kernel='cudnn'; 'auto' from 64 query tokens):
    requests longer than, equal to and shorter than the new tokens (rows that see no key: out 0, lse
    -inf, or the sink), an empty request, GQA, both cache layouts, against the f64 reference."""
    opts = dict(opts)
    q, kc, vc, table, seq_lens = make_case(31, 4, 70, 8, 2, 128, 16, [300, 70, 50, 0], dt, heads_first=heads_first)
    sinks = torch.randn(8, generator=gen(32), device=DEV) * 2 if opts.pop("sinks", False) else None
    out = torch.full_like(q, float("nan"))
    out, lse = bc.paged_attention(q, kc, vc, table, seq_lens, sinks=sinks, return_lse=True, kernel="cudnn", out=out,
                                  **opts)
    want, want_lse = reference(q, kc, vc, table, seq_lens, sinks=sinks, **{"window": (-1, -1), **opts})
    check(out, want, dt)
    fin = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse), fin)
    check(lse[fin], want_lse[fin], torch.float16, "lse")
    plan = bc.PagedAttentionPlan.select(bc.PagedAttentionDescriptor(spec(q), spec(kc), spec(vc), spec(q),
                                                                    max_pages=table.shape[1]))
    assert plan.sku.backend == bc.Backend.cudnn, plan.sku.name  # auto at 70 query tokens
    with pytest.raises(errors.Unsupported, match="softcap"):
        bc.paged_attention(q, kc, vc, table, seq_lens, softcap=10.0, kernel="cudnn")


@pytest.mark.skipif(not HAS_CUDNN, reason="no cuDNN backend in this build")
@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("scales", ["none", "tensor", "head"])
@pytest.mark.parametrize("heads_first", [False, True], ids=["nhd", "hnd"])
def test_cudnn_prefill_fp8_caches(fp8, scales, heads_first):
    """A chunked prefill over fp8 caches on cuDNN: the table's pages dequantized (times per-tensor or
    per-head scales) into a bf16 pool in the workspace. NaN bytes in every slot no request reaches
    (past each length, the spare pages) stay out of the output; GQA, an empty request, rows that see
    no key, lse, both layouts, against the f64 reference on the dequantized values. 'auto' takes it
    from 64 tokens within its workspace budget, the tensor cores past it; f16 q is refused."""
    lens = [300, 70, 50, 0]
    q, kc, vc, table, seq_lens = make_case(61, 4, 70, 8, 2, 128, 16, lens, heads_first=heads_first)
    ks = vs = None
    if scales != "none":
        n = 2 if scales == "head" else 1
        ks = (torch.rand(n, generator=gen(62), device=DEV) + 0.5) / 16
        vs = (torch.rand(n, generator=gen(63), device=DEV) + 0.5) / 16
    kc8 = (kc.float() / (1 if ks is None else ks.view(-1, 1))).to(fp8)  # keeps the (heads-first) strides
    vc8 = (vc.float() / (1 if vs is None else vs.view(-1, 1))).to(fp8)
    kq = kc8.float() * (1 if ks is None else ks.view(-1, 1))
    vq = vc8.float() * (1 if vs is None else vs.view(-1, 1))
    used = torch.zeros(kc.shape[:2], dtype=torch.bool, device=DEV)
    for b, n in enumerate(lens):
        j = torch.arange(n, device=DEV)
        used[table[b, j // 16].long(), j % 16] = True
    for c in (kc8, vc8):
        c.view(torch.uint8)[~used] = 0x7F  # NaN in both formats
    want, want_lse = reference(q, kq, vq, table, seq_lens)
    fin = torch.isfinite(want_lse)
    scale_args = dict(k_scale=ks, v_scale=vs)
    out, lse = bc.paged_attention(q, kc8, vc8, table, seq_lens, return_lse=True, kernel="cudnn",
                                  out=torch.full_like(q, float("nan")), **scale_args)
    check(out, want, torch.bfloat16)
    assert torch.equal(torch.isfinite(lse), fin)
    check(lse[fin], want_lse[fin], torch.float16, "lse", magnitude=2)  # scaled keys rounded to bf16 in the pool
    desc = bc.PagedAttentionDescriptor(spec(q), spec(kc8), spec(vc8), spec(q), table.shape[1],
                                       kv_scales=ks is not None, scale_per_head=scales == "head")
    plan = bc.PagedAttentionPlan.select(desc)
    assert plan.sku.backend == bc.Backend.cudnn and plan.sku.name.endswith("_cache"), plan.sku.name
    pool = 4 * 4 * table.shape[1] * 16 * 2 * 128  # bf16 K and V for every page the table addresses
    assert plan.workspace_bytes() >= pool
    small = bc.PagedAttentionPlan.select(desc, bc.PlanPreference(workspace_limit=pool - 1))
    assert "mma_sync" in small.sku.name, small.sku.name
    o2 = torch.full_like(q, float("nan"))
    ws = torch.empty(max(1, small.workspace_bytes()), dtype=torch.uint8, device=DEV)
    small.run(q=q, k_cache=kc8, v_cache=vc8, block_table=table, seq_lens=seq_lens, out=o2, workspace=ws,
              **scale_args)
    check(o2, want, torch.bfloat16)
    with pytest.raises(errors.Unsupported, match="workspace_limit"):
        bc.PagedAttentionPlan.select(bc.PagedAttentionDescriptor(
            spec(q), spec(kc8), spec(vc8), spec(q), table.shape[1], kernel="cudnn", kv_scales=ks is not None,
            scale_per_head=scales == "head"), bc.PlanPreference(workspace_limit=pool - 1))
    with pytest.raises(errors.Unsupported, match="bfloat16 q only"):
        bc.paged_attention(q.half(), kc8, vc8, table, seq_lens, kernel="cudnn", **scale_args)


@pytest.mark.skipif(not HAS_CUDNN, reason="no cuDNN backend in this build")
def test_cudnn_decode_and_graph_replay():
    """kernel='cudnn' for one-token decode of 256 (request, kv head) pairs over a 4096-key cache at head
    dim 128, against the f64 reference and replayed from a CUDA graph for new lengths; 'auto' keeps
    one-token and speculative decode on ours (faster there), and a split count always asks for ours."""
    lens = [4096, 1, 0] + [(97 * i) % 700 + 2 for i in range(29)]
    q, kc, vc, table, seq_lens = make_case(41, 32, 1, 16, 8, 128, 16, lens)
    out = torch.full_like(q, float("nan"))
    plan = bc.PagedAttentionPlan.select(bc.PagedAttentionDescriptor(spec(q), spec(kc), spec(vc), spec(out),
                                                                     table.shape[1], kernel="cudnn"))
    assert plan.sku.backend == bc.Backend.cudnn, plan.sku.name
    ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
    args = dict(q=q, k_cache=kc, v_cache=vc, block_table=table, seq_lens=seq_lens, out=out, workspace=ws)
    plan.run(**args)
    check(out, reference(q, kc, vc, table, seq_lens)[0], torch.bfloat16)
    s = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        with torch.cuda.graph(graph, stream=s):
            plan.run(**args, stream=s.cuda_stream)
    seq_lens.copy_(torch.tensor([4000, 700, 5] + lens[3:], dtype=torch.int32))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    check(out, reference(q, kc, vc, table, seq_lens)[0], torch.bfloat16)

    def sku(q_, table_, **kw):
        d = bc.PagedAttentionDescriptor(spec(q_), spec(kc), spec(vc), spec(q_), table_.shape[1], **kw)
        return bc.PagedAttentionPlan.select(d).sku.name

    assert "decode" in sku(q, table)                               # auto: ours
    assert "decode" in sku(q, table, num_splits=2)
    tuned = bc.PagedAttentionDescriptor(spec(q), spec(kc), spec(vc), spec(q), table.shape[1])
    assert "decode" in bc.PagedAttentionPlan.select(tuned, bc.PlanPreference(tuning="splits=2")).sku.name
    assert "decode" in sku(torch.empty(32, 4, 16, 128, device=DEV, dtype=q.dtype), table)  # 4 speculative tokens


@pytest.mark.parametrize("d", [64, 128, 256])
def test_bad_pages_and_lengths_are_clamped(d):
    """A page id outside the cache hides its keys; a length past the table is clamped; a negative
    length is empty. Nothing is read out of bounds (the cache is a slice of a larger buffer whose
    neighbours hold NaN: reading them would poison the output). Head dim 64 zero-fills absent rows,
    128 and 256 copy them from a row of zeros."""
    g = gen(16)
    pages, page_size, hkv = 6, 16, 2
    store = torch.full((pages + 4, page_size, hkv, d), float("nan"), device=DEV, dtype=torch.bfloat16)
    kc, vc = store[1:1 + pages // 2], store[1 + pages // 2:1 + pages]
    kc.copy_(torch.randn(kc.shape, generator=g, device=DEV))
    vc.copy_(torch.randn(vc.shape, generator=g, device=DEV))
    table = torch.tensor([[0, 1, 99], [2, -5, 1]], dtype=torch.int32, device=DEV)
    seq_lens = torch.tensor([48, 1000], dtype=torch.int32, device=DEV)
    q = torch.randn(2, 1, 4, d, generator=g, device=DEV, dtype=torch.bfloat16)
    out = bc.paged_attention(q, kc, vc, table, seq_lens)
    assert torch.isfinite(out).all()
    # the reference with the hidden pages' keys removed: request 0 sees pages 0, 1; request 1 pages 2 and 1
    t0 = torch.tensor([[0, 1, 0], [2, 1, 0]], dtype=torch.int32, device=DEV)
    want0, _ = reference(q[:1], kc, vc, t0[:1], torch.tensor([32], dtype=torch.int32, device=DEV))
    check(out[:1], want0, torch.bfloat16)
    kk = torch.stack([kc[2], kc[1]]).reshape(1, 2 * page_size, hkv, d)
    vv = torch.stack([vc[2], vc[1]]).reshape(1, 2 * page_size, hkv, d)
    # request 1: keys 0..15 (page 2) and 32..47 (page 1) at their positions; key positions matter for causal only
    full = bc.attention(q[1:], kk, vv)
    check(out[1:], full.double(), torch.bfloat16)
    neg = bc.paged_attention(q, kc, vc, table, torch.tensor([-3, 0], dtype=torch.int32, device=DEV))
    assert torch.equal(neg, torch.zeros_like(neg))


def test_errors_name_the_operand():
    q, kc, vc, table, seq_lens = make_case(17, 2, 1, 8, 2, 64, 16, [10, 20])
    with pytest.raises(errors.InvalidDType, match="block_table is int64"):
        bc.paged_attention(q, kc, vc, table.long(), seq_lens)
    with pytest.raises(errors.InvalidArgument, match="seq_lens has shape"):
        bc.paged_attention(q, kc, vc, table, seq_lens[:1])
    with pytest.raises(errors.InvalidArgument, match="not a multiple"):
        bc.paged_attention(q[:, :, :7], kc, vc, table, seq_lens)
    with pytest.raises(errors.InvalidDType, match="k_cache is float16"):
        bc.paged_attention(q, kc.half(), vc, table, seq_lens)
    c512 = torch.zeros(4, 16, 2, 512, device=DEV, dtype=torch.bfloat16)
    with pytest.raises(errors.Unsupported, match="head_dim 512"):
        bc.paged_attention(torch.zeros(2, 1, 8, 512, device=DEV, dtype=torch.bfloat16), c512, c512, table, seq_lens)
    c80 = torch.zeros(4, 16, 2, 80, device=DEV, dtype=torch.bfloat16)
    with pytest.raises(errors.Unsupported, match="the mma kernel takes"):
        bc.paged_attention(torch.zeros(2, 1, 8, 80, device=DEV, dtype=torch.bfloat16), c80, c80, table, seq_lens,
                           kernel="mma")
    with pytest.raises(errors.InvalidArgument, match="16-byte aligned"):
        bc.paged_attention(torch.zeros(2, 1, 8, 65, device=DEV, dtype=torch.bfloat16)[..., 1:], kc, vc, table,
                           seq_lens)


def test_cuda_graph_replays_longer_contexts():
    q, kc, vc, table, seq_lens = make_case(18, 4, 1, 16, 4, 128, 16, [700, 64, 1, 1000])
    out = torch.empty_like(q)
    plan = bc.PagedAttentionPlan.select(bc.PagedAttentionDescriptor(spec(q), spec(kc), spec(vc), spec(out),
                                                                     table.shape[1]))
    ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
    args = dict(q=q, k_cache=kc, v_cache=vc, block_table=table, seq_lens=seq_lens, out=out, workspace=ws)
    plan.run(**args)  # warm up (opt-in of shared memory) outside the capture
    s = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        with torch.cuda.graph(graph, stream=s):
            plan.run(**args, stream=s.cuda_stream)
    for lens in ([701, 65, 2, 1001], [10, 900, 33, 1008]):
        seq_lens.copy_(torch.tensor(lens, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        check(out, reference(q, kc, vc, table, seq_lens)[0], torch.bfloat16)


def test_torch_op_and_compile():
    bt = pytest.importorskip("baracuda.torch")
    q, kc, vc, table, seq_lens = make_case(19, 2, 2, 8, 2, 64, 16, [100, 20])
    want = bc.paged_attention(q, kc, vc, table, seq_lens)
    assert torch.equal(bt.paged_attention(q, kc, vc, table, seq_lens), want)
    f = torch.compile(lambda *a: bt.paged_attention(*a) * 2, fullgraph=True)
    assert torch.equal(f(q, kc, vc, table, seq_lens), want * 2)


@pytest.mark.parametrize("tuning", ["splits=1", "splits=3", "splits=7"])
@pytest.mark.parametrize("d,sq,hq,hkv", [(64, 1, 8, 2), (128, 4, 8, 2), (256, 2, 8, 8)])
def test_block_shapes_through_the_plan(tuning, d, sq, hq, hkv):
    """The split count from PlanPreference.tuning, head dims 64 / 128 / 256, through plan.run."""
    q, kc, vc, table, seq_lens = make_case(20, 3, sq, hq, hkv, d, 16, [333, 17, 90])
    out = torch.empty_like(q)
    lse = torch.empty(3, hq, sq, device=DEV)
    plan = bc.PagedAttentionPlan.select(bc.PagedAttentionDescriptor(spec(q), spec(kc), spec(vc), spec(out),
                                                                     table.shape[1], lse=True),
                                        bc.PlanPreference(tuning=tuning))
    assert f".s{plan.num_splits}." in plan.sku.name + "." and 1 <= plan.num_splits <= int(tuning[7:])
    ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
    plan.run(q=q, k_cache=kc, v_cache=vc, block_table=table, seq_lens=seq_lens, out=out, lse=lse, workspace=ws)
    want, want_lse = reference(q, kc, vc, table, seq_lens)
    check(out, want, torch.bfloat16)
    check(lse, want_lse, torch.float16, "lse")


WIDE = [  # (batch, sq, hq, hkv, d, page_size, lens): 128 or more query rows per kv head
    (2, 40, 8, 2, 128, 16, [300, 45]),
    (3, 33, 16, 4, 64, 13, [33, 200, 97]),    # 132 rows: the last block's warps 1-3 have none; odd pages
    (1, 130, 4, 4, 256, 16, [400]),           # MHA, 130 rows
    (2, 70, 4, 2, 96, 16, [70, 150]),
]


@pytest.mark.parametrize("case", WIDE, ids=[f"b{c[0]}q{c[1]}h{c[2]}/{c[3]}d{c[4]}p{c[5]}" for c in WIDE])
@pytest.mark.parametrize("cache", ["16bit", "e4m3"])
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
def test_wide_blocks_match_f64_reference(case, cache, dt):
    """Many query rows per kv head (a chunked prefill): 64-row blocks, each warp 16 rows over the whole
    tile, over 16-bit and fp8 caches, with and without splits; 16-row blocks (tuning) agree."""
    batch, sq, hq, hkv, d, page_size, lens = case
    q, kc, vc, table, seq_lens = make_case(50 + d, batch, sq, hq, hkv, d, page_size, lens, dt)
    if cache == "e4m3":
        kc, vc = kc.to(torch.float8_e4m3fn), vc.to(torch.float8_e4m3fn)
    want, want_lse = reference(q, kc.float(), vc.float(), table, seq_lens)
    fin = torch.isfinite(want_lse)
    for tuning, splits in (("", 0), ("", 3), ("rows=16", 0)):
        desc = bc.PagedAttentionDescriptor(spec(q), spec(kc), spec(vc), spec(q), table.shape[1], lse=True,
                                           num_splits=splits, kernel="mma")
        plan = bc.PagedAttentionPlan.select(desc, bc.PlanPreference(tuning=tuning))
        assert ("decode" if tuning else "prefill") in plan.sku.name, plan.sku.name
        out = torch.full_like(q, float("nan"))
        lse = torch.full((batch, hq, sq), float("nan"), device=DEV)
        ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
        plan.run(q=q, k_cache=kc, v_cache=vc, block_table=table, seq_lens=seq_lens, out=out, lse=lse, workspace=ws)
        check(out, want, dt)
        assert torch.equal(torch.isfinite(lse), fin)
        check(lse[fin], want_lse[fin], torch.float32, "lse", magnitude=8)
    with pytest.raises(errors.InvalidArgument, match="tuning rows must be 16 or 64"):
        bc.PagedAttentionPlan.select(desc, bc.PlanPreference(tuning="rows=32"))


@pytest.mark.parametrize("opts", [dict(window=(20, -1)), dict(window=(5, 0), causal=False), dict(softcap=8.0),
                                  dict(alibi=True, sinks=True, softcap=20.0, window=(31, -1))],
                         ids=lambda o: ",".join(o))
def test_wide_blocks_score_rules(opts):
    """The score rules with 64-row blocks (40 query tokens x 4 q heads per kv head: auto takes them, as
    fewer than 64 tokens keep cuDNN out)."""
    q, kc, vc, table, _ = make_case(23, 2, 40, 8, 2, 128, 16, [300, 45])
    auto = bc.PagedAttentionPlan.select(bc.PagedAttentionDescriptor(spec(q), spec(kc), spec(vc), spec(q), table.shape[1]))
    assert "prefill" in auto.sku.name, auto.sku.name
    check_score_rules(opts, torch.bfloat16, 23, 128, sq=40)


ROWWISE = [  # (batch, sq, hq, hkv, d, page_size, lens)
    (3, 1, 8, 2, 128, 16, [37, 1, 200]),
    (2, 4, 8, 2, 80, 13, [50, 4]),               # a head dim the mma kernel lacks, odd page size
    (3, 1, 16, 1, 256, 16, [0, 3, 140]),          # MQA, an empty request
    (2, 2, 4, 4, 33, 1, [9, 70]),                 # odd head dim, page_size 1
]


@pytest.mark.parametrize("case", ROWWISE, ids=[f"b{c[0]}q{c[1]}h{c[2]}/{c[3]}d{c[4]}p{c[5]}" for c in ROWWISE])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_rowwise_kernel_matches_f64_reference(case, dt):
    batch, sq, hq, hkv, d, page_size, lens = case
    q, kc, vc, table, seq_lens = make_case(21, batch, sq, hq, hkv, d, page_size, lens, dt)
    out, lse = bc.paged_attention(q, kc, vc, table, seq_lens, kernel="rowwise", return_lse=True)
    want, want_lse = reference(q, kc, vc, table, seq_lens)
    check(out, want, dt)
    fin = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse), fin)
    check(lse[fin], want_lse[fin], torch.float16, "lse")


@pytest.mark.parametrize("opts", [dict(window=(5, 0), causal=False), dict(softcap=8.0), dict(alibi=True, sinks=True),
                                  dict(causal=False, window=(-1, 2))], ids=lambda o: ",".join(o))
def test_rowwise_score_rules_f32(opts):
    check_score_rules(opts, torch.float32, 22, 64)


def check_both_key_tiles(q, kc, vc, table, lens, splits, want, want_lse, dt):
    """The tensor-core kernel on 64- and 128-key tiles, forced by tuning (the SKU says which), through
    plan.run into NaN-poisoned out and lse, against the f64 reference."""
    for tile in (64, 128):
        plan = bc.PagedAttentionPlan.select(bc.PagedAttentionDescriptor(
            spec(q), spec(kc), spec(vc), spec(q), table.shape[1], lse=True, num_splits=splits, kernel="mma"),
            bc.PlanPreference(tuning=f"tile={tile}"))
        assert plan.sku.name.endswith(".t128") == (tile == 128), plan.sku.name
        out = torch.full_like(q, float("nan"))
        lse = torch.full((q.shape[0], q.shape[2], q.shape[1]), float("nan"), device=DEV)
        ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
        plan.run(q=q, k_cache=kc, v_cache=vc, block_table=table, seq_lens=lens, out=out, lse=lse, workspace=ws)
        check(out, want, dt)
        check(lse, want_lse, torch.float32, "lse", magnitude=8)


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_head_dim_64_both_key_tiles(dt):
    """16-bit caches at head dim 64 on 64- and 128-key tiles (each warp 16 or 32 keys of a tile): 1 and
    4 query tokens, with and without splits, a length that ends inside a tile, against the f64 reference."""
    for sq, splits in ((1, 0), (1, 3), (4, 0)):
        q, kc, vc, table, lens = make_case(90, 2, sq, 8, 2, 64, 16, [37, 300], dt)
        want, want_lse = reference(q, kc.float(), vc.float(), table, lens)
        check_both_key_tiles(q, kc, vc, table, lens, splits, want, want_lse, dt)


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("d", [64, 96, 128, 256])
def test_fp8_caches_every_head_dim(d, dt, fp8):
    """The tensor-core kernel reads fp8 K / V fragments with the head dim permuted (K) and the keys
    byte-transposed (V): every built head dim, both query types, 1 and 4 query tokens, with and without
    splits, against the f64 reference on the fp8 values."""
    for sq, splits in ((1, 0), (1, 3), (4, 0)):
        q, kc, vc, table, lens = make_case(40 + d, 2, sq, 8, 2, d, 16, [37, 300], dt)
        kc8, vc8 = kc.to(fp8), vc.to(fp8)
        out, lse = bc.paged_attention(q, kc8, vc8, table, lens, kernel="mma", num_splits=splits, return_lse=True)
        want, want_lse = reference(q, kc8.float(), vc8.float(), table, lens)
        check(out, want, dt)
        check(lse, want_lse, torch.float32, "lse", magnitude=8)
        # both key tiles of fp8 caches, whichever the default took: 128 (each warp 32 keys of a tile), 64
        check_both_key_tiles(q, kc8, vc8, table, lens, splits, want, want_lse, dt)


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("splits", [0, 3])
@pytest.mark.parametrize("sq", [1, 40], ids=["decode", "prefill"])
def test_fp8_caches_bf16_queries_of_any_magnitude(fp8, splits, sq):
    """bf16 queries over an fp8 cache take Q K^T in f16, the block's rows scaled by one power of two:
    the heads of each kv group from 1e-5 to 1e5 (past f16's range) in one block, against the f64
    reference; one token (16-row blocks) and 40 (160 rows per kv head: the 64-row prefill blocks)."""
    q, kc, vc, table, lens = make_case(77, 2, sq, 8, 2, 128, 16, [45, 300], torch.bfloat16)
    mags = torch.tensor([1e-5, 1.0, 1e3, 1e5] * 2, device=DEV)
    q = (q.float() * mags[None, None, :, None]).to(torch.bfloat16)
    kc8, vc8 = kc.to(fp8), vc.to(fp8)
    out, lse = bc.paged_attention(q, kc8, vc8, table, lens, kernel="mma", num_splits=splits, return_lse=True)
    want, want_lse = reference(q, kc8.float(), vc8.float(), table, lens)
    check(out, want, torch.bfloat16)
    check(lse, want_lse, torch.float32, "lse", magnitude=float(want_lse.abs().max()))


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("per_head", [False, True])
def test_fp8_caches_with_scales(fp8, per_head):
    """bf16 keys / values quantized into fp8 caches by kv_cache_append (k_scale / v_scale per tensor or
    per kv head), then decode attention over them: the f64 reference on the dequantized caches."""
    q, kc, vc, table, lens = make_case(31, 3, 2, 8, 2, 128, 16, [37, 5, 120])
    hkv = kc.shape[2]
    ks = (torch.rand(hkv if per_head else 1, device=DEV) + 0.5) / 16
    vs = (torch.rand(hkv if per_head else 1, device=DEV) + 0.5) / 16
    kc8, vc8 = torch.zeros_like(kc, dtype=fp8), torch.zeros_like(vc, dtype=fp8)
    flat_k, flat_v = kc.view(-1, hkv, 128), vc.view(-1, hkv, 128)
    slots = torch.arange(flat_k.shape[0], device=DEV)
    bc.kv_cache_append(flat_k, flat_v, kc8, vc8, slots, k_scale=ks, v_scale=vs)
    kq = kc8.float() * ks.view(-1, 1)  # broadcast over (kv head, dim) for per-head scales
    vq = vc8.float() * vs.view(-1, 1)
    want_k = (kc.float() / ks.view(-1, 1)).to(fp8).float() * ks.view(-1, 1)
    assert torch.equal(kq, want_k), "fp8(k / scale), round to nearest even, as torch's cast"
    out, lse = bc.paged_attention(q, kc8, vc8, table, lens, k_scale=ks, v_scale=vs, return_lse=True)
    ro, rl = reference(q, kq, vq, table, lens)
    check(out, ro, torch.bfloat16)
    check(lse, rl, torch.float32, "lse")
    big = torch.full((1, hkv, 128), 1e6, device=DEV, dtype=torch.bfloat16)
    bc.kv_cache_append(big, big, kc8, vc8, slots[:1], k_scale=ks, v_scale=vs)
    assert torch.isfinite(kc8[0, 0].float()).all(), "saturated to the finite range, not inf / NaN"
    assert "mma_sync" in bc.PagedAttentionPlan.select(bc.PagedAttentionDescriptor(
        bc.TensorSpec(tuple(q.shape), bc.bfloat16), bc.TensorSpec(tuple(kc8.shape), bc.dtype(fp8)),
        bc.TensorSpec(tuple(vc8.shape), bc.dtype(fp8)), bc.TensorSpec(tuple(q.shape), bc.bfloat16),
        table.shape[1], kv_scales=True)).sku.name, "fp8 runs on the tensor cores by default"
    # the rowwise kernel too; then the tensor cores with and without splits, softcap
    rw, rwl = bc.paged_attention(q, kc8, vc8, table, lens, k_scale=ks, v_scale=vs, return_lse=True, kernel="rowwise")
    check(rw, ro, torch.bfloat16)
    check(rwl, rl, torch.float32, "lse")
    for splits, cap in ((0, None), (3, None), (2, 30.0)):
        om, lm = bc.paged_attention(q, kc8, vc8, table, lens, k_scale=ks, v_scale=vs, return_lse=True, kernel="mma",
                                    num_splits=splits, softcap=cap)
        rom, rlm = reference(q, kq, vq, table, lens, softcap=cap) if cap else (ro, rl)
        check(om, rom, torch.bfloat16)
        check(lm, rlm, torch.float32, "lse")
    # no scales: 1. The values are the raw fp8 ones (~1/scale = 10-30x larger): so is the rounding of p v.
    unscaled = bc.paged_attention(q, kc8, vc8, table, lens, kernel="mma")
    check(unscaled, reference(q, kc8.float(), vc8.float(), table, lens)[0], torch.bfloat16,
          magnitude=vc8.float().abs().max().item())
    with pytest.raises(errors.InvalidArgument, match="k_scale / v_scale dequantize fp8 caches"):
        bc.paged_attention(q, kc, vc, table, lens, k_scale=ks, v_scale=vs)
    with pytest.raises(errors.InvalidDType, match="k_scale is float64"):
        bc.paged_attention(q, kc8, vc8, table, lens, k_scale=ks.double(), v_scale=vs)
    with pytest.raises(errors.InvalidArgument, match="k_scale has shape"):
        bc.paged_attention(q, kc8, vc8, table, lens, k_scale=torch.ones(hkv + 1, device=DEV),
                           v_scale=torch.ones(hkv + 1, device=DEV))
    with pytest.raises(errors.InvalidArgument, match="k_scale and v_scale go together"):
        bc.paged_attention(q, kc8, vc8, table, lens, k_scale=ks)
    with pytest.raises(errors.InvalidDType, match="k_scale is float16"):
        bc.kv_cache_append(flat_k, flat_v, kc8, vc8, slots, k_scale=ks.half(), v_scale=vs)
    with pytest.raises(errors.InvalidArgument, match="v_scale without k_scale"):
        bc.kv_cache_append(flat_k, flat_v, kc8, vc8, slots, v_scale=vs)


def _merge_ref(oa, la, ob, lb):
    m = torch.maximum(la, lb).double()
    empty = m == -math.inf
    mz = torch.where(empty, torch.zeros_like(m), m)
    wa, wb = torch.exp(la.double() - mz), torch.exp(lb.double() - mz)
    den = wa + wb
    o = (wa[..., None] * oa.double() + wb[..., None] * ob.double()) / torch.where(empty, 1.0, den)[..., None]
    o = torch.where(empty[..., None], torch.zeros_like(o), o)
    return o, torch.where(empty, torch.full_like(m, -math.inf), mz + torch.log(den))


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16, torch.float32])
def test_merge_attention_states_matches_reference(dt):
    """Random states with -inf rows (one side and both sides empty), against the f64 formula."""
    g = torch.Generator(device=DEV).manual_seed(7)
    oa, ob = (torch.randn(5, 3, 8, 96, generator=g, device=DEV).to(dt) for _ in range(2))
    la, lb = (torch.randn(5, 3, 8, generator=g, device=DEV) * 4 for _ in range(2))
    la[0, 0, 0] = -math.inf                       # only b has keys
    la[1, 1, 1] = lb[1, 1, 1] = -math.inf         # neither: out 0, lse -inf
    ob[1, 1, 1] = float("nan")                    # an empty side's out is never read
    oa[1, 1, 1] = float("nan")
    o, lse = bc.merge_attention_states(oa, la, ob, lb)
    ro, rl = _merge_ref(oa.nan_to_num(), la, ob.nan_to_num(), lb)
    check(o, ro, dt)
    assert torch.equal(torch.isfinite(lse), torch.isfinite(rl))
    fin = torch.isfinite(rl)
    check(lse[fin], rl[fin], torch.float32, "lse")
    assert (o[1, 1, 1] == 0).all() and lse[1, 1, 1] == -math.inf


def test_merge_equals_attention_over_all_keys():
    """Cascade: paged attention over a shared prefix and over each request's own pages, merged through the
    lse views ([B, Hq, Sq] -> transpose), equals attention over the concatenated keys; in place too."""
    q, kc, vc, table, lens = make_case(11, 4, 2, 16, 4, 128, 16, [64, 80, 33, 100])
    # split each request's keys at 32: the first 32 (a "prefix") and the rest
    cut = torch.full_like(lens, 32)
    o1, l1 = bc.paged_attention(q, kc, vc, table, cut, causal=False, return_lse=True)
    # the rest: tables shifted by the prefix's two pages, lengths minus 32
    t2 = table[:, 2:].contiguous()
    o2, l2 = bc.paged_attention(q, kc, vc, t2, lens - 32, causal=False, return_lse=True)
    o, l = bc.merge_attention_states(o1, l1.transpose(1, 2), o2, l2.transpose(1, 2))
    rnc, rlnc = reference(q, kc.float(), vc.float(), table, lens, causal=False)
    check(o, rnc, torch.bfloat16)
    check(l.transpose(1, 2), rlnc, torch.float32, "lse")
    # in place into o1 / l1's view
    bc.merge_attention_states(o1, l1.transpose(1, 2), o2, l2.transpose(1, 2), out=o1, lse=l1.transpose(1, 2))
    check(o1, rnc, torch.bfloat16)


def test_merge_attention_states_empty_and_cpu_inputs():
    """Empty states give empty outputs and launch nothing; a CPU operand is named in the error."""
    oa = torch.randn(0, 3, 8, 64, device=DEV, dtype=torch.bfloat16)
    la = torch.randn(0, 3, 8, device=DEV)
    o, lse = bc.merge_attention_states(oa, la, oa.clone(), la.clone())
    assert o.shape == oa.shape and lse.shape == la.shape
    ob = torch.randn(2, 3, 8, 64, dtype=torch.bfloat16)
    lb = torch.randn(2, 3, 8)
    with pytest.raises(errors.BaracudaError, match="cpu|CPU|device"):
        bc.merge_attention_states(ob.to(DEV), lb.to(DEV), ob, lb.to(DEV))
