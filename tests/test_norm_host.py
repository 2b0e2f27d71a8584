"""Host tests of the norm family (no GPU): select() decisions and refusals, SKU contents,
workspace sizes, descriptor identity, the registry entry and the functional API's arguments."""
import re

import pytest

bc = pytest.importorskip("baracuda")
from baracuda import errors  # noqa: E402
from conftest import GPU  # noqa: E402

S = bc.TensorSpec
f16, bf16, f32, f64 = bc.float16, bc.bfloat16, bc.float32, bc.float64


def D(op, shape=(8, 64), dtype=bf16, strides=None, **kw):
    return bc.NormDescriptor(op, S(shape, dtype, strides), **kw)


def refused(exc, fn, *needles):
    with pytest.raises(errors.BaracudaError) as info:
        fn()
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    for n in needles:
        assert n in str(info.value), f"{n!r} not in {str(info.value)!r}"


REFUSALS = [
    ("unknown-op", dict(op="batch_norm"), errors.InvalidArgument, ["unknown op", "batch_norm", "rms_norm"]),
    ("int-x", dict(op="rms_norm", dtype=bc.int32), errors.InvalidDType, ["x is int32", "float32"]),
    ("fp8-x", dict(op="layer_norm", dtype=bc.float8_e4m3fn), errors.InvalidDType, ["x is float8_e4m3fn"]),
    ("weight-dtype", dict(op="rms_norm", weight=f16), errors.InvalidDType,
     ["weight is float16", "x is bfloat16", "bfloat16 or float32"]),
    ("bias-dtype", dict(op="layer_norm", bias=f64), errors.InvalidDType, ["bias is float64", "bfloat16 or float32"]),
    ("rms-bias", dict(op="rms_norm", bias=bf16), errors.InvalidArgument, ["bias", "RMSNorm takes no bias"]),
    ("negative-eps", dict(op="layer_norm", eps=-1e-5), errors.InvalidArgument, ["eps must be", ">= 0", "-1e-05"]),
    ("nan-eps", dict(op="rms_norm", eps=float("nan")), errors.InvalidArgument, ["eps must be a finite"]),
    ("0-d", dict(op="rms_norm", shape=()), errors.InvalidArgument, ["x is 0-d"]),
    ("negative-dim", dict(op="rms_norm", shape=(4, -1)), errors.InvalidArgument, ["negative dimension"]),
    ("strides-rank", dict(op="rms_norm", shape=(4, 8), strides=[8]), errors.InvalidArgument, ["1 strides for rank 2"]),
    ("last-stride", dict(op="rms_norm", shape=(4, 8), strides=[1, 4]), errors.Unsupported,
     ["stride 4 along its last", "unit stride"]),
    ("rows-not-collapsible", dict(op="layer_norm", shape=(3, 4, 8), strides=[100, 8, 1]), errors.Unsupported,
     ["one row stride"]),
    # Rows that run backwards (a reversed view from CuPy / numpy): refused, not read as forward rows.
    ("negative-row-stride", dict(op="rms_norm", shape=(3, 64), strides=[-64, 1]), errors.Unsupported,
     ["strides (-64, 1)", "negative row stride"]),
    ("negative-row-stride-3d", dict(op="layer_norm_backward", shape=(2, 3, 64), strides=[-192, -64, 1]),
     errors.Unsupported, ["negative row stride"]),
    ("mixed-sign-rows", dict(op="layer_norm", shape=(2, 3, 64), strides=[192, -64, 1]), errors.Unsupported,
     ["one row stride"]),
    ("stats-in-backward", dict(op="rms_norm_backward", save_stats=True), errors.InvalidArgument,
     ["save_stats applies to the forward"]),
    ("stats-empty-rows", dict(op="layer_norm", shape=(4, 0), save_stats=True), errors.InvalidArgument,
     ["empty last dimension", "save_stats"]),
]


