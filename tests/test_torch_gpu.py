"""GPU tests of baracuda.torch: torch.library.opcheck on every registered op, gradients through
the registered ops (and through baracuda.<op> on tensors that require grad) against
torch.autograd in float64, torch.compile(fullgraph=True) and mode="reduce-overhead" over the
modules, and a transformers Llama trained with and without baracuda.torch.patch."""
import math

import pytest

torch = pytest.importorskip("torch")
bc = pytest.importorskip("baracuda")
bt = pytest.importorskip("baracuda.torch")
import torch.nn.functional as F  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]
DEV = "cuda"
ops = torch.ops.baracuda
EW = {r["name"]: r for r in bc.elementwise_ops()}
INT_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right", "bitwise_not"}


def gen(seed=0):
    return torch.Generator(device=DEV).manual_seed(seed)


def _u(*shape, g, lo=0.2, hi=0.8, dtype=torch.float32, grad=False):
    t = (torch.rand(*shape, generator=g, device=DEV, dtype=dtype) * (hi - lo) + lo)
    return t.requires_grad_(grad)


def _ew_samples(name, row):
    """Sample arguments for an elementwise op (inputs inside every kind's domain)."""
    g = gen(hash(name) % 1000)
    cat = row["category"]
    lo = 1.2 if name.startswith("acosh") else 0.2
    grad = cat in ("unary", "binary", "ternary", "gated")
    if name in INT_ONLY or name.removesuffix("_backward") in INT_ONLY:
        x = torch.randint(0, 7, (3, 5), device=DEV, dtype=torch.int32, generator=g)
        return [(x,) * row["arity"]]
    if cat in ("unary", "predicate"):
        return [(_u(3, 5, g=g, lo=lo, grad=grad),), (_u(5, 3, g=g, lo=lo, grad=grad).t(),)]
    if cat in ("binary", "compare"):
        return [(_u(3, 5, g=g, grad=grad), _u(5, g=g, lo=0.9, hi=1.5, grad=grad))]
    if cat == "ternary":
        if name == "where":
            return [(torch.rand(3, 5, generator=g, device=DEV) > 0.5, _u(3, 5, g=g, grad=True), _u(5, g=g, grad=True))]
        if name == "clamp":
            return [(_u(3, 5, g=g, grad=True), _u(3, 5, g=g, lo=0.0, hi=0.1, grad=True),
                     _u(5, g=g, lo=0.9, hi=1.0, grad=True))]
        return [tuple(_u(3, 5, g=g, lo=0.5, hi=1.5, grad=True) for _ in range(3))]
    if cat == "gated":
        return [(_u(3, 8, g=g, grad=True), -1), (_u(4, 3, g=g, grad=True), 0)]
    # backward ops: grad first, then the forward's inputs (no requires_grad: no double backward)
    fwd = EW[name.removesuffix("_backward")]
    out = []
    for s in _ew_samples(fwd["name"], fwd):
        xs = [t.detach() if isinstance(t, torch.Tensor) else t for t in s]
        if cat == "gated_backward":
            shape = list(xs[0].shape)
            shape[xs[1]] //= 2
            out.append((_u(*shape, g=g), xs[0], xs[1]))
        elif cat == "unary_backward":
            out.append((_u(*xs[0].shape, g=g), xs[0]))
        else:
            shape = torch.broadcast_shapes(*(t.shape for t in xs))
            first = 1 if name == "where_backward" else 0
            for wrt in range(first, len(xs)):
                out.append((_u(*shape, g=g), *xs, wrt))
    return out


OPCHECK_FAST = ("test_schema", "test_autograd_registration", "test_faketensor")


@pytest.mark.parametrize("name", sorted(n for n in EW if n not in ("cast", "fill")))
def test_opcheck_elementwise(name):
    for args in _ew_samples(name, EW[name]):
        # the full opcheck (AOT dispatch with dynamic shapes) on a representative few; the rest
        # check the schema, autograd registration and fake kernel against the CUDA kernel
        utils = None if name in ("silu", "add", "where", "swiglu", "mul_backward") else OPCHECK_FAST
        torch.library.opcheck(getattr(ops, name), args, test_utils=utils or
                              ("test_schema", "test_autograd_registration", "test_faketensor",
                               "test_aot_dispatch_dynamic"))


def _rows(n=6, h=40, dtype=torch.float32, seed=1, grad=True):
    g = gen(seed)
    return torch.randn(n, h, generator=g, device=DEV, dtype=dtype).requires_grad_(grad)


