"""baracuda inside torch: registered ops with fake kernels and autograd, nn.Modules, patch(model).

    import baracuda.torch as bt
    y = bt.rms_norm(x, w)                    # torch.ops.baracuda.rms_norm: autograd, torch.compile
    loss = bt.cross_entropy(logits, target)  # large vocabularies, no host sync
    model = bt.patch(model)                  # transformers Llama / Mistral / Qwen2: our norms, MLP, linears
    torch.compile(model, fullgraph=True)     # no graph break: every op has a fake kernel

Every op is ``torch.ops.baracuda.<name>`` (``OPS`` lists them): a CUDA implementation that
launches the cached plan on torch's current stream, a fake implementation for tracing, and
an autograd formula built from our backward plans. ``baracuda.<op>`` called on a torch tensor
that requires grad routes here, so no gradient is ever dropped.
"""
import torch

from ..errors import InvalidArgument, Unsupported
from .. import _attention, _embedding, _softmax
from . import _attention_ops, _embedding_ops, _moe_ops, _norm_ops, _ops, _rope_ops  # noqa: F401 (these register their ops)
from ._ops import call
from ._modules import (Attention, CrossEntropyLoss, Embedding, GatedMLP, GroupNorm, LayerNorm, Linear, RMSNorm,
                       RotaryEmbedding, Softmax)
from ._patch import patch

OPS = tuple(_ops.OPS)
ops = torch.ops.baracuda

__all__ = ["OPS", "ops", "patch", "RMSNorm", "LayerNorm", "GroupNorm", "Linear", "GatedMLP", "CrossEntropyLoss", "Softmax",
           "Attention", "RotaryEmbedding", "Embedding",
           "rms_norm", "layer_norm", "group_norm", "softmax", "log_softmax", "linear", "matmul", "cross_entropy", "swiglu",
           "sum", "mean", "attention", "scaled_dot_product_attention", "rope", "kv_cache_append",
           "paged_attention", "merge_attention_states", "grouped_linear", "sample", "apply_penalties", "embedding", "moe_gate",
           "moe_permute", "moe_unpermute"]


def _tensor(v, like, name):
    if isinstance(v, torch.Tensor):
        return v
    if isinstance(v, (bool, int, float)):
        return _ops.scalar(v, like)
    raise InvalidArgument(f"{name}: expected a torch tensor or a Python scalar, got {type(v).__name__}")


def rms_norm(x, weight=None, eps=1e-6, *, residual=None, save_stats=False):
    """RMSNorm over the last dim (baracuda.rms_norm's semantics), differentiable.

    With ``residual``: h = x + residual is normalized and (y, h) returned (h is the new residual
    stream); with save_stats the rstd [x.shape[:-1]] is appended."""
    h = x if residual is None else call("add", x, residual)
    y, rstd = call("rms_norm", h, weight, float(eps))
    res = [y] + ([h] if residual is not None else []) + ([rstd] if save_stats else [])
    return res[0] if len(res) == 1 else tuple(res)


def layer_norm(x, weight=None, bias=None, eps=1e-5, *, residual=None, save_stats=False):
    """LayerNorm over the last dim (baracuda.layer_norm's semantics), differentiable."""
    h = x if residual is None else call("add", x, residual)
    y, mean_, rstd = call("layer_norm", h, weight, bias, float(eps))
    res = [y] + ([h] if residual is not None else []) + ([mean_, rstd] if save_stats else [])
    return res[0] if len(res) == 1 else tuple(res)


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5, *, save_stats=False):
    """GroupNorm over x [N, C, *spatial] (torch.nn.functional.group_norm), differentiable; keeps a
    channels-last x's layout. With save_stats, (y, mean, rstd) ([N, num_groups])."""
    y, mean_, rstd = call("group_norm", x, int(num_groups), weight, bias, float(eps))
    return (y, mean_, rstd) if save_stats else y


_dim = _softmax._axis  # dim (or the older spelling axis), -1 by default: one rule for every family


def softmax(x, dim=None, *, axis=None):
    return call("softmax", x, _dim("softmax", dim, axis))


def log_softmax(x, dim=None, *, axis=None):
    return call("log_softmax", x, _dim("log_softmax", dim, axis))


