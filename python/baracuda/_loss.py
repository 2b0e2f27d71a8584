"""Functional losses: cross-entropy for large vocabularies (forward, fused forward + gradient,
backward from the saved logsumexp), nll_loss, and torch.nn.functional's pointwise losses (same
argument names and defaults; the deprecated size_average / reduce are not taken), each with a
``*_backward`` that returns the gradient w.r.t. the first input.

Plans are cached in the core (its loss cache, keyed on the op, the parameters and the operands'
metadata: ``_C.cross_entropy_call`` / ``_C.loss_call``); the opt-in target checks and the upstream-
gradient form of cross_entropy select through the Python cache below. Outputs and the workspace are
allocated in the logits' framework; launches go to its current stream unless ``stream=``.
"""
from typing import Any, Optional

from . import _C, _interop
from ._dtypes import DType
from ._types import DLPackTensor, Stream
from .errors import InvalidArgument

_CACHE = _interop.PlanCache()


def _spec(t):
    shape = tuple(int(s) for s in t.shape)
    d = _interop.dtype_of(t)
    strides = _strides(t)
    return _C.TensorSpec(shape, d, strides)


def _strides(t):
    if hasattr(t, "stride") and callable(t.stride):  # torch
        return [int(s) for s in t.stride()]
    st = getattr(t, "strides", None)
    if st is not None and hasattr(t, "itemsize"):  # CuPy / numpy: bytes
        return [int(s) // int(t.itemsize) for s in st]
    return None  # JAX: row-major


def _key(*ts):
    k = []
    for t in ts:
        if t is None:
            k.append(None)
        else:
            k.append((tuple(t.shape), t.dtype, tuple(_strides(t) or ())))
    return tuple(k)


def _plan(op, logits, target, weight, reduction, ignore_index, label_smoothing, with_grad, grad_loss, grad_input):
    key = (op, reduction, int(ignore_index), float(label_smoothing), bool(with_grad), grad_loss is not None,
           _key(logits, target, weight, grad_input))

    def make():
        d = _C.CrossEntropyLossDescriptor(op, _spec(logits), _spec(target), None if weight is None else _spec(weight),
                                          reduction, int(ignore_index), float(label_smoothing), bool(with_grad),
                                          grad_loss is not None, None if grad_input is None else _spec(grad_input))
        return _C.LossPlan.select(d)

    return _CACHE.get(key, make)


REDUCTIONS = ("none", "mean", "sum")


def check_cross_entropy(logits, target, reduction):
    """The traced forms' (baracuda.torch, baracuda.jax) shape checks of cross_entropy."""
    if len(logits.shape) != 2:
        raise InvalidArgument(f"cross_entropy: logits must have shape [N, V], got {tuple(logits.shape)}")
    if tuple(target.shape) != (logits.shape[0],):
        raise InvalidArgument(f"cross_entropy: target has shape {tuple(target.shape)}; expected ({logits.shape[0]},)")
    if reduction not in REDUCTIONS:
        raise InvalidArgument(f"cross_entropy: reduction must be one of {REDUCTIONS}, got {reduction!r}")


def _check(name, logits):
    if _interop.framework(logits) == "numpy":
        raise InvalidArgument(f"{name}: got a numpy (CPU) array; expected a CUDA tensor")
    if len(logits.shape) != 2:
        what = "input must have shape [N, C]" if name.startswith("nll") else "logits must have shape [N, V]"
        raise InvalidArgument(f"{name}: {what}, got {tuple(logits.shape)}")


from ._checks import _check_class_targets, _check_multilabel_targets  # noqa: E402


def _lse_dtype(logits):
    return DType.float64 if _interop.dtype_of(logits) == DType.float64 else DType.float32


def cross_entropy(logits: DLPackTensor, target: DLPackTensor, *, weight: Optional[DLPackTensor] = None,
                  ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean",
                  return_grad: bool = False, grad_loss: Optional[DLPackTensor] = None, return_lse: bool = False,
                  check_targets: bool = False, stream: Stream = None) -> Any:
    """cross_entropy(logits [N, V], target [N] int64/int32, *, weight=None [V], ignore_index=-100,
    label_smoothing=0.0, reduction="mean", return_grad=False, grad_loss=None, return_lse=False, stream=None)

    torch.nn.functional.cross_entropy's semantics (mean divides by the sum of the weights of the
    non-ignored targets). Returns the loss; with return_grad also the gradient w.r.t. the logits
    (in the logits' dtype, scaled by grad_loss when given, else 1) computed in the same call;
    with return_lse also the per-row logsumexp (f32 [N]; f64 for f64 logits) that
    cross_entropy_backward takes. A target outside [0, V) that is not ignore_index: by default
    NaN for its row (no host sync: CUDA-graph safe); with check_targets=True an InvalidArgument
    naming it, after one small pass over the targets and a host sync."""
    _check("cross_entropy", logits)
    n = int(logits.shape[0])
    d = _interop.dtype_of(logits)
    grad_buf = None
    if return_grad:
        grad_buf, grad_finish = _interop.output(logits, tuple(logits.shape), d)
    out, out_finish = _interop.output(logits, (n,) if reduction == "none" else (), d)
    lse, lse_finish = _interop.output(logits, (n,), _lse_dtype(logits))
    if grad_loss is None and not check_targets:  # the core's functional entry: its plan cache and workspace
        _C.cross_entropy_call(logits, target, out, lse, reduction, int(ignore_index), float(label_smoothing), weight,
                              grad_buf, stream, _interop.workspace_allocator(logits))
    else:
        plan = _plan("cross_entropy", logits, target, weight, reduction, ignore_index, label_smoothing, return_grad,
                     grad_loss, grad_buf)
        if check_targets:
            _check_class_targets("cross_entropy", target, int(logits.shape[1]), ignore_index, stream)
        ws = _interop.workspace_allocator(logits)(plan.workspace_bytes())
        plan.run(logits, target, lse, ws, out=out, weight=weight, grad_input=grad_buf, grad_loss=grad_loss,
                 stream=stream)
    res = [out_finish(out)]
    if return_grad:
        res.append(grad_finish(grad_buf))
    if return_lse:
        res.append(lse_finish(lse))
    return res[0] if len(res) == 1 else tuple(res)


def cross_entropy_backward(grad_loss, logits, target, lse, *, weight=None, ignore_index=-100, label_smoothing=0.0,
                           reduction="mean", out=None, check_targets=False, stream=None):
    """cross_entropy_backward(grad_loss, logits, target, lse, ...): the gradient w.r.t. the logits
    from the logsumexp saved by cross_entropy(..., return_lse=True). grad_loss: [] for mean / sum,
    [N] for none, in the logits' dtype. check_targets as cross_entropy."""
    _check("cross_entropy_backward", logits)
    d = _interop.dtype_of(logits)
    finish = None
    if out is None:
        out, finish = _interop.output(logits, tuple(logits.shape), d)
    plan = _plan("cross_entropy_backward", logits, target, weight, reduction, ignore_index, label_smoothing, False,
                 grad_loss, out)
    if check_targets:
        _check_class_targets("cross_entropy_backward", target, int(logits.shape[1]), ignore_index, stream)
    ws = _interop.workspace_allocator(logits)(plan.workspace_bytes())
    plan.run(logits, target, lse, ws, weight=weight, grad_input=out, grad_loss=grad_loss, stream=stream)
    return finish(out) if finish else out


# ---- pointwise losses and nll_loss -------------------------------------------------------------
def _bshape(op, shapes):
    """numpy / torch broadcasting (the C++ plan checks again and names the operand)."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, v in enumerate(s):
            j = rank - len(s) + i
            if out[j] == 1:
                out[j] = int(v)
            elif int(v) not in (1, out[j]):
                raise InvalidArgument(f"{op}: shapes {[tuple(x) for x in shapes]} do not broadcast")
    return tuple(out)


def _gen_plan(op, input, target, weight, extra, reduction, param, log_target, log_input, full, ignore_index,
              grad_out, grad_input, wrt=(), grads=()):
    key = (op, reduction, float(param), bool(log_target), bool(log_input), bool(full), int(ignore_index),
           _key(input, target, weight, grad_out, grad_input, *extra), tuple(wrt), _key(*grads))

    def make():
        w = None if weight is None else _spec(weight)
        gl = None if grad_out is None else _spec(grad_out)
        gi = None if grad_input is None else _spec(grad_input)
        if op.startswith("nll_loss"):
            d = _C.CrossEntropyLossDescriptor(op, _spec(input), _spec(target), w, reduction, int(ignore_index),
                                              grad_input=gi, grad_loss=gl)
        else:
            d = _C.PointwiseLossDescriptor(op, _spec(input), _spec(target), w, [_spec(e) for e in extra], reduction,
                                           float(param), bool(log_target), bool(log_input), bool(full), gl, gi,
                                           wrt=list(wrt), grads=[_spec(g) for g in grads])
        return _C.LossPlan.select(d)

    return _CACHE.get(key, make)


def _call(op, input, target, *, weight=None, extra=(), out=None, grad_loss=None, grad_input=None, grads=None,
          wrt=(), reduction="mean", ignore_index=-100, param=0.0, log_target=False, log_input=True, full=False,
          p=2.0, eps=1e-6, swap=False, stream=None):
    """Select (the core's cache) and run a loss other than cross_entropy."""
    _C.loss_call(op, input, target, weight, list(extra), out, grad_loss, grad_input, grads, list(wrt), reduction,
                 int(ignore_index), float(param), bool(log_target), bool(log_input), bool(full), float(p), float(eps),
                 bool(swap), stream, _interop.workspace_allocator(input))


def _as_operand(op, name, v, like):
    if v is None or _interop.is_array(v):
        return v
    if isinstance(v, (int, float)):
        return _interop.scalar_like(float(v), like, _interop.dtype_of(like))
    raise InvalidArgument(f"{op}: {name} must be a tensor or a number, got {type(v).__name__}")


def _pointwise(op, input, target, *, weight=None, extra=(), reduction="mean", param=0.0, log_target=False,
               log_input=True, full=False, out_shape_extra=(), stream=None):
    if _interop.framework(input) == "numpy":
        raise InvalidArgument(f"{op}: got a numpy (CPU) array; expected a CUDA tensor")
    target = _as_operand(op, "target", target, input)
    extra = [e for e in extra if e is not None]
    d = _interop.dtype_of(input)
    shape = ()
    if reduction == "none":
        shapes = [tuple(input.shape), tuple(target.shape)] + list(out_shape_extra)
        if weight is not None:
            shapes.append(tuple(weight.shape))
        try:
            shape = _bshape(op, shapes)
        except InvalidArgument:  # the plan's refusal names the operand: raise that one where it has one
            _gen_plan(op, input, target, weight, extra, reduction, param, log_target, log_input, full, -100, None, None)
            raise
    out, finish = _interop.output(input, shape, d)
    _call(op, input, target, weight=weight, extra=extra, out=out, reduction=reduction, param=param,
          log_target=log_target, log_input=log_input, full=full, stream=stream)
    return finish(out)


def _pointwise_backward(op, grad_output, input, target, *, weight=None, extra=(), reduction="mean", param=0.0,
                        log_target=False, log_input=True, full=False, out=None, wrt="input", names=None,
                        stream=None):
    """The gradient(s) of a pointwise loss: wrt "input" (one tensor, the original API) or any
    operand names in `names` (a str gives a tensor, a sequence a tuple in that order)."""
    if _interop.framework(input) == "numpy":
        raise InvalidArgument(f"{op}: got a numpy (CPU) array; expected a CUDA tensor")
    target = _as_operand(op, "target", target, input)
    grad_output = _as_operand(op, "grad_output", grad_output, input)
    extra = [e for e in extra if e is not None]
    wrt_names, single = _wrt_names(op, wrt)
    operands = {"input": input, "target": target}
    operands.update(names or {})
    bufs, fins = _grad_buffers(op, wrt_names, single, out, operands)
    kw = dict(weight=weight, extra=extra, grad_loss=grad_output, reduction=reduction, param=param,
              log_target=log_target, log_input=log_input, full=full, stream=stream)
    if wrt_names == ("input",):  # the original descriptor: grad_input
        _call(op, input, target, grad_input=bufs[0], **kw)
    else:
        _call(op, input, target, grads=bufs, wrt=wrt_names, **kw)
    return _finish_grads(bufs, fins, single)


def _var_shape(input, var):
    v = tuple(var.shape)
    i = tuple(input.shape)
    if len(v) + 1 == len(i) and v == i[:-1]:
        return v + (1,)
    return v


def mse_loss(input, target, *, reduction="mean", stream=None):
    """mean / sum / none of (input - target)^2 (input and target broadcast)."""
    return _pointwise("mse_loss", input, target, reduction=reduction, stream=stream)


def mse_loss_backward(grad_output, input, target, *, reduction="mean", wrt="input", out=None, stream=None):
    """Gradient of mse_loss w.r.t. input: grad_output * 2 (input - target) (/ numel for mean).

    Every ``*_backward`` of a pointwise loss takes ``wrt``: "input" (default: one tensor, as
    before), or another operand torch differentiates ("target"; "var" of gaussian_nll_loss;
    "input2" / "target" of margin_ranking_loss; not the target of hinge_embedding_loss /
    soft_margin_loss, which torch does not differentiate), or a sequence of names for a tuple of
    gradients in that order. A gradient w.r.t. a broadcast operand is summed to its shape; out is
    then a tensor (str wrt) or a sequence of tensors / None (sequence wrt)."""
    return _pointwise_backward("mse_loss_backward", grad_output, input, target, reduction=reduction, out=out,
                               stream=stream, wrt=wrt)


def l1_loss(input, target, *, reduction="mean", stream=None):
    """|input - target|, reduced."""
    return _pointwise("l1_loss", input, target, reduction=reduction, stream=stream)


def l1_loss_backward(grad_output, input, target, *, reduction="mean", wrt="input", out=None, stream=None):
    return _pointwise_backward("l1_loss_backward", grad_output, input, target, reduction=reduction, out=out,
                               stream=stream, wrt=wrt)


def huber_loss(input, target, reduction="mean", delta=1.0, *, stream=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - delta / 2); d = input - target."""
    return _pointwise("huber_loss", input, target, reduction=reduction, param=delta, stream=stream)


def huber_loss_backward(grad_output, input, target, reduction="mean", delta=1.0, *, wrt="input", out=None, stream=None):
    return _pointwise_backward("huber_loss_backward", grad_output, input, target, reduction=reduction, param=delta,
                               out=out, stream=stream, wrt=wrt)


def smooth_l1_loss(input, target, *, reduction="mean", beta=1.0, stream=None):
    """0.5 d^2 / beta where |d| < beta, else |d| - beta / 2 (beta = 0: L1)."""
    return _pointwise("smooth_l1_loss", input, target, reduction=reduction, param=beta, stream=stream)


def smooth_l1_loss_backward(grad_output, input, target, *, reduction="mean", beta=1.0, wrt="input", out=None,
                            stream=None):
    return _pointwise_backward("smooth_l1_loss_backward", grad_output, input, target, reduction=reduction,
                               param=beta, out=out, stream=stream, wrt=wrt)


def binary_cross_entropy(input, target, weight=None, *, reduction="mean", stream=None):
    """-weight (target log(input) + (1 - target) log(1 - input)), logs clamped at -100 (torch)."""
    return _pointwise("binary_cross_entropy", input, target, weight=weight, reduction=reduction, stream=stream)


def binary_cross_entropy_backward(grad_output, input, target, weight=None, *, reduction="mean", wrt="input", out=None,
                                  stream=None):
    return _pointwise_backward("binary_cross_entropy_backward", grad_output, input, target, weight=weight,
                               reduction=reduction, out=out, stream=stream, wrt=wrt)


def binary_cross_entropy_with_logits(input, target, weight=None, *, reduction="mean", pos_weight=None, stream=None):
    """weight ((1 - target) x + (1 + (pos_weight - 1) target) softplus(-x)), computed stably."""
    ex = [] if pos_weight is None else [pos_weight]
    oe = [] if pos_weight is None else [tuple(pos_weight.shape)]
    return _pointwise("binary_cross_entropy_with_logits", input, target, weight=weight, extra=ex,
                      reduction=reduction, out_shape_extra=oe, stream=stream)


def binary_cross_entropy_with_logits_backward(grad_output, input, target, weight=None, *, reduction="mean",
                                              pos_weight=None, wrt="input", out=None, stream=None):
    ex = [] if pos_weight is None else [pos_weight]
    return _pointwise_backward("binary_cross_entropy_with_logits_backward", grad_output, input, target,
                               weight=weight, extra=ex, reduction=reduction, out=out, stream=stream, wrt=wrt)


def kl_div(input, target, *, reduction="mean", log_target=False, stream=None):
    """target (log target - input) (input: log-probabilities); reduction also 'batchmean'
    (sum / input.shape[0]); 'mean' averages over every element, as torch."""
    return _pointwise("kl_div", input, target, reduction=reduction, log_target=log_target, stream=stream)


def kl_div_backward(grad_output, input, target, *, reduction="mean", log_target=False, wrt="input", out=None,
                    stream=None):
    return _pointwise_backward("kl_div_backward", grad_output, input, target, reduction=reduction,
                               log_target=log_target, out=out, stream=stream, wrt=wrt)


def poisson_nll_loss(input, target, log_input=True, full=False, *, eps=1e-8, reduction="mean", stream=None):
    """exp(input) - target input (log_input) or input - target log(input + eps); full adds
    Stirling's term where target > 1."""
    return _pointwise("poisson_nll_loss", input, target, reduction=reduction, param=eps, log_input=log_input,
                      full=full, stream=stream)


def poisson_nll_loss_backward(grad_output, input, target, log_input=True, full=False, *, eps=1e-8,
                              reduction="mean", wrt="input", out=None, stream=None):
    return _pointwise_backward("poisson_nll_loss_backward", grad_output, input, target, reduction=reduction,
                               param=eps, log_input=log_input, full=full, out=out, stream=stream, wrt=wrt)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean", *, stream=None):
    """0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) if full).
    var: a tensor (input's shape, broadcastable, or input's shape without the last dim) or a number.
    Unlike torch, a negative var is not an error: it is clamped to eps like a small one."""
    var = _as_operand("gaussian_nll_loss", "var", var, input)
    return _pointwise("gaussian_nll_loss", input, target, extra=[var], reduction=reduction, param=eps, full=full,
                      out_shape_extra=[_var_shape(input, var)], stream=stream)


def gaussian_nll_loss_backward(grad_output, input, target, var, full=False, eps=1e-6, reduction="mean", *,
                               wrt="input", out=None, stream=None):
    var = _as_operand("gaussian_nll_loss_backward", "var", var, input)
    return _pointwise_backward("gaussian_nll_loss_backward", grad_output, input, target, extra=[var],
                               reduction=reduction, param=eps, full=full, out=out, stream=stream,
                               names={"var": var}, wrt=wrt)


def margin_ranking_loss(input1, input2, target, margin=0.0, *, reduction="mean", stream=None):
    """max(0, -target (input1 - input2) + margin)."""
    return _pointwise("margin_ranking_loss", input1, target, extra=[input2], reduction=reduction, param=margin,
                      out_shape_extra=[tuple(input2.shape)], stream=stream)


def margin_ranking_loss_backward(grad_output, input1, input2, target, margin=0.0, *, reduction="mean", wrt="input",
                                 out=None, stream=None):
    """Gradient w.r.t. input1 (wrt "input" / "input1"), "input2" and / or "target"."""
    return _pointwise_backward("margin_ranking_loss_backward", grad_output, input1, target, extra=[input2],
                               reduction=reduction, param=margin, out=out, stream=stream,
                               names={"input1": input1, "input2": input2}, wrt=wrt)


def hinge_embedding_loss(input, target, margin=1.0, *, reduction="mean", stream=None):
    """input where target == 1, max(0, margin - input) where target == -1 (torch's formula for
    other target values: both terms)."""
    return _pointwise("hinge_embedding_loss", input, target, reduction=reduction, param=margin, stream=stream)


def hinge_embedding_loss_backward(grad_output, input, target, margin=1.0, *, reduction="mean", wrt="input", out=None,
                                  stream=None):
    return _pointwise_backward("hinge_embedding_loss_backward", grad_output, input, target, reduction=reduction,
                               param=margin, out=out, stream=stream, wrt=wrt)


def soft_margin_loss(input, target, *, reduction="mean", stream=None):
    """log(1 + exp(-target input))."""
    return _pointwise("soft_margin_loss", input, target, reduction=reduction, stream=stream)


def soft_margin_loss_backward(grad_output, input, target, *, reduction="mean", wrt="input", out=None, stream=None):
    return _pointwise_backward("soft_margin_loss_backward", grad_output, input, target, reduction=reduction, out=out,
                               stream=stream, wrt=wrt)


def nll_loss(input, target, weight=None, *, ignore_index=-100, reduction="mean", check_targets=False, stream=None):
    """-weight[t] input[i, t] over log-probabilities [N, C]; mean divides by the sum of the weights
    of the non-ignored targets (torch). A target outside [0, C) that is not ignore_index: NaN by
    default (no host sync); with check_targets=True an InvalidArgument naming it (one small pass
    and a host sync)."""
    _check("nll_loss", input)
    d = _interop.dtype_of(input)
    if check_targets:  # the plan validates the operands before the targets are read
        _gen_plan("nll_loss", input, target, weight, [], reduction, 0.0, False, True, False, ignore_index, None, None)
        _check_class_targets("nll_loss", target, int(input.shape[-1]), ignore_index, stream)
    out, finish = _interop.output(input, (int(input.shape[0]),) if reduction == "none" else (), d)
    _call("nll_loss", input, target, weight=weight, out=out, reduction=reduction, ignore_index=ignore_index,
          stream=stream)
    return finish(out)


def nll_loss_backward(grad_output, input, target, weight=None, *, ignore_index=-100, reduction="mean", out=None,
                      check_targets=False, stream=None):
    """Gradient of nll_loss w.r.t. input: -weight[t_i] * grad_output(_i) (/ sum of weights for
    mean) at (i, t_i), 0 elsewhere. check_targets as nll_loss."""
    _check("nll_loss_backward", input)
    grad_output = _as_operand("nll_loss_backward", "grad_output", grad_output, input)
    d = _interop.dtype_of(input)
    finish = None
    if out is None:
        out, finish = _interop.output(input, tuple(input.shape), d)
    if check_targets:  # the plan validates the operands before the targets are read
        _gen_plan("nll_loss_backward", input, target, weight, [], reduction, 0.0, False, True, False, ignore_index,
                  grad_output, out)
        _check_class_targets("nll_loss_backward", target, int(input.shape[-1]), ignore_index, stream)
    _call("nll_loss_backward", input, target, weight=weight, grad_loss=grad_output, grad_input=out,
          reduction=reduction, ignore_index=ignore_index, stream=stream)
    return finish(out) if finish else out


# ---- gradients w.r.t. several operands (wrt) --------------------------------------------------------
def _wrt_names(op, wrt):
    """(names, single): a str asks for one gradient (returned as a tensor), a sequence for a tuple."""
    if isinstance(wrt, str):
        return (wrt,), True
    names = tuple(wrt) if wrt is not None else ()
    if not names or not all(isinstance(w, str) for w in names):
        raise InvalidArgument(f"{op}: wrt must be an operand name or a non-empty sequence of names, got {wrt!r}")
    return names, False


def _grad_buffers(op, names, single, out, operands):
    """One gradient buffer per name: the caller's (out) or a new one of the operand's shape and dtype."""
    if single:
        outs = [out]
    else:
        outs = [None] * len(names) if out is None else list(out)
        if len(outs) != len(names):
            raise InvalidArgument(f"{op}: out has {len(outs)} tensor(s) for {len(names)} wrt name(s); expected one "
                                  "per name (None entries are allocated)")
    bufs, fins = [], []
    for name, o in zip(names, outs):
        src = operands.get(name)
        if src is None or not _interop.is_array(src):
            raise InvalidArgument(f"{op}: wrt '{name}' is not a differentiable tensor operand of this call; expected "
                                  f"one of {', '.join(k for k, v in operands.items() if _interop.is_array(v))}")
        if o is None:
            b, f = _interop.output(src, tuple(src.shape), _interop.dtype_of(src))
        else:
            b, f = o, None
        bufs.append(b)
        fins.append(f)
    return bufs, fins


def _finish_grads(bufs, fins, single):
    res = tuple(f(b) if f else b for b, f in zip(bufs, fins))
    return res[0] if single else res


# ---- row losses -----------------------------------------------------------------------------------
def _row_plan(op, input, target, weight, extra, reduction, margin, p, eps, swap, grad_out, wrt, grads):
    key = ("row", op, reduction, float(margin), float(p), float(eps), bool(swap), tuple(wrt),
           _key(input, target, weight, grad_out, *extra), _key(*grads))

    def make():
        d = _C.RowLossDescriptor(op, _spec(input), _spec(target), None if weight is None else _spec(weight),
                                 [_spec(e) for e in extra], reduction, float(margin), float(p), float(eps), bool(swap),
                                 None if grad_out is None else _spec(grad_out), wrt=list(wrt),
                                 grads=[_spec(g) for g in grads])
        return _C.LossPlan.select(d)

    return _CACHE.get(key, make)


def _check_row_targets(op, input, target, stream):
    """The class-index target checks of the row losses (after the plan accepted the operands)."""
    if op.startswith("multilabel"):
        _check_multilabel_targets(op, target, int(input.shape[-1]), stream)
    else:
        _check_class_targets(op, target, int(input.shape[-1]), None, stream)


def _row_forward(op, input, target, *, weight=None, extra=(), reduction="mean", margin=0.0, p=2.0, eps=1e-6,
                 swap=False, check_targets=False, stream=None):
    if _interop.framework(input) == "numpy":
        raise InvalidArgument(f"{op}: got a numpy (CPU) array; expected a CUDA tensor")
    if check_targets:  # the plan validates the operands before the targets are read
        _row_plan(op, input, target, weight, extra, reduction, margin, p, eps, swap, None, (), ())
        _check_row_targets(op, input, target, stream)
    shape = ()
    if reduction == "none":
        n = int(input.shape[0]) if len(input.shape) == 2 else 1
        per_row = len(target.shape) > 0 if op == "multi_margin_loss" else len(input.shape) == 2
        shape = (n,) if per_row else ()
    out, finish = _interop.output(input, shape, _interop.dtype_of(input))
    _call(op, input, target, weight=weight, extra=extra, out=out, reduction=reduction, param=margin, p=p, eps=eps,
          swap=swap, stream=stream)
    return finish(out)


def _row_backward(op, grad_output, input, target, operands, *, weight=None, extra=(), reduction="mean", margin=0.0,
                  p=2.0, eps=1e-6, swap=False, wrt="input", out=None, check_targets=False, stream=None):
    if _interop.framework(input) == "numpy":
        raise InvalidArgument(f"{op}: got a numpy (CPU) array; expected a CUDA tensor")
    grad_output = _as_operand(op, "grad_output", grad_output, input)
    names, single = _wrt_names(op, wrt)
    bufs, fins = _grad_buffers(op, names, single, out, operands)
    if check_targets:  # the plan validates the operands before the targets are read
        _row_plan(op, input, target, weight, extra, reduction, margin, p, eps, swap, grad_output, names, bufs)
        _check_row_targets(op, input, target, stream)
    _call(op, input, target, weight=weight, extra=extra, grad_loss=grad_output, grads=bufs, wrt=names,
          reduction=reduction, param=margin, p=p, eps=eps, swap=swap, stream=stream)
    return _finish_grads(bufs, fins, single)


def cosine_embedding_loss(input1, input2, target, margin=0.0, *, reduction="mean", stream=None):
    """1 - cos(input1, input2) where target == 1, max(0, cos - margin) where target == -1, 0 for
    other targets; cos = x1.x2 / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12)) per row (torch's EPSILON).
    input1, input2: [N, D] (same shape) or [D]; target: [N] (or [] for [D]), int or input1's dtype."""
    return _row_forward("cosine_embedding_loss", input1, target, extra=[input2], reduction=reduction, margin=margin,
                        stream=stream)


def cosine_embedding_loss_backward(grad_output, input1, input2, target, margin=0.0, *, reduction="mean",
                                   wrt="input1", out=None, stream=None):
    """Gradients of cosine_embedding_loss: wrt "input1" (alias "input") and / or "input2"; a str
    gives one tensor, a sequence (e.g. ("input1", "input2")) a tuple in that order. out: the
    gradient buffer(s) to write, in wrt's form."""
    return _row_backward("cosine_embedding_loss_backward", grad_output, input1, target,
                         {"input": input1, "input1": input1, "input2": input2}, extra=[input2], reduction=reduction,
                         margin=margin, wrt=wrt, out=out, stream=stream)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, *, reduction="mean", check_targets=False,
                      stream=None):
    """Per row: weight[y] / C * sum_{j != y} max(0, margin - x[y] + x[j])^p (torch's kernel), p 1 or 2.
    input [N, C] or [C]; target [N] int64 / int32 (or [] / [1] for [C]). A target outside [0, C):
    NaN for its row by default (no host sync); with check_targets=True an InvalidArgument naming
    it (one small pass and a host sync)."""
    return _row_forward("multi_margin_loss", input, target, weight=weight, reduction=reduction, margin=margin, p=p,
                        check_targets=check_targets, stream=stream)


def multi_margin_loss_backward(grad_output, input, target, p=1, margin=1.0, weight=None, *, reduction="mean",
                               wrt="input", out=None, check_targets=False, stream=None):
    """Gradient of multi_margin_loss w.r.t. input. check_targets as multi_margin_loss."""
    return _row_backward("multi_margin_loss_backward", grad_output, input, target, {"input": input}, weight=weight,
                         reduction=reduction, margin=margin, p=p, wrt=wrt, out=out, check_targets=check_targets,
                         stream=stream)


def multilabel_margin_loss(input, target, *, reduction="mean", check_targets=False, stream=None):
    """Per row: 1/C sum over the targets y_k (up to the first -1) and the non-target classes j of
    max(0, 1 - x[y_k] + x[j]). input [N, C] or [C]; target of input's shape, int64 / int32. A target
    >= C before the -1 (or a value below -1 where the list ends): NaN for its row by default (no
    host sync); with check_targets=True an InvalidArgument naming it (a few small passes and a host sync)."""
    return _row_forward("multilabel_margin_loss", input, target, reduction=reduction, check_targets=check_targets,
                        stream=stream)


def multilabel_margin_loss_backward(grad_output, input, target, *, reduction="mean", wrt="input", out=None,
                                    check_targets=False, stream=None):
    """Gradient of multilabel_margin_loss w.r.t. input. check_targets as multilabel_margin_loss."""
    return _row_backward("multilabel_margin_loss_backward", grad_output, input, target, {"input": input},
                         reduction=reduction, wrt=wrt, out=out, check_targets=check_targets, stream=stream)


def multilabel_soft_margin_loss(input, target, weight=None, *, reduction="mean", stream=None):
    """Per row: -1/C sum_j weight[j] (t_j log sigmoid(x_j) + (1 - t_j) log sigmoid(-x_j)).
    input [N, C] or [C]; target of input's shape and dtype; weight [C]."""
    return _row_forward("multilabel_soft_margin_loss", input, target, weight=weight, reduction=reduction,
                        stream=stream)


def multilabel_soft_margin_loss_backward(grad_output, input, target, weight=None, *, reduction="mean", wrt="input",
                                         out=None, stream=None):
    """Gradients of multilabel_soft_margin_loss: wrt "input" and / or "target"."""
    return _row_backward("multilabel_soft_margin_loss_backward", grad_output, input, target,
                         {"input": input, "target": target}, weight=weight, reduction=reduction, wrt=wrt, out=out,
                         stream=stream)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, *, reduction="mean",
                        stream=None):
    """max(0, margin + d(a, p) - d(a, n)) per row, d(x, y) = ||x - y + eps||_p (pairwise_distance);
    swap: d(a, n) becomes min(d(a, n), d(p, n)). anchor, positive, negative: [N, D] (same shape) or
    [D]; p > 0 (finite)."""
    return _row_forward("triplet_margin_loss", anchor, positive, extra=[negative], reduction=reduction,
                        margin=margin, p=p, eps=eps, swap=swap, stream=stream)


