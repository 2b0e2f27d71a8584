"""Functional elementwise ops, generated from the core's op table.

Every function selects a plan (cached in the core on op, params and operand metadata),
allocates the output in the inputs' framework unless ``out=`` is given, and runs on the
framework's current stream unless ``stream=`` is given.
"""
from typing import Optional

from . import _C, _interop
from ._dtypes import DType, dtype as as_dtype
from ._types import DLPackTensor, Stream, TensorOrScalar
from .errors import InvalidArgument

_OPS = {row["name"]: row for row in _C.elementwise_ops()}
_BOOL_OUT = {"predicate", "compare"}


def broadcast_shape(*shapes):
    """numpy broadcasting of shapes (tuples)."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            j = rank - len(s) + i
            if d == out[j] or d == 1:
                continue
            if out[j] != 1:
                raise InvalidArgument(f"shapes {[tuple(x) for x in shapes]} do not broadcast")
            out[j] = d
    return tuple(out)


def _is_tensor(x):
    return hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__")


def _params(row, given):
    names = [p for p, _ in row["params"]]
    unknown = [k for k in given if k not in names]
    if unknown:
        raise InvalidArgument(f"{row['name']}: unknown parameter(s) {unknown}; takes {names or 'none'}")
    return {k: float(v) for k, v in given.items()}


def _jax_route(like):
    """JAX arrays (and jax.jit tracers) go through baracuda.jax when this build has its handler."""
    if _interop.framework(like) != "jax":
        return False
    from .jax import routable
    return routable(like)


def _run(op, out, inputs, params, stream, like):
    _C.elementwise_call(op, out, tuple(inputs), params, stream, _interop.workspace_allocator(like))


def _tensors(name, args, data=None):
    """Turn Python scalars among `args` into 0-d tensors in the tensors' framework.

    Scalars take the dtype of the first tensor among the `data` positions (default: all);
    where's condition (position 0 of where / where_backward's position 1) becomes bool.
    """
    like = next((a for a in args if _is_tensor(a)), None)
    if like is None:
        raise InvalidArgument(f"{name}: needs at least one CUDA tensor argument")
    for i, a in enumerate(args):
        if not _is_tensor(a):
            continue
        if _interop.framework(a) == "numpy":
            raise InvalidArgument(f"{name}: argument {i} is a numpy (CPU) array; expected a CUDA tensor")
        if not (hasattr(a, "shape") and hasattr(a, "dtype")):
            raise InvalidArgument(f"{name}: argument {i} ({type(a).__name__}) has no .shape / .dtype; the functional "
                                  "API needs array-like tensors (plan.run takes any DLPack object)")
    data = range(len(args)) if data is None else data
    src = next((args[i] for i in data if _is_tensor(args[i])), None)
    if src is not None:
        d = _interop.dtype_of(src)
    else:  # no tensor among the data operands: Python's float / int / bool, as torch does
        kinds = [type(args[i]) for i in data]
        d = DType.float32 if float in kinds else (DType.bool if all(k is bool for k in kinds) else DType.int64)
    cond = {"where": 0, "where_backward": 1}.get(name)
    return like, [a if _is_tensor(a) else _interop.scalar_like(a, like, DType.bool if i == cond else d)
                  for i, a in enumerate(args)]


def _map(name, row, args, out, stream, params, out_dtype=None):
    if len(args) != row["arity"]:
        raise InvalidArgument(f"{name}: takes {row['arity']} tensor argument(s), got {len(args)}")
    data_index = 1 if name == "where" else 0
    like, args = _tensors(name, args, data=(1, 2) if name == "where" else None)
    if out is not None:
        _run(name, out, args, params, stream, like)
        return out
    if out_dtype is None and stream is None and row["category"] != "gated" and _jax_route(like):
        # an XLA custom call: XLA's allocator and stream, no sync; traceable by jax.jit, differentiable
        from .jax import _ew_function
        return _ew_function(name, tuple(sorted((k, float(v)) for k, v in params.items())))(*args)
    shape = broadcast_shape(*(tuple(a.shape) for a in args))
    if row["category"] == "gated":
        axis = int(params.get("axis", -1))
        shape = list(shape)
        if not -len(shape) <= axis < len(shape):
            raise InvalidArgument(f"{name}: axis {axis} is out of range for x of rank {len(shape)}")
        shape[axis] //= 2
    if out_dtype is None:
        out_dtype = DType.bool if row["category"] in _BOOL_OUT else _interop.dtype_of(args[data_index])
    buf, finish = _interop.output(like, shape, out_dtype, layout=args[data_index])
    _run(name, buf, args, params, stream, like)
    return finish(buf)


_ARG_NAMES = {1: ["x"], 2: ["a", "b"], 3: ["x0", "x1", "x2"]}


def _make_forward(name, row):
    """A real def with the op's signature (tensors, then params with their defaults), generated
    from the table row so inspect.signature, pyright and mypy see it."""
    tensors = ["cond", "a", "b"] if name == "where" else _ARG_NAMES[row["arity"]]
    gated = row["category"] == "gated"
    params = [] if gated else [(p, d) for p, d in row["params"]]
    sig = ", ".join(f"{t}: TensorOrScalar" for t in tensors)
    if gated:
        sig += ", up: Optional[DLPackTensor] = None, dim: int = -1"
    sig += "".join(f", {p}: float = {d!r}" for p, d in params)
    sig += ", *" + (", axis: Optional[int] = None" if gated else "") + \
        ", out: Optional[DLPackTensor] = None, stream: Stream = None"
    if gated:
        body = (f"    return _gated({name!r}, _row, x, up, dim, axis, out, stream)\n")
    else:
        ps = "{" + ", ".join(f"{p!r}: float({p})" for p, _ in params) + "}"
        body = f"    return _map({name!r}, _row, [{', '.join(tensors)}], out, stream, {ps})\n"
    ns = dict(_map=_map, _gated=_gated, _row=row, TensorOrScalar=TensorOrScalar, DLPackTensor=DLPackTensor,
              Optional=Optional, Stream=Stream)
    exec(f"def {name}({sig}) -> DLPackTensor:\n{body}", ns)  # noqa: S102  (source built from the op table)
    fn = ns[name]
    shown = sig.replace(": TensorOrScalar", "").replace(": Optional[DLPackTensor]", "").replace(": Stream", "")
    shown = shown.replace(": float", "").replace(": int", "").replace(": Optional[int]", "")
    fn.__doc__ = (f"{name}({shown})\n\n{row['doc']}.\n\n"
                  f"dtypes: {', '.join(d.name for d in row['dtypes'])}."
                  + (f" Backward: baracuda.{row['backward']}." if row["backward"] else "")
                  + ("\n\nWith one tensor, its two halves along `dim` (`axis` is the older spelling) are the "
                     "gate and the value; with two, `x` is the gate and `up` the value (the LLM MLP form)."
                     if gated else ""))
    if gated:
        return _gated_fast_path(name, fn)
    return _with_fast_path(name, row, tensors, params, sig, fn)


def _with_fast_path(name, row, tensors, params, sig, general):
    """The same signature again, with the torch fast path in front of `general` (which it calls,
    with the autograd routing, for everything else): torch tensors of one shape, no stream, no
    gradient to record and no torch.compile trace: allocate with torch.empty_like (the input's
    layout) and make one call into the core. No per-call Python beyond that."""
    from ._autograd import FAST, T, differentiable, route
    bool_out = row["category"] in _BOOL_OUT
    data = tensors[1] if name == "where" else tensors[0]
    conds = [f"type({t}) in _FAST" for t in tensors] + [f"{t}.shape == {tensors[0]}.shape" for t in tensors[1:]]
    tup = "(" + ", ".join(tensors) + ",)"
    ps = "{" + ", ".join(f"{p!r}: float({p})" for p, _ in params) + "}"
    kw = ", ".join(f"{p}={p}" for p, _ in params)
    # needs_route inlined: (an operand requires grad and grad mode is on) or torch.compile traces
    grad = " or ".join(f"{t}.requires_grad" for t in tensors)
    body = (f"    if stream is None and {' and '.join(conds)}:\n"
            f"        if ({grad}) and T.grad() or T.compiling():\n"
            f"            return route({name!r}, _plain, {tup}, dict({kw + ', ' if kw else ''}out=out))\n"
            f"        if out is None:\n"
            f"            out = T.empty_like({data}{', dtype=T.bool' if bool_out else ''})\n"
            f"        _call({name!r}, out, {tup}, {ps}, None, None)\n"
            f"        return out\n"
            f"    return _general({', '.join(tensors)}{', ' + kw if kw else ''}, out=out, stream=stream)\n")
    ns = dict(_FAST=FAST, T=T, route=route, _plain=general,
              _general=differentiable(name, general), _call=_C.elementwise_call, TensorOrScalar=TensorOrScalar,
              DLPackTensor=DLPackTensor, Optional=Optional, Stream=Stream)
    exec(f"def {name}({sig}) -> DLPackTensor:\n{body}", ns)  # noqa: S102  (source built from the op table)
    fn = ns[name]
    fn.__doc__ = general.__doc__
    fn._routes_itself = True
    return fn


def _gated_fast_path(name, general):
    """The torch fast path of a gated op, in front of `general` (with the autograd routing): the
    halves of x along the last dim, or gate and up of one shape (the fused binary kind)."""
    from ._autograd import FAST, T, differentiable
    guarded = differentiable(name, general)
    fused = _TWO_TENSOR_GATED.get(name)
    call = _C.elementwise_call

    def fn(x, up=None, dim=-1, *, axis=None, out=None, stream=None):
        if (stream is None and out is None and axis is None and type(x) in FAST and x.dim()
                and (up is None and dim == -1 or fused and type(up) in FAST and up.shape == x.shape)
                and not ((x.requires_grad or up is not None and up.requires_grad) and T.grad() or T.compiling())):
            if up is None:
                y = x.new_empty((*x.shape[:-1], x.shape[-1] // 2))
                call(name, y, (x,), {"axis": -1.0}, None, None)
            else:
                y = T.empty_like(x)
                call(fused, y, (x, up), {}, None, None)
            return y
        return guarded(x, up, dim=dim, axis=axis, out=out, stream=stream)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = general.__doc__
    fn.__wrapped__ = general  # inspect.signature: the generated, annotated signature
    fn._routes_itself = True
    return fn


def _gated(name, row, x, up, dim, axis, out, stream):
    if axis is not None:
        if dim not in (-1, axis):
            raise InvalidArgument(f"{name}: got dim={dim} and axis={axis}; give one (dim)")
        dim = axis
    if up is None:
        return _map(name, row, [x], out, stream, {"axis": float(dim)})
    # two tensors: act(gate) * up, one fused binary kernel (silu_mul, gelu_mul, ...)
    fused = _TWO_TENSOR_GATED.get(name)
    if fused is not None:
        return _map(fused, _OPS[fused], [x, up], out, stream, {})
    if name != "reglu":
        raise InvalidArgument(f"{name}: takes one tensor (glu gates the first half by the second)")
    h = _map("relu", _OPS["relu"], [x], out, stream, {})  # no fused kind; in place (JAX: a new array)
    return _map("mul", _OPS["mul"], [h, up], None if _interop.framework(h) == "jax" else h, stream, {})


# The gated ops' two-tensor form: the binary kind that fuses act(gate) * up (reglu has none).
_TWO_TENSOR_GATED = {"swiglu": "silu_mul", "geglu": "gelu_mul", "geglu_tanh": "gelu_tanh_mul"}


def _make_backward(name, row):
    cat = row["category"]

    def fn(grad_out, *inputs, stream=None, **params):
        p = _params(row, params)
        like, tensors = _tensors(name, [grad_out, *inputs], data=(0,))
        grad_out, inputs = tensors[0], tensors[1:]
        if cat == "unary_backward":
            return _map(name, row, [grad_out, inputs[0]], None, stream, p)
        d = _interop.dtype_of(grad_out)
        grads = []
        first = 1 if name == "where_backward" else 0
        for wrt in range(first, len(inputs)):
            target = inputs[wrt]
            buf, finish = _interop.output(like, tuple(target.shape), d)
            _run(name, buf, [grad_out, *inputs], {**p, "wrt": float(wrt)}, stream, like)
            grads.append(finish(buf))
        return tuple([None] * first + grads)

    def gated(grad_out, x, stream=None, **params):
        p = _params(row, params)
        d = _interop.dtype_of(grad_out)
        buf, finish = _interop.output(x, tuple(x.shape), d)
        _run(name, buf, [grad_out, x], p, stream, x)
        return finish(buf)

    f = gated if cat == "gated_backward" else fn
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = (f"{name}(grad_out, *inputs, stream=None, **params)\n\n{row['doc']}.\n"
                 "Unary and gated kinds return one gradient; binary and ternary kinds return a tuple "
                 "with one gradient per input (None for where's condition), each summed to that input's shape.")
    return f


def cast(x, dtype, *, saturate=True, out=None, stream=None):
    """Convert `x` to `dtype`. fp8 targets saturate to the largest finite value unless saturate=False."""
    row = _OPS["cast"]
    return _map("cast", row, [x], out, stream, {"saturate": 1.0 if saturate else 0.0}, out_dtype=as_dtype(dtype))


def fill(out, value, *, stream=None):
    """Set every element of `out` to `value` (exact for integers up to 2**53). Returns `out`."""
    _C.elementwise_call("fill", out, (), {"value": float(value)}, stream, None)
    return out


def full_like(x, value, dtype=None, *, stream=None):
    """A new tensor shaped like `x` (in its framework) filled with `value`."""
    d = _interop.dtype_of(x) if dtype is None else as_dtype(dtype)
    buf, finish = _interop.output(x, tuple(x.shape), d)
    _C.elementwise_call("fill", buf, (), {"value": float(value)}, stream, None)
    return finish(buf)


def _build():
    ns = {}
    for name, row in _OPS.items():
        if name in ("cast", "fill"):
            continue
        if row["category"].endswith("_backward"):
            ns[name] = _make_backward(name, row)
        else:
            ns[name] = _make_forward(name, row)
    ns.update(cast=cast, fill=fill, full_like=full_like)
    return ns


FUNCTIONS = _build()
