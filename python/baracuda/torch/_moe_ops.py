"""torch.ops.baracuda.moe_gate / moe_permute / moe_unpermute and their backwards, on _ops' mechanism:
the gate's weights are differentiable in the logits, the permutation in x, the combine in
y_sorted and the weights; ids, offsets and pos are integer outputs (no gradient). grouped_linear
(the experts' projections over the device offsets) is an inference op: no autograd yet."""
import torch

from .. import _C, _gemm
from ._ops import K, _spec, define, validate

_GATE_ARGS = ("int top_k, str scoring, bool renormalize, int n_group, int topk_group, str group_score, "
              "float routed_scaling_factor")


def _gate_desc(logits, top_k, backward, scoring, renormalize, n_group, topk_group, group_score, scale, bias):
    return _C.MoeGateDescriptor(_spec(logits), int(top_k), backward=backward, scoring=scoring,
                                renormalize=bool(renormalize), n_group=int(n_group), topk_group=int(topk_group),
                                group_score=group_score, correction_bias=bias, routed_scaling_factor=float(scale))


def _gate_outputs(logits, top_k):
    t = logits.shape[0]
    return (logits.new_empty((t, top_k), dtype=torch.float32), logits.new_empty((t, top_k), dtype=torch.int32))


def _gate_impl(logits, correction_bias, top_k, scoring, renormalize, n_group, topk_group, group_score, scale):
    w, ids = _gate_outputs(logits, top_k)
    _C.moe_gate_call({"logits": logits, "correction_bias": correction_bias, "weights": w, "ids": ids}, int(top_k),
                     False, scoring, bool(renormalize), int(n_group), int(topk_group), group_score, float(scale), None)
    return w, ids


def _gate_fake(logits, correction_bias, top_k, scoring, renormalize, n_group, topk_group, group_score, scale):
    validate(("moe_gate", int(top_k), scoring, bool(renormalize), int(n_group), int(topk_group), group_score,
              float(scale), correction_bias is None), [logits],
             lambda: _C.MoeGatePlan.select(_gate_desc(logits, top_k, False, scoring, renormalize, n_group, topk_group,
                                                      group_score, scale, correction_bias is not None)))
    return _gate_outputs(logits, top_k)


def _gate_setup(ctx, inputs, output):
    logits = inputs[0]
    ctx.save_for_backward(logits, output[1])
    ctx.args = inputs[3:]


def _gate_backward(ctx, grad_w, grad_ids):
    logits, ids = ctx.saved_tensors
    if grad_w is None:
        return (None,) * 9
    return (K.moe_gate_backward(grad_w.float().contiguous(), logits, ids, *ctx.args),) + (None,) * 8


define("moe_gate", f"(Tensor logits, Tensor? correction_bias, {_GATE_ARGS}) -> (Tensor, Tensor)",
       _gate_impl, _gate_fake, _gate_backward, _gate_setup)


def _gate_bwd_impl(grad_w, logits, ids, scoring, renormalize, n_group, topk_group, group_score, scale):
    g = torch.empty_like(logits)
    _C.moe_gate_call({"logits": logits, "ids": ids, "grad_weights": grad_w, "grad_logits": g}, int(ids.shape[1]), True,
                     scoring, bool(renormalize), int(n_group), int(topk_group), group_score, float(scale), None)
    return g


def _gate_bwd_fake(grad_w, logits, ids, scoring, renormalize, n_group, topk_group, group_score, scale):
    validate(("moe_gate_backward", scoring, bool(renormalize), int(n_group), int(topk_group), group_score, float(scale)),
             [grad_w, logits, ids],
             lambda: _C.MoeGatePlan.select(_gate_desc(logits, ids.shape[1], True, scoring, renormalize, n_group,
                                                      topk_group, group_score, scale, False)))
    return torch.empty_like(logits)


define("moe_gate_backward",
       "(Tensor grad_weights, Tensor logits, Tensor ids, str scoring, bool renormalize, int n_group, int topk_group, "
       "str group_score, float routed_scaling_factor) -> Tensor",
       _gate_bwd_impl, _gate_bwd_fake)


def _workspace(like):
    return lambda n: torch.empty((int(n),), dtype=torch.uint8, device=like.device)


def _permute_outputs(x, ids, num_experts):
    t, k = ids.shape
    return (x.new_empty((t * k, x.shape[1])), x.new_empty((num_experts + 1,), dtype=torch.int32),
            x.new_empty((t, k), dtype=torch.int32))


def _permute_impl(x, ids, num_experts):
    xs, offsets, pos = _permute_outputs(x, ids, num_experts)
    _C.moe_permute_call("permute", {"x": x, "ids": ids, "x_sorted": xs, "offsets": offsets, "pos": pos},
                        int(num_experts), -1, None, _workspace(x))
    return xs, offsets, pos


def _permute_fake(x, ids, num_experts):
    validate(("moe_permute", int(num_experts)), [x, ids],
             lambda: _C.MoePermutePlan.select(_C.MoePermuteDescriptor("permute", _spec(x), _spec(ids),
                                                                      num_experts=int(num_experts))))
    return _permute_outputs(x, ids, num_experts)


