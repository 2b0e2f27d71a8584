"""baracuda inside JAX: every op is an XLA custom call (``jax.ffi``), so it runs under ``jax.jit``
on XLA's stream into XLA's buffers, with gradients through ``jax.custom_vjp`` from our backward
plans.

    import baracuda.jax as bj

    @jax.jit
    def loss_fn(params, x, target):
        h = bj.rms_norm(x, params["norm"])
        h = bj.linear(h, params["w1"], params["b1"], activation="gelu")
        logits = bj.linear(h, params["w2"])
        return bj.cross_entropy(logits, target)

    grads = jax.grad(loss_fn)(params, x, target)

How it works: at trace time each call builds the family's descriptor from the abstract shapes,
runs ``select`` (so bad input raises the same typed ``baracuda.errors`` exception as the eager
API, while tracing) and registers the plan with the extension's one FFI handler; the custom call
names the plan by id and carries any workspace as one more XLA output, so nothing allocates or
synchronizes at run time. Plan ids are process-local: an exported / serialized computation does
not carry them.

``jax.vmap`` runs these ops sequentially over the mapped axis (``vmap_method="sequential"``);
for row-wise ops, prefer to fold the mapped axis into the leading dims yourself.
"""
from __future__ import annotations

import builtins
import functools

import jax
import jax.numpy as jnp

from .. import _C
from .._gemm import _EPILOGUES as ACTIVATIONS, _check_linear as _check_linear_shapes, check_activation
from .._attention import check_rules as check_attention_rules
from .._loss import REDUCTIONS, check_cross_entropy
from .._norm import check_row_norm as _check_norm
from .._dtypes import dtype as _bc_dtype
from ..errors import InvalidArgument
from ._mechanism import (TARGET, _launch, _operand, _spec, _spec_of, _stats_dtype,  # noqa: F401
                         _transposed_spec, available, routable)
from ._serving import (apply_penalties, embedding, kv_cache_append, merge_attention_states,  # noqa: F401
                       moe_gate, moe_permute, moe_unpermute, paged_attention, rope, sample)
from ._reductions import FUNCTIONAL as _REDUCTION_FUNCTIONAL, REDUCTION_FUNCTIONS, SCAN_FUNCTIONS, _reduce_call

# sum, mean, amax, ..., argmax; cumsum, cumprod, cummax, cummin, logcumsumexp (generated from the op
# tables). sum / any / all shadow the builtins in this module: its code calls those through `builtins`.
globals().update(REDUCTION_FUNCTIONS)
globals().update(SCAN_FUNCTIONS)


# ---- norms ----------------------------------------------------------------------------------------



def _norm_forward(op, x, weight, bias, eps):
    _check_norm(op, x, weight, bias)
    desc = _C.NormDescriptor(op, _spec_of(x), None if weight is None else _bc_dtype(weight.dtype),
                             None if bias is None else _bc_dtype(bias.dtype), False, float(eps), True)
    ins = [_operand("x", x)] + [_operand(r, t) for r, t in (("weight", weight), ("bias", bias)) if t is not None]
    stats = [("mean", x.shape[:-1], _stats_dtype(x))] if op == "layer_norm" else []
    stats.append(("rstd", x.shape[:-1], _stats_dtype(x)))
    return _launch(desc, _C.NormPlan.select, ins, [("y", x.shape, x.dtype)] + stats)


def _norm_backward(op, grad, x, stats, weight, bias):
    desc = _C.NormDescriptor(op + "_backward", _spec_of(x), None if weight is None else _bc_dtype(weight.dtype),
                             None if bias is None else _bc_dtype(bias.dtype), False, 0.0, False)
    names = ("mean", "rstd") if op == "layer_norm" else ("rstd",)
    ins = [_operand("grad_out", grad.astype(x.dtype)), _operand("x", x)] + \
        [_operand(n, s) for n, s in zip(names, stats)] + ([_operand("weight", weight)] if weight is not None else [])
    outs = [("grad_x", x.shape, x.dtype)]
    if weight is not None:
        outs.append(("grad_weight", weight.shape, weight.dtype))
    if bias is not None:
        outs.append(("grad_bias", bias.shape, bias.dtype))
    got = _launch(desc, _C.NormPlan.select, ins, outs)
    gx = got.pop(0)
    gw = got.pop(0) if weight is not None else None
    gb = got.pop(0) if bias is not None else None
    return gx, gw, gb


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _rms_norm(x, weight, eps):
    return _norm_forward("rms_norm", x, weight, None, eps)[0]