def _other_samples():
    g = gen(2)
    x = _rows()
    w = torch.randn(40, generator=g, device=DEV).requires_grad_()
    b = torch.randn(40, generator=g, device=DEV).requires_grad_()
    lw = torch.randn(24, 40, generator=g, device=DEV).requires_grad_()
    lb = torch.randn(24, generator=g, device=DEV).requires_grad_()
    t = torch.randint(0, 40, (6,), generator=g, device=DEV)
    d = lambda *ts: tuple(v.detach() if isinstance(v, torch.Tensor) else v for v in ts)  # noqa: E731
    y, rstd = ops.rms_norm(*d(x, w), 1e-6)
    _, mean, lrstd = ops.layer_norm(*d(x, w, b), 1e-5)
    _, lse = ops.cross_entropy(*d(x, t), None, -100, 0.0, "mean")
    gx = torch.randn(2, 8, 3, 5, generator=g, device=DEV).requires_grad_()
    gw = torch.randn(8, generator=g, device=DEV).requires_grad_()
    _, gmean, grstd = ops.group_norm(*d(gx), 4, *d(gw, gw), 1e-5)
    aq = torch.randn(1, 20, 4, 64, generator=g, device=DEV, dtype=torch.bfloat16).requires_grad_()
    akv = torch.randn(1, 30, 2, 64, generator=g, device=DEV, dtype=torch.bfloat16).requires_grad_()
    att = (None,) * 5 + (None, True, "bottom_right", -1, -1, 0.0, 0, 0)
    aout, alse = ops.attention(*d(aq, akv, akv), *att, "auto", False)
    rq = torch.randn(2, 6, 4, 64, generator=g, device=DEV).requires_grad_()
    rk = torch.randn(2, 6, 2, 64, generator=g, device=DEV).requires_grad_()
    rpos = torch.randint(0, 50, (2, 6), generator=g, device=DEV)
    rcos, rsin = torch.rand(50, 16, generator=g, device=DEV), torch.rand(50, 16, generator=g, device=DEV)
    freq = (10000.0, "none", [1.0, 1.0, 4.0, 0.0, 32.0, 1.0, 0.0])
    kvk = torch.randn(4, 2, 64, generator=g, device=DEV, dtype=torch.bfloat16)
    kvc = torch.zeros(3, 16, 2, 64, device=DEV, dtype=torch.bfloat16)
    kvs = torch.tensor([1, 17, 40, -1], device=DEV)
    pq = torch.randn(2, 2, 8, 64, generator=g, device=DEV).to(torch.bfloat16)
    pkc = torch.randn(5, 16, 2, 64, generator=g, device=DEV).to(torch.bfloat16)
    ptab = torch.tensor([[4, 0], [2, 3]], dtype=torch.int32, device=DEV)
    plen = torch.tensor([20, 7], dtype=torch.int32, device=DEV)
    eidx = torch.randint(0, 24, (3, 5), generator=g, device=DEV)
    eg = torch.randn(3, 5, 40, generator=g, device=DEV)
    glx = torch.randn(24, 64, generator=g, device=DEV).to(torch.bfloat16)
    glw = (torch.randn(4, 32, 64, generator=g, device=DEV) / 8).to(torch.bfloat16)
    gloffs = torch.tensor([0, 5, 5, 17, 24], device=DEV)  # every row owned: the output is fully written
    mlog = torch.randn(12, 16, generator=g, device=DEV).requires_grad_()
    mids = torch.rand(12, 16, generator=g, device=DEV).topk(2, dim=-1).indices.int()
    mx = torch.randn(12, 40, generator=g, device=DEV).requires_grad_()
    _, _, mpos = ops.moe_permute(mx.detach(), mids, 16)
    mw = torch.rand(12, 2, generator=g, device=DEV).requires_grad_()
    mys = torch.randn(24, 40, generator=g, device=DEV).requires_grad_()
    mgate = ("softmax", True, 1, 1, "max", 1.0)
    return {
        "moe_gate": [(mlog, None, 2, *mgate), (mlog, torch.zeros(16, device=DEV), 4, "sigmoid", False, 4, 2, "top2_sum",
                                                2.5)],
        "moe_gate_backward": [(torch.randn(12, 2, device=DEV), mlog.detach(), mids, *mgate)],
        "moe_permute": [(mx, mids, 16), (mx.double(), mids.long(), 16)],
        "moe_unpermute": [(mys, mpos, mw), (mys, mpos, None)],
        "moe_unpermute_backward": [d(torch.randn(12, 40, device=DEV), mpos, mw, mys, 24),
                                   d(torch.randn(12, 40, device=DEV), mpos, None, None, 24)],
        "apply_penalties": [(pkc[1, :, 0].float().clone(), kvs.view(1, 4).expand(16, 4).contiguous(), None, None, None,
                             None, 1.3, 0.0, 0.0),
                            (pkc[1, :, 0].clone(), None, torch.randint(0, 64, (16, 5), generator=g, device=DEV), None,
                             torch.ones(16, device=DEV), None, 1.0, 0.0, 0.5)],
        "embedding": [(lw, eidx, -1, False), (lw, eidx.int().t(), 2, True)],
        "embedding_backward": [(eg, eidx, 24, -1, False, True), (eg, eidx, 24, 3, True, True),
                               (eg[0].double(), eidx[0], 24, -1, False, True)],
        "paged_attention": [(pq, pkc, pkc * 2, ptab, plen, None, None, None, True, -1, -1, 0.0, 0, 0, False),
                            (pq[:, 0], pkc, pkc, ptab, plen, None, torch.zeros(8, device=DEV), 0.2, False, 8, -1,
                             30.0, 0, 2, True),
                            (pq.float(), pkc.float(), pkc.float(), ptab, plen, None, None, None, True, -1, -1, 0.0, 0, 0,
                             True, "rowwise"),
                            (pq, pkc.to(torch.float8_e4m3fn), pkc.to(torch.float8_e5m2).to(torch.float8_e4m3fn), ptab, plen,
                             None, None, None, True, -1, -1, 0.0, 0, 0, False, "auto", torch.tensor([0.5], device=DEV),
                             torch.tensor([2.0], device=DEV))],
        "grouped_linear": [(glx, glw, gloffs, None, None, -1), (glx, glw, gloffs.int(), None, glw[:, :, 0].contiguous(), 16),
                           (glx.float(), glw.float(), gloffs, None, None, -1), (glx, glw, None, [5, 0, 12, 7], None, -1)],
        "merge_attention_states": [(pq, torch.randn(2, 2, 8, device=DEV), pq * 2, torch.randn(2, 2, 8, device=DEV)),
                                   (pq.float(), torch.randn(2, 8, 2, device=DEV).transpose(1, 2), pq.float(),
                                    torch.full((2, 2, 8), float("-inf"), device=DEV))],
        "sample": [(pkc[0, 0], None, None, None, None, None, 1.0, 5, 0.9, 0.0, 3, 1, True),
                   (pkc[1, :, 0].float(), torch.ones(16, device=DEV), torch.full((16,), 4, dtype=torch.int32, device=DEV),
                    None, None, torch.arange(16, device=DEV), 1.0, 0, 1.0, 0.1, 0, 0, False)],
        "kv_cache_append": [(kvk, kvk * 2, kvc, kvc.clone(), kvs), (kvk, None, kvc, None, kvs.int()),
                            (kvk, kvk * 2, kvc.to(torch.float8_e4m3fn), kvc.to(torch.float8_e4m3fn), kvs,
                             torch.full((2,), 0.1, device=DEV), torch.full((2,), 0.2, device=DEV))],
        "rope_append": [(kvk.clone()[:, :1], kvk.clone(), kvk * 2, kvc.clone(), kvc.clone(), kvs, None, None, None, "neox",
                         0, *freq),
                        (kvk.float(), kvk.float(), None, kvc.float(), None, kvs.int(), None, None, None, "gptj", 32,
                         *freq)],
        "rope": [(rq, rk, None, None, None, "neox", 0, *freq, False),
                 (rq, None, rcos, rsin, rpos, "gptj", 32, *freq, False)],
        "group_norm": [(gx, 4, gw, gw, 1e-5), (gx.to(memory_format=torch.channels_last), 2, None, None, 1e-5)],
        "group_norm_backward": [d(torch.randn_like(gx), gx, gmean, grstd, 4, gw, gw),
                                d(torch.randn_like(gx), gx, gmean, grstd, 4, None, None)],
        "rms_norm": [(x, w, 1e-6), (x, None, 1e-5)],
        "attention": [(aq, akv, akv, *att, "auto", False), (aq, akv, akv, *att, "rowwise", True)],
        "attention_backward": [d(torch.randn_like(aout), aq, akv, akv, aout, alse, *att, True)],
        "rms_norm_backward": [d(torch.randn_like(x), x, rstd, w), d(torch.randn_like(x), x, rstd, None)],
        "layer_norm": [(x, w, b, 1e-5), (x, None, None, 1e-5)],
        "layer_norm_backward": [d(torch.randn_like(x), x, mean, lrstd, w, b)],
        "softmax": [(x, -1), (x, 0)],
        "log_softmax": [(x, -1)],
        "softmax_backward": [d(torch.randn_like(x), y, -1)],
        "log_softmax_backward": [d(torch.randn_like(x), y, 0)],
        "matmul": [(x, lw.t()), (x.reshape(2, 3, 40), lw.t())],
        "linear": [(x, lw, lb, "none"), (x.reshape(2, 3, 40), lw, None, "gelu_tanh"), (x, lw, lb, "silu")],
        "linear_backward": [d(torch.randn(6, 24, device=DEV), x, lw, True), d(torch.randn(6, 24, device=DEV), x, lw, False)],
        "cross_entropy": [(x, t, None, -100, 0.0, "mean"), (x, t, w.detach().abs(), 3, 0.1, "sum"),
                          (x, t, None, -100, 0.0, "none")],
        "cross_entropy_backward": [d(torch.ones((), device=DEV), x, t, lse, None, -100, 0.0, "mean")],
        "sum": [(x, [0], False), (x, None, True)],
        "mean": [(x, [-1], True)],
    }


