"""Functional losses: cross-entropy for large vocabularies (forward, fused forward + gradient,
backward from the saved logsumexp), nll_loss, and torch.nn.functional's pointwise losses (same
argument names and defaults; the deprecated size_average / reduce are not taken), each with a
``*_backward`` that returns the gradient w.r.t. the first input.

Plans are cached here on the operands' metadata and the parameters; outputs and the workspace
are allocated in the logits' framework; launches go to its current stream unless ``stream=``.
"""
from . import _C, _interop
from ._dtypes import DType
from .errors import InvalidArgument

_CACHE = {}


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
            k.append((tuple(t.shape), str(t.dtype), tuple(_strides(t) or ())))
    return tuple(k)


def _plan(op, logits, target, weight, reduction, ignore_index, label_smoothing, with_grad, grad_loss, grad_input):
    key = (op, reduction, int(ignore_index), float(label_smoothing), bool(with_grad), grad_loss is not None,
           _key(logits, target, weight, grad_input))
    plan = _CACHE.get(key)
    if plan is None:
        if len(_CACHE) >= 4096:
            _CACHE.clear()
        desc = _C.LossDescriptor(op, _spec(logits), _spec(target), None if weight is None else _spec(weight),
                                 reduction, int(ignore_index), float(label_smoothing), bool(with_grad),
                                 grad_loss is not None, None if grad_input is None else _spec(grad_input))
        plan = _CACHE[key] = _C.LossPlan.select(desc)
    return plan


def _check(name, logits):
    if _interop.framework(logits) == "numpy":
        raise InvalidArgument(f"{name}: got a numpy (CPU) array; expected a CUDA tensor")
    if len(logits.shape) != 2:
        what = "input must have shape [N, C]" if name.startswith("nll") else "logits must have shape [N, V]"
        raise InvalidArgument(f"{name}: {what}, got {tuple(logits.shape)}")


def _lse_dtype(logits):
    return DType.float64 if _interop.dtype_of(logits) == DType.float64 else DType.float32


def cross_entropy(logits, target, *, weight=None, ignore_index=-100, label_smoothing=0.0, reduction="mean",
                  return_grad=False, grad_loss=None, return_lse=False, stream=None):
    """cross_entropy(logits [N, V], target [N] int64/int32, *, weight=None [V], ignore_index=-100,
    label_smoothing=0.0, reduction="mean", return_grad=False, grad_loss=None, return_lse=False, stream=None)

    torch.nn.functional.cross_entropy's semantics (mean divides by the sum of the weights of the
    non-ignored targets). Returns the loss; with return_grad also the gradient w.r.t. the logits
    (in the logits' dtype, scaled by grad_loss when given, else 1) computed in the same call;
    with return_lse also the per-row logsumexp (f32 [N]; f64 for f64 logits) that
    cross_entropy_backward takes. A target outside [0, V) (not ignore_index) gives NaN for its row."""
    _check("cross_entropy", logits)
    n = int(logits.shape[0])
    d = _interop.dtype_of(logits)
    grad_buf = None
    if return_grad:
        grad_buf, grad_finish = _interop.output(logits, tuple(logits.shape), d)
    plan = _plan("cross_entropy", logits, target, weight, reduction, ignore_index, label_smoothing, return_grad,
                 grad_loss, grad_buf)
    out, out_finish = _interop.output(logits, (n,) if reduction == "none" else (), d)
    lse, lse_finish = _interop.output(logits, (n,), _lse_dtype(logits))
    ws = _interop.workspace_allocator(logits)(plan.workspace_bytes())
    plan.run(logits, target, lse, ws, out=out, weight=weight, grad_input=grad_buf, grad_loss=grad_loss, stream=stream)
    res = [out_finish(out)]
    if return_grad:
        res.append(grad_finish(grad_buf))
    if return_lse:
        res.append(lse_finish(lse))
    return res[0] if len(res) == 1 else tuple(res)


def cross_entropy_backward(grad_loss, logits, target, lse, *, weight=None, ignore_index=-100, label_smoothing=0.0,
                           reduction="mean", out=None, stream=None):
    """cross_entropy_backward(grad_loss, logits, target, lse, ...): the gradient w.r.t. the logits
    from the logsumexp saved by cross_entropy(..., return_lse=True). grad_loss: [] for mean / sum,
    [N] for none, in the logits' dtype."""
    _check("cross_entropy_backward", logits)
    d = _interop.dtype_of(logits)
    finish = None
    if out is None:
        out, finish = _interop.output(logits, tuple(logits.shape), d)
    plan = _plan("cross_entropy_backward", logits, target, weight, reduction, ignore_index, label_smoothing, False,
                 grad_loss, out)
    ws = _interop.workspace_allocator(logits)(plan.workspace_bytes())
    plan.run(logits, target, lse, ws, weight=weight, grad_input=out, grad_loss=grad_loss, stream=stream)
    return finish(out) if finish else out