def triplet_margin_loss_backward(grad_output, anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, *,
                                 reduction="mean", wrt="anchor", out=None, stream=None):
    """Gradients of triplet_margin_loss: wrt "anchor" (alias "input"), "positive", "negative"; a
    str gives one tensor, a sequence a tuple in that order."""
    return _row_backward("triplet_margin_loss_backward", grad_output, anchor, positive,
                         {"input": anchor, "anchor": anchor, "positive": positive, "negative": negative},
                         extra=[negative], reduction=reduction, margin=margin, p=p, eps=eps, swap=swap, wrt=wrt,
                         out=out, stream=stream)


_ROW_FUNCTIONS = (cosine_embedding_loss, cosine_embedding_loss_backward, multi_margin_loss,
                  multi_margin_loss_backward, multilabel_margin_loss, multilabel_margin_loss_backward,
                  multilabel_soft_margin_loss, multilabel_soft_margin_loss_backward, triplet_margin_loss,
                  triplet_margin_loss_backward)


FUNCTIONS = dict(cross_entropy=cross_entropy, cross_entropy_backward=cross_entropy_backward)
for _f in (mse_loss, l1_loss, huber_loss, smooth_l1_loss, binary_cross_entropy, binary_cross_entropy_with_logits,
           kl_div, poisson_nll_loss, gaussian_nll_loss, margin_ranking_loss, hinge_embedding_loss, soft_margin_loss,
           nll_loss, mse_loss_backward, l1_loss_backward, huber_loss_backward, smooth_l1_loss_backward,
           binary_cross_entropy_backward, binary_cross_entropy_with_logits_backward, kl_div_backward,
           poisson_nll_loss_backward, gaussian_nll_loss_backward, margin_ranking_loss_backward,
           hinge_embedding_loss_backward, soft_margin_loss_backward, nll_loss_backward, *_ROW_FUNCTIONS):
    FUNCTIONS[_f.__name__] = _f
del _f
