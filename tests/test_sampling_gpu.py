"""GPU correctness of the sampler: greedy and top_k=1 are the first argmax; drawn tokens always lie in
the kept set of a float64 reference (top-k with ties, top-p over the top-k mass, min-p); the empirical
frequencies over many rows match the filtered softmax; the same seed / offset gives the same tokens;
per-row parameters; logprobs against log_softmax; NaN / -inf rows; CUDA-graph replay; errors."""
import math

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")

errors = bc.errors
DEV = "cuda"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]


def kept_mask(x, top_k, top_p, min_p):
    """float64 reference of the kept set of rows x (already divided by T)."""
    x = x.double()
    keep = torch.ones_like(x, dtype=torch.bool)
    if top_k and top_k < x.shape[-1]:
        kth = x.topk(top_k, dim=-1).values[:, -1:]
        keep &= x >= kth
    if top_p < 1:
        p = torch.softmax(x.masked_fill(~keep, -math.inf), -1)
        srt, _ = p.sort(-1, descending=True)
        above = srt.cumsum(-1) - srt  # mass strictly above each sorted token
        n = (above < top_p).sum(-1, keepdim=True)  # tokens kept in sort order
        thr = srt.gather(-1, n - 1)
        keep &= p >= thr * (1 - 1e-5)
    if min_p > 0:
        keep &= x >= x.max(-1, keepdim=True).values + math.log(min_p) - 1e-6
    return keep


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16])
def test_greedy_and_top1_are_argmax(dt):
    g = torch.Generator(device=DEV).manual_seed(0)
    x = torch.randn(37, 5003, device=DEV, generator=g).to(dt)
    x[3, 17] = x[3, 4000] = 100  # a tie: the first index wins
    want = x.float().argmax(-1)
    assert torch.equal(bc.sample(x, temperature=0.0), want)
    tied = torch.zeros(37, dtype=torch.bool, device=DEV)
    tied[3] = True  # top_k=1 and min_p=1 keep both tied maxima and draw between them
    for tok in (bc.sample(x, top_k=1, seed=5), bc.sample(x, min_p=1.0, seed=5)):
        assert torch.equal(tok[~tied], want[~tied])
        assert int(tok[3]) in (17, 4000)


@pytest.mark.parametrize("v", [7, 1000, 128256])
@pytest.mark.parametrize("params", [dict(top_k=50), dict(top_p=0.9), dict(top_k=50, top_p=0.9),
                                    dict(min_p=0.05), dict(top_k=20, top_p=0.5, min_p=0.1, temperature=0.7)])
