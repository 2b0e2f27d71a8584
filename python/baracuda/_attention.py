"""Functional attention: ``attention`` / ``attention_backward`` over [B, S, H, D] tensors (or packed
variable-length sequences), and ``scaled_dot_product_attention`` for torch's [B, H, S, D] form.

The plan (``AttentionPlan``) picks cuDNN's fused attention where the build has it and cuDNN takes the
case (bf16 / f16, dense or packed, no softcap / ALiBi), else our flash kernel (bf16 / f16, head dims
64, 96, 128, 256), else our rowwise kernel (every float dtype, head dims up to 256); ``plan.sku``
says which. Outputs are allocated in q's framework unless given. See ``baracuda/attention.h`` for the exact rules.
"""
from typing import Any, Optional, Tuple

from . import _C, _interop
from ._dtypes import DType
from ._types import DLPackTensor, Stream
from .errors import InvalidArgument, Unsupported


def _stats_dtype(d):
    return DType.float64 if d == DType.float64 else DType.float32


def _lse_shape(q, varlen):
    if varlen:
        return (q.shape[1], q.shape[0])
    return (q.shape[0], q.shape[2], q.shape[1])


def _check_tensors(q, k, v, fn):
    for name, t in (("q", q), ("k", k), ("v", v)):
        _interop.require_array(fn, name, t)
        if _interop.framework(t) == "numpy":
            raise InvalidArgument(f"{fn}: {name} is a numpy (CPU) array; expected a CUDA tensor")


def check_rules(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, window, fn="attention"):
    """The argument rules every attention entry shares (the functional, baracuda.torch and
    baracuda.jax forms): no dropout, packed-sequence arguments together, window a pair of ints.
    Returns (varlen, window_left, window_right)."""
    if dropout_p:
        raise Unsupported(f"{fn}: dropout_p={dropout_p!r}; attention dropout is not supported (pass 0.0)")
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise InvalidArgument(f"{fn}: cu_seqlens_q and cu_seqlens_k go together (packed sequences)")
        if max_seqlen_q is None or max_seqlen_k is None:
            raise InvalidArgument(f"{fn}: packed sequences need max_seqlen_q and max_seqlen_k (ints, at least every "
                                  "sequence's length: they size the grid without reading the offsets on the host)")
        if len(cu_seqlens_q.shape) != 1 or cu_seqlens_q.shape[0] < 1:
            raise InvalidArgument(f"{fn}: cu_seqlens_q has shape {tuple(cu_seqlens_q.shape)}; expected [batch + 1]")
    elif max_seqlen_q is not None or max_seqlen_k is not None:
        raise InvalidArgument(f"{fn}: max_seqlen_q / max_seqlen_k are for packed sequences (with cu_seqlens_q / "
                              "cu_seqlens_k)")
    if window is None:
        return varlen, -1, -1
    try:
        left, right = window
        return varlen, int(left), int(right)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{fn}: window must be a (left, right) pair of ints (-1: unbounded), got {window!r}")


def _host_ints(t):
    if hasattr(t, "tolist"):
        return [int(v) for v in t.tolist()]
    import numpy as np
    return [int(v) for v in np.asarray(t).tolist()]


def validate_seqlens(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, total_q, total_k, fn="attention"):
    """The opt-in host check of packed sequences (it reads the offsets to the host: a synchronization):
    offsets start at 0, never decrease, end within the tensors, and no sequence is longer than its
    max_seqlen. Raises InvalidArgument naming the argument. Without it the kernels clamp bad offsets
    to the tensors (no out-of-bounds access) and leave rows past max_seqlen unwritten."""
    for name, cu, total, mname, mx in (("cu_seqlens_q", cu_seqlens_q, total_q, "max_seqlen_q", max_seqlen_q),
                                        ("cu_seqlens_k", cu_seqlens_k, total_k, "max_seqlen_k", max_seqlen_k)):
        vals = _host_ints(cu)
        if not vals or vals[0] != 0:
            raise InvalidArgument(f"{fn}: {name} must start at 0, got {vals[:4]}")
        for i in range(1, len(vals)):
            n = vals[i] - vals[i - 1]
            if n < 0:
                raise InvalidArgument(f"{fn}: {name} decreases at index {i} ({vals[i - 1]} -> {vals[i]})")
            if n > mx:
                raise InvalidArgument(f"{fn}: sequence {i - 1} has {n} rows (from {name}), more than {mname} = {mx}")
        if vals[-1] > total:
            raise InvalidArgument(f"{fn}: {name} ends at {vals[-1]}, past the tensor's {total} rows")


