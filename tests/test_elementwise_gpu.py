"""GPU correctness of the elementwise family.

Every forward op x every dtype of its row against a float64 torch reference, layouts
(strided, broadcast, empty, odd / large sizes, misaligned, in place), NaN / inf against
torch itself, cast, fill and determinism. Outputs are poisoned (NaN / sentinels) before
every run so unwritten elements show up. The plan API, streams, CUDA graphs and the other
frameworks are in test_interop_gpu.py; gradients in test_backward_gpu.py.
"""
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _ref.py, whatever the import mode
import _ref as R  # noqa: E402  (needs torch and baracuda)
from _ref import DEV, OPS  # noqa: E402

errors = bc.errors
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]


# ---- 1. every op x every dtype ---------------------------------------------------------------------

def _forward_cases():
    for name, row in OPS.items():
        if row["category"] in ("cast", "fill") or row["category"].endswith("_backward"):
            continue
        for d in row["dtypes"]:
            yield pytest.param(name, d.name, id=f"{name}-{d.name}")


def test_reference_covers_every_op():
    fwd = {n for n, r in OPS.items() if r["category"] not in ("cast", "fill") and not r["category"].endswith("_backward")}
    assert fwd - set(R.REF) == set(), "ops without a torch reference in tests/_ref.py"
    for n, r in OPS.items():
        assert hasattr(bc, n) or n == "fill", n
        if r["backward"]:
            assert r["backward"] in OPS and hasattr(bc, r["backward"]), r["backward"]


@pytest.mark.parametrize("name,dtname", list(_forward_cases()))
def test_forward_matches_float64_reference(name, dtname):
    dt = R.tdtype(dtname)
    row = OPS[name]
    shape = (17, 66) if row["category"] == "gated" else (33, 65)
    inputs = R.make_inputs(name, dt, [shape] * row["arity"], R.gen(f"fwd/{name}/{dtname}"))
    R.check_op(name, *inputs, params=R.PARAMS.get(name, {}))


@pytest.mark.parametrize("name", [n for n, r in OPS.items() if r["params"] and r["category"] in ("unary", "binary",
                                                                                                  "ternary", "gated")])
def test_default_params_match_torch_defaults(name):
    row = OPS[name]
    shape = (16, 66) if row["category"] == "gated" else (33, 65)
    inputs = R.make_inputs(name, torch.float32, [shape] * row["arity"], R.gen(f"defaults/{name}"))
    R.check_op(name, *inputs)  # no params: the row's defaults, compared with the reference's (torch's) defaults


@pytest.mark.parametrize("name,dt,params", [
    ("leaky_relu", torch.float64, dict(negative_slope=0.01)), ("elu", torch.float64, dict(alpha=0.3)),
    ("softplus", torch.float64, dict(beta=0.3, threshold=20.0)), ("affine", torch.float64, dict(a=0.1, b=0.2)),
    ("pow_scalar", torch.float64, dict(exponent=1.0 / 3.0)), ("add", torch.float64, dict(alpha=0.1)),
    ("addcmul", torch.float64, dict(value=0.1)), ("add", torch.int64, dict(alpha=2.0 ** 40 + 1)),
], ids=lambda v: getattr(v, "__name__", None) or str(v))
def test_params_keep_their_precision(name, dt, params):
    """float64 ops must not round their parameters to float32 (nor int64 ops their alpha)."""
    row = OPS[name]
    R.check_op(name, *R.make_inputs(name, dt, [(257,)] * row["arity"], R.gen(f"prec/{name}")), params=params)


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("name", ["swiglu", "geglu", "glu"])
def test_gated_axis(name, axis):
    x = R.make((6, 10, 8), torch.float32, "act", R.gen(f"axis/{name}/{axis}"))
    R.check_op(name, x, params=dict(axis=axis))
    R.check_op(name, x.transpose(0, 2), params=dict(axis=axis))
    R.check_op(name, x, params=dict(axis=axis), out=None)
    with pytest.raises(errors.InvalidArgument, match="odd"):
        getattr(bc, name)(R.make((5, 10, 7), torch.float32), axis=-1)


