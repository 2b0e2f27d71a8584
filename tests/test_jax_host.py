"""baracuda.jax without a GPU: tracing (jax.make_jaxpr) selects and registers plans, one custom call
per op; gradients trace through custom_vjp; bad input raises typed errors while tracing. Skips
where JAX is not installed; the handler-dependent part skips on builds without it."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

import baracuda  # noqa: E402
from baracuda.errors import InvalidArgument, Unsupported  # noqa: E402

bj = pytest.importorskip("baracuda.jax")
needs_handler = pytest.mark.skipif(not bj.available(), reason="this build has no XLA FFI handler")


def _calls(jaxpr):
    """The ffi_call equations of a jaxpr, custom_vjp bodies included."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    found = []
    for e in jaxpr.eqns:
        if e.primitive.name == "ffi_call":
            found.append(e)
        for v in e.params.values():
            if hasattr(v, "eqns") or hasattr(getattr(v, "jaxpr", None), "eqns"):
                found += _calls(v)
    return found


@needs_handler
def test_training_step_traces_to_custom_calls():
    x = jax.ShapeDtypeStruct((4, 8), jnp.float32)
    w = jax.ShapeDtypeStruct((8,), jnp.float32)
    W = jax.ShapeDtypeStruct((16, 8), jnp.float32)
    t = jax.ShapeDtypeStruct((4,), jnp.int32)

    def loss(x, w, W, t):
        h = bj.linear(bj.rms_norm(x, w), W, activation="silu")
        return bj.cross_entropy(bj.add(h, h), t)

    # float32 under JAX's default precision: tf32 (the GEMM plan composes the silu), one call as well
    assert len(_calls(jax.make_jaxpr(loss)(x, w, W, t))) == 4
    with jax.default_matmul_precision("highest"):
        _fused_training_step_traces(loss, x, w, W, t)


def _fused_training_step_traces(loss, x, w, W, t):
    fwd = jax.make_jaxpr(loss)(x, w, W, t)
    assert len(_calls(fwd)) == 4  # rms_norm, linear (silu fused), add, cross_entropy
    assert all(dict(e.params["attributes"])["plan"] >= 0 for e in _calls(fwd))
    count = baracuda._C.xla_plan_count()
    jax.make_jaxpr(loss)(x, w, W, t)
    assert baracuda._C.xla_plan_count() == count  # plans are registered once per descriptor
    grad = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1, 2)))(x, w, W, t)
    # forward (4) + backward: CE, add (2 operands), linear (silu' + 2 GEMMs), rms_norm
    assert len(_calls(grad)) == 4 + 1 + 2 + 3 + 1
    out = jax.eval_shape(jax.grad(loss, argnums=(0, 1, 2)), x, w, W, t)
    assert [o.shape for o in out] == [(4, 8), (8,), (16, 8)]


def test_f32_gemm_precision_follows_jax_default_matmul_precision():
    """float32 GEMMs run in tf32 where jnp.matmul would (JAX's default on GPU), in full float32 under the
    precisions that ask for it; read at trace time."""
    assert bj._tf32(jnp.float32) and not bj._tf32(jnp.bfloat16) and not bj._tf32(jnp.float64)
    for p, want in (("highest", False), ("float32", False), ("F32_F32_F32", False), ("BF16_BF16_F32_X3", False),
                    ("TF32_TF32_F32_X3", False), ("tensorfloat32", True), ("default", True), ("high", True),
                    ("bfloat16", True), ("TF32_TF32_F32", True)):
        with jax.default_matmul_precision(p):
            assert bj._tf32(jnp.float32) == want, p


@needs_handler
def test_f32_gemm_plans_differ_by_precision():
    x = jax.ShapeDtypeStruct((64, 32), jnp.float32)
    W = jax.ShapeDtypeStruct((16, 32), jnp.float32)

    def plan_of():
        (call,) = _calls(jax.make_jaxpr(lambda x, W: bj.linear(x, W))(x, W))
        return dict(call.params["attributes"])["plan"]

    fast = plan_of()
    with jax.default_matmul_precision("highest"):
        full = plan_of()
    assert fast != full and plan_of() == fast