def attention(q: DLPackTensor, k: DLPackTensor, v: DLPackTensor, *, causal: bool = False,
              scale: Optional[float] = None, window: Optional[Tuple[int, int]] = None,
              softcap: Optional[float] = None, alibi_slopes: Optional[DLPackTensor] = None,
              sinks: Optional[DLPackTensor] = None, cu_seqlens_q: Optional[DLPackTensor] = None,
              cu_seqlens_k: Optional[DLPackTensor] = None, max_seqlen_q: Optional[int] = None,
              max_seqlen_k: Optional[int] = None, seqused_k: Optional[DLPackTensor] = None,
              causal_alignment: str = "bottom_right", return_lse: bool = False, deterministic: bool = False,
              dropout_p: float = 0.0, kernel: str = "auto", check_seqlens: bool = False,
              out: Optional[DLPackTensor] = None, lse: Optional[DLPackTensor] = None, stream: Stream = None) -> Any:
    """softmax(q k^T * scale + rules) v per (sequence, head).

    q [B, Sq, Hq, D], k [B, Sk, Hkv, D], v [B, Sk, Hkv, Dv] (any batch / sequence / head strides,
    last dim contiguous; Hq a multiple of Hkv: GQA / MQA), or packed [total, H, D] with int32
    ``cu_seqlens_q`` / ``cu_seqlens_k`` [batch + 1] and ``max_seqlen_q`` / ``max_seqlen_k``.
    ``causal``: bottom-right aligned when Sq != Sk (flash-attention's rule; ``causal_alignment=
    "top_left"`` is torch's is_causal). ``window=(left, right)``: sliding window (-1 unbounded);
    ``softcap``: s = softcap * tanh(s / softcap); ``alibi_slopes`` (f32 [Hq] or [B, Hq]);
    ``sinks`` ([Hq], f32; f64 for f64): a per-head logit in the softmax's denominator.
    Returns out [.., Hq, Dv], or (out, lse) with ``return_lse`` (lse [B, Hq, Sq] or [Hq, total_q],
    f32; what attention_backward reads). ``kernel``: "auto", "cudnn", "flash" or "rowwise". ``check_seqlens``:
    validate packed offsets on the host first (a synchronization; see validate_seqlens)."""
    _check_tensors(q, k, v, "attention")
    varlen, wl, wr = check_rules(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, window)
    if varlen and check_seqlens:
        validate_seqlens(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, q.shape[0], k.shape[0])
    d = _interop.dtype_of(q)
    shape = tuple(q.shape[:-1]) + (v.shape[-1],)
    o, fo = (out, _interop._identity) if out is not None else _interop.output(q, shape, d)
    lse_buf = flse = None
    if return_lse or lse is not None:
        lse_buf, flse = (lse, _interop._identity) if lse is not None else _interop.output(
            q, _lse_shape(q, varlen), _stats_dtype(d))
    batch = int(cu_seqlens_q.shape[0]) - 1 if varlen else 0
    tensors = {"q": q, "k": k, "v": v, "out": o, "lse": lse_buf, "cu_seqlens_q": cu_seqlens_q,
               "cu_seqlens_k": cu_seqlens_k, "seqused_k": seqused_k, "alibi_slopes": alibi_slopes, "sinks": sinks}
    _C.attention_call("attention", tensors, None if scale is None else float(scale), bool(causal), causal_alignment,
                      wl, wr, float(softcap or 0.0), batch, int(max_seqlen_q or 0), int(max_seqlen_k or 0),
                      bool(deterministic), kernel, stream, _interop.workspace_allocator(q))
    o = fo(o)
    return (o, flse(lse_buf)) if return_lse else o


