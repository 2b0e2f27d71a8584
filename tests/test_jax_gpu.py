"""baracuda.jax on the GPU: every op and its gradient against plain JAX in float64 (our kernels in
float64 too), float32 / bfloat16 forwards against the float64 reference, a jitted training step
against the same step in plain JAX, vmap, and typed errors raised while tracing."""
import contextlib

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

jax = pytest.importorskip("jax")
jnp = jax.numpy

import baracuda  # noqa: E402
from baracuda.errors import InvalidArgument  # noqa: E402

bj = pytest.importorskip("baracuda.jax")
if not bj.available():
    pytest.skip("this build has no XLA FFI handler", allow_module_level=True)


def _x64():
    for owner in (jax, getattr(jax, "experimental", None)):
        fn = getattr(owner, "enable_x64", None)
        if fn is not None:
            return fn(True) if owner is jax else fn()
    return contextlib.nullcontext()


RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float64, scale=1.0):
    return jnp.asarray(RNG.standard_normal(shape) * scale, dtype=dtype)


def ref_rms_norm(x, w, eps=1e-6):
    y = x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps)
    return y if w is None else y * w


def ref_layer_norm(x, w, b, eps=1e-5):
    mu = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
    y = (x - mu) * jax.lax.rsqrt(var + eps)
    y = y if w is None else y * w
    return y if b is None else y + b


ACT = {"none": lambda v: v, "relu": jax.nn.relu, "gelu": lambda v: jax.nn.gelu(v, approximate=False),
       "gelu_tanh": lambda v: jax.nn.gelu(v, approximate=True), "silu": jax.nn.silu}


def ref_linear(x, w, b, activation):
    y = jnp.matmul(x, w.T, precision="highest")
    return ACT[activation](y if b is None else y + b)


def ref_cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    logp = jax.nn.log_softmax(logits, -1)
    valid = target != ignore_index
    t = jnp.where(valid, target, 0)
    nll = -jnp.take_along_axis(logp, t[:, None], 1)[:, 0]
    smooth = -jnp.mean(logp, -1)
    loss = jnp.where(valid, (1 - label_smoothing) * nll + label_smoothing * smooth, 0.0)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / valid.sum()


def check_value_and_grads(ours, ref, args, argnums, rtol=1e-9, atol=1e-9):
    """Forward and the gradient of <out, cotangent> w.r.t. argnums match the reference."""
    out = ours(*args)
    expect = ref(*args)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expect), rtol=rtol, atol=atol)
    cot = rand(*np.shape(expect))

    def scalar(f):
        return lambda *a: jnp.sum(f(*a) * cot)

    g = jax.grad(scalar(ours), argnums=argnums)(*args)
    gr = jax.grad(scalar(ref), argnums=argnums)(*args)
    for i, (a, b) in enumerate(zip(g, gr)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol * 10, atol=atol * 10,
                                   err_msg=f"gradient {i}")


@pytest.mark.parametrize("shape", [(7, 33), (2, 3, 256), (1, 4096)])
@pytest.mark.parametrize("weight", [True, False])
def test_rms_norm_f64(shape, weight):
    with _x64():
        x, w = rand(*shape), (rand(shape[-1]) if weight else None)
        check_value_and_grads(lambda x, w: bj.rms_norm(x, w), lambda x, w: ref_rms_norm(x, w), (x, w),
                              (0, 1) if weight else (0,))


@pytest.mark.parametrize("shape", [(5, 40), (3, 2, 1000)])
def test_layer_norm_f64(shape):
    with _x64():
        x, w, b = rand(*shape), rand(shape[-1]), rand(shape[-1])
        check_value_and_grads(lambda x, w, b: bj.layer_norm(x, w, b), ref_layer_norm, (x, w, b), (0, 1, 2))


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_f64(name, axis):
    with _x64():
        x = rand(6, 17, 9)
        ref = getattr(jax.nn, name)
        check_value_and_grads(lambda x: getattr(bj, name)(x, axis), lambda x: ref(x, axis=axis), (x,), (0,))


@pytest.mark.parametrize("shapes", [((8, 16), (16, 24)), ((2, 5, 16), (16, 3)), ((4, 7, 16), (4, 16, 9)),
                                    ((7, 16), (3, 16, 5)), ((1, 7, 16), (3, 16, 5))])
def test_matmul_f64(shapes):
    with _x64():
        a, b = rand(*shapes[0]), rand(*shapes[1])
        check_value_and_grads(bj.matmul, lambda a, b: jnp.matmul(a, b, precision="highest"), (a, b), (0, 1))