@needs_handler
def test_workspace_is_an_extra_output():
    x = jax.ShapeDtypeStruct((64, 32), jnp.float32)
    W = jax.ShapeDtypeStruct((16, 32), jnp.float32)
    (call,) = _calls(jax.make_jaxpr(lambda x, W: bj.linear(x, W))(x, W))
    avals = call.params["result_avals"]
    assert avals[0].shape == (64, 16)
    if len(avals) == 2:  # cuBLASLt's workspace, when the plan wants one
        assert avals[1].dtype == np.uint8


@needs_handler
def test_select_errors_surface_while_tracing():
    with pytest.raises(baracuda.errors.BaracudaError):
        jax.make_jaxpr(bj.rms_norm)(jax.ShapeDtypeStruct((4, 8), jnp.int32))


def test_shape_errors_name_the_operand():
    x = jnp.ones((4, 8), jnp.float32)
    with pytest.raises(InvalidArgument, match="weight has shape"):
        jax.make_jaxpr(bj.rms_norm)(x, jnp.ones((7,), jnp.float32))
    with pytest.raises(InvalidArgument, match="activation"):
        jax.make_jaxpr(lambda x: bj.linear(x, jnp.ones((3, 8), jnp.float32), activation="tanh"))(x)
    with pytest.raises(InvalidArgument, match="target"):
        jax.make_jaxpr(lambda z: bj.cross_entropy(z, jnp.zeros((3,), jnp.int32)))(x)


@pytest.mark.skipif(bj.available(), reason="this build has the handler")
def test_without_handler_says_how_to_get_it():
    with pytest.raises(Unsupported, match="jaxlib"):
        bj.softmax(jnp.ones((2, 3), jnp.float32))


def test_elementwise_functions_follow_the_op_table():
    rows = {r["name"]: r for r in baracuda._C.elementwise_ops()}
    for name in bj.ELEMENTWISE:
        assert callable(getattr(bj, name)) and rows[name]["category"] in ("unary", "binary", "predicate", "compare")
    with pytest.raises(TypeError, match="negative_slope"):
        bj.leaky_relu(jnp.ones(3), slope=0.1)


@needs_handler
def test_attention_traces_forward_and_backward():
    q = jax.ShapeDtypeStruct((2, 16, 4, 64), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((2, 24, 2, 64), jnp.bfloat16)
    sinks = jax.ShapeDtypeStruct((4,), jnp.float32)

    def loss(q, k, v, s):
        return bj.attention(q, k, v, causal=True, sinks=s, window=(8, 0)).astype(jnp.float32).sum()

    assert len(_calls(jax.make_jaxpr(loss)(q, kv, kv, sinks))) == 1
    grads = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1, 2, 3)))(q, kv, kv, sinks)
    assert len(_calls(grads)) == 2  # the forward (out, lse) and the backward plan
    cu = jax.ShapeDtypeStruct((3,), jnp.int32)
    packed = jax.make_jaxpr(lambda q, k, v, cq, ck: bj.attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck,
                                                                 max_seqlen_q=10, max_seqlen_k=12))
    assert len(_calls(packed(jax.ShapeDtypeStruct((20, 4, 64), jnp.float16),
                             jax.ShapeDtypeStruct((24, 2, 64), jnp.float16),
                             jax.ShapeDtypeStruct((24, 2, 64), jnp.float16), cu, cu))) == 1


@needs_handler
def test_attention_errors_while_tracing():
    q = jax.ShapeDtypeStruct((2, 16, 4, 64), jnp.bfloat16)
    bad = jax.ShapeDtypeStruct((2, 24, 3, 64), jnp.bfloat16)
    with pytest.raises(InvalidArgument, match="not a multiple"):
        jax.make_jaxpr(lambda q, k: bj.attention(q, k, k))(q, bad)
    with pytest.raises(Unsupported, match="dropout"):
        jax.make_jaxpr(lambda q: bj.attention(q, q, q, dropout_p=0.1))(q)


