"""GPU correctness of the embedding family: the forward is torch's gather bit for bit (any index
shape / strides, strided tables, odd and large D, NaN rows for out-of-range indices); the backward
matches a float64 index_add (padding_idx, scale_grad_by_freq, hot indices whose runs cross many
chunks, out-of-range indices), writes every row, and gives the same bits run after run; the
atomic option; autograd, nn.Embedding drop-in, torch.compile; errors."""
import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")

errors = bc.errors
DEV = "cuda"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def gen(seed):
    return torch.Generator(device=DEV).manual_seed(seed)


def ref_grad(grad_out, indices, V, padding_idx=None, scale=False):
    """float64 reference of the table gradient."""
    D = grad_out.shape[-1]
    idx = indices.reshape(-1).long()
    g = grad_out.reshape(-1, D).double()
    keep = (idx >= 0) & (idx < V)
    if padding_idx is not None:
        keep &= idx != padding_idx
    idx, g = idx[keep], g[keep]
    out = torch.zeros(V, D, dtype=torch.float64, device=DEV).index_add_(0, idx, g)
    if scale:
        cnt = torch.bincount(idx, minlength=V).double().clamp_min(1)
        out /= cnt[:, None]
    return out


def tol(dt, count=1):
    base = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 8e-3, torch.float16: 1e-3}[dt]
    return dict(rtol=base, atol=base * max(1.0, count ** 0.5))


# ---- forward ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("idt", [torch.int64, torch.int32])
@pytest.mark.parametrize("V,D,shape", [(1000, 64, (4, 33)), (50, 3, (7,)), (32000, 4096, (2, 17)), (9, 127, (2, 3, 5)),
                                       (5, 8, ()), (100, 16, (0, 4))])
def test_forward_is_torch_gather(dt, idt, V, D, shape):
    g = gen(1)
    w = torch.randn(V, D, generator=g, device=DEV).to(dt)
    idx = torch.randint(0, V, shape, generator=g, device=DEV).to(idt)
    out = torch.full(tuple(shape) + (D,), 7.0, device=DEV, dtype=dt)  # poison: every row must be written
    got = bc.embedding(idx, w, out=out)
    assert got is out
    assert torch.equal(out, torch.nn.functional.embedding(idx.long(), w))
    assert torch.equal(bc.embedding(idx, w), out)


def test_forward_strided_operands():
    g = gen(2)
    big = torch.randn(300, 200, generator=g, device=DEV)
    w = big[:, 8:72]  # row stride 200
    idx = torch.randint(0, 300, (40, 30), generator=g, device=DEV)
    for ix in (idx.t(), idx[::3, 1::2], idx[:, :1].expand(40, 5)):
        ref = torch.nn.functional.embedding(ix, w)
        assert torch.equal(bc.embedding(ix, w), ref)
    out = torch.zeros(30, 40, 2, 64, device=DEV)[:, :, 1]  # a strided out
    bc.embedding(idx.t(), w, out=out)
    assert torch.equal(out, torch.nn.functional.embedding(idx.t(), w))
    odd = torch.randn(10, 65, generator=g, device=DEV)[:, 1:]  # rows 4-byte aligned only
    assert torch.equal(bc.embedding(idx[:3] % 10, odd), torch.nn.functional.embedding(idx[:3] % 10, odd))


def test_forward_out_of_range_is_nan_and_check_indices_names_it():
    w = torch.randn(10, 16, device=DEV)
    idx = torch.tensor([[1, 10], [-1, 3]], device=DEV)
    y = bc.embedding(idx, w)
    assert torch.isnan(y[0, 1]).all() and torch.isnan(y[1, 0]).all()
    assert torch.equal(y[0, 0], w[1]) and torch.equal(y[1, 1], w[3])
    with pytest.raises(errors.InvalidArgument, match=r"indices\[0, 1\] = 10 is outside \[0, 10\)"):
        bc.embedding(idx, w, check_indices=True)
    bc.embedding(idx.clamp(0, 9), w, check_indices=True)


