"""Host tests of the embedding family (no GPU): select() refusals naming the operand, the SKUs,
descriptor identity, the registry entry, the functional argument rules and the torch ops."""
import pytest

bc = pytest.importorskip("baracuda")
from baracuda import errors  # noqa: E402

S = bc.TensorSpec


def D(V=100, dim=32, idx=(4, 7), dtype=bc.float32, idtype=bc.int64, rows=None, wstrides=None, backward=False, **kw):
    rows = rows if rows is not None else S(tuple(idx) + (dim,), dtype)
    return bc.EmbeddingDescriptor(S((V, dim), dtype, wstrides), S(tuple(idx), idtype), rows, backward=backward, **kw)


REFUSALS = [
    ("rank", lambda: bc.EmbeddingDescriptor(S((100,), bc.float32), S((4,), bc.int64), S((4, 1), bc.float32)),
     errors.InvalidArgument, ["weight has shape (100,)", "[num_embeddings, embedding_dim]"]),
    ("dtype", lambda: D(dtype=bc.int32), errors.InvalidDType, ["weight is int32"]),
    ("indices-dtype", lambda: D(idtype=bc.float32), errors.InvalidDType, ["indices is float32", "int32 or int64"]),
    ("rows-shape", lambda: D(rows=S((4, 8, 32), bc.float32)), errors.InvalidArgument,
     ["out has shape (4, 8, 32)", "indices.shape + [32]"]),
    ("rows-dtype", lambda: D(rows=S((4, 7, 32), bc.float16)), errors.InvalidDType, ["out is float16 but weight is"]),
    ("grad-shape", lambda: D(rows=S((4, 8, 32), bc.float32), backward=True), errors.InvalidArgument,
     ["embedding_backward: grad_out has shape"]),
    ("stride", lambda: D(wstrides=(1, 100)), errors.Unsupported, ["contiguous along embedding_dim"]),
    ("padding", lambda: D(padding_idx=100), errors.InvalidArgument, ["padding_idx=100", "[0, 100)"]),
    ("rank9", lambda: D(idx=(1,) * 9), errors.Unsupported, ["9 dims"]),
    ("overlap", lambda: D(wstrides=(0, 1), backward=True), errors.InvalidArgument, ["share memory"]),
    ("atomic-scale", lambda: D(backward=True, deterministic=False, scale_grad_by_freq=True), errors.Unsupported,
     ["scale_grad_by_freq", "deterministic=True"]),
]


@pytest.mark.parametrize("name,make,exc,needles", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_name_the_operand(name, make, exc, needles):
    with pytest.raises(errors.BaracudaError) as info:
        bc.EmbeddingPlan.select(make())
    assert type(info.value) is exc, f"expected {exc.__name__}, got {type(info.value).__name__}: {info.value}"
    for n in needles:
        assert n in str(info.value), f"{n!r} not in {str(info.value)!r}"


def test_skus_descriptors_registry():
    f = bc.EmbeddingPlan.select(D())
    assert f.sku.name == "embedding.gather" and f.workspace_bytes() == 0
    b = bc.EmbeddingPlan.select(D(backward=True, padding_idx=3))
    assert b.sku.name == "embedding.backward.sorted_c64" and b.sku.precision.deterministic
    assert b.workspace_bytes() >= 4 * 4 * 28  # the sort buffers at least
    big = bc.EmbeddingPlan.select(D(idx=(300000,), backward=True))
    assert big.sku.name == "embedding.backward.sorted_c256"  # chunks grow to bound the partial sums
    a = bc.EmbeddingPlan.select(D(backward=True, deterministic=False))
    assert a.sku.name == "embedding.backward.atomic" and a.workspace_bytes() == 0
    assert not a.sku.precision.deterministic
    assert D(padding_idx=2) == D(padding_idx=2) and hash(D()) == hash(D()) and D() != D(backward=True)
    assert "padding_idx=2" in repr(D(padding_idx=2)) and "atomic" in repr(D(backward=True, deterministic=False))
    fam = {f["name"]: f for f in bc.families()}["embedding"]
    assert fam["plan"] == "EmbeddingPlan"


def test_functional_argument_rules():
    with pytest.raises(errors.InvalidArgument, match="not an array-like tensor"):
        bc.embedding([1, 2], [[1.0]])
    torch = pytest.importorskip("torch")
    w, idx = torch.zeros(10, 4), torch.zeros(3, dtype=torch.long)
    with pytest.raises(errors.Unsupported, match="max_norm"):
        bc.embedding(idx, w, max_norm=1.0)
    with pytest.raises(errors.Unsupported, match="sparse"):
        bc.embedding(idx, w, sparse=True)
    with pytest.raises(errors.InvalidArgument, match="padding_idx=-11"):
        bc.embedding(idx, w, padding_idx=-11)
    with pytest.raises(errors.InvalidArgument, match=r"\[num_embeddings, embedding_dim\]"):
        bc.embedding(idx, torch.zeros(10))
    import baracuda.torch as bt
    assert {"embedding", "embedding_backward"} <= set(bt.OPS)
    assert hasattr(torch.ops.baracuda, "embedding_backward")
    m = bt.Embedding(10, 4, padding_idx=-1)
    assert m.padding_idx == 9 and isinstance(m, torch.nn.Embedding)