# ---- 2. layouts ------------------------------------------------------------------------------------

LAYOUT_OPS = [("exp", torch.float32), ("silu", torch.bfloat16), ("neg", torch.int16), ("add", torch.float16),
              ("mul", torch.int8), ("lt", torch.float32), ("where", torch.float32), ("clamp", torch.float32),
              ("addcmul", torch.bfloat16), ("cast", None)]


def _laid_out(maker, shape, layout):
    """A tensor of `shape` (2-d) whose memory layout is `layout`, filled by maker(shape)."""
    n, m = shape
    if layout == "contig":
        return maker(shape)
    if layout == "t":
        return maker((m, n)).t()
    if layout == "slice":
        return maker((n, 2 * m))[:, ::2]
    if layout == "offset":  # base pointer one element past an allocation: no vector path
        return maker((n * m + 1,))[1:].view(n, m)
    if layout == "expand":  # stride-0 rows
        return maker((1, m)).expand(n, m)
    if layout == "rows":  # row stride larger than the row
        return maker((n, m + 3))[:, :m]
    raise ValueError(layout)


def _layout_inputs(name, dt, layout, which, g):
    row = OPS["cast" if name == "cast" else name]
    doms = R.DOMAINS.get(name) or ("normal",) * row["arity"]
    out = []
    for i, d in enumerate(doms):
        t = torch.bool if d == "bool" else (torch.float32 if name == "cast" else dt)
        lay = layout if (which == "all" or i == 0) else "contig"
        out.append(_laid_out(lambda s, t=t, d=d: R.make(s, t, d, g), (33, 65), lay))
    return out


def _run_layout(name, inputs, out):
    if name == "cast":
        ref = inputs[0].to(torch.bfloat16)
        if isinstance(out, str):
            out = R.poison(tuple(ref.shape), torch.bfloat16)
        res = bc.cast(inputs[0], bc.bfloat16, out=out)
        assert res is out
        R.assert_matches(res, ref, "cast")
    else:
        R.check_op(name, *inputs, params=R.PARAMS.get(name, {}), out=out)


@pytest.mark.parametrize("which", ["first", "all"])
@pytest.mark.parametrize("layout", ["t", "slice", "offset", "expand", "rows"])
@pytest.mark.parametrize("name,dt", LAYOUT_OPS, ids=[n for n, _ in LAYOUT_OPS])
def test_input_layouts(name, dt, layout, which):
    inputs = _layout_inputs(name, dt, layout, which, R.gen(f"lay/{name}/{layout}/{which}"))
    _run_layout(name, inputs, "poison")


@pytest.mark.parametrize("layout", ["t", "slice", "offset", "rows"])
@pytest.mark.parametrize("name,dt", LAYOUT_OPS, ids=[n for n, _ in LAYOUT_OPS])
def test_output_layouts(name, dt, layout):
    inputs = _layout_inputs(name, dt, "contig", "all", R.gen(f"olay/{name}/{layout}"))
    if name == "cast":
        out_dt = torch.bfloat16
    else:
        out_dt = R.reference(name, inputs, R.PARAMS.get(name, {}))[1]
    out = _laid_out(lambda s: R.poison(s, out_dt), (33, 65), layout)
    _run_layout(name, inputs, out)


@pytest.mark.parametrize("perm", [(0, 1, 2, 3), (3, 1, 0, 2), (1, 0, 3, 2), (2, 3, 0, 1)])
def test_rank4_permutations(perm):
    g = R.gen(f"perm/{perm}")
    a = R.make((2, 3, 4, 5), torch.float32, g=g).permute(*perm)
    b = R.make(tuple(a.shape), torch.float32, g=g)
    R.check_op("atan2", a, b)
    R.check_op("atan2", a, b, out=None)
    R.check_op("exp", a, out=R.poison((2, 3, 4, 5), torch.float32).permute(*perm))  # out laid out like a
    rev = tuple(reversed(a.shape))
    R.check_op("exp", b, out=R.poison(rev, torch.float32).permute(3, 2, 1, 0))  # out "transposed"


