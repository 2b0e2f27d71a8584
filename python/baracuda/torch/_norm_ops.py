"""torch.ops.baracuda.rms_norm / layer_norm / group_norm and their backward ops: the norm families on
_ops' mechanism (define: CUDA kernel, fake kernel, autograd formula through K)."""
from .. import _C, _norm
from .._dtypes import dtype as bc_dtype
from ..errors import InvalidArgument
from ._ops import (K, _alloc, _contiguous_like, _contiguous_out, _empty_like_layout, _spec, _stats_dtype, define,
                   validate)

# ---- norms -------------------------------------------------------------------------------------

_check_norm = _norm.check_row_norm


def _norm_select(op, x, weight, bias, eps):
    validate(("norm", op, float(eps)), [x, weight, bias], lambda: _C.NormPlan.select(_C.NormDescriptor(
        op, _C.TensorSpec(tuple(x.shape), bc_dtype(x.dtype)), None if weight is None else bc_dtype(weight.dtype),
        None if bias is None else bc_dtype(bias.dtype), False, float(eps), True)))


def _rms_norm_outputs(x, weight):
    _check_norm("rms_norm", x, weight)
    return _contiguous_like(x), x.new_empty(x.shape[:-1], dtype=_stats_dtype(x))


def _rms_norm_fake(x, weight, eps):
    _check_norm("rms_norm", x, weight)
    _norm_select("rms_norm", x, weight, None, eps)
    return _rms_norm_outputs(x, weight)


def _rms_norm_impl(x, weight, eps):
    # no Python shape checks: the core names a wrong x / weight itself (as bc.rms_norm's fast path)
    y = _contiguous_out(x)
    rstd = x.new_empty(x.shape[:-1], dtype=_stats_dtype(x))
    _C.norm_call("rms_norm", float(eps), True, y, x, weight, None, None, None, None, rstd,
                 None, None, None, None, None, None, None)
    return y, rstd


def _rms_norm_setup(ctx, inputs, output):
    x, weight, _ = inputs
    ctx.save_for_backward(x, weight, output[1])


def _rms_norm_backward(ctx, grad_y, grad_rstd):
    x, weight, rstd = ctx.saved_tensors
    gx, gw = K.rms_norm_backward(grad_y.contiguous(), x, rstd, weight)
    return gx, (gw if weight is not None else None), None


def _norm_backward_outputs(x, weight, bias):
    gx = _contiguous_like(x)
    gw = _contiguous_like(weight) if weight is not None else x.new_empty((0,))
    gb = _contiguous_like(bias) if bias is not None else x.new_empty((0,))
    return gx, gw, gb


def _rms_norm_bwd_fake(grad, x, rstd, weight):
    return _norm_backward_outputs(x, weight, None)[:2]


def _rms_norm_bwd_impl(grad, x, rstd, weight):
    gx = _contiguous_out(x)
    gw = _contiguous_out(weight) if weight is not None else x.new_empty((0,))
    _C.norm_call("rms_norm_backward", 0.0, False, None, x, weight, None, None, None, None, rstd, grad, gx, None,
                 gw if weight is not None else None, None, None, _alloc(x))
    return gx, gw


def _layer_norm_outputs(x, weight, bias):
    _check_norm("layer_norm", x, weight, bias)
    sd = _stats_dtype(x)
    return _contiguous_like(x), x.new_empty(x.shape[:-1], dtype=sd), x.new_empty(x.shape[:-1], dtype=sd)


def _layer_norm_fake(x, weight, bias, eps):
    _check_norm("layer_norm", x, weight, bias)
    _norm_select("layer_norm", x, weight, bias, eps)
    return _layer_norm_outputs(x, weight, bias)


def _layer_norm_impl(x, weight, bias, eps):
    y, mean, rstd = _layer_norm_outputs(x, weight, bias)
    _C.norm_call("layer_norm", float(eps), True, y, x, weight, bias, None, None, mean, rstd,
                 None, None, None, None, None, None, None)
    return y, mean, rstd


def _layer_norm_setup(ctx, inputs, output):
    x, weight, bias, _ = inputs
    ctx.has_bias = bias is not None
    ctx.save_for_backward(x, weight, bias, output[1], output[2])


def _layer_norm_backward(ctx, grad_y, grad_mean, grad_rstd):
    x, weight, bias, mean, rstd = ctx.saved_tensors
    gx, gw, gb = K.layer_norm_backward(grad_y.contiguous(), x, mean, rstd, weight, bias)
    return gx, (gw if weight is not None else None), (gb if bias is not None else None), None


