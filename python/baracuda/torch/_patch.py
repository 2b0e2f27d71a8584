"""patch(model): swap baracuda's modules into a transformers Llama / Mistral / Qwen2 model in place.

What is swapped (each module keeps its parameters, so state_dict, optimizers and checkpoints are
unaffected): every ``*RMSNorm`` (``weight`` + ``variance_epsilon``) -> RMSNorm; every gated MLP
(``gate_proj`` / ``up_proj`` / ``down_proj`` + ``act_fn``) -> GatedMLP (with ``mlp=True``); every
nn.Embedding -> Embedding (with ``embedding=True``); the
causal-LM loss -> our cross-entropy (no float32 copy of the logits); with ``linear=True`` every
other nn.Linear -> Linear. Attention (``attention=True``): the model's attention implementation
becomes "baracuda" (transformers' AttentionInterface), which runs bt.attention for 16-bit causal or
full attention without a padding mask (with the layer's sliding window, the model's attention sinks,
gpt-oss's ``s_aux``, and logit softcap, Gemma-2's, where it passes them) and hands every other call
(a padding mask, dropout, float32) to transformers' SDPA path, or, for a model that passes sinks or
a softcap (which SDPA cannot take), to its modeling file's own eager attention.
"""
import sys

import torch
from torch import nn

from ._modules import Embedding, GatedMLP, Linear, RMSNorm, _compile_as

_ACT_NAMES = {"SiLU": "silu", "SiLUActivation": "silu", "GELUActivation": "gelu",
              "PytorchGELUTanh": "gelu_tanh", "GELUTanh": "gelu_tanh", "ReLU": "relu"}


def _act_name(act):
    name = type(act).__name__
    if name in _ACT_NAMES:
        return _ACT_NAMES[name]
    if isinstance(act, nn.GELU):
        return "gelu_tanh" if act.approximate == "tanh" else "gelu"
    return None


def _rms_norm(m, compile_as):
    eps = getattr(m, "variance_epsilon", getattr(m, "eps", None))
    w = getattr(m, "weight", None)
    if eps is None or not isinstance(w, nn.Parameter) or w.dim() != 1:
        return None
    if type(m).__name__.startswith("Gemma"):
        return None  # Gemma scales by (1 + weight): not this module's formula
    new = RMSNorm(w.shape[0], eps=float(eps), compile_as=compile_as, device="meta")
    new.weight = w
    return new


