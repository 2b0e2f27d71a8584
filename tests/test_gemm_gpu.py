"""GPU correctness of the GEMM family.

Every dtype x storage order against torch.matmul in float64 on the upcast inputs, outputs
poisoned with NaN first; odd sizes, M / N / K of 1, leading dims of views, misaligned
pointers, batch strides (0 included), epilogues (bias, relu, gelu, gelu_tanh, silu, aux,
dgelu_tanh, bias gradients), Linear forward + backward against torch.autograd, fp8 with
scales and amax, int8 exact and dequantized, the decode-regime kernel (M <= 16), preferences,
bad input, empty problems, CuPy / JAX inputs and CUDA-graph capture.
"""
import math

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
errors = bc.errors
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]

DEV = "cuda"
# Relative error bound per element, against |a| @ |b| (the scale of the sum): the output
# rounding plus f32 accumulation over K terms.
EPS = {torch.float64: 1e-15, torch.float32: 1.2e-7, torch.float16: 9.8e-4, torch.bfloat16: 7.9e-3}


def gen(key):
    g = torch.Generator(device=DEV)
    g.manual_seed(abs(hash(key)) % (2**31))
    return g


def rand(shape, dt, g, scale=1.0):
    return (torch.randn(shape, device=DEV, dtype=torch.float32, generator=g) * scale).to(dt)


def poison(shape, dt):
    if dt.is_floating_point:
        return torch.full(shape, float("nan"), device=DEV, dtype=dt)
    return torch.full(shape, -12345, device=DEV, dtype=dt)


def check(got, a, b, *, out_dt=None, alpha=1.0, beta=0.0, c=None, bias=None, act=None, tf32=False, extra=4.0):
    """got vs act(alpha * a @ b + beta * c + bias) in float64, scaled by |a| @ |b|."""
    a64, b64 = a.double(), b.double()
    ref = alpha * (a64 @ b64)
    if c is not None:
        ref = ref + beta * c.double()
    if bias is not None:
        ref = ref + bias.double()
    if act is not None:
        ref = act(ref)
    scale = abs(alpha) * (a64.abs() @ b64.abs()) + (abs(beta) * c.double().abs() if c is not None else 0)
    if bias is not None:
        scale = scale + bias.double().abs()
    out_dt = out_dt or got.dtype
    k = a.shape[-1]
    in_eps = 4.9e-4 if tf32 else 0.0
    tol = extra * (EPS[out_dt] + EPS[torch.float32] * math.sqrt(max(k, 1)) + 2 * in_eps) * scale + 1e-30
    assert not torch.isnan(got).any(), "NaN in the output (an element was not written?)"
    err = (got.double() - ref).abs()
    bad = err > tol
    assert not bad.any(), f"max err {err.max().item():.3g}, max allowed {tol.max().item():.3g}, {bad.sum().item()} bad"


def layout(x, order):
    """x with the same values, stored row-major ('r') or column-major ('c')."""
    return x.contiguous() if order == "r" else x.mT.contiguous().mT


# ---- dtypes x storage orders x shapes ----------------------------------------------------------------

SHAPES = [(1, 1, 1), (7, 13, 5), (64, 48, 40), (129, 67, 256), (33, 1, 17), (1, 300, 64)]


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("oa,ob", [("r", "r"), ("r", "c"), ("c", "r"), ("c", "c")])
@pytest.mark.parametrize("mnk", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_dense_matches_float64(dt, oa, ob, mnk):
    m, n, k = mnk
    g = gen(f"dense/{dt}/{oa}{ob}/{mnk}")
    a = layout(rand((m, k), dt, g), oa)
    b = layout(rand((k, n), dt, g), ob)
    out = poison((m, n), dt)
    try:
        r = bc.matmul(a, b, out=out)
    except errors.Unsupported as e:  # allowed only for unaligned leading dims, and it must say so
        assert "multiples of 16" in str(e) and (k * a.element_size()) % 16, str(e)
        return
    assert r is out
    check(out, a, b)


@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=str)
def test_half_inputs_float32_out(dt):
    g = gen(f"f32out/{dt}")
    a, b = rand((65, 96), dt, g), rand((96, 80), dt, g)
    out = bc.matmul(a, b, out_dtype=bc.float32)
    assert out.dtype == torch.float32
    check(out, a, b)


def test_column_major_out_and_views_with_leading_dims():
    g = gen("views")
    big_a = rand((70, 100), torch.bfloat16, g)
    big_b = rand((90, 120), torch.bfloat16, g)
    a = big_a[3:53, 8:72]          # [50, 64], ld 100
    b = big_b[10:74, 16:96]        # [64, 80], ld 120
    out_store = poison((90, 60), torch.bfloat16)
    out = out_store[5:85, 2:52].mT  # [50, 80] column-major view with ld 90
    bc.matmul(a, b, out=out)
    check(out, a, b)
    assert torch.isnan(out_store[:5]).all() and torch.isnan(out_store[85:]).all(), "wrote outside the view"