@pytest.mark.parametrize("activation", bj.ACTIVATIONS)
@pytest.mark.parametrize("bias", [True, False])
def test_linear_f64(activation, bias):
    with _x64():
        x, w = rand(3, 5, 32), rand(24, 32)
        b = rand(24) if bias else None
        check_value_and_grads(lambda x, w, b: bj.linear(x, w, b, activation),
                              lambda x, w, b: ref_linear(x, w, b, activation), (x, w, b), (0, 1, 2) if bias else (0, 1))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_f64(reduction, smoothing):
    with _x64():
        logits = rand(9, 1000)
        target = jnp.asarray(RNG.integers(0, 1000, 9), dtype=jnp.int64).at[3].set(-100)
        kw = dict(label_smoothing=smoothing, reduction=reduction)
        check_value_and_grads(lambda z: bj.cross_entropy(z, target, **kw),
                              lambda z: ref_cross_entropy(z, target, **kw), (logits,), (0,))


@pytest.mark.parametrize("name,ref", [("silu", jax.nn.silu), ("exp", jnp.exp), ("tanh", jnp.tanh),
                                      ("gelu", lambda v: jax.nn.gelu(v, approximate=False))])
def test_unary_f64(name, ref):
    with _x64():
        check_value_and_grads(getattr(bj, name), ref, (rand(3, 129),), (0,))


@pytest.mark.parametrize("name,ref", [("add", jnp.add), ("mul", jnp.multiply), ("sub", jnp.subtract),
                                      ("div", jnp.divide), ("maximum", jnp.maximum)])
def test_binary_broadcast_f64(name, ref):
    with _x64():
        a, b = rand(4, 1, 33), rand(5, 1) + 3.0  # div stays away from zero
        check_value_and_grads(getattr(bj, name), ref, (a, b), (0, 1))


REDUCTION_REFS = {
    "sum": jnp.sum, "mean": jnp.mean, "amax": jnp.max, "amin": jnp.min, "prod": jnp.prod,
    "norm2": lambda x, axis=None, keepdims=False: jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=keepdims)),
    "logsumexp": lambda x, axis=None, keepdims=False: jax.scipy.special.logsumexp(x, axis=axis, keepdims=keepdims),
    "var": lambda x, axis=None, keepdims=False: jnp.var(x, axis=axis, keepdims=keepdims, ddof=1),
    "std": lambda x, axis=None, keepdims=False: jnp.std(x, axis=axis, keepdims=keepdims, ddof=1),
}


@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), ((0, 2), True), (-1, True)])
@pytest.mark.parametrize("name", sorted(REDUCTION_REFS))
def test_reductions_and_gradients_f64(name, axis, keepdims):
    """baracuda.jax reductions under jit, gradients through the table's backward ops (amax / amin:
    distinct values, so the gradient has one owner per slice)."""
    with _x64():
        x = rand(5, 7, 6) + (0.0 if name != "prod" else 2.0)
        if name in ("amax", "amin"):
            x = x + jnp.arange(x.size, dtype=x.dtype).reshape(x.shape) * 1e-3
        check_value_and_grads(lambda x: getattr(bj, name)(x, axis, keepdims),
                              lambda x: REDUCTION_REFS[name](x, axis=axis, keepdims=keepdims), (x,), (0,))


def test_reductions_without_gradients_and_x64_rules():
    with _x64():
        x = rand(4, 9)
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: bj.argmax(x, 1))(x)), np.argmax(np.asarray(x), 1))
        np.testing.assert_array_equal(np.asarray(bj.argmin(x, 0, keepdims=True)),
                                      np.argmin(np.asarray(x), 0)[None])
        assert bj.argmax(x, 1).dtype == jnp.int64
        b = x > 0
        np.testing.assert_array_equal(np.asarray(bj.any(b, 1)), np.asarray(b).any(1))
        np.testing.assert_array_equal(np.asarray(bj.all(b, 0)), np.asarray(b).all(0))
        np.testing.assert_array_equal(np.asarray(bj.count_nonzero(b, 1)), np.asarray(b).sum(1))
        i = jnp.asarray(RNG.integers(-50, 50, (3, 11)), dtype=jnp.int32)
        assert bj.sum(i, 1).dtype == jnp.int64
        np.testing.assert_array_equal(np.asarray(bj.sum(i, 1)), np.asarray(i).sum(1))
        s = bj.sum(x.astype(jnp.bfloat16), 1, dtype=jnp.float32)
        assert s.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(s), np.asarray(x.astype(jnp.bfloat16).astype(jnp.float64)).sum(1),
                                   rtol=1e-5, atol=1e-5)
    x32 = jnp.asarray(RNG.standard_normal((4, 9)), dtype=jnp.float32)
    if jax.dtypes.canonicalize_dtype(jnp.int64) != jnp.int64:  # JAX's default: no int64
        assert bj.argmax(x32, 1).dtype == jnp.int32
        with pytest.raises(InvalidArgument, match="jax_enable_x64"):
            bj.sum(jnp.ones((3, 4), jnp.int32), 1)
        with pytest.raises(InvalidArgument, match="jax_enable_x64"):
            bj.cummax(x32, 1)


