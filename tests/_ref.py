"""Shared helpers of the GPU tests: dtype tables, tolerances, input domains, poisoned outputs
and the float64 / int64 torch reference of every elementwise op.

Imported by the test modules only after `pytest.importorskip("torch")` and
`pytest.importorskip("baracuda")` succeeded; creating tensors needs a CUDA device.
"""
import math
import zlib

import pytest
import torch
import torch.nn.functional as F

import baracuda as bc

DEV = "cuda"
OPS = {row["name"]: row for row in bc.elementwise_ops()}

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
UINT32 = getattr(torch, "uint32", None)
INT_INFO = {torch.int8: (8, True), torch.uint8: (8, False), torch.int16: (16, True),
            torch.int32: (32, True), torch.int64: (64, True)}
if UINT32 is not None:
    INT_INFO[UINT32] = (32, False)

# (rtol, atol) against a float64 reference rounded to the output dtype.
TOL = {torch.float64: (1e-12, 1e-12), torch.float32: (1e-5, 1e-5),
       torch.float16: (1e-3, 1e-3), torch.bfloat16: (8e-3, 8e-3)}
# Ops whose f32 result is one (or two) correctly rounded operations: plain 1e-5 in f32.
# Everything else goes through libm transcendentals and gets 2e-5.
SIMPLE = {"neg", "abs", "sign", "square", "reciprocal", "floor", "ceil", "round", "trunc", "frac", "relu",
          "relu6", "hardtanh", "threshold", "hardshrink", "softshrink", "leaky_relu", "affine", "hardsigmoid",
          "hardswish", "add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "maximum", "minimum",
          "fmax", "fmin", "copysign", "where", "clamp", "lerp", "addcmul", "addcdiv", "fma", "reglu"}


def tdtype(name):
    """torch dtype for a baracuda dtype name; skips the test where torch lacks it."""
    import pytest

    t = getattr(torch, name, None)
    if t is None:
        pytest.skip(f"this torch has no {name}")
    return t


def tolerance(name, dt):
    rtol, atol = TOL[dt]
    base = name[:-len("_backward")] if name.endswith("_backward") else name
    if dt == torch.float32 and (base not in SIMPLE or name != base):
        rtol = 2e-5
    return rtol, atol


def jax_gpu():
    """(jax, its first GPU device), or skip the test when JAX or its GPU backend is missing."""
    jax = pytest.importorskip("jax")
    try:
        return jax, jax.devices("gpu")[0]
    except RuntimeError as e:
        pytest.skip(f"JAX has no GPU backend: {e}")


def cupy_gpu():
    """The cupy module, or skip the test when CuPy or a GPU it can see is missing."""
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no device")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"CuPy sees no GPU: {e}")
    return cp


def gen(key):
    """A CUDA generator seeded from the test's own key: reproducible, different per test."""
    return torch.Generator(device=DEV).manual_seed(zlib.crc32(key.encode()))


# ---- integers without relying on torch's (partial) uint32 kernels ---------------------------------

def from_i64(v, dt):
    """int64 tensor (values representable in dt) -> dt."""
    if dt == torch.int64:
        return v
    if dt == UINT32:
        return v.to(torch.int32).view(UINT32)
    return v.to(dt)


def to_i64(t):
    if t.dtype == UINT32:
        return t.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    return t.to(torch.int64)


