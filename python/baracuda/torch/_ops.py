"""baracuda ops registered with torch.library under the ``baracuda`` namespace.

One table-driven mechanism: each op is a schema, a CUDA implementation (allocate the outputs
with torch, launch the cached plan on torch's current stream), a fake implementation (the same
allocation on fake / meta tensors, so shapes, dtypes and strides agree by construction, plus the
plan's ``select`` where the shapes are concrete, so errors surface at trace time) and, where
the op has a backward plan, an autograd formula whose backward ops go through ``K`` (registered
ops while tracing, so AOTAutograd traces the backward too; the kernels directly when eager).

Registration uses ``torch.library.Library.define`` / ``impl``: the lightest Python path into
the dispatcher. The extension never links libtorch.
"""
import re

import torch
from torch.library import Library, register_autograd, register_fake

from .. import _C, _gemm, _interop, _loss, _reduction
from .._dtypes import dtype as bc_dtype
from ..errors import InvalidArgument

LIB = Library("baracuda", "DEF")
OPS = []  # names of every registered op, for opcheck and docs


def _empty_like_layout(x, dtype=None):
    """torch.empty_like: a dense permuted x keeps its strides; anything else becomes contiguous."""
    return torch.empty_like(x) if dtype is None else torch.empty_like(x, dtype=dtype)  # preserve_format


def _contiguous_like(x):
    """A contiguous tensor shaped like x (empty_like parses less than x.new_empty(x.shape)'s torch.Size)."""
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _contiguous_out(x):
    """_contiguous_like for the CUDA kernels' real tensors: a contiguous x takes the keyword-free
    empty_like, the cheapest call (the fake kernels keep _contiguous_like: no contiguity test on
    symbolic shapes)."""
    return torch.empty_like(x) if x.is_contiguous() else _contiguous_like(x)


def _concrete(*tensors):
    """True when every shape is made of plain ints (eager, or a static trace): select() can run."""
    for t in tensors:
        if t is not None and any(not isinstance(s, int) for s in t.shape):
            return False
    return True


def _spec(t):
    """The TensorSpec of a (fake) tensor: dtype, shape and strides, as the core's import sees it."""
    return _C.TensorSpec(tuple(t.shape), bc_dtype(t.dtype), tuple(t.stride()))


_VALIDATED = {}  # (family, operand metadata) -> the plan select() returned


def validate(family, tensors, make):
    """Runs the family's select() on concrete shapes, so a fake kernel raises what the CUDA kernel
    would (typed, naming the operand); symbolic shapes skip it (the CUDA kernel still checks)."""
    if not _concrete(*tensors):
        return
    key = (family,) + tuple((tuple(t.shape), t.dtype, tuple(t.stride())) if t is not None else None
                            for t in tensors)
    if key not in _VALIDATED:
        if len(_VALIDATED) >= 4096:
            _VALIDATED.clear()
        _VALIDATED[key] = make()


IMPLS = {}   # name -> the CUDA kernel (a plain function on real tensors)
EAGER = {}   # name -> torch.autograd.Function running IMPLS[name] (ops with a backward)
_PLAIN = (torch.Tensor, torch.nn.Parameter)
# EAGER[name].apply without autograd.Function.apply's Python wrapper (it only adds functorch
# checks): the C++ apply it ends in, bound to the class. Only when no functorch transform is
# active (`call` checks).
APPLY = {}
_C_APPLY = torch._C._FunctionBase.__dict__["apply"]
_functorch_active = torch._C._are_functorch_transforms_active