SCAN_REFS = {"cumsum": jnp.cumsum, "cumprod": jnp.cumprod,
             "logcumsumexp": lambda x, axis: jax.lax.cumlogsumexp(x, axis=axis % x.ndim)}


@pytest.mark.parametrize("axis", [0, -1, 1])
@pytest.mark.parametrize("name", sorted(SCAN_REFS))
def test_scans_and_gradients_f64(name, axis):
    with _x64():
        x = rand(4, 300, 3) * (0.2 if name == "cumprod" else 1.0) + (1.0 if name == "cumprod" else 0.0)
        check_value_and_grads(lambda x: getattr(bj, name)(x, axis), lambda x: SCAN_REFS[name](x, axis=axis), (x,), (0,))


def test_cummax_cummin_and_functional_routing():
    with _x64():
        x = rand(6, 40)
        v, i = jax.jit(lambda x: bj.cummax(x, 1))(x)
        np.testing.assert_array_equal(np.asarray(v), np.maximum.accumulate(np.asarray(x), 1))
        assert i.dtype == jnp.int64
        np.testing.assert_array_equal(np.take_along_axis(np.asarray(x), np.asarray(i), 1), np.asarray(v))
        v, _ = bj.cummin(x, 0)
        np.testing.assert_array_equal(np.asarray(v), np.minimum.accumulate(np.asarray(x), 0))
        # baracuda.<op> on JAX arrays: the same custom calls, jit and grad included
        g = jax.jit(jax.grad(lambda x: baracuda.sum(baracuda.cumsum(x, 1) ** 2, dim=(0, 1))))(x)
        want = jax.grad(lambda x: jnp.sum(jnp.cumsum(x, 1) ** 2))(x)
        np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(np.asarray(baracuda.var(x, 1, correction=0, keepdim=True)),
                                   np.asarray(jnp.var(x, 1, keepdims=True)), rtol=1e-10, atol=1e-12)


def test_swiglu_and_leaky_relu_params_f64():
    with _x64():
        g, u = rand(6, 64), rand(6, 64)
        check_value_and_grads(bj.swiglu, lambda g, u: jax.nn.silu(g) * u, (g, u), (0, 1))
        check_value_and_grads(lambda x: bj.leaky_relu(x, negative_slope=0.2),
                              lambda x: jax.nn.leaky_relu(x, 0.2), (rand(3, 50),), (0,))


@pytest.mark.parametrize("dtype,tol", [(jnp.float32, 2e-5), (jnp.bfloat16, 2e-2)])
def test_low_precision_forwards_against_f64(dtype, tol):
    x64, w64, W64 = RNG.standard_normal((64, 512)), RNG.standard_normal(512), RNG.standard_normal((256, 512)) / 20
    x, w, W = (jnp.asarray(v, dtype) for v in (x64, w64, W64))
    with _x64():
        xr, wr, Wr = (jnp.asarray(np.asarray(v, np.float64)) for v in (x, w, W))  # the rounded inputs
        refs = [ref_rms_norm(xr, wr), jax.nn.softmax(xr, -1), ref_linear(xr, Wr, None, "gelu")]
    with jax.default_matmul_precision("highest"):  # float32 GEMMs in float32 (the default is tf32)
        got = [bj.rms_norm(x, w), bj.softmax(x), bj.linear(x, W, activation="gelu")]
    for g, r in zip(got, refs):
        assert g.dtype == dtype
        np.testing.assert_allclose(np.asarray(g.astype(jnp.float32)), np.asarray(r), rtol=tol, atol=tol)


def test_jit_training_step_matches_plain_jax():
    """An MLP + RMSNorm + softmax cross-entropy SGD step under jax.jit, ours vs plain JAX, both in full
    float32 (jax_default_matmul_precision "highest": our GEMMs follow it as jnp.matmul does)."""
    with jax.default_matmul_precision("highest"):
        _training_step_matches_plain_jax()


