"""Framework detection and output allocation: outputs come back in the inputs' framework.

torch and CuPy allocate through their own caching allocators; JAX cannot lend a writable
buffer, so its outputs are allocated by the core and handed over through DLPack.
"""
import collections

from . import _C, _autograd
from ._dtypes import DType, dtype as as_dtype
from .errors import InvalidArgument

_TORCH_NAMES = {
    DType.bool: "bool", DType.int8: "int8", DType.uint8: "uint8", DType.int16: "int16", DType.int32: "int32",
    DType.int64: "int64", DType.uint32: "uint32", DType.float16: "float16", DType.bfloat16: "bfloat16",
    DType.float32: "float32", DType.float64: "float64", DType.float8_e4m3fn: "float8_e4m3fn",
    DType.float8_e5m2: "float8_e5m2", DType.complex64: "complex64", DType.complex128: "complex128",
}


def is_array(x) -> bool:
    """Whether x looks like a tensor (a shape and a dtype): what the functional ops take as operands."""
    return hasattr(x, "shape") and hasattr(x, "dtype")


def require_array(fn, name, x):
    """InvalidArgument "<fn>: <name> (<type>) is not an array-like tensor" unless is_array(x)."""
    if not is_array(x):
        raise InvalidArgument(f"{fn}: {name} ({type(x).__name__}) is not an array-like tensor")


def split_per_row(fn, tensors, params):
    """Sampling-style parameters, each a number or a per-row tensor: `params` is [(name, value,
    default, kind)]; a tensor goes into `tensors` under its name (its scalar slot keeps the default),
    None gives the default, anything else is converted with `kind`. Returns {name: scalar}."""
    scalars = {}
    for name, v, default, kind in params:
        if is_array(v):
            tensors[name] = v
            scalars[name] = default
        elif v is None:
            scalars[name] = default
        else:
            try:
                scalars[name] = kind(v)
            except (TypeError, ValueError):
                raise InvalidArgument(f"{fn}: {name}={v!r}; expected a number or a per-row tensor [B]") from None
    return scalars


def framework(x) -> str:
    """'torch', 'cupy', 'jax', 'numpy' or 'dlpack' (anything else that speaks DLPack)."""
    mod = type(x).__module__ or ""
    for name in ("torch", "cupy", "jax", "numpy"):
        if mod.startswith(name):
            if name == "torch" and not _autograd.FAST:
                _autograd.see_torch()  # from now on torch tensors take the fast paths
            return name
    if mod.startswith("jaxlib"):
        return "jax"
    return "dlpack"


def _device_id(x, fw: str) -> int:
    if fw == "torch":
        return x.device.index or 0
    if fw == "cupy":
        return x.device.id
    if fw == "jax":
        return next(iter(x.devices())).id
    if hasattr(x, "__dlpack_device__"):
        return int(x.__dlpack_device__()[1])
    return 0


def dtype_of(x) -> DType:
    return as_dtype(x.dtype)


def torch_dtype(d: DType):
    import torch

    return getattr(torch, _TORCH_NAMES[d])


def output(like, shape, d: DType, layout=None):
    """Allocate an output of `shape` / `d` for `like`'s framework and device.

    Returns (buffer, finish): write into `buffer`, then `finish(buffer)` gives the tensor to
    return. torch and CuPy allocate through their own allocators; JAX cannot lend a writable
    buffer, so the core allocates and `finish` hands the result to JAX through DLPack.
    With `layout` (a tensor of `shape`), torch outputs keep its strides where torch's
    empty_like would (a dense permuted view), so an elementwise op on x.t() is one
    contiguous pass.
    """
    fw = framework(like)
    shape = tuple(int(s) for s in shape)
    if fw == "torch":
        import torch

        if layout is not None and tuple(layout.shape) == shape:
            return torch.empty_like(layout, dtype=torch_dtype(d)), _identity
        return torch.empty(shape, dtype=torch_dtype(d), device=like.device), _identity
    if fw == "numpy":
        raise InvalidArgument(f"expected CUDA tensors, got a numpy (CPU) array of shape {like.shape}")
    dev = _device_id(like, fw)
    if fw == "cupy":
        import cupy

        with cupy.cuda.Device(dev):
            if d not in _NOT_IN_CUPY:
                return cupy.empty(shape, dtype=d.name), _identity
            # bf16 / fp8: memory from CuPy's pool all the same, as a DLPack array over it
            n = 1
            for s in shape:
                n *= s
            mem = cupy.cuda.alloc(max(n * (1 if d != DType.bfloat16 else 2), 1))  # fp8: 1 byte, bf16: 2
            return _C.wrap(mem.ptr, list(shape), d, dev, mem), _cupy_or_dlpack
    raw = _C.empty(list(shape), d, dev)
    if fw == "jax":
        import jax.dlpack

        return raw, jax.dlpack.from_dlpack
    if fw == "cupy":
        import cupy

        return raw, cupy.from_dlpack
    return raw, _identity