def define(name, schema, impl, fake=None, backward=None, setup_context=None):
    """Registers ``baracuda::name``: CUDA kernel, CPU refusal, fake kernel and autograd formula;
    and the same kernel and formula as an eager autograd.Function (see `call`)."""
    LIB.define(name + schema)
    args = torch._C.parse_schema("baracuda::" + name + schema).arguments
    impl, fake = _with_defaults(impl, args), _with_defaults(fake, args)
    LIB.impl(name, impl, "CUDA")
    LIB.impl(name, _cpu_refusal(name, schema), "CPU")
    register_fake("baracuda::" + name, fake, lib=LIB)
    IMPLS[name] = impl
    if backward is not None:
        _register_autograd(name, impl, backward, setup_context)
        EAGER[name] = _eager_function(name, impl, backward, setup_context)
        APPLY[name] = _C_APPLY.__get__(None, EAGER[name])
    OPS.append(name)
    return getattr(torch.ops.baracuda, name)


try:  # the kernel torch.library.register_autograd installs, to put a direct path in front of it
    from torch._library.autograd import Info as _AutogradInfo, make_autograd_impl as _make_autograd_impl
except ImportError:  # a torch without them: the public registration, without the direct path
    _make_autograd_impl = None
_grad_enabled = torch._C.is_grad_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack


def _register_autograd(name, impl, backward, setup_context):
    """The op's Autograd kernel: register_autograd's, behind a direct path. A call on real CUDA
    tensors that records no gradient, with no torch_dispatch mode active, runs the CUDA kernel
    itself: what the redispatch below autograd would reach, without that second dispatcher trip
    (a compiled graph's calls, and calls under no_grad, take it; docs/benchmarks.md)."""
    if _make_autograd_impl is None:
        register_autograd("baracuda::" + name, backward, setup_context=setup_context, lib=LIB)
        return
    general = _make_autograd_impl(getattr(torch.ops.baracuda, name).default, _AutogradInfo(backward, setup_context))

    def kernel(keyset, *args, **kwargs):
        if not kwargs and not _dispatch_modes():
            records = False
            for a in args:  # every tensor a real CUDA tensor (no fake / subclass); any requiring grad
                if isinstance(a, torch.Tensor):
                    if type(a) not in _PLAIN or not a.is_cuda:
                        break
                    records = records or a.requires_grad
            else:
                if not (records and _grad_enabled()):
                    return impl(*args)
        return general(keyset, *args, **kwargs)

    LIB.impl(name, kernel, "Autograd", with_keyset=True)


def _requires_grad(args):
    for a in args:
        if isinstance(a, torch.Tensor) and a.requires_grad:
            return True
    return False


def _eager_function(name, impl, backward, setup_context):
    def forward(ctx, *args):
        ctx.set_materialize_grads(False)
        out = IMPLS[name](*args)
        setup_context(ctx, args, out)
        return out

    return type(name, (torch.autograd.Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(backward)})


def _plain(args):
    """Every tensor argument a real (eager) tensor: no fake, functional or other subclass."""
    for a in args:
        if isinstance(a, torch.Tensor) and (type(a) not in _PLAIN or a.is_meta):
            return False
    return True


def call(name, *args):
    """Runs op `name` the cheapest correct way. Eager real tensors: the kernel directly, or the
    eager autograd.Function when a gradient must be recorded (no dispatcher round trips: this is
    what keeps a training step's host time near torch's). Anything else (torch.compile tracing,
    fake / functional tensors, other subclasses): torch.ops.baracuda.<name>, whose fake kernel and
    registered autograd formula the tracers use."""
    if torch.compiler.is_compiling() or _dispatch_modes() or not _plain(args):
        return getattr(torch.ops.baracuda, name)(*args)
    if torch.is_grad_enabled():
        fn = EAGER.get(name)
        if fn is not None and _requires_grad(args):
            if _functorch_active():  # Function.apply's Python handles vmap / grad transforms
                return fn.apply(*args)
            return APPLY[name](*args)
    return IMPLS[name](*args)


class _Kernels:
    """K.<name>(*args): `call(name, *args)`; the autograd formulas use it for their backward ops,
    so an eager backward launches directly and a traced one records torch.ops.baracuda ops."""

    def __getattr__(self, name):
        return lambda *args: call(name, *args)


K = _Kernels()


