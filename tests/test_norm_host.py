"""Host tests of the norm family (no GPU): select() decisions and refusals, SKU contents,
workspace sizes, descriptor identity, the registry entry and the functional API's arguments."""
import pytest

bc = pytest.importorskip("baracuda")
from baracuda import errors  # noqa: E402

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
def test_layout_choice(H, layout, op):
    assert bc.NormPlan.select(D(op, (4, H))).sku.layout == layout


def test_long_row_backward_holds_x_in_shared_memory():
    k = bc.NormPlan.select(D("layer_norm_backward", (4, 65536), weight=bf16, bias=bf16)).sku
    assert k.name == "norm.layer_norm_backward.row_registers.t1024x8xs", k.name
    assert "shared memory" in k.precision.math


def test_tuning_override(monkeypatch):
    base = bc.NormPlan.select(D("rms_norm", (32768, 4096))).sku.name
    assert base == "norm.rms_norm.row_registers.t256x2r2", base
    monkeypatch.setenv("BARACUDA_NORM_CFG", "tpr=128,items=4,rows=1")
    assert bc.NormPlan.select(D("rms_norm", (32768, 4096))).sku.name == "norm.rms_norm.row_registers.t128x4"
    monkeypatch.setenv("BARACUDA_NORM_CFG", "tpr=128,items=2")  # does not cover the row: ignored
    assert bc.NormPlan.select(D("rms_norm", (32768, 4096))).sku.name == base
    bwd = bc.NormPlan.select(D("rms_norm_backward", (64, 16384), weight=bf16)).sku.name
    assert bwd == "norm.rms_norm_backward.row_registers.t512x4", bwd
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", "tpr=1024,items=2,xs=1")
    k = bc.NormPlan.select(D("rms_norm_backward", (64, 16384), weight=bf16)).sku.name
    assert k == "norm.rms_norm_backward.row_registers.t1024x2xs", k
    monkeypatch.setenv("BARACUDA_NORM_BWD_CFG", "tpr=128,items=1")  # does not cover the row: ignored
    assert bc.NormPlan.select(D("rms_norm_backward", (64, 16384), weight=bf16)).sku.name == bwd


# Defaults from the H200 bf16 sweep (f16 shares them; f32 / f64 keep the generic choice).
@pytest.mark.parametrize("op,shape,want", [
    ("rms_norm", (32768, 4096), "t256x2r2"),
    ("layer_norm", (32768, 4096), "t128x4"),
    ("rms_norm_backward", (32768, 4096), "t128x4"),
    ("layer_norm_backward", (32768, 4096), "t256x2"),
    ("rms_norm_backward", (4096, 16384), "t512x4"),
    ("layer_norm_backward", (4096, 16384), "t1024x2xs"),
    ("rms_norm", (65536, 512), "t32x2r2"),
    ("layer_norm_backward", (65536, 512), "t32x2"),
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
