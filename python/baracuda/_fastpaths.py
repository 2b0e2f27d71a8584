"""Torch fast paths of the hottest functional ops (softmax, log_softmax, rms_norm, layer_norm,
linear, matmul, sum, mean, cross_entropy): for torch tensors in the common form (no stream, no
out= where it would need checks, no gradient to record, no torch.compile trace) the output is
allocated with one torch call and the core entered once; everything else goes to the general
function (with the autograd routing). The general functions stay the reference: the fast path
must give the same result and raise the same errors (the core checks every operand).
"""
from . import _C, _gemm, _interop, _loss, _norm, _reduction, _softmax
from ._autograd import FAST, T, differentiable, route

_softmax_call = _C.softmax_call
_norm_call = _C.norm_call
_gemm_call = _C.gemm_call
_reduction_call = _C.reduction_call

# The routing test of needs_route, inlined: `(any operand requires grad and grad mode is on) or
# torch.compile is tracing`. Reading .requires_grad first keeps the common call to two lookups.
# torch.empty_like of a contiguous operand allocates fastest (x.new_empty(x.shape) also parses a
# torch.Size).


def _like(x):
    return T.empty_like(x) if x.is_contiguous() else x.new_empty(x.shape)


def _softmax_like(name):
    general = getattr(_softmax, name)
    guarded = differentiable(name, general)

    def fn(x, dim=None, *, axis=None, out=None, stream=None):
        if stream is None and axis is None and out is None and type(x) in FAST:
            if x.requires_grad and T.grad() or T.compiling():
                return route(name, general, (x,), dict(dim=dim))
            y = _like(x)
            _softmax_call(name, y, (x,), -1 if dim is None else int(dim), None)
            return y
        return guarded(x, dim, axis=axis, out=out, stream=stream)

    return _finish(fn, general)


def _finish(fn, general):
    fn.__name__ = fn.__qualname__ = general.__name__
    fn.__doc__ = general.__doc__
    fn.__wrapped__ = general  # inspect.signature shows the general function's full signature
    fn._routes_itself = True
    return fn


def _norm_fast(name, x, weight, bias, eps, residual=None):
    y = _like(x)
    if residual is None:
        _norm_call(name, float(eps), False, y, x, weight, bias, None, None, None, None, None, None, None, None, None,
                   None, None)
        return y
    h = _like(x)  # the new residual stream, x + residual
    _norm_call(name, float(eps), False, y, x, weight, bias, residual, h, None, None, None, None, None, None, None,
               None, None)
    return y, h


def _residual_only(kwargs):
    """The residual= keyword alone (a torch tensor), the one keyword the norm fast paths take."""
    if not kwargs:
        return None, True
    r = kwargs.get("residual")
    return r, len(kwargs) == 1 and type(r) in FAST


def _rms_norm():
    general = _norm.rms_norm
    guarded = differentiable("rms_norm", general)

    def rms_norm(x, weight=None, eps=1e-6, **kwargs):
        r, fast = _residual_only(kwargs)
        if fast and type(x) in FAST and (weight is None or type(weight) in FAST):
            if ((x.requires_grad or weight is not None and weight.requires_grad or r is not None and r.requires_grad)
                    and T.grad() or T.compiling()):
                return route("rms_norm", general, (x, weight, eps), kwargs)
            return _norm_fast("rms_norm", x, weight, None, eps, r)
        return guarded(x, weight, eps, **kwargs)

    return _finish(rms_norm, general)


def _layer_norm():
    general = _norm.layer_norm
    guarded = differentiable("layer_norm", general)

    def layer_norm(x, weight=None, bias=None, eps=1e-5, **kwargs):
        r, fast = _residual_only(kwargs)
        if (fast and type(x) in FAST and (weight is None or type(weight) in FAST)
                and (bias is None or type(bias) in FAST)):
            if ((x.requires_grad or weight is not None and weight.requires_grad or bias is not None
                 and bias.requires_grad or r is not None and r.requires_grad) and T.grad() or T.compiling()):
                return route("layer_norm", general, (x, weight, bias, eps), kwargs)
            return _norm_fast("layer_norm", x, weight, bias, eps, r)
        return guarded(x, weight, bias, eps, **kwargs)

    return _finish(layer_norm, general)


