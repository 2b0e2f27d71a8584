"""Host tests of baracuda.torch (no GPU; torch's CPU build is enough): every op is registered
under torch.ops.baracuda with a fake kernel whose shapes, dtypes and strides are those the CUDA
kernel allocates, errors surface while tracing, a training step traces (forward and backward)
into baracuda ops only, CPU tensors are refused by name, and baracuda.<op> on a tensor that
requires grad never drops the gradient."""
import copy
import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
bt = pytest.importorskip("baracuda.torch")
from baracuda import errors  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

ops = torch.ops.baracuda


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def test_every_op_registered_with_a_fake_kernel():
    assert {"rms_norm", "layer_norm", "softmax", "log_softmax", "linear", "matmul", "cross_entropy", "silu",
            "silu_backward", "add", "add_backward", "swiglu", "where", "sum", "mean"} <= set(bt.OPS)
    for name in bt.OPS:
        op = getattr(ops, name).default
        assert op.name() == f"baracuda::{name}"
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CUDA"), name
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Meta"), name
    # every elementwise kind of the op table, forward and backward
    ew = {r["name"] for r in bc.elementwise_ops() if r["category"] not in ("cast", "fill")}
    assert ew <= set(bt.OPS)


def test_fake_shapes_dtypes_strides():
    x = meta(4, 6, 32)
    w = meta(32)
    y, rstd = ops.rms_norm(x, w, 1e-6)
    assert y.shape == x.shape and y.dtype == x.dtype and rstd.shape == (4, 6) and rstd.dtype == torch.float32
    xc = meta(2, 8, 3, 5).to(memory_format=torch.channels_last)
    y, mean, rstd = ops.group_norm(xc, 4, meta(8), None, 1e-5)
    assert y.stride() == xc.stride() and mean.shape == rstd.shape == (2, 4) and rstd.dtype == torch.float32
    with pytest.raises(bc.errors.InvalidArgument, match="num_groups"):
        ops.group_norm(xc, 3, None, None, 1e-5)
    y, mean, rstd = ops.layer_norm(meta(5, 8, dtype=torch.float64), None, None, 1e-5)
    assert mean.dtype == torch.float64 and rstd.shape == (5,)
    # a dense permuted input keeps its layout (torch's empty_like), as the CUDA kernel's output does
    xt = meta(64, 32).t()
    assert ops.silu(xt).stride() == xt.stride()
    assert ops.isnan(xt).dtype == torch.bool and ops.isnan(xt).stride() == xt.stride()
    # broadcasting, comparisons and the gated halves
    assert ops.add(meta(4, 1, 8), meta(3, 1), 1.0).shape == (4, 3, 8)
    assert ops.lt(meta(4, 8), meta(8)).dtype == torch.bool
    assert ops.swiglu(meta(4, 16), -1).shape == (4, 8)
    assert ops.swiglu(meta(16, 4), 0).shape == (8, 4)
    assert ops.add_backward(meta(4, 3, 8), meta(4, 1, 8), meta(3, 1), 1).shape == (3, 1)
    y, aux = ops.linear(meta(2, 7, 16), meta(24, 16), meta(24), "gelu")
    assert y.shape == (2, 7, 24) and aux.shape == (2, 7, 24)
    assert ops.linear(meta(3, 16), meta(24, 16), None, "none")[1].numel() == 0
    gx, gw, gb = ops.linear_backward(meta(3, 24), meta(3, 16), meta(24, 16), True)
    assert gx.shape == (3, 16) and gw.shape == (24, 16) and gb.shape == (24,)
    assert ops.matmul(meta(2, 1, 5, 7), meta(3, 7, 4)).shape == (2, 3, 5, 4)
    loss, lse = ops.cross_entropy(meta(8, 100), meta(8, dtype=torch.int64), None, -100, 0.0, "mean")
    assert loss.shape == () and lse.shape == (8,) and lse.dtype == torch.float32
    assert ops.cross_entropy(meta(8, 100), meta(8, dtype=torch.int64), None, -100, 0.0, "none")[0].shape == (8,)
    assert ops.sum(meta(4, 5, 6), [0, 2], True).shape == (1, 5, 1)
    assert ops.mean(meta(4, 5, 6), None, False).shape == ()
    assert ops.sum(meta(4, 5, dtype=torch.int32), [1], False).dtype == torch.int64


