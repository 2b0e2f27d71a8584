"""baracuda.jax reductions and scans: generated from the core's op tables (as the eager functions of
baracuda._reduction / baracuda._scan are), each one custom call on the family's plan; gradients from the
tables' backward ops through ``jax.custom_vjp``.

JAX spells the arguments ``axis`` / ``keepdims``. Integer results the core writes as int64 (integer
sums and products, count_nonzero, cummax / cummin indices) need ``jax_enable_x64``: without it they
are refused by name rather than written into a narrower buffer. argmax / argmin return int32 then.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from .. import _C
from .._reduction import _OPS as _REDUCTIONS, _axes, _reduced_shape
from .._scan import _OPS as _SCANS
from ..errors import InvalidArgument
from ._mechanism import _launch, _operand, _spec, _spec_of


def _x64():
    """Whether JAX holds int64 now (the global flag or a jax.enable_x64 context)."""
    return jax.dtypes.canonicalize_dtype(jnp.int64) == jnp.int64


def _need_x64(name, what):
    if not _x64():
        raise InvalidArgument(f"{name}: {what} is int64, which JAX holds only with jax_enable_x64 "
                              f"(jax.config.update('jax_enable_x64', True)); cast x to a float dtype otherwise")
    return jnp.int64


def _floating(x):
    return jnp.issubdtype(x.dtype, jnp.floating)


# ---- reductions -----------------------------------------------------------------------------------

def _reduction_out_dtype(name, x, dtype):
    if name in ("any", "all"):
        return jnp.bool_
    if name == "count_nonzero":
        return _need_x64(name, "the count")
    if name in ("argmax", "argmin"):
        return jnp.int64 if _x64() else jnp.int32
    if dtype is not None:
        return jnp.dtype(dtype)
    if name in ("sum", "prod") and not _floating(x):
        return _need_x64(name, f"the {name} of integers")
    return x.dtype


def _reduce_call(name, x, axes, keepdims, params, out_dtype):
    _, norm = _axes(name, axes or None, x.ndim)
    shape = _reduced_shape(x.shape, norm, keepdims)
    desc = _C.ReductionDescriptor(name, _spec_of(x), _spec(shape, out_dtype), axes or None, keepdims, params)
    return _launch(desc, _C.ReductionPlan.select, [_operand("x", x)], [("out", shape, out_dtype)])[0]


def _reduce_backward_call(name, g, x, y, axes, keepdims, params):
    row = _REDUCTIONS[name]
    bwd = row["backward"]
    g = g.astype(x.dtype)  # sum / mean with a wider dtype=: the gradient lands in x's dtype
    takes_y = row["backward_inputs"] == 3
    desc = _C.ReductionDescriptor(bwd, _spec_of(x), _spec_of(x), axes or None, keepdims, params,
                                  grad_out=_spec_of(g), y=_spec_of(y) if takes_y else None)
    ins = [_operand("grad_out", g), _operand("x", x)] + ([_operand("y", y)] if takes_y else [])
    return _launch(desc, _C.ReductionPlan.select, ins, [("grad_x", x.shape, x.dtype)])[0]


@functools.lru_cache(maxsize=None)
def _differentiable_reduction(name, axes, keepdims, params, out_dtype):
    p = dict(params)

    @jax.custom_vjp
    def f(x):
        return _reduce_call(name, x, list(axes), keepdims, p, out_dtype)

    def fwd(x):
        y = f(x)
        return y, (x, y)

    def bwd(res, g):
        x, y = res
        return (_reduce_backward_call(name, g, x, y, list(axes), keepdims, p),)

    f.defvjp(fwd, bwd)
    return f


def _axes_tuple(name, axis, rank):
    if axis is None:
        return ()
    axes, _ = _axes(name, axis, rank)
    return tuple(axes)


def _reduction(name, x, axis, keepdims, dtype=None, params=None):
    axes = _axes_tuple(name, axis, x.ndim)
    out_dtype = _reduction_out_dtype(name, x, dtype)
    params = tuple(sorted((k, float(v)) for k, v in (params or {}).items()))
    if _REDUCTIONS[name]["backward"] and _floating(x):
        return _differentiable_reduction(name, axes, bool(keepdims), params, jnp.dtype(out_dtype))(x)
    return _reduce_call(name, x, list(axes), bool(keepdims), dict(params), out_dtype)


def _doc(row, sig, extra=""):
    grad = f" Gradient: baracuda.{row['backward']}." if row["backward"] else " Not differentiable."
    return f"{row['name']}{sig}\n\n{row['doc']} (baracuda.jax, under jit).{grad}{extra}"


def _make_reduction(name):
    row = _REDUCTIONS[name]
    if name in ("sum", "mean"):
        def fn(x, axis=None, keepdims=False, *, dtype=None):
            return _reduction(name, x, axis, keepdims, dtype)
        sig = "(x, axis=None, keepdims=False, *, dtype=None)"
    elif name in ("var", "std"):
        def fn(x, axis=None, keepdims=False, *, correction=1):
            return _reduction(name, x, axis, keepdims, params={"correction": correction})
        sig = "(x, axis=None, keepdims=False, *, correction=1)"
    elif name in ("argmax", "argmin"):
        def fn(x, axis=None, keepdims=False):
            if axis is not None and not isinstance(axis, int):
                raise InvalidArgument(f"{name}: axis must be an int or None, got {axis!r}")
            return _reduction(name, x, axis, keepdims)
        sig = "(x, axis=None, keepdims=False)"
    else:
        def fn(x, axis=None, keepdims=False):
            return _reduction(name, x, axis, keepdims)
        sig = "(x, axis=None, keepdims=False)"
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = _doc(row, sig)
    return fn


# ---- scans ----------------------------------------------------------------------------------------

def _scan_call(name, inputs, axis, out_dtypes):
    x = inputs[0][1]
    outs = [(role, x.shape, dt) for role, dt in zip(_SCANS[name]["outputs"], out_dtypes)]
    desc = _C.ScanDescriptor(name, [s for _, _, s in inputs], [_spec(x.shape, dt) for dt in out_dtypes], int(axis))
    return _launch(desc, _C.ScanPlan.select, inputs, outs)


def _check_axis(name, axis):
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise InvalidArgument(f"{name}: axis must be an int, got {axis!r}")
    return int(axis)


@functools.lru_cache(maxsize=None)
def _differentiable_scan(name, axis, out_dtype):
    bwd_name = _SCANS[name]["backward"]
    takes_xy = _SCANS[bwd_name]["inputs"] == ["grad_out", "x", "y"]

    @jax.custom_vjp
    def f(x):
        return _scan_call(name, [_operand("x", x)], axis, [out_dtype])[0]

    def fwd(x):
        y = f(x)
        return y, (x, y)

    def bwd(res, g):
        x, y = res
        g = g.astype(x.dtype)
        ins = [_operand("grad_out", g)] + ([_operand("x", x), _operand("y", y)] if takes_xy else [])
        return (_scan_call(bwd_name, ins, axis, [x.dtype])[0],)

    f.defvjp(fwd, bwd)
    return f


def _make_scan(name):
    row = _SCANS[name]
    if name in ("cummax", "cummin"):
        def fn(x, axis):
            axis = _check_axis(name, axis)
            idx = _need_x64(name, "the index output")
            values, indices = _scan_call(name, [_operand("x", x)], axis, [x.dtype, idx])
            return values, indices
        sig, extra = "(x, axis)", " Returns (values, indices)."
    else:
        def fn(x, axis, *, dtype=None):
            axis = _check_axis(name, axis)
            if dtype is not None:
                out = jnp.dtype(dtype)
            elif name in ("cumsum", "cumprod") and not _floating(x):
                out = _need_x64(name, f"the {name} of integers")
            else:
                out = x.dtype
            if row["backward"] and _floating(x):
                return _differentiable_scan(name, axis, jnp.dtype(out))(x)
            return _scan_call(name, [_operand("x", x)], axis, [out])[0]
        sig, extra = "(x, axis, *, dtype=None)", ""
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = _doc(row, sig, extra)
    return fn


REDUCTION_FUNCTIONS = {n: _make_reduction(n) for n, row in _REDUCTIONS.items() if row["category"] == "reduce"}
SCAN_FUNCTIONS = {n: _make_scan(n) for n, row in _SCANS.items() if not row["is_backward"]}


def _functional(name, fn):
    """baracuda.<name>'s signature (dim / keepdim) onto fn's (axis / keepdims), and the keywords it takes."""
    if name in SCAN_FUNCTIONS:
        if name in ("cumsum", "cumprod"):
            return (lambda x, dim, *, dtype=None: fn(x, dim, dtype=dtype)), {"dim", "dtype"}
        return (lambda x, dim: fn(x, dim)), {"dim"}
    if name in ("sum", "mean"):
        return (lambda x, dim=None, keepdim=False, *, dtype=None: fn(x, dim, keepdim, dtype=dtype)), \
            {"dim", "keepdim", "dtype"}
    if name in ("var", "std"):
        return (lambda x, dim=None, *, correction=1, keepdim=False: fn(x, dim, keepdim, correction=correction)), \
            {"dim", "correction", "keepdim"}
    return (lambda x, dim=None, keepdim=False: fn(x, dim, keepdim)), {"dim", "keepdim"}


# baracuda.<name> on a JAX array -> (this module's function in the functional's signature, its keywords)
FUNCTIONAL = {n: _functional(n, f) for n, f in {**REDUCTION_FUNCTIONS, **SCAN_FUNCTIONS}.items()}