def _rms_norm_fwd(x, weight, eps):
    y, rstd = _norm_forward("rms_norm", x, weight, None, eps)
    return y, (x, weight, rstd)


def _rms_norm_bwd(eps, res, grad):
    x, weight, rstd = res
    gx, gw, _ = _norm_backward("rms_norm", grad, x, (rstd,), weight, None)
    return gx, gw


_rms_norm.defvjp(_rms_norm_fwd, _rms_norm_bwd)


def rms_norm(x, weight=None, eps: float = 1e-6):
    """y = x * rsqrt(mean(x^2, -1) + eps) * weight, over the last dim; differentiable."""
    return _rms_norm(x, weight, eps)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _layer_norm(x, weight, bias, eps):
    return _norm_forward("layer_norm", x, weight, bias, eps)[0]


def _layer_norm_fwd(x, weight, bias, eps):
    y, mean, rstd = _norm_forward("layer_norm", x, weight, bias, eps)
    return y, (x, weight, bias, mean, rstd)


def _layer_norm_bwd(eps, res, grad):
    x, weight, bias, mean, rstd = res
    return _norm_backward("layer_norm", grad, x, (mean, rstd), weight, bias)


_layer_norm.defvjp(_layer_norm_fwd, _layer_norm_bwd)


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5):
    """y = (x - mean) * rsqrt(var + eps) * weight + bias, over the last dim; differentiable."""
    return _layer_norm(x, weight, bias, eps)


# ---- softmax / log-softmax ----------------------------------------------------------------------

def _softmax_run(op, inputs, axis):
    x = inputs[-1]
    if not -max(x.ndim, 1) <= axis < max(x.ndim, 1):
        raise InvalidArgument(f"{op}: axis {axis} is out of range for x of rank {x.ndim}")
    specs = [_spec_of(t) for t in inputs]
    desc = _C.SoftmaxDescriptor(op, specs, int(axis), _spec_of(x))
    return _launch(desc, _C.SoftmaxPlan.select, [("input", t, s) for t, s in zip(inputs, specs)],
                   [("out", x.shape, x.dtype)])[0]


def _softmax_op(name):
    @functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
    def op(x, axis):
        return _softmax_run(name, [x], axis)

    def fwd(x, axis):
        y = _softmax_run(name, [x], axis)
        return y, y

    def bwd(axis, y, grad):
        return (_softmax_run(name + "_backward", [grad.astype(y.dtype), y], axis),)

    op.defvjp(fwd, bwd)
    return op


_softmax = _softmax_op("softmax")
_log_softmax = _softmax_op("log_softmax")


def softmax(x, axis: int = -1):
    """exp(x) / sum(exp(x)) along ``axis``; differentiable."""
    return _softmax(x, axis)


def log_softmax(x, axis: int = -1):
    """x - logsumexp(x) along ``axis``; differentiable."""
    return _log_softmax(x, axis)


# ---- GEMM: matmul and linear ------------------------------------------------------------------------

_NEEDS_AUX = ("gelu", "gelu_tanh", "silu")  # their derivative reads the pre-activation


# jax_default_matmul_precision values that ask float32 dots for float32 accuracy: "highest" /
# "float32", the F32 / F64 algorithm presets and the multi-pass ones (BF16_BF16_F32_X3, TF32_TF32_F32_X3, ..)
_FULL_F32 = ("highest", "float32")


def _tf32(dtype):
    """jnp.matmul's rule for a float32 GEMM, read at trace time as JAX reads it: reduced precision
    (tf32 on GPU) by default, float32 when jax_default_matmul_precision asks for it."""
    if dtype != jnp.float32:
        return False
    p = jax.config.jax_default_matmul_precision
    if p is None:
        return True
    p = str(getattr(p, "name", p)).lower()
    return not (p in _FULL_F32 or p.startswith(("f32_", "f64_")) or p.endswith(("_x3", "_x6", "_x9")))


_TF32 = _C.PlanPreference(allow_tf32=True)


def _select_tf32(desc):
    return _C.GemmPlan.select(desc, _TF32)