def test_tokens_lie_in_the_kept_set(v, params):
    g = torch.Generator(device=DEV).manual_seed(v)
    x = torch.randn(64, v, device=DEV, generator=g) * 3
    x[:, : v // 3] = x[:, : 1]  # many ties
    t = params.get("temperature", 1.0)
    keep = kept_mask(x / t, params.get("top_k", 0), params.get("top_p", 1.0), params.get("min_p", 0.0))
    for seed in range(4):
        tok = bc.sample(x, seed=seed, **params)
        assert tok.dtype == torch.int64 and tok.shape == (64,)
        assert bool(keep.gather(1, tok[:, None]).all()), f"seed {seed}: a token outside the kept set"


def test_frequencies_match_the_filtered_softmax():
    n, v = 200000, 12
    base = torch.tensor([2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -1.5, -2.0, -2.5, -3.0, -3.5], device=DEV)
    x = base.expand(n, v).contiguous()
    for params in (dict(), dict(top_k=5), dict(top_p=0.8), dict(temperature=2.0, min_p=0.2)):
        t = params.get("temperature", 1.0)
        keep = kept_mask(x[:1] / t, params.get("top_k", 0), params.get("top_p", 1.0), params.get("min_p", 0.0))[0]
        p = torch.softmax((base.double() / t).masked_fill(~keep, -math.inf), -1)
        tok = bc.sample(x, seed=11, offset=3, **params)
        freq = torch.bincount(tok, minlength=v).double() / n
        assert float((freq - p).abs().max()) < 5 * math.sqrt(0.25 / n), (params, freq, p)


def test_same_seed_same_tokens_and_offsets_differ():
    g = torch.Generator(device=DEV).manual_seed(3)
    x = torch.randn(64, 32000, device=DEV, generator=g, dtype=torch.bfloat16)
    a = bc.sample(x, top_p=0.95, seed=7, offset=1)
    assert torch.equal(a, bc.sample(x, top_p=0.95, seed=7, offset=1))
    assert not torch.equal(a, bc.sample(x, top_p=0.95, seed=7, offset=2))
    seeds = torch.full((64,), 7, dtype=torch.int64, device=DEV)
    assert torch.equal(a, bc.sample(x, top_p=0.95, seeds=seeds, offset=1))


def test_per_row_parameters_and_logprobs():
    g = torch.Generator(device=DEV).manual_seed(4)
    b, v = 48, 3001
    x = torch.randn(b, v, device=DEV, generator=g) * 2
    temp = torch.rand(b, device=DEV, generator=g) + 0.3
    temp[::5] = 0  # greedy rows
    top_k = torch.randint(0, 60, (b,), device=DEV, generator=g, dtype=torch.int32)
    top_p = torch.rand(b, device=DEV, generator=g) * 0.7 + 0.3
    min_p = torch.rand(b, device=DEV, generator=g) * 0.1
    tok, lp = bc.sample(x, temperature=temp, top_k=top_k, top_p=top_p, min_p=min_p, seed=2, return_logprobs=True)
    for r in range(b):
        t = float(temp[r])
        if t == 0:
            assert int(tok[r]) == int(x[r].argmax())
            want_lp = torch.log_softmax(x[r].double(), -1)[tok[r]]
        else:
            keep = kept_mask(x[r:r + 1] / t, int(top_k[r]), float(top_p[r]), float(min_p[r]))[0]
            assert bool(keep[tok[r]]), r
            want_lp = torch.log_softmax(x[r].double() / t, -1)[tok[r]]
        assert abs(float(lp[r]) - float(want_lp)) < 1e-4, r
    # the same with top_k as int64 and int32 tokens
    out = torch.empty(b, dtype=torch.int32, device=DEV)
    tok2 = bc.sample(x, temperature=temp, top_k=top_k.long(), top_p=top_p, min_p=min_p, seed=2, out=out)
    assert tok2 is out and torch.equal(out.long(), tok)


def test_nan_inf_rows_and_strided_logits():
    x = torch.randn(4, 100, device=DEV)
    x[0] = float("nan")
    x[1] = -float("inf")
    x[2, :50] = float("nan")
    tok, lp = bc.sample(x, seed=1, return_logprobs=True)
    assert int(tok[0]) == -1 and int(tok[1]) == -1 and math.isnan(float(lp[0]))
    assert 50 <= int(tok[2]) < 100
    big = torch.randn(8, 2 * 999, device=DEV)
    view = big[:, ::2] if False else big[:, :999]  # a row stride past the vocabulary
    assert torch.equal(bc.sample(view, temperature=0.0), view.argmax(-1))
    assert bc.sample(torch.empty(0, 10, device=DEV)).shape == (0,)


def test_cuda_graph_replay_follows_per_row_tensors():
    x = torch.randn(16, 5000, device=DEV)
    temp = torch.ones(16, device=DEV)
    seeds = torch.arange(16, device=DEV, dtype=torch.int64)
    bc.sample(x, temperature=temp, top_k=40, seeds=seeds)  # warm: plan selected outside the capture
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s), torch.cuda.graph(graph, stream=s):
        tok = bc.sample(x, temperature=temp, top_k=40, seeds=seeds)
    temp.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(tok, x.argmax(-1))
    temp.fill_(1.0)
    seeds += 100
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(tok, bc.sample(x, temperature=temp, top_k=40, seeds=seeds))


def test_errors_name_the_argument():
    x = torch.randn(4, 10, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="top_p"):
        bc.sample(x, top_p=1.5)
    with pytest.raises(errors.InvalidArgument, match="batch, vocab"):
        bc.sample(x[0])
    with pytest.raises(errors.InvalidDType, match="top_k"):
        bc.sample(x, top_k=torch.ones(4, device=DEV))
    with pytest.raises(errors.InvalidArgument, match="temperature"):
        bc.sample(x, temperature=torch.ones(3, device=DEV))
    with pytest.raises(errors.InvalidDType, match="tokens"):
        bc.sample(x, out=torch.empty(4, device=DEV))


def test_torch_op_and_compile():
    import baracuda.torch as bt

    x = torch.randn(8, 1000, device=DEV)
    want = bc.sample(x, top_k=10, seed=3)
    assert torch.equal(bt.sample(x, top_k=10, seed=3), want)
    f = torch.compile(lambda x: bt.sample(x, top_k=10, seed=3), fullgraph=True)
    assert torch.equal(f(x), want)


# ---- penalties ------------------------------------------------------------------------------------

