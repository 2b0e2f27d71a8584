"""Functional softmax / log-softmax, gumbel-softmax and sparsemax (forward and backward) along any axis.

Each call selects a SoftmaxPlan (cached in the core on op, axis and operand metadata),
allocates the output in the input's framework unless ``out=`` is given, and runs on the
framework's current stream unless ``stream=`` is given.
"""
from typing import Optional

from . import _C, _interop
from ._types import DLPackTensor, Stream
from .errors import InvalidArgument


def _axis(name, dim, axis):
    if axis is not None:
        if dim is not None and dim != axis:
            raise InvalidArgument(f"{name}: got dim={dim} and axis={axis}; give one (dim)")
        return int(axis)
    return -1 if dim is None else int(dim)


def _call(name, inputs, dim, out, stream):
    x = inputs[0]
    if _interop.framework(x) == "numpy":
        raise InvalidArgument(f"{name}: got a numpy (CPU) array; expected a CUDA tensor")
    if out is not None:
        _C.softmax_call(name, out, tuple(inputs), dim, stream)
        return out
    buf, finish = _interop.output(x, tuple(x.shape), _interop.dtype_of(x))
    _C.softmax_call(name, buf, tuple(inputs), dim, stream)
    return finish(buf)


def softmax(x: DLPackTensor, dim: Optional[int] = None, *, axis: Optional[int] = None,
            out: Optional[DLPackTensor] = None, stream: Stream = None) -> DLPackTensor:
    """softmax(x, dim=-1, *, out=None, stream=None): exp(x - max) / sum(exp(x - max)) along `dim`.

    dtypes: f16, bf16, f32, f64 (half types compute in f32). A row holding NaN or +inf is NaN,
    and so is a row of -inf only, as in torch. Backward: baracuda.softmax_backward."""
    return _call("softmax", [x], _axis("softmax", dim, axis), out, stream)


def log_softmax(x: DLPackTensor, dim: Optional[int] = None, *, axis: Optional[int] = None,
                out: Optional[DLPackTensor] = None, stream: Stream = None) -> DLPackTensor:
    """log_softmax(x, dim=-1, *, out=None, stream=None): x - max - log(sum(exp(x - max))) along `dim`.

    dtypes: f16, bf16, f32, f64. Backward: baracuda.log_softmax_backward."""
    return _call("log_softmax", [x], _axis("log_softmax", dim, axis), out, stream)


def softmax_backward(grad_out, y, dim=None, *, axis=None, out=None, stream=None):
    """softmax_backward(grad_out, y, dim=-1): y * (grad_out - sum(grad_out * y)), y = softmax(x)."""
    return _call("softmax_backward", [grad_out, y], _axis("softmax_backward", dim, axis), out, stream)


def log_softmax_backward(grad_out, y, dim=None, *, axis=None, out=None, stream=None):
    """log_softmax_backward(grad_out, y, dim=-1): grad_out - exp(y) * sum(grad_out), y = log_softmax(x)."""
    return _call("log_softmax_backward", [grad_out, y], _axis("log_softmax_backward", dim, axis), out, stream)


def _rowop(name, inputs, like, dim, out, stream, tau=1.0, hard=False, seed=None, offset=0, soft_out=None,
           stream_like=None):
    if _interop.framework(like) == "numpy":
        raise InvalidArgument(f"{name}: got a numpy (CPU) array; expected a CUDA tensor")
    if seed is not None:
        seed, offset = _seed(name, seed, offset)
    finish = None
    if out is None:
        out, finish = _interop.output(like, tuple(like.shape), _interop.dtype_of(like))
    _C.softmax_rowop_call(name, out, tuple(inputs), dim, float(tau), bool(hard), seed, int(offset), soft_out, stream,
                          stream_like)
    return finish(out) if finish is not None else out


def _seed(name, seed, offset):
    try:
        seed, offset = int(seed), int(offset)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{name}: seed and offset must be integers, got {seed!r} and {offset!r}") from None
    for what, v in (("seed", seed), ("offset", offset)):
        if not 0 <= v < 2**64:
            raise InvalidArgument(f"{name}: {what} must be in [0, 2**64), got {v}")
    return seed, offset


