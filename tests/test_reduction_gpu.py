"""GPU correctness of the reduction family against float64 / int64 torch references.

Every forward op x dtype over leading / middle / last / multiple / all axes, keepdim or not, row
lengths 1, 7, 4097, 262144, column reductions with and without the split pass, a full sum of 2**27
elements (the split path), transposed / sliced / expanded inputs, strided outputs, empty tensors,
NaN / inf propagation, integer sums, reduce-to-shape, and every backward against torch.autograd
in float64. Outputs are poisoned before each run. One CuPy and one JAX call.
"""
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ref as R  # noqa: E402
from _ref import DEV  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]

F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
I8, U8, I32, I64, BOOL = torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool
FLOATS = [F16, BF16, F32, F64]

# op -> dtypes swept
DTYPES = {
    "sum": FLOATS + [I8, U8, I32, I64, BOOL],
    "mean": FLOATS,
    "amax": FLOATS + [I8, U8, I32],
    "amin": FLOATS + [I8, U8, I32],
    "prod": [BF16, F32, F64, I32],
    "norm2": FLOATS,
    "logsumexp": FLOATS,
    "var": FLOATS,
    "std": [BF16, F32, F64],
    "argmax": [BF16, F32, F64, U8, I32],
    "argmin": [F16, F32, I8, I32],
    "any": [BF16, F32, U8, I32, BOOL],
    "all": [F16, F32, I8, I32, BOOL],
    "count_nonzero": [BF16, F32, U8, I32, BOOL],
}
# (shape, dim, keepdim): rows (short, long, split), columns (split and not), middle, multiple, all
CASES = [
    ((1,), None, False), ((7,), None, False), ((4097,), None, True), ((262144,), None, False),
    ((33, 65), -1, False), ((33, 65), 0, True), ((5, 7, 9), 1, False), ((5, 7, 9), (0, 2), False),
    ((5, 7, 9), (2, 0), True), ((8, 4097), 1, True), ((3, 262144), -1, False), ((2, 300000), 1, False),
    ((20000, 24), 0, False), ((6, 40000), 0, False), ((4, 6, 8), None, True), ((64, 1, 3), 1, False),
]
SINGLE_AXIS = {"argmax", "argmin"}


def _case_id(c):
    shape, dim, keep = c
    return f"{'x'.join(map(str, shape))}-d{dim}{'-k' if keep else ''}".replace(" ", "")


def _dims(x, dim):
    if dim is None:
        return list(range(x.ndim))
    return sorted(d % x.ndim for d in ([dim] if isinstance(dim, int) else dim))


def to_rows(x, dim):
    """x permuted to (kept..., reduced...) and flattened to (K..., R): reductions over -1."""
    red = _dims(x, dim)
    kept = [d for d in range(x.ndim) if d not in red]
    xp = x.permute(*kept, *red) if x.ndim else x
    return xp.reshape(*[x.shape[d] for d in kept], -1), red


def out_shape(x, red, keepdim):
    return tuple(1 if d in red else s for d, s in enumerate(x.shape) if keepdim or d not in red)


def reference(op, x, dim, keepdim, correction=1):
    """(value, scale) over float64 / int64 data; scale bounds the accumulation error."""
    rows, red = to_rows(x, dim)
    shape = out_shape(x, red, keepdim)
    if op in ("any", "all", "count_nonzero"):
        nz = rows != 0
        v = {"any": lambda: nz.any(-1), "all": lambda: nz.all(-1), "count_nonzero": lambda: nz.sum(-1)}[op]()
        return v.reshape(shape), None
    if not x.is_floating_point():
        t = R.to_i64(rows) if x.dtype != BOOL else rows.long()
    else:
        t = rows.double()
    a = t.abs().double()
    n = t.shape[-1]
    if op == "sum":
        v, s = t.sum(-1), a.sum(-1)
    elif op == "mean":
        v, s = t.mean(-1), a.mean(-1) if n else a.sum(-1)
    elif op == "amax":
        v, s = t.amax(-1), None
    elif op == "amin":
        v, s = t.amin(-1), None
    elif op == "prod":
        v = t.prod(-1)
        s = v.abs().double() * max(1.0, n / 300)  # relative error of n roundings, ~ n * eps at worst
    elif op == "norm2":
        v = t.pow(2).sum(-1).sqrt()
        s = v
    elif op == "logsumexp":
        v = torch.logsumexp(t, -1)
        s = v.abs() + 1
    elif op in ("var", "std"):
        v = torch.var(t, -1, correction=correction)
        if op == "std":
            v = v.sqrt()
        s = v.abs() * 16
    elif op in ("argmax", "argmin"):
        v, s = (t.argmax(-1) if op == "argmax" else t.argmin(-1)), None
    else:
        raise KeyError(op)
    return v.reshape(shape), (None if s is None else s.reshape(shape))