def _permute_setup(ctx, inputs, output):
    ctx.save_for_backward(output[2])


def _permute_backward(ctx, grad_xs, grad_offsets, grad_pos):
    (pos,) = ctx.saved_tensors
    if grad_xs is None:
        return None, None, None
    return K.moe_unpermute(grad_xs.contiguous(), pos, None), None, None


define("moe_permute", "(Tensor x, Tensor ids, int num_experts) -> (Tensor, Tensor, Tensor)",
       _permute_impl, _permute_fake, _permute_backward, _permute_setup)


def _unpermute_impl(y_sorted, pos, weights):
    out = y_sorted.new_empty((pos.shape[0], y_sorted.shape[1]))
    _C.moe_permute_call("unpermute", {"y_sorted": y_sorted, "pos": pos, "weights": weights, "out": out}, 0, -1, None)
    return out


def _unpermute_fake(y_sorted, pos, weights):
    validate(("moe_unpermute", weights is None), [y_sorted, pos],
             lambda: _C.MoePermutePlan.select(_C.MoePermuteDescriptor("unpermute", _spec(y_sorted), _spec(pos),
                                                                      weights=weights is not None)))
    return y_sorted.new_empty((pos.shape[0], y_sorted.shape[1]))


def _unpermute_setup(ctx, inputs, output):
    y_sorted, pos, weights = inputs
    ctx.has_weights = weights is not None
    ctx.rows = y_sorted.shape[0]
    ctx.save_for_backward(pos, weights, y_sorted if weights is not None else None)


def _unpermute_backward(ctx, grad_out):
    pos, weights, y_sorted = ctx.saved_tensors
    gy, gw = K.moe_unpermute_backward(grad_out.contiguous(), pos, weights, y_sorted, ctx.rows)
    return gy, None, (gw if ctx.has_weights else None)


define("moe_unpermute", "(Tensor y_sorted, Tensor pos, Tensor? weights) -> Tensor",
       _unpermute_impl, _unpermute_fake, _unpermute_backward, _unpermute_setup)


def _unpermute_bwd_outputs(grad_out, pos, weights, sorted_rows):
    gw = grad_out.new_empty(tuple(pos.shape) if weights is not None else (0,), dtype=torch.float32)
    return grad_out.new_empty((sorted_rows, grad_out.shape[1])), gw


def _unpermute_bwd_impl(grad_out, pos, weights, y_sorted, sorted_rows):
    gy, gw = _unpermute_bwd_outputs(grad_out, pos, weights, sorted_rows)
    _C.moe_permute_call("unpermute_backward", {"grad_out": grad_out, "pos": pos, "weights": weights,
                                               "y_sorted": y_sorted if weights is not None else None,
                                               "grad_y_sorted": gy, "grad_weights": gw if weights is not None else None},
                        0, int(sorted_rows), None)
    return gy, gw


def _unpermute_bwd_fake(grad_out, pos, weights, y_sorted, sorted_rows):
    validate(("moe_unpermute_backward", weights is None, int(sorted_rows)), [grad_out, pos],
             lambda: _C.MoePermutePlan.select(_C.MoePermuteDescriptor(
                 "unpermute_backward", _spec(grad_out), _spec(pos), weights=weights is not None,
                 sorted_rows=int(sorted_rows))))
    return _unpermute_bwd_outputs(grad_out, pos, weights, sorted_rows)


define("moe_unpermute_backward",
       "(Tensor grad_out, Tensor pos, Tensor? weights, Tensor? y_sorted, SymInt sorted_rows) -> (Tensor, Tensor)",
       _unpermute_bwd_impl, _unpermute_bwd_fake)


def _grouped_out(x, weight):
    return x.new_empty((x.shape[0], weight.shape[1]))


def _grouped_impl(x, weight, offsets, group_sizes, bias, max_rows_per_group):
    out = _grouped_out(x, weight)
    _gemm.grouped_linear(x, weight, offsets=offsets, group_sizes=group_sizes, bias=bias,
                         max_rows_per_group=None if max_rows_per_group < 0 else max_rows_per_group, out=out)
    return out


def _grouped_fake(x, weight, offsets, group_sizes, bias, max_rows_per_group):
    out = _grouped_out(x, weight)
    by_sizes = offsets is None
    validate(("grouped_linear", int(max_rows_per_group), bias is None, tuple(group_sizes or ())),
             [x, weight] + ([] if by_sizes else [offsets]),
             lambda: _C.GroupedGemmPlan.select(_C.GroupedGemmDescriptor(
                 _spec(x), _spec(weight), _spec(out), group_sizes=list(group_sizes or []),
                 offsets_dtype=_C.DType.int32 if by_sizes else _spec(offsets).dtype, bias=bias is not None,
                 max_rows_per_group=int(max_rows_per_group))))
    return out


define("grouped_linear",
       "(Tensor x, Tensor weight, Tensor? offsets, int[]? group_sizes, Tensor? bias=None, int max_rows_per_group=-1) "
       "-> Tensor",
       _grouped_impl, _grouped_fake)
