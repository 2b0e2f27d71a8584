"""Functional reductions, generated from the core's reduction op table.

Every function selects a plan (cached in the core on op, axes, keepdim, params and operand
metadata), allocates the output in the input's framework unless ``out=`` is given, and runs on
the framework's current stream unless ``stream=`` is given. ``dim`` is None (every axis), an
int, or a sequence of ints (negative allowed).

``sum``, ``any`` and ``all`` shadow Python's builtins only as attributes of the package
(``bc.sum``); this module calls the builtins through ``builtins``.
"""
import builtins

from . import _C, _interop
from ._dtypes import DType, dtype as as_dtype
from .errors import InvalidArgument

_OPS = {row["name"]: row for row in _C.reduction_ops()}
_HALF = (DType.float16, DType.bfloat16)
_FLOAT = (DType.float16, DType.bfloat16, DType.float32, DType.float64)


def _axes(name, dim, rank):
    """dim -> a list of axes (empty = all) and the normalised set, for the output shape."""
    if dim is None:
        return [], set(range(rank))
    axes = [int(dim)] if isinstance(dim, int) else [int(d) for d in dim]
    lim = builtins.max(rank, 1)
    norm = set()
    for a in axes:
        if not -lim <= a < lim:
            raise InvalidArgument(f"{name}: axes {axes} has {a}, out of range for x of rank {rank}; "
                                  f"expected values in [{-lim}, {lim - 1}]")
        if rank:
            norm.add(a % rank)
    if len(norm) != len(axes) and rank:
        raise InvalidArgument(f"{name}: axes {axes} names a dimension twice; expected distinct axes")
    if not axes:  # an explicit empty list means every axis, as torch's dim=()
        norm = set(range(rank))
    return axes, norm


def _reduced_shape(shape, norm, keepdim):
    return tuple(1 if i in norm else s for i, s in enumerate(shape) if keepdim or i not in norm)