def out_dtype(op, dt, index_dtype=I64):
    if op in ("any", "all"):
        return BOOL
    if op == "count_nonzero":
        return I64
    if op in ("argmax", "argmin"):
        return index_dtype
    if op in ("sum", "prod") and not dt.is_floating_point:
        return I64
    return dt


ACC_EPS = {F16: 2e-5, BF16: 2e-5, F32: 2e-5, F64: 1e-12}


def check(op, res, ref, scale, name=""):
    """res against the float64 / int64 reference: exact for comparisons and integers, else
    |res - ref| <= rounding of the output + accumulation error relative to `scale`."""
    label = f"{op} {name}"
    assert tuple(res.shape) == tuple(ref.shape), f"{label}: shape {tuple(res.shape)} != {tuple(ref.shape)}"
    if not res.dtype.is_floating_point:
        R.assert_matches(res, ref, label)
        return
    got, exp = res.double(), ref.double()
    rout = R.TOL[res.dtype][0]
    # The reference rounded to the output dtype: the one rounding the op is allowed.
    exp_r = exp.to(res.dtype).double()
    err = (got - exp_r).abs()
    bound = rout * exp.abs() + (0 if scale is None else ACC_EPS[res.dtype] * scale.double()) + 1e-300
    nan_ok = torch.isnan(got) == torch.isnan(exp_r)
    assert bool(nan_ok.all()), f"{label}: NaN at different places ({int((~nan_ok).sum())})"
    inf = torch.isinf(exp_r)
    assert bool((got[inf] == exp_r[inf]).all()), f"{label}: infinities differ"
    fin = ~torch.isnan(exp_r) & ~inf
    bad = (err > bound) & fin
    if bool(bad.any()):
        i = bad.nonzero()[0].tolist()
        raise AssertionError(f"{label}: {int(bad.sum())} of {bad.numel()} outside tolerance; first at {i}: got "
                             f"{got[tuple(i)].item()!r}, expected {exp[tuple(i)].item()!r} (bound "
                             f"{bound[tuple(i)].item():.3g})")


def make(op, shape, dt, g):
    """Inputs with the op's domain: sparse zeros for the boolean ops, values near 1 for prod,
    exact ties for argmax / amax in the integer and rounded float cases."""
    if op in ("any", "all", "count_nonzero"):
        x = R.make(shape, dt, "normal", g)
        keep = torch.rand(shape, generator=g, device=DEV)
        if dt == BOOL:
            return keep < (0.97 if op == "all" else 0.03)
        zero = torch.zeros((), dtype=dt, device=DEV)
        one = torch.ones((), dtype=dt, device=DEV)
        x = torch.where(x == 0, one, x)
        return torch.where(keep < (0.97 if op == "all" else 0.03), x, zero)
    if op == "prod":
        if dt.is_floating_point:
            return torch.exp(0.02 * torch.randn(shape, generator=g, device=DEV, dtype=F64)).to(dt)
        v = torch.randint(0, 2, shape, generator=g, device=DEV) * 2 - 1
        return v.to(dt)
    if op in ("var", "std") and dt in (F32, F64):
        return (1e4 + torch.randn(shape, generator=g, device=DEV, dtype=F64)).to(dt)  # offset data
    if op in ("logsumexp",):
        return (4 * torch.randn(shape, generator=g, device=DEV, dtype=F64)).to(dt)
    return R.make(shape, dt, "normal", g)


def run_op(op, x, dim, keepdim, out, **kw):
    return getattr(bc, op)(x, dim, keepdim=keepdim, out=out, **kw)


SWEEP = [(op, dt, c) for op, dts in DTYPES.items() for dt in dts for c in CASES
         if not (op in SINGLE_AXIS and c[1] is not None and not isinstance(c[1], int))
         and not (op == "prod" and math.prod(c[0]) > 300000)]