@pytest.mark.parametrize("name", sorted(set(bt.OPS) - set(EW)))
def test_opcheck_other_families(name):
    samples = _other_samples()
    assert name in samples, f"no opcheck sample for baracuda::{name}"
    for args in samples[name]:
        # torch's schema check compares tensors with allclose, which fp8 lacks: every other check runs
        fp8 = any(isinstance(a, torch.Tensor) and a.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) for a in args)
        utils = tuple(u for u in torch.library._OPCHECK_DEFAULT_UTILS if u != "test_schema") if fp8 else None
        torch.library.opcheck(getattr(ops, name), args, **({"test_utils": utils} if fp8 else {}))


def _grads(fn, inputs, seed=3):
    """(output, grads) of fn through autograd, with a fixed random cotangent."""
    out = fn(*inputs)
    g = torch.randn(out.shape, generator=gen(seed), device=DEV, dtype=torch.float64).to(out.dtype)
    leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    return out, torch.autograd.grad(out, leaves, g, allow_unused=True)


def _check_against_f64(ours, ref, inputs, atol, rtol):
    """ours / ref: functions of the same inputs; ref runs on float64 copies."""
    got, ggot = _grads(ours, inputs)
    ref_in = [t.detach().double().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) and
              t.is_floating_point() else t for t in inputs]
    want, gwant = _grads(ref, ref_in)
    torch.testing.assert_close(got.double(), want, atol=atol, rtol=rtol)
    assert len(ggot) == len(gwant)
    for a, b in zip(ggot, gwant):
        torch.testing.assert_close(a.double(), b, atol=atol, rtol=rtol)