def linear(x, weight, bias=None, *, activation="none", return_aux=False, out_dtype=None, allow_tf32=False):
    """activation(x @ weight.T + bias), differentiable; the pre-activation is kept for the backward
    only when an activation is fused. f32 inputs run in tf32 exactly when torch's own matmuls do
    (torch.backends.cuda.matmul.allow_tf32, e.g. torch.set_float32_matmul_precision("high")), forward
    and backward; the allow_tf32 argument is for baracuda.linear outside autograd."""
    if out_dtype is not None or allow_tf32:
        raise Unsupported("linear: out_dtype / allow_tf32 are not differentiable yet (the differentiable linear "
                          "follows torch.backends.cuda.matmul.allow_tf32); call baracuda.linear under "
                          "torch.no_grad() for them")
    y, aux = call("linear", x, weight, bias, activation)
    return (y, aux) if return_aux else y


def matmul(a, b, **kw):
    """a @ b, differentiable; f32 in tf32 exactly when torch's own matmuls are
    (torch.backends.cuda.matmul.allow_tf32)."""
    if kw:
        raise Unsupported(f"matmul: {sorted(kw)} are not differentiable yet; call baracuda.matmul under "
                          "torch.no_grad() for them")
    return call("matmul", a, b)


def cross_entropy(logits, target, weight=None, *, ignore_index=-100, label_smoothing=0.0, reduction="mean",
                  check_targets=False, return_lse=False):
    """torch.nn.functional.cross_entropy for logits [..., V] (flattened to [N, V]) and class-index
    targets, differentiable; the backward re-reads the logits with the saved logsumexp (one read
    and one write of [N, V]). Out-of-range targets give NaN (no host sync) unless check_targets."""
    lead = tuple(logits.shape[:-1])
    if logits.dim() != 2:
        logits = logits.reshape(-1, logits.shape[-1])
        target = target.reshape(-1)
    if check_targets:
        from .._checks import _check_class_targets
        _check_class_targets("cross_entropy", target, int(logits.shape[1]), ignore_index)
    loss, lse = call("cross_entropy", logits, target, weight, int(ignore_index), float(label_smoothing), reduction)
    if reduction == "none" and len(lead) != 1:
        loss = loss.reshape(lead)
    return (loss, lse) if return_lse else loss


def swiglu(gate, up=None, *, dim=-1, axis=None):
    """silu(gate) * up. With one tensor, gate and up are its two halves along ``dim`` (one fused
    kernel); with two, the LLM-MLP form (gate_proj(x), up_proj(x))."""
    if up is None:
        return call("swiglu", gate, _dim("swiglu", dim if axis is None else None, axis))
    return call("silu_mul", gate, up)  # one fused kernel; its backward gives both gradients