def test_fake_kernels_work_under_fake_tensor_mode_with_cuda_devices():
    with FakeTensorMode():
        x = torch.empty(4, 32, device="cuda", dtype=torch.bfloat16)
        w = torch.empty(32, device="cuda", dtype=torch.bfloat16)
        y, _ = ops.rms_norm(x, w, 1e-6)
        assert y.device.type == "cuda" and y.shape == (4, 32)


@pytest.mark.parametrize("call, needle", [
    (lambda: ops.rms_norm(meta(4, 32), meta(16), 1e-6), "weight has shape (16,); expected (32,)"),
    (lambda: ops.softmax(meta(4, 8), 2), "dim 2 is out of range"),
    (lambda: ops.linear(meta(4, 8), meta(6, 9), None, "none"), "x.shape[-1] must equal weight.shape[1]"),
    (lambda: ops.linear(meta(4, 8), meta(6, 8), None, "tanh"), "activation must be one of"),
    (lambda: ops.matmul(meta(4, 8), meta(6, 9)), "a.shape[-1] != b.shape[-2]"),
    (lambda: ops.cross_entropy(meta(8, 10), meta(7, dtype=torch.int64), None, -100, 0.0, "mean"),
     "target has shape (7,)"),
    (lambda: ops.cross_entropy(meta(8, 10), meta(8, dtype=torch.int64), None, -100, 0.0, "avg"), "reduction"),
    (lambda: ops.swiglu(meta(4, 7), -1), "must be even"),
    (lambda: ops.silu(meta(4, 8, dtype=torch.int32)), "int32"),
])
def test_errors_surface_while_tracing(call, needle):
    with pytest.raises(errors.BaracudaError, match=None) as info:
        call()
    assert needle in str(info.value)


def test_cpu_tensors_refused_by_name():
    x = torch.randn(4, 8)
    with pytest.raises(errors.InvalidArgument, match="x is a CPU tensor"):
        ops.rms_norm(x, None, 1e-6)
    with pytest.raises(errors.InvalidArgument, match="x, weight are CPU tensors"):
        ops.linear(x, torch.randn(3, 8), None, "none")


def test_training_step_traces_into_baracuda_ops_only():
    def step(x, w_norm, w1, w2, target):
        h = ops.rms_norm(x, w_norm, 1e-6)[0]
        h = bt.linear(h, w1)
        h = bt.swiglu(h)
        logits = bt.linear(h, w2)
        loss = bt.cross_entropy(logits, target)
        return torch.autograd.grad(loss, (x, w_norm, w1, w2))

    # meta tensors: a CPU-only torch cannot run its autograd engine over (fake) CUDA tensors
    dev = "cuda" if torch.cuda.is_available() else "meta"
    args = (torch.randn(6, 32, device=dev, requires_grad=True), torch.ones(32, device=dev, requires_grad=True),
            torch.randn(48, 32, device=dev, requires_grad=True), torch.randn(100, 24, device=dev, requires_grad=True),
            torch.randint(0, 100, (6,), device=dev))
    gm = make_fx(step, tracing_mode="fake")(*args)
    targets = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    for name in ("rms_norm", "rms_norm_backward", "linear", "linear_backward", "swiglu", "swiglu_backward",
                 "cross_entropy", "cross_entropy_backward"):
        assert f"baracuda.{name}.default" in targets, (name, targets)


