"""dtype objects and conversion from numpy, torch, JAX / ml_dtypes and strings."""
from ._C import DType

bool_ = DType.bool
int8 = DType.int8
uint8 = DType.uint8
int16 = DType.int16
int32 = DType.int32
int64 = DType.int64
uint32 = DType.uint32
float16 = DType.float16
bfloat16 = DType.bfloat16
float32 = DType.float32
float64 = DType.float64
float8_e4m3fn = DType.float8_e4m3fn
float8_e5m2 = DType.float8_e5m2
complex64 = DType.complex64
complex128 = DType.complex128

_ALIASES = {
    "bool": bool_, "bool_": bool_,
    "int8": int8, "i8": int8, "uint8": uint8, "u8": uint8, "int16": int16, "i16": int16, "short": int16,
    "int32": int32, "i32": int32, "int": int32, "int64": int64, "i64": int64, "long": int64,
    "uint32": uint32, "u32": uint32,
    "float16": float16, "f16": float16, "half": float16,
    "bfloat16": bfloat16, "bf16": bfloat16,
    "float32": float32, "f32": float32, "float": float32,
    "float64": float64, "f64": float64, "double": float64,
    "float8_e4m3fn": float8_e4m3fn, "e4m3": float8_e4m3fn, "fp8_e4m3": float8_e4m3fn,
    "float8_e5m2": float8_e5m2, "e5m2": float8_e5m2, "fp8_e5m2": float8_e5m2,
    "complex64": complex64, "complex128": complex128, "cfloat": complex64, "cdouble": complex128,
}


def dtype(x) -> DType:
    """Convert a dtype-like (baracuda DType, string, numpy / torch / JAX / ml_dtypes dtype) to a DType."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        name = x
    else:
        name = None
        mod = type(x).__module__ or ""
        if mod.startswith("torch"):
            name = str(x).rsplit(".", 1)[-1]  # torch.bfloat16 -> "bfloat16"
        else:
            try:
                import numpy as np

                name = np.dtype(x).name
            except Exception:
                name = getattr(x, "name", None) or getattr(x, "__name__", None)
    d = _ALIASES.get(str(name).lower()) if name is not None else None
    if d is None:
        from .errors import InvalidDType

        raise InvalidDType(f"dtype: cannot convert {x!r} to a baracuda dtype; known: {sorted(set(_ALIASES))}")
    return d


__all__ = ["DType", "dtype", "bool_", "int8", "uint8", "int16", "int32", "int64", "uint32", "float16", "bfloat16",
           "float32", "float64", "float8_e4m3fn", "float8_e5m2", "complex64", "complex128"]