def _training_step_matches_plain_jax():
    k = jax.random.split(jax.random.PRNGKey(0), 6)
    d, h, v, n = 128, 256, 1000, 64
    params = {"norm": 1.0 + 0.1 * jax.random.normal(k[0], (d,)),
              "w1": jax.random.normal(k[1], (h, d)) / np.sqrt(d), "b1": jnp.zeros((h,)),
              "w2": jax.random.normal(k[2], (v, h)) / np.sqrt(h)}
    x = jax.random.normal(k[3], (n, d))
    target = jax.random.randint(k[4], (n,), 0, v)

    def model(lib):
        def loss_fn(p, x, target):
            if lib == "ours":
                hdn = bj.linear(bj.rms_norm(x, p["norm"]), p["w1"], p["b1"], activation="gelu")
                return bj.cross_entropy(bj.linear(hdn, p["w2"]), target)
            hdn = ref_linear(ref_rms_norm(x, p["norm"]), p["w1"], p["b1"], "gelu")
            return ref_cross_entropy(ref_linear(hdn, p["w2"], None, "none"), target)

        @jax.jit
        def step(p, x, target):
            loss, g = jax.value_and_grad(loss_fn)(p, x, target)
            return loss, jax.tree_util.tree_map(lambda a, b: a - 0.5 * b, p, g)
        return step

    ours, ref = model("ours"), model("ref")
    p_ours, p_ref = params, params
    before = baracuda._C.xla_plan_count()
    for i in range(5):
        l_ours, p_ours = ours(p_ours, x, target)
        l_ref, p_ref = ref(p_ref, x, target)
        np.testing.assert_allclose(float(l_ours), float(l_ref), rtol=1e-5, err_msg=f"step {i}")
        if i == 0:
            after_first = baracuda._C.xla_plan_count()
    assert after_first > before and baracuda._C.xla_plan_count() == after_first  # traced once
    for name in params:
        np.testing.assert_allclose(np.asarray(p_ours[name]), np.asarray(p_ref[name]), rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_f32_gemms_follow_jax_default_matmul_precision():
    """bj.matmul / bj.linear (with a bias), forward and gradients, in float32: tf32 under JAX's default
    precision (as jnp.matmul on GPU: within tf32's rounding, and measurably off float32), full float32
    under jax_default_matmul_precision "highest" (a trace-time setting: each traces its own plans)."""
    k = jax.random.split(jax.random.PRNGKey(36), 4)
    x = jax.random.normal(k[0], (64, 512))
    w = jax.random.normal(k[1], (96, 512))
    b = jax.random.normal(k[2], (96,))
    gy = jax.random.normal(k[3], (64, 96))
    x64, w64, b64, gy64 = (np.asarray(v, np.float64) for v in (x, w, b, gy))
    # (f64 reference, |.| scale of each sum): linear's y, grad_x, grad_w, grad_b, and matmul's output
    want = [(x64 @ w64.T + b64, np.abs(x64) @ np.abs(w64).T + np.abs(b64)), (gy64 @ w64, np.abs(gy64) @ np.abs(w64)),
            (gy64.T @ x64, np.abs(gy64).T @ np.abs(x64)), (gy64.sum(0), np.abs(gy64).sum(0)),
            (x64 @ w64.T, np.abs(x64) @ np.abs(w64).T)]

    def run():
        y, vjp = jax.vjp(lambda x, w, b: bj.linear(x, w, b), x, w, b)
        gx, gw, gb = vjp(gy)
        m = jax.jit(bj.matmul)(x, w.T)
        return [float(np.max(np.abs(np.asarray(got, np.float64) - ref) / scale))
                for got, (ref, scale) in zip((y, gx, gw, gb, m), want)]

    fast = run()
    with jax.default_matmul_precision("highest"):
        full = run()
    assert max(full) < 1.2e-5, full                 # float32 accumulation only
    assert max(fast) < 4.5e-3, fast                 # inputs rounded to a 10-bit mantissa ...
    for i in (0, 1, 2, 4):                          # ... which shows on every GEMM (grad_b is a plain sum)
        assert fast[i] > 10 * full[i], (i, fast, full)


def test_vmap_runs_sequentially():
    x = rand(3, 5, 40, dtype=jnp.float32)
    np.testing.assert_allclose(np.asarray(jax.vmap(bj.softmax)(x)), np.asarray(jax.nn.softmax(x, -1)), rtol=1e-5,
                               atol=1e-6)
    w = rand(3, 40, dtype=jnp.float32)
    got = jax.vmap(bj.rms_norm)(x, w)
    np.testing.assert_allclose(np.asarray(got), np.asarray(jax.vmap(ref_rms_norm)(x, w)), rtol=1e-5, atol=1e-5)


def test_bad_input_raises_typed_error_while_tracing():
    x = jnp.ones((4, 8), jnp.float32)
    with pytest.raises(InvalidArgument, match="weight"):
        jax.jit(bj.rms_norm)(x, jnp.ones((7,), jnp.float32))
    with pytest.raises(InvalidArgument, match="activation"):
        bj.linear(x, jnp.ones((3, 8), jnp.float32), activation="tanh")
    with pytest.raises(InvalidArgument, match="logits"):
        bj.cross_entropy(jnp.ones((2, 3, 4)), jnp.zeros((2,), jnp.int32))
    with pytest.raises(InvalidArgument, match="a.shape"):
        bj.matmul(x, jnp.ones((7, 3), jnp.float32))
    with pytest.raises(baracuda.errors.BaracudaError):  # select() refuses the dtype by name
        bj.rms_norm(jnp.ones((4, 8), jnp.int32))


def test_features_report_the_handler():
    assert baracuda.features()["xla_ffi"] is True


def test_functional_api_on_jax_arrays_runs_through_xla():
    """bc.<elementwise op> on JAX arrays is a baracuda.jax custom call: eager (no host sync of ours)
    and inside jax.jit, scalars included."""
    x = rand(64, 33, dtype=jnp.bfloat16)
    y = baracuda.silu(x)
    assert isinstance(y, jax.Array) and y.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(y, np.float32), np.asarray(jax.nn.silu(x.astype(jnp.float32))), rtol=2e-2,
                               atol=2e-2)
    f = jax.jit(lambda x: baracuda.add(baracuda.silu(x), 2.0))
    x32 = x.astype(jnp.float32)
    np.testing.assert_allclose(np.asarray(f(x32)), np.asarray(jax.nn.silu(x32) + 2.0), rtol=1e-5, atol=1e-6)
    g = jax.grad(lambda x: baracuda.mul(baracuda.swiglu(x, x), 3.0).sum())(x32)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(lambda x: (3 * jax.nn.silu(x) * x).sum())(x32)),
                               rtol=1e-5, atol=1e-5)


