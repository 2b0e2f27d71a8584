"""Host tests of the softmax and loss families (no GPU): select() decisions and refusals, SKU
contents, descriptor identity, the registry entries."""
import pytest

bc = pytest.importorskip("baracuda")
from baracuda import errors  # noqa: E402

S = bc.TensorSpec
f16, bf16, f32, f64 = bc.float16, bc.bfloat16, bc.float32, bc.float64


def sm(op, shape, dt=f32, axis=-1, strides=None, out_strides=None, y_dt=None, out_dt=None, out_shape=None):
    ins = [S(shape, dt, strides)]
    if op.endswith("_backward"):
        ins.append(S(shape, y_dt or dt, strides))
    return bc.SoftmaxPlan.select(bc.SoftmaxDescriptor(op, ins, axis, S(out_shape or shape, out_dt or dt, out_strides)))


def refused(exc, fn, *needles):
    with pytest.raises(errors.BaracudaError) as info:
        fn()
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    for n in needles:
        assert n in str(info.value), (n, str(info.value))


SWEEP = bc.features()["sweep_kernels"]  # every tuning variant built (-DBARACUDA_SWEEP_KERNELS=ON)


def _clusters(sku):
    return any(int(a.strip().split("_")[1].rstrip("a")) >= 90 for a in sku.arch.split(","))  # sm_90 / compute_90


@pytest.mark.parametrize("shape,dt,axis,layout", [
    ((4096, 64), bf16, -1, "rows_warp"),
    ((4096, 7), f32, -1, "rows_loop"),  # 28-byte rows: no 16-byte vectors
    ((10, 1), f32, -1, "rows_loop"),
    ((262144, 512), bf16, -1, "rows_warp"),
    ((32768, 4096), bf16, -1, "rows_block"),
    ((4096, 32768), bf16, -1, "rows_block"),
    ((512, 262144), bf16, -1, "rows_cluster"),  # rows_online when no sm_90+ arch is compiled
    ((8, 16, 32), f32, 1, "columns"),
    ((8, 16, 32), f32, 0, "columns"),
])
def test_paths(shape, dt, axis, layout):
    p = sm("softmax", shape, dt, axis)
    if layout == "rows_cluster" and not _clusters(p.sku):
        layout = "rows_online"
    assert p.sku.layout == layout
    assert p.sku.category == "softmax" and p.sku.op == "softmax"
    assert p.sku.name == f"softmax.softmax.{layout}"
    assert p.workspace_bytes() == 0
    assert p.sku.precision.deterministic
    assert p.sku.precision.accumulator_dtype == (f64 if dt == f64 else f32)


def test_strided_path():
    assert sm("softmax", (4, 5, 6, 7), f32, 1, strides=[1, 4, 20, 120]).sku.layout == "strided"
    assert sm("softmax", (4, 5), f32, -1, strides=[1, 4]).sku.layout == "columns"


def test_unaligned_rows_take_the_loop_kernel():
    assert sm("softmax", (10, 63), f32, strides=[63, 1], out_strides=[63, 1]).sku.layout == "rows_loop"
    assert sm("log_softmax_backward", (10, 64), bf16, strides=[65, 1]).sku.layout == "rows_loop"


def test_backward_paths():
    assert sm("softmax_backward", (4096, 4096), bf16).sku.layout == "rows_block"
    p = sm("log_softmax_backward", (64, 100000), bf16)
    assert p.sku.layout == ("rows_cluster" if _clusters(p.sku) else "rows_online")
    assert sm("softmax_backward", (64, 32768), bf16).sku.layout == "rows_block"
    assert sm("softmax", (8, 300000), bf16).sku.layout == "rows_online"  # beyond 8 x 32768 elements
    # 512-element half rows: the backward takes rows_block (1 warp per row, measured faster); the
    # forward and other lengths / dtypes stay on rows_warp.
    for op in ("log_softmax_backward", "softmax_backward"):
        assert sm(op, (262144, 512), bf16).sku.layout == "rows_block"
        assert sm(op, (64, 400), f16).sku.layout == "rows_block"  # 50 vectors
        assert sm(op, (64, 256), bf16).sku.layout == "rows_warp"
        assert sm(op, (64, 1024), bf16).sku.layout == "rows_warp"
        assert sm(op, (64, 512), f32).sku.layout == "rows_warp"
    assert sm("log_softmax", (262144, 512), bf16).sku.layout == "rows_warp"
    assert sm("log_softmax_backward", (4096, 32768), bf16).sku.layout == "rows_block"


