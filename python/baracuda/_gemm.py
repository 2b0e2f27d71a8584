"""Functional GEMM: matmul, linear (+ fused epilogues), their backward, fp8 and int8 products.

Every function selects a GemmPlan (cached in the core on the operands' metadata), allocates
outputs in the inputs' framework unless given, and runs on the framework's current stream
unless ``stream=`` is given. Transposed views (torch ``w.t()``, ``x.mT``) are read in place.
"""
from typing import Any, Optional

from . import _C, _interop
from ._dtypes import DType, dtype as as_dtype
from ._types import DLPackTensor, Stream
from .errors import InvalidArgument

_EPILOGUES = ("none", "relu", "gelu", "gelu_tanh", "silu")


def _t(x):
    """The transpose of the last two dims, as a view where the framework has views."""
    return x.swapaxes(-1, -2)


def _call(out, a, b, *, alpha=1.0, beta=0.0, epilogue="none", bias=None, aux=None, bias_grad=None,
          a_scale=None, b_scale=None, amax=None, allow_tf32=False, stream=None):
    _C.gemm_call(out, a, b, float(alpha), float(beta), epilogue, bias, aux, bias_grad, a_scale, b_scale, amax,
                 bool(allow_tf32), stream, _interop.workspace_allocator(a))


def _out_shape(name, a, b):
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise InvalidArgument(f"{name}: a and b need at least 2 dims ([..., M, K] and [..., K, N]); got "
                              f"{tuple(a.shape)} and {tuple(b.shape)}")
    from ._functional import broadcast_shape

    batch = broadcast_shape(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    return batch + (a.shape[-2], b.shape[-1])


def matmul(a, b, *, out=None, alpha=1.0, beta=0.0, bias=None, activation="none", return_aux=False,
           out_dtype=None, allow_tf32=False, stream=None):
    """out = activation(alpha * a @ b + beta * out + bias).

    a [..., M, K] and b [..., K, N], each row- or column-major (transposed views are read in
    place); batch dims broadcast. bias [N]. activation: none, relu, gelu (erf), gelu_tanh, silu.
    return_aux=True also returns the pre-activation (for the backward). out_dtype defaults to
    a's dtype (float32 is allowed for float16 / bfloat16 inputs). float32 uses IEEE math
    unless allow_tf32. Returns out, or (out, aux).
    """
    check_activation("matmul", activation)
    shape = _out_shape("matmul", a, b)
    if out is None:
        if beta != 0:
            raise InvalidArgument("matmul: beta != 0 accumulates into out; pass out=")
        d = as_dtype(out_dtype) if out_dtype is not None else _interop.dtype_of(a)
        out, finish = _interop.output(a, shape, d)
    else:
        finish = _interop._identity
    aux = None
    aux_finish = None
    if return_aux:
        aux, aux_finish = _interop.output(a, shape, _interop.dtype_of(out))
    _call(out, a, b, alpha=alpha, beta=beta, epilogue=activation, bias=bias, aux=aux, allow_tf32=allow_tf32,
          stream=stream)
    return (finish(out), aux_finish(aux)) if return_aux else finish(out)


def _flatten_rows(x):
    """[..., K] -> [rows, K] (a view where the framework reshapes without copying)."""
    return x if len(x.shape) == 2 else x.reshape(-1, x.shape[-1])


def check_activation(name, activation):
    if activation not in _EPILOGUES:
        raise InvalidArgument(f"{name}: activation must be one of {_EPILOGUES}, got {activation!r}")


def _check_linear(name, x, weight, bias=None):
    """Shape errors in the caller's names (x, weight, bias), before the GEMM would name a and b."""
    for arg, t in (("x", x), ("weight", weight)):
        if not hasattr(t, "shape"):
            raise InvalidArgument(f"{name}: {arg} ({type(t).__name__}) is not an array-like tensor")
    if len(weight.shape) != 2:
        raise InvalidArgument(f"{name}: weight must be [N, K], got shape {tuple(weight.shape)}")
    if len(x.shape) < 1 or x.shape[-1] != weight.shape[1]:
        raise InvalidArgument(f"{name}: x has shape {tuple(x.shape)} and weight {tuple(weight.shape)}; "
                              "x.shape[-1] must equal weight.shape[1] (K)")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise InvalidArgument(f"{name}: bias has shape {tuple(bias.shape)}; expected ({weight.shape[0]},)")


def linear(x: DLPackTensor, weight: DLPackTensor, bias: Optional[DLPackTensor] = None, *, activation: str = "none",
           return_aux: bool = False, out_dtype: Any = None, allow_tf32: bool = False, stream: Stream = None) -> Any:
    """activation(x @ weight.T + bias), as torch.nn.functional.linear (+ a fused activation).

    x [..., K], weight [N, K] (read in place through its transpose), bias [N]. Returns y
    [..., N], or (y, pre_activation) with return_aux=True.
    """
    _check_linear("linear", x, weight, bias)
    lead = tuple(x.shape[:-1])
    r = matmul(_flatten_rows(x), _t(weight), bias=bias, activation=activation, return_aux=return_aux,
               out_dtype=out_dtype, allow_tf32=allow_tf32, stream=stream)
    n = weight.shape[0]
    if len(x.shape) == 2:
        return r
    if return_aux:
        return r[0].reshape(*lead, n), r[1].reshape(*lead, n)
    return r.reshape(*lead, n)


def linear_backward(grad_out, x, weight, *, bias=False, allow_tf32=False, stream=None):
    """Gradients of y = x @ weight.T (+ bias): (grad_x, grad_weight, grad_bias or None).
    bias=True asks for grad_bias (the forward had a bias); the default matches linear's, no bias.

    grad_x = grad_out @ weight; grad_weight = grad_out^T @ x, with grad_bias = grad_out summed
    over rows fused into that product (cuBLASLt's bias-gradient epilogue).
    """
    _check_linear("linear_backward", x, weight)
    want = (*tuple(x.shape[:-1]), weight.shape[0])
    if tuple(grad_out.shape) != want:
        raise InvalidArgument(f"linear_backward: grad_out has shape {tuple(grad_out.shape)}; expected {want} "
                              f"(x's leading dims and weight.shape[0])")
    g2, x2 = _flatten_rows(grad_out), _flatten_rows(x)
    grad_x = matmul(g2, weight, allow_tf32=allow_tf32, stream=stream).reshape(*x.shape)
    n, k = weight.shape
    gw, finish = _interop.output(weight, (n, k), _interop.dtype_of(weight))
    gb = None
    if bias:
        gb, gb_finish = _interop.output(weight, (n,), _interop.dtype_of(weight))
        _call(gw, _t(g2), x2, epilogue="bias_grad", bias_grad=gb, allow_tf32=allow_tf32, stream=stream)
        gb = gb_finish(gb)
    else:
        _call(gw, _t(g2), x2, allow_tf32=allow_tf32, stream=stream)
    return grad_x, finish(gw), gb


def matmul_dgelu_tanh(grad, b, pre_activation, *, return_bias_grad=False, stream=None):
    """(grad @ b) * gelu_tanh'(pre_activation), fused: the MLP backward through a gelu_tanh.

    With return_bias_grad=True also returns its sum over rows (the bias gradient).
    """
    shape = _out_shape("matmul_dgelu_tanh", grad, b)
    out, finish = _interop.output(grad, shape, _interop.dtype_of(grad))
    gb = None
    if return_bias_grad:
        gb, gb_finish = _interop.output(grad, (shape[-1],), _interop.dtype_of(grad))
    _call(out, grad, b, epilogue="dgelu_tanh", aux=pre_activation, bias_grad=gb, stream=stream)
    return (finish(out), gb_finish(gb)) if return_bias_grad else finish(out)


def scaled_mm(a, b, scale_a, scale_b, *, out_dtype=DType.bfloat16, bias=None, return_amax=False, out=None,
              stream=None):
    """fp8 GEMM: (scale_a * a) @ (scale_b * b) (+ bias), f32 accumulate.

    a [M, K] row-major fp8, b [K, N] column-major fp8 (e.g. w.t() for a row-major w [N, K]);
    e4m3 x e4m3, e4m3 x e5m2 or e5m2 x e4m3. scale_a, scale_b: f32 device scalars. out_dtype:
    float32, float16 or bfloat16. return_amax=True also returns max |out| (an f32 scalar).
    """
    shape = _out_shape("scaled_mm", a, b)
    if out is None:
        out, finish = _interop.output(a, shape, as_dtype(out_dtype))
    else:
        finish = _interop._identity
    amax = None
    if return_amax:
        amax, amax_finish = _interop.output(a, (), DType.float32)
    _call(out, a, b, bias=bias, a_scale=scale_a, b_scale=scale_b, amax=amax, stream=stream)
    return (finish(out), amax_finish(amax)) if return_amax else finish(out)


def int8_mm(a, b, *, row_scale=None, col_scale=None, out_dtype=None, out=None, stream=None):
    """int8 GEMM: exact int32 a @ b, or dequantized to a float out_dtype:
    out = (a @ b) * row_scale[m] * col_scale[n] (f32 scales, either may be None = 1).

    a [M, K] row-major int8, b [K, N] column-major int8 (e.g. w.t() for w [N, K]).
    out_dtype: int32 (default without scales), or float16 / bfloat16 / float32.
    """
    shape = _out_shape("int8_mm", a, b)
    if out_dtype is None:
        out_dtype = DType.int32 if row_scale is None and col_scale is None else DType.bfloat16
    if out is None:
        out, finish = _interop.output(a, shape, as_dtype(out_dtype))
    else:
        finish = _interop._identity
    _call(out, a, b, a_scale=row_scale, b_scale=col_scale, stream=stream)
    return finish(out)


def grouped_linear(x, weight, *, offsets=None, group_sizes=None, bias=None, max_rows_per_group=None, out=None,
                   stream=None):
    """Mixture-of-experts linear: rows of x sorted by expert, out_e = x_e @ weight[e].T (+ bias[e]).

    x [T, K], weight [E, N, K], bias [E, N]. Either `offsets` (a device int32 / int64 tensor
    [E + 1]: expert e owns rows offsets[e]..offsets[e+1]; one launch of our grouped kernel, no
    host sync) or `group_sizes` (host ints, rows per expert: CUTLASS's grouped kernel in one launch
    for many or small experts on an sm_90 device, else one cuBLASLt GEMM per non-empty expert;
    ``plan.sku`` says which). Rows past the last expert's are left as they are in `out` (uninitialised if
    allocated here). max_rows_per_group: an upper bound on one expert's rows, if known (e.g.
    tokens for top-k routing): a speed hint for the offsets path.
    """
    if (offsets is None) == (group_sizes is None):
        raise InvalidArgument("grouped_linear: pass exactly one of offsets (device) and group_sizes (host)")
    t, n = x.shape[0], weight.shape[1]
    if out is None:
        out, finish = _interop.output(x, (t, n), _interop.dtype_of(x))
    else:
        finish = _interop._identity
    spec = _C.TensorSpec
    desc = _C.GroupedGemmDescriptor(
        spec(tuple(x.shape), _interop.dtype_of(x), _strides(x)), spec(tuple(weight.shape), _interop.dtype_of(weight),
                                                                     _strides(weight)),
        spec((t, n), _interop.dtype_of(out), _strides(out)),
        group_sizes=[int(g) for g in group_sizes] if group_sizes is not None else [],
        offsets_dtype=_interop.dtype_of(offsets) if offsets is not None else DType.int32, bias=bias is not None,
        max_rows_per_group=-1 if max_rows_per_group is None else int(max_rows_per_group))
    plan = _grouped_plan(desc)
    ws = None
    if plan.workspace_bytes() > 0:
        ws = _interop.workspace_allocator(x)(plan.workspace_bytes())
    plan.run(out, x, weight, offsets=offsets, bias=bias, workspace=ws, stream=stream)
    return finish(out)


_GROUPED_CACHE = _interop.PlanCache(256)


def _grouped_plan(desc):
    return _GROUPED_CACHE.get(desc, lambda: _C.GroupedGemmPlan.select(desc))


def _strides(x):
    """Element strides of a framework tensor (torch: .stride(); numpy-like: .strides in bytes)."""
    st = getattr(x, "stride", None)
    if callable(st):
        return tuple(st())
    if getattr(x, "strides", None) is not None and hasattr(x, "itemsize"):
        return tuple(s // x.itemsize for s in x.strides)
    return ()  # JAX arrays: contiguous


def gemm_backend_info() -> dict:
    """Whether cuBLASLt (and cuBLAS, which runs tf32 GEMMs) loaded, from where, and cuBLASLt's version
    (loads them on first call)."""
    return dict(_C.gemm_backend_info())


FUNCTIONS = dict(matmul=matmul, linear=linear, linear_backward=linear_backward, matmul_dgelu_tanh=matmul_dgelu_tanh,
                 scaled_mm=scaled_mm, int8_mm=int8_mm, grouped_linear=grouped_linear,
                 gemm_backend_info=gemm_backend_info)