def test_misaligned_pointers_pick_a_matching_algorithm():
    g = gen("misaligned")
    flat = rand((1 + 48 * 64,), torch.float16, g)
    a = flat[1:].view(48, 64)  # 2-byte aligned
    b = rand((64, 40), torch.float16, g)
    out_flat = poison((1 + 48 * 40,), torch.float16)
    out = out_flat[1:].view(48, 40)
    bc.matmul(a, b, out=out)
    check(out, a, b)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16], ids=str)
def test_alpha_beta_accumulate_into_out(dt):
    g = gen(f"alphabeta/{dt}")
    a, b = rand((40, 72), dt, g), rand((72, 24), dt, g)
    c = rand((40, 24), dt, g)
    out = c.clone()
    bc.matmul(a, b, out=out, alpha=0.5, beta=-1.5)
    check(out, a, b, alpha=0.5, beta=-1.5, c=c)


def test_tf32_only_when_allowed():
    g = gen("tf32")
    a, b = rand((256, 512), torch.float32, g), rand((512, 128), torch.float32, g)
    d = bc.GemmDescriptor(bc.TensorSpec((256, 512), bc.float32), bc.TensorSpec((512, 128), bc.float32),
                          bc.TensorSpec((256, 128), bc.float32))
    ieee = bc.GemmPlan.select(d)
    assert "IEEE" in ieee.sku.precision.math
    fast = bc.GemmPlan.select(d, bc.PlanPreference(allow_tf32=True))
    assert "tf32" in fast.sku.precision.math
    out = poison((256, 128), torch.float32)
    ws = torch.empty(max(1, fast.workspace_bytes()), dtype=torch.uint8, device=DEV)
    fast.run(out, a, b, workspace=ws)
    check(out, a, b, tf32=True)
    out2 = bc.matmul(a, b)
    check(out2, a, b)  # the functional default is IEEE: the tight bound holds


@pytest.mark.parametrize("oa,ob,oo", [("r", "r", "r"), ("r", "c", "r"), ("c", "r", "r"), ("c", "c", "r"),
                                      ("c", "r", "c"), ("r", "r", "c")])
def test_tf32_cublas_route(oa, ob, oo):
    """tf32 with nothing fused runs on cuBLAS (its selection reaches Hopper's tf32 kernels where
    cuBLASLt's heuristic offers none) except when both operands are K-major in cuBLASLt's formulation;
    prefer=[cublaslt] keeps it there. Batched with a broadcast b (stride 0), alpha / beta, odd sizes,
    a column-major out, both against the f64 reference; with and without a workspace; in a CUDA graph."""
    g = gen(f"tf32-route/{oa}{ob}{oo}")
    bsz, m, n, k = 3, 67, 45, 131
    a = layout(rand((bsz, m, k), torch.float32, g), oa)
    b = layout(rand((1, k, n), torch.float32, g), ob)
    c = layout(rand((bsz, m, n), torch.float32, g), oo)
    spec = lambda t: bc.TensorSpec(tuple(t.shape), bc.float32, tuple(t.stride()))  # noqa: E731
    d = bc.GemmDescriptor(spec(a), spec(b), spec(c), alpha=0.5, beta=-1.5)
    plan = bc.GemmPlan.select(d, bc.PlanPreference(allow_tf32=True))
    row_out = oo == "r"
    # cuBLASLt's A is b for a row-major out: both transposed means b and a column-major there.
    both_k_major = (ob == "c" and oa == "c") if row_out else (oa == "r" and ob == "r")
    want = bc.Backend.cublaslt if both_k_major else bc.Backend.cublas
    assert plan.sku.backend == want, plan.sku.name
    assert "tf32" in plan.sku.precision.math
    lt = bc.GemmPlan.select(d, bc.PlanPreference(allow_tf32=True, prefer=[bc.Backend.cublaslt]))
    assert lt.sku.backend == bc.Backend.cublaslt
    for p in (plan, lt):
        for ws in (torch.empty(max(1, p.workspace_bytes()), dtype=torch.uint8, device=DEV), None):
            out = c.clone()
            p.run(out, a, b, workspace=ws)
            check(out, a, b.expand(bsz, k, n), alpha=0.5, beta=-1.5, c=c, tf32=True)
    # captured and replayed: the workspace set on cuBLAS's handle is the one given at capture
    ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
    out = c.clone()
    s = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        plan.run(out, a, b, workspace=ws, stream=s.cuda_stream)  # warm-up outside the capture
        s.synchronize()
        out.copy_(c)
        with torch.cuda.graph(graph, stream=s):
            plan.run(out, a, b, workspace=ws, stream=s.cuda_stream)
    out.copy_(c)
    graph.replay()
    torch.cuda.synchronize()
    check(out, a, b.expand(bsz, k, n), alpha=0.5, beta=-1.5, c=c, tf32=True)
    with pytest.raises(errors.Unsupported, match="forbids"):
        bc.GemmPlan.select(d, bc.PlanPreference(allow_tf32=True, forbid=[bc.Backend.cublas, bc.Backend.cublaslt]))