def test_functional_ops_route_tensors_that_require_grad():
    x = torch.randn(4, 8, requires_grad=True)  # CPU: the kernel refuses it by name
    with pytest.raises(errors.InvalidArgument, match="x: expected a CUDA tensor"):
        bc.silu(x)  # routed to baracuda.torch.silu (autograd), not the plain path
    with pytest.raises(errors.Unsupported, match="no autograd formula"):
        bc.cumsum(x, 0)
    with pytest.raises(errors.InvalidArgument, match="out= was given"):
        bc.silu(x, out=torch.empty(4, 8))
    with torch.no_grad(), pytest.raises(errors.InvalidArgument, match="expected a CUDA tensor"):
        bc.cumsum(x, 0)  # no grad mode: the plain path (which refuses CPU tensors itself)
    with pytest.raises(errors.InvalidArgument, match="CUDA"):
        bc.isnan(x)  # bool result: no gradient to drop, never routed
    # the fast paths' keyword forms reach the differentiable op with their arguments intact
    h = torch.randn(4, 48, requires_grad=True)
    for call in (lambda: bc.swiglu(h), lambda: bc.swiglu(h, h), lambda: bc.geglu(h, dim=-1),
                 lambda: bc.rms_norm(h, None, residual=h), lambda: bc.layer_norm(h, residual=h),
                 lambda: bc.matmul(h.view(2, 2, 48), h.view(2, 48, 2))):
        with pytest.raises(errors.InvalidArgument, match="expected a CUDA tensor"):
            call()


def test_modules_and_patch_on_a_tiny_llama():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2)
    model = transformers.LlamaForCausalLM(cfg)
    before = {k: v.data_ptr() for k, v in model.state_dict().items()}
    bt.patch(model, mlp=True)
    assert model.baracuda_patched == {"rms_norm": 5, "mlp": 2, "linear": 0, "embedding": 0, "loss": 1,
                                      "attention": 1}
    assert isinstance(model.model.norm, bt.RMSNorm) and isinstance(model.model.layers[0].mlp, bt.GatedMLP)
    assert {k: v.data_ptr() for k, v in model.state_dict().items()} == before  # parameters shared, not copied
    assert model.config._attn_implementation == "baracuda"
    emb = transformers.LlamaForCausalLM(cfg)
    before = {k: v.data_ptr() for k, v in emb.state_dict().items()}
    bt.patch(emb, rms_norm=False, loss=False, attention=False, embedding=True)
    assert emb.baracuda_patched["embedding"] == 1 and isinstance(emb.model.embed_tokens, bt.Embedding)
    assert {k: v.data_ptr() for k, v in emb.state_dict().items()} == before