def test_tuning_knob(monkeypatch):
    # BARACUDA_SOFTMAX_CFG picks the geometry at select(); invalid or non-covering values are ignored.
    monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", "path=online")
    assert sm("softmax", (64, 4096), bf16).sku.layout == "rows_online"
    monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", "w=1,k=4")  # 128 vectors < 512: ignored
    assert sm("softmax", (64, 4096), bf16).sku.layout == "rows_block"
    monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", "path=block,w=1,k=4,stage=0")  # the 16-bit backward's short block
    assert sm("softmax_backward", (64, 64), bf16).sku.layout == "rows_block"
    monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", "path=block,w=1,k=4")  # a variant only sweeps build
    if SWEEP:
        assert sm("softmax", (64, 64), bf16).sku.layout == "rows_block"
    else:
        with pytest.raises(errors.InvalidArgument, match="w=1,k=4,stage=0,cs=1 .forward. .*BARACUDA_SWEEP_KERNELS"):
            sm("softmax", (64, 64), bf16)
    monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", "path=warp")  # the old default of 512-element backward rows
    assert sm("log_softmax_backward", (64, 512), bf16).sku.layout == "rows_warp"
    assert sm("softmax", (64, 4096), bf16).sku.layout == "rows_block"  # no rows_warp beyond 128 vectors
    monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", "garbage,w=,=3")  # unknown keys and missing values: refused
    with pytest.raises(errors.InvalidArgument, match="tuning item 'garbage'"):
        sm("softmax", (64, 4096), bf16)
    monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", "w=")
    with pytest.raises(errors.InvalidArgument, match="'w' in the environment variable BARACUDA_SOFTMAX_CFG has no value"):
        sm("softmax", (64, 4096), bf16)
    # stage=2 (prefetching persistent clusters) is a forward cluster variant: ignored elsewhere.
    for stage in ("stage=2", "stage=3"):  # stage=3: the same with bulk copies
        monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", stage)
        assert sm("softmax", (64, 4096), bf16).sku.layout == "rows_block"
        p = sm("softmax_backward", (64, 100000), bf16)
        assert p.sku.layout == ("rows_cluster" if _clusters(p.sku) else "rows_online")
    monkeypatch.delenv("BARACUDA_SOFTMAX_CFG")
    clusters = _clusters(sm("softmax", (4, 8), bf16).sku)
    monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", "w=16,k=8,cs=8,stage=0")  # the non-prefetching cluster kernel
    if SWEEP or not clusters:
        p = sm("softmax", (512, 262144), bf16)
        assert p.sku.layout == ("rows_cluster" if _clusters(p.sku) else "rows_online")
    else:
        with pytest.raises(errors.InvalidArgument, match="BARACUDA_SWEEP_KERNELS"):
            sm("softmax", (512, 262144), bf16)


@pytest.mark.parametrize("dt", [bf16, f16, f32, f64])
@pytest.mark.parametrize("op", ["softmax", "log_softmax_backward"])
def test_default_geometries_are_built(op, dt):
    # Without BARACUDA_SWEEP_KERNELS the build holds only the rows_block / rows_cluster kernels select
    # picks by default: every row length of the register paths still gets one (none falls to rows_online).
    V = 16 // {bf16: 2, f16: 2, f32: 4, f64: 8}[dt]
    for nvec in (33, 64, 129, 256, 257, 512, 513, 1024, 1025, 2048, 2049, 4096, 4097, 8192, 16384, 32768):
        p = sm(op, (8, nvec * V), dt)
        want = ("rows_cluster" if _clusters(p.sku) else "rows_online") if nvec > 4096 else "rows_block"
        if nvec <= 128:
            want = "rows_block" if op.endswith("_backward") and V == 8 and nvec > 32 else "rows_warp"
        assert p.sku.layout == want, (op, dt, nvec, p.sku.name)