@needs_handler
def test_rope_traces_to_one_call_and_its_inverse():
    q = jax.ShapeDtypeStruct((2, 16, 8, 64), jnp.bfloat16)
    k = jax.ShapeDtypeStruct((2, 16, 2, 64), jnp.bfloat16)
    pos = jax.ShapeDtypeStruct((2, 16), jnp.int32)

    def loss(q, k, pos):
        a, b = bj.rope(q, k, positions=pos, scaling={"rope_type": "llama3", "factor": 8.0,
                                                      "original_max_position_embeddings": 8192})
        return (a.astype(jnp.float32).sum() + b.astype(jnp.float32).sum())

    assert len(_calls(jax.make_jaxpr(loss)(q, k, pos))) == 1
    grads = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1)))(q, k, pos)
    assert len(_calls(grads)) == 2  # the forward and the inverse rotation
    out = jax.eval_shape(lambda q: bj.rope(q, rotary_dim=32), q)
    assert out.shape == q.shape and out.dtype == q.dtype
    with pytest.raises(InvalidArgument, match="rotary_dim is 7"):
        jax.make_jaxpr(lambda q: bj.rope(q, rotary_dim=7))(q)


@needs_handler
def test_reductions_and_scans_trace_to_custom_calls():
    """bj.sum / cumsum / ...: one custom call forward, one per backward op; the generated set follows
    the op tables; baracuda.<op> on a JAX array routes here (builtins any / all / sum are not shadowed
    inside baracuda.jax's own code)."""
    x = jnp.ones((4, 6), jnp.float32)
    assert len(_calls(jax.make_jaxpr(lambda x: bj.sum(x, 1))(x))) == 1
    grad = jax.make_jaxpr(jax.grad(lambda x: bj.sum(bj.cumsum(x, 1) ** 2)))(x)
    assert len(_calls(grad)) == 4  # cumsum, sum; sum_backward, cumsum_backward
    assert len(_calls(jax.make_jaxpr(jax.grad(lambda x: bj.logsumexp(x, (0, 1))))(x))) == 2
    names = {r["name"] for r in baracuda.reduction_ops() if r["category"] == "reduce"}
    names |= {r["name"] for r in baracuda.scan_ops() if not r["is_backward"]}
    assert names <= set(bj.__all__) and all(callable(getattr(bj, n)) for n in names)
    routed = jax.make_jaxpr(lambda x: baracuda.var(x, 1, correction=0, keepdim=True) + baracuda.cumsum(x, 0))(x)
    assert len(_calls(routed)) == 2
    with pytest.raises(InvalidArgument, match="axis"):
        jax.make_jaxpr(lambda x: bj.cumsum(x, 1.5))(x)
    if jax.dtypes.canonicalize_dtype(jnp.int64) != jnp.int64:
        with pytest.raises(InvalidArgument, match="jax_enable_x64"):
            bj.count_nonzero(x, 1)


@needs_handler
def test_merge_attention_states_traces_to_one_call():
    o = jnp.ones((2, 3, 4, 64), jnp.bfloat16)
    lse = jnp.zeros((2, 3, 4), jnp.float32)
    jaxpr = jax.make_jaxpr(lambda a, la, b, lb: bj.merge_attention_states(a, la, b, lb))(o, lse, o, lse)
    assert len(_calls(jaxpr)) == 1
    assert len(_calls(jax.make_jaxpr(lambda a, la: baracuda.merge_attention_states(a, la, a, la))(o, lse))) == 1
    with pytest.raises(InvalidArgument, match="lse_b has shape"):
        jax.make_jaxpr(lambda a, la: bj.merge_attention_states(a, la, a, la[:, :2]))(o, lse)
