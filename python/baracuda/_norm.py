"""Functional RMSNorm / LayerNorm (forward, fused residual add, backward) and GroupNorm /
InstanceNorm / BatchNorm (forward, running stats, backward; see the section at the end).

Normalization is over the last dimension of ``x`` ([..., H]). Outputs are allocated in x's
framework unless given; plans are cached in the core on (op, eps, flags, x's metadata).

Return convention of the forward functions:
    * ``y`` alone when ``residual`` is None and ``save_stats`` is False;
    * otherwise a tuple: ``y``, then ``residual_out`` if ``residual`` was given, then the stats
      if ``save_stats``: ``rstd`` for rms_norm, ``mean, rstd`` for layer_norm.
Stats have shape ``x.shape[:-1]`` and dtype float32 (float64 for float64 x).

Fused residual: ``h = x + residual`` is computed (in f32 for half types, rounded once to x's
dtype), written to ``residual_out`` (the new residual stream) and normalized; y = norm(h).
``residual_out=residual`` updates the residual in place, ``out=x`` writes y over x.
For the backward of a fused call, pass ``x=residual_out`` (the tensor that was normalized) and
the gradient arriving at residual_out as ``grad_residual``; ``grad_x`` is then the gradient of
both x and residual.
"""
from typing import Any, Optional

from . import _C, _interop
from ._dtypes import DType
from ._types import DLPackTensor, Stream
from .errors import InvalidArgument, Unsupported


def _stats_dtype(d):
    return DType.float64 if d == DType.float64 else DType.float32


def _check_tensor(name, t, fn):
    if t is None:
        return
    _interop.require_array(fn, name, t)
    if _interop.framework(t) == "numpy":
        raise InvalidArgument(f"{fn}: {name} is a numpy (CPU) array; expected a CUDA tensor")


def _forward(op, x, weight, bias, eps, residual, save_stats, out, residual_out, stream):
    for name, t in (("x", x), ("weight", weight), ("bias", bias), ("residual", residual), ("out", out),
                    ("residual_out", residual_out)):
        _check_tensor(name, t, op)
    if x is None:
        raise InvalidArgument(f"{op}: x is None; expected a CUDA tensor")
    if residual is None and residual_out is not None:
        raise InvalidArgument(f"{op}: residual_out is given without residual")
    shape = tuple(x.shape)
    if len(shape) == 0:
        raise InvalidArgument(f"{op}: x is 0-d; expected at least one dimension (the normalized one)")
    d = _interop.dtype_of(x)
    y, fy = (out, _interop._identity) if out is not None else _interop.output(x, shape, d)
    ro = fro = None
    if residual is not None:
        ro, fro = (residual_out, _interop._identity) if residual_out is not None else _interop.output(x, shape, d)
    mean = rstd = fm = fr = None
    if save_stats:
        sd = _stats_dtype(d)
        rstd, fr = _interop.output(x, shape[:-1], sd)
        if op == "layer_norm":
            mean, fm = _interop.output(x, shape[:-1], sd)
    _C.norm_call(op, float(eps), bool(save_stats), y, x, weight, bias, residual, ro, mean, rstd,
                 None, None, None, None, None, stream, None)
    y = fy(y)
    if residual is None and not save_stats:
        return y
    res = [y]
    if residual is not None:
        res.append(fro(ro))
    if save_stats:
        if op == "layer_norm":
            res.append(fm(mean))
        res.append(fr(rstd))
    return tuple(res)


def check_row_norm(op, x, weight, bias=None):
    """The traced forms' (baracuda.torch, baracuda.jax) shape checks: x has a last dim, weight /
    bias are [x.shape[-1]] (select() sees only their dtypes)."""
    if len(x.shape) == 0:
        raise InvalidArgument(f"{op}: x is 0-d; expected at least one dimension (the normalized one)")
    for nm, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (x.shape[-1],):
            raise InvalidArgument(f"{op}: {nm} has shape {tuple(t.shape)}; expected ({x.shape[-1]},), x's last dim")


def rms_norm(x: DLPackTensor, weight: Optional[DLPackTensor] = None, eps: float = 1e-6, *,
             residual: Optional[DLPackTensor] = None, save_stats: bool = False, out: Optional[DLPackTensor] = None,
             residual_out: Optional[DLPackTensor] = None, stream: Stream = None) -> Any:
    """rms_norm(x, weight=None, eps=1e-6, *, residual=None, save_stats=False, out=None, residual_out=None, stream=None)

    y = h / sqrt(mean(h^2, last dim) + eps) * weight, with h = x (+ residual).

    eps defaults to 1e-6 (vLLM / Llama convention). torch.nn.functional.rms_norm's default
    eps=None means torch.finfo(x.dtype).eps instead: pass it explicitly to match torch.
    weight: [H], x's dtype or float32, or None. dtypes: float32, float16, bfloat16, float64;
    half types compute in float32 and round once.

    Returns y; or (y, residual_out) with residual; (y, rstd) with save_stats; or
    (y, residual_out, rstd) with both. rstd: x.shape[:-1], float32 (float64 for float64 x).
    Backward: baracuda.rms_norm_backward.
    """
    return _forward("rms_norm", x, weight, None, eps, residual, save_stats, out, residual_out, stream)