TRANSPOSES = [((65, 33), (1, 0)), ((32, 32), (1, 0)), ((1000, 3), (1, 0)), ((3, 1000), (1, 0)),
              ((7, 40, 70), (0, 2, 1)), ((70, 40, 5), (2, 1, 0)), ((2, 33, 3, 31), (0, 3, 2, 1))]


@pytest.mark.parametrize("shape,perm", TRANSPOSES, ids=str)
@pytest.mark.parametrize("name,dt", [("exp", torch.float32), ("neg", torch.int8), ("silu", torch.float64),
                                     ("isnan", torch.bfloat16), ("cast", torch.float32), ("gelu", torch.float16)])
def test_transposed_input(name, dt, shape, perm):
    """One input read across its unit-stride dim (the tiled transpose path), any tile remainder."""
    g = R.gen(f"transpose/{name}/{shape}/{perm}")
    x = R.make(shape, dt, "act", g)
    x = (R.with_specials(x, g) if name == "isnan" else x).permute(*perm)
    if name == "cast":
        y = bc.cast(x, bc.bfloat16, out=R.poison(x.shape, torch.bfloat16))
        R.assert_matches(y, x.to(torch.bfloat16), "cast", rtol=0, atol=0)
    else:
        y = R.check_op(name, x)
        R.check_op(name, x, out=None)
    same = bc.cast(x.contiguous(), bc.bfloat16) if name == "cast" else getattr(bc, name)(x.contiguous())
    assert torch.equal(R.bits(y), R.bits(same)), "the tiled path and the contiguous path disagree"


BROADCASTS = [((64, 48), (48,)), ((64, 33), (33,)), ((64, 1), (1, 48)), ((64, 48), ()), ((4, 1, 8), (3, 8)),
              ((1,), (5,)), ((2, 1, 3, 1), (1, 4, 1, 5)), ((5, 1), (5, 7)), ((), (7, 3)), ((128, 256), (128, 1))]


@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("name,dt", [("add", torch.float32), ("mul", torch.bfloat16), ("sub", torch.int32),
                                     ("maximum", torch.float16), ("atan2", torch.float64), ("eq", torch.int8),
                                     ("bitwise_xor", torch.uint8)])
def test_broadcast(name, dt, shapes):
    g = R.gen(f"bcast/{name}/{shapes}")
    inputs = R.make_inputs(name, dt, list(shapes), g)
    R.check_op(name, *inputs, params=R.PARAMS.get(name, {}))
    R.check_op(name, *inputs, params=R.PARAMS.get(name, {}), out=None)


@pytest.mark.parametrize("shapes", [((4, 1, 8), (3, 8), (8,)), ((64, 1), (1, 48), ()), ((48,), (64, 48), (64, 1)),
                                    ((), (), (5,))], ids=str)
@pytest.mark.parametrize("name", ["where", "clamp", "lerp", "fma"])
def test_broadcast_ternary(name, shapes):
    inputs = R.make_inputs(name, torch.float32, list(shapes), R.gen(f"bcast3/{name}/{shapes}"))
    R.check_op(name, *inputs)
    R.check_op(name, *inputs, out=None)


@pytest.mark.parametrize("row_stride", [64, 80, 65, 72])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.int8])
def test_bias_add_with_row_strides(dt, row_stride):
    """(N, C) + (C,) where the rows of a / out are not adjacent: inner-contiguous or strided path."""
    g = R.gen(f"bias/{dt}/{row_stride}")
    a = R.make((96, row_stride), dt, g=g)[:, :64]
    b = R.make((64,), dt, g=g)
    R.check_op("add", a, b, params=dict(alpha=2.0))
    R.check_op("add", a, b, out=R.poison((96, row_stride), dt)[:, :64])
    R.check_op("mul", R.make((96, 1), dt, g=g), b)


