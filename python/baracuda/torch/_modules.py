"""nn.Modules over the registered ops: drop-in for torch's (same parameters, same state_dict
names), differentiable, and traceable by torch.compile with no graph break."""
import torch
from torch import nn

from .. import _gemm, _rope
from ..errors import InvalidArgument
from ._ops import call


def _last_dim(module, normalized_shape):
    """torch's normalized_shape, limited to the last dim (what the norm kernels normalize over)."""
    shape = (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) != 1:
        raise InvalidArgument(f"{module}: normalized_shape must be one dim (the last), got {shape}")
    return shape


# What a module traces to under torch.compile: "torch" (torch's own formula, which inductor fuses
# with the neighbouring ops) or "baracuda" (our op, opaque to inductor: a dispatcher trip per call).
COMPILE_AS = ("torch", "baracuda")


def _compile_as(module, value):
    if value not in COMPILE_AS:
        raise InvalidArgument(f"{module}: compile_as must be one of {COMPILE_AS}, got {value!r}")
    return value


class RMSNorm(nn.Module):
    """torch.nn.RMSNorm over the last dim (eps defaults to 1e-6, the Llama convention).

    compile_as: under torch.compile, "torch" (default) traces the formula in torch ops, which
    inductor fuses with its neighbours (measured faster in a compiled training step, docs/benchmarks.md);
    "baracuda" keeps our kernel as an opaque op. Eager always runs our kernel."""

    def __init__(self, normalized_shape, eps=1e-6, elementwise_affine=True, *, compile_as="torch", device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _last_dim("RMSNorm", normalized_shape)
        self.eps = float(eps)
        self.compile_as = _compile_as("RMSNorm", compile_as)
        self.weight = nn.Parameter(torch.ones(self.normalized_shape, device=device, dtype=dtype)) \
            if elementwise_affine else None

    def forward(self, x, residual=None):
        if self.compile_as == "torch" and torch.compiler.is_compiling():
            # spelled out (not F.rms_norm, which may stay one unfused aten kernel): float32 math,
            # weight applied in float32, one rounding, as our kernel
            h = x if residual is None else x + residual
            hf = h.float()
            y = hf * torch.rsqrt(hf.square().mean(-1, keepdim=True) + self.eps)
            if self.weight is not None:
                y = y * self.weight.float()
            y = y.to(x.dtype)
            return y if residual is None else (y, h)
        if residual is not None:
            h = call("add", x, residual)
            return call("rms_norm", h, self.weight, self.eps)[0], h
        return call("rms_norm", x, self.weight, self.eps)[0]

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.weight is not None}"


class LayerNorm(nn.Module):
    """torch.nn.LayerNorm over the last dim."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, *, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _last_dim("LayerNorm", normalized_shape)
        self.eps = float(eps)
        kw = dict(device=device, dtype=dtype)
        self.weight = nn.Parameter(torch.ones(self.normalized_shape, **kw)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape, **kw)) if elementwise_affine and bias else None

    def forward(self, x):
        return call("layer_norm", x, self.weight, self.bias, self.eps)[0]

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.weight is not None}"


class GroupNorm(nn.Module):
    """torch.nn.GroupNorm: x [N, C, *spatial] in num_groups groups of channels."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, *, device=None, dtype=None):
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise InvalidArgument(f"GroupNorm: num_groups = {num_groups} must be positive and divide "
                                  f"num_channels = {num_channels}")
        self.num_groups, self.num_channels, self.eps, self.affine = int(num_groups), int(num_channels), float(eps), affine
        kw = dict(device=device, dtype=dtype)
        self.weight = nn.Parameter(torch.ones(num_channels, **kw)) if affine else None
        self.bias = nn.Parameter(torch.zeros(num_channels, **kw)) if affine else None

    def forward(self, x):
        return call("group_norm", x, self.num_groups, self.weight, self.bias, self.eps)[0]

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class Linear(nn.Linear):
    """torch.nn.Linear with an optional fused activation (none, relu, gelu, gelu_tanh, silu) in the
    GEMM's epilogue (cuBLASLt)."""

    def __init__(self, in_features, out_features, bias=True, activation="none", *, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        _gemm.check_activation("Linear", activation)
        self.activation = activation

    def forward(self, x):
        return call("linear", x, self.weight, self.bias, self.activation)[0]

    def extra_repr(self):
        return super().extra_repr() + f", activation={self.activation}"


_GATES = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh",
          "relu": "relu"}