def sum(x, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        raise Unsupported("sum: dtype= is not differentiable yet")
    return call("sum", x, _dims(dim), bool(keepdim))


def mean(x, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        raise Unsupported("mean: dtype= is not differentiable yet")
    return call("mean", x, _dims(dim), bool(keepdim))


def _dims(dim):
    if dim is None:
        return None
    return [int(dim)] if isinstance(dim, int) else [int(d) for d in dim]


def _make_elementwise(name, row):
    """The torch form of an elementwise op of the table: Python scalars become 0-d tensors of the
    first tensor's dtype (as baracuda.<op>), params by name."""
    pnames = [p for p, _ in row["params"] if p not in ("wrt", "axis")]
    gated = row["category"] == "gated"

    def fn(*args, **params):
        unknown = [k for k in params if k not in pnames and not (gated and k in ("dim", "axis"))]
        if unknown:
            raise InvalidArgument(f"{name}: unknown parameter(s) {unknown}; takes {pnames or 'none'}")
        if gated:
            return swiglu(*args, **params) if name == "swiglu" else call(
                name, args[0], _dim(name, params.get("dim"), params.get("axis")))
        like = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if like is None:
            raise InvalidArgument(f"{name}: needs at least one torch tensor argument")
        if name == "where":
            data = next((a for a in args[1:] if isinstance(a, torch.Tensor)), like)
            tensors = [_tensor(args[0], like, "cond") if isinstance(args[0], torch.Tensor)
                       else _ops.scalar(args[0], like, torch.bool)]
            tensors += [_tensor(a, data, f"input {i + 1}") for i, a in enumerate(args[1:])]
        else:
            tensors = [_tensor(a, like, f"input {i}") for i, a in enumerate(args)]
        return call(name, *tensors, *[float(params.get(p, d)) for p, d in row["params"] if p in pnames])

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}: {row['doc']} (torch.ops.baracuda.{name}, differentiable where it has a backward)."
    return fn


def _build_elementwise():
    ns = {}
    for row in _ops._EW.values():
        if row["category"] in ("unary", "predicate", "binary", "compare", "ternary", "gated"):
            ns[row["name"]] = _make_elementwise(row["name"], row)
    ns["swiglu"] = swiglu
    return ns


_ELEMENTWISE = _build_elementwise()
for _n, _f in _ELEMENTWISE.items():
    if _n not in globals():
        globals()[_n] = _f
        __all__.append(_n)


def attention(q, k, v, *, causal=False, scale=None, window=None, softcap=None, alibi_slopes=None, sinks=None,
              cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, seqused_k=None,
              causal_alignment="bottom_right", return_lse=False, deterministic=False, dropout_p=0.0, kernel="auto",
              check_seqlens=False, lse=None):
    """baracuda.attention, differentiable (torch.ops.baracuda.attention; the backward is
    attention_backward from the saved out and lse). Same arguments and returns."""
    if lse is not None:
        raise InvalidArgument("attention: lse= was given but an input requires grad; autograd cannot track a write "
                              "into it: use return_lse=True instead")
    varlen, wl, wr = _attention.check_rules(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                                            window)
    if check_seqlens and varlen:
        _attention.validate_seqlens(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, q.shape[0], k.shape[0])
    out, lse = call("attention", q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, alibi_slopes, sinks,
                    None if scale is None else float(scale), bool(causal), causal_alignment, wl, wr,
                    float(softcap or 0.0), int(max_seqlen_q or 0), int(max_seqlen_k or 0), kernel, bool(deterministic))
    return (out, lse) if return_lse else out


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """torch's F.scaled_dot_product_attention form ([B, H, S, D]; is_causal top-left aligned), differentiable."""
    if attn_mask is not None:
        raise Unsupported("scaled_dot_product_attention: attn_mask is not supported; express the mask with "
                          "baracuda.attention's causal / window / alibi_slopes")
    o = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), causal=is_causal, scale=scale,
                  causal_alignment="top_left", dropout_p=dropout_p)
    return o.transpose(1, 2)


def rope(q, k=None, *, cos=None, sin=None, positions=None, style="neox", rotary_dim=None, theta=10000.0, scaling=None,
         inplace=False, q_out=None, k_out=None, k_cache=None, v=None, v_cache=None, slot_mapping=None, k_scale=None,
         v_scale=None):
    """baracuda.rope, differentiable (torch.ops.baracuda.rope; the backward is the inverse rotation).
    Same arguments and returns; in place and q_out / k_out are refused under autograd (as torch
    refuses an in-place op on a leaf that requires grad), and a cos / sin cache requiring grad is
    refused (its gradient is not computed). With a KV cache (k_cache, slot_mapping, v / v_cache) it
    is the inference op torch.ops.baracuda.rope_append: q and k rotated in place, k and v appended
    (quantized into fp8 caches with k_scale / v_scale, as kv_cache_append)."""
    if k_cache is not None or slot_mapping is not None or v_cache is not None:
        if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (q, k, v)):
            raise InvalidArgument("rope: the KV-cache append is inference (the cache is state, not a graph node): run "
                                  "it under torch.no_grad()")
        if not inplace or q_out is not None or k_out is not None or k is None or k_cache is None or slot_mapping is None:
            raise InvalidArgument("rope: with a KV cache, torch.ops.baracuda.rope_append rotates q and k in place: pass "
                                  "k, k_cache, slot_mapping and inplace=True (no q_out / k_out)")
        theta, rule, params = _rope_ops.freq_args(theta, scaling)
        call("rope_append", q, k, v, k_cache, v_cache, slot_mapping, cos, sin, positions, style, int(rotary_dim or 0),
             float(theta), rule, params, k_scale, v_scale)
        return q, k
    if k_scale is not None or v_scale is not None:
        raise InvalidArgument("rope: k_scale / v_scale go with a cache append (k_cache)")
    if inplace or q_out is not None or k_out is not None:
        raise InvalidArgument("rope: inplace / q_out / k_out with an input that requires grad; autograd cannot track "
                              "the write: drop them (the rotated tensors are returned) or run under torch.no_grad()")
    for name, t in (("cos", cos), ("sin", sin)):
        if t is not None and t.requires_grad:
            raise Unsupported(f"rope: {name} requires grad; the gradient of the cos / sin cache is not computed "
                              "(pass it detached, or let rope compute the angles from theta)")
    theta, rule, params = _rope_ops.freq_args(theta, scaling)
    qo, ko = call("rope", q, k, cos, sin, positions, style, int(rotary_dim or 0), float(theta), rule, params, False)
    return qo if k is None else (qo, ko)


