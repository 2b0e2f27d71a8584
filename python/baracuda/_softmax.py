"""Functional softmax / log-softmax (forward and backward) along any axis.

Each call selects a SoftmaxPlan (cached in the core on op, axis and operand metadata),
allocates the output in the input's framework unless ``out=`` is given, and runs on the
framework's current stream unless ``stream=`` is given.
"""
from . import _C, _interop
from .errors import InvalidArgument


def _axis(name, dim, axis):
    if axis is not None:
        if dim is not None and dim != axis:
            raise InvalidArgument(f"{name}: got dim={dim} and axis={axis}; give one")
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


def softmax(x, dim=None, *, axis=None, out=None, stream=None):
    """softmax(x, dim=-1, *, out=None, stream=None): exp(x - max) / sum(exp(x - max)) along `dim`.

    dtypes: f16, bf16, f32, f64 (half types compute in f32). A row holding NaN or +inf is NaN,
    and so is a row of -inf only, as in torch. Backward: baracuda.softmax_backward."""
    return _call("softmax", [x], _axis("softmax", dim, axis), out, stream)


def log_softmax(x, dim=None, *, axis=None, out=None, stream=None):
    """log_softmax(x, dim=-1, *, out=None, stream=None): x - max - log(sum(exp(x - max))) along `dim`.

    dtypes: f16, bf16, f32, f64. Backward: baracuda.log_softmax_backward."""
    return _call("log_softmax", [x], _axis("log_softmax", dim, axis), out, stream)


def softmax_backward(grad_out, y, dim=None, *, axis=None, out=None, stream=None):
    """softmax_backward(grad_out, y, dim=-1): y * (grad_out - sum(grad_out * y)), y = softmax(x)."""
    return _call("softmax_backward", [grad_out, y], _axis("softmax_backward", dim, axis), out, stream)


def log_softmax_backward(grad_out, y, dim=None, *, axis=None, out=None, stream=None):
    """log_softmax_backward(grad_out, y, dim=-1): grad_out - exp(y) * sum(grad_out), y = log_softmax(x)."""
    return _call("log_softmax_backward", [grad_out, y], _axis("log_softmax_backward", dim, axis), out, stream)


FUNCTIONS = dict(softmax=softmax, log_softmax=log_softmax, softmax_backward=softmax_backward,
                 log_softmax_backward=log_softmax_backward)
