"""GPU correctness of the softmax family: softmax / log-softmax forward and backward along any
axis against float64 torch references, every kernel path (rows_warp with 1..32 lanes per row,
rows_block, rows_online, rows_loop, columns, strided), NaN / inf rows against torch, empty
tensors, in place, CuPy and JAX inputs. Outputs are poisoned (NaN) before every run."""
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ref as R  # noqa: E402

errors = bc.errors
SWEEP = bc.features()["sweep_kernels"]  # every tuning variant built (-DBARACUDA_SWEEP_KERNELS=ON)
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]
DEV = "cuda"
FP = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
TOL = {torch.float64: (1e-12, 1e-12), torch.float32: (2e-5, 2e-6), torch.float16: (2e-3, 2e-4),
       torch.bfloat16: (1.6e-2, 2e-3)}
FWD = {"softmax": lambda x, d: torch.softmax(x, d), "log_softmax": lambda x, d: torch.log_softmax(x, d)}


def _x(shape, dt, key, scale=3.0):
    g = R.gen(key)
    return (scale * torch.randn(shape, generator=g, device=DEV, dtype=torch.float64)).to(dt)


def _close(got, ref, dt, what):
    r, a = TOL[dt]
    torch.testing.assert_close(got.double(), ref.to(dt).double(), rtol=r, atol=a, msg=lambda m: f"{what}: {m}")


def _check_fwd(op, x, dim):
    ref = FWD[op](x.double(), dim)
    out = R.poison(x.shape, x.dtype)
    res = getattr(bc, op)(x, dim, out=out)
    assert res is out
    _close(out, ref, x.dtype, f"{op} {x.dtype} {tuple(x.shape)} dim={dim}")
    res2 = getattr(bc, op)(x, dim=dim)
    assert res2.dtype == x.dtype and res2.shape == x.shape
    _close(res2, ref, x.dtype, f"{op} (allocated out)")


def _check_bwd(op, x, dim):
    xd = x.detach().double().requires_grad_(True)
    y = FWD[op](xd, dim)
    gy = _x(x.shape, torch.float64, f"gy/{op}/{tuple(x.shape)}/{dim}", 1.0)
    (ref,) = torch.autograd.grad(y, xd, gy)
    y_lp, gy_lp = y.detach().to(x.dtype), gy.to(x.dtype)
    out = R.poison(x.shape, x.dtype)
    getattr(bc, op + "_backward")(gy_lp, y_lp, dim, out=out)
    # reference from the same rounded inputs, in float64
    yd, gyd = y_lp.double(), gy_lp.double()
    if op == "softmax":
        exp = yd * (gyd - (gyd * yd).sum(dim, keepdim=True))
    else:
        exp = gyd - yd.exp() * gyd.sum(dim, keepdim=True)
    _close(out, exp, x.dtype, f"{op}_backward {x.dtype} {tuple(x.shape)}")
    if x.dtype == torch.float64:  # and against autograd itself
        _close(out, ref, x.dtype, f"{op}_backward vs autograd")


# Row lengths hitting every rows path: warp (1, 7, 64 lanes-per-row groups), block (4097), online (262144).
@pytest.mark.parametrize("dt", FP, ids=str)
@pytest.mark.parametrize("n", [1, 7, 64, 100, 1000, 4097, 40000])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_last_axis_rows(op, n, dt):
    x = _x((33, n), dt, f"rows/{op}/{n}/{dt}")
    _check_fwd(op, x, -1)
    _check_bwd(op, x, -1)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_long_row_online(op):
    x = _x((3, 262144), torch.bfloat16, f"long/{op}")
    _check_fwd(op, x, 1)
    _check_bwd(op, x, 1)
    x = _x((2, 262144 + 3), torch.float32, f"long32/{op}")
    _check_fwd(op, x, -1)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_cluster_rows_odd_length(op):
    # rows_cluster (a cluster of 8 blocks per row on sm_90; rows_online elsewhere), odd length:
    # the last block's slice is partial and its last vector too.
    x = _x((5, 262141), torch.bfloat16, f"cl/{op}")
    _check_fwd(op, x, -1)
    _check_bwd(op, x, -1)
    x = _x((3, 3 * 4096 * 4 + 5), torch.float32, f"cl32/{op}")  # 4-block clusters
    _check_fwd(op, x, -1)
    _check_bwd(op, x, -1)