def kv_cache_append(key, value, key_cache, value_cache, slot_mapping, *, k_scale=None, v_scale=None):
    """baracuda.kv_cache_append as torch.ops.baracuda.kv_cache_append (traced by torch.compile with no
    graph break; the caches are mutated in place). No autograd: the cache is inference state."""
    call("kv_cache_append", key, value, key_cache, value_cache, slot_mapping, k_scale, v_scale)


def _per_row(v, default):
    """A sampling parameter as the schema's (tensor or None, scalar) pair: a per-row tensor, else a number."""
    return (v, default) if isinstance(v, torch.Tensor) else (None, default if v is None else v)


def sample(logits, *, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0, seeds=None,
           return_logprobs=False):
    """baracuda.sample as torch.ops.baracuda.sample (traced by torch.compile with no graph break;
    CUDA-graph capturable with per-row tensors). Tokens carry no gradient."""
    (tt, tv), (kt, kv), (pt, pv), (mt, mv) = (_per_row(temperature, 1.0), _per_row(top_k, 0),
                                              _per_row(top_p, 1.0), _per_row(min_p, 0.0))
    tokens, lp = call("sample", logits, tt, kt, pt, mt, seeds, float(tv), int(kv), float(pv), float(mv),
                      int(seed), int(offset), bool(return_logprobs))
    return (tokens, lp) if return_logprobs else tokens


def apply_penalties(logits, output_tokens=None, *, prompt_tokens=None, repetition_penalty=1.0, presence_penalty=0.0,
                    frequency_penalty=0.0):
    """baracuda.apply_penalties as torch.ops.baracuda.apply_penalties (in place on logits; traced by
    torch.compile with no graph break). Returns logits."""
    (rt, rv), (pt, pv), (ft, fv) = (_per_row(repetition_penalty, 1.0), _per_row(presence_penalty, 0.0),
                                    _per_row(frequency_penalty, 0.0))
    call("apply_penalties", logits, prompt_tokens, output_tokens, rt, pt, ft, float(rv), float(pv), float(fv))
    return logits