def wrap(v, dt):
    """int64 values reduced modulo dt's width (two's complement), still as int64."""
    bits, signed = INT_INFO[dt]
    if bits == 64:
        return v
    m = 1 << bits
    r = v & (m - 1)
    return torch.where(r >= m // 2, r - m, r) if signed else r


def where_any(mask, a, b):
    if a.dtype == UINT32:
        return torch.where(mask, a.view(torch.int32), b.view(torch.int32)).view(UINT32)
    return torch.where(mask, a, b)


# ---- inputs ------------------------------------------------------------------------------------------

# Per-op domains of the operands (default: "normal" for every operand).
_ACT = ("act",)
DOMAINS = {
    **{n: ("pos",) for n in ("log", "log2", "log10", "sqrt", "rsqrt", "lgamma", "pow_scalar")},
    **{n: ("unit",) for n in ("asin", "acos", "atanh", "erfinv")},
    "acosh": ("gt1",), "log1p": ("gtm1",), "tan": ("tan",), "reciprocal": ("nonzero",),
    **{n: _ACT for n in ("relu", "relu6", "gelu", "gelu_tanh", "silu", "mish", "softplus", "softsign",
                         "hardswish", "hardsigmoid", "hardtanh", "tanhshrink", "elu", "selu", "celu",
                         "leaky_relu", "threshold", "hardshrink", "softshrink", "sigmoid", "logsigmoid",
                         "swiglu", "geglu", "geglu_tanh", "reglu", "glu")},
    **{n: ("normal", "nonzero") for n in ("div", "floor_divide", "remainder", "fmod")},
    "pow": ("pos", "small"),
    # never equal: max / min gradients at ties follow conventions that differ between ops
    **{n: ("odd", "even") for n in ("maximum", "minimum", "fmax", "fmin")},
    "shift_left": ("normal", "shift"), "shift_right": ("normal", "shift"),
    "where": ("bool", "normal", "normal"),
    "clamp": ("act", "odd", "even"),
    "addcdiv": ("normal", "normal", "nonzero"),
}

# Non-default, float32-exact parameters for the sweeps (defaults are tested separately).
PARAMS = {
    "softplus": dict(beta=2.0, threshold=5.0), "hardtanh": dict(min_val=-0.5, max_val=2.0),
    "elu": dict(alpha=0.5), "celu": dict(alpha=1.5), "leaky_relu": dict(negative_slope=0.125),
    "threshold": dict(threshold=0.25, value=-2.0), "hardshrink": dict(lambd=0.75),
    "softshrink": dict(lambd=0.75), "pow_scalar": dict(exponent=3.0), "affine": dict(a=2.0, b=1.0),
    "add": dict(alpha=2.0), "sub": dict(alpha=3.0), "addcmul": dict(value=0.5), "addcdiv": dict(value=0.5),
}


def make(shape, dt, domain="normal", g=None):
    """Random tensor of `dt` on the device, drawn from `domain` (never all zeros)."""
    shape = tuple(shape)
    kw = dict(generator=g, device=DEV)
    if dt == torch.bool:
        return torch.randint(0, 2, shape, **kw) == 1
    if dt in INT_INFO:
        bits, signed = INT_INFO[dt]
        if domain == "nonzero":
            v = torch.randint(1, 13, shape, **kw)
            if signed:
                v = v * (torch.randint(0, 2, shape, **kw) * 2 - 1)
            return from_i64(v, dt)
        if domain == "shift":
            lo, hi = 0, bits
        elif domain == "pos":
            lo, hi = 1, 51
        elif domain == "odd":
            return from_i64(torch.randint(0, 50, shape, **kw) * 2 + 1, dt)
        elif domain == "even":
            return from_i64(torch.randint(0, 50, shape, **kw) * 2, dt)
        elif bits == 8:
            lo, hi = (-128, 128) if signed else (0, 256)
        else:
            lo, hi = (-1000, 1001) if signed else (0, 2001)
        return from_i64(torch.randint(lo, hi, shape, dtype=torch.int64, **kw), dt)
    f64 = dict(dtype=torch.float64, **kw)
    if domain in ("odd", "even"):  # multiples of 1/16 in [-6, 6], exact in every float dtype
        k = torch.randint(-48, 48, shape, **kw) * 2 + (1 if domain == "odd" else 0)
        return (k.to(torch.float64) / 16).to(dt)
    u = torch.rand(shape, **f64)
    n = torch.randn(shape, **f64)
    x = {
        "normal": lambda: 2 * n, "act": lambda: 3 * n, "small": lambda: n,
        "pos": lambda: 0.1 + 3.9 * u, "unit": lambda: (2 * u - 1) * 0.95, "gt1": lambda: 1.1 + 3.9 * u,
        "gtm1": lambda: -0.9 + 4.9 * u, "tan": lambda: (2 * u - 1) * 1.4,
        "nonzero": lambda: torch.where(n >= 0, 1.0, -1.0) * (0.25 + 3.75 * u),
    }[domain if domain != "shift" else "normal"]()
    return x.to(dt)


SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2.0, -2.0,
            3.0, -3.0, 6.0, -6.0, 0.75, -0.75, 1e-3, -1e-3, 20.0, -20.0, 100.0, -100.0]


def with_specials(x, g, frac=0.2):
    """x with about `frac` of its elements replaced by NaN, +-inf, +-0 and +-1."""
    sp = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0], dtype=torch.float64, device=DEV)
    pick = sp[torch.randint(0, len(sp), x.shape, generator=g, device=DEV)].to(x.dtype)
    return torch.where(torch.rand(x.shape, generator=g, device=DEV) < frac, pick, x)


def make_inputs(name, dt, shapes, g):
    """Inputs for op `name` with data dtype `dt`, one per shape, drawn from the op's domains."""
    row = OPS[name]
    doms = DOMAINS.get(name) or ("normal",) * len(shapes)
    xs = [make(s, torch.bool if d == "bool" else dt, d, g) for s, d in zip(shapes, doms)]
    if row["category"] in ("predicate", "compare") and dt.is_floating_point:
        xs = [with_specials(x, g) for x in xs]
    if row["category"] == "compare" and xs[0].shape == xs[1].shape:  # some exact ties
        xs[1] = where_any(torch.rand(xs[0].shape, generator=g, device=DEV) < 0.25, xs[0], xs[1])
    return xs