def test_functional_families_on_jax_arrays_jit_and_grad():
    """bc.rms_norm / linear / softmax / cross_entropy on JAX arrays under jax.jit and jax.grad, as
    baracuda.jax; a call using what baracuda.jax does not cover (save_stats) takes the general path.
    Full float32 GEMMs (jax_default_matmul_precision "highest"), as the reference."""
    with jax.default_matmul_precision("highest"):
        _functional_families_on_jax_arrays()


def _functional_families_on_jax_arrays():
    k = jax.random.split(jax.random.PRNGKey(1), 4)
    x, w = jax.random.normal(k[0], (8, 64)), 1.0 + 0.1 * jax.random.normal(k[1], (64,))
    W = jax.random.normal(k[2], (32, 64)) / 8
    t = jax.random.randint(k[3], (8,), 0, 32)

    def ours(x, w, W):
        h = baracuda.linear(baracuda.rms_norm(x, w), W, activation="silu")
        return baracuda.cross_entropy(baracuda.log_softmax(h, dim=-1), t, label_smoothing=0.1)

    def ref(x, w, W):
        h = ref_linear(ref_rms_norm(x, w), W, None, "silu")
        return ref_cross_entropy(jax.nn.log_softmax(h, -1), t, label_smoothing=0.1)

    v, g = jax.jit(jax.value_and_grad(ours, argnums=(0, 1, 2)))(x, w, W)
    vr, gr = jax.value_and_grad(ref, argnums=(0, 1, 2))(x, w, W)
    np.testing.assert_allclose(float(v), float(vr), rtol=1e-5)
    for a, b in zip(g, gr):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    y, rstd = baracuda.rms_norm(x, w, save_stats=True)  # eager, general path
    np.testing.assert_allclose(np.asarray(y), np.asarray(ref_rms_norm(x, w)), rtol=1e-5, atol=1e-5)


def ref_attention(q, k, v, causal):
    """Plain JAX attention over [B, S, H, D] (GQA by repeating kv heads), causal bottom-right aligned."""
    g = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, g, axis=2), jnp.repeat(v, g, axis=2)
    s = jnp.einsum("bihd,bjhd->bhij", q, k) / np.sqrt(q.shape[-1])
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        mask = jnp.arange(sk)[None, :] <= jnp.arange(sq)[:, None] + (sk - sq)
        s = jnp.where(mask, s, -jnp.inf)
    return jnp.einsum("bhij,bjhd->bihd", jax.nn.softmax(s, axis=-1), v)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_and_gradients_against_jax_f64(causal):
    with _x64():
        q, k, v = rand(2, 33, 4, 32), rand(2, 47, 2, 32), rand(2, 47, 2, 32)
        ours = jax.jit(lambda q, k, v: bj.attention(q, k, v, causal=causal))(q, k, v)
        np.testing.assert_allclose(np.asarray(ours), np.asarray(ref_attention(q, k, v, causal)), rtol=1e-9, atol=1e-9)
        loss = lambda f: (lambda q, k, v: jnp.sum(f(q, k, v) * jnp.cos(jnp.arange(32.0))))  # noqa: E731
        g_ours = jax.grad(loss(lambda q, k, v: bj.attention(q, k, v, causal=causal)), argnums=(0, 1, 2))(q, k, v)
        g_ref = jax.grad(loss(lambda q, k, v: ref_attention(q, k, v, causal)), argnums=(0, 1, 2))(q, k, v)
        for a, b in zip(g_ours, g_ref):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-8, atol=1e-8)


def test_attention_bf16_flash_against_f32():
    q, k, v = (rand(2, 128, 8, 64, dtype=jnp.bfloat16) for _ in range(3))
    ours = jax.jit(lambda q, k, v: bj.attention(q, k, v, causal=True))(q, k, v)
    want = ref_attention(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32), True)
    np.testing.assert_allclose(np.asarray(ours.astype(jnp.float32)), np.asarray(want), rtol=3e-2, atol=3e-2)
    # baracuda.attention on JAX arrays routes here (asynchronous, traceable)
    np.testing.assert_allclose(np.asarray(baracuda.attention(q, k, v, causal=True).astype(jnp.float32)),
                               np.asarray(ours.astype(jnp.float32)), rtol=0, atol=0)