def test_forward_padding_idx_reads_the_row():
    w = torch.randn(10, 16, device=DEV)
    idx = torch.tensor([0, 3, 9], device=DEV)
    assert torch.equal(bc.embedding(idx, w, padding_idx=-1), torch.nn.functional.embedding(idx, w, padding_idx=-1))


# ---- backward --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("case", ["uniform", "hot", "one", "padding", "scale", "oob"])
def test_backward_matches_float64(dt, case):
    g = gen(3)
    V, D, n = (500, 96, 6000) if case != "one" else (7, 40, 3000)
    idx = torch.randint(0, V, (n,), generator=g, device=DEV)
    pad, scale = None, False
    if case == "hot":  # runs that cross many chunks, and chunks that close one run and open another
        idx[torch.rand(n, generator=g, device=DEV) < 0.5] = 17
        idx[: n // 3] = torch.where(idx[: n // 3] % 2 == 0, 3, idx[: n // 3])
    if case == "one":
        idx[:] = 5
    if case == "padding":
        pad = 4
        idx[::3] = 4
    if case == "scale":
        scale = True
        idx[: n // 2] = idx[: n // 2] % 7
    if case == "oob":
        idx[::5] = V + 3
        idx[1::7] = -2
    go = torch.randn(n, D, generator=g, device=DEV).to(dt)
    out = torch.full((V, D), float("nan"), device=DEV, dtype=dt)  # poison: every row is written
    got = bc.embedding_backward(go, idx, V, pad, scale, out=out)
    assert got is out
    ref = ref_grad(go, idx, V, pad, scale)
    count = int(torch.bincount(idx.clamp(0, V - 1)).max())
    torch.testing.assert_close(out.double(), ref, **tol(dt, count))
    if pad is not None:
        assert (out[pad] == 0).all()


@pytest.mark.parametrize("shape,D", [((4, 300), 4096), ((2, 3, 5), 7), ((), 64), ((0,), 16), ((70000,), 8)])
def test_backward_shapes(shape, D):
    g = gen(4)
    V = 1000
    idx = torch.randint(0, V, shape, generator=g, device=DEV)
    go = torch.randn(tuple(shape) + (D,), generator=g, device=DEV, dtype=torch.bfloat16)
    got = bc.embedding_backward(go, idx, V)
    torch.testing.assert_close(got.double(), ref_grad(go, idx, V), **tol(torch.bfloat16, 100))


def test_backward_strided_operands():
    g = gen(5)
    idx = torch.randint(0, 50, (64, 20), generator=g, device=DEV)
    go = torch.randn(20, 64, 3, 32, generator=g, device=DEV)[:, :, 1].transpose(0, 1)  # [64, 20, 32] strided
    out = torch.zeros(50, 2, 32, device=DEV)[:, 0]  # row stride 64
    bc.embedding_backward(go, idx, 50, out=out)
    torch.testing.assert_close(out.double(), ref_grad(go, idx, 50), **tol(torch.float32, 64))
    got = bc.embedding_backward(go[::2], idx.t().t()[::2], 50)
    torch.testing.assert_close(got.double(), ref_grad(go[::2], idx[::2], 50), **tol(torch.float32, 64))


def test_backward_same_bits_every_run():
    g = gen(6)
    idx = torch.randint(0, 300, (20000,), generator=g, device=DEV)
    idx[::2] = 11
    go = torch.randn(20000, 256, generator=g, device=DEV)
    first = bc.embedding_backward(go, idx, 300)
    for _ in range(3):
        assert torch.equal(bc.embedding_backward(go, idx, 300), first)


@pytest.mark.parametrize("dt", DTYPES)
def test_backward_atomic(dt):
    g = gen(7)
    idx = torch.randint(0, 400, (3000,), generator=g, device=DEV)
    go = torch.randn(3000, 64, generator=g, device=DEV).to(dt)
    got = bc.embedding_backward(go, idx, 400, 3, deterministic=False)
    ref = ref_grad(go, idx, 400, 3)
    if dt in (torch.float32, torch.float64):
        torch.testing.assert_close(got.double(), ref, **tol(dt, 30))
    else:  # atomics in the table's dtype: each of a row's n adds rounds once, at most eps * sum |terms|
        eps = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}[dt]
        n = torch.bincount(idx, minlength=400).double()[:, None]
        bound = (n + 1) * eps * ref_grad(go.abs(), idx, 400, 3) + 1e-6
        assert ((got.double() - ref).abs() <= bound).all()
    with pytest.raises(errors.Unsupported, match="scale_grad_by_freq"):
        bc.embedding_backward(go, idx, 400, None, True, deterministic=False)


# ---- frameworks ------------------------------------------------------------------------------------

def test_autograd_and_routing():
    g = gen(8)
    w = torch.randn(100, 32, generator=g, device=DEV, requires_grad=True)
    idx = torch.randint(0, 100, (8, 9), generator=g, device=DEV)
    y = bc.embedding(idx, w, padding_idx=2)  # routed through torch.ops.baracuda.embedding
    assert y.grad_fn is not None
    gy = torch.randn_like(y)
    y.backward(gy)
    torch.testing.assert_close(w.grad.double(), ref_grad(gy, idx, 100, 2), **tol(torch.float32, 10))


def test_module_is_a_drop_in():
    import baracuda.torch as bt
    torch.manual_seed(0)
    ref = torch.nn.Embedding(64, 16, padding_idx=0).to(DEV)
    ours = bt.Embedding(64, 16, padding_idx=0).to(DEV)
    ours.load_state_dict(ref.state_dict())
    idx = torch.randint(0, 64, (5, 7), device=DEV)
    assert torch.equal(ours(idx), ref(idx))
    ours(idx).sum().backward()  # an expanded grad_out: made contiguous for the kernel
    ref(idx).sum().backward()
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad)
    with pytest.raises(errors.InvalidArgument, match="max_norm"):
        bt.Embedding(4, 4, max_norm=1.0)