def _select_built(d):
    """select(d), or None where the tuning knob names a kernel variant this build leaves out (only a
    -DBARACUDA_SWEEP_KERNELS=ON build holds every one; select's defaults are always built)."""
    try:
        return bc.SoftmaxPlan.select(d)
    except errors.InvalidArgument as e:
        if SWEEP or "BARACUDA_SWEEP_KERNELS" not in str(e):
            raise
        return None


def _run_plan(op, x, cfg, monkeypatch):
    if cfg is None:
        monkeypatch.delenv("BARACUDA_SOFTMAX_CFG", raising=False)
    else:
        monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", cfg)
    spec = bc.TensorSpec(tuple(x.shape), bc.dtype(x.dtype), list(x.stride()))
    d = bc.SoftmaxDescriptor(op, [spec], -1, bc.TensorSpec(tuple(x.shape), bc.dtype(x.dtype)))
    plan = _select_built(d)
    if plan is None:
        pytest.skip(f"{cfg}: a sweep-only kernel variant")
    out = R.poison(x.shape, x.dtype)
    plan.run(out, x)
    return out, plan.sku.layout


# rows_cluster forward, prefetching variants (stage=3, the default: bulk copies; stage=2: cp.async per
# vector): a persistent grid of as many clusters
# as fit at once, each looping over rows with the next row's slice copied into shared memory
# while the current one is reduced and written. Enough rows that every cluster loops (more rows
# than resident clusters: ~33 clusters of 8, ~66 of 4, ~132 of 2 on an H100), odd lengths (a
# partial last vector, a partial or empty last slice), rows just past the one-block limit, NaN /
# inf rows, and bit equality with the non-prefetching kernel (stage=0: the same math, same order).
PF_CASES = [
    (torch.bfloat16, 40, 262141, "stage=2"),      # 8-block clusters, last slice partial
    (torch.bfloat16, 300, 32769, "stage=2"),      # one element past 4096 vectors: 2-block clusters
    (torch.float16, 300, 65543, "stage=2"),       # 4-block clusters, odd
    (torch.float32, 150, 3 * 4096 * 4 + 5, "stage=2"),  # 4-block clusters
    (torch.float32, 300, 16385, "stage=2"),
    (torch.float64, 300, 8193, "stage=2"),
    (torch.bfloat16, 400, 40000, "w=8,k=8,cs=4,stage=2"),  # 256-thread blocks, 4 per SM
    (torch.bfloat16, 90, 131072, "w=16,k=8,cs=8,stage=2"),  # 4 full slices and 4 empty ones
    # stage=3: the next slice by bulk copies where it is whole, per vector where it is not
    (torch.bfloat16, 40, 262144, "stage=3"),      # every slice whole
    (torch.bfloat16, 40, 262141, "stage=3"),      # the last slice partial (that block copies per vector)
    (torch.float16, 300, 65543, "stage=3"),
    (torch.float32, 150, 3 * 4096 * 4 + 5, "stage=3"),
    (torch.float64, 300, 8193, "stage=3"),
    (torch.bfloat16, 400, 40000, "w=8,k=8,cs=4,stage=3"),
    (torch.bfloat16, 90, 131072, "w=16,k=8,cs=8,stage=3"),
]


