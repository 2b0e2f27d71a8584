"""Functional losses: cross-entropy for large vocabularies (forward, fused forward + gradient,
backward from the saved logsumexp).

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
        raise InvalidArgument(f"{name}: logits must have shape [N, V], got {tuple(logits.shape)}")


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


FUNCTIONS = dict(cross_entropy=cross_entropy, cross_entropy_backward=cross_entropy_backward)