@pytest.mark.parametrize("op,dt,case", SWEEP, ids=[f"{o}-{str(d)[6:]}-{_case_id(c)}" for o, d, c in SWEEP])
def test_forward(op, dt, case):
    shape, dim, keepdim = case
    g = R.gen(f"{op}-{dt}-{case}")
    x = make(op, shape, dt, g)
    ref, scale = reference(op, x, dim, keepdim)
    out = R.poison(ref.shape, out_dtype(op, dt))
    res = run_op(op, x, dim, keepdim, out)
    assert res is out
    check(op, res, ref, scale, f"{dt} {case}")
    # The functional path allocates the same result, bit for bit (same plan, fixed order).
    res2 = run_op(op, x, dim, keepdim, None)
    assert res2.dtype == out_dtype(op, dt) and tuple(res2.shape) == tuple(ref.shape)
    assert torch.equal(R.bits(res2), R.bits(res)), f"{op}: two runs differ"


def test_sum_dtype_argument_and_int32_index():
    g = R.gen("sum-dtype")
    x = R.make((64, 300), BF16, "normal", g)
    res = bc.sum(x, 1, dtype=torch.float32)
    assert res.dtype == F32
    check("sum", res, x.double().sum(1), x.double().abs().sum(1))
    res = bc.mean(x, 0, dtype=torch.float32)
    check("mean", res, x.double().mean(0), x.double().abs().mean(0))
    idx = bc.argmax(x, 1, index_dtype=torch.int32)
    assert idx.dtype == I32
    assert torch.equal(idx.long(), x.argmax(1))


# ---- layouts -----------------------------------------------------------------------------------

def _layouts(g, dt):
    base = R.make((70, 130), dt, "normal", g)
    big = R.make((9, 40, 33), dt, "normal", g)
    return {
        "transposed": base.t(),
        "sliced-cols": base[:, ::2],
        "offset": base[3:, 5:],  # misaligned start: the scalar head before the vectors
        "expanded": base[:1].expand(70, 130),
        "permuted3": big.permute(2, 0, 1),
        "narrow-inner": big[:, :, 1:30],
    }


LAYOUT_OPS = ["sum", "amax", "argmax", "var", "logsumexp", "mean", "count_nonzero"]


@pytest.mark.parametrize("dt", [F32, BF16])
@pytest.mark.parametrize("op", LAYOUT_OPS)
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)])
def test_strided_inputs(op, dt, dim):
    if op in SINGLE_AXIS and isinstance(dim, tuple):
        pytest.skip("argmax takes one axis")
    g = R.gen(f"layout-{op}-{dt}-{dim}")
    for name, x in _layouts(g, dt).items():
        ref, scale = reference(op, x, dim, False)
        out = R.poison(ref.shape, out_dtype(op, dt))
        res = run_op(op, x, dim, False, out)
        check(op, res, ref, scale, f"{name} {dt} dim={dim}")


def test_strided_output():
    g = R.gen("strided-out")
    x = R.make((50, 300), F32, "normal", g)
    buf = R.poison((50, 3), F32)
    out = buf[:, 1]
    bc.sum(x, 1, out=out)
    check("sum", out, x.double().sum(1), x.double().abs().sum(1))
    assert torch.isnan(buf[:, 0]).all() and torch.isnan(buf[:, 2]).all(), "wrote outside the out view"
    # columns into a strided out
    buf = R.poison((2, 300), F32)
    bc.amax(x, 0, out=buf[1])
    assert torch.equal(buf[1], x.amax(0)) and torch.isnan(buf[0]).all()


# ---- the split paths and determinism ------------------------------------------------------------

@pytest.mark.parametrize("dt", [F32, BF16])
def test_full_sum_split_path(dt):
    n = 1 << 27
    g = R.gen(f"full-{dt}")
    x = torch.rand(n, generator=g, device=DEV, dtype=F32).to(dt) - 0.25
    desc = bc.ReductionDescriptor("sum", bc.TensorSpec((n,), bc.dtype(dt)), bc.TensorSpec((), bc.dtype(dt)))
    plan = bc.ReductionPlan.select(desc)
    assert "split" in plan.sku.name and plan.workspace_bytes() > 0
    a = bc.sum(x)
    b = bc.sum(x)
    assert R.bits(a).item() == R.bits(b).item(), "not deterministic"
    ref = x.double().sum()
    check("sum", a, ref, x.double().abs().sum())
    m = bc.mean(x)
    check("mean", m, x.double().mean(), x.double().abs().mean())
    mx = bc.amax(x)
    assert mx.item() == x.amax().item()
    del x


