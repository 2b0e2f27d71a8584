"""Host tests of the tuning overrides (no GPU): PlanPreference(tuning="key=value,...") reaches each
family's select(), unknown keys and missing values are refused by name (from the preference and from
the family's debug environment variable alike), and a valid override changes what the SKU reports."""
import pytest

bc = pytest.importorskip("baracuda")
from baracuda import errors  # noqa: E402

S = bc.TensorSpec
bf16, f32 = bc.bfloat16, bc.float32


def softmax(pref=None):
    return bc.SoftmaxPlan.select(bc.SoftmaxDescriptor("softmax", [S((4096, 4096), bf16)], -1, S((4096, 4096), bf16)),
                                 pref)


SELECTS = {
    "softmax": softmax,
    "reduction": lambda pref: bc.ReductionPlan.select(
        bc.ReductionDescriptor("sum", S((1024, 4096), f32), S((1024,), f32), [1]), pref),
    "scan": lambda pref: bc.ScanPlan.select(
        bc.ScanDescriptor("cumsum", [S((64, 4096), f32)], [S((64, 4096), f32)], -1), pref),
    "norm": lambda pref: bc.NormPlan.select(bc.NormDescriptor("rms_norm", S((64, 4096), bf16), bf16), pref),
    "cross_entropy": lambda pref: bc.LossPlan.select(
        bc.CrossEntropyLossDescriptor("cross_entropy", S((64, 32000), bf16), S((64,), bc.int64)), pref),
    "matmul": lambda pref: bc.GemmPlan.select(
        bc.GemmDescriptor(S((4, 4096), bf16), S((4096, 4096), bf16, (1, 4096)), S((4, 4096), bf16)), pref),
}
ENV = {"softmax": "BARACUDA_SOFTMAX_CFG", "reduction": "BARACUDA_REDUCTION_CFG", "scan": "BARACUDA_SCAN_CFG",
       "norm": "BARACUDA_NORM_CFG", "cross_entropy": "BARACUDA_CE_CFG", "matmul": "BARACUDA_GEMM_CFG"}


@pytest.mark.parametrize("family", sorted(SELECTS))
def test_unknown_key_refused_by_name(family, monkeypatch):
    with pytest.raises(errors.InvalidArgument) as info:
        SELECTS[family](bc.PlanPreference(tuning="bogus=1"))
    msg = str(info.value)
    assert "tuning item 'bogus=1'" in msg and "PlanPreference.tuning" in msg and "expected key=value" in msg
    # the debug variable is checked the same way, and only when the preference has no tuning
    monkeypatch.setenv(ENV[family], "bogus=2")
    with pytest.raises(errors.InvalidArgument, match=f"'bogus=2' in the environment variable {ENV[family]}"):
        SELECTS[family](None)


def test_missing_value_refused():
    with pytest.raises(errors.InvalidArgument, match="'exact' in PlanPreference.tuning has no value"):
        softmax(bc.PlanPreference(tuning="exact"))


def test_preference_wins_over_the_variable(monkeypatch):
    monkeypatch.setenv("BARACUDA_SOFTMAX_CFG", "bogus=2")
    softmax(bc.PlanPreference(tuning="exact=1"))  # the variable is not read: no error


def test_preference_carries_tuning():
    p = bc.PlanPreference(tuning="kw=4,rn=2", workspace_limit=64)
    assert p.tuning == "kw=4,rn=2" and p.workspace_limit == 64
    assert bc.PlanPreference().tuning == ""


def test_override_changes_the_sku():
    d = bc.NormDescriptor("rms_norm", S((64, 4096), bf16), bf16)
    assert bc.NormPlan.select(d).sku.name == "norm.rms_norm.row_registers.t256x2"
    assert bc.NormPlan.select(d, bc.PlanPreference(tuning="tpr=128,items=4")).sku.name == \
        "norm.rms_norm.row_registers.t128x4"
    assert bc.NormPlan.select(d, bc.PlanPreference(tuning="rows=2")).sku.name.endswith("r2")