@pytest.mark.parametrize("case", ["add-x-s", "add-s-x", "mul-int", "sub", "pow-base", "pow-exp", "max", "clamp",
                                  "where-a", "where-b", "lt", "fma"])
def test_python_scalar_operands(case):
    g = R.gen(f"scalar/{case}")
    x = R.make((33, 65), torch.float32, g=g)
    pos = R.make((33, 65), torch.float32, "pos", g)
    cond = R.make((33, 65), torch.bool, g=g)
    name, args = {
        "add-x-s": ("add", (x, 2.5)), "add-s-x": ("add", (2.5, x)),
        "mul-int": ("mul", (R.make((33, 65), torch.int32, g=g), 3)), "sub": ("sub", (x, 1.5)),
        "pow-base": ("pow", (pos, 2.0)), "pow-exp": ("pow", (2.0, x)), "max": ("maximum", (x, 0.0)),
        "clamp": ("clamp", (x, -0.5, 0.5)), "where-a": ("where", (cond, x, 0.0)),
        "where-b": ("where", (cond, 0.0, x)), "lt": ("lt", (x, 0.0)), "fma": ("fma", (x, 2.0, 1.0)),
    }[case]
    R.check_op(name, *args, out=None)
    R.check_op(name, *args)


@pytest.mark.parametrize("shape", [(0,), (3, 0, 5), (0, 4)])
def test_zero_size(shape):
    g = R.gen(f"empty/{shape}")
    x = R.make(shape, torch.float32, g=g)
    for name, args in [("exp", (x,)), ("add", (x, x)), ("add", (x, R.make(shape[-1:], torch.float32, g=g))),
                       ("lt", (x, 0.0)), ("where", (x > 0, x, x)), ("clamp", (x, -1.0, 1.0))]:
        y = getattr(bc, name)(*args)
        assert tuple(y.shape) == shape and y.numel() == 0
        getattr(bc, name)(*args, out=torch.empty(shape, dtype=y.dtype, device=DEV))
    assert tuple(bc.add(R.make((0,), torch.float32), R.make((1,), torch.float32)).shape) == (0,)
    assert tuple(bc.swiglu(R.make(shape[:-1] + (8,), torch.float16)).shape) == shape[:-1] + (4,)
    assert bc.cast(x, bc.float16).dtype == torch.float16
    assert tuple(bc.full_like(x, 3.0).shape) == shape
    bc.fill(x, 1.0)
    assert tuple(bc.exp_backward(x, x).shape) == shape


@pytest.mark.parametrize("n", [1, 2, 3, 7, 15, 16, 17, 33, 1023, 4097])
@pytest.mark.parametrize("name,dt", [("exp", torch.float32), ("silu", torch.bfloat16), ("add", torch.int8),
                                     ("gelu", torch.float16), ("where", torch.float64), ("ne", torch.uint8)])
def test_odd_sizes(name, dt, n):
    row = OPS[name]
    inputs = R.make_inputs(name, dt, [(n,)] * row["arity"], R.gen(f"odd/{name}/{n}"))
    R.check_op(name, *inputs, params=R.PARAMS.get(name, {}))
    R.check_op(name, *[t[1:] for t in inputs])  # the same, one element in: misaligned


def test_zero_dim_tensors():
    x = torch.tensor(0.75, device=DEV)
    R.check_op("exp", x)
    R.check_op("exp", x, out=None)
    R.check_op("add", x, R.make((3, 4), torch.float32))
    R.check_op("where", torch.tensor(True, device=DEV), x, torch.tensor(-1.0, device=DEV), out=None)


@pytest.mark.parametrize("name,dt", [("exp", torch.float32), ("add", torch.bfloat16), ("cast", torch.float16)])
def test_large(name, dt):
    n = 2 ** 24 + 3
    g = R.gen(f"large/{name}")
    x = R.make((n,), dt, g=g)
    if name == "cast":
        y = bc.cast(x, bc.float32, out=R.poison((n,), torch.float32))
        assert torch.equal(y, x.float())
    elif name == "add":
        R.check_op("add", x, R.make((), dt, g=g), params=dict(alpha=2.0))
        R.check_op("add", x, x, out=None)
    else:
        R.check_op(name, x)
        R.check_op(name, x[2:])


