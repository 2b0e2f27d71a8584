"""Functional scans, generated from the core's scan op table.

Every function selects a plan (cached in the core on op, axis and operand metadata), allocates
its outputs in the input's framework unless ``out=`` is given, and runs on the framework's
current stream unless ``stream=`` is given. ``dim`` is one int (negative allowed).

    bc.cumsum(x, dim)                 # int / bool inputs give int64, like torch
    values, indices = bc.cummax(x, dim)
    bc.cumsum_backward(grad_out, dim) # the reverse cumsum of grad_out
    bc.cumprod_backward(grad_out, x, y, dim)   # y = cumprod(x)
"""
from . import _C, _interop
from ._dtypes import DType, dtype as as_dtype
from .errors import InvalidArgument

_OPS = {row["name"]: row for row in _C.scan_ops()}
_FLOAT = (DType.float16, DType.bfloat16, DType.float32, DType.float64)


def _check_tensor(name, arg, x):
    if not (hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__")):
        raise InvalidArgument(f"{name}: {arg} must be a CUDA tensor, got {type(x).__name__}")
    if _interop.framework(x) == "numpy":
        raise InvalidArgument(f"{name}: {arg} is a numpy (CPU) array; expected a CUDA tensor")


def _dim(name, dim):
    if isinstance(dim, bool) or not isinstance(dim, int):
        try:
            import operator

            return operator.index(dim)
        except TypeError:
            raise InvalidArgument(f"{name}: dim must be an int, got {dim!r}") from None
    return dim


def _call(name, outs, ins, dim, stream):
    _C.scan_call(name, tuple(outs), tuple(ins), int(dim), stream, _interop.workspace_allocator(ins[0]))


def _run(name, ins, dim, out, stream, out_dtypes):
    row = _OPS[name]
    for arg, t in zip(row["inputs"], ins):
        _check_tensor(name, arg, t)
    dim = _dim(name, dim)
    x = ins[0]
    if out is not None:
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        _call(name, outs, ins, dim, stream)
        return tuple(outs) if len(outs) > 1 else outs[0]
    shape = tuple(x.shape)
    bufs = [_interop.output(x, shape, d) for d in out_dtypes]
    _call(name, [b for b, _ in bufs], ins, dim, stream)
    res = [finish(b) for b, finish in bufs]
    return tuple(res) if len(res) > 1 else res[0]


def _doc(name, sig, extra=""):
    row = _OPS[name]
    bwd = f" Backward: baracuda.{row['backward']}." if row["backward"] else ""
    return (f"{name}{sig}\n\n{row['doc']}.\n\ndtypes: {', '.join(d.name for d in row['dtypes'])}; "
            f"output: {row['out_dtype']}.{bwd}{extra}")


def _named(fn, name, sig, extra=""):
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = _doc(name, sig, extra)
    return fn


def _make_sum_like(name):
    def fn(x, dim, *, dtype=None, out=None, stream=None):
        _check_tensor(name, "x", x)
        d = _interop.dtype_of(x)
        od = as_dtype(dtype) if dtype is not None else (d if d in _FLOAT else DType.int64)
        return _run(name, [x], dim, out, stream, [od])

    return _named(fn, name, "(x, dim, *, dtype=None, out=None, stream=None)",
                  "\n\ndtype: the output dtype (int64 for integer inputs; float32 is also accepted for "
                  "float16 / bfloat16 inputs of cumsum).")


def _make_ext(name):
    def fn(x, dim, *, out=None, stream=None):
        _check_tensor(name, "x", x)
        return _run(name, [x], dim, out, stream, [_interop.dtype_of(x), DType.int64])

    return _named(fn, name, "(x, dim, *, out=None, stream=None)",
                  "\n\nReturns (values, indices); out, if given, is a (values, indices) pair.")


def _make_same(name):
    def fn(x, dim, *, out=None, stream=None):
        _check_tensor(name, "x", x)
        return _run(name, [x], dim, out, stream, [_interop.dtype_of(x)])

    return _named(fn, name, "(x, dim, *, out=None, stream=None)")


def _make_cumsum_backward(name):
    def fn(grad_out, dim, *, out=None, stream=None):
        _check_tensor(name, "grad_out", grad_out)
        return _run(name, [grad_out], dim, out, stream, [_interop.dtype_of(grad_out)])

    return _named(fn, name, "(grad_out, dim, *, out=None, stream=None)", "\n\nReturns grad_x, shaped like grad_out.")


def _make_xy_backward(name):
    def fn(grad_out, x, y, dim, *, out=None, stream=None):
        _check_tensor(name, "grad_out", grad_out)
        return _run(name, [grad_out, x, y], dim, out, stream, [_interop.dtype_of(grad_out)])

    return _named(fn, name, "(grad_out, x, y, dim, *, out=None, stream=None)",
                  "\n\ny is the forward output. Returns grad_x, shaped like x.")


def _build():
    ns = {
        "cumsum": _make_sum_like("cumsum"),
        "cumprod": _make_sum_like("cumprod"),
        "cummax": _make_ext("cummax"),
        "cummin": _make_ext("cummin"),
        "logcumsumexp": _make_same("logcumsumexp"),
        "cumsum_backward": _make_cumsum_backward("cumsum_backward"),
        "cumprod_backward": _make_xy_backward("cumprod_backward"),
        "logcumsumexp_backward": _make_xy_backward("logcumsumexp_backward"),
    }
    missing = set(_OPS) - set(ns)
    if missing:  # a new table row needs a signature here
        raise ImportError(f"baracuda._scan: no functional wrapper for {sorted(missing)}")
    return ns


FUNCTIONS = _build()