def layer_norm(x: DLPackTensor, weight: Optional[DLPackTensor] = None, bias: Optional[DLPackTensor] = None,
               eps: float = 1e-5, *, residual: Optional[DLPackTensor] = None, save_stats: bool = False,
               out: Optional[DLPackTensor] = None, residual_out: Optional[DLPackTensor] = None,
               stream: Stream = None) -> Any:
    """layer_norm(x, weight=None, bias=None, eps=1e-5, *, residual=None, save_stats=False, out=None, residual_out=None, stream=None)

    y = (h - mean) / sqrt(var + eps) * weight + bias over the last dim, with h = x (+ residual);
    var is the biased variance, computed in two passes (mean, then squared deviations).
    eps defaults to 1e-5 like torch.nn.functional.layer_norm. weight / bias: [H], x's dtype or
    float32, or None. dtypes: float32, float16, bfloat16, float64.

    Returns y; or (y, residual_out) with residual; (y, mean, rstd) with save_stats; or
    (y, residual_out, mean, rstd) with both. mean / rstd: x.shape[:-1], float32 (float64 for
    float64 x). Backward: baracuda.layer_norm_backward.
    """
    return _forward("layer_norm", x, weight, bias, eps, residual, save_stats, out, residual_out, stream)


def _backward(op, grad_out, x, mean, rstd, weight, bias, grad_residual, out, stream):
    for name, t in (("grad_out", grad_out), ("x", x), ("mean", mean), ("rstd", rstd), ("weight", weight),
                    ("bias", bias), ("grad_residual", grad_residual), ("out", out)):
        _check_tensor(name, t, op)
    if x is None or grad_out is None or rstd is None:
        raise InvalidArgument(f"{op}: grad_out, x and rstd are required")
    shape = tuple(x.shape)
    d = _interop.dtype_of(x)
    gx, fgx = (out, _interop._identity) if out is not None else _interop.output(x, shape, d)
    gw = gb = None
    fgw = fgb = None
    if weight is not None:
        gw, fgw = _interop.output(x, tuple(weight.shape), _interop.dtype_of(weight))
    if bias is not None:
        gb, fgb = _interop.output(x, tuple(bias.shape), _interop.dtype_of(bias))
    _C.norm_call(op, 0.0, False, None, x, weight, None, None, None, mean, rstd, grad_out, gx, grad_residual, gw, gb,
                 stream, _interop.workspace_allocator(x))
    gx = fgx(gx)
    gw = fgw(gw) if gw is not None else None
    if op == "rms_norm_backward":
        return gx, gw
    return gx, gw, (fgb(gb) if gb is not None else None)


def rms_norm_backward(grad_out, x, rstd, weight=None, *, grad_residual=None, out=None, stream=None):
    """rms_norm_backward(grad_out, x, rstd, weight=None, *, grad_residual=None, out=None, stream=None) -> (grad_x, grad_weight)

    Gradients of rms_norm from its saved rstd (rms_norm(..., save_stats=True)). grad_weight is
    None without weight; it is a deterministic fixed-order sum over rows (f32 / f64 partials).
    For a fused residual call pass x=residual_out, and grad_residual (the gradient arriving at
    residual_out), which is added to grad_x.
    """
    return _backward("rms_norm_backward", grad_out, x, None, rstd, weight, None, grad_residual, out, stream)


def layer_norm_backward(grad_out, x, mean, rstd, weight=None, bias=None, *, grad_residual=None, out=None,
                        stream=None):
    """layer_norm_backward(grad_out, x, mean, rstd, weight=None, bias=None, *, grad_residual=None, out=None, stream=None) -> (grad_x, grad_weight, grad_bias)

    Gradients of layer_norm from its saved mean / rstd (layer_norm(..., save_stats=True)).
    bias is not read: its presence (and dtype) asks for grad_bias. grad_weight / grad_bias are
    None when weight / bias are None.
    """
    return _backward("layer_norm_backward", grad_out, x, mean, rstd, weight, bias, grad_residual, out, stream)


# ---- GroupNorm / InstanceNorm / BatchNorm ------------------------------------------------------------
# x: [N, C, *spatial], contiguous or channels-last (torch.channels_last / channels_last_3d); outputs
# allocated here keep x's memory layout (torch) or are contiguous (other frameworks). Statistics:
# float32 (float64 for float64 x); group_norm saves [N, G], instance_norm [N, C], batch_norm [C].


