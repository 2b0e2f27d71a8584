"""Host tests of the sampling family (no GPU): select() refusals naming the parameter, the SKU,
descriptor identity, the registry entry, the functional argument rules and the torch op."""
import pytest

bc = pytest.importorskip("baracuda")
from baracuda import errors  # noqa: E402

S = bc.TensorSpec


def D(shape=(4, 1000), dtype=bc.float32, strides=None, **kw):
    return bc.SamplingDescriptor(S(shape, dtype, strides), **kw)


REFUSALS = [
    ("rank", lambda: D(shape=(1000,)), errors.InvalidArgument, ["logits has shape", "[batch, vocab]"]),
    ("dtype", lambda: D(dtype=bc.int32), errors.InvalidDType, ["logits is int32"]),
    ("empty-vocab", lambda: D(shape=(4, 0)), errors.InvalidArgument, ["empty vocabulary"]),
    ("vocab-stride", lambda: D(strides=(2000, 2)), errors.Unsupported, ["contiguous along the vocabulary"]),
    ("tokens", lambda: D(token_dtype=bc.float32), errors.InvalidDType, ["tokens must be int64 or int32"]),
    ("temperature", lambda: D(temperature=-0.5), errors.InvalidArgument, ["temperature=-0.5"]),
    ("temperature-nan", lambda: D(temperature=float("nan")), errors.InvalidArgument, ["temperature=nan"]),
    ("top_p", lambda: D(top_p=0.0), errors.InvalidArgument, ["top_p=0", "0 < top_p <= 1"]),
    ("min_p", lambda: D(min_p=1.5), errors.InvalidArgument, ["min_p=1.5"]),
    ("top_k", lambda: D(top_k=-2), errors.InvalidArgument, ["top_k=-2"]),
    ("top_k-dtype", lambda: D(top_k_per_row=True, top_k_dtype=bc.float32), errors.InvalidDType,
     ["per-row top_k must be int32 or int64"]),
]


@pytest.mark.parametrize("name,make,exc,needles", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_name_the_parameter(name, make, exc, needles):
    with pytest.raises(errors.BaracudaError) as info:
        bc.SamplingPlan.select(make())
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    for n in needles:
        assert n in str(info.value), f"{n!r} not in {str(info.value)!r}"


def test_sku_identity_and_registry():
    p = bc.SamplingPlan.select(D(top_k=50, top_p=0.9, logprobs=True))
    assert p.sku.name == "sampling.radix_select" and p.workspace_bytes() == 0
    # per-row values are not checked at select: the device clamps them
    assert bc.SamplingPlan.select(D(top_p=0.0, top_p_per_row=True)).descriptor.top_p == 0.0
    assert D(top_k=5) == D(top_k=5) and hash(D(top_k=5)) == hash(D(top_k=5)) and D(top_k=5) != D(top_k=6)
    assert D(top_k_per_row=True) != D() and "top_k=per_row" in repr(D(top_k_per_row=True))
    fam = {f["name"]: f for f in bc.families()}["sampling"]
    assert fam["plan"] == "SamplingPlan, PenaltiesPlan"


def test_functional_argument_rules():
    with pytest.raises(errors.InvalidArgument, match="not an array-like tensor"):
        bc.sample([1.0, 2.0])
    torch = pytest.importorskip("torch")
    with pytest.raises(errors.InvalidArgument, match=r"\[batch, vocab\]"):
        bc.sample(torch.zeros(10))
    with pytest.raises(errors.InvalidArgument, match="top_k='a'"):
        bc.sample(torch.zeros(2, 10), top_k="a")
    import baracuda.torch as bt
    assert "sample" in bt.OPS and hasattr(torch.ops.baracuda, "sample")


def PD(**kw):
    return bc.PenaltiesDescriptor(S((4, 1000), bc.float32), kw.pop("prompt", None), kw.pop("output", S((4, 7), bc.int64)),
                                  **kw)


def test_penalties_select():
    p = bc.PenaltiesPlan.select(PD(repetition=1.2, frequency=0.5))
    assert p.sku.name == "sampling.penalties.count_then_apply" and p.workspace_bytes() == 4 * 1000 * 4
    assert PD(presence=0.1) == PD(presence=0.1) and PD() != PD(repetition_per_row=True)
    assert "repetition=per_row" in repr(PD(repetition_per_row=True)) and "output=int64[7]" in repr(PD())
    with pytest.raises(errors.InvalidArgument, match="repetition_penalty=-1"):
        bc.PenaltiesPlan.select(PD(repetition=-1.0))
    with pytest.raises(errors.InvalidArgument, match="frequency_penalty=inf"):
        bc.PenaltiesPlan.select(PD(frequency=float("inf")))
    with pytest.raises(errors.InvalidDType, match="prompt_tokens is float32"):
        bc.PenaltiesPlan.select(PD(prompt=S((4, 3), bc.float32)))
    with pytest.raises(errors.InvalidDType, match="logits is int32"):
        bc.PenaltiesPlan.select(bc.PenaltiesDescriptor(S((4, 1000), bc.int32)))
    assert bc.PenaltiesPlan.select(bc.PenaltiesDescriptor(S((4, 1000), bc.float32))).workspace_bytes() == 0


def test_seed_dtypes():
    assert D(seeds_per_row=True, seeds_dtype=bc.int32) != D(seeds_per_row=True)
    assert "seeds=per_row(int32)" in repr(D(seeds_per_row=True, seeds_dtype=bc.int32))
    with pytest.raises(errors.InvalidDType, match="per-row seeds must be int64 or int32"):
        bc.SamplingPlan.select(D(seeds_per_row=True, seeds_dtype=bc.float32))