def test_refusals():
    refused(errors.InvalidArgument, lambda: sm("softmaxx", (4, 4)), "unknown op")
    refused(errors.InvalidArgument, lambda: sm("softmax", (4, 4), axis=2), "axis 2", "out of range")
    refused(errors.InvalidDType, lambda: sm("softmax", (4, 4), bc.int32), "x is int32", "supported")
    refused(errors.InvalidDType, lambda: sm("softmax", (4, 4), f32, out_dt=f16), "out must be float32")
    refused(errors.InvalidDType, lambda: sm("softmax_backward", (4, 4), f32, y_dt=f64), "y is float64")
    refused(errors.InvalidArgument, lambda: sm("softmax", (4, 4), out_shape=(4, 5)), "out must have shape")
    refused(errors.InvalidArgument, lambda: sm("softmax", (4, 4), out_strides=[0, 1]), "overlapping")
    refused(errors.InvalidArgument, lambda: bc.SoftmaxPlan.select(
        bc.SoftmaxDescriptor("softmax_backward", [S((4, 4), f32)], -1, S((4, 4), f32))), "takes 2 input")
    refused(errors.Unsupported, lambda: bc.SoftmaxPlan.select(
        bc.SoftmaxDescriptor("softmax", [S((4, 4), f32)], -1, S((4, 4), f32)),
        bc.PlanPreference(forbid=[bc.Backend.bespoke])), "bespoke")


def test_descriptor_identity():
    a = bc.SoftmaxDescriptor("softmax", [S((4, 8), f32)], -1, S((4, 8), f32))
    b = bc.SoftmaxDescriptor("softmax", [S((4, 8), f32)], -1, S((4, 8), f32))
    c = bc.SoftmaxDescriptor("softmax", [S((4, 8), f32)], 0, S((4, 8), f32))
    assert a == b and hash(a) == hash(b) and a != c


# ---- gumbel_softmax, gumbel_noise, sparsemax ---------------------------------------------------------

def rop(op, shape, dt=f32, axis=-1, strides=None, out_dt=None, out_shape=None, tau=1.0, hard=False, soft=None,
        y_dt=None, nin=None):
    n = nin if nin is not None else (0 if op == "gumbel_noise" else 2 if op.endswith("_backward") else 1)
    ins = [S(shape, dt, strides)] + [S(shape, y_dt or dt, strides)] * (n - 1) if n else []
    d = bc.SoftmaxDescriptor(op, ins, axis, S(out_shape or shape, out_dt or dt), tau=tau, hard=hard, soft_out=soft)
    return bc.SoftmaxPlan.select(d)


@pytest.mark.parametrize("op", ["gumbel_softmax", "gumbel_softmax_backward", "sparsemax", "sparsemax_backward"])
@pytest.mark.parametrize("shape,dt,axis,layout", [
    ((4096, 64), bf16, -1, "rows_warp"),
    ((4096, 7), f32, -1, "rows_warp"),
    ((10, 1), f16, -1, "rows_warp"),
    ((64, 512), f32, -1, "rows_warp"),
    ((64, 513), f32, -1, "rows_block"),
    ((32768, 4096), bf16, -1, "rows_block"),
    ((8, 16384), f32, -1, "rows_block"),
    ((8, 32768), f32, -1, ("rows_block", "rows_global")),  # the backward holds two operands: k <= 4
    ((8, 32769), f32, -1, "rows_global"),
    # f64 block rows have register kernels for 1 / 2 chunks per lane only; the geometry asks for 4
    # here, so they run (and are reported as) the re-read kernel
    ((8, 600), f64, -1, "rows_global"),
    ((8, 8192), f64, -1, "rows_global"),
    ((8, 8193), f64, -1, "rows_global"),
    ((512, 262144), bf16, -1, "rows_global"),
    ((8, 16, 32), f32, 1, "rows_warp"),
    ((8, 4000, 3), f32, 1, "rows_block"),
])
def test_rowop_paths(op, shape, dt, axis, layout):
    if isinstance(layout, tuple):
        layout = layout[1] if op.endswith("_backward") else layout[0]
    p = rop(op, shape, dt, axis)
    assert p.sku.layout == layout
    assert p.sku.name == f"softmax.{op}.{layout}"
    assert p.sku.category == "softmax" and p.sku.op == op
    assert p.workspace_bytes() == 0
    assert p.sku.precision.deterministic and p.sku.precision.bit_stable
    assert p.sku.precision.accumulator_dtype == (f64 if dt == f64 else f32)