def test_f32_linear_and_matmul_follow_torch_tf32_switch():
    """bt.linear (with a bias; with a fused gelu_tanh) / bt.matmul on f32, forward and backward, run in
    tf32 exactly when torch's own matmuls do (torch.backends.cuda.matmul.allow_tf32): IEEE-tight
    against float64 with the switch off, within tf32's rounding (and measurably off IEEE) with it on."""
    g = gen(36)
    x = torch.randn(64, 512, generator=g, device=DEV, requires_grad=True)
    w = torch.randn(96, 512, generator=g, device=DEV, requires_grad=True)
    b = torch.randn(96, generator=g, device=DEV, requires_grad=True)
    x64, w64, b64 = x.detach().double(), w.detach().double(), b.detach().double()
    gy = torch.randn(64, 96, generator=g, device=DEV)
    # (f64 reference, |.| scale of each sum): y, grad_x, grad_w, matmul's output, a gelu_tanh linear's
    gy64 = gy.double()
    pre64 = x64 @ w64.T + b64
    want = [(pre64, x64.abs() @ w64.abs().T + b64.abs()), (gy64 @ w64, gy64.abs() @ w64.abs()),
            (gy64.T @ x64, gy64.abs().T @ x64.abs()), (x64 @ w64.T, x64.abs() @ w64.abs().T),
            (F.gelu(pre64, approximate="tanh"), x64.abs() @ w64.abs().T + b64.abs())]  # |gelu'| <= 1.13
    prev = torch.backends.cuda.matmul.allow_tf32
    errs = {}
    try:
        for tf32 in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            y = bt.linear(x, w, b)
            gx, gw, gb = torch.autograd.grad(y, (x, w, b), gy)
            # the bias gradient is a plain sum either way (fused into the GEMM, or its own under tf32)
            torch.testing.assert_close(gb.double(), gy64.sum(0), atol=1e-4, rtol=1e-5)
            m = bt.matmul(x.detach(), w.detach().T)
            act = bt.linear(x.detach(), w.detach(), b.detach(), activation="gelu_tanh")  # GEMM, then our pass
            errs[tf32] = [((got.double() - ref).abs() / scale).max().item()
                          for got, (ref, scale) in zip((y, gx, gw, m, act), want)]
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    assert max(errs[False]) < 1.5e-5, errs  # f32 accumulation only (test_gemm_gpu's bound at K = 512)
    assert max(errs[True]) < 5e-3, errs     # inputs rounded to a 10-bit mantissa ...
    assert all(t > 10 * f for t, f in zip(errs[True], errs[False])), errs  # ... which shows: tf32 ran


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gradients_against_float64(dtype):
    tol = dict(atol=2e-4, rtol=2e-4) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)
    g = gen(4)
    r = lambda *s, grad=True: torch.randn(*s, generator=g, device=DEV).to(dtype).requires_grad_(grad)  # noqa: E731
    x, w, b = r(2, 5, 64), r(64), r(64)
    _check_against_f64(lambda x, w: bc.rms_norm(x, w), lambda x, w: F.rms_norm(x, (64,), w, 1e-6), [x, w], **tol)
    _check_against_f64(lambda x: bt.rms_norm(x), lambda x: F.rms_norm(x, (64,), None, 1e-6), [x], **tol)
    _check_against_f64(lambda x, w, b: bc.layer_norm(x, w, b), lambda x, w, b: F.layer_norm(x, (64,), w, b), [x, w, b],
                       **tol)
    state = g.get_state()  # the checks below keep the data they were tuned on
    gx, gw, gb = r(3, 8, 4, 5), r(8), r(8)
    _check_against_f64(lambda x, w, b: bc.group_norm(x, 4, w, b), lambda x, w, b: F.group_norm(x, 4, w, b),
                       [gx, gw, gb], **tol)
    _check_against_f64(lambda x: bt.GroupNorm(2, 8).to(x)(x), lambda x: F.group_norm(x, 2), [gx], **tol)
    g.set_state(state)
    _check_against_f64(lambda x: bc.softmax(x, dim=1), lambda x: torch.softmax(x, 1), [x], **tol)
    _check_against_f64(lambda x: bc.log_softmax(x, dim=-1), lambda x: torch.log_softmax(x, -1), [x], **tol)
    lw, lb = r(48, 64), r(48)
    for act, ref_act in (("none", lambda v: v), ("relu", F.relu), ("gelu", F.gelu),
                         ("gelu_tanh", lambda v: F.gelu(v, approximate="tanh")), ("silu", F.silu)):
        _check_against_f64(lambda x, w, b: bc.linear(x, w, b, activation=act),
                           lambda x, w, b: ref_act(F.linear(x, w, b)), [x, lw, lb], **tol)
    _check_against_f64(lambda x, w: bc.linear(x, w), lambda x, w: F.linear(x, w), [x, lw], **tol)
    # batches the GEMM takes: equal batch dims, and a 2-D b broadcast over a's batch (its gradient
    # summed back to [K, N])
    _check_against_f64(lambda a, c: bc.matmul(a, c), lambda a, c: a @ c, [r(4, 5, 16), r(4, 16, 7)], **tol)
    _check_against_f64(lambda a, c: bc.matmul(a, c), lambda a, c: a @ c, [r(2, 3, 5, 16), r(16, 7)], **tol)
    _check_against_f64(lambda x: bc.sum(x, dim=(0, 2)), lambda x: x.sum((0, 2)), [x], **tol)
    _check_against_f64(lambda x: bc.mean(x, dim=1, keepdim=True), lambda x: x.mean(1, keepdim=True), [x], **tol)
    # elementwise through the routing, broadcast gradients summed back
    a, c = r(4, 6, 8), r(6, 1)
    _check_against_f64(lambda a: bc.silu(a), F.silu, [a], **tol)
    _check_against_f64(lambda a: bc.gelu_tanh(a), lambda a: F.gelu(a, approximate="tanh"), [a], **tol)
    _check_against_f64(lambda a, c: bc.add(a, c, alpha=0.5), lambda a, c: a + 0.5 * c, [a, c], **tol)
    _check_against_f64(lambda a, c: bc.mul(a, c), lambda a, c: a * c, [a, c], **tol)
    _check_against_f64(lambda a: bc.mul(a, 3.0), lambda a: a * 3.0, [a], **tol)
    cond = torch.rand(4, 6, 8, generator=g, device=DEV) > 0.5
    _check_against_f64(lambda a, c: bc.where(cond, a, c), lambda a, c: torch.where(cond, a, c), [a, c], **tol)
    h = r(4, 2 * 24)
    _check_against_f64(lambda h: bc.swiglu(h), lambda h: F.silu(h[..., :24]) * h[..., 24:], [h], **tol)
    gt, up = r(4, 24), r(4, 24)
    _check_against_f64(lambda p, q: bt.swiglu(p, q), lambda p, q: F.silu(p) * q, [gt, up], **tol)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gradients(reduction):
    g = gen(5)
    x = torch.randn(2, 7, 300, generator=g, device=DEV, requires_grad=True)
    t = torch.randint(0, 300, (2, 7), generator=g, device=DEV)
    t[0, 2] = -100
    w = torch.rand(300, generator=g, device=DEV) + 0.5
    for kw in (dict(), dict(weight=w), dict(label_smoothing=0.1)):
        _check_against_f64(
            lambda x: bc.cross_entropy(x, t, reduction=reduction, **kw),
            lambda x: F.cross_entropy(x.reshape(-1, 300), t.reshape(-1), reduction=reduction,
                                      **{k: (v.double() if torch.is_tensor(v) else v) for k, v in kw.items()}
                                      ).reshape(t.shape if reduction == "none" else ()),
            [x], atol=1e-5, rtol=1e-4)