def test_patched_attention_hands_other_calls_to_sdpa():
    """On the CPU (and for float32, masks, dropout) the routed attention is transformers' SDPA path:
    the same logits as the unpatched model, a padding mask included."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2)
    torch.manual_seed(0)
    ref = transformers.LlamaForCausalLM(cfg)
    ours = transformers.LlamaForCausalLM(copy.deepcopy(cfg))  # its own config: patch switches the config
    ours.load_state_dict(ref.state_dict())
    bt.patch(ours, rms_norm=False, loss=False)
    assert ours.config._attn_implementation == "baracuda" and ref.config._attn_implementation != "baracuda"
    ids = torch.randint(0, 64, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, :3] = 0
    for kw in ({}, {"attention_mask": mask}):
        torch.testing.assert_close(ours(input_ids=ids, **kw).logits, ref(input_ids=ids, **kw).logits)


def _patched_pair(model_cls, cfg, sink_std=None):
    torch.manual_seed(0)
    ref = model_cls(cfg)
    if sink_std:  # learned sinks far from their zero init, so that dropping them shows
        for m in ref.modules():
            if isinstance(getattr(m, "sinks", None), torch.nn.Parameter):
                torch.nn.init.normal_(m.sinks, std=sink_std)
    ours = model_cls(copy.deepcopy(cfg))
    ours.load_state_dict(ref.state_dict())
    bt.patch(ours, rms_norm=False, loss=False)
    assert ours.config._attn_implementation == "baracuda" and ref.config._attn_implementation in ("eager", "sdpa")
    return ref, ours


def test_patched_attention_keeps_sinks_and_softcap():
    """gpt-oss passes its attention sinks (s_aux) and Gemma-2 its logit softcap to the attention
    function; transformers' SDPA path drops the first and refuses the second, so off the plain 16-bit
    GPU path the patched model runs its own eager attention: the same logits as the unpatched model
    (sliding-window layers and a padding mask included)."""
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "GptOssConfig") or not hasattr(transformers, "Gemma2Config"):
        pytest.skip("this transformers has no gpt-oss / Gemma-2")
    ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, :3] = 0
    oss = transformers.GptOssConfig(vocab_size=64, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_local_experts=4,
                                    num_experts_per_tok=2, sliding_window=4,
                                    layer_types=["sliding_attention", "full_attention"])
    gemma = transformers.Gemma2Config(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=4,
                                      attn_logit_softcapping=2.0)
    for model_cls, cfg, std in ((transformers.GptOssForCausalLM, oss, 2.0), (transformers.Gemma2ForCausalLM, gemma,
                                                                             None)):
        ref, ours = _patched_pair(model_cls, cfg, std)
        for kw in ({}, {"attention_mask": mask}):
            torch.testing.assert_close(ours(input_ids=ids, **kw).logits, ref(input_ids=ids, **kw).logits,
                                       msg=lambda m: f"{model_cls.__name__} {list(kw)}: {m}")


def test_patched_sliding_window_without_a_mask():
    """A sliding-window layer without padding gets no mask from patch's mask rules (the window is the
    attention function's, from the layer's sliding_window); off the GPU path the window becomes a mask
    again: Mistral (SDPA path) and the q_len == 1 decode step with a cache longer than the window."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=4)
    ref, ours = _patched_pair(transformers.MistralForCausalLM, cfg)
    ids = torch.randint(0, 64, (2, 11), generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(ours(input_ids=ids).logits, ref(input_ids=ids).logits)
    from baracuda.torch._patch import _unmasked
    q, k = torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 7, 2)
    assert _unmasked(None, q, k, None, 4)[0, 0, 0].tolist() == [False] * 3 + [True] * 4
    q = torch.zeros(1, 1, 5, 2)
    vis = _unmasked(None, q, q, True, 2)[0, 0]
    assert vis.tolist() == [[j <= i and j > i - 2 for j in range(5)] for i in range(5)]


def test_patch_mask_skips_sliding_windows_not_chunks():
    """The "baracuda" mask function skips a sliding-window layer's mask (the window reaches bt.attention)
    but keeps a chunked-attention layer's (Llama-4: local_size is its chunk), past the window / chunk."""
    pytest.importorskip("transformers")
    from types import SimpleNamespace
    from transformers.masking_utils import chunked_causal_mask_function, sliding_window_causal_mask_function
    from baracuda.torch._patch import _baracuda_mask
    common = dict(batch_size=1, q_length=12, kv_length=12, attention_mask=None, allow_is_causal_skip=True,
                  local_size=4, device=torch.device("cpu"))
    sliding = SimpleNamespace(sliding_window=4)
    assert _baracuda_mask(mask_function=sliding_window_causal_mask_function(4), config=sliding, **common) is None
    chunked = SimpleNamespace(sliding_window=None, attention_chunk_size=4)
    m = _baracuda_mask(mask_function=chunked_causal_mask_function(4, torch.zeros(1, dtype=torch.long)),
                       config=chunked, **common)
    assert m is not None and not bool(m[0, 0, 11, 7])  # key 7 is in an earlier chunk than query 11
    both = SimpleNamespace(sliding_window=4, attention_chunk_size=4)  # ambiguous: SDPA's mask
    assert _baracuda_mask(mask_function=sliding_window_causal_mask_function(4), config=both, **common) is not None


