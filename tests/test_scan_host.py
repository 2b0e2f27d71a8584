"""Host tests of the scan family (no GPU): select-time validation with messages that name the
argument, the kernel a plan picks (rows / columns, group, vector width, split), the workspace,
the tuning knob, descriptor identity, the op table and the functional API's surface."""
import pytest

import baracuda as bc
from baracuda import errors

S = bc.TensorSpec
D = bc.ScanDescriptor
P = bc.ScanPlan
f16, bf16, f32, f64 = bc.float16, bc.bfloat16, bc.float32, bc.float64
i8, i32, i64, BOOL = bc.int8, bc.int32, bc.int64, bc.DType.bool
OPS = {row["name"]: row for row in bc.scan_ops()}


def select(op, ins, outs, axis=-1, pref=None):
    return P.select(D(op, ins, outs, axis), pref)


def refused(exc, fn, *needles):
    with pytest.raises(errors.BaracudaError) as info:
        fn()
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    for n in needles:
        assert n in str(info.value), f"{n!r} not in {str(info.value)!r}"
    return str(info.value)


# ---- refusals ------------------------------------------------------------------------------------

def test_axis_out_of_range():
    x = S((4, 8), f32)
    refused(errors.InvalidArgument, lambda: select("cumsum", [x], [x], 2), "cumsum:", "axis 2", "rank 2")
    refused(errors.InvalidArgument, lambda: select("cumsum", [x], [x], -3), "axis -3", "[-2, 1]")
    assert select("cumsum", [S((), f32)], [S((), f32)], 0).sku.op == "cumsum"
    refused(errors.InvalidArgument, lambda: select("cumsum", [S((), f32)], [S((), f32)], 1), "axis 1")


def test_wrong_counts_shapes_and_dtypes():
    x = S((4, 8), f32)
    refused(errors.InvalidArgument, lambda: select("cummax", [x], [x]), "cummax:", "outputs", "values, indices")
    refused(errors.InvalidArgument, lambda: select("cumprod_backward", [x], [x]), "inputs", "grad_out, x, y")
    refused(errors.InvalidArgument, lambda: select("cumsum", [x], [S((8, 4), f32)]), "out", "(4, 8)", "(8, 4)")
    refused(errors.InvalidDType, lambda: select("cumsum", [x], [S((4, 8), f16)]), "out", "float16")
    refused(errors.InvalidDType, lambda: select("cumsum", [S((4, 8), i32)], [S((4, 8), i32)]), "out", "int64")
    refused(errors.InvalidDType, lambda: select("cummax", [x], [x, S((4, 8), i32)]), "indices", "int64")
    refused(errors.InvalidDType, lambda: select("logcumsumexp", [S((4, 8), i32)], [S((4, 8), i32)]), "x", "int32")
    refused(errors.InvalidDType,
            lambda: select("cumprod_backward", [x, S((4, 8), f64), x], [x]), "x", "float64", "grad_out")
    refused(errors.InvalidArgument,
            lambda: select("logcumsumexp_backward", [x, x, S((4, 9), f32)], [x]), "y", "(4, 8)")
    refused(errors.InvalidArgument, lambda: select("nope", [x], [x]), "unknown op")
    # accepted output dtypes
    assert select("cumsum", [S((4, 8), bf16)], [S((4, 8), f32)]).sku.dtypes[0] == f32
    assert select("cumsum", [S((4, 8), BOOL)], [S((4, 8), i64)]).sku.precision.math.startswith("exact")


def test_overlapping_out_refused():
    x = S((4, 8), f32)
    refused(errors.InvalidArgument, lambda: select("cumsum", [x], [S((4, 8), f32, [0, 1])]), "out", "overlapping")


def test_forbidding_bespoke_is_unsupported():
    x = S((4, 8), f32)
    pref = bc.PlanPreference(forbid=[bc.Backend.bespoke])
    refused(errors.Unsupported, lambda: select("cumsum", [x], [x], pref=pref), "bespoke")


# ---- kernel choice -------------------------------------------------------------------------------

def test_rows_group_by_length():
    def sku(shape):
        x = S(shape, bf16)
        return select("cumsum", [x], [x]).sku

    assert sku((1 << 20, 32)).name == "scan.rows.g4.v8"     # 4 vectors: 8 rows per warp
    assert sku((1 << 20, 64)).name == "scan.rows.g4.v8"     # 8 vectors: still 4 lanes (swept on H200)
    assert sku((1 << 20, 72)).name == "scan.rows.g16.v8"    # 9 vectors
    assert sku((1 << 20, 128)).name == "scan.rows.g16.v8"
    assert sku((8192, 4096)).name == "scan.rows.g32.v8.p"   # a warp per row, no split (8192 rows)
    assert sku((100, 67)).name == "scan.rows.g32.v1.p"      # odd row stride: scalar loads
    assert "16-byte" in sku((8192, 4096)).precision.math


def test_long_rows_split_with_workspace():
    x = S((4, 1 << 24), bf16)
    plan = select("cumsum", [x], [x])
    assert plan.sku.layout == "rows" and plan.sku.name.endswith(".split")
    assert plan.workspace_bytes() > 0 and "segments" in plan.sku.precision.math
    one = select("cumsum", [x], [x], pref=bc.PlanPreference(workspace_limit=0))
    assert one.workspace_bytes() == 0 and "split" not in one.sku.name
    small = select("cumsum", [x], [x], pref=bc.PlanPreference(workspace_limit=4096))
    assert small.workspace_bytes() <= 4096