def embedding(indices, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False, *, check_indices=False):
    """baracuda.embedding, differentiable (torch.ops.baracuda.embedding; the backward is the
    deterministic embedding_backward). torch's F.embedding arguments; max_norm and sparse refused."""
    if max_norm is not None or sparse:
        return _embedding.embedding(indices, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    pad = _embedding.padding_index(padding_idx, weight.shape[0])
    if check_indices:
        _embedding._check_indices("embedding", indices, int(weight.shape[0]))
    return call("embedding", weight, indices, pad, bool(scale_grad_by_freq))


def moe_gate(logits, top_k, *, scoring="softmax", renormalize=True, n_group=1, topk_group=1, group_score="max",
             correction_bias=None, routed_scaling_factor=1.0):
    """baracuda.moe_gate, differentiable in logits (torch.ops.baracuda.moe_gate; the backward is
    moe_gate_backward). Returns (weights float32, ids int32)."""
    if correction_bias is not None and correction_bias.requires_grad:
        raise Unsupported("moe_gate: correction_bias requires grad; it is a selection-only bias (updated by a "
                          "balancing rule, not by gradient): pass it detached")
    return call("moe_gate", logits, correction_bias, int(top_k), str(scoring), bool(renormalize), int(n_group),
                int(topk_group), str(group_score), float(routed_scaling_factor))


def moe_permute(x, ids, num_experts):
    """baracuda.moe_permute, differentiable in x (its backward is moe_unpermute without weights).
    Returns (x_sorted, offsets int32 [E + 1], pos int32 [T, k])."""
    return call("moe_permute", x, ids, int(num_experts))


def moe_unpermute(y_sorted, pos, weights=None, *, out=None):
    """baracuda.moe_unpermute, differentiable in y_sorted and weights (torch.ops.baracuda.moe_unpermute)."""
    if out is not None:
        raise InvalidArgument("moe_unpermute: out= was given but an input requires grad; autograd cannot track a "
                              "write into it: drop out= or run under torch.no_grad()")
    return call("moe_unpermute", y_sorted, pos, weights)


def paged_attention(q, k_cache, v_cache, block_table, seq_lens, *, causal=True, scale=None, window=None, softcap=None,
                    alibi_slopes=None, sinks=None, max_seqlen_k=None, num_splits=0, kernel="auto", return_lse=False,
                    k_scale=None, v_scale=None):
    """baracuda.paged_attention as torch.ops.baracuda.paged_attention (traced by torch.compile with no
    graph break; CUDA-graph capturable). No autograd: decode attention is inference."""
    wl, wr = (-1, -1) if window is None else (int(window[0]), int(window[1]))
    out, lse = call("paged_attention", q, k_cache, v_cache, block_table, seq_lens, alibi_slopes, sinks,
                    None if scale is None else float(scale), bool(causal), wl, wr, float(softcap or 0.0),
                    int(max_seqlen_k or 0), int(num_splits), bool(return_lse), str(kernel), k_scale, v_scale)
    return (out, lse) if return_lse else out


def grouped_linear(x, weight, *, offsets=None, group_sizes=None, bias=None, max_rows_per_group=None):
    """baracuda.grouped_linear as torch.ops.baracuda.grouped_linear (traced by torch.compile with no graph
    break): the experts' projections over the device offsets, or host group_sizes (constants of the
    traced graph). No autograd yet (MoE inference)."""
    if (offsets is None) == (group_sizes is None):
        raise InvalidArgument("grouped_linear: pass exactly one of offsets (device) and group_sizes (host)")
    return call("grouped_linear", x, weight, offsets, None if group_sizes is None else [int(g) for g in group_sizes],
                bias, -1 if max_rows_per_group is None else int(max_rows_per_group))


def merge_attention_states(out_a, lse_a, out_b, lse_b):
    """baracuda.merge_attention_states as torch.ops.baracuda.merge_attention_states (traced by
    torch.compile with no graph break). Returns (out, lse). No autograd: cascade decode is inference."""
    out, lse = call("merge_attention_states", out_a, lse_a, out_b, lse_b)
    return out, lse


def inference_routes():
    """baracuda.<name> -> its registered inference op (no autograd: the cache is state, decode attention
    and penalties are inference): what torch.compile traces instead of a graph break."""
    return dict(kv_cache_append=kv_cache_append, paged_attention=paged_attention, apply_penalties=apply_penalties,
                sample=sample, merge_attention_states=merge_attention_states, grouped_linear=grouped_linear)


def routes():
    """baracuda.<name> -> the differentiable torch form (what a call on tensors requiring grad,
    or inside torch.compile, is routed to)."""
    table = dict(_ELEMENTWISE)
    table.update(rms_norm=rms_norm, layer_norm=layer_norm, group_norm=group_norm, softmax=softmax, log_softmax=log_softmax,
                 linear=linear, matmul=matmul, cross_entropy=cross_entropy, sum=sum, mean=mean, swiglu=swiglu,
                 attention=attention, scaled_dot_product_attention=scaled_dot_product_attention, rope=rope,
                 embedding=embedding, moe_gate=moe_gate, moe_permute=moe_permute, moe_unpermute=moe_unpermute)
    return table