def _gemm(a, b, a_spec, b_spec, out_shape, *, epilogue="none", bias=None, aux=False, bias_grad_dtype=None):
    """out = epilogue(a @ b + bias) for 2-D / same-batch a, b given with their specs (a transposed
    spec reads the array in place). Returns [out] (+ aux) (+ bias_grad). float32 runs in tf32 where
    jnp.matmul would (_tf32), with a bias and a forward activation (the plan composes them after the
    GEMM); the bias gradient epilogue stays IEEE float32 (under tf32 the backward sums it itself)."""
    out_dtype = a.dtype
    tf32 = bias_grad_dtype is None and _tf32(out_dtype)
    desc = _C.GemmDescriptor(a_spec, b_spec, _spec(out_shape, out_dtype), epilogue=epilogue,
                             bias=None if bias is None else _bc_dtype(bias.dtype), aux=aux,
                             bias_grad=None if bias_grad_dtype is None else _bc_dtype(bias_grad_dtype))
    ins = [("a", a, a_spec), ("b", b, b_spec)] + ([_operand("bias", bias)] if bias is not None else [])
    outs = [("out", out_shape, out_dtype)]
    if aux:
        outs.append(("aux", out_shape, out_dtype))
    if bias_grad_dtype is not None:
        outs.append(("bias_grad", (a_spec.shape[-2],), bias_grad_dtype))
    return _launch(desc, _select_tf32 if tf32 else _C.GemmPlan.select, ins, outs, select_key=tf32)


def _matmul_2d_or_batched(a, b, ta=False, tb=False):
    """a @ b (or with a / b transposed in place) for a [..., M, K], b [..., K, N] of equal batch dims."""
    a_spec = _transposed_spec(a) if ta else _spec_of(a)
    b_spec = _transposed_spec(b) if tb else _spec_of(b)
    shape = (*a_spec.shape[:-1], b_spec.shape[-1])
    return _gemm(a, b, a_spec, b_spec, shape)[0]