def test_other_axes_pick_columns():
    x = S((4096, 4096), bf16)
    plan = select("cumsum", [x], [x], 0)
    assert plan.sku.layout == "columns" and plan.sku.name.startswith("scan.columns.v8")
    assert "split" in plan.sku.name and plan.workspace_bytes() > 0  # 512 column groups: split the axis
    wide = select("cumsum", [S((64, 1 << 20), f32)], [S((64, 1 << 20), f32)], 0)
    assert wide.sku.name == "scan.columns.v4" and wide.workspace_bytes() == 0
    mid = select("cummax", [S((5, 7, 9), f32)], [S((5, 7, 9), f32), S((5, 7, 9), i64)], 1)
    assert mid.sku.layout == "columns" and ".v1" in mid.sku.name


def test_transposed_input_is_columns_and_contiguous_view_is_rows():
    t = S((64, 32), f32, [1, 64])  # a transposed view; scan along its last dim
    assert select("cumsum", [t], [S((64, 32), f32)], -1).sku.layout == "columns"
    assert select("cumsum", [t], [S((64, 32), f32, [1, 64])], 0).sku.layout == "rows"


def test_backward_and_ext_vector_paths():
    x = S((64, 4096), f32)
    # cummax / cummin: 16-byte vectors of values, indices stored two int64 per 16 bytes
    assert select("cummax", [x], [x, S((64, 4096), i64)]).sku.name == "scan.rows.g32.v4.p"
    xo = S((64, 4095), f32)  # odd row stride: scalar
    assert select("cummin", [xo], [xo, S((64, 4095), i64)]).sku.name == "scan.rows.g32.v1.p"
    bw = select("cumsum_backward", [x], [x])
    assert ".v4" in bw.sku.name  # reverse scans vectorise when the row length is a multiple of 4
    odd = S((64, 4095), f32)
    assert ".v1" in select("cumsum_backward", [odd], [odd]).sku.name
    assert select("cumprod_backward", [x, x, x], [x]).num_inputs == 3


def test_knobs(monkeypatch):
    x = S((4, 1 << 24), bf16)
    monkeypatch.setenv("BARACUDA_SCAN_CFG", "split=0")
    assert select("cumsum", [x], [x]).workspace_bytes() == 0
    monkeypatch.setenv("BARACUDA_SCAN_CFG", "vec=0,group=16")
    assert select("cumsum", [S((64, 4096), bf16)], [S((64, 4096), bf16)]).sku.name == "scan.rows.g16.v1"
    for bad in ("64", "-4") + (() if bc.features()["sweep_kernels"] else ("8",)):  # 8 lanes: sweep builds only
        monkeypatch.setenv("BARACUDA_SCAN_CFG", "group=" + bad)
        with pytest.raises(errors.InvalidArgument, match="group=" + bad):
            select("cumsum", [S((64, 4096), bf16)], [S((64, 4096), bf16)])
    monkeypatch.setenv("BARACUDA_SCAN_CFG", "pf=0")
    assert select("cumsum", [S((64, 4096), bf16)], [S((64, 4096), bf16)]).sku.name == "scan.rows.g32.v8"
    monkeypatch.setenv("BARACUDA_SCAN_CFG", "cvec=0")
    assert ".v1" in select("cumsum", [S((4096, 4096), bf16)], [S((4096, 4096), bf16)], 0).sku.name


def test_precision_and_determinism():
    pg = select("cumsum", [S((64, 64), bf16)], [S((64, 64), bf16)]).sku.precision
    assert pg.deterministic and pg.bit_stable and pg.accumulator_dtype == f32
    assert "prefix sum of |x|" in pg.math
    pg64 = select("cumsum", [S((64, 64), f64)], [S((64, 64), f64)]).sku.precision
    assert pg64.accumulator_dtype == f64
    pe = select("cummin", [S((64, 64), f32)], [S((64, 64), f32), S((64, 64), i64)]).sku.precision
    assert pe.math.startswith("exact")


def test_descriptor_identity():
    a = D("cumsum", [S((4, 8), f32)], [S((4, 8), f32)], 1)
    b = D("cumsum", [S((4, 8), f32)], [S((4, 8), f32)], 1)
    c = D("cumsum", [S((4, 8), f32)], [S((4, 8), f32)], 0)
    assert a == b and hash(a) == hash(b) and a != c
    assert "cumsum" in repr(a) and "axis=1" in repr(a)


def test_empty_needs_no_workspace():
    x = S((0, 1 << 24), f32)
    assert select("cumsum", [x], [x]).workspace_bytes() == 0


# ---- tables and functional surface ---------------------------------------------------------------

def test_op_table():
    assert set(OPS) == {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "cumsum_backward",
                        "cumprod_backward", "logcumsumexp_backward"}
    assert OPS["cummax"]["outputs"] == ["values", "indices"]
    assert OPS["cumprod_backward"]["inputs"] == ["grad_out", "x", "y"]
    assert OPS["cumsum"]["backward"] == "cumsum_backward"
    fam = [f for f in bc.families() if f["name"] == "scan"]
    assert len(fam) == 1 and fam[0]["plan"] == "ScanPlan"
    assert {o["op"] for o in fam[0]["ops"]} == {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"}


def test_functional_surface():
    for name in OPS:
        fn = getattr(bc, name)
        assert fn.__name__ == name and OPS[name]["doc"] in fn.__doc__
    with pytest.raises(errors.InvalidArgument, match="CUDA tensor"):
        bc.cumsum([1, 2, 3], 0)


def test_logical_sizes_past_int64_are_refused():
    huge = S((1 << 40, 1 << 40), f32, [0, 0])
    refused(errors.Unsupported, lambda: select("cumsum", [huge], [S((1 << 40, 1 << 40), f32)], 1),
            "more than 2^63 - 1 elements")