# ---- pointwise losses and nll_loss -------------------------------------------------------------
def _is_tensor(x):
    return hasattr(x, "shape") and hasattr(x, "dtype")


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
              grad_out, grad_input):
    key = (op, reduction, float(param), bool(log_target), bool(log_input), bool(full), int(ignore_index),
           _key(input, target, weight, grad_out, grad_input, *extra))
    plan = _CACHE.get(key)
    if plan is None:
        if len(_CACHE) >= 4096:
            _CACHE.clear()
        desc = _C.LossDescriptor(op, _spec(input), _spec(target), None if weight is None else _spec(weight),
                                 reduction, int(ignore_index), 0.0, False, grad_out is not None,
                                 None if grad_input is None else _spec(grad_input), [_spec(e) for e in extra],
                                 float(param), bool(log_target), bool(log_input), bool(full),
                                 None if grad_out is None else _spec(grad_out))
        plan = _CACHE[key] = _C.LossPlan.select(desc)
    return plan


def _as_operand(op, name, v, like):
    if v is None or _is_tensor(v):
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
    plan = _gen_plan(op, input, target, weight, extra, reduction, param, log_target, log_input, full, -100, None, None)
    if reduction == "none":
        shapes = [tuple(input.shape), tuple(target.shape)] + list(out_shape_extra)
        if weight is not None:
            shapes.append(tuple(weight.shape))
        shape = _bshape(op, shapes)
    else:
        shape = ()
    out, finish = _interop.output(input, shape, d)
    ws = _interop.workspace_allocator(input)(plan.workspace_bytes())
    plan.run(input, target, None, ws, out=out, weight=weight, stream=stream, extra=extra)
    return finish(out)


def _pointwise_backward(op, grad_output, input, target, *, weight=None, extra=(), reduction="mean", param=0.0,
                        log_target=False, log_input=True, full=False, out=None, stream=None):
    if _interop.framework(input) == "numpy":
        raise InvalidArgument(f"{op}: got a numpy (CPU) array; expected a CUDA tensor")
    target = _as_operand(op, "target", target, input)
    grad_output = _as_operand(op, "grad_output", grad_output, input)
    extra = [e for e in extra if e is not None]
    d = _interop.dtype_of(input)
    finish = None
    if out is None:
        out, finish = _interop.output(input, tuple(input.shape), d)
    plan = _gen_plan(op, input, target, weight, extra, reduction, param, log_target, log_input, full, -100,
                     grad_output, out)
    ws = _interop.workspace_allocator(input)(plan.workspace_bytes())
    plan.run(input, target, None, ws, weight=weight, grad_input=out, grad_loss=grad_output, stream=stream, extra=extra)
    return finish(out) if finish else out


def _var_shape(input, var):
    v = tuple(var.shape)
    i = tuple(input.shape)
    if len(v) + 1 == len(i) and v == i[:-1]:
        return v + (1,)
    return v


def mse_loss(input, target, *, reduction="mean", stream=None):
    """mean / sum / none of (input - target)^2 (input and target broadcast)."""
    return _pointwise("mse_loss", input, target, reduction=reduction, stream=stream)


def mse_loss_backward(grad_output, input, target, *, reduction="mean", out=None, stream=None):
    """Gradient of mse_loss w.r.t. input: grad_output * 2 (input - target) (/ numel for mean)."""
    return _pointwise_backward("mse_loss_backward", grad_output, input, target, reduction=reduction, out=out,
                               stream=stream)


def l1_loss(input, target, *, reduction="mean", stream=None):
    """|input - target|, reduced."""
    return _pointwise("l1_loss", input, target, reduction=reduction, stream=stream)


def l1_loss_backward(grad_output, input, target, *, reduction="mean", out=None, stream=None):
    return _pointwise_backward("l1_loss_backward", grad_output, input, target, reduction=reduction, out=out,
                               stream=stream)