def test_huge_needs_64bit_indexing():
    """More than 2**31 elements: the 64-bit contiguous and strided paths."""
    free, _ = torch.cuda.mem_get_info()
    if free < 12 * 2 ** 30:
        pytest.skip("needs 12 GiB of free device memory")
    rows, cols = 65537, 32769  # 2**31 + 98305 elements
    x = torch.randint(-128, 128, (rows, cols), dtype=torch.int8, device=DEV)
    y = bc.neg(x)
    assert torch.equal(y, -x)
    del y
    yt = bc.neg(x.t())  # strided input, 64-bit offsets
    assert torch.equal(yt, -x.t())
    del yt
    z = torch.full((cols, rows), 91, dtype=torch.int8, device=DEV).t()
    bc.bitwise_not(x, out=z)  # strided output
    assert torch.equal(z, ~x)


def test_huge_strided_launches_split_into_32_bit_pieces():
    """Non-contiguous launches of 2**31 elements or more run as pieces under 2**31 (the kernels
    index in 32 bits): each layout, a chunked middle dim, and a last chunk of one index."""
    free, _ = torch.cuda.mem_get_info()
    if free < 24 * 2 ** 30:
        pytest.skip("needs 24 GiB of free device memory")
    g = torch.Generator(device=DEV).manual_seed(7)
    rows, cols = 65537, 32769  # 2**31 + 98305 elements
    x = torch.randint(-128, 128, (rows, 2 * cols), dtype=torch.int8, device=DEV, generator=g)
    assert torch.equal(bc.neg(x[:, ::2]), -x[:, ::2])  # strided input, no unit stride
    del x
    # [2, 4, 2**29]: the inner block of 2**29 fits, dim 1 is cut into chunks of 3 and 1.
    a = torch.randint(-128, 128, (2, 4, 2 ** 29), dtype=torch.int8, device=DEV, generator=g)
    b = torch.randint(-128, 128, (2, 1, 2 ** 29), dtype=torch.int8, device=DEV, generator=g)
    y = bc.add(a, b)
    assert torch.equal(y, a + b)
    y.fill_(5)
    bc.sub(a, b, out=y)  # in place of a poisoned output
    assert torch.equal(y, a - b)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.int8, torch.float64])
def test_misaligned_pointers(dt):
    g = R.gen(f"misaligned/{dt}")
    base, other = R.make((4099,), dt, g=g), R.make((4099,), dt, g=g)
    for k in (1, 2, 3):
        R.check_op("neg", base[k:])
        R.check_op("add", base[k:], other[:-k])  # one operand aligned, one not
        R.check_op("mul", base[k:], other[k:], out=R.poison((4099,), dt)[k:])
        R.check_op("mul", base[:-k], other[:-k], out=R.poison((4099,), dt)[k:])  # only out misaligned
        R.check_op("mul", base[k:], other[:1])  # misaligned, with a broadcast one-element operand
        R.check_op("where", base[:-k] > other[:-k], other[:1], base[k:])  # three operands, one broadcast


