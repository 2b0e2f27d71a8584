"""torch.ops.baracuda.embedding and embedding_backward on _ops' mechanism: the forward gathers rows,
its autograd formula is the deterministic backward (sorted indices, fixed-order sums)."""
import torch

from .. import _C
from ._ops import K, _spec, define, validate


def _workspace(like):
    return lambda n: torch.empty((int(n),), dtype=torch.uint8, device=like.device)


def _embedding_out(weight, indices):
    return weight.new_empty(tuple(indices.shape) + (weight.shape[1],))


def _embedding_impl(weight, indices, padding_idx, scale_grad_by_freq):
    out = _embedding_out(weight, indices)
    _C.embedding_call({"weight": weight, "indices": indices, "out": out}, int(padding_idx), bool(scale_grad_by_freq),
                      True, None)
    return out


def _select(backward, table, indices, rows, padding_idx, scale_grad_by_freq, deterministic):
    return _C.EmbeddingPlan.select(_C.EmbeddingDescriptor(
        _spec(table), _spec(indices), _spec(rows), backward=backward, padding_idx=int(padding_idx),
        scale_grad_by_freq=bool(scale_grad_by_freq), deterministic=bool(deterministic)))


def _embedding_fake(weight, indices, padding_idx, scale_grad_by_freq):
    out = _embedding_out(weight, indices)
    validate(("embedding", int(padding_idx)), [weight, indices, out],
             lambda: _select(False, weight, indices, out, padding_idx, scale_grad_by_freq, True))
    return out


def _embedding_setup(ctx, inputs, output):
    weight, indices, padding_idx, scale_grad_by_freq = inputs
    ctx.save_for_backward(indices)
    ctx.num_weights = weight.shape[0]
    ctx.flags = (padding_idx, scale_grad_by_freq)


def _embedding_backward(ctx, grad_out):
    (indices,) = ctx.saved_tensors
    if grad_out.stride(-1) != 1:  # an expanded gradient (of a sum, say): the kernels read rows
        grad_out = grad_out.contiguous()
    return K.embedding_backward(grad_out, indices, ctx.num_weights, *ctx.flags, True), None, None, None


define("embedding", "(Tensor weight, Tensor indices, int padding_idx, bool scale_grad_by_freq) -> Tensor",
       _embedding_impl, _embedding_fake, _embedding_backward, _embedding_setup)


def _grad_weight(grad_out, num_weights):
    return grad_out.new_empty((num_weights, grad_out.shape[-1]))


def _embedding_backward_impl(grad_out, indices, num_weights, padding_idx, scale_grad_by_freq, deterministic):
    gw = _grad_weight(grad_out, num_weights)
    _C.embedding_call({"grad_out": grad_out, "indices": indices, "grad_weight": gw}, int(padding_idx),
                      bool(scale_grad_by_freq), bool(deterministic), None, _workspace(grad_out))
    return gw


def _embedding_backward_fake(grad_out, indices, num_weights, padding_idx, scale_grad_by_freq, deterministic):
    gw = _grad_weight(grad_out, num_weights)
    validate(("embedding_backward", int(padding_idx), bool(scale_grad_by_freq), bool(deterministic)),
             [grad_out, indices, gw],
             lambda: _select(True, gw, indices, grad_out, padding_idx, scale_grad_by_freq, deterministic))
    return gw


define("embedding_backward",
       "(Tensor grad_out, Tensor indices, SymInt num_weights, int padding_idx, bool scale_grad_by_freq, "
       "bool deterministic) -> Tensor",
       _embedding_backward_impl, _embedding_backward_fake)
