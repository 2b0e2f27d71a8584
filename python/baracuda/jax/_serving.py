"""baracuda.jax's serving-path ops: RoPE, embedding, MoE routing, sampling and penalties, paged decode
attention (the mechanism in _mechanism.py)."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from .. import _C, _interop
from .._dtypes import dtype as _bc_dtype
from .._embedding import padding_index as _embedding_padding_index
from .._kv_cache import check_pairs as _kv_cache_check_pairs
from .._rope import descriptor as _rope_descriptor
from .._rope import scaling_fields as _rope_scaling_fields
from ..errors import InvalidArgument
from ._mechanism import _launch, _operand, _spec, _spec_of

# ---- RoPE -----------------------------------------------------------------------------------------

def _rope_run(q, k, cos, sin, positions, params, inverse):
    style, rotary_dim, (theta, rule, fields) = params
    desc = _rope_descriptor(_spec_of, q, k, cos, positions, style, rotary_dim,
                            _C.RopeFrequencies(theta=theta, scaling=rule, **dict(fields)), inverse)
    ins = [_operand(r, t) for r, t in (("q", q), ("k", k), ("cos", cos), ("sin", sin), ("positions", positions))
           if t is not None]
    outs = [("q_out", q.shape, q.dtype)] + ([("k_out", k.shape, k.dtype)] if k is not None else [])
    return tuple(_launch(desc, _C.RopePlan.select, ins, outs))


@functools.partial(jax.custom_vjp, nondiff_argnums=(5,))
def _rope(q, k, cos, sin, positions, params):
    return _rope_run(q, k, cos, sin, positions, params, False)


def _rope_fwd(q, k, cos, sin, positions, params):
    return _rope_run(q, k, cos, sin, positions, params, False), (cos, sin, positions)


def _rope_bwd(params, res, grads):
    cos, sin, positions = res
    gq = grads[0]
    gk = grads[1] if len(grads) > 1 else None
    got = _rope_run(gq, gk, cos, sin, positions, params, True)
    # cos / sin are constants here (their gradient is not computed), positions are integers
    return got[0], (got[1] if gk is not None else None), None, None, None


_rope.defvjp(_rope_fwd, _rope_bwd)


def _rope_append(q, k, v, k_cache, v_cache, slot_mapping, cos, sin, positions, params, k_scale, v_scale):
    """The fused decode append (inference: no vjp): (q, k, k_cache[, v_cache]), the caches the
    custom call's aliased outputs."""
    style, rotary_dim, (theta, rule, fields) = params
    desc = _rope_descriptor(_spec_of, q, k, cos, positions, style, rotary_dim,
                            _C.RopeFrequencies(theta=theta, scaling=rule, **dict(fields)), k_cache=k_cache, v=v,
                            v_cache=v_cache, slot_mapping=slot_mapping, k_scale=k_scale)
    ins = [_operand(r, t) for r, t in (("q", q), ("k", k), ("cos", cos), ("sin", sin), ("positions", positions),
                                       ("v", v), ("slot_mapping", slot_mapping), ("k_scale", k_scale),
                                       ("v_scale", v_scale)) if t is not None]
    outs = [("q_out", q.shape, q.dtype), ("k_out", k.shape, k.dtype), ("k_cache", k_cache.shape, k_cache.dtype)]
    aliases = {len(ins): 2}
    ins.append(_operand("k_cache", k_cache))
    if v_cache is not None:
        outs.append(("v_cache", v_cache.shape, v_cache.dtype))
        aliases[len(ins)] = 3
        ins.append(_operand("v_cache", v_cache))
    return tuple(_launch(desc, _C.RopePlan.select, ins, outs, aliases=aliases))