def test_column_split_deterministic():
    g = R.gen("col-split")
    x = R.make((16384, 512), BF16, "normal", g)
    desc = bc.ReductionDescriptor("sum", bc.TensorSpec((16384, 512), bc.bfloat16), bc.TensorSpec((512,), bc.bfloat16),
                                  axes=[0])
    plan = bc.ReductionPlan.select(desc)
    assert plan.sku.layout == "columns" and "split" in plan.sku.name
    a, b = bc.sum(x, 0), bc.sum(x, 0)
    assert torch.equal(R.bits(a), R.bits(b))
    check("sum", a, x.double().sum(0), x.double().abs().sum(0))


# ---- round-2 kernels: short rows, chunked folds, column shapes, tuning knobs ----------------------

def _plan_run(op, x, dims, keepdim=False, out_dtype=None, cfg=None, monkeypatch=None, params=None):
    """Select a plan (under BARACUDA_REDUCTION_CFG=cfg when given) and run it on poisoned output."""
    if cfg is not None:
        monkeypatch.setenv("BARACUDA_REDUCTION_CFG", cfg)
    red = _dims(x, dims)
    shape = out_shape(x, red, keepdim)
    odt = out_dtype or x.dtype
    desc = bc.ReductionDescriptor(op, bc.TensorSpec(tuple(x.shape), bc.dtype(x.dtype), list(x.stride())),
                                  bc.TensorSpec(shape, bc.dtype(odt)), [] if dims is None else list(red), keepdim,
                                  params or {})
    plan = bc.ReductionPlan.select(desc)
    if cfg is not None:
        monkeypatch.delenv("BARACUDA_REDUCTION_CFG")
    out = R.poison(shape, odt)
    wsb = plan.workspace_bytes()
    ws = torch.empty(max(wsb, 1), device=DEV, dtype=torch.uint8) if wsb else None
    plan.run(out, x, workspace=ws)
    return out, plan


SHORT_OPS = ["sum", "mean", "amax", "argmax", "var", "logsumexp", "norm2", "count_nonzero", "prod"]


@pytest.mark.parametrize("dt,n", [(BF16, 64), (BF16, 128), (BF16, 256), (BF16, 512), (F32, 32), (F32, 256),
                                  (F64, 16), (F16, 512)])
@pytest.mark.parametrize("op", SHORT_OPS)
def test_short_rows_kernel(op, dt, n):
    g = R.gen(f"short-{op}-{dt}-{n}")
    rows = 1000 + 37  # not a multiple of the rows per block: the last block's guards
    x = make(op, (rows, n), dt, g)
    odt = out_dtype(op, dt)
    out, plan = _plan_run(op, x, 1, out_dtype=odt)
    assert ".g8.r" in plan.sku.name, plan.sku.name
    ref, scale = reference(op, x, 1, False)
    check(op, out, ref, scale, f"short {dt} {n}")
    # A sliced batch keeps every row aligned (stride 2n): still the short kernel.
    xs = make(op, (rows, 2 * n), dt, g)[:, :n]
    out, plan = _plan_run(op, xs, 1, out_dtype=odt)
    assert ".g8.r" in plan.sku.name
    check(op, out, *reference(op, xs, 1, False), f"short sliced {dt} {n}")
    # A misaligned base (strides aligned): the plan falls back to the generic rows kernel at run.
    flat = make(op, (rows * n + 1,), dt, g)
    xm = flat[1:].view(rows, n)
    out, _ = _plan_run(op, xm, 1, out_dtype=odt)
    check(op, out, *reference(op, xm, 1, False), f"short misaligned {dt} {n}")


@pytest.mark.parametrize("op", ["logsumexp", "amax", "argmax", "var", "sum"])
@pytest.mark.parametrize("n", [512, 8192])
def test_chunked_folds_nan_inf_like_torch(op, n):
    """The chunk folds (short rows at 512, 8-vector chunks at 8192) against torch on specials."""
    g = R.gen(f"chunk-nan-{op}-{n}")
    x = R.make((16, n), BF16, "normal", g)
    x[1, 5] = float("nan")
    x[2, :] = float("-inf")
    x[3, 9], x[3, 77] = float("inf"), float("inf")
    x[4, 3], x[4, 100] = float("inf"), float("nan")
    x[5, 11] = float("-inf")
    x[6, :] = 1.5                    # ties: argmax takes the first
    x[7, n - 1] = 30.0               # the extreme in the last chunk
    t = x.double()
    exp = {"logsumexp": lambda: torch.logsumexp(t, 1), "amax": lambda: t.amax(1), "argmax": lambda: t.argmax(1),
           "var": lambda: torch.var(t, 1), "sum": lambda: t.sum(1)}[op]()
    res = getattr(bc, op)(x, 1)
    if op == "argmax":
        assert torch.equal(res, exp), (res != exp).nonzero()[:4].tolist()
        return
    e, r = exp.to(BF16).double(), res.double()
    assert torch.equal(torch.isnan(r), torch.isnan(e)), f"{op}: NaN pattern differs"
    inf = torch.isinf(e)
    assert torch.equal(r[inf], e[inf]), f"{op}: infinities differ"
    fin = ~torch.isnan(e) & ~inf
    if op != "var":
        assert torch.allclose(r[fin], e[fin], rtol=2e-2, atol=1e-2 * math.sqrt(n))