def _check_matmul(a, b):
    if a.ndim < 2 or b.ndim < 2:
        raise InvalidArgument(f"matmul: a and b need at least 2 dims, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise InvalidArgument(f"matmul: a is {tuple(a.shape)} and b is {tuple(b.shape)}: a.shape[-1] != b.shape[-2]")
    if a.dtype != b.dtype:
        raise InvalidArgument(f"matmul: a is {a.dtype} and b is {b.dtype}; expected one dtype")


@jax.custom_vjp
def _matmul(a, b):
    return _matmul_impl(a, b)


def _matmul_impl(a, b):
    _check_matmul(a, b)
    if b.ndim == 2:  # [..., M, K] @ [K, N]: one GEMM over the flattened rows
        a2 = a.reshape(-1, a.shape[-1])
        return _matmul_2d_or_batched(a2, b).reshape(*a.shape[:-1], b.shape[-1])
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a_full = jnp.broadcast_to(a, (*batch, *a.shape[-2:]))
    b_full = jnp.broadcast_to(b, (*batch, *b.shape[-2:]))
    return _matmul_2d_or_batched(a_full, b_full)


def _matmul_fwd(a, b):
    return _matmul_impl(a, b), (a, b)


def _sum_to(g, shape):
    """Sums a broadcast gradient back to an operand's shape."""
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead else g
    axes = tuple(i for i, (gs, s) in enumerate(zip(g.shape, shape)) if s == 1 and gs != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def _matmul_bwd(res, grad):
    a, b = res
    grad = grad.astype(a.dtype)
    if b.ndim == 2:
        g2 = grad.reshape(-1, grad.shape[-1])
        a2 = a.reshape(-1, a.shape[-1])
        ga = _matmul_2d_or_batched(g2, b, tb=True).reshape(a.shape)
        gb = _matmul_2d_or_batched(a2, g2, ta=True)
        return ga, gb
    batch = grad.shape[:-2]
    a_full = jnp.broadcast_to(a, (*batch, *a.shape[-2:]))
    b_full = jnp.broadcast_to(b, (*batch, *b.shape[-2:]))
    ga = _sum_to(_matmul_2d_or_batched(grad, b_full, tb=True), a.shape)
    gb = _sum_to(_matmul_2d_or_batched(a_full, grad, ta=True), b.shape)
    return ga, gb


_matmul.defvjp(_matmul_fwd, _matmul_bwd)


def matmul(a, b):
    """a @ b for a [..., M, K], b [..., K, N] (batch dims broadcast); differentiable."""
    return _matmul(a, b)


def _check_linear(x, weight, bias, activation):
    check_activation("linear", activation)
    _check_linear_shapes("linear", x, weight, bias)


def _linear_impl(x, weight, bias, activation):
    _check_linear(x, weight, bias, activation)
    x2 = x.reshape(-1, x.shape[-1])
    shape = (x2.shape[0], weight.shape[0])
    got = _gemm(x2, weight, _spec_of(x2), _transposed_spec(weight), shape, epilogue=activation, bias=bias,
                aux=activation in _NEEDS_AUX)
    y = got[0].reshape(*x.shape[:-1], weight.shape[0])
    aux = got[1] if activation in _NEEDS_AUX else (y if activation == "relu" else None)
    return y, aux


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _linear(x, weight, bias, activation):
    return _linear_impl(x, weight, bias, activation)[0]


def _linear_fwd(x, weight, bias, activation):
    y, aux = _linear_impl(x, weight, bias, activation)
    return y, (x, weight, bias is not None, aux)


def _linear_bwd(activation, res, grad):
    x, weight, has_bias, aux = res
    g2 = grad.astype(x.dtype).reshape(-1, weight.shape[0])
    if activation != "none":  # relu_backward(grad, y): y > 0 exactly where the pre-activation is
        g2 = _ew(activation + "_backward", [g2, aux.reshape(g2.shape)], {})
    x2 = x.reshape(-1, x.shape[-1])
    gx = _matmul_2d_or_batched(g2, weight).reshape(x.shape)
    if has_bias and _tf32(x.dtype):  # a plain tf32 GEMM (cuBLAS) and the bias gradient as its own sum
        gw = _gemm(g2, x2, _transposed_spec(g2), _spec_of(x2), weight.shape)[0]
        return gx, gw, _reduce_call("sum", g2, [0], False, {}, weight.dtype)
    got = _gemm(g2, x2, _transposed_spec(g2), _spec_of(x2), weight.shape,
                epilogue="bias_grad" if has_bias else "none", bias_grad_dtype=weight.dtype if has_bias else None)
    return gx, got[0], (got[1] if has_bias else None)


_linear.defvjp(_linear_fwd, _linear_bwd)


def linear(x, weight, bias=None, activation: str = "none"):
    """activation(x @ weight.T + bias) in one GEMM with a fused epilogue (torch's layout: weight
    [N, K]); activation: none, relu, gelu, gelu_tanh, silu. Differentiable."""
    return _linear(x, weight, bias, activation)


# ---- cross-entropy ------------------------------------------------------------------------------

def _ce_desc(op, logits, target, ignore_index, label_smoothing, reduction, grad_input=False):
    return _C.CrossEntropyLossDescriptor(op, _spec_of(logits), _spec_of(target), None, reduction, int(ignore_index),
                                         float(label_smoothing), False, grad_input,
                                         _spec_of(logits) if grad_input else None)


def _ce_forward(logits, target, ignore_index, label_smoothing, reduction):
    check_cross_entropy(logits, target, reduction)
    desc = _ce_desc("cross_entropy", logits, target, ignore_index, label_smoothing, reduction)
    loss_shape = (logits.shape[0],) if reduction == "none" else ()
    return _launch(desc, _C.LossPlan.select, [_operand("input", logits), _operand("target", target)],
                   [("out", loss_shape, logits.dtype), ("lse", (logits.shape[0],), _stats_dtype(logits))])


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _cross_entropy(logits, target, ignore_index, label_smoothing, reduction):
    return _ce_forward(logits, target, ignore_index, label_smoothing, reduction)[0]


def _ce_fwd(logits, target, ignore_index, label_smoothing, reduction):
    loss, lse = _ce_forward(logits, target, ignore_index, label_smoothing, reduction)
    return loss, (logits, target, lse)


def _ce_bwd(ignore_index, label_smoothing, reduction, res, grad):
    logits, target, lse = res
    desc = _ce_desc("cross_entropy_backward", logits, target, ignore_index, label_smoothing, reduction, True)
    ins = [_operand("input", logits), _operand("target", target), _operand("lse", lse),
           _operand("grad_loss", grad.astype(logits.dtype))]
    (g,) = _launch(desc, _C.LossPlan.select, ins, [("grad_input", logits.shape, logits.dtype)])
    return g, None


_cross_entropy.defvjp(_ce_fwd, _ce_bwd)


def cross_entropy(logits, target, *, ignore_index: int = -100, label_smoothing: float = 0.0,
                  reduction: str = "mean"):
    """Softmax cross-entropy of logits [N, V] against class indices target [N] (int32 / int64), as
    torch's F.cross_entropy: no float32 copy of the logits, the gradient from the saved
    log-sum-exp. A target out of range (other than ignore_index) gives that row a NaN loss."""
    return _cross_entropy(logits, target, ignore_index, label_smoothing, reduction)


# ---- elementwise: every differentiable unary / binary op of the core's table ------------------------------

_EW = {row["name"]: row for row in _C.elementwise_ops()}


def _ew(name, inputs, params):
    row = _EW[name]
    cat = row["category"]
    if cat.endswith("_backward") and "wrt" in params:
        shape, dt = inputs[1 + int(params["wrt"])].shape, inputs[0].dtype
    elif cat.endswith("_backward"):
        shape, dt = inputs[1].shape, inputs[0].dtype
    else:
        shape = jnp.broadcast_shapes(*(t.shape for t in inputs))
        data = inputs[1] if name == "where" else inputs[0]  # where's condition is bool
        dt = jnp.bool_ if cat in ("predicate", "compare") else data.dtype
    specs = [_spec_of(t) for t in inputs]
    desc = _C.ElementwiseDescriptor(name, specs, _spec(shape, dt), {k: float(v) for k, v in params.items()})
    return _launch(desc, _C.ElementwisePlan.select, [("input", t, s) for t, s in zip(inputs, specs)],
                   [("out", shape, dt)])[0]


@functools.lru_cache(maxsize=None)
def _ew_function(name, params):
    """The differentiable JAX function of one op and its (hashable) params."""
    row = _EW[name]
    kw = dict(params)
    if not row["backward"]:
        return lambda *inputs: _ew(name, list(inputs), kw)
    bwd_name = row["backward"]

    @jax.custom_vjp
    def f(*inputs):
        return _ew(name, list(inputs), kw)

    def fwd(*inputs):
        return _ew(name, list(inputs), kw), inputs

    def bwd(inputs, grad):
        grad = grad.astype(inputs[1 if name == "where" else 0].dtype)
        if len(inputs) == 1:
            return (_ew(bwd_name, [grad, inputs[0]], kw),)
        first = 1 if name == "where" else 0  # where's condition has no gradient
        return (None,) * first + tuple(_ew(bwd_name, [grad, *inputs], {**kw, "wrt": i})
                                       for i in range(first, len(inputs)))

    f.defvjp(fwd, bwd)
    return f


def _make_elementwise(name, row):
    pnames = [p for p, _ in row["params"] if p not in ("wrt", "axis")]
    defaults = {p: d for p, d in row["params"]}
    arity = row["arity"]

    def op(*inputs, **params):
        if len(inputs) != arity:
            raise TypeError(f"{name}() takes {arity} tensor argument(s), got {len(inputs)}")
        unknown = set(params) - set(pnames)
        if unknown:
            raise TypeError(f"{name}() got unexpected keyword argument(s) {sorted(unknown)}; params: {pnames}")
        full = tuple(sorted((p, float(params.get(p, defaults[p]))) for p in pnames))
        return _ew_function(name, full)(*inputs)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"{row['doc']} (baracuda elementwise '{name}'; differentiable: {bool(row['backward'])})"
    return op


ELEMENTWISE = [n for n, r in _EW.items() if r["category"] in ("unary", "binary", "predicate", "compare")]
for _name in ELEMENTWISE:
    globals()[_name] = _make_elementwise(_name, _EW[_name])


def swiglu(gate, up):
    """silu(gate) * up: the gated MLP of LLMs, from the two projections; differentiable."""
    return globals()["silu_mul"](gate, up)


# ---- attention ------------------------------------------------------------------------------------

def _attention_desc(op, q, k, v, params, alibi, sinks, varlen, lse):
    causal, scale, wl, wr, softcap, alignment, batch, msq, msk, deterministic = params
    out = _spec(tuple(q.shape[:-1]) + (v.shape[-1],), q.dtype)
    return _C.AttentionDescriptor(op, _spec_of(q), _spec_of(k), _spec_of(v), out, scale=scale, causal=causal,
                                  causal_alignment=alignment, window_left=wl, window_right=wr, softcap=softcap,
                                  alibi=0 if alibi is None else alibi.ndim, sinks=sinks is not None, varlen=varlen,
                                  batch=batch, max_seqlen_q=msq, max_seqlen_k=msk, lse=lse, deterministic=deterministic)


def _attention_extras(alibi, sinks, cu_q, cu_k):
    return [_operand(r, t) for r, t in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k), ("alibi_slopes", alibi),
                                        ("sinks", sinks)) if t is not None]