def rope(q, k=None, *, cos=None, sin=None, positions=None, style: str = "neox", rotary_dim=None,
         theta: float = 10000.0, scaling=None, k_cache=None, v=None, v_cache=None, slot_mapping=None, k_scale=None,
         v_scale=None):
    """baracuda.rope on JAX arrays: q [tokens, Hq, D] or [B, S, Hq, D] and optionally k, rotated in one
    custom call; returns q, or (q, k). Differentiable in q and k (the backward is the inverse
    rotation); a cos / sin cache is a constant (no gradient flows to it).

    The decode step's cache append, fused (inference, no gradient): with ``k_cache`` and
    ``slot_mapping`` (and ``v`` / ``v_cache``; ``k_scale`` / ``v_scale`` for fp8 caches) the rotated k
    and v also go to their cache slots, as ``kv_cache_append``; returns (q, k, k_cache) or (q, k,
    k_cache, v_cache), the caches through aliased outputs (donate them under ``jax.jit`` to append
    in place)."""
    if (cos is None) != (sin is None):
        raise InvalidArgument("rope: cos and sin go together (a cache [positions, rotary_dim / 2] each)")
    theta, rule, fields = _rope_scaling_fields(theta, scaling)
    params = (str(style), int(rotary_dim or 0), (theta, rule, tuple(sorted(fields.items()))))
    if k_cache is not None or v is not None or v_cache is not None or slot_mapping is not None:
        if k is None or k_cache is None or slot_mapping is None:
            raise InvalidArgument("rope: the cache append needs k, k_cache and slot_mapping")
        if (v is None) != (v_cache is None):
            raise InvalidArgument("rope: v and v_cache go together (both or neither)")
        if v_scale is not None and k_scale is None:
            raise InvalidArgument("rope: v_scale without k_scale")
        return _rope_append(q, k, v, k_cache, v_cache, slot_mapping, cos, sin, positions, params, k_scale, v_scale)
    if k_scale is not None or v_scale is not None:
        raise InvalidArgument("rope: k_scale / v_scale go with a cache append (k_cache)")
    got = _rope(q, k, cos, sin, positions, params)
    return got[0] if k is None else got


# ---- embedding ------------------------------------------------------------------------------------

def _embedding_run(weight, indices, pad):
    shape = tuple(indices.shape) + (weight.shape[1],)
    desc = _C.EmbeddingDescriptor(_spec_of(weight), _spec_of(indices), _spec(shape, weight.dtype), padding_idx=pad)
    return _launch(desc, _C.EmbeddingPlan.select, [_operand("weight", weight), _operand("indices", indices)],
                   [("out", shape, weight.dtype)])[0]


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _embedding(weight, indices, pad, scale_grad_by_freq, num_weights):
    return _embedding_run(weight, indices, pad)


def _embedding_fwd(weight, indices, pad, scale_grad_by_freq, num_weights):
    return _embedding_run(weight, indices, pad), indices


def _embedding_bwd(pad, scale_grad_by_freq, num_weights, indices, grad):
    shape = (num_weights, grad.shape[-1])
    desc = _C.EmbeddingDescriptor(_spec(shape, grad.dtype), _spec_of(indices), _spec_of(grad), backward=True,
                                  padding_idx=pad, scale_grad_by_freq=scale_grad_by_freq)
    gw = _launch(desc, _C.EmbeddingPlan.select, [_operand("grad_out", grad), _operand("indices", indices)],
                 [("grad_weight", shape, grad.dtype)])[0]
    return gw, None


_embedding.defvjp(_embedding_fwd, _embedding_bwd)


def embedding(indices, weight, padding_idx=None, scale_grad_by_freq: bool = False):
    """baracuda.embedding on JAX arrays: rows of weight [V, D] at indices (int32 / int64, any shape),
    one custom call; differentiable in weight through the deterministic backward (sorted indices,
    fixed-order sums; padding_idx's row gets no gradient). An index outside [0, V) gives a NaN row."""
    if weight.ndim != 2:
        raise InvalidArgument(f"embedding: weight has shape {tuple(weight.shape)}; expected [num_embeddings, "
                              "embedding_dim]")
    pad = _embedding_padding_index(padding_idx, int(weight.shape[0]))
    return _embedding(weight, indices, pad, bool(scale_grad_by_freq), int(weight.shape[0]))


# ---- MoE routing ----------------------------------------------------------------------------------

def _moe_gate_desc(logits, top_k, backward, params, bias):
    scoring, renormalize, n_group, topk_group, group_score, scale = params
    return _C.MoeGateDescriptor(_spec_of(logits), int(top_k), backward=backward, scoring=scoring,
                                renormalize=renormalize, n_group=n_group, topk_group=topk_group,
                                group_score=group_score, correction_bias=bias, routed_scaling_factor=scale)


def _moe_gate_run(logits, bias, top_k, params):
    t = logits.shape[0]
    ins = [_operand("logits", logits)] + ([_operand("correction_bias", bias)] if bias is not None else [])
    return tuple(_launch(_moe_gate_desc(logits, top_k, False, params, bias is not None), _C.MoeGatePlan.select, ins,
                         [("weights", (t, top_k), jnp.float32), ("ids", (t, top_k), jnp.int32)]))


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _moe_gate(logits, bias, top_k, params):
    return _moe_gate_run(logits, bias, top_k, params)


def _moe_gate_fwd(logits, bias, top_k, params):
    w, ids = _moe_gate_run(logits, bias, top_k, params)
    return (w, ids), (logits, ids, bias)


