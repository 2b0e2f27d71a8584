"""Functional KV cache: ``kv_cache_append`` writes the new tokens' keys and values into a paged
cache in place. See ``baracuda/kv_cache.h`` for the exact rules."""
from typing import Optional

from . import _C
from ._types import DLPackTensor, Stream
from .errors import InvalidArgument


def check_pairs(value, value_cache, k_scale, v_scale):
    """The argument rules the functional and the JAX forms share: value with value_cache, v_scale only
    with k_scale."""
    if (value is None) != (value_cache is None):
        raise InvalidArgument("kv_cache_append: value and value_cache go together (both or neither)")
    if v_scale is not None and k_scale is None:
        raise InvalidArgument("kv_cache_append: v_scale without k_scale (give both, or k_scale alone for a key-only "
                              "cache)")


def kv_cache_append(key: DLPackTensor, value: Optional[DLPackTensor], key_cache: DLPackTensor,
                    value_cache: Optional[DLPackTensor], slot_mapping: DLPackTensor, *,
                    k_scale: Optional[DLPackTensor] = None, v_scale: Optional[DLPackTensor] = None,
                    stream: Stream = None) -> None:
    """Writes key [tokens, kv_heads, D] (and value [tokens, kv_heads, Dv]) into key_cache
    [pages, page_size, kv_heads, D] (and value_cache) at slot_mapping[t] (int32 / int64 [tokens]):
    page slot // page_size, position slot % page_size. A heads-first cache [pages, kv_heads,
    page_size, D] is passed as its permuted view (``c.transpose(1, 2)``). Negative slots (padding)
    and slots past the cache are skipped. In place; returns None. value / value_cache may both be
    None (a single latent cache, MLA-style). Source and cache dtypes are equal (a copy), or the cache
    is fp8 (e4m3 / e5m2) and the source float32 / float16 / bfloat16: cache = fp8(src / scale),
    saturated, with ``k_scale`` / ``v_scale`` float32 [1] or [kv_heads] (1 when not given; pass the
    same scales to paged_attention)."""
    check_pairs(value, value_cache, k_scale, v_scale)
    _C.kv_cache_append_call({"key": key, "value": value, "key_cache": key_cache, "value_cache": value_cache,
                             "slot_mapping": slot_mapping, "k_scale": k_scale, "v_scale": v_scale}, stream)


FUNCTIONS = {"kv_cache_append": kv_cache_append}