def test_rope_matches_torch_path_and_grad():
    """bj.rope (and baracuda.rope on JAX arrays) against the same plan through torch, and its
    gradient (the inverse rotation) against jax.vjp of a float32 jnp reference."""
    key = jax.random.PRNGKey(7)
    q = jax.random.normal(key, (2, 12, 4, 64), jnp.float32)
    k = jax.random.normal(jax.random.PRNGKey(8), (2, 12, 2, 64), jnp.float32)
    pos = jax.random.randint(key, (2, 12), 0, 1000, jnp.int32)
    inv, _ = baracuda.rope_frequencies(64)

    def ref(x):
        ang = pos.astype(jnp.float32)[..., None] * jnp.asarray(inv, jnp.float32)
        c, s = jnp.cos(ang)[..., None, :], jnp.sin(ang)[..., None, :]
        x1, x2 = x[..., :32], x[..., 32:]
        return jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)

    a, b = jax.jit(lambda q, k, p: bj.rope(q, k, positions=p))(q, k, pos)
    np.testing.assert_allclose(np.asarray(a), np.asarray(ref(q)), atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(np.asarray(b), np.asarray(ref(k)), atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(np.asarray(baracuda.rope(q, positions=pos)), np.asarray(a), atol=0, rtol=0)
    g = jax.grad(lambda q: (bj.rope(q, positions=pos) * q).sum())(q)
    gr = jax.grad(lambda q: (ref(q) * q).sum())(q)
    np.testing.assert_allclose(np.asarray(g), np.asarray(gr), atol=1e-4, rtol=1e-4)


def test_paged_attention_jit_matches_the_functional_path():
    """bj.paged_attention under jax.jit (the lengths a traced argument: a longer context runs the
    same compiled call) equals baracuda.paged_attention on the same arrays, and a dense jnp
    reference for one request."""
    key = jax.random.PRNGKey(3)
    q = jax.random.normal(key, (2, 1, 8, 64), jnp.float32).astype(jnp.bfloat16)
    kc = jax.random.normal(jax.random.PRNGKey(4), (6, 16, 2, 64), jnp.float32).astype(jnp.bfloat16)
    vc = jax.random.normal(jax.random.PRNGKey(5), (6, 16, 2, 64), jnp.float32).astype(jnp.bfloat16)
    table = jnp.asarray([[5, 0, 3], [1, 2, 4]], jnp.int32)
    f = jax.jit(lambda q, kc, vc, t, n: bj.paged_attention(q, kc, vc, t, n, return_lse=True))
    for lens in ([40, 7], [48, 33]):
        n = jnp.asarray(lens, jnp.int32)
        out, lse = f(q, kc, vc, table, n)
        assert out.shape == q.shape and lse.shape == (2, 8, 1)
        np.testing.assert_array_equal(np.asarray(out, np.float32),
                                      np.asarray(baracuda.paged_attention(q, kc, vc, table, n), np.float32))
        keys = jnp.concatenate([kc[p] for p in (5, 0, 3)])[:lens[0]].astype(jnp.float32)  # [S, 2, 64]
        vals = jnp.concatenate([vc[p] for p in (5, 0, 3)])[:lens[0]].astype(jnp.float32)
        qq = q[0, 0].astype(jnp.float32).reshape(2, 4, 64)  # [kv head, group, D]
        s = jnp.einsum("hgd,shd->hgs", qq, keys) / 8.0
        ref = jnp.einsum("hgs,shd->hgd", jax.nn.softmax(s, -1), vals).reshape(8, 64)
        np.testing.assert_allclose(np.asarray(out[0, 0], np.float32), np.asarray(ref), atol=2e-2, rtol=2e-2)


def test_embedding_jit_and_grad():
    """bj.embedding under jax.jit against jnp.take, and its gradient (the deterministic backward, with
    a padding row) against jax.grad of the jnp reference; baracuda.embedding on JAX arrays too."""
    w = jax.random.normal(jax.random.PRNGKey(3), (50, 24), jnp.float32)
    idx = jax.random.randint(jax.random.PRNGKey(4), (6, 9), 0, 50, jnp.int32)
    got = jax.jit(lambda w, i: bj.embedding(i, w))(w, idx)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jnp.take(w, idx, axis=0)))
    np.testing.assert_array_equal(np.asarray(baracuda.embedding(idx, w)), np.asarray(got))
    cot = jax.random.normal(jax.random.PRNGKey(5), (6, 9, 24), jnp.float32)
    g = jax.jit(jax.grad(lambda w: (bj.embedding(idx, w, padding_idx=3) * cot).sum()))(w)
    mask = (idx != 3)[..., None]
    gr = jax.grad(lambda w: (jnp.take(w, idx, axis=0) * cot * mask).sum())(w)
    np.testing.assert_allclose(np.asarray(g), np.asarray(gr), atol=1e-5, rtol=1e-5)
    assert float(jnp.abs(g[3]).max()) == 0.0