def _attention_forward(q, k, v, alibi, sinks, cu_q, cu_k, params):
    varlen = cu_q is not None
    desc = _attention_desc("attention", q, k, v, params, alibi, sinks, varlen, True)
    lse_shape = (q.shape[1], q.shape[0]) if varlen else (q.shape[0], q.shape[2], q.shape[1])
    ins = [_operand("q", q), _operand("k", k), _operand("v", v)] + _attention_extras(alibi, sinks, cu_q, cu_k)
    return _launch(desc, _C.AttentionPlan.select, ins,
                   [("out", tuple(q.shape[:-1]) + (v.shape[-1],), q.dtype), ("lse", lse_shape, _stats_dtype(q))])


@functools.partial(jax.custom_vjp, nondiff_argnums=(7,))
def _attention(q, k, v, alibi, sinks, cu_q, cu_k, params):
    return _attention_forward(q, k, v, alibi, sinks, cu_q, cu_k, params)[0]


def _attention_fwd(q, k, v, alibi, sinks, cu_q, cu_k, params):
    out, lse = _attention_forward(q, k, v, alibi, sinks, cu_q, cu_k, params)
    return out, (q, k, v, alibi, sinks, cu_q, cu_k, out, lse)


def _attention_bwd(params, res, grad):
    q, k, v, alibi, sinks, cu_q, cu_k, out, lse = res
    desc = _attention_desc("attention_backward", q, k, v, params, alibi, sinks, cu_q is not None, False)
    ins = [_operand("q", q), _operand("k", k), _operand("v", v), _operand("out", out), _operand("lse", lse),
           _operand("grad_out", grad.astype(q.dtype))] + _attention_extras(alibi, sinks, cu_q, cu_k)
    outs = [("grad_q", q.shape, q.dtype), ("grad_k", k.shape, k.dtype), ("grad_v", v.shape, v.dtype)]
    if sinks is not None:
        outs.append(("grad_sinks", sinks.shape, sinks.dtype))
    got = _launch(desc, _C.AttentionPlan.select, ins, outs)
    gs = got[3] if sinks is not None else None
    # ALiBi slopes and the offsets get no gradient (the offsets are integers; the slopes are constants)
    return got[0], got[1], got[2], None, gs, None, None