def poison(shape, dt, value=None):
    """A tensor whose every element is wrong: NaN (floats), a sentinel (ints), a pattern (bool)."""
    shape = tuple(shape)
    if dt == torch.bool:
        n = math.prod(shape)
        return (torch.arange(n, device=DEV) % 3 == 0).reshape(shape)
    if dt in INT_INFO:
        return from_i64(torch.full(shape, 91 if not INT_INFO[dt][1] else -91, dtype=torch.int64, device=DEV), dt)
    v = math.nan if value is None else value
    return torch.full(shape, v, dtype=torch.float32, device=DEV).to(dt)


# ---- reference ---------------------------------------------------------------------------------------

def _alpha(a, alpha):
    return alpha if a.is_floating_point() else int(alpha)


def _gated(act):
    def f(x, axis=-1):
        a, b = torch.chunk(x, 2, dim=int(axis))
        return act(a) * b
    return f


_PRED_FLOAT = {"isnan": torch.isnan, "isinf": torch.isinf, "isposinf": torch.isposinf,
               "isneginf": torch.isneginf, "isfinite": torch.isfinite, "signbit": torch.signbit,
               "logical_not": torch.logical_not}


def _pred(name):
    def f(x):
        if x.is_floating_point():
            return _PRED_FLOAT[name](x)
        if name == "signbit":
            return x < 0
        if name == "logical_not":
            return x == 0
        return torch.full(x.shape, name == "isfinite", dtype=torch.bool, device=x.device)
    return f


REF = {
    "neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "square": torch.square,
    "reciprocal": torch.reciprocal, "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1,
    "log": torch.log, "log2": torch.log2, "log10": torch.log10, "log1p": torch.log1p, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "cbrt": lambda x: torch.sign(x) * x.abs().pow(1.0 / 3.0),
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin, "acos": torch.acos,
    "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh,
    "acosh": torch.acosh, "atanh": torch.atanh, "erf": torch.erf, "erfc": torch.erfc, "erfinv": torch.erfinv,
    "lgamma": torch.lgamma, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
    "trunc": torch.trunc, "frac": torch.frac, "sigmoid": torch.sigmoid, "logsigmoid": F.logsigmoid,
    "relu": torch.relu, "relu6": F.relu6, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu, "mish": F.mish,
    "softplus": lambda x, beta=1.0, threshold=20.0: F.softplus(x, beta=beta, threshold=threshold),
    "softsign": F.softsign,
    # Exact in float64 (torch's kernels use a float32 1/6 even for float64).
    "hardswish": lambda x: x * (x + 3).clamp(0, 6) / 6,
    "hardsigmoid": lambda x: (x + 3).clamp(0, 6) / 6,
    "hardtanh": lambda x, min_val=-1.0, max_val=1.0: F.hardtanh(x, min_val, max_val),
    "tanhshrink": F.tanhshrink, "elu": lambda x, alpha=1.0: F.elu(x, alpha), "selu": F.selu,
    "celu": lambda x, alpha=1.0: F.celu(x, alpha),
    "leaky_relu": lambda x, negative_slope=0.01: F.leaky_relu(x, negative_slope),
    "threshold": lambda x, threshold=0.0, value=0.0: F.threshold(x, threshold, value),
    "hardshrink": lambda x, lambd=0.5: F.hardshrink(x, lambd),
    "softshrink": lambda x, lambd=0.5: F.softshrink(x, lambd),
    "pow_scalar": lambda x, exponent=2.0: torch.pow(x, exponent),
    "affine": lambda x, a=1.0, b=0.0: a * x + b,
    "bitwise_not": torch.bitwise_not,
    **{n: _pred(n) for n in _PRED_FLOAT},
    "add": lambda a, b, alpha=1.0: torch.add(a, b, alpha=_alpha(a, alpha)),
    "sub": lambda a, b, alpha=1.0: torch.sub(a, b, alpha=_alpha(a, alpha)),
    "mul": torch.mul, "div": torch.div,
    "floor_divide": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "remainder": torch.remainder, "fmod": torch.fmod, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
    "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign, "logaddexp": torch.logaddexp,
    "silu_mul": lambda a, b: F.silu(a) * b, "gelu_mul": lambda a, b: F.gelu(a) * b,
    "gelu_tanh_mul": lambda a, b: F.gelu(a, approximate="tanh") * b,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
    "shift_left": torch.bitwise_left_shift, "shift_right": torch.bitwise_right_shift,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
    "where": torch.where, "clamp": torch.clamp, "lerp": torch.lerp,
    "addcmul": lambda x, t1, t2, value=1.0: torch.addcmul(x, t1, t2, value=value),
    "addcdiv": lambda x, t1, t2, value=1.0: torch.addcdiv(x, t1, t2, value=value),
    "fma": lambda a, b, c: a * b + c,
    "swiglu": _gated(F.silu), "geglu": _gated(F.gelu), "geglu_tanh": _gated(lambda v: F.gelu(v, approximate="tanh")),
    "reglu": _gated(F.relu), "glu": lambda x, axis=-1: F.glu(x, dim=int(axis)),
}
# Torch expressions that are not one torch op: compare against them in float64 even in the
# same-dtype (NaN / inf) tests, where extra roundings in a low-precision dtype would differ.
COMPOSITE = {"cbrt", "affine", "fma", "softsign", "tanhshrink", "hardswish", "hardsigmoid", "silu_mul", "gelu_mul",
             "gelu_tanh_mul"}