@pytest.mark.parametrize("dt,rows,n,cfg", PF_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_cluster_prefetch_rows(op, dt, rows, n, cfg, monkeypatch):
    x = _x((rows, n), dt, f"pf/{op}/{n}/{dt}")
    x[1, 7] = math.nan
    x[2, :] = -math.inf
    x[3, n - 1] = math.inf
    x[4, : n // 2] = -math.inf
    x[rows - 1, :] = 0.0
    out, layout = _run_plan(op, x, cfg, monkeypatch)
    ref = FWD[op](x.double(), -1)
    r, a = TOL[dt]
    torch.testing.assert_close(out.double(), ref.to(dt).double(), rtol=r, atol=a, equal_nan=True,
                               msg=lambda m: f"{op} {dt} {rows}x{n} {cfg} {layout}: {m}")
    if layout != "rows_cluster":
        return  # no sm_90 build: rows_online ran (checked above)
    # against stage 0 (no prefetch; a sweep-only kernel) where built, else the other prefetching stage
    stage = [kv for kv in cfg.split(",") if kv.startswith("stage=")][0]
    other = "stage=0" if SWEEP else {"stage=2": "stage=3", "stage=3": "stage=2"}[stage]
    old_cfg = cfg.replace(stage, other)
    old, old_layout = _run_plan(op, x, old_cfg, monkeypatch)
    assert old_layout == "rows_cluster"
    bits = torch.int64 if dt == torch.float64 else (torch.int32 if dt == torch.float32 else torch.int16)
    assert torch.equal(out.view(bits), old.view(bits)), f"{op} {dt} {rows}x{n} {cfg}: differs from {other}"


@pytest.mark.parametrize("stage", [2, 3])
def test_cluster_prefetch_strided_rows(stage, monkeypatch):
    # rows of two merged outer dims with a gap (row_off's division) on the prefetching path
    monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", f"stage={stage}")
    base = _x((3, 70, 40000), torch.bfloat16, "pf/strided")
    x = base[:, 5:65]
    for op in ("softmax", "log_softmax"):
        ref = FWD[op](x.double(), -1)
        spec = bc.TensorSpec(tuple(x.shape), bc.bfloat16, list(x.stride()))
        d = bc.SoftmaxDescriptor(op, [spec], -1, bc.TensorSpec(tuple(x.shape), bc.bfloat16))
        plan = bc.SoftmaxPlan.select(d)
        out = R.poison(x.shape, x.dtype)
        plan.run(out, x)
        _close(out, ref, torch.bfloat16, f"{op} strided prefetch ({plan.sku.layout})")


# Every geometry class of rows_block / rows_cluster, chosen through the tuning knob.
KNOBS = ["w=1,k=4", "w=1,k=16", "w=2,k=8", "w=4,k=4,stage=1", "w=8,k=8", "w=8,k=16,stage=1", "w=16,k=8,stage=1",
         "w=32,k=4", "w=8,k=8,cs=2", "w=16,k=8,cs=4,stage=1", "w=16,k=8,cs=8", "w=8,k=8,cs=4,stage=2",
         "w=16,k=8,cs=2,stage=2", "w=16,k=8,cs=2,stage=3", "path=online"]


@pytest.mark.parametrize("cfg", KNOBS)
def test_tuning_knob_variants(cfg, monkeypatch):
    monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", cfg)
    ran = 0
    for n, dt in [(1500, torch.bfloat16), (20001, torch.bfloat16), (9000, torch.float32)]:
        x = _x((7, n), dt, f"knob/{n}")
        x[1, 5] = math.nan
        x[2, :] = -math.inf
        x[3, n - 1] = math.inf
        x[4, : n // 2] = -math.inf
        for op in ("softmax", "log_softmax"):
            d = bc.SoftmaxDescriptor(op, [bc.TensorSpec(tuple(x.shape), bc.dtype(dt))], -1,
                                     bc.TensorSpec(tuple(x.shape), bc.dtype(dt)))
            plan = _select_built(d)
            if plan is not None:
                ran += 1
                out = R.poison(x.shape, dt)
                plan.run(out, x)
                ref = FWD[op](x.double(), -1)
                r, a = TOL[dt]
                torch.testing.assert_close(out.double(), ref.to(dt).double(), rtol=r, atol=a, equal_nan=True,
                                           msg=lambda m: f"{cfg} {op} {n} {plan.sku.layout}: {m}")
            # backward through the same knob (finite rows only)
            xf = x[5:].contiguous()
            y = FWD[op](xf.double(), -1).to(dt)
            gy = _x(xf.shape, dt, f"knobg/{n}", 1.0)
            db = bc.SoftmaxDescriptor(op + "_backward", [bc.TensorSpec(tuple(xf.shape), bc.dtype(dt))] * 2, -1,
                                      bc.TensorSpec(tuple(xf.shape), bc.dtype(dt)))
            gx = R.poison(xf.shape, dt)
            plan = _select_built(db)
            if plan is None:
                continue
            ran += 1
            plan.run(gx, gy, y)
            yd, gyd = y.double(), gy.double()
            exp = yd * (gyd - (gyd * yd).sum(-1, keepdim=True)) if op == "softmax" else \
                gyd - yd.exp() * gyd.sum(-1, keepdim=True)
            _close(gx, exp, dt, f"{cfg} {op}_backward {n}")
    if not ran:
        pytest.skip(f"{cfg}: sweep-only kernel variants")


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_any_axis(dim, dt):
    x = _x((5, 17, 33), dt, f"axis/{dim}/{dt}")
    for op in ("softmax", "log_softmax"):
        _check_fwd(op, x, dim)
        _check_bwd(op, x, dim)


@pytest.mark.parametrize("layout", ["t", "slice", "rows", "offset", "perm3"])
def test_strided_inputs(layout):
    dt = torch.float32
    if layout == "t":
        x = _x((130, 70), dt, "t").t()
    elif layout == "slice":
        x = _x((40, 260), dt, "slice")[:, ::2]
    elif layout == "rows":  # padded rows: row stride > row length
        x = _x((40, 133), dt, "rows")[:, :128]
    elif layout == "offset":  # misaligned base: the rows_loop fallback
        x = _x((40 * 64 + 1,), dt, "offset")[1:].view(40, 64)
    else:
        x = _x((6, 7, 8, 9), dt, "perm").permute(2, 0, 3, 1)
    for op in ("softmax", "log_softmax"):
        for dim in (-1, 0):
            _check_fwd(op, x, dim)
            _check_bwd(op, x, dim)


def test_sku_paths():
    def sku(shape, dt=bc.bfloat16, axis=-1):
        d = bc.SoftmaxDescriptor("softmax", [bc.TensorSpec(shape, dt)], axis, bc.TensorSpec(shape, dt))
        return bc.SoftmaxPlan.select(d).sku.layout
    assert sku((1024, 64)) == "rows_warp"
    assert sku((64, 4096)) == "rows_block"
    cl = any(int(a.strip()[3:]) >= 90 for a in bc.SoftmaxPlan.select(bc.SoftmaxDescriptor(
        "softmax", [bc.TensorSpec((4, 8), bc.bfloat16)], -1, bc.TensorSpec((4, 8), bc.bfloat16))).sku.arch.split(",")
        if a.strip().startswith("sm_"))
    assert sku((4, 262144)) == ("rows_cluster" if cl else "rows_online")
    assert sku((4, 300000)) == "rows_online"
    assert sku((64, 32, 16), axis=1) == "columns"


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("n", [5, 64, 4097, 70000])
def test_nan_inf_rows_match_torch(n, dt):
    x = _x((6, n), dt, f"nan/{n}")
    x[0, n // 2] = math.nan
    x[1, :] = -math.inf
    x[2, n - 1] = math.inf
    x[3, 0] = -math.inf
    x[4, :] = 0.0
    x[5, min(1, n - 1)] = math.nan  # the odd element of a packed 16-bit pair (the max runs on pairs)
    for op in ("softmax", "log_softmax"):
        ref = FWD[op](x.double(), -1)
        out = R.poison(x.shape, dt)
        getattr(bc, op)(x, -1, out=out)
        r, a = TOL[dt]
        torch.testing.assert_close(out.double(), ref.to(dt).double(), rtol=r, atol=a, equal_nan=True)
        assert torch.isnan(out[0]).all() and torch.isnan(out[1]).all() and torch.isnan(out[5]).all()


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("n", [64, 4097, 70000])
def test_wide_range_rows_underflow_to_zero(n, dt):
    # 16-bit storage takes exp with results under 2^-126 flushed to zero: outputs that small are
    # 0 (within tolerance of torch's), the row sums stay right, nothing becomes NaN.
    x = _x((4, n), torch.float64, f"wide/{n}", scale=60.0).clamp(-6e4, 6e4).to(dt)
    for op in ("softmax", "log_softmax"):
        ref = FWD[op](x.double(), -1)
        out = R.poison(x.shape, dt)
        getattr(bc, op)(x, -1, out=out)
        assert not torch.isnan(out).any()
        if op == "softmax":
            _close(out, ref, dt, f"softmax wide {n}")
            assert torch.allclose(out.double().sum(-1), torch.ones(4, dtype=torch.float64, device=DEV), atol=2e-2)
        else:  # log-softmax has no exp at the output: the large negative values must be exact to tolerance
            torch.testing.assert_close(out.double(), ref.to(dt).double(), rtol=TOL[dt][0], atol=TOL[dt][1] * 100)


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("n", [64, 512, 4104, 32768, 70000, 262144])  # (16-byte rows: the register paths)
def test_offset_rows_exact_and_folded_exp(n, dt, monkeypatch):
    # 16-bit rows_warp / rows_block / rows_cluster: exp(x - max) is ex2(x log2e + c) while
    # |max| <= 256 (c rounded once) and the exact (x - max) form beyond; in the register kernels a
    # thread's sum takes its own max, so a row can mix both. Rows on each side of the bound, far
    # beyond it, and mixed.
    big = 3e4 if dt == torch.float16 else 1e30
    offsets = [0.0, 200.0, 255.0, 257.0, -256.0, -300.0, 3000.0, -3000.0, big, -big]
    x = _x((len(offsets) + 2, n), torch.float64, f"offset/{n}", scale=2.0)
    for i, o in enumerate(offsets):
        x[i] = o + x[i] * (abs(o) * 2 ** -6 if abs(o) > 1e4 else 1.0)
    x[len(offsets), : n // 2] += 400.0  # thread maxima on both sides of the bound
    x[len(offsets) + 1, n // 3:] -= 1000.0
    x = x.to(dt)
    for op in ("softmax", "log_softmax"):
        ref = FWD[op](x.double(), -1)
        out, layout = _run_plan(op, x, None, monkeypatch)
        assert layout in ("rows_warp", "rows_block", "rows_cluster", "rows_online"), layout
        r, a = TOL[dt]
        torch.testing.assert_close(out.double(), ref.to(dt).double(), rtol=r, atol=a,
                                   msg=lambda m: f"{op} {dt} n={n}: {m}")
        # The folded exp against the exact form (knob exact=1): at most one unit in the last place
        # apart (same-sign finite outputs: the bit patterns as integers).
        exact, _ = _run_plan(op, x, "exact=1", monkeypatch)
        ulps = (out.view(torch.int16).int() - exact.view(torch.int16).int()).abs()
        assert int(ulps.max()) <= 1, f"{op} {dt} n={n}: folded exp {int(ulps.max())} ulp from the exact form"


# rows_warp with R rows per lane group (knob rpg; the default takes 4 at one chunk per lane on large grids): every
# group size (rows of 1..1024 elements), row counts that leave the last group partly past the end,
# rows of two unmerged outer dims (the per-row offset path), NaN / inf rows. Each R is checked
# against float64 and bit-equal to R = 1 (the same math per row).
def _warp_rows_cases():
    for dt in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        for n in (1, 7, 8, 64, 100, 256, 300, 512, 1000):
            if n * dt.itemsize <= 2048:  # rows of up to 128 16-byte vectors: the warp path
                yield dt, n


@pytest.mark.parametrize("dt,n", list(_warp_rows_cases()), ids=str)
def test_warp_rows_per_group(dt, n, monkeypatch):
    rows = 8 * 32 * 4 + 37  # two blocks of the widest R, the second partial
    # Every operand's rows padded to whole 16-byte vectors: the vector paths need row strides of
    # whole vectors (an n-element contiguous row of odd n takes rows_loop).
    npad = -(-n * dt.itemsize // 16) * 16 // dt.itemsize

    def rows_of(shape, key, scale=3.0):
        return _x((*shape[:-1], npad), dt, key, scale)[..., :n]

    def run(op, ins, cfg):
        monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", cfg)
        out = rows_of(ins[0].shape, "unused")
        out.fill_(math.nan)
        specs = [bc.TensorSpec(tuple(t.shape), bc.dtype(dt), list(t.stride())) for t in ins]
        plan = bc.SoftmaxPlan.select(bc.SoftmaxDescriptor(op, specs, -1, bc.TensorSpec(
            tuple(out.shape), bc.dtype(dt), list(out.stride()))))
        assert plan.sku.layout == "rows_warp", (op, cfg, plan.sku.layout)
        plan.run(out, *ins)
        return out

    x = rows_of((rows, n), f"rpg/{n}/{dt}")
    x[3, n // 2] = math.nan
    x[5, :] = -math.inf
    x[6, n - 1] = math.inf
    x[rows - 1, 0] = 50.0
    gy = rows_of((rows - 7, n), f"rpg_gy/{n}/{dt}", 1.0)
    y = rows_of((rows - 7, n), f"rpg_y/{n}/{dt}")
    # two outer dims that do not merge (a middle-dim slice): the per-row offset path
    xs = rows_of((9, 2 * 37, n), f"rpg_s/{n}/{dt}")[:, ::2]
    for op in ("softmax", "log_softmax"):
        ref = FWD[op](x.double(), -1)
        y.copy_(FWD[op](x[7:].double(), -1))
        yd, gyd = y.double(), gy.double()
        bref = yd * (gyd - (gyd * yd).sum(-1, keepdim=True)) if op == "softmax" else \
            gyd - yd.exp() * gyd.sum(-1, keepdim=True)
        outs = {}
        for rpg in (1, 2, 4):
            cfg = f"path=warp,rpg={rpg}"  # (path=warp: also the 512-element 16-bit backward)
            out = run(op, [x], cfg)
            r, a = TOL[dt]
            torch.testing.assert_close(out.double(), ref.to(dt).double(), rtol=r, atol=a, equal_nan=True,
                                       msg=lambda m: f"{op} {dt} n={n} rpg={rpg}: {m}")
            gx = run(op + "_backward", [gy, y], cfg)
            _close(gx, bref, dt, f"{op}_backward {dt} n={n} rpg={rpg}")
            so = run(op, [xs], cfg)
            _close(so, FWD[op](xs.double(), -1), dt, f"{op} strided {dt} n={n} rpg={rpg}")
            outs[rpg] = (out, gx, so)
        for rpg in (2, 4):  # the same math per row: the same bits as R = 1
            for got, want, what in zip(outs[rpg], outs[1], ("fwd", "bwd", "strided")):
                assert torch.equal(got.contiguous().view(torch.uint8), want.contiguous().view(torch.uint8)), \
                    f"{op} {what} rpg={rpg} != rpg=1"


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float32], ids=str)
def test_warp_rows_default_large_grid(dt):
    # enough rows that the forward's default takes R > 1 at one chunk per lane (more than 2048
    # blocks at one row per group; 512 elements and the backward keep R = 1, and the R variants
    # are checked above)
    for n in (64, 512):
        x = _x((70001, n), dt, f"rpgd/{n}/{dt}")
        for op in ("softmax", "log_softmax"):
            _check_fwd(op, x, -1)


def test_empty_and_scalar():
    for shape, dim in [((0, 5), -1), ((5, 0), -1), ((5, 0), 0), ((0,), 0)]:
        x = torch.empty(shape, device=DEV)
        assert bc.softmax(x, dim).shape == x.shape
    x = torch.tensor(2.5, device=DEV)
    assert bc.softmax(x, 0).item() == 1.0
    assert bc.log_softmax(x, -1).item() == 0.0


def test_in_place_and_overlap():
    x = _x((17, 100), torch.float32, "inplace")
    ref = torch.softmax(x.double(), -1)
    bc.softmax(x, -1, out=x)
    _close(x, ref, torch.float32, "in place")
    y = _x((17, 101), torch.float32, "overlap")
    with pytest.raises(errors.InvalidArgument, match="overlaps"):
        bc.softmax(y[:, :100], -1, out=y[:, 1:])


def test_deterministic():
    x = _x((512, 3000), torch.bfloat16, "det")
    a, b = bc.softmax(x), bc.softmax(x)
    assert torch.equal(a.view(torch.int16), b.view(torch.int16))


def test_errors():
    x = torch.randn(4, 5, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="axis"):
        bc.softmax(x, 2)
    with pytest.raises(errors.InvalidDType, match="x is int32"):
        bc.softmax(torch.ones(4, 5, device=DEV, dtype=torch.int32))
    with pytest.raises(errors.InvalidDType):
        bc.softmax_backward(x, x.double())


def test_cupy_input():
    cp = pytest.importorskip("cupy")
    x = _x((9, 300), torch.float32, "cupy")
    res = bc.softmax(cp.asarray(x.cpu().numpy()), -1)
    assert isinstance(res, cp.ndarray)
    _close(torch.as_tensor(cp.asnumpy(res), device=DEV), torch.softmax(x.double(), -1), torch.float32, "cupy")


def test_jax_input():
    jax, dev = R.jax_gpu()
    import numpy as np
    x = _x((9, 300), torch.float32, "jax")
    res = bc.log_softmax(jax.device_put(x.cpu().numpy(), dev), 0)
    assert isinstance(res, jax.Array)
    _close(torch.as_tensor(np.asarray(res), device=DEV), torch.log_softmax(x.double(), 0), torch.float32, "jax")