_TORCH_ACT = {"silu": nn.functional.silu, "gelu": nn.functional.gelu, "relu": nn.functional.relu,
              "gelu_tanh": lambda t: nn.functional.gelu(t, approximate="tanh")}
_GATED_MUL = {"silu": "silu_mul", "gelu": "gelu_mul", "gelu_tanh": "gelu_tanh_mul"}


class GatedMLP(nn.Module):
    """The LLM MLP: down_proj(act(gate_proj(x)) * up_proj(x)) (SwiGLU for act=silu, GeGLU for gelu /
    gelu_tanh), with the parameter names of transformers' Llama / Mistral / Qwen2 MLPs.
    compile_as: as RMSNorm's ("torch" by default: under torch.compile, torch's formula)."""

    def __init__(self, hidden_size, intermediate_size, bias=False, activation="silu", *, compile_as="torch",
                 device=None, dtype=None):
        super().__init__()
        self.compile_as = _compile_as("GatedMLP", compile_as)
        if activation not in _GATES:
            raise InvalidArgument(f"GatedMLP: activation must be one of {sorted(_GATES)}, got {activation!r}")
        self.activation = _GATES[activation]
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, **kw)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, **kw)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, **kw)

    def forward(self, x):
        if self.compile_as == "torch" and torch.compiler.is_compiling():
            # inductor emits the same cuBLAS GEMMs and fuses act(gate) * up itself; our ops would be
            # opaque calls between them (a dispatcher trip each): measured slower (docs/benchmarks.md)
            act = _TORCH_ACT[self.activation]
            return self.down_proj(act(self.gate_proj(x)) * self.up_proj(x))
        gate = call("linear", x, self.gate_proj.weight, self.gate_proj.bias, "none")[0]
        up = call("linear", x, self.up_proj.weight, self.up_proj.bias, "none")[0]
        fused = _GATED_MUL.get(self.activation)  # act(gate) * up in one kernel, forward and backward
        h = call(fused, gate, up) if fused else call("mul", call(self.activation, gate), up)
        return call("linear", h, self.down_proj.weight, self.down_proj.bias, "none")[0]