@pytest.mark.parametrize("cfg", ["col_wy=1", "col_wy=2", "col_wy=4", "col_wy=8", "col_wy=4,col_rows=8,col_blocks=4096",
                                 "col_blocks=1"])
@pytest.mark.parametrize("op", ["sum", "amax", "argmax", "var", "logsumexp"])
def test_columns_shapes_and_knobs(op, cfg, monkeypatch):
    g = R.gen(f"cols-{op}-{cfg}")
    for shape in ((3001, 1024), (777, 39)):  # remainders in the row loop; vectors, and V = 1 (39 columns)
        x = make(op, shape, BF16 if op != "var" else F32, g)
        odt = out_dtype(op, x.dtype)
        out, plan = _plan_run(op, x, 0, out_dtype=odt, cfg=cfg, monkeypatch=monkeypatch)
        assert plan.sku.layout == "columns", plan.sku.name
        check(op, out, *reference(op, x, 0, False), f"columns {cfg} {shape}")
    # Several reduced dims that do not merge (offsets by division), inner kept dim contiguous.
    if op != "argmax":
        x = make(op, (6, 10, 64), F32, g)[:, :5, :]
        out, plan = _plan_run(op, x, (0, 1), out_dtype=out_dtype(op, F32), cfg=cfg, monkeypatch=monkeypatch)
        assert plan.sku.layout == "columns", plan.sku.name
        check(op, out, *reference(op, x, (0, 1), False), f"columns nred=2 {cfg}")


@pytest.mark.parametrize("cfg", ["warp_max=4096", "warp_max=8", "short_max=0", "split_blocks=64",
                                 "split_blocks=16384,split_min=1024", "warp_max_heavy=8"])
def test_rows_knobs_stay_correct(cfg, monkeypatch):
    g = R.gen(f"rows-knobs-{cfg}")
    for op in ("sum", "argmax", "logsumexp", "var"):
        for shape in ((40, 16384), (3, 100003), (300, 512)):
            x = make(op, shape, BF16, g)
            out, _ = _plan_run(op, x, 1, out_dtype=out_dtype(op, BF16), cfg=cfg, monkeypatch=monkeypatch)
            check(op, out, *reference(op, x, 1, False), f"rows {cfg} {shape}")
        x = make(op, (1 << 20,), BF16, g)
        out, plan = _plan_run(op, x, None, out_dtype=out_dtype(op, BF16), cfg=cfg, monkeypatch=monkeypatch)
        check(op, out, *reference(op, x, None, False), f"full {cfg}")


def test_var_offset_data_is_sound():
    g = R.gen("var-offset")
    for dt, rtol in ((F32, 2e-4), (F64, 1e-10)):
        x = (1e4 + torch.randn(64, 100000, generator=g, device=DEV, dtype=F64)).to(dt)
        ref = torch.var(x.double(), 1)
        got = bc.var(x, 1).double()
        torch.testing.assert_close(got, ref, rtol=rtol, atol=0)
        got0 = bc.std(x.t().contiguous(), 0, correction=0).double()  # columns path
        torch.testing.assert_close(got0, torch.std(x.double(), 1, correction=0), rtol=rtol, atol=0)


# ---- empty, NaN / inf ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["sum", "prod", "mean", "any", "all", "count_nonzero", "var", "std", "norm2",
                                "logsumexp"])
