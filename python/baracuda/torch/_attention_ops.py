"""torch.ops.baracuda.attention and attention_backward: the attention family on _ops' mechanism
(define: CUDA kernel, fake kernel, autograd formula through K)."""
import torch

from .. import _C
from ._ops import K, _spec, define, validate

_SCORE_ARGS = ("float? scale, bool causal, str causal_alignment, int window_left, int window_right, float softcap, "
               "int max_seqlen_q, int max_seqlen_k")
_EXTRA_ARGS = "Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, Tensor? seqused_k, Tensor? alibi_slopes, Tensor? sinks"


def _stats(q):
    return torch.float64 if q.dtype == torch.float64 else torch.float32


def _forward_outputs(q, v, cu_seqlens_q):
    out = q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],))
    lse_shape = (q.shape[1], q.shape[0]) if cu_seqlens_q is not None else (q.shape[0], q.shape[2], q.shape[1])
    return out, q.new_empty(lse_shape, dtype=_stats(q))


def _batch(cu_seqlens_q):
    return int(cu_seqlens_q.shape[0]) - 1 if cu_seqlens_q is not None else 0


def _launch(op, tensors, cu_seqlens_q, scale, causal, alignment, wl, wr, softcap, msq, msk, kernel, deterministic):
    # deterministic=True, or torch.use_deterministic_algorithms(True), asks for the bitwise-reproducible backward
    q = tensors["q"]
    deterministic = bool(deterministic) or torch.are_deterministic_algorithms_enabled()
    _C.attention_call(op, tensors, scale, bool(causal), alignment, int(wl), int(wr), float(softcap), _batch(cu_seqlens_q),
                      int(msq), int(msk), deterministic, kernel, None,
                      lambda n: torch.empty((int(n),), dtype=torch.uint8, device=q.device))


def _attention_impl(q, k, v, cu_q, cu_k, seqused_k, alibi, sinks, scale, causal, alignment, wl, wr, softcap, msq, msk,
                    kernel, deterministic):
    out, lse = _forward_outputs(q, v, cu_q)
    _launch("attention", {"q": q, "k": k, "v": v, "out": out, "lse": lse, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k,
                          "seqused_k": seqused_k, "alibi_slopes": alibi, "sinks": sinks},
            cu_q, scale, causal, alignment, wl, wr, softcap, msq, msk, kernel, deterministic)
    return out, lse


def _descriptor(op, q, k, v, out, cu_q, seqused_k, alibi, sinks, scale, causal, alignment, wl, wr, softcap, msq, msk,
                kernel, lse):
    return _C.AttentionDescriptor(op, _spec(q), _spec(k), _spec(v), _spec(out), scale=scale, causal=bool(causal),
                                  causal_alignment=alignment, window_left=int(wl), window_right=int(wr),
                                  softcap=float(softcap), alibi=0 if alibi is None else alibi.dim(),
                                  sinks=sinks is not None, varlen=cu_q is not None, batch=_batch(cu_q),
                                  max_seqlen_q=int(msq), max_seqlen_k=int(msk), seqused_k=seqused_k is not None,
                                  lse=lse, kernel=kernel)


def _attention_fake(q, k, v, cu_q, cu_k, seqused_k, alibi, sinks, scale, causal, alignment, wl, wr, softcap, msq, msk,
                    kernel, deterministic):
    out, lse = _forward_outputs(q, v, cu_q)
    args = (cu_q, seqused_k, alibi, sinks, scale, causal, alignment, wl, wr, softcap, msq, msk, kernel)
    validate(("attention",) + tuple(a for a in args if not isinstance(a, torch.Tensor)) +
             tuple(a is None for a in (cu_q, seqused_k, alibi, sinks)), [q, k, v, out],
             lambda: _C.AttentionPlan.select(_descriptor("attention", q, k, v, out, *args, True)))
    return out, lse


def _attention_setup(ctx, inputs, output):
    q, k, v, cu_q, cu_k, seqused_k, alibi, sinks = inputs[:8]
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, seqused_k, alibi, sinks)
    ctx.params = inputs[8:16]
    ctx.deterministic = inputs[17]


def _attention_backward(ctx, grad_out, grad_lse):
    q, k, v, out, lse, cu_q, cu_k, seqused_k, alibi, sinks = ctx.saved_tensors
    if grad_out is None:
        return (None,) * 18
    if grad_out.stride(-1) != 1:
        grad_out = grad_out.contiguous()
    gq, gk, gv, gs = K.attention_backward(grad_out, q, k, v, out, lse, cu_q, cu_k, seqused_k, alibi, sinks,
                                          *ctx.params, ctx.deterministic)
    return (gq, gk, gv, None, None, None, None, gs if sinks is not None else None) + (None,) * 10


def _backward_outputs(q, k, v, sinks):
    gs = q.new_empty(tuple(sinks.shape) if sinks is not None else (0,), dtype=_stats(q))
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), gs


def _attention_bwd_impl(grad, q, k, v, out, lse, cu_q, cu_k, seqused_k, alibi, sinks, scale, causal, alignment, wl, wr,
                        softcap, msq, msk, deterministic):
    gq, gk, gv, gs = _backward_outputs(q, k, v, sinks)
    _launch("attention_backward",
            {"q": q, "k": k, "v": v, "out": out, "lse": lse, "grad_out": grad, "grad_q": gq, "grad_k": gk,
             "grad_v": gv, "grad_sinks": gs if sinks is not None else None, "cu_seqlens_q": cu_q,
             "cu_seqlens_k": cu_k, "seqused_k": seqused_k, "alibi_slopes": alibi, "sinks": sinks},
            cu_q, scale, causal, alignment, wl, wr, softcap, msq, msk, "auto", deterministic)
    return gq, gk, gv, gs


def _attention_bwd_fake(grad, q, k, v, out, lse, cu_q, cu_k, seqused_k, alibi, sinks, scale, causal, alignment, wl, wr,
                        softcap, msq, msk, deterministic):
    return _backward_outputs(q, k, v, sinks)


define("attention",
       f"(Tensor q, Tensor k, Tensor v, {_EXTRA_ARGS}, {_SCORE_ARGS}, str kernel_choice, bool deterministic) -> "
       "(Tensor, Tensor)",
       _attention_impl, _attention_fake, _attention_backward, _attention_setup)
define("attention_backward",
       f"(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, {_EXTRA_ARGS}, {_SCORE_ARGS}, "
       "bool deterministic) -> "
       "(Tensor, Tensor, Tensor, Tensor)", _attention_bwd_impl, _attention_bwd_fake)