def _layout_output(x, d):
    """An output of x's shape and dtype `d`, in x's memory layout where the framework can say it."""
    if _interop.framework(x) == "torch":
        import torch

        return torch.empty_like(x, dtype=_interop.torch_dtype(d)), _interop._identity
    return _interop.output(x, tuple(x.shape), d)


def _chan_forward(op, x, num_groups, weight, bias, running_mean, running_var, training, momentum, eps, save_stats,
                  out, stream):
    for name, t in (("x", x), ("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var), ("out", out)):
        _check_tensor(name, t, op)
    if x is None:
        raise InvalidArgument(f"{op}: x is None; expected a CUDA tensor")
    if (running_mean is None) != (running_var is None):
        raise InvalidArgument(f"{op}: running_mean and running_var go together (one of them is None)")
    if momentum is None:
        raise Unsupported(f"{op}: momentum=None (the cumulative moving average) is not supported; pass a number")
    shape = tuple(x.shape)
    if len(shape) < 2:
        raise InvalidArgument(f"{op}: x has shape {shape}; expected [N, C, *spatial] (at least 2 dimensions)")
    d = _interop.dtype_of(x)
    y, fy = (out, _interop._identity) if out is not None else _layout_output(x, d)
    mean = rstd = fm = fr = None
    if save_stats:
        sd = _stats_dtype(d)
        stats_shape = {"group_norm": (shape[0], num_groups), "instance_norm": (shape[0], shape[1]),
                       "batch_norm": (shape[1],)}[op]
        mean, fm = _interop.output(x, stats_shape, sd)
        rstd, fr = _interop.output(x, stats_shape, sd)
    _C.channel_norm_call(op, int(num_groups), bool(training), float(momentum), float(eps), bool(save_stats), y, x,
                         weight, bias, running_mean, running_var, mean, rstd, None, None, None, None, stream,
                         _interop.workspace_allocator(x))
    y = fy(y)
    if not save_stats:
        return y
    return y, fm(mean), fr(rstd)


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5, *, save_stats=False, out=None, stream=None):
    """group_norm(x, num_groups, weight=None, bias=None, eps=1e-5, *, save_stats=False, out=None, stream=None)

    torch.nn.functional.group_norm: x [N, C, *spatial] split into num_groups groups of C / num_groups
    channels; each (sample, group) is normalized with its mean and biased variance, then
    y = xhat * weight[c] + bias[c]. weight / bias: [C], x's dtype or float32, or None.
    dtypes: float32, float16, bfloat16, float64 (statistics in float32, float64 for float64).
    x: contiguous or channels-last; y keeps x's layout (torch) unless `out` is given.

    Returns y, or (y, mean, rstd) with save_stats (mean / rstd: [N, num_groups], float32 or
    float64): the inputs of baracuda.group_norm_backward.
    """
    return _chan_forward("group_norm", x, num_groups, weight, bias, None, None, True, 0.1, eps, save_stats, out,
                         stream)


def instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1,
                  eps=1e-5, *, save_stats=False, out=None, stream=None):
    """instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1, eps=1e-5, *, save_stats=False, out=None, stream=None)

    torch.nn.functional.instance_norm: each (sample, channel) of x [N, C, *spatial] normalized over
    its spatial values (group_norm with one group per channel), then * weight[c] + bias[c].
    use_input_stats=True with running_mean / running_var: they are updated in place, as torch
    does, with the mean over samples of the per-instance mean and unbiased variance:
    r = (1 - momentum) * r + momentum * that. use_input_stats=False: normalized with
    running_mean / running_var instead (no reduction; its backward is batch_norm_backward with
    training=False). Running stats: [C], x's dtype or float32. momentum=None is not supported.

    Returns y, or (y, mean, rstd) with save_stats (mean / rstd: [N, C]).
    """
    return _chan_forward("instance_norm", x, 0, weight, bias, running_mean, running_var, bool(use_input_stats),
                         momentum, eps, save_stats, out, stream)


def batch_norm(x, running_mean=None, running_var=None, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5,
               *, save_stats=False, out=None, stream=None):
    """batch_norm(x, running_mean=None, running_var=None, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5, *, save_stats=False, out=None, stream=None)

    torch.nn.functional.batch_norm over x [N, C, *spatial]. training=True: per-channel mean and
    biased variance over N x spatial normalize x; running_mean / running_var (when given) are
    updated in place: r = (1 - momentum) * r + momentum * s, running_var with the unbiased
    variance. One value per channel is refused, as torch refuses it. training=False: y from
    running_mean / running_var (required), one read of x. weight / bias / running stats: [C],
    x's dtype or float32. momentum=None (cumulative average) is not supported.

    Returns y, or (y, mean, rstd) with save_stats (training only; mean / rstd: [C]).
    """
    return _chan_forward("batch_norm", x, 0, weight, bias, running_mean, running_var, bool(training), momentum, eps,
                         save_stats, out, stream)