def gumbel_softmax(logits, tau=1.0, hard=False, dim=-1, *, seed, offset=0, return_soft=False, out=None,
                   soft_out=None, stream=None):
    """gumbel_softmax(logits, tau=1.0, hard=False, dim=-1, *, seed, offset=0, return_soft=False): a seeded
    sample of softmax((logits + g) / tau) along `dim`, g i.i.d. Gumbel(0, 1).

    The noise is counter-based (Philox-4x32-10) and keyed by (seed, offset, the element's row-major index
    in logits' shape): the same for any layout, launch, device run or CUDA-graph replay. Draw fresh noise
    with a new offset (or seed); `baracuda.gumbel_noise(logits, seed=, offset=)` returns the noise itself.
    hard=True returns the one-hot (exact 0 / 1) of the first maximum of y_soft as rounded to the dtype:
    the forward value of torch's straight-through estimator. return_soft=True (or soft_out=) also returns
    y_soft, which the backward needs: grad_logits = baracuda.gumbel_softmax_backward(grad, y_soft, tau, dim)
    (for hard, the straight-through gradient flows to y_soft unchanged).
    dtypes: f16, bf16, f32, f64 (half types compute in f32 with f32 noise). A row with NaN or +inf, or
    only -inf, is NaN. Returns y, or (y, y_soft) with return_soft / soft_out."""
    want_soft = return_soft or soft_out is not None
    if want_soft and soft_out is None:
        buf, fin = _interop.output(logits, tuple(logits.shape), _interop.dtype_of(logits))
    else:
        buf, fin = soft_out, None
    y = _rowop("gumbel_softmax", [logits], logits, int(dim), out, stream, tau=tau, hard=hard, seed=seed,
               offset=offset, soft_out=buf)
    if not want_soft:
        return y
    return y, (fin(buf) if fin is not None else buf)


def gumbel_softmax_backward(grad_out, y_soft, tau=1.0, dim=-1, *, out=None, stream=None):
    """gumbel_softmax_backward(grad_out, y_soft, tau=1.0, dim=-1): y_soft * (grad_out - sum(grad_out *
    y_soft)) / tau, the gradient of gumbel_softmax w.r.t. logits (soft or hard: straight-through)."""
    return _rowop("gumbel_softmax_backward", [grad_out, y_soft], grad_out, int(dim), out, stream, tau=tau)


def gumbel_noise(like=None, *, seed, offset=0, out=None, stream=None):
    """gumbel_noise(like, *, seed, offset=0, out=None): the Gumbel(0, 1) noise that
    gumbel_softmax(like, seed=seed, offset=offset) adds, with like's shape, in like's framework and
    device: float32 for f16 / bf16 / f32 logits, float64 for f64 logits. With out= (f32 or f64), the
    noise of out's shape."""
    if out is None:
        if like is None:
            raise InvalidArgument("gumbel_noise: give `like` (a tensor) or `out`")
        from ._dtypes import DType
        d = DType.float64 if _interop.dtype_of(like) == DType.float64 else DType.float32
        buf, fin = _interop.output(like, tuple(like.shape), d)
        _rowop("gumbel_noise", [], like, -1, buf, stream, seed=seed, offset=offset, stream_like=like)
        return fin(buf)
    return _rowop("gumbel_noise", [], out, -1, out, stream, seed=seed, offset=offset)


def sparsemax(x, dim=-1, *, out=None, stream=None):
    """sparsemax(x, dim=-1): the Euclidean projection of x onto the probability simplex along `dim`
    (Martins & Astudillo 2016): max(x - t, 0) with t such that the row sums to 1.

    Exact threshold (from the final support, computed in f32 for half types, f64 for f64). dtypes:
    f16, bf16, f32, f64. A row with NaN or +inf, or only -inf, is NaN; -inf elements get 0.
    Backward: baracuda.sparsemax_backward(grad_out, y, dim)."""
    return _rowop("sparsemax", [x], x, int(dim), out, stream)


def sparsemax_backward(grad_out, y, dim=-1, *, out=None, stream=None):
    """sparsemax_backward(grad_out, y, dim=-1): [y > 0] * (grad_out - mean of grad_out over y > 0),
    y = sparsemax(x). A NaN y counts as outside the support."""
    return _rowop("sparsemax_backward", [grad_out, y], grad_out, int(dim), out, stream)


FUNCTIONS = dict(softmax=softmax, log_softmax=log_softmax, softmax_backward=softmax_backward,
                 log_softmax_backward=log_softmax_backward, gumbel_softmax=gumbel_softmax,
                 gumbel_softmax_backward=gumbel_softmax_backward, gumbel_noise=gumbel_noise, sparsemax=sparsemax,
                 sparsemax_backward=sparsemax_backward)