def attention_backward(grad_out: DLPackTensor, q: DLPackTensor, k: DLPackTensor, v: DLPackTensor,
                       out: DLPackTensor, lse: DLPackTensor, *, causal: bool = False, scale: Optional[float] = None,
                       window: Optional[Tuple[int, int]] = None, softcap: Optional[float] = None,
                       alibi_slopes: Optional[DLPackTensor] = None, sinks: Optional[DLPackTensor] = None,
                       cu_seqlens_q: Optional[DLPackTensor] = None, cu_seqlens_k: Optional[DLPackTensor] = None,
                       max_seqlen_q: Optional[int] = None, max_seqlen_k: Optional[int] = None,
                       seqused_k: Optional[DLPackTensor] = None, causal_alignment: str = "bottom_right",
                       deterministic: bool = False, kernel: str = "auto", grad_q: Optional[DLPackTensor] = None,
                       grad_k: Optional[DLPackTensor] = None, grad_v: Optional[DLPackTensor] = None,
                       grad_sinks: Optional[DLPackTensor] = None, stream: Stream = None) -> Any:
    """Gradients of ``attention`` from its saved ``out`` and ``lse`` (same keyword arguments as the
    forward): returns (grad_q, grad_k, grad_v), and grad_sinks last when ``sinks`` is given.
    Deterministic (fixed summation order; GQA groups summed in order)."""
    _check_tensors(q, k, v, "attention_backward")
    varlen, wl, wr = check_rules(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, 0.0, window,
                                 "attention_backward")
    d = _interop.dtype_of(q)
    outs = []
    for given, like in ((grad_q, q), (grad_k, k), (grad_v, v)):
        outs.append((given, _interop._identity) if given is not None else _interop.output(q, tuple(like.shape), d))
    gs = fgs = None
    if sinks is not None:
        gs, fgs = (grad_sinks, _interop._identity) if grad_sinks is not None else _interop.output(
            q, tuple(sinks.shape), _stats_dtype(d))
    batch = int(cu_seqlens_q.shape[0]) - 1 if varlen else 0
    tensors = {"q": q, "k": k, "v": v, "out": out, "lse": lse, "grad_out": grad_out, "grad_q": outs[0][0],
               "grad_k": outs[1][0], "grad_v": outs[2][0], "grad_sinks": gs, "cu_seqlens_q": cu_seqlens_q,
               "cu_seqlens_k": cu_seqlens_k, "seqused_k": seqused_k, "alibi_slopes": alibi_slopes, "sinks": sinks}
    _C.attention_call("attention_backward", tensors, None if scale is None else float(scale), bool(causal),
                      causal_alignment, wl, wr, float(softcap or 0.0), batch, int(max_seqlen_q or 0),
                      int(max_seqlen_k or 0), bool(deterministic), kernel, stream, _interop.workspace_allocator(q))
    res = [f(t) for t, f in outs]
    if sinks is not None:
        res.append(fgs(gs))
    return tuple(res)


def _to_bshd(t):
    return t.transpose(1, 2) if hasattr(t, "transpose") else t.swapaxes(1, 2)


def scaled_dot_product_attention(query: DLPackTensor, key: DLPackTensor, value: DLPackTensor,
                                 attn_mask: Optional[DLPackTensor] = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> Any:
    """torch.nn.functional.scaled_dot_product_attention's form: [B, H, S, D] in and out (views, no
    copies), is_causal top-left aligned as torch's. attn_mask is not supported (use causal, window,
    softcap or alibi_slopes of ``attention``); GQA works whether or not enable_gqa is set."""
    if attn_mask is not None:
        raise Unsupported("scaled_dot_product_attention: attn_mask is not supported; express the mask with "
                          "baracuda.attention's causal / window / alibi_slopes")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if len(getattr(t, "shape", ())) != 4:
            raise InvalidArgument(f"scaled_dot_product_attention: {name} must be [B, H, S, D], got shape "
                                  f"{tuple(getattr(t, 'shape', ()))}")
    o = attention(_to_bshd(query), _to_bshd(key), _to_bshd(value), causal=is_causal, scale=scale,
                  causal_alignment="top_left", dropout_p=dropout_p)
    return _to_bshd(o)


FUNCTIONS = {"attention": attention, "attention_backward": attention_backward,
             "scaled_dot_product_attention": scaled_dot_product_attention}