def test_torch_compile_fullgraph():
    import baracuda.torch as bt
    w = torch.randn(50, 24, device=DEV, requires_grad=True)
    idx = torch.randint(0, 50, (4, 6), device=DEV)

    def f(w, idx):
        return (bt.embedding(idx, w) * 2).sum()

    torch.compile(f, fullgraph=True)(w, idx).backward()
    assert torch.equal(w.grad, 2 * ref_grad(torch.ones(4, 6, 24, device=DEV), idx, 50).float())


def test_errors():
    w = torch.randn(10, 16, device=DEV)
    idx = torch.tensor([1, 2], device=DEV)
    with pytest.raises(errors.InvalidDType, match="indices is float32"):
        bc.embedding(idx.float(), w)
    with pytest.raises(errors.InvalidArgument, match="out has shape"):
        bc.embedding(idx, w, out=torch.empty(3, 16, device=DEV))
    with pytest.raises(errors.Unsupported, match="contiguous along embedding_dim"):
        bc.embedding(idx, w.t().contiguous().t())
    with pytest.raises(errors.InvalidArgument, match="padding_idx=10"):
        bc.embedding(idx, w, padding_idx=10)
    with pytest.raises(errors.InvalidArgument, match=r"grad_out has shape \(2, 16\); expected indices.shape \+ \[8\]"):
        bc.embedding_backward(torch.randn(2, 16, device=DEV), idx, 10, out=torch.empty(10, 8, device=DEV))
    with pytest.raises(errors.InvalidArgument, match="out .* overlaps|overlap"):
        bc.embedding(torch.tensor([0], device=DEV), w, out=w[:1])
    with pytest.raises(errors.InvalidArgument, match="indices: expected a CUDA tensor, got a CPU tensor"):
        bc.embedding(idx.cpu(), w)
    with pytest.raises(errors.InvalidDType, match="out is float16 but weight is float32"):
        bc.embedding(idx, w, out=torch.empty(2, 16, device=DEV, dtype=torch.float16))
    with pytest.raises(errors.InvalidDType, match="grad_out is float16 but grad_weight is float32"):
        bc.embedding_backward(torch.randn(2, 16, device=DEV).half(), idx, 10, out=torch.empty(10, 16, device=DEV))
