"""GPU correctness of MoE routing: the gate against torch references (Mixtral's softmax top-k,
renormalised or not, DeepSeek-V2's grouped softmax, DeepSeek-V3's grouped sigmoid with a
correction bias) and its gradient against float64 autograd; the permutation's layout (offsets,
stable expert order, pos, dropped ids); the combine and its backward against float64; a Mixtral
layer through gate + permute + grouped_linear + unpermute against a torch loop; autograd and
torch.compile through the registered ops; errors."""
import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")

errors = bc.errors
DEV = "cuda"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]


def gen(seed):
    return torch.Generator(device=DEV).manual_seed(seed)


def top(v, k):
    """The k largest along the last dim, ties to the lower index (a stable descending sort)."""
    return torch.sort(v, dim=-1, descending=True, stable=True).indices[..., :k]


def ref_gate(logits, k, scoring="softmax", renormalize=True, n_group=1, topk_group=1, group_score="max", bias=None,
             scale=1.0):
    """The routing in float64 torch: (weights, ids); ids ordered by selection score."""
    x = logits.double()
    s = x.softmax(-1) if scoring == "softmax" else x.sigmoid()
    sel = s + (bias.double() if bias is not None else 0)
    if n_group > 1:
        t, e = sel.shape
        g = sel.view(t, n_group, e // n_group)
        gs = g.max(-1).values if group_score == "max" else g.topk(2, dim=-1).values.sum(-1)
        keep = torch.zeros_like(gs, dtype=torch.bool).scatter_(1, top(gs, topk_group), True)
        sel = sel.masked_fill(~keep.repeat_interleave(e // n_group, dim=1), float("-inf"))
    ids = top(sel, k)
    w = s.gather(1, ids)
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    return w * scale, ids


GATES = [dict(k=2, E=8), dict(k=2, E=8, renormalize=False), dict(k=8, E=64, scale=2.5), dict(k=6, E=160, n_group=8,
         topk_group=3, renormalize=False, scale=16.0), dict(k=8, E=256, scoring="sigmoid", n_group=8, topk_group=4,
         group_score="top2_sum", bias=True, scale=2.5), dict(k=4, E=60, scoring="sigmoid", renormalize=False),
         dict(k=1, E=3), dict(k=32, E=1024)]


@pytest.mark.parametrize("cfg", GATES, ids=[str(i) for i in range(len(GATES))])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_gate_matches_reference(cfg, dt):
    cfg = dict(cfg)
    g = gen(1)
    T, E, k = 333, cfg.pop("E"), cfg.pop("k")
    logits = (torch.randn(T, E, generator=g, device=DEV) * 2).to(dt)
    bias = torch.randn(E, generator=g, device=DEV) * 0.1 if cfg.pop("bias", False) else None
    scale = cfg.pop("scale", 1.0)
    w, ids = bc.moe_gate(logits, k, correction_bias=bias, routed_scaling_factor=scale, **cfg)
    assert w.dtype == torch.float32 and ids.dtype == torch.int32 and w.shape == (T, k)
    rw, rids = ref_gate(logits, k, bias=bias, scale=scale, **cfg)
    assert torch.equal(ids.long(), rids), "the same experts in the same order"
    torch.testing.assert_close(w.double(), rw, rtol=1e-5, atol=1e-7)


def test_gate_scale_and_ties():
    logits = torch.zeros(5, 16, device=DEV)
    w, ids = bc.moe_gate(logits, 4, routed_scaling_factor=3.0)
    assert torch.equal(ids, torch.arange(4, device=DEV, dtype=torch.int32).expand(5, 4))  # ties: lower ids first
    torch.testing.assert_close(w, torch.full((5, 4), 0.75, device=DEV))
    g = gen(2)
    x = torch.randn(7, 32, generator=g, device=DEV)
    w1, _ = bc.moe_gate(x, 3, renormalize=False, routed_scaling_factor=2.0)
    w2, _ = bc.moe_gate(x, 3, renormalize=False)
    torch.testing.assert_close(w1, 2 * w2)


@pytest.mark.parametrize("cfg", GATES[:6], ids=[str(i) for i in range(6)])
def test_gate_backward_matches_autograd(cfg):
    cfg = dict(cfg)
    g = gen(3)
    T, E, k = 97, cfg.pop("E"), cfg.pop("k")
    scale = cfg.pop("scale", 1.0)
    logits = torch.randn(T, E, generator=g, device=DEV)
    bias = torch.randn(E, generator=g, device=DEV) * 0.1 if cfg.pop("bias", False) else None
    w, ids = bc.moe_gate(logits, k, correction_bias=bias, routed_scaling_factor=scale, **cfg)
    gw = torch.randn(T, k, generator=g, device=DEV)
    got = bc.moe_gate_backward(gw, logits, ids, routed_scaling_factor=scale, **cfg)
    x = logits.double().requires_grad_()
    s = x.softmax(-1) if cfg.get("scoring", "softmax") == "softmax" else x.sigmoid()
    rw = s.gather(1, ids.long())
    if cfg.get("renormalize", True):
        rw = rw / rw.sum(-1, keepdim=True)
    (rw * scale * gw.double()).sum().backward()
    torch.testing.assert_close(got.double(), x.grad, rtol=1e-5, atol=1e-6)


def check_permutation(x, ids, E, xs, offsets, pos):
    T, k = ids.shape
    flat = ids.reshape(-1).long()
    valid = (flat >= 0) & (flat < E)
    counts = torch.bincount(flat[valid], minlength=E)
    want = torch.zeros(E + 1, dtype=torch.long, device=DEV)
    want[1:] = counts.cumsum(0)
    assert torch.equal(offsets.long(), want)
    p = pos.reshape(-1).long()
    assert torch.equal(p < 0, ~valid)
    assert torch.equal(torch.sort(p[valid]).values, torch.arange(int(valid.sum()), device=DEV))
    src_tok = torch.arange(T, device=DEV).repeat_interleave(k)
    assert torch.equal(xs[p[valid]], x[src_tok[valid]])
    # expert order, pairs in (token, pick) order inside an expert
    owner = torch.empty(int(valid.sum()), dtype=torch.long, device=DEV)
    owner[p[valid]] = torch.arange(T * k, device=DEV)[valid]
    key = flat[owner] * (T * k) + owner
    assert torch.equal(key, torch.sort(key).values)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("T,H,E,k", [(1000, 256, 8, 2), (37, 7, 5, 3), (4096, 1024, 64, 8), (1, 64, 1, 1)])
def test_permute_layout(dt, T, H, E, k):
    g = gen(4)
    x = torch.randn(T, H, generator=g, device=DEV).to(dt)
    ids = torch.rand(T, E, generator=g, device=DEV).topk(k, dim=-1).indices.int()
    xs, offsets, pos = bc.moe_permute(x, ids, E)
    assert xs.shape == (T * k, H) and offsets.dtype == torch.int32 and pos.dtype == torch.int32
    check_permutation(x, ids, E, xs, offsets, pos)


def test_permute_drops_foreign_ids_and_strided_x():
    g = gen(5)
    x = torch.randn(300, 2, 96, generator=g, device=DEV)[:, 1]  # row stride 192
    ids = torch.randint(-1, 10, (300, 4), generator=g, device=DEV)  # -1 and 8, 9: other ranks' experts
    xs, offsets, pos = bc.moe_permute(x, ids, 8)
    check_permutation(x, ids, 8, xs, offsets, pos)
    y = torch.randn_like(xs)
    w = torch.rand(300, 4, generator=g, device=DEV)
    out = bc.moe_unpermute(y, pos, w)
    keep = (pos >= 0).double()
    ref = (y.double()[pos.clamp_min(0).long()] * (w.double() * keep)[..., None]).sum(1)
    torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("weighted", [True, False])
def test_unpermute_and_backward(dt, weighted):
    g = gen(6)
    T, H, E, k = 513, 160, 16, 4
    ids = torch.rand(T, E, generator=g, device=DEV).topk(k, dim=-1).indices
    _, _, pos = bc.moe_permute(torch.zeros(T, H, device=DEV, dtype=dt), ids, E)
    y = torch.randn(T * k, H, generator=g, device=DEV).to(dt)
    w = torch.rand(T, k, generator=g, device=DEV) if weighted else None
    out = bc.moe_unpermute(y, pos, w)
    yd = y.detach().double().clone().requires_grad_()  # a copy: for f64 `.double()` would alias y
    wd = w.detach().double().clone().requires_grad_() if weighted else None
    gathered = yd[pos.long()]
    ref = (gathered * wd[..., None]).sum(1) if weighted else gathered.sum(1)
    tol = dict(rtol=1e-2, atol=2e-2) if dt == torch.bfloat16 else dict(rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out.double(), ref, **tol)
    go = torch.randn(T, H, generator=g, device=DEV).to(dt)
    ref.backward(go.double())
    gy, gw = bc.moe_unpermute_backward(go, pos, w, y if weighted else None)
    torch.testing.assert_close(gy.double(), yd.grad, **tol)
    if weighted:
        torch.testing.assert_close(gw.double(), wd.grad, rtol=1e-3 if dt == torch.bfloat16 else 1e-5, atol=1e-3)
    else:
        assert gw is None


def test_unpermute_backward_zeroes_unnamed_rows():
    ids = torch.tensor([[0, -1], [1, 2]], device=DEV)
    x = torch.randn(2, 8, device=DEV)
    _, offsets, pos = bc.moe_permute(x, ids, 3)
    assert offsets.tolist() == [0, 1, 2, 3]
    gy, _ = bc.moe_unpermute_backward(torch.ones(2, 8, device=DEV), pos)
    assert (gy[3] == 0).all() and (gy[:3] == 1).all()


def torch_mixtral(x, logits, w1, w3, w2, k):
    """transformers' MixtralSparseMoeBlock, as a loop over experts, on given router logits (ties of the
    top-k to the lower expert id, as ours: 16-bit logits tie)."""
    p = logits.softmax(-1)
    sel = top(p, k)
    rw = p.gather(1, sel)
    rw = (rw / rw.sum(-1, keepdim=True)).to(x.dtype)
    out = torch.zeros_like(x)
    for e in range(w1.shape[0]):
        tok, slot = torch.where(sel == e)
        if tok.numel() == 0:
            continue
        h = torch.nn.functional.silu(x[tok] @ w1[e].t()) * (x[tok] @ w3[e].t())
        out.index_add_(0, tok, (h @ w2[e].t()) * rw[tok, slot, None])
    return out


def bc_mixtral(x, logits, w1, w3, w2, k):
    E = w1.shape[0]
    w, ids = bc.moe_gate(logits, k)
    xs, offsets, pos = bc.moe_permute(x, ids, E)
    a = bc.grouped_linear(xs, w1, offsets=offsets, max_rows_per_group=x.shape[0])
    b = bc.grouped_linear(xs, w3, offsets=offsets, max_rows_per_group=x.shape[0])
    h = bc.grouped_linear(bc.swiglu(a, b), w2, offsets=offsets, max_rows_per_group=x.shape[0])
    return bc.moe_unpermute(h, pos, w)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_mixtral_layer_against_torch_loop(dt):
    g = gen(7)
    T, H, I, E, k = 96, 256, 512, 8, 2
    x = torch.randn(T, H, generator=g, device=DEV).to(dt)
    gate_w = (torch.randn(E, H, generator=g, device=DEV) / H ** 0.5).to(dt)
    w1, w3 = ((torch.randn(E, I, H, generator=g, device=DEV) / H ** 0.5).to(dt) for _ in range(2))
    w2 = (torch.randn(E, H, I, generator=g, device=DEV) / I ** 0.5).to(dt)
    logits = bc.linear(x, gate_w)  # one router output for both sides: the comparison is of the layer
    got = bc_mixtral(x, logits, w1, w3, w2, k)
    ref = torch_mixtral(x.double(), logits.double(), w1.double(), w3.double(), w2.double(), k)
    tol = dict(rtol=2e-2, atol=2e-2) if dt == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got.double(), ref, **tol)


def test_autograd_through_routing():
    import baracuda.torch as bt
    g = gen(8)
    T, H, E, k = 40, 32, 6, 2
    x = torch.randn(T, H, generator=g, device=DEV, requires_grad=True)
    logits = torch.randn(T, E, generator=g, device=DEV, requires_grad=True)
    scale = torch.randn(E, H, generator=g, device=DEV)

    def ours(x, logits):
        w, ids = bt.moe_gate(logits, k)
        xs, offsets, pos = bt.moe_permute(x, ids, E)
        expert = torch.repeat_interleave(torch.arange(E, device=DEV), torch.diff(offsets.long()),
                                         output_size=T * k)
        return bt.moe_unpermute(xs * scale[expert], pos, w)

    out = ours(x, logits)
    go = torch.randn_like(out)
    gx, gl = torch.autograd.grad(out, (x, logits), go)
    xd, ld = x.detach().double().requires_grad_(), logits.detach().double().requires_grad_()
    w, ids = ref_gate(ld, k)
    w = ld.softmax(-1).gather(1, ids)
    w = w / w.sum(-1, keepdim=True)
    ref = (xd[:, None, :] * scale.double()[ids] * w[..., None]).sum(1)
    rx, rl = torch.autograd.grad(ref, (xd, ld), go.double())
    torch.testing.assert_close(gx.double(), rx, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gl.double(), rl, rtol=1e-5, atol=1e-5)
    # bc.* on tensors requiring grad routes through the same ops
    w2, ids2 = bc.moe_gate(logits, k)
    assert w2.grad_fn is not None and torch.equal(ids2, bt.moe_gate(logits.detach(), k)[1])


def test_torch_compile_fullgraph():
    import baracuda.torch as bt
    x = torch.randn(16, 32, device=DEV, requires_grad=True)
    logits = torch.randn(16, 4, device=DEV)

    def f(x, logits):
        w, ids = bt.moe_gate(logits, 2)
        xs, _, pos = bt.moe_permute(x, ids, 4)
        return bt.moe_unpermute(xs * 2, pos, w).sum()

    torch.compile(f, fullgraph=True)(x, logits).backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 2.0))  # renormalised weights sum to 1