class CrossEntropyLoss(nn.Module):
    """torch.nn.CrossEntropyLoss for class-index targets and logits [..., V]: one read of the
    logits forward, one read and one write backward, no [N, V] float32 copy, no host sync."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__()
        self.register_buffer("weight", weight)
        self.ignore_index = int(ignore_index)
        self.reduction = reduction
        self.label_smoothing = float(label_smoothing)

    def forward(self, logits, target):
        from . import cross_entropy
        return cross_entropy(logits, target, self.weight, ignore_index=self.ignore_index,
                             label_smoothing=self.label_smoothing, reduction=self.reduction)


class Softmax(nn.Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = int(dim)

    def forward(self, x):
        return call("softmax", x, self.dim)


class Attention(nn.Module):
    """The attention core as a module, with no projections: forward(q, k, v) is bt.attention with the
    rules fixed here. q [B, Sq, Hq, D], k / v [B, Sk, Hkv, D] (BHSD views work without copies), or
    packed sequences through forward's cu_seqlens_q / cu_seqlens_k / max_seqlen_q / max_seqlen_k.
    ``alibi_slopes`` ([Hq] or [B, Hq], f32) is kept as a buffer; ``sink_heads=H`` adds learned
    attention sinks, a float32 parameter of H logits (zeros at start). ``deterministic``: a
    bitwise-reproducible backward."""

    def __init__(self, *, causal=False, scale=None, window=None, softcap=None, causal_alignment="bottom_right",
                 alibi_slopes=None, sink_heads=None, deterministic=False, device=None):
        super().__init__()
        self.causal = bool(causal)
        self.scale = None if scale is None else float(scale)
        self.window = None if window is None else tuple(int(w) for w in window)
        self.softcap = None if softcap is None else float(softcap)
        self.causal_alignment = str(causal_alignment)
        self.deterministic = bool(deterministic)
        self.register_buffer("alibi_slopes", alibi_slopes)
        self.sinks = nn.Parameter(torch.zeros(int(sink_heads), device=device)) if sink_heads else None

    def forward(self, q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
                seqused_k=None):
        from . import attention
        sinks = self.sinks
        if sinks is not None and q.dtype == torch.float64:
            sinks = sinks.double()  # sinks come in the compute dtype: f64 for f64 inputs
        return attention(q, k, v, causal=self.causal, scale=self.scale, window=self.window, softcap=self.softcap,
                         alibi_slopes=self.alibi_slopes, sinks=sinks, cu_seqlens_q=cu_seqlens_q,
                         cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                         seqused_k=seqused_k, causal_alignment=self.causal_alignment,
                         deterministic=self.deterministic)

    def extra_repr(self):
        parts = [f"causal={self.causal}"] if self.causal else []
        for name in ("scale", "window", "softcap"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name)}")
        if self.causal and self.causal_alignment != "bottom_right":
            parts.append(f"causal_alignment={self.causal_alignment!r}")
        if self.sinks is not None:
            parts.append(f"sink_heads={self.sinks.shape[0]}")
        if self.deterministic:
            parts.append("deterministic=True")
        return ", ".join(parts)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding as a module: forward(q, k=None, positions=None) is bt.rope with the
    rule fixed here, returning the rotated q (or (q, k)). q / k [tokens, H, D] or [B, S, H, D] (BHSD
    views work without copies). No buffers: the kernel computes the angles from theta and the
    scaling rule (a transformers-style rope_scaling dict); ``from_config`` reads them from a
    transformers config."""

    def __init__(self, *, theta=10000.0, scaling=None, style="neox", rotary_dim=None):
        super().__init__()
        _rope.scaling_fields(theta, scaling, "RotaryEmbedding")  # refuse an unsupported rule here, not at forward
        if style not in ("neox", "gptj"):
            raise InvalidArgument(f"RotaryEmbedding: style is {style!r}; expected 'neox' or 'gptj'")
        self.theta, self.scaling, self.style = float(theta), None if scaling is None else dict(scaling), style
        self.rotary_dim = None if rotary_dim is None else int(rotary_dim)

    @classmethod
    def from_config(cls, config, style="neox"):
        """From a transformers config: rope_theta and rope_scaling (transformers 4) or rope_parameters
        (5), partial_rotary_factor, head_dim."""
        params = dict(getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {})
        theta = params.pop("rope_theta", getattr(config, "rope_theta", 10000.0))
        partial = params.pop("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0))
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        rotary_dim = int(head_dim * partial) if partial != 1.0 else None
        scaling = params if params.get("rope_type", params.get("type", "default")) != "default" else None
        return cls(theta=theta, scaling=scaling, style=style, rotary_dim=rotary_dim)

    def forward(self, q, k=None, positions=None):
        from . import rope
        return rope(q, k, positions=positions, style=self.style, rotary_dim=self.rotary_dim, theta=self.theta,
                    scaling=self.scaling)

    def extra_repr(self):
        parts = [f"theta={self.theta}", f"style={self.style!r}"]
        if self.rotary_dim is not None:
            parts.append(f"rotary_dim={self.rotary_dim}")
        if self.scaling is not None:
            parts.append(f"scaling={self.scaling}")
        return ", ".join(parts)


class Embedding(nn.Embedding):
    """torch.nn.Embedding with baracuda's kernels: the same parameters and state_dict (``weight``), a
    forward through bt.embedding and its deterministic backward (sorted indices, fixed-order sums:
    the same gradient bits every step). max_norm and sparse are refused at construction."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        if max_norm is not None or sparse:
            raise InvalidArgument("Embedding: max_norm and sparse are not supported (a dense gradient; "
                                  "renormalise the table outside)")
        super().__init__(num_embeddings, embedding_dim, padding_idx, None, norm_type, scale_grad_by_freq, False,
                         _weight, _freeze, device, dtype)

    def forward(self, indices):
        from . import embedding
        return embedding(indices, self.weight, self.padding_idx, None, self.norm_type, self.scale_grad_by_freq)