def _moe_gate_bwd(top_k, params, res, grads):
    logits, ids, bias = res
    gl = _launch(_moe_gate_desc(logits, top_k, True, params, False), _C.MoeGatePlan.select,
                 [_operand("logits", logits), _operand("ids", ids),
                  _operand("grad_weights", grads[0].astype(jnp.float32))],
                 [("grad_logits", logits.shape, logits.dtype)])[0]
    return gl, (None if bias is None else jnp.zeros_like(bias))


_moe_gate.defvjp(_moe_gate_fwd, _moe_gate_bwd)


def moe_gate(logits, top_k: int, *, scoring: str = "softmax", renormalize: bool = True, n_group: int = 1,
             topk_group: int = 1, group_score: str = "max", correction_bias=None, routed_scaling_factor: float = 1.0):
    """baracuda.moe_gate on JAX arrays: (weights [T, k] float32, ids [T, k] int32), one custom call;
    differentiable in logits (the correction bias is a selection-only constant)."""
    params = (str(scoring), bool(renormalize), int(n_group), int(topk_group), str(group_score),
              float(routed_scaling_factor))
    return _moe_gate(logits, correction_bias, int(top_k), params)


def _moe_unpermute_run(y_sorted, pos, weights):
    desc = _C.MoePermuteDescriptor("unpermute", _spec_of(y_sorted), _spec_of(pos), weights=weights is not None)
    ins = [_operand("y_sorted", y_sorted), _operand("pos", pos)] + \
        ([_operand("weights", weights)] if weights is not None else [])
    return _launch(desc, _C.MoePermutePlan.select, ins, [("out", (pos.shape[0], y_sorted.shape[1]), y_sorted.dtype)])[0]


def _moe_unpermute_grad(grad, pos, weights, y_sorted, rows):
    desc = _C.MoePermuteDescriptor("unpermute_backward", _spec_of(grad), _spec_of(pos), weights=weights is not None,
                                   sorted_rows=rows)
    ins = [_operand("grad_out", grad), _operand("pos", pos)]
    outs = [("grad_y_sorted", (rows, grad.shape[1]), grad.dtype)]
    if weights is not None:
        ins += [_operand("weights", weights), _operand("y_sorted", y_sorted)]
        outs.append(("grad_weights", pos.shape, jnp.float32))
    got = _launch(desc, _C.MoePermutePlan.select, ins, outs)
    return got[0], (got[1] if weights is not None else None)


@jax.custom_vjp
def _moe_unpermute(y_sorted, pos, weights):
    return _moe_unpermute_run(y_sorted, pos, weights)


def _moe_unpermute_fwd(y_sorted, pos, weights):
    return _moe_unpermute_run(y_sorted, pos, weights), (y_sorted, pos, weights)


def _moe_unpermute_bwd(res, grad):
    y_sorted, pos, weights = res
    gy, gw = _moe_unpermute_grad(grad.astype(y_sorted.dtype), pos, weights, y_sorted, y_sorted.shape[0])
    return gy, None, gw


_moe_unpermute.defvjp(_moe_unpermute_fwd, _moe_unpermute_bwd)


def moe_unpermute(y_sorted, pos, weights=None):
    """baracuda.moe_unpermute on JAX arrays: out[t] = sum_j weights[t, j] * y_sorted[pos[t, j]];
    differentiable in y_sorted and weights."""
    return _moe_unpermute(y_sorted, pos, weights)


def _moe_permute_run(x, ids, num_experts):
    t, k = ids.shape
    desc = _C.MoePermuteDescriptor("permute", _spec_of(x), _spec_of(ids), num_experts=num_experts)
    return tuple(_launch(desc, _C.MoePermutePlan.select, [_operand("x", x), _operand("ids", ids)],
                         [("x_sorted", (t * k, x.shape[1]), x.dtype), ("offsets", (num_experts + 1,), jnp.int32),
                          ("pos", (t, k), jnp.int32)]))


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _moe_permute(x, ids, num_experts):
    return _moe_permute_run(x, ids, num_experts)


def _moe_permute_fwd(x, ids, num_experts):
    got = _moe_permute_run(x, ids, num_experts)
    return got, got[2]


def _moe_permute_bwd(num_experts, pos, grads):
    return _moe_unpermute_run(grads[0], pos, None), None


_moe_permute.defvjp(_moe_permute_fwd, _moe_permute_bwd)