def _layer_norm_bwd_fake(grad, x, mean, rstd, weight, bias):
    return _norm_backward_outputs(x, weight, bias)


def _layer_norm_bwd_impl(grad, x, mean, rstd, weight, bias):
    gx, gw, gb = _norm_backward_outputs(x, weight, bias)
    _C.norm_call("layer_norm_backward", 0.0, False, None, x, weight, None, None, None, mean, rstd, grad, gx, None,
                 gw if weight is not None else None, gb if bias is not None else None, None, _alloc(x))
    return gx, gw, gb


define("rms_norm", "(Tensor x, Tensor? weight, float eps) -> (Tensor, Tensor)", _rms_norm_impl, _rms_norm_fake,
       _rms_norm_backward, _rms_norm_setup)
define("rms_norm_backward", "(Tensor grad, Tensor x, Tensor rstd, Tensor? weight) -> (Tensor, Tensor)",
       _rms_norm_bwd_impl, _rms_norm_bwd_fake)
define("layer_norm", "(Tensor x, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)",
       _layer_norm_impl, _layer_norm_fake, _layer_norm_backward, _layer_norm_setup)
define("layer_norm_backward",
       "(Tensor grad, Tensor x, Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias) -> (Tensor, Tensor, Tensor)",
       _layer_norm_bwd_impl, _layer_norm_bwd_fake)


def _group_norm_outputs(x, num_groups, weight, bias):
    if x.dim() < 2:
        raise InvalidArgument(f"group_norm: x has shape {tuple(x.shape)}; expected [N, C, *spatial]")
    c = x.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise InvalidArgument(f"group_norm: num_groups = {num_groups} must be positive and divide C = {c}")
    for nm, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise InvalidArgument(f"group_norm: {nm} has shape {tuple(t.shape)}; expected ({c},), x's channels")
    sd = _stats_dtype(x)
    stats = (x.shape[0], num_groups)
    return _empty_like_layout(x), x.new_empty(stats, dtype=sd), x.new_empty(stats, dtype=sd)


def _group_norm_fake(x, num_groups, weight, bias, eps):
    outs = _group_norm_outputs(x, num_groups, weight, bias)
    validate(("group_norm", int(num_groups), float(eps)), [x, weight, bias],
             lambda: _C.ChannelNormPlan.select(_C.ChannelNormDescriptor(
                 "group_norm", _spec(x), int(num_groups), None if weight is None else bc_dtype(weight.dtype),
                 None if bias is None else bc_dtype(bias.dtype), None, True, 0.1, float(eps), True)))
    return outs


def _group_norm_impl(x, num_groups, weight, bias, eps):
    y, mean, rstd = _group_norm_outputs(x, num_groups, weight, bias)
    _C.channel_norm_call("group_norm", int(num_groups), True, 0.1, float(eps), True, y, x, weight, bias, None, None,
                         mean, rstd, None, None, None, None, None, _alloc(x))
    return y, mean, rstd


def _group_norm_setup(ctx, inputs, output):
    x, num_groups, weight, bias, _ = inputs
    ctx.num_groups = num_groups
    ctx.save_for_backward(x, weight, bias, output[1], output[2])


def _group_norm_backward(ctx, grad_y, grad_mean, grad_rstd):
    x, weight, bias, mean, rstd = ctx.saved_tensors
    gx, gw, gb = K.group_norm_backward(grad_y, x, mean, rstd, ctx.num_groups, weight, bias)
    return gx, None, (gw if weight is not None else None), (gb if bias is not None else None), None


def _group_norm_bwd_fake(grad, x, mean, rstd, num_groups, weight, bias):
    return _empty_like_layout(x), *_norm_backward_outputs(x, weight, bias)[1:]


def _group_norm_bwd_impl(grad, x, mean, rstd, num_groups, weight, bias):
    gx, gw, gb = _group_norm_bwd_fake(grad, x, mean, rstd, num_groups, weight, bias)
    _C.channel_norm_call("group_norm_backward", int(num_groups), True, 0.1, 1e-5, False, None, x, weight, None, None,
                         None, mean, rstd, grad, gx, gw if weight is not None else None,
                         gb if bias is not None else None, None, _alloc(x))
    return gx, gw, gb


define("group_norm", "(Tensor x, int num_groups, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)",
       _group_norm_impl, _group_norm_fake, _group_norm_backward, _group_norm_setup)
define("group_norm_backward", "(Tensor grad, Tensor x, Tensor mean, Tensor rstd, int num_groups, Tensor? weight, "
       "Tensor? bias) -> (Tensor, Tensor, Tensor)", _group_norm_bwd_impl, _group_norm_bwd_fake)
