"""No silent detach: a baracuda.<op> call on a torch tensor that requires grad (with grad mode
on), or made while torch.compile traces, goes through the registered torch op
(baracuda.torch), which carries the autograd formula and the fake kernel. An op without one
refuses such a tensor instead of dropping its gradient.

The check is a few attribute reads per call; torch is never imported here (only looked up in
sys.modules: no torch loaded means no torch tensors).
"""
import functools
import sys

from .errors import InvalidArgument, Unsupported

_routes = None
_inference = None


class _TorchHooks:
    """torch's functions the fast paths call, bound the first time a torch tensor is seen (so
    importing baracuda never imports torch)."""
    grad = compiling = empty_like = bool = tensor = float32 = float64 = None


T = _TorchHooks()
FAST = set()  # tensor types that take the functional fast paths: torch.Tensor / Parameter once seen


def see_torch():
    import torch
    T.grad, T.compiling, T.empty_like, T.bool, T.tensor = (torch.is_grad_enabled, torch.compiler.is_compiling,
                                                           torch.empty_like, torch.bool, torch.Tensor)
    T.float32, T.float64 = torch.float32, torch.float64
    FAST.update((torch.Tensor, torch.nn.Parameter))


def needs_route(*values):
    """True when autograd must see the call (an operand requires grad and grad mode is on) or
    torch.compile is tracing it with torch tensors among `values`. Needs see_torch() first."""
    if T.compiling():
        for v in values:
            if isinstance(v, T.tensor):
                return True
        return False
    if not T.grad():
        return False
    for v in values:
        if getattr(v, "requires_grad", False):
            return True
    return False


def _route_table():
    global _routes
    if _routes is None:
        from . import torch as bt
        _routes = bt.routes()
    return _routes


def _inference_table():
    global _inference
    if _inference is None:
        from . import torch as bt
        _inference = bt.inference_routes()
    return _inference


def _requires_grad(args, kwargs):
    if not T.grad():
        return False
    return any(getattr(v, "requires_grad", False) for v in (*args, *kwargs.values()))


_BUFFER_KWARGS = ("out", "lse", "stream")  # the functional forms' own buffers and stream: not in the torch ops


def route(name, fn, args, kwargs):
    """Runs `name` through its differentiable torch form; under torch.compile an op without one runs as
    its registered inference op (no graph break; the KV cache, paged attention, penalties) or as fn
    (a graph break, still correct). Refuses what would drop a gradient."""
    torch_form = _route_table().get(name)
    if torch_form is None:
        if not _requires_grad(args, kwargs):  # torch.compile tracing it
            inference = _inference_table().get(name)
            if inference is not None and all(kwargs.get(k) is None for k in _BUFFER_KWARGS):
                return inference(*args, **{k: v for k, v in kwargs.items() if k not in _BUFFER_KWARGS})
            return fn(*args, **kwargs)
        raise Unsupported(f"{name}: an input requires grad, and baracuda.{name} has no autograd formula yet; "
                          "call it under torch.no_grad() or on detached tensors (its gradient would be dropped)")
    if kwargs.get("out") is not None:
        raise InvalidArgument(f"{name}: out= was given but an input requires grad; autograd cannot track a "
                              "write into out (as torch): drop out= or run under torch.no_grad()")
    if kwargs.get("stream") is not None:
        raise Unsupported(f"{name}: stream= under autograd; use `with torch.cuda.stream(s):` instead (the "
                          "registered op runs on torch's current stream)")
    kwargs = {k: v for k, v in kwargs.items() if k not in ("out", "stream")}
    return torch_form(*args, **kwargs)


def differentiable(name, fn):
    """Wraps a public functional op with the autograd / torch.compile routing."""

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if sys.modules.get("torch") is not None:
            if not FAST:
                see_torch()
            if needs_route(*args, *kwargs.values()):
                return route(name, fn, args, kwargs)
        if args and type(args[0]).__module__.startswith("jax"):  # jax.Array, or a tracer under jax.jit
            from .jax import functional_route
            got = functional_route(name, fn, args, kwargs)
            if got is not NotImplemented:
                return got
        return fn(*args, **kwargs)

    return op


def compile_routed(name, fn):
    """A non-differentiable op with a registered inference op (sample): under torch.compile it runs as
    that op (no graph break); elsewhere as itself, whatever requires grad (its outputs carry none)."""

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if sys.modules.get("torch") is not None:
            if not FAST:
                see_torch()
            if T.compiling() and any(isinstance(v, T.tensor) for v in (*args, *kwargs.values())) and \
                    all(kwargs.get(k) is None for k in _BUFFER_KWARGS):
                return _inference_table()[name](*args, **kwargs)
        return fn(*args, **kwargs)

    return op


def guard_all(functions, non_differentiable):
    """The routing wrapper on every op of `functions` except those whose outputs carry no gradient
    (comparisons, predicates, index results), which run as they are, as in torch, and those that
    route in their own fast path (marked `_routes_itself`)."""
    return {n: (f if n in non_differentiable or getattr(f, "_routes_itself", False) else differentiable(n, f))
            for n, f in functions.items()}