def moe_permute(x, ids, num_experts: int):
    """baracuda.moe_permute on JAX arrays: (x_sorted [T * k, H], offsets [E + 1] int32, pos [T, k]
    int32), one custom call; differentiable in x (the backward is the combine without weights)."""
    return _moe_permute(x, ids, int(num_experts))


# ---- sampling (no vjp: tokens carry no gradient) --------------------------------------------------

def sample(logits, key=None, *, seeds=None, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
           return_logprobs: bool = False):
    """baracuda.sample on JAX arrays (one custom call, jit-able): one token (int32) per row of logits
    [B, V] with temperature / top-k / top-p / min-p, each a number or a per-row array [B] (float32;
    top_k int32). The randomness: ``key`` (a jax.random key: a per-row 32-bit seed is drawn from it) or
    ``seeds`` [B] (int32 / int64); the same seeds give the same tokens. Returns tokens, or (tokens,
    logprobs) with return_logprobs."""
    b = int(logits.shape[0])
    if seeds is None:
        if key is None:
            raise InvalidArgument("sample: pass key (a jax.random key) or seeds (int32 / int64 [B])")
        seeds = jax.lax.bitcast_convert_type(jax.random.bits(key, (b,), jnp.uint32), jnp.int32)
    per_row = {}
    scalars = _interop.split_per_row("sample", per_row, (("temperature", temperature, 1.0, float),
                                                         ("top_k", top_k, 0, int), ("top_p", top_p, 1.0, float),
                                                         ("min_p", min_p, 0.0, float)))
    ins = [_operand("logits", logits)] + [_operand(n, t) for n, t in per_row.items()] + [_operand("seeds", seeds)]
    desc = _C.SamplingDescriptor(
        _spec_of(logits), token_dtype=_C.DType.int32, logprobs=bool(return_logprobs),
        temperature=scalars["temperature"], top_k=scalars["top_k"], top_p=scalars["top_p"],
        min_p=scalars["min_p"], temperature_per_row="temperature" in per_row, top_k_per_row="top_k" in per_row,
        top_k_dtype=_bc_dtype(per_row["top_k"].dtype) if "top_k" in per_row else _C.DType.int32,
        top_p_per_row="top_p" in per_row, min_p_per_row="min_p" in per_row, seeds_per_row=True,
        seeds_dtype=_bc_dtype(seeds.dtype))
    outs = [("tokens", (b,), jnp.int32)] + ([("logprobs", (b,), jnp.float32)] if return_logprobs else [])
    got = _launch(desc, _C.SamplingPlan.select, ins, outs)
    return (got[0], got[1]) if return_logprobs else got[0]


def apply_penalties(logits, output_tokens=None, *, prompt_tokens=None, repetition_penalty=1.0, presence_penalty=0.0,
                    frequency_penalty=0.0):
    """baracuda.apply_penalties on JAX arrays (one custom call, jit-able): the penalised logits (the
    input's buffer reused when XLA can: the op is in place). Token lists int32 / int64 [B, L] (entries
    outside [0, V) are padding); each penalty a number or a per-row float32 array [B]."""
    per_row = {}
    scalars = _interop.split_per_row("apply_penalties", per_row,
                                     (("repetition_penalty", repetition_penalty, 1.0, float),
                                      ("presence_penalty", presence_penalty, 0.0, float),
                                      ("frequency_penalty", frequency_penalty, 0.0, float)))
    ins = [_operand("logits", logits)] + [_operand(n, t) for n, t in per_row.items()]
    for name, t in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        if t is not None:
            ins.append(_operand(name, t))
    desc = _C.PenaltiesDescriptor(
        _spec_of(logits), None if prompt_tokens is None else _spec_of(prompt_tokens),
        None if output_tokens is None else _spec_of(output_tokens), repetition=scalars["repetition_penalty"],
        presence=scalars["presence_penalty"], frequency=scalars["frequency_penalty"],
        repetition_per_row="repetition_penalty" in per_row, presence_per_row="presence_penalty" in per_row,
        frequency_per_row="frequency_penalty" in per_row)
    return _launch(desc, _C.PenaltiesPlan.select, ins, [("logits", logits.shape, logits.dtype)], aliases={0: 0})[0]


# ---- KV-cache append (the caches updated through aliased outputs) ----------------------------------

