"""Functional RoPE: ``rope`` rotates q (and k, in the same launch) by their positions' angles;
``rope_backward`` is the inverse rotation (the gradient of rope is the gradient rotated back).
``rope_frequencies`` gives the scaled inverse frequencies the theta path uses. See
``baracuda/rope.h`` for the exact rules.
"""
import math
from typing import Any, Mapping, Optional, Tuple

from . import _C, _interop
from ._types import DLPackTensor, Stream
from .errors import InvalidArgument, Unsupported

# transformers' rope_scaling keys -> RopeFrequencies fields ("rope_type" / "type" name the rule).
_SCALING_KEYS = {"factor": "factor", "low_freq_factor": "low_freq_factor", "high_freq_factor": "high_freq_factor",
                 "original_max_position_embeddings": "original_max_positions", "beta_fast": "beta_fast",
                 "beta_slow": "beta_slow", "attention_factor": "attention_factor"}
_RULES = {"default": "none", "none": "none", "linear": "linear", "llama3": "llama3", "yarn": "yarn"}


def scaling_fields(theta: float = 10000.0, scaling: Optional[Mapping[str, Any]] = None, fn: str = "rope"):
    """(theta, rule, fields) from theta and a transformers-style ``rope_scaling`` dict (``rope_type``
    'default', 'linear', 'llama3' or 'yarn' and its parameters), or None; plain Python (torch.compile
    traces it)."""
    if scaling is None:
        return float(theta), "none", {}
    if not isinstance(scaling, Mapping):
        raise InvalidArgument(f"{fn}: scaling must be a dict like transformers' rope_scaling, got {scaling!r}")
    rule = scaling.get("rope_type", scaling.get("type", "default"))
    if rule not in _RULES:
        raise Unsupported(f"{fn}: scaling rope_type {rule!r} is not supported; expected one of {sorted(_RULES)}")
    kw = {}
    for key, value in scaling.items():
        if key in ("rope_type", "type") or value is None:
            continue
        if key == "rope_theta":
            theta = value
            continue
        if key == "truncate" and value is True:
            continue
        if key not in _SCALING_KEYS:
            raise Unsupported(f"{fn}: scaling key {key!r} (= {value!r}) is not supported for rope_type {rule!r}; "
                              f"supported: {sorted(_SCALING_KEYS)}")
        kw[_SCALING_KEYS[key]] = value
    return float(theta), _RULES[rule], kw


def frequencies(theta: float = 10000.0, scaling: Optional[Mapping[str, Any]] = None, fn: str = "rope"):
    """The RopeFrequencies of theta and a transformers-style ``rope_scaling`` dict (see scaling_fields)."""
    theta, rule, kw = scaling_fields(theta, scaling, fn)
    return _C.RopeFrequencies(theta=theta, scaling=rule, **kw)


def descriptor(spec, q, k, cos, positions, style: str, rotary_dim: int, freqs, inverse: bool = False, k_cache=None,
               v=None, v_cache=None, slot_mapping=None, k_scale=None):
    """The RopeDescriptor of these operands, for the plans the torch fake kernels and the JAX custom
    calls select (``spec``: the framework's tensor -> TensorSpec; the functional path builds its own in
    C++ from the imported views)."""
    cache = {}
    if k_cache is not None:
        per_head = k_scale is not None and math.prod(spec(k_scale).shape) > 1
        cache = dict(k_cache=spec(k_cache), v=None if v is None else spec(v),
                     v_cache=None if v_cache is None else spec(v_cache), slot_dtype=spec(slot_mapping).dtype,
                     kv_scales=k_scale is not None, scale_per_head=per_head)
    cs = None if cos is None else spec(cos)
    return _C.RopeDescriptor(
        spec(q), None if k is None else spec(k), style=style, rotary_dim=int(rotary_dim), inverse=bool(inverse),
        cache=cs is not None, cache_dtype=_C.DType.float32 if cs is None else cs.dtype,
        cache_positions=int(cs.shape[0]) if cs is not None and len(cs.shape) else 0, freqs=freqs,
        positions=positions is not None,
        positions_dtype=_C.DType.int64 if positions is None else spec(positions).dtype, **cache)


def rope_frequencies(rotary_dim: int, *, theta: float = 10000.0,
                     scaling: Optional[Mapping[str, Any]] = None) -> Tuple[list, float]:
    """(inv_freq, attention_factor): the rotary_dim / 2 inverse frequencies (after the scaling rule)
    and the factor on cos / sin that ``rope`` uses when no cos / sin cache is given."""
    inv, af = _C.rope_inv_freq(int(rotary_dim), frequencies(theta, scaling, "rope_frequencies"))
    return list(inv), float(af)