def test_tf32_cublas_with_a_bias():
    """tf32 with a bias: cuBLAS's GEMM, then our pass adds the bias in place (broadcast over a batch of
    rows), alpha / beta applied first; against the f64 reference, and the functional bc.linear."""
    g = gen("tf32-bias")
    bsz, m, n, k = 2, 75, 40, 96
    a = rand((bsz, m, k), torch.float32, g)
    b = layout(rand((bsz, k, n), torch.float32, g), "c")
    bias = rand((n,), torch.float32, g)
    c = rand((bsz, m, n), torch.float32, g)
    spec = lambda t: bc.TensorSpec(tuple(t.shape), bc.float32, tuple(t.stride()))  # noqa: E731
    d = bc.GemmDescriptor(spec(a), spec(b), spec(c), alpha=2.0, beta=0.5, bias=bc.float32)
    plan = bc.GemmPlan.select(d, bc.PlanPreference(allow_tf32=True))
    assert plan.sku.name == "gemm.cublas.tf32+ew.bias"
    ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
    out = c.clone()
    plan.run(out, a, b, bias=bias, workspace=ws)
    check(out, a, b, alpha=2.0, beta=0.5, c=c, bias=bias, tf32=True)
    x, w = rand((33, k), torch.float32, g), rand((n, k), torch.float32, g)
    y = bc.linear(x, w, bias, allow_tf32=True)
    check(y, x, w.t(), bias=bias, tf32=True)



@pytest.mark.parametrize("act", ["relu", "gelu", "gelu_tanh", "silu"])
def test_tf32_cublas_with_an_activation(act):
    """tf32 with a bias and an activation: cuBLAS's GEMM writes the pre-activation (into aux when
    given), our passes add the bias and apply the activation; out and aux against the f64 reference."""
    F = torch.nn.functional
    refs = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"), "silu": F.silu}
    g = gen(f"tf32-act/{act}")
    m, n, k = 70, 48, 160
    a, b = rand((m, k), torch.float32, g), layout(rand((k, n), torch.float32, g), "c")
    bias = rand((n,), torch.float32, g)
    with_aux = act != "relu"
    spec = lambda t: bc.TensorSpec(tuple(t.shape), bc.float32, tuple(t.stride()))  # noqa: E731
    out = poison((m, n), torch.float32)
    aux = poison((m, n), torch.float32) if with_aux else None
    d = bc.GemmDescriptor(spec(a), spec(b), spec(out), epilogue=act, bias=bc.float32, aux=with_aux)
    plan = bc.GemmPlan.select(d, bc.PlanPreference(allow_tf32=True))
    assert plan.sku.name == f"gemm.cublas.tf32+ew.bias+ew.{act}", plan.sku.name
    ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
    plan.run(out, a, b, bias=bias, aux=aux, workspace=ws)
    check(out, a, b, bias=bias, act=refs[act], tf32=True, extra=8.0)
    if with_aux:
        check(aux, a, b, bias=bias, tf32=True)


# ---- batches ------------------------------------------------------------------------------------------

def test_strided_batch_and_broadcast():
    g = gen("batch")
    a = rand((2, 3, 17, 40), torch.bfloat16, g)
    b = rand((40, 24), torch.bfloat16, g)  # broadcast over the batch (stride 0)
    out = bc.matmul(a, b)
    assert tuple(out.shape) == (2, 3, 17, 24)
    check(out, a, b)
    b3 = rand((3, 40, 24), torch.float32, g)
    a3 = rand((1, 17, 40), torch.float32, g).expand(3, 17, 40)  # batch stride 0 from expand
    out3 = bc.matmul(a3, b3)
    check(out3, a3, b3)


def test_batch_dims_that_do_not_flatten_are_refused():
    g = gen("batch-bad")
    a = rand((3, 4, 8, 16), torch.float32, g)[:, :2]  # batch strides (4*128, 128) for sizes (3, 2)
    b = rand((16, 8), torch.float32, g)
    with pytest.raises(errors.Unsupported, match="batch dims of a"):
        bc.matmul(a, b)


# ---- epilogues ----------------------------------------------------------------------------------------

ACTS = {
    "none": None,
    "relu": torch.relu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "silu": torch.nn.functional.silu,
}


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_epilogues(act, with_bias, dt):
    g = gen(f"epi/{act}/{with_bias}/{dt}")
    m, n, k = 72, 96, 64
    x = rand((m, k), dt, g)
    w = rand((n, k), dt, g)
    bias = rand((n,), dt, g) if with_bias else None
    out = poison((m, n), dt)
    bc.matmul(x, w.t(), out=out, bias=bias, activation=act)
    check(out, x, w.t(), bias=bias, act=ACTS[act])


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "silu"])
def test_aux_holds_the_pre_activation(act):
    g = gen(f"aux/{act}")
    x, w, bias = rand((64, 128), torch.bfloat16, g), rand((96, 128), torch.bfloat16, g), rand((96,), torch.bfloat16, g)
    y, pre = bc.linear(x, w, bias, activation=act, return_aux=True)
    check(pre, x, w.t(), bias=bias)
    check(y, x, w.t(), bias=bias, act=ACTS[act])


def test_bias_dtype_follows_out():
    g = gen("bias-f32")
    x, w = rand((64, 64), torch.bfloat16, g), rand((32, 64), torch.bfloat16, g)
    bias = rand((32,), torch.float32, g)
    with pytest.raises(errors.InvalidDType, match="bias is float32; expected bfloat16"):
        bc.linear(x, w, bias)
    y = bc.linear(x, w, bias, out_dtype=bc.float32)  # f32 out takes an f32 bias
    check(y, x, w.t(), bias=bias)