def test_no_silent_detach():
    x = _rows()
    assert bc.rms_norm(x).grad_fn is not None
    assert bc.silu(x).requires_grad and bc.softmax(x, dim=-1).requires_grad
    with pytest.raises(bc.errors.Unsupported, match="no autograd formula"):
        bc.cumsum(x, 1)
    with torch.no_grad():
        assert not bc.silu(x).requires_grad and bc.cumsum(x, 1).shape == x.shape
    assert not bc.isnan(x).requires_grad  # bool: nothing to differentiate
    y = bc.silu(x.detach())
    assert y.grad_fn is None


def test_layout_kept_like_empty_like():
    g = gen(6)
    x = torch.randn(512, 384, generator=g, device=DEV, dtype=torch.bfloat16).t()
    for y, want in ((bc.silu(x), F.silu(x)), (ops.silu(x), F.silu(x)), (bc.add(x, x), x + x)):
        assert y.stride() == x.stride()
        torch.testing.assert_close(y, want, atol=1e-2, rtol=1e-2)
    assert bc.ElementwisePlan.select(bc.ElementwiseDescriptor(
        "silu", [bc.TensorSpec(x.shape, bc.bfloat16, x.stride())], bc.TensorSpec(x.shape, bc.bfloat16, x.stride()))
    ).sku.layout == "contiguous"