def test_empty_reduction_gives_identity(op):
    dt = F32
    for shape, dim in (((0,), None), ((4, 0), 1), ((0, 3), 0), ((3, 0, 2), (1, 2))):
        x = torch.empty(shape, device=DEV, dtype=dt)
        red = _dims(x, dim)
        fn = {"sum": torch.sum, "prod": lambda t, d: torch.prod(t, d[0]) if len(d) == 1 else t.prod(),
              "mean": torch.mean, "any": lambda t, d: (t != 0).any(d[0]) if len(d) == 1 else (t != 0).any(),
              "all": lambda t, d: (t != 0).all(d[0]) if len(d) == 1 else (t != 0).all(),
              "count_nonzero": lambda t, d: torch.count_nonzero(t, d), "var": lambda t, d: torch.var(t, d),
              "std": lambda t, d: torch.std(t, d), "norm2": lambda t, d: torch.linalg.vector_norm(t, 2, d),
              "logsumexp": lambda t, d: torch.logsumexp(t, d)}[op]
        if op in ("prod", "any", "all") and len(red) > 1:
            exp = fn(x.reshape(*[s for i, s in enumerate(shape) if i not in red], -1), [-1])
        else:
            exp = fn(x, red)
        out = R.poison(exp.shape, exp.dtype)
        res = run_op(op, x, dim, False, out)
        torch.testing.assert_close(res, exp, equal_nan=True, msg=lambda m: f"{op} {shape} {dim}: {m}")


@pytest.mark.parametrize("op", ["amax", "amin", "argmax", "argmin"])
def test_empty_without_identity_is_refused(op):
    x = torch.empty(4, 0, device=DEV)
    with pytest.raises(bc.errors.InvalidArgument, match="no identity"):
        getattr(bc, op)(x, 1)
    # Nothing kept: an empty output, nothing to do (torch agrees).
    y = getattr(bc, op)(torch.empty(0, 5, device=DEV), 1)
    assert tuple(y.shape) == (0,)


@pytest.mark.parametrize("dt", [F32, BF16, F16])
@pytest.mark.parametrize("op", ["amax", "amin", "argmax", "argmin", "sum", "logsumexp", "var", "norm2"])
def test_nan_inf_like_torch(op, dt):
    g = R.gen(f"nan-{op}-{dt}")
    x = R.with_specials(R.make((40, 300), dt, "normal", g), g, 0.01)
    x[3] = float("-inf")            # a row of -inf (logsumexp -> -inf)
    x[5, 7] = float("nan")
    x[6, :] = 2.0                    # ties: argmax takes the first
    x[7, 10], x[7, 200] = float("inf"), float("inf")
    for dim in (1, 0):
        t = x.double()
        exp = {"amax": lambda: t.amax(dim), "amin": lambda: t.amin(dim), "argmax": lambda: t.argmax(dim),
               "argmin": lambda: t.argmin(dim), "sum": lambda: t.sum(dim), "logsumexp": lambda: torch.logsumexp(t, dim),
               "var": lambda: torch.var(t, dim), "norm2": lambda: torch.linalg.vector_norm(t, 2, dim)}[op]()
        res = getattr(bc, op)(x, dim)
        if op in SINGLE_AXIS:
            assert torch.equal(res, exp), f"{op} dim={dim}: {(res != exp).nonzero()[:4].tolist()}"
            continue
        e = exp.to(dt).double()
        r = res.double()
        assert torch.equal(torch.isnan(r), torch.isnan(e)), f"{op} dim={dim}: NaN pattern differs"
        inf = torch.isinf(e)
        assert torch.equal(r[inf], e[inf]), f"{op} dim={dim}: infinities differ"


# ---- integers -----------------------------------------------------------------------------------

def test_integer_sums_do_not_overflow_narrow_types():
    x = torch.full((262144,), 127, dtype=I8, device=DEV)
    assert bc.sum(x).item() == 127 * 262144 and bc.sum(x).dtype == I64
    y = torch.full((3, 100000), 2**31 - 1, dtype=I32, device=DEV)
    assert bc.sum(y, 1).tolist() == [(2**31 - 1) * 100000] * 3
    b = torch.ones(5000, dtype=BOOL, device=DEV)
    assert bc.sum(b).item() == 5000 and bc.prod(b).item() == 1
    # sum_to_shape keeps the dtype and wraps like torch's int8 arithmetic would
    z = torch.full((300, 4), 100, dtype=I8, device=DEV)
    w = bc.sum_to_shape(z, (4,))
    assert w.dtype == I8 and w.tolist() == [R.wrap(torch.tensor(30000), I8).item()] * 4