def test_in_place():
    g = R.gen("inplace")
    x = R.make((33, 65), torch.float32, g=g)
    ref = torch.exp(x.double())
    assert bc.exp(x, out=x) is x
    R.assert_matches(x, ref, "exp")
    a, b = R.make((64, 48), torch.bfloat16, g=g), R.make((48,), torch.bfloat16, g=g)
    ref = a.double() + b.double()
    bc.add(a, b, out=a)  # in place with a broadcast operand
    R.assert_matches(a, ref, "add")
    a, b = R.make((33, 65), torch.float16, g=g), R.make((33, 65), torch.float16, g=g)
    ref = a.double() * b.double()
    bc.mul(a, b, out=b)
    R.assert_matches(b, ref, "mul")
    ref = b.double() * b.double()
    bc.mul(b, b, out=b)
    R.assert_matches(b, ref, "mul")
    t = R.make((65, 33), torch.float32, g=g).t()  # in place on a transposed view
    ref = torch.sin(t.double())
    bc.sin(t, out=t)
    R.assert_matches(t, ref, "sin")
    c, p, q = R.make((33, 65), torch.bool, g=g), R.make((33, 65), torch.int32, g=g), R.make((33, 65), torch.int32, g=g)
    ref = torch.where(c, p, q)
    bc.where(c, p, q, out=p)
    assert torch.equal(p, ref)
    base = R.make((1025,), torch.float32, g=g)
    with pytest.raises(errors.InvalidArgument, match="overlap"):
        bc.exp(base[:-1], out=base[1:])
    x = R.make((8, 16), torch.float32, g=g)
    with pytest.raises(errors.InvalidArgument, match="overlap"):
        bc.swiglu(x, out=x[:, :8])


# ---- 3. NaN / inf against torch itself --------------------------------------------------------------

FLOAT_UNARY = [n for n, r in OPS.items() if r["category"] == "unary" and bc.float32 in r["dtypes"]]


def _special_values(dt, g, n_random=64):
    sp = torch.tensor(R.SPECIALS, dtype=torch.float64, device=DEV)
    return torch.cat([sp, 4 * torch.randn(n_random, generator=g, device=DEV, dtype=torch.float64)]).to(dt)


def _torch_same_dtype(name, inputs, params):
    if name in R.COMPOSITE:
        return R.REF[name](*[t.double() for t in inputs], **params).to(inputs[0].dtype)
    try:
        return R.REF[name](*inputs, **params)
    except (RuntimeError, NotImplementedError) as e:
        pytest.skip(f"torch has no {name} for {inputs[0].dtype}: {e}")


@pytest.mark.parametrize("dtname", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_unary_specials_match_torch(name, dtname):
    dt = R.tdtype(dtname)
    x = _special_values(dt, R.gen(f"nan1/{name}/{dtname}"))
    params = R.PARAMS.get(name, {})
    ref = _torch_same_dtype(name, [x], params)
    out = getattr(bc, name)(x, out=R.poison(x.shape, dt, value=1234.0), **params)
    R.assert_matches(out, ref, name, equal_nan=True)


BINARY_SPECIAL_OPS = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "maximum", "minimum",
                      "fmax", "fmin", "atan2", "hypot", "copysign", "logaddexp"]


@pytest.mark.parametrize("dtname", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("name", BINARY_SPECIAL_OPS)
def test_binary_specials_match_torch(name, dtname):
    dt = R.tdtype(dtname)
    v = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -0.5, 3.0],
                     dtype=torch.float64, device=DEV)
    a, b = v[:, None].expand(10, 10).to(dt), v[None, :].expand(10, 10).to(dt)  # every pair
    params = R.PARAMS.get(name, {})
    ref = _torch_same_dtype(name, [a, b], params)
    out = getattr(bc, name)(a, b, out=R.poison((10, 10), dt, value=1234.0), **params)
    R.assert_matches(out, ref, name, equal_nan=True)


@pytest.mark.parametrize("dtname", ["float16", "bfloat16", "float32", "float64"])
def test_ternary_specials_match_torch(dtname):
    dt = R.tdtype(dtname)
    x = _special_values(dt, R.gen(f"nan3/{dtname}"))
    lo, hi = torch.full_like(x, -1.5), torch.full_like(x, 2.0)
    R.assert_matches(bc.clamp(x, lo, hi), torch.clamp(x, lo, hi), "clamp", equal_nan=True)
    cond = torch.arange(x.numel(), device=DEV) % 2 == 0
    R.assert_matches(bc.where(cond, x, x.flip(0)), torch.where(cond, x, x.flip(0)), "where", equal_nan=True)


# ---- 4. cast -------------------------------------------------------------------------------------