class Block(torch.nn.Module):
    def __init__(self, h=64, i=96, v=128):
        super().__init__()
        self.norm = bt.RMSNorm(h, compile_as="baracuda")  # our ops inside the compiled graph
        self.ln = bt.LayerNorm(h)
        self.mlp = bt.GatedMLP(h, i, compile_as="baracuda")
        self.proj = bt.Linear(h, h, activation="gelu_tanh")
        self.head = bt.Linear(h, v, bias=False)
        self.soft = bt.Softmax(-1)
        self.loss = bt.CrossEntropyLoss()

    def forward(self, x, t):
        h = x + self.mlp(self.norm(x))
        h = self.proj(self.ln(h))
        logits = self.head(h)
        return self.loss(logits, t) + 1e-3 * self.soft(logits).amax()


def test_torch_compile_fullgraph_and_cuda_graphs():
    torch.manual_seed(0)
    m = Block().to(DEV)
    x = torch.randn(4, 16, 64, device=DEV)
    t = torch.randint(0, 128, (4, 16), device=DEV)

    def step(model):
        model.zero_grad(set_to_none=True)
        loss = model(x, t)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    want, gwant = step(m)
    torch._dynamo.reset()
    compiled = torch.compile(m, fullgraph=True)
    got, ggot = step(compiled)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    for a, b in zip(ggot, gwant):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    torch._dynamo.reset()
    graphs = torch.compile(m, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):
        got, _ = step(graphs)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_compile_as_torch_traces_torch_formula():
    """compile_as="torch" (the default): under torch.compile the norm and MLP are torch's ops
    (no baracuda op in the graph), with the same values and gradients as the eager modules."""
    torch.manual_seed(0)
    norm, mlp = bt.RMSNorm(64).to(DEV), bt.GatedMLP(64, 96).to(DEV)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(4, 16, 64, device=DEV, requires_grad=True)
    r = torch.randn(4, 16, 64, device=DEV)

    def f(x):
        y, h = norm(x, r)
        return mlp(y) + h

    want = f(x)
    gwant = torch.autograd.grad(want.square().sum(), [x, norm.weight])
    seen = []

    def backend(gm, inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm

    torch._dynamo.reset()
    got = torch.compile(f, backend=backend, fullgraph=True)(x)
    assert seen and not any("baracuda" in t for t in seen), seen
    ggot = torch.autograd.grad(got.square().sum(), [x, norm.weight])
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    for a, b in zip(ggot, gwant):
        torch.testing.assert_close(a, b, atol=1e-3, rtol=1e-3)
    torch._dynamo.reset()


def _llama(patched, dtype, seed=0):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(cfg).to(DEV, dtype)
    return bt.patch(model) if patched else model


def _train(model, steps, seed=1):
    g = torch.Generator(device=DEV).manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(steps):
        ids = torch.randint(0, 32000, (4, 64), generator=g, device=DEV)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def test_patched_llama_matches_in_float32():
    ref, ours = _llama(False, torch.float32), _llama(True, torch.float32)
    ids = torch.randint(0, 32000, (2, 48), device=DEV)
    a = ref(input_ids=ids, labels=ids)
    b = ours(input_ids=ids, labels=ids)
    torch.testing.assert_close(b.logits, a.logits, atol=2e-4, rtol=2e-4)
    torch.testing.assert_close(b.loss, a.loss, atol=2e-5, rtol=2e-5)


def test_patched_llama_trains_like_unpatched_bf16():
    ref = _train(_llama(False, torch.bfloat16), 50)
    ours = _train(_llama(True, torch.bfloat16), 50)
    assert all(math.isfinite(v) for v in ours)
    for i, (a, b) in enumerate(zip(ref, ours)):
        assert abs(a - b) <= 0.03 * abs(a) + 0.05, (i, a, b, ref, ours)
    torch._dynamo.reset()
    comp = _train(torch.compile(_llama(True, torch.bfloat16)), 10)
    for i, (a, b) in enumerate(zip(ref[:10], comp)):
        assert abs(a - b) <= 0.03 * abs(a) + 0.05, (i, a, b)


def test_patched_llama_attention_runs_ours_in_bf16(monkeypatch):
    """patch() routes a Llama's attention (transformers' AttentionInterface) to bt.attention: every
    layer's call lands there, logits and gradients agree with the unpatched model; a padding mask
    (left padding) runs bt.attention on packed sequences, the valid positions' logits agreeing, and a
    mask with a hole goes to transformers' SDPA path (bt.attention not called)."""
    ref, ours = _llama(False, torch.bfloat16), _llama(False, torch.bfloat16)
    bt.patch(ours, rms_norm=False, loss=False)
    assert ours.baracuda_patched["attention"] == 1
    calls = []
    real = bt.attention
    monkeypatch.setattr(bt, "attention", lambda *a, **k: calls.append(k.get("causal")) or real(*a, **k))
    ids = torch.randint(0, 32000, (2, 96), device=DEV)
    a, b = ref(input_ids=ids, labels=ids), ours(input_ids=ids, labels=ids)
    assert calls == [True] * len(ours.model.layers)
    torch.testing.assert_close(b.logits.float(), a.logits.float(), atol=0.15, rtol=0.05)
    a.loss.backward()
    b.loss.backward()
    for (name, pa), pb in zip(ref.named_parameters(), ours.parameters()):
        assert pb.grad is not None and torch.isfinite(pb.grad).all(), name
        rel = (pb.grad.float() - pa.grad.float()).norm() / pa.grad.float().norm().clamp_min(1e-12)
        assert rel < 0.1, (name, float(rel))  # two bf16 attention backends: same gradient up to rounding
    calls.clear()
    mask = torch.ones_like(ids)
    mask[0, :10] = 0
    valid = mask.bool()
    torch.testing.assert_close(ours(input_ids=ids, attention_mask=mask).logits.float()[valid],
                               ref(input_ids=ids, attention_mask=mask).logits.float()[valid], atol=0.15, rtol=0.05)
    assert calls == [True] * len(ours.model.layers)
    calls.clear()
    mask[0, :10] = 1
    mask[1, 40] = 0
    torch.testing.assert_close(ours(input_ids=ids, attention_mask=mask).logits.float(),
                               ref(input_ids=ids, attention_mask=mask).logits.float(), atol=0.15, rtol=0.05)
    assert calls == []


def test_attention_module():
    """bt.Attention: the rules fixed at construction, learned sinks that receive a gradient, and
    deterministic=True giving the same gradient bits on a repeat (cuDNN's default backward would not
    promise that)."""
    m = bt.Attention(causal=True, sink_heads=4, deterministic=True, device=DEV)
    with torch.no_grad():
        m.sinks.copy_(torch.linspace(-1, 1, 4))
    g = torch.Generator(device=DEV).manual_seed(3)
    q = torch.randn(2, 50, 4, 64, generator=g, device=DEV, dtype=torch.bfloat16).requires_grad_()
    k, v = (torch.randn(2, 50, 2, 64, generator=g, device=DEV, dtype=torch.bfloat16).requires_grad_()
            for _ in range(2))
    out = m(q, k, v)
    want = bc.attention(q.detach(), k.detach(), v.detach(), causal=True, sinks=m.sinks.detach())
    assert torch.equal(out.detach(), want)
    gout = torch.randn(out.shape, generator=g, device=DEV, dtype=out.dtype)
    first = torch.autograd.grad(out, (q, k, v, m.sinks), gout)
    assert all(t is not None and torch.isfinite(t).all() for t in first)
    again = torch.autograd.grad(m(q, k, v), (q, k, v, m.sinks), gout)
    for a, b in zip(first, again):
        assert torch.equal(a, b)


def test_patched_attention_sinks_and_softcap_run_ours_in_bf16(monkeypatch):
    """gpt-oss (attention sinks, s_aux; sliding-window and full layers) and Gemma-2 (logit softcap):
    patch() runs the 16-bit calls without padding on bt.attention with the sinks / softcap and, on the
    sliding layers, the window (past it too); logits and gradients, the sinks' included, agree with the
    unpatched (eager) model."""
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "GptOssConfig") or not hasattr(transformers, "Gemma2Config"):
        pytest.skip("this transformers has no gpt-oss / Gemma-2")
    cases = [
        (transformers.GptOssForCausalLM, lambda: transformers.GptOssConfig(
            vocab_size=512, hidden_size=256, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=64, num_local_experts=4, num_experts_per_tok=2, sliding_window=16,
            layer_types=["sliding_attention", "full_attention"])),
        (transformers.Gemma2ForCausalLM, lambda: transformers.Gemma2Config(
            vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=64, sliding_window=16, attn_logit_softcapping=20.0)),
    ]
    calls = []
    real = bt.attention
    monkeypatch.setattr(bt, "attention", lambda *a, **k: calls.append((k.get("sinks") is not None,
                                                                       k.get("softcap"), k.get("window")))
                        or real(*a, **k))
    for cls, make_cfg in cases:
        torch.manual_seed(0)
        ref = cls(make_cfg()).to(DEV, torch.bfloat16)
        for m in ref.modules():
            if isinstance(getattr(m, "sinks", None), torch.nn.Parameter):
                torch.nn.init.normal_(m.sinks, std=2.0)
        ours = cls(make_cfg()).to(DEV, torch.bfloat16)
        ours.load_state_dict(ref.state_dict())
        bt.patch(ours, rms_norm=False, loss=False)
        calls.clear()
        ids = torch.randint(0, 512, (2, 12), device=DEV)  # shorter than the window: no mask on any layer
        a, b = ref(input_ids=ids, labels=ids), ours(input_ids=ids, labels=ids)
        sinks, softcap = cls is transformers.GptOssForCausalLM, 20.0 if cls is transformers.Gemma2ForCausalLM else None
        layers = [(sinks, softcap, (15, -1)), (sinks, softcap, None)]  # a sliding layer, a full one
        assert calls == layers, calls
        torch.testing.assert_close(b.logits.float(), a.logits.float(), atol=0.15, rtol=0.05)
        a.loss.backward()
        b.loss.backward()
        for (name, pa), pb in zip(ref.named_parameters(), ours.parameters()):
            if pa.grad is None:
                continue
            assert pb.grad is not None and torch.isfinite(pb.grad).all(), name
            rel = (pb.grad.float() - pa.grad.float()).norm() / pa.grad.float().norm().clamp_min(1e-12)
            assert rel < 0.1, (cls.__name__, name, float(rel))
        calls.clear()
        ids = torch.randint(0, 512, (2, 40), device=DEV)  # past the window
        torch.testing.assert_close(ours(input_ids=ids).logits.float(), ref(input_ids=ids).logits.float(),
                                   atol=0.15, rtol=0.05)
        assert calls == layers, calls
