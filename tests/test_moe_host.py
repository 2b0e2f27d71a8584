"""Host tests of the MoE routing family (no GPU): select() refusals naming the argument, SKUs,
descriptor identity, the registry, the functional argument rules and the torch ops."""
import pytest

bc = pytest.importorskip("baracuda")
from baracuda import errors  # noqa: E402

S = bc.TensorSpec


def G(T=16, E=64, k=2, dtype=bc.float32, **kw):
    return bc.MoeGateDescriptor(S((T, E), dtype), k, **kw)


def P(op="permute", rows=(16, 128), routing=(16, 2), rdt=bc.float32, idt=bc.int32, **kw):
    return bc.MoePermuteDescriptor(op, S(rows, rdt), S(routing, idt), **kw)


REFUSALS = [
    ("gate-rank", lambda: bc.MoeGateDescriptor(S((16,), bc.float32), 2), bc.MoeGatePlan, errors.InvalidArgument,
     ["logits has shape (16,)", "[tokens, experts]"]),
    ("gate-dtype", lambda: G(dtype=bc.int32), bc.MoeGatePlan, errors.InvalidDType, ["logits is int32"]),
    ("gate-experts", lambda: G(E=2048), bc.MoeGatePlan, errors.Unsupported, ["2048 experts"]),
    ("gate-topk", lambda: G(E=8, k=9), bc.MoeGatePlan, errors.InvalidArgument, ["top_k=9", "min(experts, 32) = 8"]),
    ("gate-scoring", lambda: G(scoring="relu"), bc.MoeGatePlan, errors.InvalidArgument, ["scoring='relu'"]),
    ("gate-group", lambda: G(n_group=5), bc.MoeGatePlan, errors.InvalidArgument, ["n_group=5", "divisor"]),
    ("gate-topk-group", lambda: G(n_group=8, topk_group=9), bc.MoeGatePlan, errors.InvalidArgument, ["topk_group=9"]),
    ("gate-group-experts", lambda: G(k=20, n_group=8, topk_group=2), bc.MoeGatePlan, errors.InvalidArgument,
     ["top_k=20 exceeds", "(16)"]),
    ("gate-top2", lambda: G(E=8, n_group=8, topk_group=2, group_score="top2_sum"), bc.MoeGatePlan,
     errors.InvalidArgument, ["at least 2 experts per group"]),
    ("gate-scale", lambda: G(routed_scaling_factor=float("inf")), bc.MoeGatePlan, errors.InvalidArgument,
     ["routed_scaling_factor=inf"]),
    ("permute-op", lambda: P(op="shuffle"), bc.MoePermutePlan, errors.InvalidArgument, ["op='shuffle'"]),
    ("permute-ids", lambda: P(idt=bc.float32, num_experts=8), bc.MoePermutePlan, errors.InvalidDType,
     ["ids is float32"]),
    ("permute-rows", lambda: P(rows=(15, 128), num_experts=8), bc.MoePermutePlan, errors.InvalidArgument,
     ["x has 15 rows but ids has 16 tokens"]),
    ("permute-experts", lambda: P(num_experts=0), bc.MoePermutePlan, errors.InvalidArgument, ["num_experts=0"]),
    ("permute-x-dtype", lambda: P(rdt=bc.int8, num_experts=8), bc.MoePermutePlan, errors.InvalidDType, ["x is int8"]),
    ("unpermute-pos", lambda: P(op="unpermute", idt=bc.int64), bc.MoePermutePlan, errors.InvalidDType,
     ["pos is int64", "int32"]),
    ("stride", lambda: bc.MoePermuteDescriptor("permute", S((16, 128), bc.float32, (1, 16)), S((16, 2), bc.int32),
                                               num_experts=8), bc.MoePermutePlan, errors.Unsupported,
     ["x must be contiguous along its last dim"]),
]


@pytest.mark.parametrize("name,make,plan,exc,needles", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_name_the_argument(name, make, plan, exc, needles):
    with pytest.raises(errors.BaracudaError) as info:
        plan.select(make())
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    for n in needles:
        assert n in str(info.value), f"{n!r} not in {str(info.value)!r}"


def test_skus_descriptors_registry():
    assert bc.MoeGatePlan.select(G(E=8)).sku.name == "moe.gate.warp_e32"
    assert bc.MoeGatePlan.select(G(E=256, k=8, backward=True)).sku.name == "moe.gate_backward.warp_e256"
    p = bc.MoePermutePlan.select(P(num_experts=8))
    assert p.sku.name == "moe.permute.radix_sort" and p.workspace_bytes() >= 4 * 4 * 32
    u = bc.MoePermutePlan.select(P(op="unpermute", rows=(40, 128), weights=True))
    assert u.sku.name == "moe.unpermute.rows" and u.workspace_bytes() == 0
    assert G(n_group=8, topk_group=2) == G(n_group=8, topk_group=2) and G() != G(renormalize=False)
    assert hash(P(num_experts=8)) == hash(P(num_experts=8)) and "num_experts=8" in repr(P(num_experts=8))
    assert "scoring=sigmoid" in repr(G(scoring="sigmoid"))
    fam = {f["name"]: f for f in bc.families()}["moe"]
    assert {o["op"] for o in fam["ops"]} >= {"moe_gate", "moe_permute", "moe_unpermute"}


def test_functional_argument_rules():
    with pytest.raises(errors.InvalidArgument, match="not an array-like tensor"):
        bc.moe_gate([[1.0]], 1)
    torch = pytest.importorskip("torch")
    with pytest.raises(errors.InvalidArgument, match=r"\[tokens, experts\]"):
        bc.moe_gate(torch.zeros(8), 1)
    with pytest.raises(errors.InvalidArgument, match="top_k=0"):
        bc.moe_gate(torch.zeros(2, 8), 0)
    with pytest.raises(errors.InvalidArgument, match="without y_sorted"):
        bc.moe_unpermute_backward(torch.zeros(2, 8), torch.zeros(2, 1, dtype=torch.int32), torch.zeros(2, 1))
    import baracuda.torch as bt
    assert {"moe_gate", "moe_gate_backward", "moe_permute", "moe_unpermute", "moe_unpermute_backward"} <= set(bt.OPS)
