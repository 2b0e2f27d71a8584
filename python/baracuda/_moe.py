"""Functional MoE routing: ``moe_gate`` (which experts, which weights), ``moe_permute`` (tokens into
expert order, with the offsets ``grouped_linear`` takes) and ``moe_unpermute`` (the weighted combine
back), with their backwards. See ``baracuda/moe.h`` for the exact rules."""
from typing import Any, Optional, Tuple

from . import _C, _interop
from ._dtypes import DType
from ._interop import dtype_of
from ._types import DLPackTensor, Stream
from .errors import InvalidArgument


def _matrix(fn, name, v, what):
    _interop.require_array(fn, name, v)
    if len(v.shape) != 2:
        raise InvalidArgument(f"{fn}: {name} has shape {tuple(v.shape)}; expected {what}")


def moe_gate(logits: DLPackTensor, top_k: int, *, scoring: str = "softmax", renormalize: bool = True,
             n_group: int = 1, topk_group: int = 1, group_score: str = "max",
             correction_bias: Optional[DLPackTensor] = None, routed_scaling_factor: float = 1.0,
             stream: Stream = None) -> Tuple[Any, Any]:
    """Routing of tokens to experts: logits [T, E] (float32 / float16 / bfloat16) -> (weights [T, k]
    float32, ids [T, k] int32), the k ids in descending order (ties: the lower id first).

    scores = softmax(logits) (``scoring="softmax"``, Mixtral / Qwen-MoE) or sigmoid(logits)
    (``"sigmoid"``, DeepSeek-V3), float32. Experts are chosen on scores + ``correction_bias`` [E]
    (float32; DeepSeek-V3's load-balancing bias: selection only). ``n_group`` > 1: DeepSeek's grouped
    top-k (the experts in n_group contiguous groups scored by their best score, ``group_score="max"``,
    or their best two summed, ``"top2_sum"``; only the ``topk_group`` best groups compete). weights =
    the chosen scores, divided by their sum with ``renormalize`` (softmax then top-k then
    renormalise is top-k then softmax), times ``routed_scaling_factor``. No host sync."""
    fn = "moe_gate"
    _matrix(fn, "logits", logits, "[tokens, experts]")
    t, k = int(logits.shape[0]), int(top_k)
    if k < 1:
        raise InvalidArgument(f"{fn}: top_k={top_k}; expected >= 1")
    weights, fw = _interop.output(logits, (t, k), DType.float32)
    ids, fi = _interop.output(logits, (t, k), DType.int32)
    _C.moe_gate_call({"logits": logits, "correction_bias": correction_bias, "weights": weights, "ids": ids}, k, False,
                     str(scoring), bool(renormalize), int(n_group), int(topk_group), str(group_score),
                     float(routed_scaling_factor), stream)
    return fw(weights), fi(ids)


def moe_gate_backward(grad_weights: DLPackTensor, logits: DLPackTensor, ids: DLPackTensor, *, scoring: str = "softmax",
                      renormalize: bool = True, n_group: int = 1, topk_group: int = 1, group_score: str = "max",
                      routed_scaling_factor: float = 1.0, stream: Stream = None) -> Any:
    """The gradient of moe_gate's weights w.r.t. logits: grad_weights [T, k] float32 and the forward's
    logits and ids -> grad_logits [T, E] (logits' dtype). The same routing arguments as the forward
    (the correction bias, a constant, is not needed)."""
    fn = "moe_gate_backward"
    _matrix(fn, "logits", logits, "[tokens, experts]")
    _matrix(fn, "ids", ids, "[tokens, top_k]")
    grad, fg = _interop.output(logits, tuple(int(s) for s in logits.shape), dtype_of(logits))
    _C.moe_gate_call({"logits": logits, "ids": ids, "grad_weights": grad_weights, "grad_logits": grad},
                     int(ids.shape[1]), True, str(scoring), bool(renormalize), int(n_group), int(topk_group),
                     str(group_score), float(routed_scaling_factor), stream)
    return fg(grad)