def _with_defaults(fn, arguments):
    """The dispatcher leaves out trailing arguments equal to their schema default (and passes
    keyword-only ones by name): hand the kernel every argument, positionally."""
    n = len(arguments)

    def kernel(*values, **kw):
        if len(values) < n or kw:
            values = list(values) + [kw[a.name] if a.name in kw else a.default_value for a in arguments[len(values):]]
        return fn(*values)

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    return kernel


def _cpu_refusal(name, schema):
    args = re.findall(r"Tensor\??\s+(\w+)", schema.split("->")[0])

    def refuse(*values, **kw):
        where = [a for a, v in zip(args, values) if isinstance(v, torch.Tensor) and not v.is_cuda]
        what = f"{', '.join(where)} {'are CPU tensors' if len(where) > 1 else 'is a CPU tensor'}" if where else \
            "an operand is a CPU tensor"
        raise InvalidArgument(f"baracuda::{name}: {what}; expected CUDA tensors (baracuda never copies to the "
                              "device for you)")
    return refuse


def _alloc(x):
    return _interop.workspace_allocator(x)


# ---- elementwise: generated from the core's op table -------------------------------------------

_EW = {row["name"]: row for row in _C.elementwise_ops()}
_DIFFERENTIABLE = {"unary", "binary", "ternary", "gated"}


def _params_schema(row):
    return "".join(f", float {p}={d!r}" for p, d in row["params"] if p not in ("wrt", "axis"))


def _param_names(row):
    return [p for p, _ in row["params"] if p not in ("wrt", "axis")]


_ew_call = _C.elementwise_call


def _ew_launch(name, out, inputs, params):
    _C.elementwise_call(name, out, tuple(inputs), params, None, _alloc(out))


def _ew_out(name, row, inputs, dim=-1):
    cat = row["category"]
    x = inputs[1] if name == "where" else inputs[0]
    if cat in ("unary", "predicate"):
        return _empty_like_layout(x, torch.bool if cat == "predicate" else None)
    if cat == "gated":
        shape = list(x.shape)
        if not -len(shape) <= dim < len(shape):
            raise InvalidArgument(f"{name}: dim {dim} is out of range for x of rank {len(shape)}")
        if shape[dim] % 2:
            raise InvalidArgument(f"{name}: x.shape[{dim}] = {shape[dim]} must be even (two halves)")
        shape[dim] //= 2
        return x.new_empty(shape)
    shape = torch.broadcast_shapes(*(t.shape for t in inputs))
    dtype = torch.bool if cat == "compare" else x.dtype
    if all(tuple(t.shape) == tuple(shape) for t in inputs) and x.dtype == dtype:
        return _empty_like_layout(x)
    return x.new_empty(shape, dtype=dtype)