def data_dtype(name, inputs):
    """The dtype baracuda takes for the op: `where`'s a / b, else the first tensor's."""
    cands = inputs[1:] if name == "where" else inputs
    return next(t.dtype for t in cands if isinstance(t, torch.Tensor))


def upcast(t):
    return t.double() if t.is_floating_point() else to_i64(t)


def reference(name, inputs, params=None):
    """(reference tensor in float64 / int64 / bool, output dtype) of `name` on `inputs`.

    Python scalars become 0-d tensors of the data dtype first, as baracuda documents.
    """
    params = params or {}
    row = OPS[name]
    ddt = data_dtype(name, inputs)
    ts = [x if isinstance(x, torch.Tensor) else torch.tensor(x, device=DEV).to(ddt) for x in inputs]
    ups = [t if (name == "where" and i == 0) else upcast(t) for i, t in enumerate(ts)]
    if name == "bitwise_not" and ddt == torch.bool:
        ref = ups[0] == 0
    else:
        ref = REF[name](*ups, **params)
    out_dt = torch.bool if row["category"] in ("predicate", "compare") else ddt
    if out_dt == torch.bool and ref.dtype != torch.bool:
        ref = ref != 0
    return ref, out_dt


def assert_matches(res, ref, name="", equal_nan=False, rtol=None, atol=None):
    """res (any dtype) equals ref (float64 / int64 / bool, or res's own dtype) within tolerance."""
    assert tuple(res.shape) == tuple(ref.shape), f"{name}: shape {tuple(res.shape)} != {tuple(ref.shape)}"
    dt = res.dtype
    if dt == torch.bool or dt in INT_INFO:
        got = res if dt == torch.bool else to_i64(res)
        exp = ref.bool() if dt == torch.bool else wrap(ref if ref.dtype == torch.int64 else to_i64(ref), dt)
        bad = got != exp
        if bad.any():
            idx = bad.nonzero()[:5].tolist()
            raise AssertionError(f"{name} {dt}: {int(bad.sum())} of {bad.numel()} elements differ; first at "
                                 f"{idx}: got {[got[tuple(i)].item() for i in idx]}, "
                                 f"expected {[exp[tuple(i)].item() for i in idx]}")
        return
    if dt in FP8_DTYPES:
        exp = ref if ref.dtype == dt else ref.to(dt)
        torch.testing.assert_close(res.float(), exp.float(), rtol=0, atol=0, equal_nan=True,
                                   msg=lambda m: f"{name} {dt}: {m}")
        return
    r, a = tolerance(name, dt)
    exp = ref.double() if ref.dtype == dt else ref.to(dt).double()
    torch.testing.assert_close(res.double(), exp, rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
                               equal_nan=equal_nan, msg=lambda m: f"{name} {dt}: {m}")


def check_op(name, *inputs, params=None, out="poison"):
    """Run bc.<name> on inputs (into a poisoned out unless out is given / None) and compare."""
    params = params or {}
    ref, out_dt = reference(name, inputs, params)
    fn = getattr(bc, name)
    if isinstance(out, str):
        out = poison(ref.shape, out_dt)
    if out is None:
        res = fn(*inputs, **params)
        assert isinstance(res, torch.Tensor) and res.dtype == out_dt and res.is_cuda, (type(res), res.dtype)
    else:
        res = fn(*inputs, out=out, **params)
        assert res is out
    assert_matches(res, ref, name)
    return res


def bits(t):
    """An integer view of t's bits, for bitwise comparisons (NaN-safe)."""
    return t.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


# Forward references whose autograd derivative at a kink differs from torch's own backward
# kernel (which baracuda follows): torch's hardswish / hardsigmoid backward give 0 at x <= -3
# and 1 / 0 at x >= 3.
REF_GRAD = {
    "hardswish": lambda x: torch.where(x <= -3, torch.zeros_like(x), torch.where(x >= 3, x, x * (x + 3) / 6)),
    "hardsigmoid": lambda x: torch.where(x <= -3, torch.zeros_like(x),
                                         torch.where(x >= 3, torch.ones_like(x), (x + 3) / 6)),
}