def _check_tensor(name, x):
    if not (hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__")):
        raise InvalidArgument(f"{name}: x must be a CUDA tensor, got {type(x).__name__}")
    if _interop.framework(x) == "numpy":
        raise InvalidArgument(f"{name}: x is a numpy (CPU) array; expected a CUDA tensor")


def _call(name, out, inputs, axes, keepdim, params, stream, like):
    _C.reduction_call(name, out, tuple(inputs), axes, bool(keepdim), params, stream,
                      _interop.workspace_allocator(like))


def _reduce(name, x, dim, keepdim, out, stream, out_dtype, params=None):
    _check_tensor(name, x)
    shape = tuple(x.shape)
    axes, norm = _axes(name, dim, len(shape))
    params = {k: float(v) for k, v in (params or {}).items()}
    if out is not None:
        _call(name, out, [x], axes, keepdim, params, stream, x)
        return out
    buf, finish = _interop.output(x, _reduced_shape(shape, norm, keepdim), out_dtype)
    _call(name, buf, [x], axes, keepdim, params, stream, x)
    return finish(buf)


def _sum_dtype(x, dtype):
    d = _interop.dtype_of(x)
    if dtype is not None:
        return as_dtype(dtype)
    return d if d in _FLOAT else DType.int64


def _doc(name, sig):
    row = _OPS[name]
    bwd = f" Backward: baracuda.{row['backward']}." if row["backward"] else ""
    return (f"{name}{sig}\n\n{row['doc']}.\n\ndtypes: {', '.join(d.name for d in row['dtypes'])}; "
            f"output: {row['out_dtype']}.{bwd}")


def _named(fn, name, sig):
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__doc__ = _doc(name, sig)
    return fn


# ---- forward ---------------------------------------------------------------------------------

def _make_sum_like(name):
    def fn(x, dim=None, keepdim=False, *, dtype=None, out=None, stream=None):
        d = _sum_dtype(x, dtype) if name != "mean" else (as_dtype(dtype) if dtype is not None else _interop.dtype_of(x))
        return _reduce(name, x, dim, keepdim, out, stream, d)

    return _named(fn, name, "(x, dim=None, keepdim=False, *, dtype=None, out=None, stream=None)")


def _make_plain(name, out_rule):
    def fn(x, dim=None, keepdim=False, *, out=None, stream=None):
        return _reduce(name, x, dim, keepdim, out, stream, out_rule(x))

    return _named(fn, name, "(x, dim=None, keepdim=False, *, out=None, stream=None)")


def _make_var(name):
    def fn(x, dim=None, *, correction=1, keepdim=False, out=None, stream=None):
        return _reduce(name, x, dim, keepdim, out, stream, _interop.dtype_of(x), {"correction": correction})

    return _named(fn, name, "(x, dim=None, *, correction=1, keepdim=False, out=None, stream=None)")


def _make_arg(name):
    def fn(x, dim=None, keepdim=False, *, index_dtype=DType.int64, out=None, stream=None):
        if dim is not None and not isinstance(dim, int):
            raise InvalidArgument(f"{name}: dim must be an int or None, got {dim!r}")
        return _reduce(name, x, dim, keepdim, out, stream, as_dtype(index_dtype))

    return _named(fn, name, "(x, dim=None, keepdim=False, *, index_dtype=int64, out=None, stream=None)")


def _make_to_shape(name):
    def fn(x, shape, *, out=None, stream=None):
        _check_tensor(name, x)
        if out is not None:
            _call(name, out, [x], [], False, {}, stream, x)
            return out
        buf, finish = _interop.output(x, tuple(int(s) for s in shape), _interop.dtype_of(x))
        _call(name, buf, [x], [], False, {}, stream, x)
        return finish(buf)

    return _named(fn, name, "(x, shape, *, out=None, stream=None)")


# ---- backward --------------------------------------------------------------------------------

def _make_backward(name):
    row = _OPS[name]
    takes_y = row["backward_inputs"] == 3
    has_corr = any_param(row, "correction")

    def run(grad_out, x, y, dim, keepdim, correction, out, stream):
        _check_tensor(name, x)
        axes, _ = _axes(name, dim, len(tuple(x.shape)))
        params = {"correction": float(correction)} if has_corr else {}
        inputs = [grad_out, x] + ([y] if takes_y else [])
        if out is None:
            buf, finish = _interop.output(x, tuple(x.shape), _interop.dtype_of(x))
        else:
            buf, finish = out, (lambda b: b)
        _call(name, buf, inputs, axes, keepdim, params, stream, x)
        return finish(buf)

    if takes_y:
        def fn(grad_out, x, y, dim=None, keepdim=False, *, correction=1, out=None, stream=None):
            return run(grad_out, x, y, dim, keepdim, correction, out, stream)
        sig = "(grad_out, x, y, dim=None, keepdim=False, *, " + ("correction=1, " if has_corr else "") + \
              "out=None, stream=None)"
    else:
        def fn(grad_out, x, dim=None, keepdim=False, *, correction=1, out=None, stream=None):
            return run(grad_out, x, None, dim, keepdim, correction, out, stream)
        sig = "(grad_out, x, dim=None, keepdim=False, *, " + ("correction=1, " if has_corr else "") + \
              "out=None, stream=None)"
    fn = _named(fn, name, sig)
    fn.__doc__ += ("\n\ngrad_out has the forward output's shape (keepdim or not, as given); y is the forward "
                   "output. Returns grad_x, shaped like x.")
    return fn


def any_param(row, p):
    return builtins.any(name == p for name, _ in row["params"])


def _same(x):
    return _interop.dtype_of(x)


def _build():
    ns = {}
    ns["sum"] = _make_sum_like("sum")
    ns["mean"] = _make_sum_like("mean")
    ns["prod"] = _make_plain("prod", lambda x: _sum_dtype(x, None))
    for n in ("amax", "amin", "norm2", "logsumexp"):
        ns[n] = _make_plain(n, _same)
    ns["any"] = _make_plain("any", lambda x: DType.bool)
    ns["all"] = _make_plain("all", lambda x: DType.bool)
    ns["count_nonzero"] = _make_plain("count_nonzero", lambda x: DType.int64)
    ns["var"] = _make_var("var")
    ns["std"] = _make_var("std")
    ns["argmax"] = _make_arg("argmax")
    ns["argmin"] = _make_arg("argmin")
    for name, row in _OPS.items():
        if row["category"] == "to_shape":
            ns[name] = _make_to_shape(name)
        elif row["category"] == "backward":
            ns[name] = _make_backward(name)
    missing = set(_OPS) - set(ns)
    if missing:  # a new table row needs a signature here
        raise ImportError(f"baracuda._reduction: no functional wrapper for {sorted(missing)}")
    return ns


FUNCTIONS = _build()