def _chan_backward(op, grad_out, x, mean, rstd, num_groups, weight, bias, training, running_var, eps, out, stream):
    for name, t in (("grad_out", grad_out), ("x", x), ("mean", mean), ("rstd", rstd), ("weight", weight),
                    ("bias", bias), ("running_var", running_var), ("out", out)):
        _check_tensor(name, t, op)
    if x is None or grad_out is None or mean is None:
        raise InvalidArgument(f"{op}: grad_out, x and mean are required")
    d = _interop.dtype_of(x)
    gx, fgx = (out, _interop._identity) if out is not None else _layout_output(x, d)
    gw = gb = fgw = fgb = None
    if weight is not None:
        gw, fgw = _interop.output(x, tuple(weight.shape), _interop.dtype_of(weight))
    if bias is not None:
        gb, fgb = _interop.output(x, tuple(bias.shape), _interop.dtype_of(bias))
    _C.channel_norm_call(op, int(num_groups), bool(training), 0.1, float(eps), False, None, x, weight, None, None,
                         running_var, mean, rstd, grad_out, gx, gw, gb, stream, _interop.workspace_allocator(x))
    return fgx(gx), (fgw(gw) if gw is not None else None), (fgb(gb) if gb is not None else None)


def group_norm_backward(grad_out, x, mean, rstd, num_groups, weight=None, bias=None, *, out=None, stream=None):
    """group_norm_backward(grad_out, x, mean, rstd, num_groups, weight=None, bias=None, *, out=None, stream=None) -> (grad_x, grad_weight, grad_bias)

    Gradients of group_norm from its saved mean / rstd (group_norm(..., save_stats=True)).
    weight is read (grad_x depends on it) and asks for grad_weight; bias is not read, its
    presence (and dtype) asks for grad_bias. grad_weight / grad_bias are None when weight / bias
    are None; they are fixed-order sums (deterministic).
    """
    return _chan_backward("group_norm_backward", grad_out, x, mean, rstd, num_groups, weight, bias, True, None, 1e-5,
                          out, stream)


def instance_norm_backward(grad_out, x, mean, rstd, weight=None, bias=None, *, out=None, stream=None):
    """instance_norm_backward(grad_out, x, mean, rstd, weight=None, bias=None, *, out=None, stream=None) -> (grad_x, grad_weight, grad_bias)

    Gradients of instance_norm (use_input_stats=True) from its saved mean / rstd ([N, C]).
    For use_input_stats=False use batch_norm_backward(..., training=False).
    """
    return _chan_backward("instance_norm_backward", grad_out, x, mean, rstd, 0, weight, bias, True, None, 1e-5, out,
                          stream)


def batch_norm_backward(grad_out, x, mean, rstd, weight=None, bias=None, *, training=None, running_var=None, eps=1e-5,
                        out=None, stream=None):
    """batch_norm_backward(grad_out, x, mean, rstd, weight=None, bias=None, *, training=None, running_var=None, eps=1e-5, out=None, stream=None) -> (grad_x, grad_weight, grad_bias)

    Gradients of batch_norm, in the mode of the forward that gave the statistics (training=None,
    the default, infers it: training when rstd is given, inference when it is None).
    training=True: from the saved mean / rstd ([C]) of batch_norm(..., training=True,
    save_stats=True). training=False (inference): pass mean=running_mean, rstd=None and
    running_var; then grad_x = grad_out * weight * rsqrt(running_var + eps) and grad_weight =
    sum(grad_out * (x - running_mean) * rsqrt(running_var + eps)).
    """
    if training is None:
        training = rstd is not None
    if not training and running_var is None:
        raise InvalidArgument("batch_norm_backward: training=False needs running_var (and mean=running_mean)")
    return _chan_backward("batch_norm_backward", grad_out, x, mean, rstd, 0, weight, bias, training,
                          None if training else running_var, eps, out, stream)


FUNCTIONS = {
    "rms_norm": rms_norm,
    "layer_norm": layer_norm,
    "rms_norm_backward": rms_norm_backward,
    "layer_norm_backward": layer_norm_backward,
    "group_norm": group_norm,
    "instance_norm": instance_norm,
    "batch_norm": batch_norm,
    "group_norm_backward": group_norm_backward,
    "instance_norm_backward": instance_norm_backward,
    "batch_norm_backward": batch_norm_backward,
}
