"""Functional sampling: ``sample`` draws one token per row of logits with temperature, top-k, top-p
and min-p, without sorting the vocabulary. See ``baracuda/sampling.h`` for the exact rules."""
from typing import Any, Optional, Union

from . import _C, _interop
from ._dtypes import DType
from ._types import DLPackTensor, Stream
from .errors import InvalidArgument

_Param = Union[float, int, DLPackTensor]


def sample(logits: DLPackTensor, *, temperature: _Param = 1.0, top_k: _Param = 0, top_p: _Param = 1.0,
           min_p: _Param = 0.0, seed: int = 0, offset: int = 0, seeds: Optional[DLPackTensor] = None,
           return_logprobs: bool = False, out: Optional[DLPackTensor] = None,
           logprobs: Optional[DLPackTensor] = None, stream: Stream = None) -> Any:
    """One token per row of ``logits`` [B, V] (float32 / float16 / bfloat16).

    x = logits / temperature (temperature 0: greedy, the first argmax). The kept tokens are those
    at or above every threshold that is on: ``top_k`` > 0 (the k-th largest x, ties kept),
    ``top_p`` < 1 (the smallest top set of the top-k tokens holding top_p of their softmax mass,
    ties of its last token kept), ``min_p`` > 0 (softmax(x) >= min_p * its maximum). The token is
    drawn from softmax(x) over the kept tokens with Philox-4x32-10 of (``seed``, ``offset``, row):
    the same tokens for the same seed and offset. Each parameter is a number or a per-row device
    tensor [B] (float32; top_k int32 / int64); ``seeds`` (int64 or int32 [B]) overrides ``seed`` per row.
    Per-row tensors keep a captured CUDA graph valid for new requests. No vocabulary sort, no host
    sync. Returns tokens (int64 [B], or ``out``'s dtype: int32 / int64), or (tokens, logprobs) with
    ``return_logprobs``: log softmax(x)[token] over the whole row, float32 (T = 1 for greedy rows)."""
    fn = "sample"
    _interop.require_array(fn, "logits", logits)
    if len(logits.shape) != 2:
        raise InvalidArgument(f"{fn}: logits has shape {tuple(logits.shape)}; expected [batch, vocab]")
    tensors = {"logits": logits, "seeds": seeds}
    scalars = _interop.split_per_row(fn, tensors, (("temperature", temperature, 1.0, float), ("top_k", top_k, 0, int),
                                                   ("top_p", top_p, 1.0, float), ("min_p", min_p, 0.0, float)))
    b = int(logits.shape[0])
    tokens, ftok = (out, _interop._identity) if out is not None else _interop.output(logits, (b,), DType.int64)
    tensors["tokens"] = tokens
    lp = flp = None
    if return_logprobs or logprobs is not None:
        lp, flp = (logprobs, _interop._identity) if logprobs is not None else _interop.output(
            logits, (b,), DType.float32)
        tensors["logprobs"] = lp
    _C.sample_call(tensors, scalars["temperature"], scalars["top_k"], scalars["top_p"], scalars["min_p"],
                   int(seed) & 0xFFFFFFFFFFFFFFFF, int(offset) & 0xFFFFFFFFFFFFFFFF, stream)
    tokens = ftok(tokens)
    return (tokens, flp(lp)) if return_logprobs else tokens


def apply_penalties(logits: DLPackTensor, output_tokens: Optional[DLPackTensor] = None, *,
                    prompt_tokens: Optional[DLPackTensor] = None, repetition_penalty: _Param = 1.0,
                    presence_penalty: _Param = 0.0, frequency_penalty: _Param = 0.0, stream: Stream = None) -> Any:
    """Penalises ``logits`` [B, V] in place (vLLM's rules) and returns it: every token of
    ``prompt_tokens`` or ``output_tokens`` (int32 / int64 [B, L], entries outside [0, V) are
    padding) gets x = x / repetition_penalty if x > 0 else x * repetition_penalty; then with c its
    count in output_tokens, x -= frequency_penalty * c + presence_penalty * (c > 0). Each penalty is a
    number or a per-row float32 tensor [B] (CUDA-graph friendly). Deterministic, no host sync; a
    B x V int32 scratch. Call it before ``sample``."""
    fn = "apply_penalties"
    _interop.require_array(fn, "logits", logits)
    tensors = {"logits": logits, "prompt_tokens": prompt_tokens, "output_tokens": output_tokens}
    scalars = _interop.split_per_row(fn, tensors, (("repetition_penalty", repetition_penalty, 1.0, float),
                                                   ("presence_penalty", presence_penalty, 0.0, float),
                                                   ("frequency_penalty", frequency_penalty, 0.0, float)))
    _C.apply_penalties_call(tensors, scalars["repetition_penalty"], scalars["presence_penalty"],
                            scalars["frequency_penalty"], stream, _interop.workspace_allocator(logits))
    return logits


FUNCTIONS = {"sample": sample, "apply_penalties": apply_penalties}