def test_errors():
    logits = torch.randn(4, 8, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="top_k=9"):
        bc.moe_gate(logits, 9)
    with pytest.raises(errors.InvalidArgument, match="n_group=3"):
        bc.moe_gate(logits, 2, n_group=3)
    with pytest.raises(errors.InvalidArgument, match="scoring='tanh'"):
        bc.moe_gate(logits, 2, scoring="tanh")
    with pytest.raises(errors.InvalidDType, match="ids is float32"):
        bc.moe_permute(torch.randn(4, 16, device=DEV), torch.zeros(4, 2, device=DEV), 8)
    with pytest.raises(errors.InvalidArgument, match="x has 3 rows but ids has 4 tokens"):
        bc.moe_permute(torch.randn(3, 16, device=DEV), torch.zeros(4, 2, device=DEV, dtype=torch.int32), 8)
    with pytest.raises(errors.InvalidDType, match="pos is int64"):
        bc.moe_unpermute(torch.randn(8, 16, device=DEV), torch.zeros(4, 2, device=DEV, dtype=torch.int64))
    pos = torch.zeros(4, 2, device=DEV, dtype=torch.int32)
    with pytest.raises(errors.InvalidDType, match="weights is float16"):
        bc.moe_unpermute(torch.randn(8, 16, device=DEV), pos, torch.ones(4, 2, device=DEV, dtype=torch.float16))
    with pytest.raises(errors.InvalidArgument, match="weights has shape"):
        bc.moe_unpermute(torch.randn(8, 16, device=DEV), pos, torch.ones(4, 3, device=DEV))
    with pytest.raises(errors.InvalidArgument, match="logits: expected a CUDA tensor, got a CPU tensor"):
        bc.moe_gate(torch.randn(4, 8), 2)
    with pytest.raises(errors.InvalidArgument, match="correction_bias has shape"):
        bc.moe_gate(logits, 2, correction_bias=torch.zeros(9, device=DEV))
    with pytest.raises(errors.Unsupported, match="x must be contiguous along its last dim"):
        bc.moe_permute(torch.randn(16, 4, device=DEV).t(), torch.zeros(4, 2, device=DEV, dtype=torch.int32), 8)