def test_dgelu_tanh_with_bias_grad():
    g = gen("dgelu")
    m, n, k = 64, 96, 80  # grad [m, k] @ w2 [k, n] -> d pre [m, n]
    grad = rand((m, k), torch.bfloat16, g)
    w2 = rand((k, n), torch.bfloat16, g)
    pre = rand((m, n), torch.bfloat16, g)
    d, db = bc.matmul_dgelu_tanh(grad, w2, pre, return_bias_grad=True)
    p = pre.detach().double().requires_grad_()
    torch.nn.functional.gelu(p, approximate="tanh").backward(grad.double() @ w2.double())
    ref = p.grad
    scale = (grad.double().abs() @ w2.double().abs()) * 1.2 + 1e-30
    assert ((d.double() - ref).abs() <= 0.03 * scale).all()
    ref_db = ref.sum(0)
    assert torch.allclose(db.double(), ref_db, rtol=0.03, atol=0.03 * scale.sum(0).max().item() / m)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16], ids=str)
def test_linear_forward_backward_matches_autograd(dt):
    g = gen(f"linear/{dt}")
    x = rand((4, 33, 64), dt, g)
    w = rand((48, 64), dt, g, 0.2)
    b = rand((48,), dt, g)
    gy = rand((4, 33, 48), dt, g)
    y = bc.linear(x, w, b)
    gx, gw, gb = bc.linear_backward(gy, x, w, bias=True)
    assert bc.linear_backward(gy, x, w)[2] is None  # no bias gradient unless asked, as linear's default
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
    y64 = torch.nn.functional.linear(x64, w64, b64)
    y64.backward(gy.double())
    tol = 2e-5 if dt == torch.float32 else 3e-2
    for got, ref in ((y, y64.detach()), (gx, x64.grad), (gw, w64.grad), (gb, b64.grad)):
        assert got.shape == ref.shape
        err = (got.double() - ref).abs().max().item()
        assert err <= tol * (ref.abs().max().item() + 1), (err, ref.abs().max().item())


# ---- fp8 and int8 -------------------------------------------------------------------------------------

FP8 = [(torch.float8_e4m3fn, torch.float8_e4m3fn), (torch.float8_e4m3fn, torch.float8_e5m2),
       (torch.float8_e5m2, torch.float8_e4m3fn)]