def huber_loss(input, target, reduction="mean", delta=1.0, *, stream=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - delta / 2); d = input - target."""
    return _pointwise("huber_loss", input, target, reduction=reduction, param=delta, stream=stream)


def huber_loss_backward(grad_output, input, target, reduction="mean", delta=1.0, *, out=None, stream=None):
    return _pointwise_backward("huber_loss_backward", grad_output, input, target, reduction=reduction, param=delta,
                               out=out, stream=stream)


def smooth_l1_loss(input, target, *, reduction="mean", beta=1.0, stream=None):
    """0.5 d^2 / beta where |d| < beta, else |d| - beta / 2 (beta = 0: L1)."""
    return _pointwise("smooth_l1_loss", input, target, reduction=reduction, param=beta, stream=stream)


def smooth_l1_loss_backward(grad_output, input, target, *, reduction="mean", beta=1.0, out=None, stream=None):
    return _pointwise_backward("smooth_l1_loss_backward", grad_output, input, target, reduction=reduction,
                               param=beta, out=out, stream=stream)


def binary_cross_entropy(input, target, weight=None, *, reduction="mean", stream=None):
    """-weight (target log(input) + (1 - target) log(1 - input)), logs clamped at -100 (torch)."""
    return _pointwise("binary_cross_entropy", input, target, weight=weight, reduction=reduction, stream=stream)


def binary_cross_entropy_backward(grad_output, input, target, weight=None, *, reduction="mean", out=None,
                                  stream=None):
    return _pointwise_backward("binary_cross_entropy_backward", grad_output, input, target, weight=weight,
                               reduction=reduction, out=out, stream=stream)


def binary_cross_entropy_with_logits(input, target, weight=None, *, reduction="mean", pos_weight=None, stream=None):
    """weight ((1 - target) x + (1 + (pos_weight - 1) target) softplus(-x)), computed stably."""
    ex = [] if pos_weight is None else [pos_weight]
    oe = [] if pos_weight is None else [tuple(pos_weight.shape)]
    return _pointwise("binary_cross_entropy_with_logits", input, target, weight=weight, extra=ex,
                      reduction=reduction, out_shape_extra=oe, stream=stream)


def binary_cross_entropy_with_logits_backward(grad_output, input, target, weight=None, *, reduction="mean",
                                              pos_weight=None, out=None, stream=None):
    ex = [] if pos_weight is None else [pos_weight]
    return _pointwise_backward("binary_cross_entropy_with_logits_backward", grad_output, input, target,
                               weight=weight, extra=ex, reduction=reduction, out=out, stream=stream)


def kl_div(input, target, *, reduction="mean", log_target=False, stream=None):
    """target (log target - input) (input: log-probabilities); reduction also 'batchmean'
    (sum / input.shape[0]); 'mean' averages over every element, as torch."""
    return _pointwise("kl_div", input, target, reduction=reduction, log_target=log_target, stream=stream)


def kl_div_backward(grad_output, input, target, *, reduction="mean", log_target=False, out=None, stream=None):
    return _pointwise_backward("kl_div_backward", grad_output, input, target, reduction=reduction,
                               log_target=log_target, out=out, stream=stream)


def poisson_nll_loss(input, target, log_input=True, full=False, *, eps=1e-8, reduction="mean", stream=None):
    """exp(input) - target input (log_input) or input - target log(input + eps); full adds
    Stirling's term where target > 1."""
    return _pointwise("poisson_nll_loss", input, target, reduction=reduction, param=eps, log_input=log_input,
                      full=full, stream=stream)


def poisson_nll_loss_backward(grad_output, input, target, log_input=True, full=False, *, eps=1e-8,
                              reduction="mean", out=None, stream=None):
    return _pointwise_backward("poisson_nll_loss_backward", grad_output, input, target, reduction=reduction,
                               param=eps, log_input=log_input, full=full, out=out, stream=stream)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean", *, stream=None):
    """0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) if full).
    var: a tensor (input's shape, broadcastable, or input's shape without the last dim) or a number.
    Unlike torch, a negative var is not an error: it is clamped to eps like a small one."""
    var = _as_operand("gaussian_nll_loss", "var", var, input)
    return _pointwise("gaussian_nll_loss", input, target, extra=[var], reduction=reduction, param=eps, full=full,
                      out_shape_extra=[_var_shape(input, var)], stream=stream)


def gaussian_nll_loss_backward(grad_output, input, target, var, full=False, eps=1e-6, reduction="mean", *,
                               out=None, stream=None):
    var = _as_operand("gaussian_nll_loss_backward", "var", var, input)
    return _pointwise_backward("gaussian_nll_loss_backward", grad_output, input, target, extra=[var],
                               reduction=reduction, param=eps, full=full, out=out, stream=stream)