@pytest.mark.parametrize("dt", [I8, U8, torch.int16, I32, I64, F32, BF16])
@pytest.mark.parametrize("shape,dim", [((33, 4097), 1), ((4097, 33), 0), ((3, 262144), 1), ((40, 64), 1)],
                         ids=["rows", "columns", "split-rows", "short-rows"])
def test_extremes_ties_and_index_types_exactly(dt, shape, dim):
    """amax / amin / argmax / argmin over the type's extremes and many ties (the first index wins),
    with both index types (one argmax kernel writes int32 or int64 at the end), against torch."""
    g = R.gen(f"minmax-{dt}-{shape}")
    if dt.is_floating_point:
        x = torch.randint(-3, 4, shape, generator=g, device=DEV).to(dt)  # ties everywhere
        x.view(-1)[::997] = float("inf")
        x.view(-1)[5::1009] = float("-inf")
    else:
        info = torch.iinfo(dt)
        x = torch.randint(-3 if info.min < 0 else 0, 4, shape, generator=g, device=DEV).to(dt)
        x.view(-1)[::997] = info.max
        x.view(-1)[5::1009] = info.min
    for op in ("amax", "amin"):
        res = getattr(bc, op)(x, dim)
        assert res.dtype == dt and torch.equal(res, getattr(x, op)(dim)), op
    for op in ("argmax", "argmin"):
        ref = getattr(x.cpu().double() if dt.is_floating_point else x.cpu(), op)(dim).to(DEV)
        for index_dtype in (I64, I32):
            res = getattr(bc, op)(x, dim, index_dtype=index_dtype)
            assert res.dtype == index_dtype, (op, index_dtype)
            assert torch.equal(res.long(), ref), f"{op} {index_dtype}: {(res.long() != ref).nonzero()[:4].tolist()}"


# ---- reduce to shape ----------------------------------------------------------------------------

TO_SHAPE = [((4, 5, 6), (5, 1)), ((4, 5, 6), (1, 6)), ((4, 5, 6), (6,)), ((4, 5, 6), (4, 1, 6)), ((4, 5, 6), ()),
            ((300, 2, 70), (2, 1)), ((1, 9), (9,)), ((2049, 33), (1, 33))]


@pytest.mark.parametrize("op", ["sum_to_shape", "amax_to_shape", "amin_to_shape", "prod_to_shape"])
@pytest.mark.parametrize("dt", [F32, BF16, I32])
@pytest.mark.parametrize("case", TO_SHAPE, ids=lambda c: f"{c[0]}->{c[1]}")
def test_to_shape(op, dt, case):
    src, dst = case
    g = R.gen(f"{op}-{dt}-{case}")
    base = op.replace("_to_shape", "")
    x = make(base, src, dt, g)
    lead = len(src) - len(dst)
    red = list(range(lead)) + [lead + i for i, s in enumerate(dst) if s == 1 and src[lead + i] != 1]
    ref, scale = reference(base, x, red, True)  # red == []: nothing reduced, a copy
    ref = ref.reshape(dst)
    if scale is not None:
        scale = scale.reshape(dst)
    out = R.poison(dst, dt)
    res = getattr(bc, op)(x, dst, out=out)
    assert res is out
    if dt.is_floating_point:
        check(base, res, ref, scale, f"{dt} {case}")
    else:
        R.assert_matches(res, ref, op)


# ---- backward -----------------------------------------------------------------------------------

def _torch_fwd(op, x, dim, keepdim, correction=1):
    d = tuple(_dims(x, dim))
    return {
        "sum": lambda: x.sum(d, keepdim=keepdim), "mean": lambda: x.mean(d, keepdim=keepdim),
        "amax": lambda: x.amax(d, keepdim=keepdim), "amin": lambda: x.amin(d, keepdim=keepdim),
        "prod": lambda: _prod(x, d, keepdim),
        "norm2": lambda: torch.linalg.vector_norm(x, 2, d, keepdim=keepdim),
        "logsumexp": lambda: torch.logsumexp(x, d, keepdim=keepdim),
        "var": lambda: torch.var(x, d, correction=correction, keepdim=keepdim),
        "std": lambda: torch.std(x, d, correction=correction, keepdim=keepdim),
    }[op]()


def _prod(x, d, keepdim):
    y = x
    for a in sorted(d, reverse=True):
        y = y.prod(a, keepdim=keepdim)
    return y


BW_OPS = ["sum", "mean", "amax", "amin", "prod", "norm2", "logsumexp", "var", "std"]
BW_CASES = [((6, 50), 1, False), ((6, 50), 0, True), ((4, 5, 6), (0, 2), False), ((4, 5, 6), None, False),
            ((4, 5, 6), None, True), ((3, 2000), -1, True), ((7,), 0, False)]