def _mlp(m, compile_as):
    parts = [getattr(m, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
    act = _act_name(getattr(m, "act_fn", None))
    if act is None or not all(isinstance(p, nn.Linear) for p in parts):
        return None
    gate, up, down = parts
    new = GatedMLP(gate.in_features, gate.out_features, bias=gate.bias is not None, activation=act,
                   compile_as=compile_as, device="meta")
    new.gate_proj, new.up_proj, new.down_proj = gate, up, down
    return new


def _embedding(m):
    """nn.Embedding -> Embedding over the same weight (max_norm / sparse ones stay torch's)."""
    if type(m) is not nn.Embedding or m.max_norm is not None or m.sparse:
        return None
    new = Embedding(m.num_embeddings, m.embedding_dim, m.padding_idx, scale_grad_by_freq=m.scale_grad_by_freq,
                    device="meta")
    new.weight = m.weight
    return new


def _linear(m):
    new = Linear(m.in_features, m.out_features, bias=m.bias is not None, device="meta")
    new.weight = m.weight
    new.bias = m.bias
    return new


def causal_lm_loss(logits, labels, vocab_size, num_items_in_batch=None, ignore_index=-100, shift_labels=None,
                   **kwargs):
    """transformers' ForCausalLMLoss through baracuda's cross-entropy, without the float32 upcast."""
    from . import cross_entropy
    if shift_labels is None:
        labels = nn.functional.pad(labels, (0, 1), value=ignore_index)
        shift_labels = labels[..., 1:]
    logits = logits.reshape(-1, vocab_size)
    shift_labels = shift_labels.reshape(-1).to(logits.device)
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = cross_entropy(logits, shift_labels, ignore_index=ignore_index, reduction=reduction)
    if reduction == "sum":
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss


def _causal(module, query, is_causal):
    """Whether a call without a mask is causal, as transformers' SDPA path decides it."""
    return query.shape[2] > 1 and (is_causal if is_causal is not None else getattr(module, "is_causal", True))


def _window(module, kwargs):
    """The layer's sliding window (keys j > i - window are seen), as transformers passes it to an
    attention function for flash attention; None for a full-attention layer."""
    w = kwargs.get("sliding_window", getattr(module, "sliding_window", None))
    return w if isinstance(w, int) and w > 0 else None


def _band(query, key, causal, window, offset):
    """The boolean [Sq, Sk] of the keys each query sees: query i at position i + offset, keys up to it
    when causal, the last `window` of them with a sliding window."""
    sq, sk = query.shape[2], key.shape[2]
    pos = torch.arange(sq, device=query.device)[:, None] + offset
    j = torch.arange(sk, device=query.device)[None, :]
    vis = j <= pos if causal else torch.ones(sq, sk, dtype=torch.bool, device=query.device)
    if window is not None:
        vis = vis & (j > pos - window)
    return vis


def _unmasked(module, query, key, is_causal, window):
    """The boolean mask [1, 1, Sq, Sk] a call without one means, as SDPA's is_causal would read it
    (causal: top-left, query i sees keys 0..i; a single query row sees every key) with the layer's
    sliding window applied (a single row: its position is the last key's)."""
    causal = _causal(module, query, is_causal)
    return _band(query, key, causal, window, 0 if causal else key.shape[2] - query.shape[2])[None, None]


def _eager_attention(module, query, key, value, attention_mask, dropout, scaling, is_causal, kwargs):
    """The call through the model's own eager attention (its modeling file's eager_attention_forward):
    for sinks and softcap, which transformers' SDPA path drops or refuses. The masks made by SDPA's
    rules become eager's: None for a causal call becomes the causal mask SDPA's is_causal means (query
    i sees keys 0..i), a boolean mask an additive one."""
    from ..errors import Unsupported
    eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if eager is None:
        raise Unsupported(f"patch: {type(module).__name__} passes attention sinks or a softcap, which transformers' "
                          "SDPA path cannot take, and its modeling file has no eager_attention_forward; patch the "
                          "model with attention=False")
    if attention_mask is None and _causal(module, query, is_causal):
        attention_mask = _unmasked(module, query, key, is_causal, None)
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        attention_mask = torch.zeros(attention_mask.shape, dtype=query.dtype, device=query.device).masked_fill(
            ~attention_mask, torch.finfo(query.dtype).min)
    return eager(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


def _ours_can_run(query, dropout, kwargs):
    """Whether bt.attention takes the call (the mask aside): 16-bit CUDA tensors, no dropout, no
    position bias, no attention weights asked for."""
    return (not dropout and kwargs.get("position_bias") is None and not kwargs.get("output_attentions", False)
            and query.dtype in (torch.float16, torch.bfloat16) and query.is_cuda)


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                      **kwargs):
    """A transformers attention function (query [B, Hq, Sq, D], key / value [B, Hkv, Sk, D]; returns
    ([B, Sq, Hq, D], None)). Ours where the call is plain attention on 16-bit tensors, the layer's
    sliding window, the model's sinks (``s_aux``) and softcap included, a padding mask through packed
    sequences; otherwise transformers' SDPA function with the same arguments, or the model's eager
    attention when it passes sinks or a softcap."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    sinks, softcap = kwargs.get("s_aux"), kwargs.get("softcap")
    window = _window(module, kwargs)
    unpad = getattr(attention_mask, "_baracuda_unpad", None) if attention_mask is not None else None
    ours = _ours_can_run(query, dropout, kwargs) and (attention_mask is None or unpad is not None)
    if not ours:
        if unpad is not None:  # the padding mask _baracuda_mask made, as SDPA's 4D mask
            attention_mask = _padded(module, query, key, is_causal, window, attention_mask)
        elif attention_mask is None and window is not None and window < key.shape[2]:
            # _baracuda_mask left the window to us: the other paths get it as a mask
            attention_mask = _unmasked(module, query, key, is_causal, window)
        if sinks is not None or softcap is not None:
            return _eager_attention(module, query, key, value, attention_mask, dropout, scaling, is_causal, kwargs)
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    from . import attention
    q_len = query.shape[2]
    causal = _causal(module, query, is_causal)
    rules = dict(scale=scaling, softcap=softcap, window=None if window is None else (window - 1, -1),
                 sinks=None if sinks is None else sinks.to(torch.float32))
    if unpad is not None:
        return _packed(attention, query, key, value, unpad, causal, rules), None
    if causal and key.shape[2] > q_len:
        # transformers skips the mask here only for a prefill into an empty (static) cache: the
        # keys past q_len are unwritten slots, as its SDPA path assumes too
        key, value = key[:, :, :q_len], value[:, :, :q_len]
    # causal: as many keys as queries here, so the alignments agree; a single query row (no causal
    # band) is the last position, which only the window reads: bottom-right
    out = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), causal=causal,
                    causal_alignment="top_left" if causal else "bottom_right", **rules)
    return out, None


def _packed(attention, query, key, value, unpad, causal, rules):
    """A padded batch as packed sequences: the valid query and key rows gathered (unpad's indices),
    bt.attention over them (bottom-right: each row's queries are the last positions of its keys), the
    output scattered back with zeros in padded query rows."""
    q_rows, k_rows, cu_q, cu_k = unpad
    b, hq, sq, _ = query.shape

    def rows(t, at):  # [B, H, S, D] -> the rows `at` (batch, position) as [N, H, D], one gather
        return t.transpose(1, 2)[at]

    out = attention(rows(query, q_rows), rows(key, k_rows), rows(value, k_rows), causal=causal, cu_seqlens_q=cu_q,
                    cu_seqlens_k=cu_k, max_seqlen_q=sq, max_seqlen_k=key.shape[2], **rules)
    return out.new_zeros((b, sq, hq, out.shape[-1])).index_put(q_rows, out)


def _padded(module, query, key, is_causal, window, pad):
    """The boolean mask [B, 1, Sq, Sk] SDPA's rules make from the padding mask pad [B, Sk] that
    _baracuda_mask returned (the queries are the last positions)."""
    vis = _band(query, key, _causal(module, query, is_causal), window, key.shape[2] - query.shape[2])
    return vis[None, None] & pad[:, None, None, :]


def _unpad(pad, q_length):
    """For a padding mask pad [B, Sk] (bool) whose valid keys are one run per row and whose queries are
    its last q_length positions: the valid query rows and key rows ((batch, position) index pairs) and
    cu_seqlens_q / cu_seqlens_k; None when some row's valid keys are not one run. Reads the mask on the
    host once per forward (sdpa_mask's own padding check does too)."""
    n = pad.sum(1)
    first = pad.to(torch.int32).argmax(1)
    j = torch.arange(pad.shape[1], device=pad.device)[None, :]
    if not torch.equal((j >= first[:, None]) & (j < (first + n)[:, None]), pad):
        return None
    qpad = pad[:, pad.shape[1] - q_length:]
    zero = torch.zeros(1, dtype=torch.int32, device=pad.device)
    return (qpad.nonzero(as_tuple=True), pad.nonzero(as_tuple=True),
            torch.cat([zero, qpad.sum(1).cumsum(0).to(torch.int32)]), torch.cat([zero, n.cumsum(0).to(torch.int32)]))


def _baracuda_mask(*args, **kwargs):
    """transformers' mask function for the "baracuda" attention: SDPA's rules (sdpa_mask), except that
    - a sliding-window layer's mask is skipped (None) where a plain causal one would be:
      attention_forward applies the layer's window itself;
    - a padding mask whose valid keys are one run per row (left or right padding), with the queries at
      the last positions, comes back as the 2D bool mask [B, kv_length] carrying its unpadding:
      attention_forward runs packed sequences.
    Anything else (extra mask functions, packed inputs, chunked attention, a static cache, tracing)
    keeps SDPA's mask."""
    from transformers.masking_utils import sdpa_mask
    if args or not kwargs.get("allow_is_causal_skip", True):
        return sdpa_mask(*args, **kwargs)
    config, local = kwargs.get("config"), kwargs.get("local_size")
    if local is not None:
        if local != getattr(config, "sliding_window", None) or getattr(config, "attention_chunk_size", None):
            return sdpa_mask(**kwargs)  # chunked attention: its mask stays
        kwargs = dict(kwargs, local_size=None)
    pad = kwargs.get("attention_mask")
    q_len, kv_len, q_off, kv_off = (kwargs.get(n, 0) for n in ("q_length", "kv_length", "q_offset", "kv_offset"))
    if (pad is not None and isinstance(q_off, int) and isinstance(kv_off, int) and q_off + q_len == kv_off + kv_len
            and not torch.compiler.is_compiling()):
        pad = pad.bool()
        if pad.shape[-1] < kv_off + kv_len:
            pad = torch.nn.functional.pad(pad, (0, kv_off + kv_len - pad.shape[-1]))
        pad = pad[:, kv_off:kv_off + kv_len]
        if not bool(pad.all()):
            unpad = _unpad(pad, q_len)
            if unpad is not None:
                pad._baracuda_unpad = unpad  # pad is a new view: the caller's mask has no such attribute
                return pad
    return sdpa_mask(**kwargs)


def _route_attention(model):
    """Registers attention_forward as transformers' "baracuda" attention (with _baracuda_mask's rules) and
    switches the model to it. False when the model or transformers has no attention interface."""
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface
    except ImportError:
        return False
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "_attn_implementation"):
        return False
    AttentionInterface.register("baracuda", attention_forward)
    AttentionMaskInterface.register("baracuda", _baracuda_mask)
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("baracuda")
    else:
        config._attn_implementation = "baracuda"
    return True


def patch(model, *, rms_norm=True, mlp=False, loss=True, linear=False, attention=True, embedding=False,
          compile_as="torch"):
    """Swaps baracuda modules into ``model`` in place and returns it; ``model.baracuda_patched``
    counts what was swapped. By default the norms and the loss (where baracuda is faster than
    torch) and routes the attention (``attention=False`` keeps the model's); ``mlp=True`` also
    swaps the gated MLPs (GatedMLP: our linears and the fused silu_mul), ``linear=True`` every
    other nn.Linear, ``embedding=True`` every nn.Embedding (Embedding: our gather and the
    deterministic sorted backward). ``compile_as`` is the swapped norms' and MLPs'
    behaviour under torch.compile: "torch" (default) traces torch's formula for inductor to fuse,
    "baracuda" keeps our kernels there too (see RMSNorm). The loss is ours in both."""
    _compile_as("patch", compile_as)
    counts = {"rms_norm": 0, "mlp": 0, "linear": 0, "embedding": 0, "loss": 0, "attention": 0}
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            new = None
            if rms_norm and type(child).__name__.endswith("RMSNorm"):
                new, kind = _rms_norm(child, compile_as), "rms_norm"
            elif mlp and hasattr(child, "gate_proj"):
                new, kind = _mlp(child, compile_as), "mlp"
            elif linear and type(child) is nn.Linear:
                new, kind = _linear(child), "linear"
            elif embedding and type(child) is nn.Embedding:
                new, kind = _embedding(child), "embedding"
            if new is not None:
                setattr(parent, name, new)
                counts[kind] += 1
    if loss and hasattr(model, "loss_function"):
        try:
            model.loss_function = causal_lm_loss
        except AttributeError:
            model._loss_function = causal_lm_loss
        counts["loss"] = 1
    if attention and _route_attention(model):
        counts["attention"] = 1
    model.baracuda_patched = counts
    return model