@pytest.mark.parametrize("ta,tb", FP8, ids=lambda t: str(t).replace("torch.float8_", ""))
@pytest.mark.parametrize("out_dt", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_fp8_scaled(ta, tb, out_dt):
    g = gen(f"fp8/{ta}/{tb}/{out_dt}")
    m, n, k = 64, 48, 96
    a = rand((m, k), torch.float32, g).to(ta)
    w = rand((n, k), torch.float32, g).to(tb)
    sa = torch.tensor(0.75, device=DEV)
    sb = torch.tensor(1.25, device=DEV)
    out, amax = bc.scaled_mm(a, w.t(), sa, sb, out_dtype=out_dt, return_amax=True)
    ref = (a.double() * 0.75) @ (w.double().t() * 1.25)
    scale = (a.double().abs() * 0.75) @ (w.double().t().abs() * 1.25)
    # Hopper's fp8 MMA accumulates with ~14 mantissa bits inside each instruction (f32 across them):
    # errors of ~1e-4 of |a| @ |b| per element were measured at K = 96.
    assert ((out.double() - ref).abs() <= (2 * EPS[out_dt] + 2e-3) * scale + 1e-6).all()
    assert math.isclose(amax.item(), out.double().abs().max().item(), rel_tol=2 * EPS[out_dt])


def test_fp8_needs_scales_and_k_contiguous_operands():
    g = gen("fp8-bad")
    a = rand((32, 64), torch.float32, g).to(torch.float8_e4m3fn)
    b = rand((64, 32), torch.float32, g).to(torch.float8_e4m3fn)  # row-major b: not K-contiguous
    one = torch.tensor(1.0, device=DEV)
    with pytest.raises(errors.InvalidArgument, match="a_scale and b_scale"):
        bc.matmul(a, b.t().contiguous().t(), out_dtype=bc.bfloat16)
    with pytest.raises(errors.InvalidArgument, match="contiguous along K"):
        bc.scaled_mm(a, b, one, one)


def test_int8_exact():
    g = gen("int8")
    m, n, k = 64, 96, 128
    a = torch.randint(-128, 128, (m, k), device=DEV, dtype=torch.int8, generator=g)
    w = torch.randint(-128, 128, (n, k), device=DEV, dtype=torch.int8, generator=g)
    out = bc.int8_mm(a, w.t())
    assert out.dtype == torch.int32
    ref = a.cpu().long() @ w.cpu().long().t()
    assert torch.equal(out.cpu().long(), ref)


@pytest.mark.parametrize("out_dt", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_int8_dequantized(out_dt):
    g = gen(f"int8dq/{out_dt}")
    m, n, k = 48, 80, 64
    a = torch.randint(-128, 128, (m, k), device=DEV, dtype=torch.int8, generator=g)
    w = torch.randint(-128, 128, (n, k), device=DEV, dtype=torch.int8, generator=g)
    rs = torch.rand(m, device=DEV, generator=g) * 0.01 + 0.001
    cs = torch.rand(n, device=DEV, generator=g) * 0.01 + 0.001
    out = bc.int8_mm(a, w.t(), row_scale=rs, col_scale=cs, out_dtype=out_dt)
    ref = (a.double() @ w.double().t()) * rs.double()[:, None] * cs.double()[None, :]
    assert torch.allclose(out.double(), ref, rtol=2 * EPS[out_dt], atol=1e-6)
    only_col = bc.int8_mm(a, w.t(), col_scale=cs, out_dtype=out_dt)
    assert torch.allclose(only_col.double(), (a.double() @ w.double().t()) * cs.double(), rtol=2 * EPS[out_dt])


# ---- the decode regime --------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("m", [1, 2, 3, 4, 8, 13, 16])
@pytest.mark.parametrize("n,k", [(1, 1), (7, 9), (4099, 256), (96, 4096)])
def test_gemv_lowm(dt, m, n, k):
    g = gen(f"gemv/{dt}/{m}/{n}/{k}")
    x = rand((m, k), dt, g)
    w = rand((n, k), dt, g)
    d = bc.GemmDescriptor(bc.TensorSpec((m, k), bc.dtype(dt)), bc.TensorSpec((k, n), bc.dtype(dt), (1, k)),
                          bc.TensorSpec((m, n), bc.dtype(dt)))
    plan = bc.GemmPlan.select(d)
    assert plan.sku.name.startswith("gemm.gemv_lowm"), plan.sku.name
    assert plan.sku.backend == bc.Backend.bespoke
    out = poison((m, n), dt)
    plan.run(out, x, w.t())
    check(out, x, w.t())


def test_gemv_lowm_bias_beta_and_views():
    g = gen("gemv-extra")
    big = rand((8, 4100), torch.bfloat16, g)
    x = big[:, 1:4097]  # ld 4100, misaligned by one element: the scalar-load path
    w = rand((300, 4096), torch.bfloat16, g)
    bias = rand((300,), torch.bfloat16, g)
    c = rand((8, 300), torch.bfloat16, g)
    out = c.clone()
    bc.matmul(x, w.t(), out=out, bias=bias, beta=0.5, alpha=2.0)
    check(out, x, w.t(), alpha=2.0, beta=0.5, c=c, bias=bias)


def test_long_k_decode_shape():
    g = gen("gemv-14336")
    x = rand((4, 14336), torch.bfloat16, g)
    w = rand((512, 14336), torch.bfloat16, g, 0.05)
    y = bc.linear(x, w)
    check(y, x, w.t())


def test_preference_picks_the_backend():
    d = bc.GemmDescriptor(bc.TensorSpec((4, 256), bc.bfloat16), bc.TensorSpec((256, 512), bc.bfloat16, (1, 256)),
                          bc.TensorSpec((4, 512), bc.bfloat16))
    pref = bc.PlanPreference(prefer=[bc.Backend.cublaslt])
    assert bc.GemmPlan.select(d, pref).sku.backend == bc.Backend.cublaslt
    pref = bc.PlanPreference(forbid=[bc.Backend.cublaslt])
    assert bc.GemmPlan.select(d, pref).sku.backend == bc.Backend.bespoke
    big = bc.GemmDescriptor(bc.TensorSpec((64, 256), bc.bfloat16), bc.TensorSpec((256, 512), bc.bfloat16),
                            bc.TensorSpec((64, 512), bc.bfloat16))
    with pytest.raises(errors.Unsupported, match="forbids cuBLASLt"):
        bc.GemmPlan.select(big, pref)


# ---- sizes, bad input ---------------------------------------------------------------------------------

def test_large_bf16():
    g = gen("large")
    a, b = rand((2048, 4096), torch.bfloat16, g), rand((4096, 3072), torch.bfloat16, g)
    check(bc.matmul(a, b), a, b)


def test_empty_problems():
    g = gen("empty")
    a, b = rand((0, 16), torch.float32, g), rand((16, 8), torch.float32, g)
    assert tuple(bc.matmul(a, b).shape) == (0, 8)
    a0, b0 = rand((5, 0), torch.float32, g), rand((0, 7), torch.float32, g)
    out = poison((5, 7), torch.float32)
    bc.matmul(a0, b0, out=out)
    assert torch.equal(out, torch.zeros_like(out))  # K = 0: the empty sum
    c = rand((5, 7), torch.float32, g)
    out = c.clone()
    bc.matmul(a0, b0, out=out, beta=2.0)
    assert torch.allclose(out, 2 * c)


def test_empty_batches_still_write_their_sums():
    # M = 0: dgelu_tanh's bias_grad (a sum over no rows) and the fp8 amax (max |out| of nothing)
    # are 0, not whatever the fresh buffer held (NaN blocks are freed first so the allocator
    # likely hands them back).
    g = gen("empty-sums")
    for _ in range(4):
        junk = torch.full((4096,), float("nan"), device=DEV)
        del junk
    grad, w2, pre = rand((0, 80), torch.bfloat16, g), rand((80, 96), torch.bfloat16, g), rand((0, 96), torch.bfloat16, g)
    d, db = bc.matmul_dgelu_tanh(grad, w2, pre, return_bias_grad=True)
    assert tuple(d.shape) == (0, 96) and torch.equal(db, torch.zeros_like(db))
    a = rand((0, 96), torch.float32, g).to(torch.float8_e4m3fn)
    w = rand((48, 96), torch.float32, g).to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device=DEV)
    out, amax = bc.scaled_mm(a, w.t(), one, one, out_dtype=torch.bfloat16, return_amax=True)
    assert tuple(out.shape) == (0, 48) and float(amax) == 0.0


def test_bad_input_is_named():
    g = gen("bad")
    a, b = rand((8, 16), torch.bfloat16, g), rand((12, 8), torch.bfloat16, g)
    with pytest.raises(errors.InvalidArgument, match="inner dimensions"):
        bc.matmul(a, b)
    with pytest.raises(errors.InvalidDType, match="b is float16"):
        bc.matmul(a, rand((16, 8), torch.float16, g))
    with pytest.raises(errors.InvalidArgument, match="bias"):
        bc.matmul(a, rand((16, 8), torch.bfloat16, g), bias=rand((7,), torch.bfloat16, g))
    out = poison((8, 16), torch.bfloat16)
    with pytest.raises(errors.InvalidArgument, match="overlaps"):
        bc.matmul(out[:, :16], rand((16, 16), torch.bfloat16, g), out=out)
    with pytest.raises(errors.InvalidArgument, match="device|CUDA"):
        bc.matmul(a.cpu(), b.cpu())


def test_sku_names_backend_and_algorithm():
    d = bc.GemmDescriptor(bc.TensorSpec((512, 256), bc.bfloat16), bc.TensorSpec((256, 384), bc.bfloat16),
                          bc.TensorSpec((512, 384), bc.bfloat16), epilogue="gelu_tanh", bias=bc.bfloat16)
    p = bc.GemmPlan.select(d)
    assert p.sku.backend == bc.Backend.cublaslt
    assert "algo=" in p.sku.name and p.sku.op == "bias+gelu_tanh"
    assert p.sku.category == "gemm"
    info = bc.gemm_backend_info()
    cuda_major = bc.build_info()["cuda_runtime_version"] // 1000  # the CUDA the build targets
    assert info["cublaslt_available"] and info["cublaslt_version"] // 10000 == cuda_major


# ---- frameworks, graphs -------------------------------------------------------------------------------

def test_cupy_inputs():
    cp = pytest.importorskip("cupy")
    a = cp.random.standard_normal((33, 40), dtype=cp.float32)
    b = cp.random.standard_normal((40, 24), dtype=cp.float32)
    out = bc.matmul(a, b)
    assert isinstance(out, cp.ndarray)
    check(torch.from_dlpack(out), torch.from_dlpack(a), torch.from_dlpack(b))


def test_jax_inputs():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    ka, kb = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(ka, (17, 64), dtype=jnp.bfloat16)
    b = jax.random.normal(kb, (64, 48), dtype=jnp.bfloat16)
    out = bc.matmul(a, b)
    assert isinstance(out, jax.Array)
    ta = torch.from_dlpack(a)
    tb = torch.from_dlpack(b)
    check(torch.from_dlpack(out), ta, tb)


def test_cuda_graph_capture_and_replay():
    g = gen("graph")
    a, b = rand((128, 256), torch.bfloat16, g), rand((256, 64), torch.bfloat16, g)
    d = bc.GemmDescriptor(bc.TensorSpec((128, 256), bc.bfloat16), bc.TensorSpec((256, 64), bc.bfloat16),
                          bc.TensorSpec((128, 64), bc.bfloat16), bias=bc.bfloat16, epilogue="relu")
    plan = bc.GemmPlan.select(d)
    ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
    bias = rand((64,), torch.bfloat16, g)
    out = poison((128, 64), torch.bfloat16)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        plan.run(out, a, b, bias=bias, workspace=ws)  # warm up (algorithm chosen) outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        plan.run(out, a, b, bias=bias, workspace=ws)
    out.fill_(float("nan"))
    a.copy_(rand((128, 256), torch.bfloat16, g))
    graph.replay()
    torch.cuda.synchronize()
    check(out, a, b, bias=bias, act=torch.relu)


# ---- grouped (mixture of experts) ---------------------------------------------------------------------

def _moe_case(g, e, n, k, counts, dt=torch.bfloat16):
    t = int(sum(counts))
    x = rand((t + 3, k), dt, g)  # 3 trailing rows that belong to no expert
    w = rand((e, n, k), dt, g, k ** -0.5)
    offs = torch.zeros(e + 1, dtype=torch.int64)
    offs[1:] = torch.tensor(counts).cumsum(0)
    return x, w, offs


def _moe_ref(x, w, offs, bias=None):
    ref = torch.zeros(x.shape[0], w.shape[1], dtype=torch.float64, device=DEV)
    for e in range(w.shape[0]):
        lo, hi = int(offs[e]), int(offs[e + 1])
        if hi > lo:
            ref[lo:hi] = x[lo:hi].double() @ w[e].double().t() + (0 if bias is None else bias[e].double())
    return ref


@pytest.mark.parametrize("path", ["offsets", "group_sizes"])
@pytest.mark.parametrize("e,counts_hi", [(8, 20), (64, 5), (4, 70)])
def test_grouped_linear_matches_per_expert_reference(path, e, counts_hi):
    g = gen(f"moe/{path}/{e}/{counts_hi}")
    counts = torch.randint(0, counts_hi + 1, (e,), generator=torch.Generator().manual_seed(e)).tolist()
    counts[0] = 0  # an empty expert
    x, w, offs = _moe_case(g, e, 384, 256, counts)
    bias = rand((e, 384), torch.bfloat16, g)
    out = poison((x.shape[0], 384), torch.bfloat16)
    if path == "offsets":
        for odt, hint in ((torch.int32, None), (torch.int64, None), (torch.int32, 4)):
            out.fill_(float("nan"))  # a hint below the real group size is only a (wrong) speed hint
            bc.grouped_linear(x, w, offsets=offs.to(DEV, odt), bias=bias, out=out, max_rows_per_group=hint)
            _check_moe(out, x, w, offs, bias)
    else:
        bc.grouped_linear(x, w, group_sizes=counts, bias=bias, out=out)
        _check_moe(out, x, w, offs, bias)


def _check_moe(out, x, w, offs, bias):
    t = int(offs[-1])
    ref = _moe_ref(x, w, offs, bias)[:t]
    scale = torch.zeros_like(ref)
    for e in range(w.shape[0]):
        lo, hi = int(offs[e]), int(offs[e + 1])
        if hi > lo:
            scale[lo:hi] = x[lo:hi].double().abs() @ w[e].double().abs().t() + bias[e].double().abs()
    got = out[:t].double()
    assert not torch.isnan(got).any(), "an expert's row was not written"
    assert ((got - ref).abs() <= 2e-2 * scale + 1e-6).all()
    assert torch.isnan(out[t:]).all(), "rows past the last expert were written"


def _sm90_grouped_available():
    return bc.features().get("cutlass", False) and torch.cuda.get_device_capability() == (9, 0)


def _kernel_plan(kernel, xv, w, t, dt, odt, bias):
    """The grouped plan named by tuning (tiled / sm90) for this view of x."""
    spec = bc.TensorSpec
    desc = bc.GroupedGemmDescriptor(spec(tuple(xv.shape), bc.dtype(dt), tuple(xv.stride())),
                                    spec(tuple(w.shape), bc.dtype(dt)), spec((t, w.shape[1]), bc.dtype(dt)),
                                    offsets_dtype=bc.dtype(odt), bias=bias)
    return bc.GroupedGemmPlan.select(desc, bc.PlanPreference(tuning=f"kernel={kernel}"))


@pytest.mark.parametrize("kernel", ["tiled", "sm90"])
@pytest.mark.parametrize("dt,e,n,k,hi,bias,odt", [
    (torch.bfloat16, 8, 384, 256, 300, True, torch.int64),   # several row tiles per expert, partial last ones
    (torch.float16, 3, 200, 72, 140, False, torch.int32),    # N and K tails (K a multiple of 8, not of 32)
    (torch.bfloat16, 16, 128, 64, 3, True, torch.int32),     # decode-sized groups on the prefill kernel
    (torch.bfloat16, 5, 520, 136, 400, False, torch.int64),  # tails of the sm90 kernel's 128 x 256 x 64 tiles
])
def test_grouped_tile_kernels(kernel, dt, e, n, k, hi, bias, odt):
    """The prefill grouped kernels (ours tiled, CUTLASS sm90), named through the tuning: rows before
    offsets[0] and from offsets[E] on stay untouched, empty experts cost nothing, x may be a strided view."""
    if kernel == "sm90":
        if not _sm90_grouped_available():
            pytest.skip("the sm90 grouped kernel needs a CUTLASS build and an sm_90 device")
        if bias:
            with pytest.raises(errors.Unsupported, match="without bias"):
                _kernel_plan(kernel, torch.empty(4, k, dtype=dt, device=DEV), torch.empty(e, n, k, dtype=dt, device=DEV),
                             4, dt, odt, True)
            return
    g = gen(f"moe-tiled/{e}/{n}/{k}")
    counts = torch.randint(0, hi + 1, (e,), generator=torch.Generator().manual_seed(e)).tolist()
    counts[1] = 0
    t = 2 + sum(counts) + 3
    xs = rand((t, k + 16), dt, g)
    x = xs[:, 8:8 + k]                                   # row stride k + 16, 16-byte aligned start
    w = rand((e, n, k), dt, g, k ** -0.5)
    b = rand((e, n), dt, g) if bias else None
    offs = torch.tensor([2] + [2 + c for c in torch.tensor(counts).cumsum(0).tolist()], dtype=torch.int64)

    def run(xv):  # the kernel's plan for this view of x, run into a poisoned out
        plan = _kernel_plan(kernel, xv, w, t, dt, odt, bias)
        assert plan.sku.name.startswith(f"gemm.grouped_{kernel}."), plan.sku.name
        out = poison((t, n), dt)
        ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
        plan.run(out, xv, w, offsets=offs.to(DEV, odt), bias=b, workspace=ws)
        return out

    lo, up = int(offs[0]), int(offs[-1])
    scale = _moe_ref(x.abs(), w.abs(), offs, None if b is None else b.abs())[lo:up]
    tol = 1e-2 if dt == torch.bfloat16 else 2e-3
    out = run(x)
    got = out[lo:up].double()
    assert not torch.isnan(got).any(), "an expert's row was not written"
    assert ((got - _moe_ref(x, w, offs, b)[lo:up]).abs() <= tol * scale + 1e-6).all()
    assert torch.isnan(out[:lo]).all() and torch.isnan(out[up:]).all(), "rows no expert owns were written"
    # x off 16-byte alignment: run falls back to the decode kernel, same result
    x2 = xs[:, 1:1 + k]
    out2 = run(x2)
    assert ((out2[lo:up].double() - _moe_ref(x2, w, offs, b)[lo:up]).abs() <= tol * scale * 4 + 1e-2).all()


@pytest.mark.parametrize("e,counts_hi", [(20, 40), (8, 100), (300, 3)])
def test_grouped_linear_host_sizes_on_sm90(e, counts_hi):
    """Group sizes on the host, no bias: CUTLASS's grouped kernel with the boundaries passed by value
    (many experts or few rows each), captured in a CUDA graph too; past 256 experts the cuBLASLt loop."""
    if not _sm90_grouped_available():
        pytest.skip("the sm90 grouped kernel needs a CUTLASS build and an sm_90 device")
    g = gen(f"moe-host-sm90/{e}")
    counts = torch.randint(0, counts_hi + 1, (e,), generator=torch.Generator().manual_seed(e)).tolist()
    counts[1] = 0
    x, w, offs = _moe_case(g, e, 264, 128, counts)
    zero = torch.zeros(e, 264, dtype=torch.bfloat16, device=DEV)
    spec = bc.TensorSpec
    desc = bc.GroupedGemmDescriptor(spec(tuple(x.shape), bc.dtype(x.dtype)), spec(tuple(w.shape), bc.dtype(w.dtype)),
                                    spec((x.shape[0], 264), bc.dtype(x.dtype)), group_sizes=counts)
    plan = bc.GroupedGemmPlan.select(desc)
    assert ("grouped_sm90" in plan.sku.name) == (e <= 256), plan.sku.name
    ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
    out = poison((x.shape[0], 264), torch.bfloat16)
    plan.run(out, x, w, workspace=ws)
    _check_moe(out, x, w, offs, zero)
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        plan.run(out, x, w, workspace=ws)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph):
        plan.run(out, x, w, workspace=ws)
    x.copy_(rand(tuple(x.shape), torch.bfloat16, g))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _check_moe(out, x, w, offs, zero)