def _make_ew(name, row):
    cat = row["category"]
    pnames = _param_names(row)
    arity = row["arity"]
    args = {1: ["x"], 2: ["a", "b"], 3: ["x0", "x1", "x2"]}[arity]
    if name == "where":
        args = ["cond", "a", "b"]
    gated = cat == "gated"
    schema = "(" + ", ".join(f"Tensor {a}" for a in args) + (", int dim=-1" if gated else "") + \
        _params_schema(row) + ") -> Tensor"

    def split(values):
        inputs = list(values[:arity])
        rest = values[arity:]
        dim = int(rest[0]) if gated else -1
        ps = rest[1:] if gated else rest
        return inputs, dim, ps

    def impl(*values):  # every argument, positionally (_with_defaults)
        if cat == "unary" and not pnames:  # the common case, without the general bookkeeping
            x = values[0]
            out = torch.empty_like(x)
            _ew_call(name, out, (x,), {}, None, None)
            return out
        inputs, dim, ps = split(list(values))
        params = {p: float(v) for p, v in zip(pnames, ps)}
        if gated:
            params["axis"] = float(dim)
        out = _ew_out(name, row, inputs, dim)
        _ew_launch(name, out, inputs, params)
        return out

    def fake(*values, **kw):
        inputs, dim, ps = split(list(values) + [kw[p] for p in pnames if p in kw])
        out = _ew_out(name, row, inputs, dim)
        params = {p: float(v) for p, v in zip(pnames, ps)}
        if gated:
            params["axis"] = float(dim)
        validate(("ew", name, tuple(sorted(params.items()))), inputs + [out],
                 lambda: _C.ElementwisePlan.select(_C.ElementwiseDescriptor(
                     name, [_spec(t) for t in inputs], _spec(out), params)))
        return out

    if not (cat in _DIFFERENTIABLE and row["backward"]):
        return define(name, schema, impl, fake)
    bwd_name = row["backward"]

    def setup(ctx, inputs, output):
        ctx.save_for_backward(*[t if isinstance(t, torch.Tensor) else None for t in inputs[:arity]])
        ctx.extra = inputs[arity:]

    def backward(ctx, grad):
        saved = ctx.saved_tensors
        bwd = getattr(K, bwd_name)
        extra = list(ctx.extra)
        if cat in ("unary", "gated"):  # one input: its gradient from (grad, x)
            return (bwd(grad, saved[0], *extra),) + (None,) * len(extra)
        first = 1 if name == "where" else 0  # where's condition has no gradient
        grads = [None] * arity
        for i in range(first, arity):
            if ctx.needs_input_grad[i]:
                grads[i] = bwd(grad, *saved, i, *extra)
        return tuple(grads) + (None,) * len(extra)

    return define(name, schema, impl, fake, backward, setup)


def _make_ew_backward(name, row):
    cat = row["category"]
    pnames = _param_names(row)
    n = row["arity"]  # grad_out + the forward's inputs
    gated = cat == "gated_backward"
    wrt = cat in ("binary_backward", "ternary_backward")
    args = ["grad"] + [f"x{i}" for i in range(n - 1)]
    schema = "(" + ", ".join(f"Tensor {a}" for a in args) + (", int dim=-1" if gated else "") + \
        (", int wrt=0" if wrt else "") + _params_schema(row) + ") -> Tensor"

    def split(values):
        inputs = list(values[:n])
        rest = list(values[n:])
        dim = int(rest.pop(0)) if gated else -1
        w = int(rest.pop(0)) if wrt else 0
        return inputs, dim, w, rest

    def out_for(inputs, w):
        grad = inputs[0]
        if wrt:
            target = inputs[1 + w]
            return grad.new_empty(target.shape)
        x = inputs[1]
        return _empty_like_layout(x, grad.dtype)

    def impl(*values, **kw):
        inputs, dim, w, ps = split(list(values) + [kw[p] for p in pnames if p in kw])
        params = {p: float(v) for p, v in zip(pnames, ps)}
        if gated:
            params["axis"] = float(dim)
        if wrt:
            params["wrt"] = float(w)
        out = out_for(inputs, w)
        _ew_launch(name, out, inputs, params)
        return out

    def fake(*values, **kw):
        inputs, _, w, _ = split(list(values) + [kw[p] for p in pnames if p in kw])
        return out_for(inputs, w)

    return define(name, schema, impl, fake)


for _name, _row in _EW.items():
    if _row["category"] in ("unary", "predicate", "binary", "compare", "ternary", "gated"):
        _make_ew(_name, _row)
    elif _row["category"].endswith("_backward"):
        _make_ew_backward(_name, _row)