@pytest.mark.parametrize("kw,exc,needles", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_select_refusals(kw, exc, needles):
    kw = dict(kw)
    op = kw.pop("op")
    refused(exc, lambda: bc.NormPlan.select(D(op, **kw)), *needles)


def test_preference_forbidding_bespoke():
    pref = bc.PlanPreference(forbid=[bc.Backend.bespoke])
    refused(errors.Unsupported, lambda: bc.NormPlan.select(D("rms_norm"), pref), "bespoke")


@pytest.mark.parametrize("op", ["rms_norm", "layer_norm", "rms_norm_backward", "layer_norm_backward"])
@pytest.mark.parametrize("dtype", [f32, f16, bf16, f64])
def test_select_accepts(op, dtype):
    wb = dict(weight=dtype) if "rms" in op else dict(weight=f32, bias=dtype)
    p = bc.NormPlan.select(D(op, (32, 4096), dtype, **wb))
    k = p.sku
    assert k.category == "norm" and k.op == op and k.backend == bc.Backend.bespoke
    assert k.layout == "row_registers" and k.name.startswith(f"norm.{op}.row_registers.t")
    assert k.dtypes[0] == dtype
    acc = f64 if dtype == f64 else f32
    assert k.precision.compute_dtype == acc and k.precision.accumulator_dtype == acc
    assert k.precision.deterministic and k.precision.bit_stable
    if "layer" in op and "backward" not in op:
        assert "two passes" in k.precision.math
    if op.endswith("backward"):
        assert p.workspace_bytes() > 0 and p.workspace_bytes() % 256 == 0
    else:
        assert p.workspace_bytes() == 0


# Round 2: bf16 rows up to 65536 (1024 threads x 8 vectors) stay on chip, forward and backward.
@pytest.mark.parametrize("H,layout", [(1, "row_looped"), (7, "row_looped"), (128, "row_registers"),
                                      (16384, "row_registers"), (65536, "row_registers"), (65544, "row_looped"),
                                      (131072, "row_looped"), (262144, "row_looped")])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm_backward"])
def test_layout_choice(H, layout, op, monkeypatch):
    monkeypatch.delenv("BARACUDA_NORM_CFG", raising=False)
    monkeypatch.delenv("BARACUDA_NORM_BWD_CFG", raising=False)
    if op == "rms_norm" and H == 131072:
        layout = "row_cluster"  # forward rows beyond one block: split over a thread-block cluster (sm_90)
    if op == "layer_norm_backward" and H == 65536:
        layout = "row_cluster"  # backward rows of 2049..8192 vectors: a persistent grid of clusters
    assert bc.NormPlan.select(D(op, (4, H))).sku.layout == layout


# Without a residual, rows a single block holds at 2048 vectors or above 4096 (<= 1024 x 8) keep
# the one-block kernel (measured faster at H = 16384 and 65536 bf16).
@pytest.mark.parametrize("dtype,H,want", [
    (bf16, 16384, "row_registers.t512x4"), (bf16, 32768, "row_cluster.c4t256x4"),
    (bf16, 65536, "row_registers.t1024x8"), (f16, 65528, "row_registers.t1024x8"),
    (f32, 16384, "row_cluster.c4t256x4"), (f32, 65536, "row_cluster.c8t512x4"),
    (f64, 16384, "row_registers.t1024x8"), (bf16, 131072, "row_cluster.c8t512x4"),
])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_cluster_defaults_without_residual(op, dtype, H, want, monkeypatch):
    monkeypatch.delenv("BARACUDA_NORM_CFG", raising=False)
    k = bc.NormPlan.select(D(op, (3, H), dtype, weight=dtype)).sku
    if want in ("row_registers.t1024x8", "row_registers.t512x4") and dtype in (bf16, f16) and op == "rms_norm":
        want += "q"  # the specialized 16-bit kernel (RMSNorm with a weight) takes its weight through the ring
    assert k.name == f"norm.{op}.{want}", k.name


# Forward rows of H >= 16384 (16-byte vectors: 2048 .. 16384 per row): the cluster path.
@pytest.mark.parametrize("dtype,H,want", [
    (bf16, 16384, "row_cluster.c2t256x4"), (f16, 16384, "row_cluster.c2t256x4"),
    (bf16, 65536, "row_cluster.c4t512x4"), (f16, 65536, "row_cluster.c4t512x4"),
    (bf16, 65528, "row_cluster.c4t512x4"),   # the last block's last vector is padding
    (bf16, 32768, "row_cluster.c4t256x4"),
    (f32, 16384, "row_cluster.c4t256x4"), (f32, 65536, "row_cluster.c8t512x4"),
    (f64, 16384, "row_cluster.c4t512x4"), (f64, 65536, "row_looped.t512"),
    (bf16, 65544, "row_looped.t512"),        # fits no cluster shape
    (bf16, 8192, "row_registers.t256x4"),    # below the cluster threshold
    (bf16, 24000, "row_registers.t1024x3"),  # 3000 vectors: no cluster shape pads less than a block's share
])
@pytest.mark.parametrize("op", ["rms_norm", "layer_norm"])
def test_cluster_defaults(op, dtype, H, want, monkeypatch):
    monkeypatch.delenv("BARACUDA_NORM_CFG", raising=False)
    k = bc.NormPlan.select(D(op, (3, H), dtype, weight=dtype, residual=True, save_stats=True)).sku
    assert k.name == f"norm.{op}.{want}", k.name
    if want.startswith("row_cluster"):
        assert k.layout == "row_cluster" and "cluster" in k.precision.math and "rank order" in k.precision.math
        assert k.precision.deterministic and k.precision.bit_stable
    # The backward has its own cluster kernels (rows of 2049..8192 vectors), with their own shapes.
    bwd = bc.NormPlan.select(D(op + "_backward", (3, H), dtype)).sku.name
    nv = H // (16 // {f16: 2, bf16: 2, f32: 4, f64: 8}[dtype])
    assert ("row_cluster" in bwd) == (2048 < nv <= 8192), bwd


def test_cluster_override(monkeypatch):
    d = D("layer_norm", (2048, 65536), bf16, weight=bf16, bias=bf16)
    monkeypatch.setenv("BARACUDA_NORM_CFG", "cluster=8,tpr=256,items=4")
    assert bc.NormPlan.select(d).sku.name == "norm.layer_norm.row_cluster.c8t256x4"
    monkeypatch.setenv("BARACUDA_NORM_CFG", "cluster=8,tpr=512,items=2")
    assert bc.NormPlan.select(d).sku.name == "norm.layer_norm.row_cluster.c8t512x2"
    monkeypatch.setenv("BARACUDA_NORM_CFG", "cluster=8,tpr=1024,items=4")  # not instantiated: the default
    assert bc.NormPlan.select(d).sku.name == "norm.layer_norm.row_cluster.c4t512x4"
    monkeypatch.setenv("BARACUDA_NORM_CFG", "cluster=2,tpr=256,items=4")  # does not cover the row: the default
    assert bc.NormPlan.select(d).sku.name == "norm.layer_norm.row_cluster.c4t512x4"
    # No cluster: the one-block register kernel (q: the parameter ring, pinned: an H200-class device
    # would otherwise take the resident last parameter, s).
    monkeypatch.setenv("BARACUDA_NORM_CFG", "cluster=1,pshared=2")
    assert bc.NormPlan.select(d).sku.name == "norm.layer_norm.row_registers.t1024x8q"
    monkeypatch.setenv("BARACUDA_NORM_CFG", "tpr=1024,items=8,pshared=2")  # tpr / items alone: the one-block kernel
    assert bc.NormPlan.select(d).sku.name == "norm.layer_norm.row_registers.t1024x8q"
    monkeypatch.setenv("BARACUDA_NORM_CFG", "tpr=1024,items=8,pshared=0")
    assert bc.NormPlan.select(d).sku.name == "norm.layer_norm.row_registers.t1024x8"
    monkeypatch.setenv("BARACUDA_NORM_CFG", "tpr=1024,items=8,pshared=1")
    assert bc.NormPlan.select(d).sku.name == "norm.layer_norm.row_registers.t1024x8s"
    monkeypatch.setenv("BARACUDA_NORM_CFG", "tpr=1024,items=8,spec=0")  # not specialized: no ring
    assert bc.NormPlan.select(d).sku.name == "norm.layer_norm.row_registers.t1024x8"
    # An explicit cluster shape below the default threshold (the sweep may try it).
    monkeypatch.setenv("BARACUDA_NORM_CFG", "cluster=2,tpr=256,items=4")
    k = bc.NormPlan.select(D("rms_norm", (64, 8192), f32)).sku.name
    assert k == "norm.rms_norm.row_cluster.c2t256x4", k


def test_long_row_backward_holds_x_in_shared_memory(monkeypatch):
    # cluster=1: the one-block kernel with x's row in shared memory (the default before the cluster path).
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", "cluster=1")
    k = bc.NormPlan.select(D("layer_norm_backward", (4, 65536), weight=bf16, bias=bf16)).sku
    assert k.name == "norm.layer_norm_backward.row_registers.t1024x8xs", k.name
    assert "shared memory" in k.precision.math


# Backward rows of 2049..8192 16-byte vectors: a persistent grid of clusters (kBwdClusterShapes),
# one [H] partial row per cluster, at most one cluster per row. Without a device the plan takes
# kBwdClusterBlocks / cs clusters (`clusters` below); with one, as many as are resident at once.
@pytest.mark.parametrize("dtype,shape,want,clusters", [
    (bf16, (2048, 65536), "c8t256x4", 24), (f16, (2048, 65528), "c8t256x4", 24),
    (bf16, (2048, 49152), "c8t256x3", 24), (bf16, (4096, 32768), "c4t256x4", 48),
    (bf16, (64, 16392), "c4t256x3", 48), (bf16, (5, 65536), "c8t256x4", 5), (bf16, (1, 65536), "c8t256x4", 1),
    (f32, (4096, 16384), "c4t256x4", 48), (f32, (4096, 32768), "c8t256x4", 24), (f64, (64, 16384), "c8t256x4", 24),
])
@pytest.mark.parametrize("op", ["rms_norm_backward", "layer_norm_backward"])
def test_backward_cluster_defaults(op, dtype, shape, want, clusters, monkeypatch):
    monkeypatch.delenv("BARACUDA_NORM_BWD_CFG", raising=False)
    bias = dtype if op.startswith("layer") else None
    p = bc.NormPlan.select(D(op, shape, dtype, weight=dtype, bias=bias))
    k = p.sku
    assert k.name == f"norm.{op}.row_cluster.{want}", k.name
    rows, H = shape
    m = re.search(r"persistent grid of (\d+) clusters", k.precision.math)
    assert m, k.precision.math
    n = int(m.group(1))
    if GPU:  # the resident clusters of this device, one per row at most
        assert 1 <= n <= rows and (rows > 5 or n == rows), (n, k.precision.math)
    else:
        assert n == clusters, k.precision.math
    assert k.precision.deterministic and k.precision.bit_stable
    # The workspace holds the clusters' partial rows and the fallbacks' (xs / looped) partitions.
    esz = 8 if dtype == f64 else 4
    one = (max(n, 1) * H * esz + 255) // 256 * 256
    assert p.workspace_bytes() >= one * (2 if bias else 1)


@pytest.mark.parametrize("op", ["rms_norm_backward", "layer_norm_backward"])
def test_backward_cluster_edges(op):
    # 2048 vectors (bf16 16384) stay on the register kernel (RMSNorm prefetching the next row);
    # more than 8192 (bf16 65544) loop.
    pf = "p" if op.startswith("rms") else ""
    assert bc.NormPlan.select(D(op, (64, 16384))).sku.name == f"norm.{op}.row_registers.t512x4{pf}"
    assert bc.NormPlan.select(D(op, (64, 65544))).sku.name == f"norm.{op}.row_looped.t512"
    assert bc.NormPlan.select(D(op, (64, 131072), f32)).sku.layout == "row_looped"


def test_backward_cluster_override(monkeypatch):
    d = D("layer_norm_backward", (2048, 65536), bf16, weight=bf16, bias=bf16)
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", "cluster=8,tpr=256,items=4,clusters=16")
    k = bc.NormPlan.select(d).sku
    assert k.name == "norm.layer_norm_backward.row_cluster.c8t256x4" and "grid of 16 clusters" in k.precision.math
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", "clusters=33")  # the default shape, 33 clusters
    k = bc.NormPlan.select(d).sku
    assert k.name == "norm.layer_norm_backward.row_cluster.c8t256x4" and "grid of 33 clusters" in k.precision.math
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", "cluster=4,tpr=256,items=4")  # does not hold the row: default
    assert bc.NormPlan.select(d).sku.name == "norm.layer_norm_backward.row_cluster.c8t256x4"
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", "cluster=8,tpr=512,items=2")  # not instantiated: default
    assert bc.NormPlan.select(d).sku.name == "norm.layer_norm_backward.row_cluster.c8t256x4"
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", "tpr=1024,items=8,xs=1")  # tpr / items alone: one block
    assert bc.NormPlan.select(d).sku.name == "norm.layer_norm_backward.row_registers.t1024x8xs"
    # An explicit cluster shape below the default threshold (a sweep may try it).
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", "cluster=4,tpr=256,items=3")
    k = bc.NormPlan.select(D("rms_norm_backward", (64, 16384), bf16, weight=bf16)).sku.name
    assert k == "norm.rms_norm_backward.row_cluster.c4t256x3", k


def test_tuning_override(monkeypatch):
    base = bc.NormPlan.select(D("rms_norm", (32768, 4096))).sku.name
    assert base == "norm.rms_norm.row_registers.t256x2r2", base
    monkeypatch.setenv("BARACUDA_NORM_CFG", "tpr=128,items=4,rows=1")
    assert bc.NormPlan.select(D("rms_norm", (32768, 4096))).sku.name == "norm.rms_norm.row_registers.t128x4"
    monkeypatch.setenv("BARACUDA_NORM_CFG", "tpr=128,items=2")  # does not cover the row: ignored
    assert bc.NormPlan.select(D("rms_norm", (32768, 4096))).sku.name == base
    bwd = bc.NormPlan.select(D("rms_norm_backward", (64, 16384), weight=bf16)).sku.name
    assert bwd == "norm.rms_norm_backward.row_registers.t512x4p", bwd
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", "tpr=1024,items=2,xs=1")
    k = bc.NormPlan.select(D("rms_norm_backward", (64, 16384), weight=bf16)).sku.name
    assert k == "norm.rms_norm_backward.row_registers.t1024x2xs", k
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", "tpr=128,items=1")  # does not cover the row: ignored
    assert bc.NormPlan.select(D("rms_norm_backward", (64, 16384), weight=bf16)).sku.name == bwd


# Defaults from the H200 bf16 sweep, H = 512 forward from the H100 one (f16 shares them; f32 / f64
# keep the generic choice).
@pytest.mark.parametrize("op,shape,want", [
    ("rms_norm", (32768, 4096), "t256x2r2"),
    ("layer_norm", (32768, 4096), "t256x2r2"),
    ("rms_norm_backward", (32768, 4096), "t128x4"),
    ("layer_norm_backward", (32768, 4096), "t128x4a"),  # dweight / dbias accumulated in registers
    ("rms_norm", (8192, 8192), "t256x4q"),  # (a 16-bit weight, no bias: the parameter ring)
    ("layer_norm", (8192, 8192), "t256x4"),  # (a weight but no bias: not specialized, no ring)
    ("rms_norm_backward", (8192, 8192), "t512x2p"),  # the next row prefetched
    ("layer_norm_backward", (8192, 8192), "t512x2p"),
    ("rms_norm", (4096, 16384), "t512x4q"),  # no residual: the one-block kernel, not the cluster
    ("layer_norm", (4096, 16384), "t512x4"),
    ("rms_norm_backward", (4096, 16384), "t512x4p"),
    ("layer_norm_backward", (4096, 16384), "t512x4"),  # its two accumulator rows: no prefetch
    ("rms_norm", (65536, 512), "t32x2"),  # one row per warp (docs/benchmark-notes.md, norm: rows per group)
    ("rms_norm", (262144, 128), "t16x1r4"),  # groups of 16 threads hold four rows at once
    ("layer_norm", (262144, 128), "t16x1r4"),
    ("rms_norm", (4096, 128), "t16x1"),  # too few rows for four per group
    ("layer_norm_backward", (65536, 512), "t32x2"),
    ("layer_norm_backward", (262144, 128), "t16x1p"),  # small groups: the next row in registers
    ("rms_norm_backward", (262144, 96), "t16x1p"),
])
@pytest.mark.parametrize("dtype", [bf16, f16])
def test_measured_defaults(op, shape, want, dtype, monkeypatch):
    monkeypatch.delenv("BARACUDA_NORM_CFG", raising=False)
    monkeypatch.delenv("BARACUDA_NORM_BWD_CFG", raising=False)
    name = bc.NormPlan.select(D(op, shape, dtype, weight=dtype)).sku.name
    assert name == f"norm.{op}.row_registers.{want}", name


@pytest.mark.parametrize("op,shape,want", [
    ("layer_norm", (32768, 2048), "t256x2r2"),       # f32: 512 vectors, not retuned
    ("rms_norm_backward", (32768, 2048), "t256x2"),
    ("rms_norm_backward", (4096, 8192), "t1024x2xs"),
])
def test_measured_defaults_are_half_only(op, shape, want, monkeypatch):
    monkeypatch.delenv("BARACUDA_NORM_CFG", raising=False)
    monkeypatch.delenv("BARACUDA_NORM_BWD_CFG", raising=False)
    name = bc.NormPlan.select(D(op, shape, f32, weight=f32)).sku.name
    assert name == f"norm.{op}.row_registers.{want}", name


def test_backward_knobs_regacc_and_prefetch(monkeypatch):
    """regacc=1 / prefetch=1 ask for the register-accumulator / prefetching backward where it is
    instantiated (regacc: 16-bit, 128 x 4, 256 x 2, 512 x 2), =0 forbids it; elsewhere ignored."""
    def name(op, shape, dt, cfg):
        monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", cfg)
        plan = bc.NormPlan.select(D(op, shape, dt, weight=dt, bias=dt if op.startswith("layer") else None))
        return plan.sku.name.rsplit(".", 1)[1]
    assert name("layer_norm_backward", (32768, 4096), bf16, "regacc=0") == "t128x4"
    assert name("layer_norm_backward", (32768, 4096), bf16, "tpr=256,items=2,regacc=1") == "t256x2a"
    assert name("layer_norm_backward", (32768, 4096), bf16, "tpr=256,items=2,regacc=1,prefetch=1") == "t256x2ap"
    assert name("rms_norm_backward", (8192, 8192), f16, "regacc=1") == "t512x2ap"
    assert name("rms_norm_backward", (8192, 8192), f16, "prefetch=0") == "t512x2"
    assert name("layer_norm_backward", (32768, 2048), f32, "regacc=1") == "t256x2"    # f32: not built
    assert name("layer_norm_backward", (4096, 16384), bf16, "regacc=1") == "t512x4"  # 512 x 4: not built
    assert name("layer_norm_backward", (4096, 16384), bf16, "prefetch=1") == "t512x4p"
    # The small groups (H = 128 / 512: 16 x 1, 32 x 2) prefetch into registers.
    assert name("layer_norm_backward", (262144, 128), bf16, "prefetch=0") == "t16x1"
    assert name("rms_norm_backward", (65536, 512), f32, "tpr=32,items=4,prefetch=1") == "t32x4"  # not built
    assert name("rms_norm_backward", (65536, 512), bf16, "regacc=1,prefetch=1") == "t32x2ap"


def test_backward_workspace_scales_with_outputs():
    none = bc.NormPlan.select(D("layer_norm_backward", (4096, 1024)))
    w = bc.NormPlan.select(D("layer_norm_backward", (4096, 1024), weight=bf16))
    wb = bc.NormPlan.select(D("layer_norm_backward", (4096, 1024), weight=bf16, bias=bf16))
    assert none.workspace_bytes() == 0
    assert wb.workspace_bytes() == 2 * w.workspace_bytes() > 0
    assert bc.NormPlan.select(D("rms_norm_backward", (0, 1024), weight=bf16)).workspace_bytes() == 0
    refused(errors.Unsupported, lambda: bc.NormPlan.select(D("rms_norm_backward", (4096, 1024), weight=bf16),
                                                           bc.PlanPreference(workspace_limit=1024)), "workspace")


def test_strided_specs_accepted():
    # a slice of the last dim of a wider tensor, and size-1 leading dims with odd strides
    assert bc.NormPlan.select(D("rms_norm", (16, 64), strides=[128, 1]))
    assert bc.NormPlan.select(D("layer_norm", (2, 3, 64), strides=[3 * 200, 200, 1]))
    assert bc.NormPlan.select(D("layer_norm", (1, 5, 64), strides=[7, 64, 1]))


def test_descriptor_identity():
    a = D("layer_norm", weight=bf16, eps=1e-5)
    b = D("layer_norm", weight=bf16, eps=1e-5)
    c = D("layer_norm", weight=f32, eps=1e-5)
    assert a == b and hash(a) == hash(b) and a != c
    assert {a: 1}[b] == 1
    assert "layer_norm" in repr(a) and "weight=" in repr(a) and "bias=none" in repr(a)
    assert a.weight == bf16 and a.bias is None and a.eps == 1e-5 and not a.residual


def test_registry_lists_norm():
    fams = {f["name"] if isinstance(f, dict) else f.name: f for f in bc.families()}
    assert "norm" in fams


def test_functional_api_exists():
    for name in ("rms_norm", "layer_norm", "rms_norm_backward", "layer_norm_backward"):
        fn = getattr(bc, name)
        assert callable(fn) and fn.__doc__ and name in fn.__doc__
    assert "1e-6" in bc.rms_norm.__doc__ and "finfo" in bc.rms_norm.__doc__


def test_functional_refuses_numpy():
    np = pytest.importorskip("numpy")
    refused(errors.InvalidArgument, lambda: bc.rms_norm(np.ones((4, 8), np.float32)), "numpy")


# ---- GroupNorm / InstanceNorm / BatchNorm -------------------------------------------------------------

def CD(op, shape=(4, 8, 5, 5), dtype=bf16, strides=None, **kw):
    return bc.ChannelNormDescriptor(op, S(shape, dtype, strides), **kw)


NHWC = [8 * 5 * 5, 1, 5 * 8, 8]  # channels-last strides of (4, 8, 5, 5)

CHAN_REFUSALS = [
    ("unknown-op", dict(op="layer_norm"), errors.InvalidArgument, ["unknown op", "group_norm", "batch_norm"]),
    ("int-x", dict(op="batch_norm", dtype=bc.int32), errors.InvalidDType, ["x is int32", "float32"]),
    ("rank-1", dict(op="batch_norm", shape=(8,)), errors.InvalidArgument, ["[N, C, *spatial]"]),
    ("groups-divide", dict(op="group_norm", num_groups=3), errors.InvalidArgument, ["num_groups 3", "does not divide",
                                                                                   "8 channels"]),
    ("groups-zero", dict(op="group_norm", num_groups=0), errors.InvalidArgument, ["num_groups is 0", ">= 1"]),
    ("groups-on-bn", dict(op="batch_norm", num_groups=2), errors.InvalidArgument, ["only group_norm"]),
    ("weight-dtype", dict(op="group_norm", num_groups=2, weight=f16), errors.InvalidDType,
     ["weight is float16", "bfloat16 or float32"]),
    ("running-dtype", dict(op="batch_norm", running=f64), errors.InvalidDType, ["running_mean / running_var",
                                                                             "float64"]),
    ("gn-running", dict(op="group_norm", num_groups=2, running=f32), errors.InvalidArgument, ["keeps none"]),
    ("eval-without-running", dict(op="batch_norm", training=False), errors.InvalidArgument,
     ["needs running_mean and running_var"]),
    ("in-eval-without-running", dict(op="instance_norm", training=False), errors.InvalidArgument,
     ["needs running_mean"]),
    ("eval-save-stats", dict(op="batch_norm", training=False, running=f32, save_stats=True), errors.InvalidArgument,
     ["save_stats with training=false"]),
    ("bwd-save-stats", dict(op="batch_norm_backward", save_stats=True), errors.InvalidArgument,
     ["save_stats applies to the forward"]),
    ("bn-one-value", dict(op="batch_norm", shape=(1, 8, 1, 1)), errors.InvalidArgument,
     ["more than 1 value per channel"]),
    ("bn-one-value-2d", dict(op="batch_norm", shape=(1, 8)), errors.InvalidArgument, ["more than 1 value"]),
    ("in-one-spatial", dict(op="instance_norm", shape=(4, 8, 1, 1)), errors.InvalidArgument,
     ["more than 1 spatial element"]),
    ("eps", dict(op="batch_norm", eps=-1.0), errors.InvalidArgument, ["eps must be"]),
    ("momentum", dict(op="batch_norm", momentum=float("nan")), errors.InvalidArgument, ["momentum", "None"]),
    ("spatial-not-collapsing", dict(op="batch_norm", strides=[200, 25, 1, 5]), errors.Unsupported,
     ["do not collapse", "channels-last"]),
    # Spatial dims that run backwards: refused (they were once read as a unit spatial stride).
    ("negative-spatial-stride", dict(op="instance_norm", shape=(2, 4, 8), strides=[32, 8, -1]), errors.Unsupported,
     ["strides (32, 8, -1)", "negative stride"]),
    ("negative-spatial-strides-2d", dict(op="group_norm", num_groups=2, shape=(2, 4, 2, 4), strides=[32, 8, -4, -1]),
     errors.Unsupported, ["negative stride"]),
    ("no-unit-stride", dict(op="batch_norm", strides=[400, 50, 10, 2]), errors.Unsupported,
     ["supported layouts", "channel stride 1"]),
    ("in-eval-backward", dict(op="instance_norm_backward", training=False, running=f32), errors.InvalidArgument,
     ["batch_norm_backward with training=false"]),
    ("train-bwd-running", dict(op="batch_norm_backward", running=f32), errors.InvalidArgument,
     ["reads the saved mean"]),
]


@pytest.mark.parametrize("kw,exc,needles", [r[1:] for r in CHAN_REFUSALS], ids=[r[0] for r in CHAN_REFUSALS])
def test_channel_select_refusals(kw, exc, needles):
    kw = dict(kw)
    op = kw.pop("op")
    shape = kw.pop("shape", (4, 8, 5, 5))
    dtype = kw.pop("dtype", bf16)
    strides = kw.pop("strides", None)
    refused(exc, lambda: bc.ChannelNormPlan.select(CD(op, shape, dtype, strides, **kw)), *needles)


@pytest.mark.parametrize("op,kw", [
    ("group_norm", dict(num_groups=4)), ("instance_norm", {}), ("instance_norm", dict(running=f32)),
    ("instance_norm", dict(running=f32, training=False)), ("batch_norm", dict(training=True)),
    ("batch_norm", dict(running=f32, training=True)), ("batch_norm", dict(running=f32, training=False)),
    ("group_norm_backward", dict(num_groups=2)), ("instance_norm_backward", {}),
    ("batch_norm_backward", {}), ("batch_norm_backward", dict(training=False, running=f32)),
])
@pytest.mark.parametrize("dtype", [f32, f16, bf16, f64])
@pytest.mark.parametrize("layout", ["nc", "cl"])
def test_channel_select_accepts(op, kw, dtype, layout):
    p = bc.ChannelNormPlan.select(CD(op, (4, 8, 5, 5), dtype, None if layout == "nc" else NHWC,
                                     weight=dtype, bias=f32, **kw))
    k = p.sku
    assert k.category == "norm" and k.op == op and k.backend == bc.Backend.bespoke
    assert k.layout == ("nc_planes" if layout == "nc" else "channels_last_columns")
    assert k.name.startswith(f"norm.{op}.{k.layout}.")
    acc = f64 if dtype == f64 else f32
    assert k.precision.compute_dtype == acc and k.precision.accumulator_dtype == acc
    assert k.precision.deterministic and k.precision.bit_stable
    assert p.workspace_bytes() > 0 and p.workspace_bytes() % 256 == 0
    if op in ("group_norm", "instance_norm", "batch_norm") and kw.get("training", True):
        assert "Chan" in k.precision.math and "E[x^2]" in k.precision.math


def test_channel_mode_names():
    name = lambda op, **kw: bc.ChannelNormPlan.select(CD(op, **kw)).sku.name  # noqa: E731
    assert name("group_norm", num_groups=2).endswith(".per_group")
    assert name("instance_norm").endswith(".per_group")
    assert name("batch_norm").endswith(".per_channel")
    assert name("batch_norm", training=False, running=f32).endswith(".running")
    assert name("instance_norm", training=False, running=f32).endswith(".running")


def test_channel_2d_batch_norm_uses_columns():
    # x [N, C]: samples become the spatial dim, channel stride 1 -> the column kernels
    assert bc.ChannelNormPlan.select(CD("batch_norm", (256, 512))).sku.layout == "channels_last_columns"
    assert bc.ChannelNormPlan.select(CD("batch_norm", (256, 512), strides=[1, 256])).sku.layout == "nc_planes"


def test_batch_norm_small_planes_fold_into_columns():
    # NC* x with planes under 256 values (and C * S a multiple of the vector width): per-channel
    # statistics run as folded columns [1, C * S, N]; the plan says so, larger planes do not.
    k = bc.ChannelNormPlan.select(CD("batch_norm", (256, 2048, 7, 7), training=True)).sku
    assert k.layout == "nc_planes" and "folded columns" in k.precision.math, k.precision.math
    assert "folded" not in bc.ChannelNormPlan.select(CD("batch_norm", (32, 256, 56, 56), training=True)).sku.precision.math
    assert "folded" not in bc.ChannelNormPlan.select(CD("group_norm", (8, 64, 7, 7), num_groups=8)).sku.precision.math
    assert "folded" not in bc.ChannelNormPlan.select(CD("batch_norm", (4, 3, 7, 7), training=True)).sku.precision.math


def test_channel_empty_needs_no_workspace():
    for shape in [(0, 8, 5), (4, 8, 0), (4, 0, 3)]:
        p = bc.ChannelNormPlan.select(CD("batch_norm", shape, running=f32))
        assert p.workspace_bytes() == 0
        assert bc.ChannelNormPlan.select(CD("group_norm", shape, num_groups=1)).workspace_bytes() == 0


def test_channel_workspace_limit():
    refused(errors.Unsupported, lambda: bc.ChannelNormPlan.select(CD("batch_norm"),
                                                                  bc.PlanPreference(workspace_limit=16)), "workspace")
    pref = bc.PlanPreference(forbid=[bc.Backend.bespoke])
    refused(errors.Unsupported, lambda: bc.ChannelNormPlan.select(CD("batch_norm"), pref), "bespoke")


def test_channel_descriptor_identity():
    a = CD("group_norm", num_groups=2, weight=bf16)
    b = CD("group_norm", num_groups=2, weight=bf16)
    c = CD("group_norm", num_groups=4, weight=bf16)
    assert a == b and hash(a) == hash(b) and a != c
    assert "group_norm" in repr(a) and "num_groups=2" in repr(a) and "running=none" in repr(a)
    assert a.num_groups == 2 and a.weight == bf16 and a.bias is None and a.training and a.momentum == 0.1


def test_channel_functional_api_exists():
    for name in ("group_norm", "instance_norm", "batch_norm", "group_norm_backward", "instance_norm_backward",
                 "batch_norm_backward"):
        fn = getattr(bc, name)
        assert callable(fn) and fn.__doc__ and name in fn.__doc__
    fams = {f["name"] if isinstance(f, dict) else f.name: f for f in bc.families()}
    ops = [o["op"] if isinstance(o, dict) else o.op for o in fams["norm"]["ops"]]
    assert {"group_norm", "instance_norm", "batch_norm"} <= set(ops)


def test_channel_functional_refuses_numpy():
    np = pytest.importorskip("numpy")
    refused(errors.InvalidArgument, lambda: bc.group_norm(np.ones((2, 4, 3), np.float32), 2), "numpy")
    refused(errors.InvalidArgument, lambda: bc.batch_norm(np.ones((2, 4, 3), np.float32)), "numpy")


# ---- run(): layouts refused before anything reaches the device (fake CUDA tensors) -----------------
from _fake import FakeTensor  # noqa: E402

_BUF = [0x7F0000000000 + k * (256 << 20) for k in range(6)]


def fake(shape, dt=f32, k=0, strides=None, offset=0):
    return FakeTensor(shape, dt, strides, addr=_BUF[k] + offset)


def test_row_norm_run_refuses_overlapping_and_reversed_outputs():
    plan = bc.NormPlan.select(D("rms_norm", (8, 64), f32))
    x = fake((8, 64))
    refused(errors.InvalidArgument, lambda: plan.run(y=fake((8, 64), k=1, strides=[0, 1]), x=x),
            "y has overlapping elements")
    refused(errors.InvalidArgument, lambda: plan.run(y=fake((8, 64), k=1, strides=[32, 1]), x=x),
            "y has overlapping elements")
    # a reversed y (CuPy y[::-1]): its rows run backwards from the pointer
    refused(errors.Unsupported, lambda: plan.run(y=fake((8, 64), k=1, strides=[-64, 1], offset=7 * 64 * 4), x=x),
            "y with strides (-64, 1)", "negative row stride")
    bwd = bc.NormPlan.select(D("layer_norm_backward", (8, 64), f32))
    refused(errors.InvalidArgument, lambda: bwd.run(grad_x=fake((8, 64), k=2, strides=[0, 1]), grad_out=fake((8, 64), k=1),
                                                    x=x, mean=fake((8,), k=3), rstd=fake((8,), k=4)),
            "grad_x has overlapping elements")


def test_channel_norm_run_refuses_a_reversed_spatial_output():
    plan = bc.ChannelNormPlan.select(CD("instance_norm", (2, 4, 16), f32))
    ws = fake((max(plan.workspace_bytes(), 256),), bc.uint8, k=5)
    refused(errors.Unsupported, lambda: plan.run(y=fake((2, 4, 16), k=1, strides=[64, 16, -1], offset=15 * 4),
                                                 x=fake((2, 4, 16)), workspace=ws),
            "y with strides (64, 16, -1)", "negative stride")