def moe_permute(x: DLPackTensor, ids: DLPackTensor, num_experts: int, *, stream: Stream = None) -> Tuple[Any, Any, Any]:
    """Tokens into expert order: x [T, H], ids [T, k] (int32 / int64) -> (x_sorted [T * k, H],
    offsets [E + 1] int32, pos [T, k] int32). Expert e owns rows offsets[e]..offsets[e + 1] of
    x_sorted (pairs in token order within an expert: the same layout every run), the input
    grouped_linear(x_sorted, w, offsets=offsets) takes; pos[t, j] is the row of pair (t, j). An id
    outside [0, E) (another rank's expert) is dropped: pos -1, rows past offsets[E] unwritten."""
    fn = "moe_permute"
    _matrix(fn, "x", x, "[tokens, hidden]")
    _matrix(fn, "ids", ids, "[tokens, top_k]")
    t, k, h, e = int(x.shape[0]), int(ids.shape[1]), int(x.shape[1]), int(num_experts)
    xs, fx = _interop.output(x, (t * k, h), dtype_of(x))
    offsets, fo = _interop.output(x, (max(e, 0) + 1,), DType.int32)
    pos, fp = _interop.output(x, (int(ids.shape[0]), k), DType.int32)
    _C.moe_permute_call("permute", {"x": x, "ids": ids, "x_sorted": xs, "offsets": offsets, "pos": pos}, e, -1,
                        stream, _interop.workspace_allocator(x))
    return fx(xs), fo(offsets), fp(pos)


def moe_unpermute(y_sorted: DLPackTensor, pos: DLPackTensor, weights: Optional[DLPackTensor] = None, *,
                  out: Optional[DLPackTensor] = None, stream: Stream = None) -> Any:
    """The combine: out[t] = sum_j weights[t, j] * y_sorted[pos[t, j]] (weight 1 without weights), j in
    order, float32 accumulation; pos < 0 (dropped) adds nothing. y_sorted [N, H], pos [T, k] int32
    (moe_permute's), weights [T, k] float32 -> out [T, H]. Also moe_permute's backward."""
    fn = "moe_unpermute"
    _matrix(fn, "y_sorted", y_sorted, "[rows, hidden]")
    _matrix(fn, "pos", pos, "[tokens, top_k]")
    shape = (int(pos.shape[0]), int(y_sorted.shape[1]))
    o, fo = (out, _interop._identity) if out is not None else _interop.output(y_sorted, shape, dtype_of(y_sorted))
    _C.moe_permute_call("unpermute", {"y_sorted": y_sorted, "pos": pos, "weights": weights, "out": o}, 0, -1, stream)
    return fo(o)


def moe_unpermute_backward(grad_out: DLPackTensor, pos: DLPackTensor, weights: Optional[DLPackTensor] = None,
                           y_sorted: Optional[DLPackTensor] = None, *, sorted_rows: Optional[int] = None,
                           stream: Stream = None) -> Tuple[Any, Any]:
    """moe_unpermute's backward: grad_out [T, H] -> (grad_y_sorted [N, H], grad_weights [T, k] float32
    or None without weights). Row pos[t, j] of grad_y_sorted is weights[t, j] * grad_out[t]; rows no
    pair names are zeros. grad_weights[t, j] = dot(grad_out[t], y_sorted[pos[t, j]]) needs y_sorted.
    N = sorted_rows (default T * k, moe_permute's)."""
    fn = "moe_unpermute_backward"
    _matrix(fn, "grad_out", grad_out, "[tokens, hidden]")
    _matrix(fn, "pos", pos, "[tokens, top_k]")
    if weights is not None and y_sorted is None:
        raise InvalidArgument(f"{fn}: weights were given without y_sorted (the weights' gradient reads it)")
    t, k, h = int(pos.shape[0]), int(pos.shape[1]), int(grad_out.shape[1])
    n = t * k if sorted_rows is None else int(sorted_rows)
    gy, fy = _interop.output(grad_out, (n, h), dtype_of(grad_out))
    gw = fw = None
    if weights is not None:
        gw, fw = _interop.output(grad_out, (t, k), DType.float32)
    _C.moe_permute_call("unpermute_backward", {"grad_out": grad_out, "pos": pos, "weights": weights,
                                               "y_sorted": y_sorted if weights is not None else None,
                                               "grad_y_sorted": gy, "grad_weights": gw}, 0, n, stream)
    return fy(gy), (fw(gw) if gw is not None else None)


FUNCTIONS = {"moe_gate": moe_gate, "moe_gate_backward": moe_gate_backward, "moe_permute": moe_permute,
             "moe_unpermute": moe_unpermute, "moe_unpermute_backward": moe_unpermute_backward}