@pytest.mark.parametrize("op", BW_OPS)
@pytest.mark.parametrize("case", BW_CASES, ids=_case_id)
@pytest.mark.parametrize("dt", [F64, F32, BF16])
def test_backward_vs_autograd(op, case, dt):
    shape, dim, keepdim = case
    g = R.gen(f"bw-{op}-{case}-{dt}")
    x64 = torch.randn(shape, generator=g, device=DEV, dtype=F64)
    if op in ("amax", "amin"):
        x64 = (x64 * 2).round() / 2  # ties: the gradient is split evenly among them
    if op == "prod":
        x64 = torch.exp(0.1 * x64)
        flat = x64.reshape(-1)
        flat[0] = 0.0  # one zero in one slice
        if flat.numel() > 60:
            flat[37] = 0.0
            flat[41] = 0.0
    x = x64.to(dt)
    xr = x.detach().double().requires_grad_(True)
    y = _torch_fwd(op, xr, dim, keepdim)
    go = torch.randn(y.shape, generator=g, device=DEV, dtype=F64)
    (ref,) = torch.autograd.grad(y, xr, go)
    fn = getattr(bc, op + "_backward")
    args = [go.to(dt), x] + ([y.detach().to(dt)] if op in ("norm2", "logsumexp", "std") else [])
    out = R.poison(shape, dt)
    res = fn(*args, dim, keepdim, out=out)
    assert res is out
    if dt == F64:
        torch.testing.assert_close(res, ref, rtol=1e-10, atol=1e-10, equal_nan=True)
    else:
        tol = {F32: 1e-4, BF16: 4e-2}[dt]
        scale = ref.abs().amax().item() + 1e-30
        torch.testing.assert_close(res.double(), ref, rtol=tol, atol=tol * scale, equal_nan=True,
                                   msg=lambda m: f"{op}_backward {dt} {case}: {m}")


def test_backward_of_2_to_the_31_elements_and_more():
    """A backward map past 32-bit indexing runs as pieces under 2**31 elements (here two)."""
    free, _ = torch.cuda.mem_get_info()
    if free < 24 * 2 ** 30:
        pytest.skip("needs 24 GiB of free device memory")
    g = R.gen("bw-huge")
    x = torch.empty((4, 3, 2 ** 28), device=DEV, dtype=BF16)  # values unused by sum's gradient
    go = torch.randn((4, 2 ** 28), generator=g, device=DEV, dtype=F32).to(BF16)
    out = bc.sum_backward(go, x, 1, False)
    assert torch.equal(out, go.unsqueeze(1).expand(x.shape))


def test_backward_plan_uses_statistics_workspace():
    x = bc.TensorSpec((64, 1000), bc.float32)
    go = bc.TensorSpec((64,), bc.float32)
    d = bc.ReductionDescriptor("var_backward", x, x, axes=[1], grad_out=go)
    plan = bc.ReductionPlan.select(d)
    assert plan.workspace_bytes() >= 64 * 8 and "stats" in plan.sku.name


# ---- other frameworks ---------------------------------------------------------------------------

def test_cupy_sum_and_argmax():
    cp = R.cupy_gpu()
    import numpy as np

    a = np.random.default_rng(7).standard_normal((65, 300)).astype(np.float32)
    ca = cp.asarray(a)
    s = bc.sum(ca, 1)
    assert isinstance(s, cp.ndarray) and s.shape == (65,)
    np.testing.assert_allclose(cp.asnumpy(s), a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    i = bc.argmax(ca, 0)
    assert np.array_equal(cp.asnumpy(i), a.argmax(0))


def test_jax_mean_and_logsumexp():
    jax, dev = R.jax_gpu()
    import numpy as np

    a = np.random.default_rng(8).standard_normal((33, 129)).astype(np.float32)
    ja = jax.device_put(a, dev)
    m = bc.mean(ja, 0)
    assert isinstance(m, jax.Array) and m.shape == (129,)
    np.testing.assert_allclose(np.asarray(m), a.astype(np.float64).mean(0), rtol=1e-5, atol=1e-6)
    lse = bc.logsumexp(ja, 1, keepdim=True)
    ref = np.log(np.exp(a.astype(np.float64)).sum(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(lse), ref, rtol=1e-5, atol=1e-5)