CAST_DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint32", "float16", "bfloat16", "float32",
               "float64", "float8_e4m3fn", "float8_e5m2"]
_RANGE = {"bool": (0, 1), "int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "int32": (-1e4, 1e4),
          "int64": (-1e4, 1e4), "uint32": (0, 1e4), "float16": (-6e4, 6e4), "bfloat16": (-1e4, 1e4),
          "float32": (-1e4, 1e4), "float64": (-1e4, 1e4), "float8_e4m3fn": (-440, 440), "float8_e5m2": (-5.7e4, 5.7e4)}


def _torch_cast(x, d):
    """torch's .to(d), going through int64 where torch's uint32 support is partial."""
    if x.dtype == R.UINT32:
        x = R.to_i64(x)
    if d == R.UINT32:
        return R.from_i64(x.to(torch.int64), d)
    return x.to(d)


def _cast_source(src, dst, shape, g):
    """Values of `src` that are in range of both dtypes (80% of the narrower range)."""
    s = R.tdtype(src)
    if s == torch.bool:
        return R.make(shape, s, g=g)
    (a0, a1), (b0, b1) = _RANGE[src], _RANGE[src if dst == "bool" else dst]
    lo, hi = 0.8 * max(a0, b0), 0.8 * min(a1, b1)
    if s in R.INT_INFO:
        v = torch.randint(math.ceil(lo), math.floor(hi) + 1, shape, generator=g, device=DEV)
        v = torch.where(torch.rand(shape, generator=g, device=DEV) < 0.1, 0, v)
        return R.from_i64(v, s)
    u = lo + (hi - lo) * torch.rand(shape, generator=g, device=DEV)
    small = (4 * torch.randn(shape, generator=g, device=DEV)).clamp(lo, hi)
    pick = torch.rand(shape, generator=g, device=DEV)
    f = torch.where(pick < 0.45, u, small)
    f = torch.where(pick > 0.9, torch.where(pick > 0.95, 0.0, -0.0), f)
    return f.to(s)  # float32 values: float64 sources carry no extra bits (no double rounding)


@pytest.mark.parametrize("dst", CAST_DTYPES)
@pytest.mark.parametrize("src", CAST_DTYPES)
def test_cast_matches_torch(src, dst):
    x = _cast_source(src, dst, (33, 65), R.gen(f"cast/{src}/{dst}"))
    d = R.tdtype(dst)
    ref = _torch_cast(x, d)
    out = bc.cast(x, bc.dtype(dst), out=R.poison(x.shape, d))
    R.assert_matches(out, ref, f"cast {src}->{dst}", rtol=0, atol=0)
    if d != R.UINT32:
        y = bc.cast(x.t(), d)  # torch dtype accepted, strided input, allocated output
        assert y.dtype == d
        R.assert_matches(y, ref.t(), f"cast {src}->{dst}", rtol=0, atol=0)


def test_cast_float64_to_half_is_correctly_rounded():
    np = pytest.importorskip("numpy")
    x = torch.randn(100_000, dtype=torch.float64, device=DEV, generator=R.gen("f64->f16"))
    got = bc.cast(x, bc.float16).cpu().numpy()
    exp = x.cpu().numpy().astype(np.float16)  # numpy rounds float64 -> float16 once
    assert (got.view(np.uint16) == exp.view(np.uint16)).all()
    R.assert_matches(bc.cast(x, bc.float32), x.float(), "cast", rtol=0, atol=0)


@pytest.mark.parametrize("src", ["float32", "float16", "bfloat16", "float64"])
def test_fp8_saturation(src):
    s = R.tdtype(src)
    big = 65504.0 if src == "float16" else 1e6
    x = torch.tensor([big, -big, 1.0, 450.0, -460.0, 60000.0 if src != "bfloat16" else 59904.0],
                     dtype=s, device=DEV)
    for dst, mx, over in [("float8_e4m3fn", 448.0, math.nan), ("float8_e5m2", 57344.0, math.inf)]:
        d = R.tdtype(dst)
        sat = bc.cast(x, bc.dtype(dst)).float()
        assert sat[0].item() == mx and sat[1].item() == -mx and sat[2].item() == 1.0
        assert torch.isfinite(sat).all()
        nosat = bc.cast(x, bc.dtype(dst), saturate=False).float()
        if math.isnan(over):
            assert nosat[:2].isnan().all()
        else:
            assert nosat[0].item() == math.inf and nosat[1].item() == -math.inf
        # saturate=False is torch's .to() for every value (incl. those that round down to the max)
        torch.testing.assert_close(nosat, x.to(d).float(), rtol=0, atol=0, equal_nan=True)