_attention.defvjp(_attention_fwd, _attention_bwd)


def attention(q, k, v, *, causal: bool = False, scale=None, window=None, softcap=None, alibi_slopes=None,
              sinks=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
              causal_alignment: str = "bottom_right", dropout_p: float = 0.0, deterministic: bool = False):
    """baracuda.attention on JAX arrays (q [B, Sq, Hq, D], k / v [B, Sk, Hkv, D], or packed with
    cu_seqlens_q / cu_seqlens_k and max_seqlen_q / max_seqlen_k); differentiable in q, k, v and sinks.
    ``deterministic``: a bitwise-reproducible backward (cuDNN's default one accumulates with atomics)."""
    varlen, wl, wr = check_attention_rules(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, window)
    batch = int(cu_seqlens_q.shape[0]) - 1 if varlen else 0
    params = (bool(causal), None if scale is None else float(scale), wl, wr, float(softcap or 0.0),
              str(causal_alignment), batch, int(max_seqlen_q or 0), int(max_seqlen_k or 0), bool(deterministic))
    return _attention(q, k, v, alibi_slopes, sinks, cu_seqlens_q, cu_seqlens_k, params)


__all__ = ["available", "rms_norm", "layer_norm", "softmax", "log_softmax", "matmul", "linear", "cross_entropy",
           "swiglu", "attention", "rope", "paged_attention", "embedding", "moe_gate", "moe_permute",
           "moe_unpermute", "sample", "apply_penalties", "kv_cache_append", "merge_attention_states", "ACTIVATIONS",
           "REDUCTIONS", "ELEMENTWISE",
           *ELEMENTWISE, *REDUCTION_FUNCTIONS, *SCAN_FUNCTIONS]