def margin_ranking_loss(input1, input2, target, margin=0.0, *, reduction="mean", stream=None):
    """max(0, -target (input1 - input2) + margin)."""
    return _pointwise("margin_ranking_loss", input1, target, extra=[input2], reduction=reduction, param=margin,
                      out_shape_extra=[tuple(input2.shape)], stream=stream)


def margin_ranking_loss_backward(grad_output, input1, input2, target, margin=0.0, *, reduction="mean", out=None,
                                 stream=None):
    """Gradient w.r.t. input1 (the gradient w.r.t. input2 is its negative)."""
    return _pointwise_backward("margin_ranking_loss_backward", grad_output, input1, target, extra=[input2],
                               reduction=reduction, param=margin, out=out, stream=stream)


def hinge_embedding_loss(input, target, margin=1.0, *, reduction="mean", stream=None):
    """input where target == 1, max(0, margin - input) where target == -1 (torch's formula for
    other target values: both terms)."""
    return _pointwise("hinge_embedding_loss", input, target, reduction=reduction, param=margin, stream=stream)


def hinge_embedding_loss_backward(grad_output, input, target, margin=1.0, *, reduction="mean", out=None,
                                  stream=None):
    return _pointwise_backward("hinge_embedding_loss_backward", grad_output, input, target, reduction=reduction,
                               param=margin, out=out, stream=stream)


def soft_margin_loss(input, target, *, reduction="mean", stream=None):
    """log(1 + exp(-target input))."""
    return _pointwise("soft_margin_loss", input, target, reduction=reduction, stream=stream)


def soft_margin_loss_backward(grad_output, input, target, *, reduction="mean", out=None, stream=None):
    return _pointwise_backward("soft_margin_loss_backward", grad_output, input, target, reduction=reduction, out=out,
                               stream=stream)


def nll_loss(input, target, weight=None, *, ignore_index=-100, reduction="mean", stream=None):
    """-weight[t] input[i, t] over log-probabilities [N, C]; mean divides by the sum of the weights
    of the non-ignored targets (torch). A target outside [0, C) (not ignore_index) gives NaN."""
    _check("nll_loss", input)
    d = _interop.dtype_of(input)
    plan = _gen_plan("nll_loss", input, target, weight, [], reduction, 0.0, False, True, False, ignore_index, None,
                     None)
    out, finish = _interop.output(input, (int(input.shape[0]),) if reduction == "none" else (), d)
    ws = _interop.workspace_allocator(input)(plan.workspace_bytes())
    plan.run(input, target, None, ws, out=out, weight=weight, stream=stream)
    return finish(out)


def nll_loss_backward(grad_output, input, target, weight=None, *, ignore_index=-100, reduction="mean", out=None,
                      stream=None):
    """Gradient of nll_loss w.r.t. input: -weight[t_i] * grad_output(_i) (/ sum of weights for
    mean) at (i, t_i), 0 elsewhere."""
    _check("nll_loss_backward", input)
    grad_output = _as_operand("nll_loss_backward", "grad_output", grad_output, input)
    d = _interop.dtype_of(input)
    finish = None
    if out is None:
        out, finish = _interop.output(input, tuple(input.shape), d)
    plan = _gen_plan("nll_loss_backward", input, target, weight, [], reduction, 0.0, False, True, False, ignore_index,
                     grad_output, out)
    ws = _interop.workspace_allocator(input)(plan.workspace_bytes())
    plan.run(input, target, None, ws, weight=weight, grad_input=out, grad_loss=grad_output, stream=stream)
    return finish(out) if finish else out


FUNCTIONS = dict(cross_entropy=cross_entropy, cross_entropy_backward=cross_entropy_backward)
for _f in (mse_loss, l1_loss, huber_loss, smooth_l1_loss, binary_cross_entropy, binary_cross_entropy_with_logits,
           kl_div, poisson_nll_loss, gaussian_nll_loss, margin_ranking_loss, hinge_embedding_loss, soft_margin_loss,
           nll_loss, mse_loss_backward, l1_loss_backward, huber_loss_backward, smooth_l1_loss_backward,
           binary_cross_entropy_backward, binary_cross_entropy_with_logits_backward, kl_div_backward,
           poisson_nll_loss_backward, gaussian_nll_loss_backward, margin_ranking_loss_backward,
           hinge_embedding_loss_backward, soft_margin_loss_backward, nll_loss_backward):
    FUNCTIONS[_f.__name__] = _f
del _f