def test_rowop_sku_contents():
    p = rop("gumbel_softmax", (8, 100), bf16, hard=True, soft=S((8, 100), bf16))
    assert "Philox-4x32-10" in p.sku.precision.math and "one-hot" in p.sku.precision.math
    assert list(p.sku.dtypes) == [bf16, bf16, bf16]
    assert "Newton" in rop("sparsemax", (8, 100)).sku.precision.math
    g = rop("gumbel_noise", (3, 5), f32)
    assert g.sku.layout == "elementwise" and g.sku.name == "softmax.gumbel_noise.elementwise"
    assert rop("gumbel_noise", (), f64).sku.precision.compute_dtype == f64
    d = bc.SoftmaxDescriptor("gumbel_softmax", [S((4, 8), f32)], -1, S((4, 8), f32), tau=0.5, hard=True,
                             soft_out=S((4, 8), f32))
    assert d.tau == 0.5 and d.hard and d.soft_out == S((4, 8), f32)
    assert "tau=0.5" in repr(d) and "hard=true" in repr(d) and "soft_out" in repr(d)
    assert bc.SoftmaxDescriptor("sparsemax", [S((4, 8), f32)], -1, S((4, 8), f32)).soft_out is None


def test_rowop_descriptor_identity():
    def d(**kw):
        return bc.SoftmaxDescriptor("gumbel_softmax", [S((4, 8), f32)], -1, S((4, 8), f32), **kw)
    assert d() == d() and hash(d()) == hash(d())
    assert d(tau=0.5) != d() and hash(d(tau=0.5)) != hash(d())
    assert d(hard=True) != d()
    assert d(soft_out=S((4, 8), f32)) != d()


def test_rowop_refusals():
    refused(errors.InvalidArgument, lambda: rop("gumbel_softmax", (4, 4), tau=0.0), "tau must be finite and > 0")
    refused(errors.InvalidArgument, lambda: rop("gumbel_softmax", (4, 4), tau=-1.0), "tau")
    refused(errors.InvalidArgument, lambda: rop("gumbel_softmax", (4, 4), tau=float("nan")), "tau")
    refused(errors.InvalidArgument, lambda: rop("gumbel_softmax", (4, 4), tau=float("inf")), "tau")
    refused(errors.InvalidArgument, lambda: rop("gumbel_softmax_backward", (4, 4), tau=0.0), "tau")
    refused(errors.InvalidArgument, lambda: rop("sparsemax", (4, 4), tau=2.0), "tau is only")
    refused(errors.InvalidArgument, lambda: rop("sparsemax", (4, 4), hard=True), "hard is only")
    refused(errors.InvalidArgument, lambda: rop("sparsemax", (4, 4), soft=S((4, 4), f32)), "soft_out is only")
    refused(errors.InvalidArgument, lambda: rop("softmax", (4, 4), tau=2.0, nin=1), "gumbel_softmax only")
    refused(errors.InvalidArgument, lambda: rop("softmax", (4, 4), hard=True, nin=1), "gumbel_softmax only")
    refused(errors.InvalidArgument, lambda: rop("gumbel_softmax", (4, 4), soft=S((4, 5), f32)),
            "soft_out must have shape")
    refused(errors.InvalidDType, lambda: rop("gumbel_softmax", (4, 4), soft=S((4, 4), f16)), "soft_out must be float32")
    refused(errors.InvalidArgument, lambda: rop("gumbel_softmax", (4, 4), soft=S((4, 4), f32, [0, 1])), "soft_out",
            "overlapping")
    refused(errors.InvalidDType, lambda: rop("sparsemax", (4, 4), bc.int32), "x is int32", "supported")
    refused(errors.InvalidDType, lambda: rop("gumbel_softmax", (4, 4), f32, out_dt=bf16), "out must be float32")
    refused(errors.InvalidDType, lambda: rop("sparsemax_backward", (4, 4), f32, y_dt=f64), "y is float64")
    refused(errors.InvalidDType, lambda: rop("gumbel_softmax_backward", (4, 4), f32, y_dt=f16), "y_soft is float16")
    refused(errors.InvalidArgument, lambda: rop("sparsemax", (4, 4), out_shape=(4, 5)), "out must have shape")
    refused(errors.InvalidArgument, lambda: rop("sparsemax", (4, 4), axis=2), "axis 2", "out of range")
    refused(errors.InvalidArgument, lambda: rop("gumbel_softmax", (4, 4), axis=-3), "axis -3")
    refused(errors.InvalidArgument, lambda: rop("sparsemax_backward", (4, 4), nin=1), "takes 2 input", "grad_out, y")
    refused(errors.InvalidArgument, lambda: rop("gumbel_noise", (4, 4), nin=1), "takes 0 input")
    refused(errors.InvalidDType, lambda: rop("gumbel_noise", (4, 4), bf16), "out is bfloat16", "f32")
    refused(errors.Unsupported, lambda: bc.SoftmaxPlan.select(
        bc.SoftmaxDescriptor("sparsemax", [S((4, 4), f32)], -1, S((4, 4), f32)),
        bc.PlanPreference(forbid=[bc.Backend.bespoke])), "bespoke")
    refused(errors.Unsupported, lambda: rop("sparsemax", (1,) * 13), "rank 13")


