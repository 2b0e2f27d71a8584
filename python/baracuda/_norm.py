"""Functional RMSNorm / LayerNorm (forward, fused residual add, backward).

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
from . import _C, _interop
from ._dtypes import DType
from .errors import InvalidArgument


def _stats_dtype(d):
    return DType.float64 if d == DType.float64 else DType.float32


def _check_tensor(name, t, fn):
    if t is None:
        return
    if not (hasattr(t, "shape") and hasattr(t, "dtype")):
        raise InvalidArgument(f"{fn}: {name} ({type(t).__name__}) is not an array-like tensor")
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
    fin = []  # (buffer, finish) of the outputs we allocate, in return order
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


def rms_norm(x, weight=None, eps=1e-6, *, residual=None, save_stats=False, out=None, residual_out=None, stream=None):
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


def layer_norm(x, weight=None, bias=None, eps=1e-5, *, residual=None, save_stats=False, out=None, residual_out=None,
               stream=None):
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


FUNCTIONS = {
    "rms_norm": rms_norm,
    "layer_norm": layer_norm,
    "rms_norm_backward": rms_norm_backward,
    "layer_norm_backward": layer_norm_backward,
}