def _reference_attention(q, k, v, *, causal=False, causal_alignment="bottom_right", scale=None, softcap=None,
                         window=None, sinks=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                         max_seqlen_k=None):
    """bt.attention's contract on the CPU (float32), standing in for the GPU op in the patch tests."""
    if cu_seqlens_q is None:
        outs = [_reference_attention(q[b], k[b], v[b], causal=causal, causal_alignment=causal_alignment, scale=scale,
                                     softcap=softcap, window=window, sinks=sinks,
                                     cu_seqlens_q=torch.tensor([0, q.shape[1]]),
                                     cu_seqlens_k=torch.tensor([0, k.shape[1]])) for b in range(q.shape[0])]
        return torch.stack(outs)
    assert max_seqlen_q is not None and max_seqlen_k is not None or cu_seqlens_q.numel() == 2
    out = q.new_zeros(q.shape[:-1] + (v.shape[-1],))
    for b in range(cu_seqlens_q.numel() - 1):
        q0, q1, k0, k1 = (int(x) for x in (cu_seqlens_q[b], cu_seqlens_q[b + 1], cu_seqlens_k[b], cu_seqlens_k[b + 1]))
        qs, ks, vs = q[q0:q1], k[k0:k1], v[k0:k1]
        rep = qs.shape[1] // ks.shape[1]
        ks, vs = ks.repeat_interleave(rep, 1), vs.repeat_interleave(rep, 1)
        s = torch.einsum("ihd,jhd->hij", qs, ks) * (scale if scale is not None else qs.shape[-1] ** -0.5)
        if softcap:
            s = softcap * torch.tanh(s / softcap)
        pos = torch.arange(q1 - q0)[:, None] + (0 if causal_alignment == "top_left" else (k1 - k0) - (q1 - q0))
        j = torch.arange(k1 - k0)[None, :]
        vis = j <= pos if causal else torch.ones_like(j <= pos)
        if window is not None and window[0] >= 0:
            vis = vis & (j >= pos - window[0])
        s = s.masked_fill(~vis, float("-inf"))
        if sinks is not None:
            s = torch.cat([s, sinks[:, None, None].expand(-1, s.shape[1], 1)], 2)
        p = torch.softmax(s, -1).nan_to_num(0.0)
        out[q0:q1] = torch.einsum("hij,jhd->ihd", p[..., :k1 - k0], vs)
    return out


def test_patched_padding_runs_packed_sequences(monkeypatch):
    """A padding mask whose valid tokens are one run per row (left or right padding) reaches
    bt.attention as packed sequences (the op replaced here by a CPU reference of its contract, and the
    16-bit CUDA condition lifted): the logits of every valid position match the unpatched model's, for a
    causal model, a sliding-window one and gpt-oss (sinks and windows); a mask with a hole keeps SDPA's
    4D mask; greedy generation from left-padded prompts (decode over the cache) gives the same tokens."""
    transformers = pytest.importorskip("transformers")
    from baracuda.torch import _patch
    calls = []

    def spy(*a, **k):
        calls.append("packed" if k.get("cu_seqlens_q") is not None else "dense")
        return _reference_attention(*a, **k)

    monkeypatch.setattr(bt, "attention", spy)
    monkeypatch.setattr(_patch, "_ours_can_run", lambda query, dropout, kwargs: True)
    small = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=8)
    cases = [(transformers.LlamaForCausalLM, transformers.LlamaConfig(**small), None),
             (transformers.MistralForCausalLM, transformers.MistralConfig(sliding_window=4, **small), None)]
    if hasattr(transformers, "GptOssConfig"):
        cases.append((transformers.GptOssForCausalLM, transformers.GptOssConfig(
            num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
            layer_types=["sliding_attention", "full_attention"], **{**small, "intermediate_size": 32}), 2.0))
    ids = torch.randint(1, 64, (3, 10), generator=torch.Generator().manual_seed(4))
    left, right, hole = (torch.ones(3, 10, dtype=torch.long) for _ in range(3))
    left[1, :3] = 0
    left[2, :6] = 0
    right[1, 7:] = 0
    hole[1, 4] = 0
    for model_cls, cfg, std in cases:
        ref, ours = _patched_pair(model_cls, cfg, std)
        for name, mask in (("left", left), ("right", right), ("hole", hole)):
            calls.clear()
            a = ref(input_ids=ids, attention_mask=mask).logits
            b = ours(input_ids=ids, attention_mask=mask).logits
            valid = mask.bool() if name != "hole" else torch.ones_like(mask, dtype=torch.bool)
            torch.testing.assert_close(b[valid], a[valid], msg=lambda m: f"{model_cls.__name__} {name}: {m}")
            assert calls == ([] if name == "hole" else ["packed"] * cfg.num_hidden_layers), (name, calls)
        if model_cls is transformers.LlamaForCausalLM:
            calls.clear()
            gen = dict(attention_mask=left, max_new_tokens=5, do_sample=False, pad_token_id=0,
                       return_dict_in_generate=True, output_logits=True)
            want, got = ref.generate(ids, **gen), ours.generate(ids, **gen)
            assert torch.equal(got.sequences, want.sequences)
            for step, (a, b) in enumerate(zip(want.logits, got.logits)):
                torch.testing.assert_close(b, a, msg=lambda m: f"decode step {step}: {m}")
            assert calls and set(calls) == {"packed"}


