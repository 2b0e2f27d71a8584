"""Functional paged attention: ``paged_attention`` attends a batch of requests' new query tokens
over their pages of a KV cache (the decode step of an inference engine). See
``baracuda/paged_attention.h`` for the exact rules."""
from typing import Any, Optional, Tuple

from . import _C, _interop
from ._dtypes import DType
from ._types import DLPackTensor, Stream
from .errors import InvalidArgument


def _window(window, fn):
    if window is None:
        return -1, -1
    try:
        left, right = window
        return int(left), int(right)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{fn}: window must be a (left, right) pair of ints (-1: unbounded), got {window!r}")


def paged_attention(q: DLPackTensor, k_cache: DLPackTensor, v_cache: DLPackTensor, block_table: DLPackTensor,
                    seq_lens: DLPackTensor, *, causal: bool = True, scale: Optional[float] = None,
                    window: Optional[Tuple[int, int]] = None, softcap: Optional[float] = None,
                    alibi_slopes: Optional[DLPackTensor] = None, sinks: Optional[DLPackTensor] = None,
                    max_seqlen_k: Optional[int] = None, num_splits: int = 0, kernel: str = "auto",
                    return_lse: bool = False, k_scale: Optional[DLPackTensor] = None,
                    v_scale: Optional[DLPackTensor] = None,
                    out: Optional[DLPackTensor] = None, lse: Optional[DLPackTensor] = None,
                    stream: Stream = None) -> Any:
    """Decode attention over a paged KV cache.

    q [B, Sq, Hq, D] (the Sq new tokens of each request; [B, Hq, D] for one), k_cache / v_cache
    [pages, page_size, Hkv, D] (a heads-first cache as its permuted view), block_table int32
    [B, max_pages] (request b's key j is in page block_table[b, j // page_size]), seq_lens int32 [B]
    (keys per request, the new tokens included: append them first with ``kv_cache_append``). Query
    i of request b sits at position seq_lens[b] - Sq + i; ``causal`` (default) lets it see keys up
    to there. ``window=(left, right)`` bounds them further; ``softcap``, ``alibi_slopes`` (f32
    [Hq]), ``sinks`` (f32 [Hq]) as ``attention``. Lengths and page ids are read on the device (a
    page id outside the cache hides its keys): nothing syncs, and a captured CUDA graph replays for
    new lengths. ``max_seqlen_k`` (the longest context you expect; default the table's capacity)
    and ``num_splits`` (0: chosen) set how long contexts are split across blocks. ``kernel``:
    "auto", "mma" (tensor cores: bf16 / f16, head dims 64, 96, 128, 256), "rowwise" (CUDA cores:
    also f32 and any head dim up to 256; one split) or "cudnn" (cuDNN's fused attention over the
    pages, what "auto" takes where built for a prefill of 64 or more tokens: bf16 / f16, no softcap
    or ALiBi; a page id outside the cache reads page 0 there). fp8 caches (e4m3 / e5m2, written by
    ``kv_cache_append`` from bf16 / f16 / f32 keys) run on the tensor cores for bf16 / f16 q
    (converted to 16 bits in registers), else on the rowwise kernel; for a prefill under bf16 q,
    cuDNN reads a bf16 copy of the table's pages made in the workspace (4 bytes per element the
    table addresses, K and V; "auto" takes it up to 1 GiB, or the preference's workspace limit).
    Keys and values are the cache times ``k_scale`` / ``v_scale`` (f32 [1] or [Hkv], the append's
    scales; 1 when not given).
    Returns out (q's shape), or (out, lse [B, Hq, Sq] f32) with ``return_lse``."""
    fn = "paged_attention"
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("block_table", block_table),
                    ("seq_lens", seq_lens)):
        _interop.require_array(fn, name, t)
    wl, wr = _window(window, fn)
    d = _interop.dtype_of(q)
    o, fo = (out, _interop._identity) if out is not None else _interop.output(q, tuple(q.shape), d)
    lse_buf = flse = None
    if return_lse or lse is not None:
        sq = 1 if len(q.shape) == 3 else q.shape[1]
        lse_buf, flse = (lse, _interop._identity) if lse is not None else _interop.output(
            q, (q.shape[0], q.shape[-2], sq), DType.float32)
    tensors = {"q": q, "k_cache": k_cache, "v_cache": v_cache, "block_table": block_table, "seq_lens": seq_lens,
               "out": o, "lse": lse_buf, "alibi_slopes": alibi_slopes, "sinks": sinks, "k_scale": k_scale,
               "v_scale": v_scale}
    _C.paged_attention_call(tensors, None if scale is None else float(scale), bool(causal), wl, wr,
                            float(softcap or 0.0), int(max_seqlen_k or 0), int(num_splits), str(kernel), stream,
                            _interop.workspace_allocator(q))
    o = fo(o)
    return (o, flse(lse_buf)) if return_lse else o


def merge_attention_states(out_a: DLPackTensor, lse_a: DLPackTensor, out_b: DLPackTensor, lse_b: DLPackTensor, *,
                           out: Optional[DLPackTensor] = None, lse: Optional[DLPackTensor] = None,
                           stream: Stream = None) -> Any:
    """Merge two attention results over disjoint key sets (cascade attention: a shared prefix, then
    each request's own keys; or the partial results of a split): out_a, out_b [..., H, D] (bf16 / f16 /
    f32) with their log-sum-exps lse_a, lse_b [..., H] (float32, natural log, as ``paged_attention`` /
    ``attention`` return them; their [B, H, Sq] lse is passed as ``lse.transpose(1, 2)``, no copy).

    out = (e^lse_a out_a + e^lse_b out_b) / (e^lse_a + e^lse_b) and lse = log(e^lse_a + e^lse_b), in
    float32, rounded once; a row whose two lse are -inf (no key on either side) gets out = 0, lse =
    -inf. Up to three leading dims; any strides, head_dim contiguous. ``out`` may be out_a or out_b
    itself and ``lse`` lse_a or lse_b (in place). Returns (out, lse)."""
    fn = "merge_attention_states"
    for name, t in (("out_a", out_a), ("lse_a", lse_a), ("out_b", out_b), ("lse_b", lse_b)):
        _interop.require_array(fn, name, t)
    o, fo = (out, _interop._identity) if out is not None else _interop.output(
        out_a, tuple(out_a.shape), _interop.dtype_of(out_a))
    l, fl = (lse, _interop._identity) if lse is not None else _interop.output(
        out_a, tuple(out_a.shape[:-1]), DType.float32)
    _C.merge_attention_states_call({"out_a": out_a, "lse_a": lse_a, "out_b": out_b, "lse_b": lse_b, "out": o,
                                    "lse": l}, stream)
    return fo(o), fl(l)


FUNCTIONS = {"paged_attention": paged_attention, "merge_attention_states": merge_attention_states}
