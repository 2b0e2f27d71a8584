"""Functional embedding: ``embedding`` gathers rows of a table by index, ``embedding_backward`` gives
the table's gradient (deterministic by default). See ``baracuda/embedding.h`` for the exact rules."""
from typing import Any, Optional

from . import _C, _interop
from ._interop import dtype_of
from ._checks import _check_indices
from ._types import DLPackTensor, Stream
from .errors import InvalidArgument, Unsupported


def padding_index(padding_idx, num_embeddings, fn="embedding") -> int:
    """torch's rule: None -> -1 (none); a negative index counts from the end; in [-V, V)."""
    if padding_idx is None:
        return -1
    p = int(padding_idx)
    if not -num_embeddings <= p < num_embeddings:
        raise InvalidArgument(f"{fn}: padding_idx={padding_idx}; expected None or in [-{num_embeddings}, "
                              f"{num_embeddings})")
    return p + num_embeddings if p < 0 else p


def embedding(indices: DLPackTensor, weight: DLPackTensor, padding_idx: Optional[int] = None,
              max_norm: Optional[float] = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
              sparse: bool = False, *, check_indices: bool = False, out: Optional[DLPackTensor] = None,
              stream: Stream = None) -> Any:
    """Rows of ``weight`` [V, D] (float32 / float16 / bfloat16 / float64) at ``indices`` (int32 /
    int64, any shape): out = indices.shape + [D], torch's F.embedding (same positional order).
    padding_idx (and scale_grad_by_freq) only shape the gradient (torch.nn.Embedding's rules). An
    index outside [0, V) gives a NaN row (no host sync); ``check_indices=True`` raises
    InvalidArgument naming the first one instead (one small pass and a sync). ``max_norm`` (an
    in-place renormalisation of weight) and ``sparse`` gradients are not supported."""
    fn = "embedding"
    _interop.require_array(fn, "indices", indices)
    _interop.require_array(fn, "weight", weight)
    if max_norm is not None:
        raise Unsupported(f"{fn}: max_norm={max_norm}; renormalising the table in place is not supported "
                          "(renormalise weight beforehand, e.g. with torch.embedding_renorm_)")
    if sparse:
        raise Unsupported(f"{fn}: sparse=True; baracuda gives a dense gradient (use sparse=False)")
    if len(weight.shape) != 2:
        raise InvalidArgument(f"{fn}: weight has shape {tuple(weight.shape)}; expected [num_embeddings, "
                              "embedding_dim]")
    pad = padding_index(padding_idx, int(weight.shape[0]))
    if check_indices:
        _check_indices(fn, indices, int(weight.shape[0]), stream=stream)
    shape = tuple(int(s) for s in indices.shape) + (int(weight.shape[1]),)
    o, finish = (out, _interop._identity) if out is not None else _interop.output(
        weight, shape, dtype_of(weight))
    _C.embedding_call({"weight": weight, "indices": indices, "out": o}, pad, bool(scale_grad_by_freq), True, stream)
    return finish(o)


def embedding_backward(grad_out: DLPackTensor, indices: DLPackTensor, num_weights: int,
                       padding_idx: Optional[int] = None, scale_grad_by_freq: bool = False, *,
                       deterministic: bool = True, out: Optional[DLPackTensor] = None,
                       stream: Stream = None) -> Any:
    """The gradient of ``weight`` [num_weights, D] given grad_out (indices.shape + [D]): each row
    the sum of grad_out's rows whose index names it (zeros for the others, and for padding_idx;
    divided by the index's count with scale_grad_by_freq). Deterministic by default: the indices
    are sorted and each row summed in a fixed order (float32 accumulation), the same bits every
    run; ``deterministic=False`` scatters with atomics (faster with few repeats, order-dependent
    bits, no scale_grad_by_freq). Indices outside [0, V) add nothing."""
    fn = "embedding_backward"
    _interop.require_array(fn, "grad_out", grad_out)
    _interop.require_array(fn, "indices", indices)
    if len(grad_out.shape) < 1:
        raise InvalidArgument(f"{fn}: grad_out has shape {tuple(grad_out.shape)}; expected indices.shape + [D]")
    v = int(num_weights)
    pad = padding_index(padding_idx, v, fn)
    shape = (v, int(grad_out.shape[-1]))
    o, finish = (out, _interop._identity) if out is not None else _interop.output(
        grad_out, shape, dtype_of(grad_out))
    _C.embedding_call({"grad_out": grad_out, "indices": indices, "grad_weight": o}, pad, bool(scale_grad_by_freq),
                      bool(deterministic), stream, _interop.workspace_allocator(grad_out))
    return finish(o)


FUNCTIONS = {"embedding": embedding, "embedding_backward": embedding_backward}