def test_inspectable_signatures():
    import inspect
    assert list(inspect.signature(bc.rms_norm).parameters)[:3] == ["x", "weight", "eps"]
    assert "x" in inspect.signature(bt.rms_norm).parameters


def test_neg_and_conj_views_are_resolved_or_refused():
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _fake import FakeTensor
    spec = bc.TensorSpec((4,), bc.float32)
    plan = bc.ElementwisePlan.select(bc.ElementwiseDescriptor("silu", [spec], spec))
    # an output with torch's negative bit cannot be written through DLPack: refused by name
    with pytest.raises(errors.InvalidArgument, match="out: is a torch view with the negative bit set"):
        plan.run(torch._neg_view(torch.empty(4)), FakeTensor((4,), addr=1 << 20))
    # an input is materialised (resolve_neg), then checked like any other: here, as a CPU tensor
    with pytest.raises(errors.InvalidArgument, match="x: expected a CUDA tensor"):
        bc.silu(torch._neg_view(torch.randn(4)))


def test_scalars_that_do_not_fit_the_operand_dtype_are_refused():
    i8 = torch.zeros(4, dtype=torch.int8)
    with pytest.raises(errors.InvalidArgument, match="1000 is outside the range of int8"):
        bc.add(i8, 1000)
    with pytest.raises(errors.InvalidArgument, match="2.5 is not a whole number"):
        bc.mul(i8, 2.5)


def test_linear_errors_name_the_callers_arguments():
    x, w = torch.randn(4, 8), torch.randn(6, 9)
    with pytest.raises(errors.InvalidArgument, match=r"linear: x has shape \(4, 8\) and weight \(6, 9\)"):
        bc.linear(x, w)
    with pytest.raises(errors.InvalidArgument, match=r"linear: bias has shape \(5,\); expected \(6,\)"):
        bc.linear(x, torch.randn(6, 8), torch.randn(5))
    with pytest.raises(errors.InvalidArgument, match=r"linear_backward: grad_out has shape \(4, 5\); expected \(4, 6\)"):
        bc.linear_backward(torch.randn(4, 5), x, torch.randn(6, 8))


def test_compile_as_is_checked():
    with pytest.raises(bc.errors.InvalidArgument, match="compile_as must be one of"):
        bt.RMSNorm(8, compile_as="inductor")
    with pytest.raises(bc.errors.InvalidArgument, match="compile_as"):
        bt.GatedMLP(8, 16, compile_as="fast")
    with pytest.raises(bc.errors.InvalidArgument, match="patch: compile_as"):
        bt.patch(torch.nn.Linear(2, 2), compile_as="x")
    assert bt.RMSNorm(8).compile_as == "torch" and bt.RMSNorm(8, compile_as="baracuda").compile_as == "baracuda"