def test_moe_routing_jit_and_grad():
    """bj.moe_gate / moe_permute / moe_unpermute under jax.jit against a jnp reference (softmax top-2,
    renormalised), and the gradient of a routed layer w.r.t. x and the logits."""
    T, H, E, k = 24, 16, 6, 2
    x = jax.random.normal(jax.random.PRNGKey(1), (T, H), jnp.float32)
    logits = jax.random.normal(jax.random.PRNGKey(2), (T, E), jnp.float32)
    scale = jax.random.normal(jax.random.PRNGKey(3), (E, H), jnp.float32)

    def ours(x, logits):
        w, ids = bj.moe_gate(logits, k)
        xs, offsets, pos = bj.moe_permute(x, ids, E)
        expert = jnp.repeat(jnp.arange(E), jnp.diff(offsets), total_repeat_length=T * k)
        return bj.moe_unpermute(xs * scale[expert], pos, w)

    def ref(x, logits):
        p = jax.nn.softmax(logits, axis=-1)
        w, ids = jax.lax.top_k(p, k)
        w = w / w.sum(-1, keepdims=True)
        return (x[:, None, :] * scale[ids] * w[..., None]).sum(1)

    np.testing.assert_allclose(np.asarray(jax.jit(ours)(x, logits)), np.asarray(ref(x, logits)), rtol=1e-5, atol=1e-5)
    loss = lambda f: (lambda x, l: (f(x, l) ** 2).sum())  # noqa: E731
    g = jax.jit(jax.grad(loss(ours), argnums=(0, 1)))(x, logits)
    gr = jax.grad(loss(ref), argnums=(0, 1))(x, logits)
    for a, b in zip(g, gr):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)


def test_sample_jit_key_and_seeds():
    """bj.sample under jax.jit: greedy is the first argmax; the same key gives the same tokens and
    another key other ones; per-row top_k; logprobs against log_softmax."""
    logits = jax.random.normal(jax.random.PRNGKey(4), (16, 300), jnp.float32) * 3
    greedy = jax.jit(lambda x, k: bj.sample(x, k, temperature=0.0))(logits, jax.random.PRNGKey(0))
    np.testing.assert_array_equal(np.asarray(greedy), np.asarray(jnp.argmax(logits, -1)))
    draw = jax.jit(lambda x, k: bj.sample(x, k, top_p=0.9))
    a, b = draw(logits, jax.random.PRNGKey(1)), draw(logits, jax.random.PRNGKey(1))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(draw(logits, jax.random.PRNGKey(2))))
    k1 = bj.sample(logits, jax.random.PRNGKey(3), top_k=jnp.ones((16,), jnp.int32))
    np.testing.assert_array_equal(np.asarray(k1), np.asarray(jnp.argmax(logits, -1)))
    tok, lp = bj.sample(logits, seeds=jnp.arange(16, dtype=jnp.int32), return_logprobs=True)
    ref = jnp.take_along_axis(jax.nn.log_softmax(logits, -1), tok[:, None], 1)[:, 0]
    np.testing.assert_allclose(np.asarray(lp), np.asarray(ref), rtol=1e-5, atol=1e-5)


def test_apply_penalties_jit():
    """bj.apply_penalties under jax.jit (the in-place op through an aliased custom call) against the
    same numbers by hand, and the input left as it was when still in use."""
    x = jnp.zeros((2, 10), jnp.float32).at[:, 4].set(5.0).at[1, 2].set(-1.0)
    out_tokens = jnp.asarray([[4, 4, 4], [2, -1, 9]], jnp.int32)
    got = jax.jit(lambda x, t: bj.apply_penalties(x, t, repetition_penalty=2.0, frequency_penalty=1.0))(x, out_tokens)
    want = np.zeros((2, 10), np.float32)
    want[0, 4] = 5.0 / 2.0 - 3.0        # repetition, then frequency x count
    want[1, 4] = 5.0
    want[1, 2] = -1.0 * 2.0 - 1.0
    want[1, 9] = 0.0 * 2.0 - 1.0
    np.testing.assert_allclose(np.asarray(got), want)
    assert float(x[0, 4]) == 5.0  # the caller's array is unchanged