# ---- 5. fill / full_like ------------------------------------------------------------------------

FILL_VALUES = {"bool": [1.0, 0.0], "int8": [-77.0, 127.0], "uint8": [200.0], "int16": [-30000.0],
               "int32": [-2.0 ** 31, 2.0 ** 31 - 1], "int64": [2.0 ** 53, -(2.0 ** 40) - 3], "uint32": [4e9],
               "float16": [0.1, -65504.0], "bfloat16": [0.1, 3e38], "float32": [0.1, -1e-40],
               "float64": [0.1, 1e-310], "float8_e4m3fn": [0.1, -448.0], "float8_e5m2": [0.1, 57344.0]}


@pytest.mark.parametrize("dtname", CAST_DTYPES)
def test_fill_every_dtype(dtname):
    d = R.tdtype(dtname)
    for v in FILL_VALUES[dtname]:
        ref = _torch_cast(torch.full((33, 65), v, dtype=torch.float64, device=DEV), d)
        out = R.poison((33, 65), d)
        assert bc.fill(out, v) is out
        R.assert_matches(out, ref, f"fill {dtname}", rtol=0, atol=0)
        y = bc.full_like(R.make((33, 65), torch.float32), v, dtype=bc.dtype(dtname))
        assert y.dtype == d and y.shape == (33, 65)
        R.assert_matches(y, ref, f"full_like {dtname}", rtol=0, atol=0)


def test_fill_strided_views_leave_the_rest():
    base = R.poison((16, 32), torch.float32)
    bc.fill(base[:, ::2], 2.5)
    assert (base[:, ::2] == 2.5).all() and base[:, 1::2].isnan().all()
    t = R.poison((32, 16), torch.float32)
    bc.fill(t.t(), -1.0)
    assert (t == -1.0).all()
    x = R.make((65, 33), torch.bfloat16).t()
    y = bc.full_like(x, 3.0)
    assert y.dtype == torch.bfloat16 and y.shape == x.shape and (y == 3.0).all()


# ---- 6. determinism --------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["exp", "silu", "bias-add", "swiglu"])
def test_deterministic_and_bit_stable(case):
    """Same bits on every run, and whatever the position / alignment of an element (vector or
    scalar path). Reduced gradients: test_backward_gpu.py."""
    g = R.gen(f"det/{case}")
    name, dt, shape = {"exp": ("exp", torch.float32, (2 ** 20 + 3,)), "silu": ("silu", torch.bfloat16, (4099,)),
                       "bias-add": ("add", torch.float16, (257, 64)), "swiglu": ("swiglu", torch.float16, (64, 130))}[case]
    xs = [R.make(shape, dt, "act", g)] + ([R.make(shape[-1:], dt, g=g)] if name == "add" else [])
    fn = getattr(bc, name)
    first = fn(*xs)
    for _ in range(3):
        assert torch.equal(R.bits(fn(*xs)), R.bits(first))
    if name != "swiglu":
        assert torch.equal(R.bits(first[1:]), R.bits(fn(xs[0][1:], *xs[1:])))
    plan = bc.ElementwisePlan.select(bc.ElementwiseDescriptor(
        name, [bc.TensorSpec(tuple(t.shape), bc.dtype(t.dtype)) for t in xs],
        bc.TensorSpec(tuple(first.shape), bc.dtype(dt))))
    assert plan.sku.precision.deterministic and plan.sku.precision.bit_stable