def kv_cache_append(key, value, key_cache, value_cache, slot_mapping, *, k_scale=None, v_scale=None):
    """baracuda.kv_cache_append on JAX arrays: returns the updated caches (key_cache, or (key_cache,
    value_cache)); the custom call's outputs alias the cache inputs, so a jitted decode step that
    donates its caches (``jax.jit(..., donate_argnums=...)``) appends in place with no copy. The same
    rules as the functional form (padding slots skipped, fp8 caches quantized with the scales)."""
    _kv_cache_check_pairs(value, value_cache, k_scale, v_scale)
    desc = _C.KvCacheDescriptor(
        _spec_of(key), _spec_of(key_cache), None if value is None else _spec_of(value),
        None if value_cache is None else _spec_of(value_cache), slot_dtype=_bc_dtype(slot_mapping.dtype),
        scales=k_scale is not None, scale_per_head=k_scale is not None and int(k_scale.size) > 1)
    ins = [_operand("key", key), _operand("key_cache", key_cache)]
    outs = [("key_cache", key_cache.shape, key_cache.dtype)]
    aliases = {1: 0}
    if value is not None:
        ins += [_operand("value", value), _operand("value_cache", value_cache)]
        outs.append(("value_cache", value_cache.shape, value_cache.dtype))
        aliases[3] = 1
    ins.append(_operand("slot_mapping", slot_mapping))
    for name, t in (("k_scale", k_scale), ("v_scale", v_scale)):
        if t is not None:
            ins.append(_operand(name, t))
    got = _launch(desc, _C.KvCachePlan.select, ins, outs, aliases=aliases)
    return got[0] if value is None else (got[0], got[1])


# ---- paged decode attention (inference: no vjp) ---------------------------------------------------

def paged_attention(q, k_cache, v_cache, block_table, seq_lens, *, causal: bool = True, scale=None, window=None,
                    softcap=None, alibi_slopes=None, sinks=None, max_seqlen_k=None, num_splits: int = 0,
                    kernel: str = "auto", return_lse: bool = False, k_scale=None, v_scale=None):
    """baracuda.paged_attention on JAX arrays (one custom call; jit-able with the lengths and the
    block table as traced int32 arrays: a new length needs no retrace); fp8 caches with k_scale /
    v_scale as the functional form. Returns out, or (out, lse)."""
    if (k_scale is None) != (v_scale is None):
        raise InvalidArgument("paged_attention: k_scale and v_scale go together")
    wl, wr = (-1, -1) if window is None else (int(window[0]), int(window[1]))
    desc = _C.PagedAttentionDescriptor(
        _spec_of(q), _spec_of(k_cache), _spec_of(v_cache), _spec_of(q), int(block_table.shape[-1]),
        scale=None if scale is None else float(scale), causal=bool(causal), window_left=wl, window_right=wr,
        softcap=float(softcap or 0.0), alibi=alibi_slopes is not None, sinks=sinks is not None, lse=bool(return_lse),
        max_seqlen_k=int(max_seqlen_k or 0), num_splits=int(num_splits), kernel=str(kernel),
        kv_scales=k_scale is not None, scale_per_head=k_scale is not None and int(k_scale.size) > 1)
    ins = [_operand("q", q), _operand("k_cache", k_cache), _operand("v_cache", v_cache),
           _operand("block_table", block_table), _operand("seq_lens", seq_lens)]
    if k_scale is not None:
        ins += [_operand("k_scale", k_scale), _operand("v_scale", v_scale)]
    if alibi_slopes is not None:
        ins.append(_operand("alibi_slopes", alibi_slopes))
    if sinks is not None:
        ins.append(_operand("sinks", sinks))
    outs = [("out", q.shape, q.dtype)]
    if return_lse:
        sq = 1 if q.ndim == 3 else q.shape[1]
        outs.append(("lse", (q.shape[0], q.shape[-2], sq), jnp.float32))
    got = _launch(desc, _C.PagedAttentionPlan.select, ins, outs)
    return (got[0], got[1]) if return_lse else got[0]


def merge_attention_states(out_a, lse_a, out_b, lse_b):
    """Merge two attention results over disjoint key sets (baracuda.merge_attention_states): out_a, out_b
    [..., H, D], lse_a, lse_b [..., H] float32 -> (out, lse). One custom call; not differentiable."""
    desc = _C.AttentionMergeDescriptor(_spec_of(out_a), _spec_of(lse_a), _spec_of(out_b), _spec_of(lse_b),
                                       _spec(out_a.shape, out_a.dtype), _spec(lse_a.shape, jnp.float32))
    ins = [_operand("out_a", out_a), _operand("lse_a", lse_a), _operand("out_b", out_b), _operand("lse_b", lse_b)]
    out, lse = _launch(desc, _C.AttentionMergePlan.select, ins,
                       [("out", out_a.shape, out_a.dtype), ("lse", lse_a.shape, jnp.float32)])
    return out, lse