def test_kv_cache_append_through_aliased_outputs():
    """bj.kv_cache_append under jax.jit with donated caches: the slots written, padding skipped, the
    rest of the caches unchanged; then bj.paged_attention reads them."""
    key = jax.random.normal(jax.random.PRNGKey(6), (5, 2, 64), jnp.float32)
    value = key * 2
    kc = jnp.zeros((3, 4, 2, 64), jnp.float32)
    vc = jnp.zeros((3, 4, 2, 64), jnp.float32)
    slots = jnp.asarray([0, 5, -1, 11, 2], jnp.int32)
    step = jax.jit(lambda k, v, kc, vc, s: bj.kv_cache_append(k, v, kc, vc, s), donate_argnums=(2, 3))
    kc2, vc2 = step(key, value, kc, vc, slots)
    want_k = np.zeros((12, 2, 64), np.float32)
    for t, s in enumerate([0, 5, -1, 11, 2]):
        if s >= 0:
            want_k[s] = np.asarray(key[t])
    np.testing.assert_array_equal(np.asarray(kc2).reshape(12, 2, 64), want_k)
    np.testing.assert_array_equal(np.asarray(vc2).reshape(12, 2, 64), want_k * 2)
    q = jax.random.normal(jax.random.PRNGKey(7), (1, 4, 64), jnp.float32)
    out = bj.paged_attention(q, kc2, vc2, jnp.asarray([[0, 1, 2]], jnp.int32), jnp.asarray([3], jnp.int32))
    k3 = want_k[:3]
    s = np.einsum("hd,nd->hn", np.asarray(q[0]), k3[:, 0]) / 8.0  # q heads 0..3 share kv head 0 / 1 by 2
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(out[0, :2]), p[:2] @ (k3[:, 0] * 2), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fp8", [None, jnp.float8_e4m3fn], ids=["bf16", "e4m3"])
def test_rope_cache_append_equals_rope_then_append(fp8):
    """bj.rope with k_cache / v_cache under jax.jit (caches donated): q and k as bj.rope rotates them,
    the caches' bytes as bj.rope then bj.kv_cache_append write them (fp8: quantized with per-head
    scales), padding slots untouched."""
    kq, kk, kv = jax.random.split(jax.random.PRNGKey(11), 3)
    q = jax.random.normal(kq, (7, 4, 64), jnp.float32).astype(jnp.bfloat16)
    k = jax.random.normal(kk, (7, 2, 64), jnp.float32).astype(jnp.bfloat16)
    v = jax.random.normal(kv, (7, 2, 64), jnp.float32).astype(jnp.bfloat16)
    pos = jnp.asarray([3, 9, 0, 40, 7, 1, 22], jnp.int32)
    slots = jnp.asarray([0, 5, -1, 11, 2, 30, 17], jnp.int32)
    cdt = fp8 or jnp.bfloat16
    scales = dict(k_scale=jnp.asarray([0.5, 0.25], jnp.float32), v_scale=jnp.asarray([0.75, 2.0], jnp.float32)) \
        if fp8 else {}
    kc, vc = jnp.zeros((4, 8, 2, 64), cdt), jnp.zeros((4, 8, 2, 64), cdt)
    rq, rk = bj.rope(q, k, positions=pos)
    rkc, rvc = bj.kv_cache_append(rk, v, kc, vc, slots, **scales)
    step = jax.jit(lambda q, k, v, kc, vc, s, p: bj.rope(q, k, positions=p, k_cache=kc, v=v, v_cache=vc,
                                                         slot_mapping=s, **scales), donate_argnums=(3, 4))
    gq, gk, gkc, gvc = step(q, k, v, jnp.zeros_like(kc), jnp.zeros_like(vc), slots, pos)
    np.testing.assert_array_equal(np.asarray(gq), np.asarray(rq))
    np.testing.assert_array_equal(np.asarray(gk), np.asarray(rk))
    as_bytes = lambda t: np.asarray(t).view(np.uint8)  # noqa: E731
    np.testing.assert_array_equal(as_bytes(gkc), as_bytes(rkc))
    np.testing.assert_array_equal(as_bytes(gvc), as_bytes(rvc))
    with pytest.raises(baracuda.errors.InvalidArgument, match="the cache append needs k"):
        bj.rope(q, k_cache=kc, slot_mapping=slots)


def test_merge_attention_states_jit():
    oa, ob = rand(3, 4, 5, 64, dtype=np.float32), rand(3, 4, 5, 64, dtype=np.float32)
    la, lb = rand(3, 4, 5, dtype=np.float32) * 3, rand(3, 4, 5, dtype=np.float32) * 3
    o, lse = jax.jit(bj.merge_attention_states)(oa, la, ob, lb)
    m = jnp.maximum(la, lb)
    wa, wb = jnp.exp(la - m), jnp.exp(lb - m)
    want = (wa[..., None] * oa + wb[..., None] * ob) / (wa + wb)[..., None]
    np.testing.assert_allclose(np.asarray(o), np.asarray(want), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(lse), np.asarray(m + jnp.log(wa + wb)), rtol=1e-5, atol=1e-5)