def _identity(x):
    return x


_NOT_IN_CUPY = (DType.bfloat16, DType.float8_e4m3fn, DType.float8_e5m2)


def _cupy_or_dlpack(raw):
    """A CuPy array where this CuPy has the dtype, else the DLPack array itself (torch / JAX read it)."""
    import cupy

    try:
        return cupy.from_dlpack(raw)
    except Exception:  # noqa: BLE001 (CuPy raises different types for an unknown dtype)
        return raw


_INT_RANGES = {DType.int8: (-2**7, 2**7 - 1), DType.uint8: (0, 2**8 - 1), DType.int16: (-2**15, 2**15 - 1),
               DType.int32: (-2**31, 2**31 - 1), DType.uint32: (0, 2**32 - 1), DType.int64: (-2**63, 2**63 - 1)}


def check_scalar(value, d: DType, what="a scalar operand"):
    """A Python scalar that the operand dtype cannot hold exactly is refused (a typed error, not the
    framework's overflow error): 1000 with int8, 0.5 with int32."""
    lim = _INT_RANGES.get(d)
    if lim is None:
        return
    if isinstance(value, float) and not value.is_integer():
        raise InvalidArgument(f"{what} = {value!r} is not a whole number; the tensor operands are {d.name}")
    if not lim[0] <= value <= lim[1]:
        raise InvalidArgument(f"{what} = {value!r} is outside the range of {d.name} [{lim[0]}, {lim[1]}], the "
                              "tensor operands' dtype; cast the tensor first (baracuda.cast)")


def scalar_like(value, like, d: DType):
    """A 0-d device tensor holding `value`, for scalar operands of binary / ternary ops."""
    if not isinstance(value, bool):
        check_scalar(value, d)
    fw = framework(like)
    if fw == "torch":
        import torch

        return torch.full((), value, dtype=torch_dtype(d), device=like.device)
    if fw == "jax":  # a constant of the computation (works under jax.jit too); no allocation of ours
        import jax
        import jax.numpy as jnp

        v = jnp.asarray(value, dtype=d.name)
        return v if isinstance(like, jax.core.Tracer) else jax.device_put(v, next(iter(like.devices())))
    buf, finish = output(like, (), d)
    _C.elementwise_call("fill", buf, (), {"value": float(value)}, None, None)
    return finish(buf)


def workspace_allocator(like):
    def alloc(nbytes):
        return output(like, (int(nbytes),), DType.uint8)[0]

    return alloc


class PlanCache:
    """The Python-side plan cache of the paths without a C++ entry (the losses' opt-in target checks,
    grouped GEMM): bounded, least recently used first out. Thread-safe enough under the GIL: a
    race selects the same plan twice, never a wrong one."""

    def __init__(self, capacity=4096):
        self._plans = collections.OrderedDict()
        self._capacity = capacity

    def get(self, key, make):
        plans = self._plans
        plan = plans.get(key)
        if plan is None:
            plan = make()
            plans[key] = plan
            while len(plans) > self._capacity:
                plans.popitem(last=False)
        else:
            try:
                plans.move_to_end(key)
            except KeyError:  # evicted by another thread meanwhile
                pass
        return plan

    def __len__(self):
        return len(self._plans)

    def clear(self):
        self._plans.clear()