# ---- baracuda.<op> on JAX arrays: the same call through the custom calls above ----------------------

def _fn_softmax(name):
    op = {"softmax": softmax, "log_softmax": log_softmax}[name]
    return lambda x, dim=None, *, axis=None: op(x, -1 if dim is None and axis is None else
                                                 (dim if dim is not None else axis))


# baracuda.<name> -> (this module's function taking the functional signature's arguments, the keyword
# arguments it takes besides the tensors: any other one given with a non-default value keeps the
# call on the general path).
_FUNCTIONAL = {
    "softmax": (_fn_softmax("softmax"), {"dim", "axis"}),
    "log_softmax": (_fn_softmax("log_softmax"), {"dim", "axis"}),
    "rms_norm": (rms_norm, {"weight", "eps"}),
    "layer_norm": (layer_norm, {"weight", "bias", "eps"}),
    "linear": (lambda x, weight, bias=None, *, activation="none": linear(x, weight, bias, activation),
               {"weight", "bias", "activation"}),
    "matmul": (matmul, {"b"}),
    "attention": (lambda q, k, v, **kw: attention(q, k, v, **kw),
                  {"k", "v", "causal", "scale", "window", "softcap", "alibi_slopes", "sinks", "cu_seqlens_q",
                   "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "causal_alignment", "dropout_p", "deterministic"}),
    "rope": (lambda q, k=None, **kw: rope(q, k, **kw),
             {"k", "cos", "sin", "positions", "style", "rotary_dim", "theta", "scaling"}),
    "paged_attention": (lambda q, **kw: paged_attention(q, **kw),
                        {"k_cache", "v_cache", "block_table", "seq_lens", "causal", "scale", "window", "softcap",
                         "alibi_slopes", "sinks", "max_seqlen_k", "num_splits", "kernel", "return_lse", "k_scale",
                         "v_scale"}),
    "embedding": (lambda indices, weight, padding_idx=None, scale_grad_by_freq=False:
                  embedding(indices, weight, padding_idx, scale_grad_by_freq),
                  {"weight", "padding_idx", "scale_grad_by_freq"}),
    "moe_gate": (lambda logits, top_k, **kw: moe_gate(logits, top_k, **kw),
                 {"top_k", "scoring", "renormalize", "n_group", "topk_group", "group_score", "correction_bias",
                  "routed_scaling_factor"}),
    "moe_permute": (lambda x, ids, num_experts: moe_permute(x, ids, num_experts), {"ids", "num_experts"}),
    "moe_unpermute": (lambda y_sorted, pos, weights=None: moe_unpermute(y_sorted, pos, weights), {"pos", "weights"}),
    "cross_entropy": (lambda logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean":
                      cross_entropy(logits, target, ignore_index=ignore_index, label_smoothing=label_smoothing,
                                    reduction=reduction), {"target", "ignore_index", "label_smoothing", "reduction"}),
}
_FUNCTIONAL.update(_REDUCTION_FUNCTIONAL)
_FUNCTIONAL["merge_attention_states"] = (merge_attention_states, {"lse_a", "out_b", "lse_b"})
_FALSY_DEFAULTS = (None, False, "none", 1.0, 0.0)  # out, stream, residual, save_stats, return_*, alpha / beta


def functional_route(name, general, args, kwargs):
    """baracuda.<name>(*args, **kwargs) on a JAX GPU array as this module's op (XLA's allocator and
    stream, traceable, differentiable), or NotImplemented when the call uses what it does not
    cover (out=, stream=, residual=, ...) and must take the general path."""
    entry = _FUNCTIONAL.get(name)
    if entry is None or not routable(args[0]):
        return NotImplemented
    fn, takes = entry
    import inspect

    bound = inspect.signature(general).bind(*args, **kwargs)
    first = next(iter(bound.arguments))
    for k, v in bound.arguments.items():
        if k != first and k not in takes and not builtins.any(v is d or (type(v) is type(d) and v == d)
                                                     for d in _FALSY_DEFAULTS):
            return NotImplemented
    use = {k: v for k, v in bound.arguments.items() if k in takes}
    return fn(args[0], **use) if name not in ("matmul",) else fn(args[0], use["b"])