def ref_penalties(logits, prompt, output, r, p, f):
    """vLLM's rules in float64, row by row."""
    x = logits.double().clone()
    B, V = x.shape
    for b in range(B):
        def valid(t):
            return t[(t >= 0) & (t < V)].long() if t is not None else torch.zeros(0, dtype=torch.long, device=DEV)
        counts = torch.bincount(valid(output[b] if output is not None else None), minlength=V).double()
        seen = counts > 0
        seen[valid(prompt[b] if prompt is not None else None)] = True
        rb, pb, fb = (float(v[b]) if isinstance(v, torch.Tensor) else v for v in (r, p, f))
        x[b] = torch.where(seen, torch.where(x[b] > 0, x[b] / rb, x[b] * rb), x[b])
        x[b] -= fb * counts + pb * (counts > 0).double()
    return x


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("idt", [torch.int64, torch.int32])
@pytest.mark.parametrize("per_row", [False, True])
def test_penalties_match_reference(dt, idt, per_row):
    g = torch.Generator(device=DEV).manual_seed(11)
    B, V = 7, 5003
    base = torch.randn(B, V + 8, generator=g, device=DEV).to(dt)
    logits = base[:, 3:V + 3]  # a row stride past V
    prompt = torch.randint(-2, V + 3, (B, 40), generator=g, device=DEV).to(idt)  # padding on both sides
    output = torch.randint(0, 50, (B, 25), generator=g, device=DEV).to(idt)  # repeats
    output[:, -3:] = -1
    if per_row:
        r = torch.rand(B, generator=g, device=DEV) + 0.8
        p = torch.rand(B, generator=g, device=DEV)
        f = torch.rand(B, generator=g, device=DEV)
    else:
        r, p, f = 1.3, 0.4, 0.25
    ref = ref_penalties(logits, prompt, output, r, p, f)
    before, base_before = logits.clone(), base.clone()
    got = bc.apply_penalties(logits, output, prompt_tokens=prompt, repetition_penalty=r, presence_penalty=p,
                             frequency_penalty=f)
    assert got is logits
    tol = dict(rtol=1e-6, atol=1e-6) if dt == torch.float32 else dict(rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(logits.double(), ref, **tol)
    untouched = ref == before.double()
    assert torch.equal(logits[untouched], before[untouched])
    assert torch.equal(base[:, :3], base_before[:, :3]) and torch.equal(base[:, V + 3:], base_before[:, V + 3:])
    again = before.clone()
    bc.apply_penalties(again, output, prompt_tokens=prompt, repetition_penalty=r, presence_penalty=p,
                       frequency_penalty=f)
    assert torch.equal(again, logits), "the same bits every run"


def test_penalties_one_list_and_then_sample():
    x = torch.zeros(2, 10, device=DEV)
    x[:, 4] = 5.0
    out = torch.tensor([[4, 4, 4], [1, 2, 3]], device=DEV)
    bc.apply_penalties(x, out, frequency_penalty=2.0)
    assert x[0, 4].item() == -1.0 and x[1, 4].item() == 5.0
    assert bc.sample(x, temperature=0.0).tolist() == [0, 4]
    y = torch.full((1, 6), -2.0, device=DEV)
    bc.apply_penalties(y, prompt_tokens=torch.tensor([[5]], device=DEV), repetition_penalty=2.0)
    assert y[0, 5].item() == -4.0 and (y[0, :5] == -2.0).all()
    bt = pytest.importorskip("baracuda.torch")
    z = torch.randn(3, 100, device=DEV)
    zz = z.clone()
    bt.apply_penalties(z, torch.randint(0, 100, (3, 9), device=DEV), repetition_penalty=1.5)
    assert not torch.equal(z, zz)


def test_penalties_errors():
    x = torch.zeros(2, 10, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="repetition_penalty=0"):
        bc.apply_penalties(x, torch.zeros(2, 3, dtype=torch.long, device=DEV), repetition_penalty=0.0)
    with pytest.raises(errors.InvalidDType, match="output_tokens is float32"):
        bc.apply_penalties(x, torch.zeros(2, 3, device=DEV))
    with pytest.raises(errors.InvalidArgument, match=r"output_tokens has shape \(3, 3\)"):
        bc.apply_penalties(x, torch.zeros(3, 3, dtype=torch.long, device=DEV))
    toks = torch.zeros(2, 3, dtype=torch.long, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="repetition_penalty has shape"):
        bc.apply_penalties(x, toks, repetition_penalty=torch.ones(3, device=DEV))
    with pytest.raises(errors.InvalidDType, match="presence_penalty is float64"):
        bc.apply_penalties(x, toks, presence_penalty=torch.ones(2, device=DEV, dtype=torch.float64))
    with pytest.raises(errors.Unsupported, match="output_tokens must be contiguous along its length"):
        bc.apply_penalties(x, torch.zeros(2, 6, dtype=torch.long, device=DEV)[:, ::2])
    with pytest.raises(errors.InvalidArgument, match="output_tokens: expected a CUDA tensor, got a CPU tensor"):
        bc.apply_penalties(x, toks.cpu())
    with pytest.raises(errors.InvalidDType, match="per-row seeds must be int64 or int32"):
        bc.sample(x, seeds=torch.zeros(2, device=DEV))


def test_int32_seeds_draw_as_int64_seeds():
    g = torch.Generator(device=DEV).manual_seed(12)
    x = torch.randn(64, 1000, generator=g, device=DEV)
    s = torch.randint(-2 ** 31, 2 ** 31 - 1, (64,), generator=g, device=DEV)
    a = bc.sample(x, top_k=20, seeds=s)
    b = bc.sample(x, top_k=20, seeds=s.int())
    assert torch.equal(a, b), "a seed is its 64-bit sign extension, whatever the dtype it comes in"


def test_logits_that_require_grad_are_sampled_as_they_are():
    """Tokens carry no gradient: a sampler call on logits that require grad runs (no routing error), as
    torch.multinomial does, and under torch.compile it traces as torch.ops.baracuda.sample."""
    x = torch.randn(4, 100, device=DEV, requires_grad=True)
    assert torch.equal(bc.sample(x, temperature=0.0), x.detach().argmax(-1))
    f = torch.compile(lambda x: bc.sample(x, temperature=0.0), fullgraph=True)
    assert torch.equal(f(x.detach()), x.detach().argmax(-1))
