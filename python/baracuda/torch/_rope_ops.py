"""torch.ops.baracuda.rope, kv_cache_append, paged_attention, merge_attention_states, sample and apply_penalties: the
serving-path families on _ops' mechanism. rope rotates q and k (k may be absent: its output is then an empty tensor), and its
backward is the same op with the inverse rotation; kv_cache_append writes the caches in place and
paged_attention attends over them (inference ops: no autograd)."""
import torch

from .. import _C, _rope
from ._ops import K, _spec, define, validate

# factor, low_freq_factor, high_freq_factor, original_max_positions, beta_fast, beta_slow, attention_factor
_FREQ_FIELDS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_positions", "beta_fast", "beta_slow",
                "attention_factor")


# RopeFrequencies' defaults, for the fields a scaling dict leaves out.
_FREQ_DEFAULTS = {"factor": 1.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_positions": 0.0,
                  "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 0.0}


def freq_args(theta, scaling):
    """(theta, rule, params) for the schema, from rope()'s theta and transformers-style scaling
    (plain Python: torch.compile traces it)."""
    theta, rule, kw = _rope.scaling_fields(theta, scaling)
    return theta, rule, [float(kw.get(n, _FREQ_DEFAULTS[n])) for n in _FREQ_FIELDS]


def _freqs(theta, rule, params):
    kw = dict(zip(_FREQ_FIELDS, params))
    kw["original_max_positions"] = int(kw["original_max_positions"])
    return _C.RopeFrequencies(theta=float(theta), scaling=rule, **kw)


def _outputs(q, k):
    return torch.empty_like(q), (torch.empty_like(k) if k is not None else q.new_empty((0,)))


def _rope_impl(q, k, cos, sin, positions, style, rotary_dim, theta, rule, params, inverse):
    qo, ko = _outputs(q, k)
    _C.rope_call({"q": q, "k": k, "q_out": qo, "k_out": ko if k is not None else None, "cos": cos, "sin": sin,
                  "positions": positions}, style, int(rotary_dim), bool(inverse), _freqs(theta, rule, params), None)
    return qo, ko


def _rope_fake(q, k, cos, sin, positions, style, rotary_dim, theta, rule, params, inverse):
    qo, ko = _outputs(q, k)

    def make():
        return _C.RopePlan.select(_rope.descriptor(_spec, q, k, cos, positions, style, rotary_dim,
                                                   _freqs(theta, rule, params), inverse))

    validate(("rope", style, int(rotary_dim), float(theta), rule, tuple(params), bool(inverse), cos is None,
              positions is None), [t for t in (q, k, cos, positions) if t is not None], make)
    return qo, ko


def _rope_setup(ctx, inputs, output):
    q, k, cos, sin, positions = inputs[:5]
    ctx.has_k = k is not None
    ctx.save_for_backward(cos, sin, positions, q)
    ctx.params = inputs[5:10]
    ctx.inverse = inputs[10]


def _rope_backward(ctx, grad_q, grad_k):
    cos, sin, positions, q = ctx.saved_tensors
    if grad_q is None:
        grad_q = torch.zeros_like(q)
    if not ctx.has_k:
        grad_k = None  # the placeholder output's gradient
    dense = [g.contiguous() if g is not None and g.stride(-1) != 1 else g for g in (grad_q, grad_k)]
    gq, gk = K.rope(dense[0], dense[1], cos, sin, positions, *ctx.params, not ctx.inverse)
    return (gq, gk if grad_k is not None else None) + (None,) * 9


define("rope",
       "(Tensor q, Tensor? k, Tensor? cos, Tensor? sin, Tensor? positions, str style, int rotary_dim, float theta, "
       "str scaling, float[] scaling_params, bool inverse) -> (Tensor, Tensor)",
       _rope_impl, _rope_fake, _rope_backward, _rope_setup)


def _rope_append_tensors(q, k, v, k_cache, v_cache, slot_mapping, cos, sin, positions, k_scale, v_scale):
    return {"q": q, "k": k, "q_out": q, "k_out": k, "cos": cos, "sin": sin, "positions": positions, "v": v,
            "k_cache": k_cache, "v_cache": v_cache, "slot_mapping": slot_mapping, "k_scale": k_scale,
            "v_scale": v_scale}


def _rope_append_impl(q, k, v, k_cache, v_cache, slot_mapping, cos, sin, positions, style, rotary_dim, theta, rule,
                      params, k_scale=None, v_scale=None):
    _C.rope_call(_rope_append_tensors(q, k, v, k_cache, v_cache, slot_mapping, cos, sin, positions, k_scale, v_scale),
                 style, int(rotary_dim), False, _freqs(theta, rule, params), None)


def _rope_append_fake(q, k, v, k_cache, v_cache, slot_mapping, cos, sin, positions, style, rotary_dim, theta, rule,
                      params, k_scale=None, v_scale=None):
    def make():
        return _C.RopePlan.select(_rope.descriptor(_spec, q, k, cos, positions, style, rotary_dim,
                                                   _freqs(theta, rule, params), k_cache=k_cache, v=v,
                                                   v_cache=v_cache, slot_mapping=slot_mapping, k_scale=k_scale))

    validate(("rope_append", style, int(rotary_dim), float(theta), rule, tuple(params), cos is None, positions is None,
              k_scale is None),
             [t for t in (q, k, v, k_cache, v_cache, slot_mapping, cos, positions, k_scale) if t is not None], make)


define("rope_append",
       "(Tensor(a!) q, Tensor(b!) k, Tensor? v, Tensor(c!) k_cache, Tensor(d!)? v_cache, Tensor slot_mapping, "
       "Tensor? cos, Tensor? sin, Tensor? positions, str style, int rotary_dim, float theta, str scaling, "
       "float[] scaling_params, Tensor? k_scale=None, Tensor? v_scale=None) -> ()",
       _rope_append_impl, _rope_append_fake)


def _kv_cache_append_impl(key, value, key_cache, value_cache, slot_mapping, k_scale=None, v_scale=None):
    _C.kv_cache_append_call({"key": key, "value": value, "key_cache": key_cache, "value_cache": value_cache,
                             "slot_mapping": slot_mapping, "k_scale": k_scale, "v_scale": v_scale}, None)


def _kv_cache_append_fake(key, value, key_cache, value_cache, slot_mapping, k_scale=None, v_scale=None):
    def make():
        return _C.KvCachePlan.select(_C.KvCacheDescriptor(
            _spec(key), _spec(key_cache), None if value is None else _spec(value),
            None if value_cache is None else _spec(value_cache), slot_dtype=_spec(slot_mapping).dtype,
            scales=k_scale is not None, scale_per_head=k_scale is not None and k_scale.numel() > 1))

    validate(("kv_cache_append", k_scale is None),
             [t for t in (key, value, key_cache, value_cache, slot_mapping, k_scale) if t is not None], make)


define("kv_cache_append",
       "(Tensor key, Tensor? value, Tensor(a!) key_cache, Tensor(b!)? value_cache, Tensor slot_mapping, "
       "Tensor? k_scale=None, Tensor? v_scale=None) -> ()",
       _kv_cache_append_impl, _kv_cache_append_fake)


def _paged_outputs(q, want_lse):
    sq = 1 if q.dim() == 3 else q.shape[1]
    lse = q.new_empty((q.shape[0], q.shape[-2], sq) if want_lse else (0,), dtype=torch.float32)
    return torch.empty_like(q), lse


def _paged_attention_impl(q, k_cache, v_cache, block_table, seq_lens, alibi_slopes, sinks, scale, causal, wl, wr,
                          softcap, max_seqlen_k, num_splits, want_lse, kernel_choice="auto", k_scale=None,
                          v_scale=None):
    out, lse = _paged_outputs(q, want_lse)
    _C.paged_attention_call({"q": q, "k_cache": k_cache, "v_cache": v_cache, "block_table": block_table,
                             "seq_lens": seq_lens, "out": out, "lse": lse if want_lse else None,
                             "alibi_slopes": alibi_slopes, "sinks": sinks, "k_scale": k_scale, "v_scale": v_scale},
                            scale, bool(causal), int(wl), int(wr), float(softcap), int(max_seqlen_k), int(num_splits),
                            kernel_choice, None, lambda n: torch.empty((int(n),), dtype=torch.uint8, device=q.device))
    return out, lse


def _paged_attention_fake(q, k_cache, v_cache, block_table, seq_lens, alibi_slopes, sinks, scale, causal, wl, wr,
                          softcap, max_seqlen_k, num_splits, want_lse, kernel_choice="auto", k_scale=None,
                          v_scale=None):
    out, lse = _paged_outputs(q, want_lse)

    def make():
        return _C.PagedAttentionPlan.select(_C.PagedAttentionDescriptor(
            _spec(q), _spec(k_cache), _spec(v_cache), _spec(q), int(block_table.shape[-1]), scale=scale,
            causal=bool(causal), window_left=int(wl), window_right=int(wr), softcap=float(softcap),
            alibi=alibi_slopes is not None, sinks=sinks is not None, lse=bool(want_lse),
            max_seqlen_k=int(max_seqlen_k), num_splits=int(num_splits), kernel=kernel_choice,
            kv_scales=k_scale is not None, scale_per_head=k_scale is not None and k_scale.numel() > 1))

    validate(("paged_attention", scale, bool(causal), int(wl), int(wr), float(softcap), int(max_seqlen_k),
              int(num_splits), bool(want_lse), kernel_choice, alibi_slopes is None, sinks is None,
              None if k_scale is None else k_scale.numel()),
             [q, k_cache, v_cache, block_table], make)
    return out, lse


define("paged_attention",
       "(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, Tensor seq_lens, Tensor? alibi_slopes, "
       "Tensor? sinks, float? scale, bool causal, int window_left, int window_right, float softcap, int max_seqlen_k, "
       "int num_splits, bool want_lse, str kernel_choice=\"auto\", Tensor? k_scale=None, Tensor? v_scale=None) -> "
       "(Tensor, Tensor)",
       _paged_attention_impl, _paged_attention_fake)


def _sample_outputs(logits, want_logprobs):
    b = logits.shape[0]
    return (logits.new_empty((b,), dtype=torch.int64),
            logits.new_empty((b,) if want_logprobs else (0,), dtype=torch.float32))


def _sample_impl(logits, temperature, top_k, top_p, min_p, seeds, t, k, p, mp, seed, offset, want_logprobs):
    tokens, lp = _sample_outputs(logits, want_logprobs)
    _C.sample_call({"logits": logits, "tokens": tokens, "logprobs": lp if want_logprobs else None,
                    "temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p, "seeds": seeds},
                   float(t), int(k), float(p), float(mp), int(seed) & 0xFFFFFFFFFFFFFFFF,
                   int(offset) & 0xFFFFFFFFFFFFFFFF, None)
    return tokens, lp


def _sample_fake(logits, temperature, top_k, top_p, min_p, seeds, t, k, p, mp, seed, offset, want_logprobs):
    def make():
        return _C.SamplingPlan.select(_C.SamplingDescriptor(
            _spec(logits), logprobs=bool(want_logprobs), temperature=float(t), top_k=int(k), top_p=float(p),
            min_p=float(mp), temperature_per_row=temperature is not None, top_k_per_row=top_k is not None,
            top_k_dtype=_spec(top_k).dtype if top_k is not None else _C.DType.int32,
            top_p_per_row=top_p is not None, min_p_per_row=min_p is not None, seeds_per_row=seeds is not None,
            seeds_dtype=_spec(seeds).dtype if seeds is not None else _C.DType.int64))

    validate(("sample", float(t), int(k), float(p), float(mp), bool(want_logprobs)) +
             tuple(x is None for x in (temperature, top_k, top_p, min_p, seeds)), [logits], make)
    return _sample_outputs(logits, want_logprobs)


define("sample",
       "(Tensor logits, Tensor? temperature, Tensor? top_k, Tensor? top_p, Tensor? min_p, Tensor? seeds, "
       "float temperature_value, int top_k_value, float top_p_value, float min_p_value, int seed, int offset, "
       "bool want_logprobs) -> (Tensor, Tensor)",
       _sample_impl, _sample_fake)


def _penalty_tensors(logits, prompt_tokens, output_tokens, rep, pres, freq):
    return {"logits": logits, "prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
            "repetition_penalty": rep, "presence_penalty": pres, "frequency_penalty": freq}


def _apply_penalties_impl(logits, prompt_tokens, output_tokens, rep, pres, freq, r, p, f):
    _C.apply_penalties_call(_penalty_tensors(logits, prompt_tokens, output_tokens, rep, pres, freq), float(r), float(p),
                            float(f), None, lambda n: torch.empty((int(n),), dtype=torch.uint8, device=logits.device))


def _apply_penalties_fake(logits, prompt_tokens, output_tokens, rep, pres, freq, r, p, f):
    def make():
        return _C.PenaltiesPlan.select(_C.PenaltiesDescriptor(
            _spec(logits), None if prompt_tokens is None else _spec(prompt_tokens),
            None if output_tokens is None else _spec(output_tokens), repetition=float(r), presence=float(p),
            frequency=float(f), repetition_per_row=rep is not None, presence_per_row=pres is not None,
            frequency_per_row=freq is not None))

    validate(("apply_penalties", float(r), float(p), float(f)) + tuple(x is None for x in (rep, pres, freq)),
             [t for t in (logits, prompt_tokens, output_tokens) if t is not None], make)


define("apply_penalties",
       "(Tensor(a!) logits, Tensor? prompt_tokens, Tensor? output_tokens, Tensor? repetition_penalty, "
       "Tensor? presence_penalty, Tensor? frequency_penalty, float repetition, float presence, float frequency) -> ()",
       _apply_penalties_impl, _apply_penalties_fake)


def _merge_outputs(out_a, lse_a):
    return torch.empty_like(out_a, memory_format=torch.contiguous_format), torch.empty(
        tuple(lse_a.shape), dtype=torch.float32, device=lse_a.device)


def _merge_impl(out_a, lse_a, out_b, lse_b):
    out, lse = _merge_outputs(out_a, lse_a)
    _C.merge_attention_states_call({"out_a": out_a, "lse_a": lse_a, "out_b": out_b, "lse_b": lse_b, "out": out,
                                    "lse": lse}, None)
    return out, lse


def _merge_fake(out_a, lse_a, out_b, lse_b):
    out, lse = _merge_outputs(out_a, lse_a)
    validate(("merge_attention_states",), [out_a, lse_a, out_b, lse_b], lambda: _C.AttentionMergePlan.select(
        _C.AttentionMergeDescriptor(_spec(out_a), _spec(lse_a), _spec(out_b), _spec(lse_b), _spec(out), _spec(lse))))
    return out, lse


define("merge_attention_states", "(Tensor out_a, Tensor lse_a, Tensor out_b, Tensor lse_b) -> (Tensor, Tensor)",
       _merge_impl, _merge_fake)