def test_grouped_sm90_in_a_cuda_graph():
    """The sm90 grouped GEMM reads its group sizes on the device: one captured graph replays for new
    offsets (no host sync, no allocation in run)."""
    if not _sm90_grouped_available():
        pytest.skip("the sm90 grouped kernel needs a CUTLASS build and an sm_90 device")
    g = gen("moe-sm90-graph")
    e, n, k, t = 8, 512, 256, 1024
    x = rand((t, k), torch.bfloat16, g)
    w = rand((e, n, k), torch.bfloat16, g, k ** -0.5)
    plan = _kernel_plan("sm90", x, w, t, torch.bfloat16, torch.int32, False)
    ws = torch.empty(max(1, plan.workspace_bytes()), dtype=torch.uint8, device=DEV)
    offs = torch.zeros(e + 1, dtype=torch.int32, device=DEV)
    out = torch.empty(t, n, dtype=torch.bfloat16, device=DEV)

    def set_counts(seed):
        c = torch.randint(0, 2 * t // e, (e,), generator=torch.Generator().manual_seed(seed))
        c[seed % e] = 0
        host = torch.zeros(e + 1, dtype=torch.int64)
        host[1:] = c.cumsum(0).clamp(max=t)
        offs.copy_(host.to(torch.int32))
        return host

    set_counts(1)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        plan.run(out, x, w, offsets=offs, workspace=ws)  # warm up outside the capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.run(out, x, w, offsets=offs, workspace=ws)
    for seed in (2, 3):
        host = set_counts(seed)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        up = int(host[-1])
        ref = _moe_ref(x, w, host)[:up]
        scale = _moe_ref(x.abs(), w.abs(), host)[:up]
        assert ((out[:up].double() - ref).abs() <= 1e-2 * scale + 1e-6).all()
        assert torch.isnan(out[up:]).all()


def test_grouped_refusals():
    g = gen("moe-bad")
    x, w, offs = _moe_case(g, 4, 64, 32, [1, 2, 3, 4])
    with pytest.raises(errors.InvalidArgument, match="exactly one of"):
        bc.grouped_linear(x, w)
    with pytest.raises(errors.InvalidArgument, match="group_sizes add up"):
        bc.grouped_linear(x, w, group_sizes=[10, 10, 10, 10])
    with pytest.raises(errors.InvalidArgument, match="4 entries for E = 4|entries"):
        bc.grouped_linear(x, w, group_sizes=[1, 2, 3])
    with pytest.raises(errors.InvalidDType, match="offsets are float32"):
        bc.grouped_linear(x, w, offsets=offs.to(DEV, torch.float32))