def _run(fn, q, k, cos, sin, positions, style, rotary_dim, theta, scaling, inplace, q_out, k_out, inverse, stream,
         cache=None):
    _interop.require_array(fn, "q", q)
    if k is not None:
        _interop.require_array(fn, "k", k)
    if (cos is None) != (sin is None):
        raise InvalidArgument(f"{fn}: cos and sin go together (a cache [positions, rotary_dim / 2] each)")
    if cos is not None and (theta != 10000.0 or scaling is not None):
        raise InvalidArgument(f"{fn}: theta / scaling compute the angles; they cannot be combined with a cos / sin cache")
    if k is None and k_out is not None:
        raise InvalidArgument(f"{fn}: k_out was given without k")
    if inplace:
        if q_out is not None or k_out is not None:
            raise InvalidArgument(f"{fn}: inplace=True writes q (and k); do not pass q_out / k_out too")
        if _interop.framework(q) == "jax":
            raise Unsupported(f"{fn}: inplace=True on a JAX array (JAX arrays are immutable); drop inplace")
        q_out, k_out = q, k
    d = _interop.dtype_of(q)
    qo, fq = (q_out, _interop._identity) if q_out is not None else _interop.output(q, tuple(q.shape), d)
    ko = fk = None
    if k is not None:
        ko, fk = (k_out, _interop._identity) if k_out is not None else _interop.output(k, tuple(k.shape), d)
    tensors = {"q": q, "k": k, "q_out": qo, "k_out": ko, "cos": cos, "sin": sin, "positions": positions}
    if cache is not None:
        tensors.update(cache)
    freqs = frequencies(theta, scaling, fn)
    _C.rope_call(tensors, style, int(rotary_dim or 0), inverse, freqs, stream)
    return fq(qo) if k is None else (fq(qo), fk(ko))


def rope(q: DLPackTensor, k: Optional[DLPackTensor] = None, *, cos: Optional[DLPackTensor] = None,
         sin: Optional[DLPackTensor] = None, positions: Optional[DLPackTensor] = None, style: str = "neox",
         rotary_dim: Optional[int] = None, theta: float = 10000.0, scaling: Optional[Mapping[str, Any]] = None,
         inplace: bool = False, q_out: Optional[DLPackTensor] = None, k_out: Optional[DLPackTensor] = None,
         k_cache: Optional[DLPackTensor] = None, v: Optional[DLPackTensor] = None,
         v_cache: Optional[DLPackTensor] = None, slot_mapping: Optional[DLPackTensor] = None,
         k_scale: Optional[DLPackTensor] = None, v_scale: Optional[DLPackTensor] = None,
         stream: Stream = None) -> Any:
    """Rotary position embedding of q [tokens, Hq, D] or [B, S, Hq, D] and, in the same launch, k
    (the same leading dims and D, its own head count); any strides with the last dim contiguous.

    The decode step's cache append, fused: with ``k_cache`` [pages, page_size, Hkv, D] and
    ``slot_mapping`` (int32 / int64, q's leading dims) the rotated k is also written to its slot
    (slot // page_size, slot % page_size; slots outside the cache are padding), and ``v`` (k's
    leading dims and heads, its own dim) is copied to ``v_cache``: one launch instead of rope then
    kv_cache_append, as from a fused qkv projection's views. fp8 caches (e4m3 / e5m2) quantize as
    kv_cache_append does: fp8(x / scale), saturated, with ``k_scale`` / ``v_scale`` f32 [1] or [Hkv]
    (default 1).

    ``style``: "neox" (rotate-half: Llama, NeoX) or "gptj" (interleaved pairs). ``rotary_dim``: the
    rotated prefix of each head (default all of D; the rest passes through). Angles: position *
    inv_freq from ``theta`` and ``scaling`` (a transformers-style rope_scaling dict: 'linear',
    'llama3', 'yarn'), or a ``cos`` / ``sin`` cache [positions, rotary_dim / 2] (f32 or q's dtype;
    rows clamped to the cache). ``positions``: int32 / int64 of q's leading dims (default the index
    along the sequence dim). ``inplace``: rotate q and k in place (or pass q_out / k_out). Returns
    the rotated q, or (q, k) when k is given. f16 / bf16 / f32, f32 math."""
    cache = None
    if k_cache is not None or v is not None or v_cache is not None or slot_mapping is not None:
        if k is None or k_cache is None or slot_mapping is None:
            raise InvalidArgument("rope: the cache append needs k, k_cache and slot_mapping")
        if (v is None) != (v_cache is None):
            raise InvalidArgument("rope: v and v_cache go together (both or neither)")
        cache = {"k_cache": k_cache, "v": v, "v_cache": v_cache, "slot_mapping": slot_mapping}
    if k_scale is not None or v_scale is not None:  # the core refuses them without a cache append
        cache = {**(cache or {}), "k_scale": k_scale, "v_scale": v_scale}
    return _run("rope", q, k, cos, sin, positions, style, rotary_dim, theta, scaling, inplace, q_out, k_out, False,
                stream, cache)


def rope_backward(grad_q: DLPackTensor, grad_k: Optional[DLPackTensor] = None, *,
                  cos: Optional[DLPackTensor] = None, sin: Optional[DLPackTensor] = None,
                  positions: Optional[DLPackTensor] = None, style: str = "neox", rotary_dim: Optional[int] = None,
                  theta: float = 10000.0, scaling: Optional[Mapping[str, Any]] = None, inplace: bool = False,
                  q_out: Optional[DLPackTensor] = None, k_out: Optional[DLPackTensor] = None,
                  stream: Stream = None) -> Any:
    """The gradient of ``rope`` (same arguments): grad_q (and grad_k) rotated by the opposite angles
    (a rotation's transpose is its inverse; the pass-through part's gradient passes through)."""
    return _run("rope_backward", grad_q, grad_k, cos, sin, positions, style, rotary_dim, theta, scaling, inplace,
                q_out, k_out, True, stream)


FUNCTIONS = {"rope": rope, "rope_backward": rope_backward}