def _stats_dtype(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


# ---- softmax / log-softmax ------------------------------------------------------------------------

def _softmax_fake(x, dim):
    if not -max(x.dim(), 1) <= dim < max(x.dim(), 1):
        raise InvalidArgument(f"softmax: dim {dim} is out of range for x of rank {x.dim()}")
    return _contiguous_like(x)


def _softmax_family(name):
    def impl(x, dim):
        y = _softmax_fake(x, dim)
        _C.softmax_call(name, y, (x,), int(dim), None)
        return y

    def bwd_impl(grad, y, dim):
        gx = _softmax_fake(y, dim)
        _C.softmax_call(name + "_backward", gx, (grad, y), int(dim), None)
        return gx

    def setup(ctx, inputs, output):
        ctx.dim = inputs[1]
        ctx.save_for_backward(output)

    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return getattr(K, name + "_backward")(grad.contiguous(), y, ctx.dim), None

    define(name, "(Tensor x, int dim=-1) -> Tensor", impl, _softmax_fake, backward, setup)
    define(name + "_backward", "(Tensor grad, Tensor y, int dim=-1) -> Tensor", bwd_impl,
           lambda grad, y, dim: _softmax_fake(y, dim))


_softmax_family("softmax")
_softmax_family("log_softmax")


# ---- GEMM: matmul and linear ------------------------------------------------------------------------

_ACTIVATIONS = _gemm._EPILOGUES
_gemm_call = _C.gemm_call
# torch's own switch for f32 matmuls (torch.backends.cuda.matmul.allow_tf32, set by
# torch.set_float32_matmul_precision("high")), read when the op runs as torch's matmul reads it; the
# accessor is a C call (the property costs ~0.5 us)
_cublas_allow_tf32 = (getattr(torch._C, "_get_cublas_allow_tf32", None)
                      or (lambda: torch.backends.cuda.matmul.allow_tf32))


def _tf32(t):
    """Whether a GEMM on t runs in tf32: f32 inputs while torch allows tf32 for its own matmuls."""
    return t.dtype == torch.float32 and _cublas_allow_tf32()


def _matmul_fake(a, b):
    if a.dim() < 2 or b.dim() < 2:
        raise InvalidArgument(f"matmul: a and b need at least 2 dims, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise InvalidArgument(f"matmul: a is {tuple(a.shape)} and b is {tuple(b.shape)}: a.shape[-1] != b.shape[-2]")
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return a.new_empty((*batch, a.shape[-2], b.shape[-1]))


def _matmul_impl(a, b):
    out = _matmul_fake(a, b)
    _gemm._call(out, a, b, allow_tf32=_tf32(a))
    return out


def _matmul_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _matmul_backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad = grad.contiguous()
    batch = grad.shape[:-2]
    ga = gb = None
    # broadcast batch dims are materialised (cuBLASLt takes one batch stride per operand), then the
    # gradient is summed back to the operand's shape
    if ctx.needs_input_grad[0]:
        bb = b if b.dim() == 2 or b.shape[:-2] == batch else b.expand(*batch, *b.shape[-2:]).contiguous()
        ga = K.matmul(grad, bb.mT).sum_to_size(a.shape)
    if ctx.needs_input_grad[1]:
        aa = a if a.dim() == 2 or a.shape[:-2] == batch else a.expand(*batch, *a.shape[-2:]).contiguous()
        gb = K.matmul(aa.mT, grad).sum_to_size(b.shape)
    return ga, gb


define("matmul", "(Tensor a, Tensor b) -> Tensor", _matmul_impl, _matmul_fake, _matmul_backward, _matmul_setup)


def _linear_shapes(x, weight, bias, activation):
    _gemm.check_activation("linear", activation)
    _gemm._check_linear("linear", x, weight, bias)
    return (*x.shape[:-1], weight.shape[0])


_NEEDS_AUX = ("gelu", "gelu_tanh", "silu")  # relu's derivative reads the output instead


def _linear_fake(x, weight, bias, activation):
    shape = _linear_shapes(x, weight, bias, activation)
    return x.new_empty(shape), x.new_empty(shape if activation in _NEEDS_AUX else (0,))


def _linear_impl(x, weight, bias, activation):
    if (activation == "none" and x.dim() == 2 and weight.dim() == 2 and x.shape[1] == weight.shape[1]
            and (bias is None or bias.shape == weight.shape[:1])):  # the common call, checked inline
        n = weight.shape[0]
        y = x.new_empty_strided((x.shape[0], n), (n, 1))
        _gemm_call(y, x, weight.t(), 1.0, 0.0, "none", bias, None, None, None, None, None, _tf32(x), None, _alloc(x))
        return y, x.new_empty_strided((0,), (1,))
    y, aux = _linear_fake(x, weight, bias, activation)
    x2 = x.reshape(-1, x.shape[-1])
    y2 = y.view(-1, y.shape[-1])
    # under tf32 the plan composes the activation itself (cuBLAS, then our bias / activation passes)
    _gemm._call(y2, x2, weight.t(), epilogue=activation, bias=bias,
                aux=aux.view(-1, y.shape[-1]) if activation in _NEEDS_AUX else None, allow_tf32=_tf32(x))
    return y, aux


def _linear_setup(ctx, inputs, output):
    x, weight, bias, activation = inputs
    ctx.activation = activation
    ctx.has_bias = bias is not None
    saved = output[1] if activation in _NEEDS_AUX else (output[0] if activation == "relu" else None)
    ctx.save_for_backward(x, weight, saved)


def _linear_backward(ctx, grad, grad_aux):
    x, weight, aux = ctx.saved_tensors
    grad = grad.contiguous()
    if ctx.activation != "none":  # relu_backward(grad, y): y > 0 exactly where the pre-activation is
        grad = getattr(K, ctx.activation + "_backward")(grad, aux)
    gx, gw, gb = K.linear_backward(grad, x, weight, ctx.has_bias)
    return gx, gw, (gb if ctx.has_bias else None), None


def _linear_bwd_fake(grad, x, weight, bias):
    return _contiguous_like(x), _contiguous_like(weight), weight.new_empty((weight.shape[0],) if bias else (0,))


def _linear_bwd_impl(grad, x, weight, bias):
    gx = _contiguous_out(x)
    gw = _contiguous_out(weight)
    gb = weight.new_empty((weight.shape[0],) if bias else (0,))
    g2 = grad.reshape(-1, grad.shape[-1])
    x2 = x.reshape(-1, x.shape[-1])
    ws = _alloc(x)
    tf32 = _tf32(x)
    _gemm_call(gx.view(-1, x.shape[-1]), g2, weight, 1.0, 0.0, "none", None, None, None, None, None, None, tf32,
               None, ws)
    # under tf32 the bias gradient is a sum of its own (a plain GEMM runs on cuBLAS; the fused bias_grad
    # epilogue would keep it on cuBLASLt's Ampere tf32 kernels)
    fuse = bias and not tf32
    _gemm_call(gw, g2.t(), x2, 1.0, 0.0, "bias_grad" if fuse else "none", None, None, gb if fuse else None, None,
               None, None, tf32, None, ws)
    if bias and tf32:
        _reduction._call("sum", gb, [g2], [0], False, {}, None, g2)
    return gx, gw, gb


define("linear", "(Tensor x, Tensor weight, Tensor? bias=None, str activation='none') -> (Tensor, Tensor)",
       _linear_impl, _linear_fake, _linear_backward, _linear_setup)
define("linear_backward", "(Tensor grad, Tensor x, Tensor weight, bool bias) -> (Tensor, Tensor, Tensor)",
       _linear_bwd_impl, _linear_bwd_fake)


# ---- cross-entropy ----------------------------------------------------------------------------------

def _ce_fake(logits, target, weight, ignore_index, label_smoothing, reduction):
    _loss.check_cross_entropy(logits, target, reduction)
    loss = logits.new_empty((logits.shape[0],) if reduction == "none" else ())
    return loss, logits.new_empty((logits.shape[0],), dtype=_stats_dtype(logits))


def _ce_impl(logits, target, weight, ignore_index, label_smoothing, reduction):
    loss, lse = _ce_fake(logits, target, weight, ignore_index, label_smoothing, reduction)
    _C.cross_entropy_call(logits, target, loss, lse, reduction, int(ignore_index), float(label_smoothing), weight,
                          None, None, _alloc(logits))
    return loss, lse


def _ce_setup(ctx, inputs, output):
    logits, target, weight, ignore_index, label_smoothing, reduction = inputs
    ctx.args = (ignore_index, label_smoothing, reduction)
    ctx.save_for_backward(logits, target, weight, output[1])


def _ce_backward(ctx, grad_loss, grad_lse):
    logits, target, weight, lse = ctx.saved_tensors
    g = K.cross_entropy_backward(grad_loss.to(logits.dtype).contiguous(), logits, target, lse, weight,
                                                  *ctx.args)
    return g, None, None, None, None, None


def _ce_bwd_fake(grad_loss, logits, target, lse, weight, ignore_index, label_smoothing, reduction):
    return _contiguous_like(logits)


def _ce_bwd_impl(grad_loss, logits, target, lse, weight, ignore_index, label_smoothing, reduction):
    out = _contiguous_like(logits)
    plan = _loss._plan("cross_entropy_backward", logits, target, weight, reduction, ignore_index, label_smoothing,
                       False, grad_loss, out)
    ws = _alloc(logits)(plan.workspace_bytes())
    plan.run(logits, target, lse, ws, weight=weight, grad_input=out, grad_loss=grad_loss)
    return out


define("cross_entropy", "(Tensor logits, Tensor target, Tensor? weight=None, int ignore_index=-100, "
       "float label_smoothing=0.0, str reduction='mean') -> (Tensor, Tensor)",
       _ce_impl, _ce_fake, _ce_backward, _ce_setup)
define("cross_entropy_backward", "(Tensor grad_loss, Tensor logits, Tensor target, Tensor lse, Tensor? weight=None, "
       "int ignore_index=-100, float label_smoothing=0.0, str reduction='mean') -> Tensor",
       _ce_bwd_impl, _ce_bwd_fake)


# ---- reductions: sum / mean over dims ----------------------------------------------------------

def _reduce_fake(name):
    def fake(x, dim, keepdim):
        axes, norm = _reduction._axes(name, list(dim) if dim else None, x.dim())
        shape = _reduction._reduced_shape(x.shape, norm, keepdim)
        if name == "sum" and not (x.is_floating_point() or x.is_complex()):
            return x.new_empty(shape, dtype=torch.int64)
        return x.new_empty(shape)
    return fake


def _make_reduce(name):
    fake = _reduce_fake(name)

    def impl(x, dim, keepdim):
        out = fake(x, dim, keepdim)
        axes = list(dim) if dim else []
        _reduction._call(name, out, [x], axes, keepdim, {}, None, x)
        return out

    def setup(ctx, inputs, output):
        x, dim, keepdim = inputs
        ctx.shape = x.shape
        ctx.dims = dim
        ctx.keepdim = keepdim
        ctx.dtype = x.dtype

    def backward(ctx, grad):
        g = grad
        if not ctx.keepdim and ctx.dims:
            for d in sorted(int(d) % len(ctx.shape) for d in ctx.dims):
                g = g.unsqueeze(d)
        elif not ctx.keepdim:
            g = g.reshape((1,) * len(ctx.shape))
        if name == "mean":
            n = 1
            for i, s in enumerate(ctx.shape):
                if not ctx.dims or i in {int(d) % len(ctx.shape) for d in ctx.dims}:
                    n *= s
            g = g / n
        return g.expand(ctx.shape).to(ctx.dtype), None, None

    define(name, "(Tensor x, int[]? dim=None, bool keepdim=False) -> Tensor", impl, fake, backward, setup)


_make_reduce("sum")
_make_reduce("mean")


def scalar(value, like, dtype=None):
    """A 0-d tensor on like's device (the torch form of a Python scalar operand)."""
    return torch.full((), value, dtype=dtype or like.dtype, device=like.device)