def test_attention_module_is_a_plain_module():
    m = bt.Attention(causal=True, window=(64, 0), sink_heads=8, causal_alignment="top_left")
    assert dict(m.named_parameters()).keys() == {"sinks"} and m.sinks.dtype == torch.float32
    assert (m.sinks == 0).all() and "sinks" in m.state_dict()
    assert repr(m) == "Attention(causal=True, window=(64, 0), causal_alignment='top_left', sink_heads=8)"
    assert bt.Attention().extra_repr() == "" and bt.Attention().sinks is None



def test_serving_ops_fake_shapes():
    """The fake kernels of the embedding, MoE routing, penalties and fused rope-append ops: the shapes and
    dtypes the CUDA kernels allocate, and their select() refusals while tracing."""
    out = ops.embedding(meta(100, 16), meta(3, 5, dtype=torch.int64), -1, False)
    assert out.shape == (3, 5, 16) and out.dtype == torch.bfloat16
    gw = ops.embedding_backward(meta(3, 5, 16), meta(3, 5, dtype=torch.int64), 100, 2, True, True)
    assert gw.shape == (100, 16)
    w, ids = ops.moe_gate(meta(7, 64, dtype=torch.float32), None, 6, "sigmoid", True, 8, 3, "top2_sum", 2.5)
    assert w.shape == ids.shape == (7, 6) and w.dtype == torch.float32 and ids.dtype == torch.int32
    gl = ops.moe_gate_backward(meta(7, 6, dtype=torch.float32), meta(7, 64), meta(7, 6, dtype=torch.int32), "softmax",
                               True, 1, 1, "max", 1.0)
    assert gl.shape == (7, 64) and gl.dtype == torch.bfloat16
    xs, offsets, pos = ops.moe_permute(meta(7, 32), meta(7, 2, dtype=torch.int32), 8)
    assert xs.shape == (14, 32) and offsets.shape == (9,) and pos.shape == (7, 2) and pos.dtype == torch.int32
    o = ops.moe_unpermute(meta(14, 32), meta(7, 2, dtype=torch.int32), meta(7, 2, dtype=torch.float32))
    assert o.shape == (7, 32)
    gy, gwt = ops.moe_unpermute_backward(meta(7, 32), meta(7, 2, dtype=torch.int32), meta(7, 2, dtype=torch.float32),
                                         meta(14, 32), 14)
    assert gy.shape == (14, 32) and gwt.shape == (7, 2)
    ops.apply_penalties(meta(4, 100, dtype=torch.float32), None, meta(4, 9, dtype=torch.int64), None, None, None, 1.2,
                        0.0, 0.5)
    ops.rope_append(meta(5, 4, 64), meta(5, 2, 64), meta(5, 2, 64), meta(3, 16, 2, 64), meta(3, 16, 2, 64),
                    meta(5, dtype=torch.int64), None, None, None, "neox", 0, 10000.0, "none",
                    [1.0, 1.0, 4.0, 0.0, 32.0, 1.0, 0.0])
    for call, needle in [
        (lambda: ops.moe_gate(meta(7, 8), None, 9, "softmax", True, 1, 1, "max", 1.0), "top_k=9"),
        (lambda: ops.moe_permute(meta(6, 32), meta(7, 2, dtype=torch.int32), 8), "x has 6 rows but ids has 7"),
        (lambda: ops.embedding(meta(100, 16), meta(3, dtype=torch.float32), -1, False), "indices is float32"),
        (lambda: ops.rope_append(meta(5, 4, 64), meta(5, 2, 64), None, meta(3, 16, 4, 64), None,
                                 meta(5, dtype=torch.int64), None, None, None, "neox", 0, 10000.0, "none",
                                 [1.0, 1.0, 4.0, 0.0, 32.0, 1.0, 0.0]), "kv_heads and head_dim must match"),
    ]:
        with pytest.raises(errors.BaracudaError) as info:
            call()
        assert needle in str(info.value), (needle, str(info.value))