def test_rowop_registry():
    fam = next(f for f in bc.families() if f["name"] == "softmax")
    ops = {o["op"] for o in fam["ops"]}
    assert {"softmax", "log_softmax", "gumbel_softmax", "gumbel_noise", "sparsemax"} <= ops


def test_rowop_functions_exported():
    for name in ("gumbel_softmax", "gumbel_softmax_backward", "gumbel_noise", "sparsemax", "sparsemax_backward"):
        assert callable(getattr(bc, name)), name


def test_philox_reference_known_answers():
    # Random123's known-answer vectors for philox4x32_10: the numpy reference the GPU tests compare
    # the noise with is itself right.
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np
    import _philox as P
    kat = [((0, 0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
           ((2**64 - 1, 2**64 - 1, 2**64 - 1), (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
           (((0x85a308d3 << 32) | 0x243f6a88, (0x03707344 << 32) | 0x13198a2e, (0x299f31d0 << 32) | 0xa4093822),
            (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for (block, offset, seed), want in kat:
        got = P.philox4x32_10(np.array([block], dtype=np.uint64), offset, seed)[:, 0]
        assert tuple(int(v) for v in got) == want


def ce(shape=(8, 1000), dt=bf16, tdt=bc.int64, weight=None, op="cross_entropy", **kw):
    n = shape[0]
    grad = kw.pop("grad_input", None)
    d = bc.CrossEntropyLossDescriptor(op, S(shape, dt), S((n,), tdt), weight, grad_input=grad, **kw)
    return bc.LossPlan.select(d)


def test_cross_entropy_select():
    p = ce((8192, 128256))
    assert p.sku.category == "loss" and p.sku.op == "cross_entropy"
    assert p.workspace_bytes() >= 256
    assert p.sku.precision.deterministic
    small = ce((4, 128256))
    assert small.sku.layout == "rows_chunked"  # few rows: each split over several blocks
    assert ce((4, 128256), tdt=bc.int32).sku.dtypes[-1] == bc.int32
    fused = ce((64, 1000), with_grad=True, grad_input=S((64, 1000), bf16))
    assert fused.workspace_bytes() > 0


def test_cross_entropy_refusals():
    refused(errors.InvalidDType, lambda: ce(tdt=f32), "target is float32")
    refused(errors.InvalidDType, lambda: ce(dt=bc.int32), "input is int32")
    refused(errors.InvalidArgument, lambda: ce((2, 3, 4)), "[N, V]")
    refused(errors.InvalidArgument, lambda: ce(reduction="avg"), "reduction 'avg'")
    refused(errors.InvalidArgument, lambda: ce(label_smoothing=1.5), "label_smoothing")
    refused(errors.InvalidArgument, lambda: ce(weight=S((999,), bf16)), "weight must have shape")
    refused(errors.InvalidDType, lambda: ce(weight=S((1000,), f32)), "weight is float32")
    refused(errors.Unsupported, lambda: bc.LossPlan.select(bc.CrossEntropyLossDescriptor(
        "cross_entropy", S((8, 1000), f32, [1, 8]), S((8,), bc.int64))), "unit stride")
    refused(errors.InvalidArgument, lambda: ce(op="cross_entropy_backward", grad_input=S((8, 1000), bf16)),
            "grad_loss is required")
    refused(errors.InvalidArgument, lambda: ce(op="hinge"), "unknown op")


def test_registry_lists_both_families():
    names = {f["name"] for f in bc.families()}
    assert {"softmax", "loss"} <= names


def test_logical_sizes_past_int64_are_refused():
    # a broadcast x may describe more elements than memory holds, but not more than int64 counts
    huge, out = S((1 << 40, 1 << 40), f32, [0, 0]), S((1 << 40, 1 << 40), f32)
    refused(errors.Unsupported, lambda: bc.SoftmaxPlan.select(bc.SoftmaxDescriptor("softmax", [huge], -1, out)),
            "more than 2^63 - 1 elements")
    refused(errors.Unsupported, lambda: rop("sparsemax", (1 << 40, 1 << 40), f32, -1, strides=[0, 0]),
            "more than 2^63 - 1 elements")