def _linear():
    general = _gemm.linear
    guarded = differentiable("linear", general)

    def linear(x, weight, bias=None, **kwargs):
        if (not kwargs and type(x) in FAST and type(weight) in FAST and weight.dim() == 2 and x.dim() >= 2
                and x.shape[-1] == weight.shape[1]
                and (bias is None or (type(bias) in FAST and bias.shape == weight.shape[:1]))):
            if ((x.requires_grad or weight.requires_grad or bias is not None and bias.requires_grad) and T.grad()
                    or T.compiling()):
                return route("linear", general, (x, weight, bias), {})
            n = weight.shape[0]
            if x.dim() == 2:
                x2 = x
                y = y2 = x.new_empty_strided((x.shape[0], n), (n, 1))
            else:
                y = x.new_empty((*x.shape[:-1], n))
                x2, y2 = x.reshape(-1, x.shape[-1]), y.view(-1, n)
            _gemm_call(y2, x2, weight.t(), 1.0, 0.0, "none", bias, None, None, None, None, None, False, None,
                       _interop.workspace_allocator(x))
            return y
        return guarded(x, weight, bias, **kwargs)

    return _finish(linear, general)


def _matmul():
    general = _gemm.matmul
    guarded = differentiable("matmul", general)

    def matmul(a, b, **kwargs):
        alpha = kwargs.get("alpha", 1.0)
        if (len(kwargs) <= ("alpha" in kwargs) and type(a) in FAST and type(b) in FAST and a.dim() == b.dim() >= 2
                and a.shape[:-2] == b.shape[:-2]):
            if (a.requires_grad or b.requires_grad) and T.grad() or T.compiling():
                return route("matmul", general, (a, b), kwargs)
            n = b.shape[-1]
            y = a.new_empty_strided((a.shape[0], n), (n, 1)) if a.dim() == 2 else a.new_empty((*a.shape[:-1], n))
            _gemm_call(y, a, b, float(alpha), 0.0, "none", None, None, None, None, None, None, False, None,
                       _interop.workspace_allocator(a))
            return y
        return guarded(a, b, **kwargs)

    return _finish(matmul, general)


def _sum_like(name):
    general = _reduction.FUNCTIONS[name]
    guarded = differentiable(name, general)

    def fn(x, dim=None, keepdim=False, **kwargs):
        if not kwargs and type(x) in FAST and x.is_floating_point():
            if x.requires_grad and T.grad() or T.compiling():
                return route(name, general, (x, dim, keepdim), {})
            rank = x.dim()
            axes = [] if dim is None else ([dim] if isinstance(dim, int) else list(dim))
            norm = {a % rank for a in axes if -rank <= a < rank} if axes else set(range(rank))
            if rank and (len(norm) == len(axes) or not axes):
                y = x.new_empty(_reduction._reduced_shape(x.shape, norm, keepdim))
                _reduction_call(name, y, (x,), axes, bool(keepdim), {}, None, _interop.workspace_allocator(x))
                return y
        return guarded(x, dim, keepdim, **kwargs)

    return _finish(fn, general)


def _cross_entropy():
    general = _loss.cross_entropy
    guarded = differentiable("cross_entropy", general)

    def cross_entropy(logits, target, *, reduction="mean", ignore_index=-100, **kwargs):
        if (not kwargs and type(logits) in FAST and type(target) in FAST and logits.dim() == 2
                and reduction in ("mean", "sum", "none")):
            if logits.requires_grad and T.grad() or T.compiling():
                return route("cross_entropy", general, (logits, target),
                             dict(reduction=reduction, ignore_index=ignore_index))
            n = logits.shape[0]
            loss = logits.new_empty_strided((n,), (1,)) if reduction == "none" else logits.new_empty_strided((), ())
            lse = logits.new_empty_strided((n,), (1,), dtype=T.float64 if logits.dtype == T.float64 else T.float32)
            _C.cross_entropy_call(logits, target, loss, lse, reduction, int(ignore_index), 0.0, None, None, None,
                                  _interop.workspace_allocator(logits))
            return loss
        return guarded(logits, target, reduction=reduction, ignore_index=ignore_index, **kwargs)

    return _finish(cross_entropy, general)


def functions():
    """name -> fast-path function, to replace the general ones in the package namespace."""
    return dict(softmax=_softmax_like("softmax"), log_softmax=_softmax_like("log_softmax"),
                rms_norm=_rms_norm(), layer_norm=_layer_norm(), linear=_linear(),
                matmul=_matmul(), sum=_sum_like("sum"), mean=_sum_like("mean"), cross_entropy=_cross_entropy())