def test_embedding_and_routing_backward_trace_into_baracuda_ops():
    def step(table, logits, idx):
        h = bt.embedding(idx, table)                      # [T, H]
        w, ids = bt.moe_gate(logits, 2)
        xs, _, pos = bt.moe_permute(h, ids, 4)
        y = bt.moe_unpermute(xs * 2, pos, w)
        return torch.autograd.grad(y.sum(), (table, logits))

    dev = "cuda" if torch.cuda.is_available() else "meta"
    args = (torch.randn(50, 16, device=dev, requires_grad=True), torch.randn(6, 4, device=dev, requires_grad=True),
            torch.randint(0, 50, (6,), device=dev))
    gm = make_fx(step, tracing_mode="fake")(*args)
    targets = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    for name in ("embedding", "embedding_backward", "moe_gate", "moe_gate_backward", "moe_permute", "moe_unpermute",
                 "moe_unpermute_backward"):
        assert f"baracuda.{name}.default" in targets, (name, targets)


def test_patch_swaps_embeddings_on_request():
    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(10, 4, padding_idx=0)
            self.renormed = torch.nn.Embedding(10, 4, max_norm=1.0)

    m = Tiny()
    w = m.embed.weight
    assert bt.patch(Tiny(), attention=False).baracuda_patched["embedding"] == 0  # off by default
    bt.patch(m, attention=False, embedding=True)
    assert isinstance(m.embed, bt.Embedding) and m.embed.weight is w and m.embed.padding_idx == 0
    assert type(m.renormed) is torch.nn.Embedding and m.baracuda_patched["embedding"] == 1


def test_compile_traces_the_inference_ops_without_a_graph_break():
    """bc.kv_cache_append / bc.paged_attention / bc.merge_attention_states / bc.apply_penalties / bc.sample inside torch.compile (grad
    mode on, no tensor requiring grad) run as their registered ops: fullgraph traces."""
    dev = "meta"
    key, kc = torch.empty(4, 2, 64, device=dev, dtype=torch.bfloat16), torch.empty(3, 16, 2, 64, device=dev,
                                                                                  dtype=torch.bfloat16)
    slots = torch.empty(4, device=dev, dtype=torch.int64)
    q = torch.empty(2, 8, 64, device=dev, dtype=torch.bfloat16)
    table, lens = torch.empty(2, 3, device=dev, dtype=torch.int32), torch.empty(2, device=dev, dtype=torch.int32)
    logits, toks = torch.empty(2, 50, device=dev), torch.empty(2, 5, device=dev, dtype=torch.int64)

    def step(key, kc, slots, q, table, lens, logits, toks):
        bc.kv_cache_append(key, key, kc, kc.clone(), slots)
        o, lse = bc.paged_attention(q, kc, kc, table, lens, return_lse=True)
        o, lse = bc.merge_attention_states(o, lse.transpose(1, 2)[:, 0], o, lse.transpose(1, 2)[:, 0])
        bc.apply_penalties(logits, toks, repetition_penalty=1.2)
        return o, bc.sample(logits, top_k=5, seed=3)

    out, tok = torch.compile(step, backend="eager", fullgraph=True)(key, kc, slots, q, table, lens, logits, toks)
    assert out.shape == q.shape and tok.shape == (2,) and tok.dtype == torch.int64
    # the experts' projections of a MoE layer too (device offsets, or host sizes made a tensor)
    gx, gw = torch.empty(12, 64, device=dev, dtype=torch.bfloat16), torch.empty(4, 32, 64, device=dev,
                                                                               dtype=torch.bfloat16)
    goffs = torch.empty(5, device=dev, dtype=torch.int64)

    def experts(x, w, offs):
        return bc.grouped_linear(x, w, offsets=offs, max_rows_per_group=12), bc.grouped_linear(
            x, w, group_sizes=[3, 3, 0, 6])

    ga, gb = torch.compile(experts, backend="eager", fullgraph=True)(gx, gw, goffs)
    assert ga.shape == gb.shape == (12, 32) and ga.dtype == torch.bfloat16
    with pytest.raises(errors.Unsupported, match="no autograd formula"):
        bc.kv_cache_append(key.requires_grad_(), None, kc, None, slots)
