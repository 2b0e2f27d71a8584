"""
baracuda core bindings (use the baracuda package, not this module directly)
"""

from collections.abc import Mapping, Sequence
import enum
from typing import Any, overload


class DType(enum.Enum):
    """
    Element types. Convert from numpy / torch / JAX dtypes with baracuda.dtype().
    """

    bool = 0

    int8 = 1

    uint8 = 2

    int16 = 3

    int32 = 4

    int64 = 5

    uint32 = 6

    float16 = 7

    bfloat16 = 8

    float32 = 9

    float64 = 10

    float8_e4m3fn = 11

    float8_e5m2 = 12

    complex64 = 13

    complex128 = 14

def dtype_size(dtype: DType) -> int:
    """Bytes per element."""

class Backend(enum.Enum):
    """Where a kernel comes from."""

    bespoke = 0

    cublaslt = 1

    cudnn = 2

    cutlass = 3

    nccl = 4

    cufft = 5

    cusolver = 6

    cublas = 7

class TensorSpec:
    """Shape, dtype and strides (in elements) of an operand, without data."""

    def __init__(self, shape: object, dtype: DType, strides: Sequence[int] | None = None) -> None: ...

    @property
    def shape(self) -> list[int]: ...

    @property
    def dtype(self) -> DType: ...

    @property
    def strides(self) -> list[int]: ...

    def __eq__(self, arg: TensorSpec, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

class PrecisionGuarantee:
    """What a kernel promises about its numerics."""

    @property
    def math(self) -> str: ...

    @property
    def compute_dtype(self) -> DType: ...

    @property
    def accumulator_dtype(self) -> DType: ...

    @property
    def deterministic(self) -> bool: ...

    @property
    def bit_stable(self) -> bool: ...

    def __repr__(self) -> str: ...

class KernelSku:
    """The kernel a plan picked, derived from the code path that runs."""

    @property
    def name(self) -> str: ...

    @property
    def category(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def dtypes(self) -> list[DType]: ...

    @property
    def layout(self) -> str: ...

    @property
    def arch(self) -> str: ...

    @property
    def backend(self) -> Backend: ...

    @property
    def precision(self) -> PrecisionGuarantee: ...

    def __repr__(self) -> str: ...

class PlanPreference:
    """
    Backend, numerics and tuning preferences for select(). tuning: 'key=value,...' overrides of the family's tunable choices (unknown keys are refused; the SKU reports what ran).
    """

    def __init__(self, prefer: Sequence[Backend] = [], forbid: Sequence[Backend] = [], require_deterministic: bool = False, allow_tf32: bool = False, workspace_limit: int = -1, tuning: str = '') -> None: ...

    @property
    def prefer(self) -> list[Backend]: ...

    @property
    def forbid(self) -> list[Backend]: ...

    @property
    def require_deterministic(self) -> bool: ...

    @property
    def allow_tf32(self) -> bool: ...

    @property
    def workspace_limit(self) -> int: ...

    @property
    def tuning(self) -> str: ...

def families() -> list:
    """
    The registered plan families and their (op, dtype, layout, backend) coverage.
    """

def build_info() -> dict:
    """
    Version, compiled CUDA archs, CUDA runtime version and feature toggles of this build.
    """

def devices() -> list:
    """
    CUDA devices the runtime sees; empty (not an error) without a driver or GPU.
    """

def device_probe_message() -> str:
    """Why devices() is empty, or ''."""

def add_library_dir(dir: str) -> None:
    """
    A directory to look for the libraries loaded at run time (libcublasLt, libcudnn) in, before their first use.
    """

def empty(shape: Sequence[int], dtype: DType, device: int = 0) -> Any:
    """
    Device memory owned by the returned DLPack array (used for frameworks like JAX that cannot lend output buffers).
    """

def wrap(ptr: int, shape: Sequence[int], dtype: DType, device: int, owner: object) -> Any:
    """
    A contiguous DLPack array over device memory that `owner` keeps alive (e.g. a CuPy pool allocation holding a dtype CuPy has no array type for).
    """

def clear_workspaces() -> int:
    """
    Frees the scratch buffers the functional ops keep per (device, stream) (cuBLASLt's workspace among them; the core's own device memory, outside the frameworks' pools); the next call allocates again. Waits for the device's queued work. Returns how many there were.
    """

def elementwise_ops() -> list:
    """
    The elementwise op table: name, category, arity, params (name, default), dtypes, backward op, doc.
    """

class ElementwiseDescriptor:
    """
    What to compute: op name, input specs, output spec, scalar params. Pure data; hashable; the plan-cache key.
    """

    def __init__(self, op: str, inputs: Sequence[TensorSpec], out: TensorSpec, params: Mapping[str, float] = {}) -> None: ...

    @overload
    def __eq__(self, arg: ElementwiseDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def inputs(self) -> list[TensorSpec]: ...

    @property
    def out(self) -> TensorSpec: ...

    @property
    def params(self) -> dict[str, float]: ...

class ElementwisePlan:
    """A validated elementwise launch: select once, run many times."""

    @staticmethod
    def select(desc: ElementwiseDescriptor, preference: PlanPreference | None = None) -> ElementwisePlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> ElementwiseDescriptor: ...

    def workspace_bytes(self) -> int:
        """Bytes of scratch memory run() needs (0 for most ops)."""

    def run(self, *args: object, **operands: object) -> None:
        """
        run(out=, <inputs by name>, workspace=, stream=), the names as the op's functional form (x; a, b; cond, a, b; x0, x1, x2; grad_out, ...), or run(out, *inputs): check the tensors against the descriptor and launch on `stream` (default: the current stream of the inputs' framework). Never allocates, never synchronizes (except to hand results to JAX).
        """

@overload
def xla_plan(plan: ElementwisePlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: ReductionPlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: NormPlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: GemmPlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: SoftmaxPlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: LossPlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: ScanPlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: AttentionPlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: RopePlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: KvCachePlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: PagedAttentionPlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: AttentionMergePlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: SamplingPlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: PenaltiesPlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: EmbeddingPlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: MoeGatePlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int: ...

@overload
def xla_plan(plan: MoePermutePlan, roles: Sequence[str], specs: Sequence[TensorSpec], num_inputs: int) -> int:
    """
    Registers a selected plan for the XLA FFI handler (baracuda.jax): its operands' roles (run()'s names) and specs, inputs first; returns the id the custom call's `plan` attribute carries.
    """

def elementwise_call(op: str, out: object, inputs: tuple, params: Mapping[str, float], stream: object | None = None, workspace_alloc: object | None = None) -> None:
    """
    Functional entry: select (cached on op, params and operand metadata) and run.
    """

def elementwise_cache_size() -> int:
    """Plans in the functional cache."""

def reduction_ops() -> list:
    """
    The reduction op table: name, category, params (name, default), dtypes, out_dtype rule, backward op, backward_inputs, doc.
    """

class ReductionDescriptor:
    """
    What to reduce: op name, input spec, output spec, axes (None / empty = all; an int or a list), keepdim, scalar params; backward ops also grad_out (and y). Pure data; hashable.
    """

    def __init__(self, op: str, input: TensorSpec, out: TensorSpec, axes: object | None = None, keepdim: bool = False, params: Mapping[str, float] = {}, grad_out: TensorSpec | None = None, y: TensorSpec | None = None) -> None: ...

    @overload
    def __eq__(self, arg: ReductionDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def input(self) -> TensorSpec: ...

    @property
    def axes(self) -> list[int]: ...

    @property
    def keepdim(self) -> bool: ...

    @property
    def out(self) -> TensorSpec: ...

    @property
    def params(self) -> dict[str, float]: ...

    @property
    def grad_out(self) -> TensorSpec: ...

    @property
    def y(self) -> TensorSpec: ...

class ReductionPlan:
    """A validated reduction launch: select once, run many times."""

    @staticmethod
    def select(desc: ReductionDescriptor, preference: PlanPreference | None = None) -> ReductionPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> ReductionDescriptor: ...

    @property
    def num_inputs(self) -> int:
        """1 (x) for forward ops; 2 or 3 (grad_out, x[, y]) for backward ops."""

    def workspace_bytes(self) -> int:
        """
        Bytes of scratch memory run() needs (split passes, backward statistics).
        """

    def run(self, *args: object, **operands: object) -> None:
        """
        run(out=, x=) or, for a backward, run(out=, grad_out=, x=[, y=]), with workspace= and stream=; or run(out, *inputs): check the tensors against the descriptor and launch on `stream` (default: the current stream of the inputs' framework). Never allocates, never synchronizes (except to hand results to JAX).
        """

def reduction_call(op: str, out: object, inputs: tuple, axes: object | None = None, keepdim: bool = False, params: Mapping[str, float] = {}, stream: object | None = None, workspace_alloc: object | None = None) -> None:
    """
    Functional entry: select (cached on op, axes, keepdim, params and operand metadata) and run.
    """

def reduction_cache_size() -> int:
    """Plans in the functional reduction cache."""

class NormDescriptor:
    """
    RMSNorm / LayerNorm over the last dimension of x, forward or backward. op: 'rms_norm', 'layer_norm', 'rms_norm_backward', 'layer_norm_backward'; weight / bias: their dtype (x's or float32) or None; residual: fused residual add (forward) or grad_residual (backward); save_stats: write rstd (and mean) for backward. Pure data; hashable.
    """

    def __init__(self, op: str, x: TensorSpec, weight: DType | None = None, bias: DType | None = None, residual: bool = False, eps: float = 1e-06, save_stats: bool = False) -> None: ...

    @overload
    def __eq__(self, arg: NormDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def x(self) -> TensorSpec: ...

    @property
    def weight(self) -> DType | None: ...

    @property
    def bias(self) -> DType | None: ...

    @property
    def residual(self) -> bool: ...

    @property
    def eps(self) -> float: ...

    @property
    def save_stats(self) -> bool: ...

class NormPlan:
    """A validated norm launch: select once, run many times."""

    @staticmethod
    def select(desc: NormDescriptor, preference: PlanPreference | None = None) -> NormPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> NormDescriptor: ...

    def workspace_bytes(self) -> int:
        """
        Bytes of scratch run() needs: the grad_weight / grad_bias partial sums of a backward plan, else 0.
        """

    def run(self, *, y: object | None = None, x: object | None = None, weight: object | None = None, bias: object | None = None, residual: object | None = None, residual_out: object | None = None, mean: object | None = None, rstd: object | None = None, grad_out: object | None = None, grad_x: object | None = None, grad_residual: object | None = None, grad_weight: object | None = None, grad_bias: object | None = None, workspace: object | None = None, stream: object | None = None) -> None:
        """
        Forward: run(y=, x=, [weight=, bias=, residual=, residual_out=, mean=, rstd=]); backward: run(grad_x=, grad_out=, x=, rstd=, [mean=, weight=, grad_weight=, grad_bias=, grad_residual=], workspace=). Checks the tensors against the descriptor and launches on `stream` (default: the current stream of x's framework). Never allocates, never synchronizes (except to hand results to JAX).
        """

def norm_call(op: str, eps: float, save_stats: bool, y: object | None, x: object | None, weight: object | None, bias: object | None, residual: object | None, residual_out: object | None, mean: object | None, rstd: object | None, grad_out: object | None, grad_x: object | None, grad_residual: object | None, grad_weight: object | None, grad_bias: object | None, stream: object | None = None, workspace_alloc: object | None = None) -> None:
    """
    Functional entry: select (cached on op, eps, flags and x's metadata) and run.
    """

def norm_cache_size() -> int:
    """Plans in the norm functional cache."""

class ChannelNormDescriptor:
    """
    GroupNorm / InstanceNorm / BatchNorm over x [N, C, *spatial], forward or backward. op: 'group_norm', 'instance_norm', 'batch_norm' or one of them + '_backward'; num_groups: group_norm only (0 otherwise); weight / bias / running: dtypes (x's or float32) or None; training: batch statistics (batch_norm), use_input_stats (instance_norm), saved stats vs running stats (batch_norm_backward); save_stats: write mean / rstd. Pure data; hashable.
    """

    def __init__(self, op: str, x: TensorSpec, num_groups: int = 0, weight: DType | None = None, bias: DType | None = None, running: DType | None = None, training: bool = True, momentum: float = 0.1, eps: float = 1e-05, save_stats: bool = False) -> None: ...

    @overload
    def __eq__(self, arg: ChannelNormDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def x(self) -> TensorSpec: ...

    @property
    def num_groups(self) -> int: ...

    @property
    def weight(self) -> DType | None: ...

    @property
    def bias(self) -> DType | None: ...

    @property
    def running(self) -> DType | None: ...

    @property
    def training(self) -> bool: ...

    @property
    def momentum(self) -> float: ...

    @property
    def eps(self) -> float: ...

    @property
    def save_stats(self) -> bool: ...

class ChannelNormPlan:
    """A validated group / instance / batch norm launch."""

    @staticmethod
    def select(desc: ChannelNormDescriptor, preference: PlanPreference | None = None) -> ChannelNormPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> ChannelNormDescriptor: ...

    def workspace_bytes(self) -> int:
        """
        Bytes of scratch run() needs: partial sums and the per-channel coefficient table (0 for empty x).
        """

    def run(self, *, y: object | None = None, x: object | None = None, weight: object | None = None, bias: object | None = None, running_mean: object | None = None, running_var: object | None = None, mean: object | None = None, rstd: object | None = None, grad_out: object | None = None, grad_x: object | None = None, grad_weight: object | None = None, grad_bias: object | None = None, workspace: object | None = None, stream: object | None = None) -> None:
        """
        Forward: run(y=, x=, [weight=, bias=, running_mean=, running_var=, mean=, rstd=], workspace=); backward: run(grad_x=, grad_out=, x=, mean=, [rstd=, running_var=, weight=, grad_weight=, grad_bias=], workspace=). Never allocates, never synchronizes (except to hand results to JAX).
        """

def channel_norm_call(op: str, num_groups: int, training: bool, momentum: float, eps: float, save_stats: bool, y: object | None, x: object | None, weight: object | None, bias: object | None, running_mean: object | None, running_var: object | None, mean: object | None, rstd: object | None, grad_out: object | None, grad_x: object | None, grad_weight: object | None, grad_bias: object | None, stream: object | None = None, workspace_alloc: object | None = None) -> None:
    """
    Functional entry of group / instance / batch norm: select (cached on op, flags and x's metadata) and run.
    """

def channel_norm_cache_size() -> int:
    """Plans in the channel-norm functional cache."""

class GemmDescriptor:
    """
    out = alpha * a @ b + beta * out, then the epilogue. a [..., M, K], b [..., K, N], out [..., M, N]; each row- or column-major with a leading dimension; batch dims broadcast. Pure data; hashable; the plan-cache key.
    """

    @overload
    def __init__(self) -> None: ...

    @overload
    def __init__(self, a: TensorSpec, b: TensorSpec, out: TensorSpec, alpha: float = 1.0, beta: float = 0.0, epilogue: str = 'none', bias: DType | None = None, aux: bool = False, bias_grad: DType | None = None, a_scale: str = 'none', b_scale: str = 'none', amax: bool = False) -> None:
        """
        epilogue: none | relu | gelu | gelu_tanh | silu | dgelu_tanh | bias_grad. bias / bias_grad: the dtype of the [N] bias (added before the activation) / of the bias gradient written by the bias_grad ([M]: sum of a over K) or dgelu_tanh ([N]: sum of out over M) epilogues. aux: gelu / gelu_tanh / silu also store the pre-activation; dgelu_tanh reads it. a_scale / b_scale: 'tensor' (fp8: f32 scalars) or 'vector' (int8: f32 [M] / [N]). amax: fp8 also stores max |out|.
        """

    @overload
    def __eq__(self, arg: GemmDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def a(self) -> TensorSpec: ...

    @property
    def b(self) -> TensorSpec: ...

    @property
    def out(self) -> TensorSpec: ...

    @property
    def alpha(self) -> float: ...

    @property
    def beta(self) -> float: ...

    @property
    def epilogue(self) -> str: ...

    @property
    def bias(self) -> DType | None: ...

    @property
    def aux(self) -> bool: ...

    @property
    def bias_grad(self) -> DType | None: ...

    @property
    def a_scale(self) -> str: ...

    @property
    def b_scale(self) -> str: ...

    @property
    def amax(self) -> bool: ...

class GemmPlan:
    """A validated GEMM: backend and algorithm chosen once, run many times."""

    @staticmethod
    def select(desc: GemmDescriptor, preference: PlanPreference | None = None) -> GemmPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> GemmDescriptor: ...

    def workspace_bytes(self) -> int:
        """
        Scratch bytes run() should get (less narrows cuBLASLt's choice; int8 dequant needs all of it).
        """

    def run(self, out: object, a: object, b: object, *, bias: object | None = None, aux: object | None = None, bias_grad: object | None = None, a_scale: object | None = None, b_scale: object | None = None, amax: object | None = None, workspace: object | None = None, stream: object | None = None) -> None:
        """
        Check the tensors against the descriptor and launch on `stream` (default: the current stream of a's framework). Never allocates, never synchronizes (except to hand results to JAX).
        """

def gemm_call(out: object, a: object, b: object, alpha: float, beta: float, epilogue: str, bias: object | None, aux: object | None, bias_grad: object | None, a_scale: object | None, b_scale: object | None, amax: object | None, allow_tf32: bool, stream: object | None = None, workspace_alloc: object | None = None) -> None:
    """Functional entry: select (cached on the arguments' metadata) and run."""

def gemm_cache_size() -> int:
    """Plans in the functional GEMM cache."""

class GroupedGemmDescriptor:
    """
    Mixture-of-experts GEMM: x [T, K] sorted by expert, w [E, N, K], out [T, N]. group_sizes (host, rows per expert) selects one cuBLASLt GEMM per expert; without it the rows come from a device offsets array [E + 1] at run time and one kernel of ours covers every expert.
    """

    def __init__(self, x: TensorSpec, w: TensorSpec, out: TensorSpec, group_sizes: Sequence[int] = [], offsets_dtype: DType = DType.int32, bias: bool = False, max_rows_per_group: int = -1) -> None: ...

    @overload
    def __eq__(self, arg: GroupedGemmDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def x(self) -> TensorSpec: ...

    @property
    def w(self) -> TensorSpec: ...

    @property
    def out(self) -> TensorSpec: ...

    @property
    def group_sizes(self) -> list[int]: ...

    @property
    def offsets_dtype(self) -> DType: ...

    @property
    def bias(self) -> bool: ...

    @property
    def max_rows_per_group(self) -> int: ...

class GroupedGemmPlan:
    """A validated grouped (mixture-of-experts) GEMM."""

    @staticmethod
    def select(desc: GroupedGemmDescriptor, preference: PlanPreference | None = None) -> GroupedGemmPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> GroupedGemmDescriptor: ...

    def workspace_bytes(self) -> int: ...

    def run(self, out: object, x: object, w: object, *, offsets: object | None = None, bias: object | None = None, workspace: object | None = None, stream: object | None = None) -> None:
        """
        Launch on `stream` (default: x's framework's current stream). offsets: the device array [E + 1] when the plan was selected without group_sizes.
        """

def gemm_backend_info() -> dict:
    """
    Whether cuBLASLt (and cuBLAS, for tf32) loaded, from where, cuBLASLt's version (loads them on first call).
    """

class SoftmaxDescriptor:
    """
    Softmax / log-softmax / gumbel_softmax / sparsemax (forward: inputs [x]; backward: inputs [grad_out, y]; gumbel_noise: no input) along `axis`. Pure data; hashable; the plan-cache key.
    """

    def __init__(self, op: str, inputs: Sequence[TensorSpec], axis: int, out: TensorSpec, *, tau: float = 1.0, hard: bool = False, soft_out: TensorSpec | None = None) -> None:
        """
        tau / hard / soft_out (a second output, y_soft) are parameters of gumbel_softmax (tau also of gumbel_softmax_backward).
        """

    @overload
    def __eq__(self, arg: SoftmaxDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def inputs(self) -> list[TensorSpec]: ...

    @property
    def axis(self) -> int: ...

    @property
    def out(self) -> TensorSpec: ...

    @property
    def tau(self) -> float: ...

    @property
    def hard(self) -> bool: ...

    @property
    def soft_out(self) -> TensorSpec | None: ...

class SoftmaxPlan:
    """A validated softmax launch: select once, run many times."""

    @staticmethod
    def select(desc: SoftmaxDescriptor, preference: PlanPreference | None = None) -> SoftmaxPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> SoftmaxDescriptor: ...

    def workspace_bytes(self) -> int:
        """Always 0: softmax needs no workspace."""

    def run(self, *args: object, **operands: object) -> None:
        """
        run(out=, x=) or run(grad_x=, grad_out=, y=) (or by position: run(out, x), run(grad_x, grad_out, y)), with stream= (and seed=, offset=, soft_out= below): check the tensors against the descriptor and launch on `stream` (default: the current stream of the inputs' framework). Never allocates. gumbel_softmax and gumbel_noise (run(g) with no input) need `seed` (and `offset`, default 0); gumbel_softmax with a soft_out spec needs `soft_out`.
        """

def softmax_call(op: str, out: object, inputs: tuple, axis: int, stream: object | None = None) -> None:
    """
    Functional entry: select (cached on op, axis and operand metadata) and run.
    """

def softmax_rowop_call(op: str, out: object, inputs: tuple, axis: int, tau: float, hard: bool, seed: int | None, offset: int, soft_out: object | None, stream: object | None = None, like: object | None = None) -> None:
    """
    Functional entry of gumbel_softmax(_backward), gumbel_noise and sparsemax(_backward): select (cached on op, axis, tau, hard and operand metadata; not on seed / offset) and run.
    """

def softmax_cache_size() -> int:
    """Plans in the softmax functional cache."""

class CrossEntropyLossDescriptor:
    """
    cross_entropy over logits [N, V] (with_grad: the gradient in the same call) or nll_loss over log-probabilities [N, C], and their '<op>_backward'; class-index targets [N]. Pure data; hashable; the plan-cache key.
    """

    def __init__(self, op: str, input: TensorSpec, target: TensorSpec, weight: TensorSpec | None = None, reduction: str = 'mean', ignore_index: int = -100, label_smoothing: float = 0.0, with_grad: bool = False, has_grad_loss: bool = False, grad_input: TensorSpec | None = None, grad_loss: TensorSpec | None = None) -> None: ...

    @overload
    def __eq__(self, arg: CrossEntropyLossDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def input(self) -> TensorSpec: ...

    @property
    def target(self) -> TensorSpec: ...

    @property
    def weight(self) -> TensorSpec | None: ...

    @property
    def reduction(self) -> str: ...

    @property
    def grad_loss(self) -> TensorSpec | None: ...

    @property
    def ignore_index(self) -> int: ...

    @property
    def label_smoothing(self) -> float: ...

    @property
    def with_grad(self) -> bool: ...

class PointwiseLossDescriptor:
    """
    A pointwise loss (mse_loss, l1_loss, huber_loss, smooth_l1_loss, binary_cross_entropy, binary_cross_entropy_with_logits, kl_div, poisson_nll_loss, gaussian_nll_loss, margin_ranking_loss, hinge_embedding_loss, soft_margin_loss) or its '<op>_backward'. extra: [pos_weight] / [var] / [input2]; param: delta / beta / margin / eps; grad_loss: the upstream gradient's spec (backward); wrt: the operands to differentiate (default ['input']) and grads the spec of each gradient. Pure data; hashable.
    """

    def __init__(self, op: str, input: TensorSpec, target: TensorSpec, weight: TensorSpec | None = None, extra: Sequence[TensorSpec] = [], reduction: str = 'mean', param: float = 0.0, log_target: bool = False, log_input: bool = True, full: bool = False, grad_loss: TensorSpec | None = None, grad_input: TensorSpec | None = None, wrt: Sequence[str] = [], grads: Sequence[TensorSpec] = []) -> None: ...

    @overload
    def __eq__(self, arg: PointwiseLossDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def input(self) -> TensorSpec: ...

    @property
    def target(self) -> TensorSpec: ...

    @property
    def weight(self) -> TensorSpec | None: ...

    @property
    def reduction(self) -> str: ...

    @property
    def grad_loss(self) -> TensorSpec | None: ...

    @property
    def extra(self) -> list[TensorSpec]: ...

    @property
    def param(self) -> float: ...

    @property
    def log_target(self) -> bool: ...

    @property
    def log_input(self) -> bool: ...

    @property
    def full(self) -> bool: ...

    @property
    def wrt(self) -> list[str]: ...

class RowLossDescriptor:
    """
    A row loss (cosine_embedding_loss, multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss, triplet_margin_loss) or its '<op>_backward'. extra: [input2] / [negative]; p, eps, swap: multi margin / triplet; grad_loss, wrt, grads as PointwiseLossDescriptor's. Pure data; hashable.
    """

    def __init__(self, op: str, input: TensorSpec, target: TensorSpec, weight: TensorSpec | None = None, extra: Sequence[TensorSpec] = [], reduction: str = 'mean', margin: float = 0.0, p: float = 2.0, eps: float = 1e-06, swap: bool = False, grad_loss: TensorSpec | None = None, grad_input: TensorSpec | None = None, wrt: Sequence[str] = [], grads: Sequence[TensorSpec] = []) -> None: ...

    @overload
    def __eq__(self, arg: RowLossDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def input(self) -> TensorSpec: ...

    @property
    def target(self) -> TensorSpec: ...

    @property
    def weight(self) -> TensorSpec | None: ...

    @property
    def reduction(self) -> str: ...

    @property
    def grad_loss(self) -> TensorSpec | None: ...

    @property
    def extra(self) -> list[TensorSpec]: ...

    @property
    def margin(self) -> float: ...

    @property
    def p(self) -> float: ...

    @property
    def eps(self) -> float: ...

    @property
    def swap(self) -> bool: ...

    @property
    def wrt(self) -> list[str]: ...

class LossPlan:
    """A validated loss launch: select once, run many times."""

    @staticmethod
    def select(desc: CrossEntropyLossDescriptor | PointwiseLossDescriptor | RowLossDescriptor, preference: PlanPreference | None = None) -> LossPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> CrossEntropyLossDescriptor | PointwiseLossDescriptor | RowLossDescriptor: ...

    def workspace_bytes(self) -> int:
        """Bytes of 256-byte aligned scratch run() needs."""

    def run(self, input: object, target: object, lse: object | None = None, workspace: object | None = None, out: object | None = None, weight: object | None = None, grad_input: object | None = None, grad_loss: object | None = None, stream: object | None = None, extra: object | None = None, grads: object | None = None) -> None:
        """
        Check the tensors against the descriptor and launch. cross_entropy: forward writes out (the loss) and lse (f32 [N], f64 for f64 logits), and grad_input when with_grad; backward reads lse and writes grad_input. Other losses: lse is None; extra is the list of extra operands; forward writes out, backward writes grad_input, or with the descriptor's wrt one tensor per entry of grads (in wrt order).
        """

def cross_entropy_call(input: object, target: object, out: object, lse: object, reduction: str, ignore_index: int, label_smoothing: float, weight: object | None, grad_input: object | None, stream: object | None = None, workspace_alloc: object | None = None) -> None:
    """
    Functional entry of cross_entropy (with_grad when grad_input is given): select (cached on the parameters and operand metadata) and run.
    """

def loss_call(op: str, input: object, target: object, weight: object | None, extra: object | None, out: object | None, grad_loss: object | None, grad_input: object | None, grads: object | None, wrt: Sequence[str], reduction: str, ignore_index: int, param: float, log_target: bool, log_input: bool, full: bool, p: float, eps: float, swap: bool, stream: object | None = None, workspace_alloc: object | None = None) -> None:
    """
    Functional entry of every loss but cross_entropy (nll, pointwise, row losses; forward writes out, backward grad_input or grads in wrt order): select (cached with the other losses' plans on the op, the parameters and the operand metadata) and run.
    """

def loss_cache_size() -> int:
    """Plans in the functional loss cache."""

class CtcLossDescriptor:
    """
    CTC loss, torch.nn.functional.ctc_loss's semantics: 'ctc_loss' (forward: the loss and log_alpha [N, T, 2 S + 1]) or 'ctc_loss_backward' (grad_log_probs from log_alpha). log_probs [T, N, C]; targets [N, S] padded or [sum(target_lengths)] concatenated; input_lengths, target_lengths [N] device int tensors. max_target_length: required for concatenated targets (a bound on every target length), optional for padded ones (default S). Pure data; hashable; the plan-cache key.
    """

    def __init__(self, op: str, log_probs: TensorSpec, targets: TensorSpec, input_lengths: TensorSpec, target_lengths: TensorSpec, blank: int = 0, reduction: str = 'mean', zero_infinity: bool = False, max_target_length: int = -1, grad_loss: TensorSpec | None = None, grad_log_probs: TensorSpec | None = None) -> None: ...

    @overload
    def __eq__(self, arg: CtcLossDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def log_probs(self) -> TensorSpec: ...

    @property
    def targets(self) -> TensorSpec: ...

    @property
    def input_lengths(self) -> TensorSpec: ...

    @property
    def target_lengths(self) -> TensorSpec: ...

    @property
    def blank(self) -> int: ...

    @property
    def reduction(self) -> str: ...

    @property
    def zero_infinity(self) -> bool: ...

    @property
    def max_target_length(self) -> int: ...

    @property
    def grad_loss(self) -> TensorSpec: ...

    @property
    def grad_log_probs(self) -> TensorSpec: ...

class CtcLossPlan:
    """A validated CTC loss launch: select once, run many times."""

    @staticmethod
    def select(desc: CtcLossDescriptor, preference: PlanPreference | None = None) -> CtcLossPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> CtcLossDescriptor: ...

    def workspace_bytes(self) -> int:
        """Bytes of 256-byte aligned scratch run() needs."""

    def log_alpha_shape(self) -> list[int]:
        """[N, T, 2 S + 1]: the saved forward variables."""

    def log_alpha_dtype(self) -> DType:
        """float32 (float64 for float64 log_probs)."""

    def run(self, log_probs: object, targets: object, input_lengths: object, target_lengths: object, log_alpha: object, workspace: object | None = None, out: object | None = None, grad_loss: object | None = None, grad_log_probs: object | None = None, stream: object | None = None) -> None:
        """
        Check the tensors against the descriptor and launch. Forward writes out (the loss: [] for mean / sum, [N] for none) and log_alpha (log_alpha_shape(), log_alpha_dtype(), contiguous); backward reads log_alpha and grad_loss and writes grad_log_probs.
        """

def scan_ops() -> list:
    """
    The scan op table: name, is_backward, inputs, outputs (names, in order), dtypes, out_dtype rule, backward op, doc.
    """

class ScanDescriptor:
    """
    What to scan: op name, input specs (in the op table's order), axis (negative allowed), output specs (cummax / cummin: values, indices). Pure data; hashable.
    """

    def __init__(self, op: str, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], axis: int = -1) -> None: ...

    @overload
    def __eq__(self, arg: ScanDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def inputs(self) -> list[TensorSpec]: ...

    @property
    def axis(self) -> int: ...

    @property
    def outputs(self) -> list[TensorSpec]: ...

class ScanPlan:
    """A validated scan launch: select once, run many times."""

    @staticmethod
    def select(desc: ScanDescriptor, preference: PlanPreference | None = None) -> ScanPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> ScanDescriptor: ...

    @property
    def num_inputs(self) -> int: ...

    @property
    def num_outputs(self) -> int: ...

    def workspace_bytes(self) -> int:
        """Bytes of scratch memory run() needs (split scans)."""

    def run(self, *args: object, **operands: object) -> None:
        """
        run(<outputs and inputs by name, as scan_ops() names them>, workspace=, stream=) or run(outputs, inputs) (one tensor or a tuple each, in the op table's order): check the tensors against the descriptor and launch on `stream` (default: the current stream of the first input's framework). Never allocates, never synchronizes (except to hand results to JAX).
        """

def scan_call(op: str, outputs: tuple, inputs: tuple, axis: int = -1, stream: object | None = None, workspace_alloc: object | None = None) -> None:
    """
    Functional entry: select (cached on op, axis and operand metadata) and run.
    """

def scan_cache_size() -> int:
    """Plans in the functional scan cache."""

class AttentionDescriptor:
    """
    Scaled dot-product attention, forward ('attention') or backward ('attention_backward'), over q / k / v [B, S, H, D] (or packed [total, H, D] with varlen=True) and the forward's out. Pure data; hashable.
    """

    def __init__(self, op: str, q: TensorSpec, k: TensorSpec, v: TensorSpec, out: TensorSpec, *, scale: float | None = None, causal: bool = False, causal_alignment: str = 'bottom_right', window_left: int = -1, window_right: int = -1, softcap: float = 0.0, alibi: int = 0, sinks: bool = False, varlen: bool = False, batch: int = 0, max_seqlen_q: int = 0, max_seqlen_k: int = 0, seqused_k: bool = False, lse: bool = False, deterministic: bool = False, kernel: str = 'auto', tile: str = 'auto') -> None: ...

    @overload
    def __eq__(self, arg: AttentionDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def q(self) -> TensorSpec: ...

    @property
    def k(self) -> TensorSpec: ...

    @property
    def v(self) -> TensorSpec: ...

    @property
    def out(self) -> TensorSpec: ...

    @property
    def scale(self) -> float | None: ...

    @property
    def causal(self) -> bool: ...

    @property
    def causal_alignment(self) -> str: ...

    @property
    def window_left(self) -> int: ...

    @property
    def window_right(self) -> int: ...

    @property
    def softcap(self) -> float: ...

    @property
    def alibi(self) -> int: ...

    @property
    def sinks(self) -> bool: ...

    @property
    def varlen(self) -> bool: ...

    @property
    def batch(self) -> int: ...

    @property
    def max_seqlen_q(self) -> int: ...

    @property
    def max_seqlen_k(self) -> int: ...

    @property
    def seqused_k(self) -> bool: ...

    @property
    def lse(self) -> bool: ...

    @property
    def deterministic(self) -> bool: ...

    @property
    def kernel(self) -> str: ...

    @property
    def tile(self) -> str: ...

class AttentionPlan:
    """A validated attention launch: select once, run many times."""

    @staticmethod
    def select(desc: AttentionDescriptor, preference: PlanPreference | None = None) -> AttentionPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> AttentionDescriptor: ...

    def workspace_bytes(self) -> int:
        """
        Bytes of scratch run() needs: the backward's per-row sum(grad_out * out); 0 for the forward.
        """

    def run(self, **kwargs) -> None:
        """
        run(q=, k=, v=, out=, [lse=, cu_seqlens_q=, cu_seqlens_k=, seqused_k=, alibi_slopes=, sinks=], [grad_out=, grad_q=, grad_k=, grad_v=, grad_sinks=, workspace=], stream=): check the tensors against the descriptor and launch on `stream` (default: the current stream of q's framework). Never allocates.
        """

def attention_call(op: str, tensors: dict, scale: float | None, causal: bool, causal_alignment: str, window_left: int, window_right: int, softcap: float, batch: int, max_seqlen_q: int, max_seqlen_k: int, deterministic: bool, kernel: str, stream: object | None = None, workspace_alloc: object | None = None) -> str:
    """
    Functional entry: tensors by name (a dict; None = absent), select (cached on the parameters and the operands' metadata) and run. Returns the SKU name of the kernel that ran.
    """

def attention_cache_size() -> int:
    """Plans in the attention functional cache."""

class RopeFrequencies:
    """
    theta and a scaling rule ('none', 'linear', 'llama3', 'yarn') with its parameters.
    """

    def __init__(self, *, theta: float = 10000.0, scaling: str = 'none', factor: float = 1.0, low_freq_factor: float = 1.0, high_freq_factor: float = 4.0, original_max_positions: int = 0, beta_fast: float = 32.0, beta_slow: float = 1.0, attention_factor: float = 0.0) -> None: ...

    @property
    def theta(self) -> float: ...

    @property
    def scaling(self) -> str: ...

    @property
    def factor(self) -> float: ...

    @property
    def low_freq_factor(self) -> float: ...

    @property
    def high_freq_factor(self) -> float: ...

    @property
    def original_max_positions(self) -> int: ...

    @property
    def beta_fast(self) -> float: ...

    @property
    def beta_slow(self) -> float: ...

    @property
    def attention_factor(self) -> float: ...

    def __eq__(self, arg: RopeFrequencies, /) -> bool: ...

class RopeDescriptor:
    """
    Rotary position embedding of q (and k) [tokens or batch, seq, heads, head_dim]: the pair style, rotary_dim, the angles' source (a cos / sin cache, or freqs), positions. Pure data; hashable.
    """

    def __init__(self, q: TensorSpec, k: TensorSpec | None = None, *, style: str = 'neox', rotary_dim: int = 0, inverse: bool = False, cache: bool = False, cache_dtype: DType = DType.float32, cache_positions: int = 0, freqs: RopeFrequencies = ..., positions: bool = False, positions_dtype: DType = DType.int64, k_cache: TensorSpec | None = None, v: TensorSpec | None = None, v_cache: TensorSpec | None = None, slot_dtype: DType = DType.int64, kv_scales: bool = False, scale_per_head: bool = False) -> None: ...

    @overload
    def __eq__(self, arg: RopeDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def q(self) -> TensorSpec: ...

    @property
    def k(self) -> TensorSpec | None: ...

    @property
    def style(self) -> str: ...

    @property
    def rotary_dim(self) -> int: ...

    @property
    def inverse(self) -> bool: ...

    @property
    def cache(self) -> bool: ...

    @property
    def cache_dtype(self) -> DType: ...

    @property
    def cache_positions(self) -> int: ...

    @property
    def freqs(self) -> RopeFrequencies: ...

    @property
    def positions(self) -> bool: ...

    @property
    def positions_dtype(self) -> DType: ...

    @property
    def kv_cache(self) -> bool: ...

    @property
    def kv_scales(self) -> bool: ...

    @property
    def scale_per_head(self) -> bool: ...

class RopePlan:
    """A validated RoPE launch: select once, run many times."""

    @staticmethod
    def select(desc: RopeDescriptor, preference: PlanPreference | None = None) -> RopePlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> RopeDescriptor: ...

    def workspace_bytes(self) -> int:
        """Always 0."""

    def run(self, **kwargs) -> None:
        """
        run(q=, q_out=, [k=, k_out=, cos=, sin=, positions=, v=, k_cache=, v_cache=, slot_mapping=, k_scale=, v_scale=], stream=): check the tensors against the descriptor and launch on `stream` (default: q's framework's current stream). q_out may be q itself (in place).
        """

def rope_inv_freq(rotary_dim: int, freqs: RopeFrequencies) -> tuple:
    """
    (inv_freq, attention_factor): the rotary_dim / 2 scaled inverse frequencies the theta path uses, and the factor on cos / sin.
    """

def rope_call(tensors: dict, style: str, rotary_dim: int, inverse: bool, freqs: RopeFrequencies, stream: object | None = None) -> str:
    """
    Functional entry: tensors by name (q, q_out, k, k_out, cos, sin, positions, and for the fused cache append v, k_cache, v_cache, slot_mapping, and k_scale / v_scale for fp8 caches; None = absent), select (cached on the parameters and the operands' metadata) and run. Returns the SKU name.
    """

def rope_cache_size() -> int:
    """Plans in the RoPE functional cache."""

class KvCacheDescriptor:
    """
    Append keys [tokens, kv_heads, D] (and values) to a paged cache [pages, page_size, kv_heads, D] (any strides: a heads-first cache as its permuted view) at int32 / int64 slots. Pure data; hashable.
    """

    def __init__(self, key: TensorSpec, key_cache: TensorSpec, value: TensorSpec | None = None, value_cache: TensorSpec | None = None, *, slot_dtype: DType = DType.int64, scales: bool = False, scale_per_head: bool = False) -> None: ...

    @overload
    def __eq__(self, arg: KvCacheDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def key(self) -> TensorSpec: ...

    @property
    def key_cache(self) -> TensorSpec: ...

    @property
    def has_value(self) -> bool: ...

    @property
    def slot_dtype(self) -> DType: ...

class KvCachePlan:
    """A validated KV-cache append: select once, run every decode step."""

    @staticmethod
    def select(desc: KvCacheDescriptor, preference: PlanPreference | None = None) -> KvCachePlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> KvCacheDescriptor: ...

    def workspace_bytes(self) -> int:
        """Always 0."""

    def run(self, **kwargs) -> None:
        """
        run(key=, key_cache=, slot_mapping=, [value=, value_cache=], stream=): check the tensors and write the caches in place on `stream` (default: key's framework's current stream). No host work beyond the checks, no allocation: a decode step that calls it can be captured in a CUDA graph.
        """

def kv_cache_append_call(tensors: dict, stream: object | None = None) -> str:
    """
    Functional entry: tensors by name (key, value, key_cache, value_cache, slot_mapping, k_scale, v_scale; None = absent), select (cached on the operands' metadata) and run. Returns the SKU name.
    """

class PagedAttentionDescriptor:
    """
    Decode attention of q [B, Sq, Hq, D] (or [B, Hq, D]) over a paged cache [pages, page_size, Hkv, D] through a block table [B, max_pages] and lengths [B] (int32, read on the device). Pure data; hashable.
    """

    def __init__(self, q: TensorSpec, k_cache: TensorSpec, v_cache: TensorSpec, out: TensorSpec, max_pages: int, *, scale: float | None = None, causal: bool = True, window_left: int = -1, window_right: int = -1, softcap: float = 0.0, alibi: bool = False, sinks: bool = False, lse: bool = False, max_seqlen_k: int = 0, num_splits: int = 0, kernel: str = 'auto', kv_scales: bool = False, scale_per_head: bool = False) -> None: ...

    @overload
    def __eq__(self, arg: PagedAttentionDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def q(self) -> TensorSpec: ...

    @property
    def k_cache(self) -> TensorSpec: ...

    @property
    def v_cache(self) -> TensorSpec: ...

    @property
    def out(self) -> TensorSpec: ...

    @property
    def max_pages(self) -> int: ...

    @property
    def scale(self) -> float | None: ...

    @property
    def causal(self) -> bool: ...

    @property
    def window_left(self) -> int: ...

    @property
    def window_right(self) -> int: ...

    @property
    def softcap(self) -> float: ...

    @property
    def alibi(self) -> bool: ...

    @property
    def sinks(self) -> bool: ...

    @property
    def lse(self) -> bool: ...

    @property
    def max_seqlen_k(self) -> int: ...

    @property
    def num_splits(self) -> int: ...

    @property
    def kernel(self) -> str: ...

class PagedAttentionPlan:
    """
    A validated paged decode attention: select once per batch shape, run every step.
    """

    @staticmethod
    def select(desc: PagedAttentionDescriptor, preference: PlanPreference | None = None) -> PagedAttentionPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> PagedAttentionDescriptor: ...

    def workspace_bytes(self) -> int:
        """
        Bytes of scratch run() needs: the splits' partial outputs; 0 with one split.
        """

    @property
    def num_splits(self) -> int:
        """How many splits each request's keys take."""

    def run(self, **kwargs) -> None:
        """
        run(q=, k_cache=, v_cache=, block_table=, seq_lens=, out=, [lse=, alibi_slopes=, sinks=], workspace=, stream=): check the tensors and launch on `stream`. No host work beyond the checks, no allocation: capturable in a CUDA graph and replayed as seq_lens grow.
        """

class AttentionMergeDescriptor:
    """
    The merge of two attention states: out_a, out_b [..., H, D] and their lse [..., H] (f32) -> out (and lse). Pure data; hashable.
    """

    def __init__(self, out_a: TensorSpec, lse_a: TensorSpec, out_b: TensorSpec, lse_b: TensorSpec, out: TensorSpec, lse: TensorSpec | None = None) -> None: ...

    @overload
    def __eq__(self, arg: AttentionMergeDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def out_a(self) -> TensorSpec: ...

    @property
    def lse_a(self) -> TensorSpec: ...

    @property
    def out_b(self) -> TensorSpec: ...

    @property
    def lse_b(self) -> TensorSpec: ...

    @property
    def out(self) -> TensorSpec: ...

class AttentionMergePlan:
    """
    A validated merge of two attention states (cascade attention, split results).
    """

    @staticmethod
    def select(desc: AttentionMergeDescriptor, preference: PlanPreference | None = None) -> AttentionMergePlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> AttentionMergeDescriptor: ...

    def workspace_bytes(self) -> int:
        """0: the merge needs no scratch."""

    def run(self, **kwargs) -> None:
        """
        run(out_a=, lse_a=, out_b=, lse_b=, out=, [lse=], stream=): check the tensors and launch on `stream`; no allocation, no host synchronization.
        """

def merge_attention_states_call(tensors: dict, stream: object | None = None) -> None:
    """
    Functional entry: tensors by name (out_a, lse_a, out_b, lse_b, out, lse; None = absent), select (cached on the operands' metadata) and run.
    """

def paged_attention_call(tensors: dict, scale: float | None, causal: bool, window_left: int, window_right: int, softcap: float, max_seqlen_k: int, num_splits: int, kernel: str = 'auto', stream: object | None = None, workspace_alloc: object | None = None) -> str:
    """
    Functional entry: tensors by name (a dict; None = absent), select (cached on the parameters and the operands' metadata) and run. Returns the SKU name of the kernel that ran.
    """

class SamplingDescriptor:
    """
    One token per row of logits [B, V]: temperature, top_k, top_p, min_p as scalars (here) or per-row tensors (the *_per_row flags), Philox seed / offset at run. Pure data; hashable.
    """

    def __init__(self, logits: TensorSpec, *, token_dtype: DType = DType.int64, logprobs: bool = False, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0, temperature_per_row: bool = False, top_k_per_row: bool = False, top_k_dtype: DType = DType.int32, top_p_per_row: bool = False, min_p_per_row: bool = False, seeds_per_row: bool = False, seeds_dtype: DType = DType.int64) -> None: ...

    @overload
    def __eq__(self, arg: SamplingDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def logits(self) -> TensorSpec: ...

    @property
    def token_dtype(self) -> DType: ...

    @property
    def logprobs(self) -> bool: ...

    @property
    def temperature(self) -> float: ...

    @property
    def top_k(self) -> int: ...

    @property
    def top_p(self) -> float: ...

    @property
    def min_p(self) -> float: ...

class SamplingPlan:
    """A validated sampler: select once, run every decode step."""

    @staticmethod
    def select(desc: SamplingDescriptor, preference: PlanPreference | None = None) -> SamplingPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> SamplingDescriptor: ...

    def workspace_bytes(self) -> int:
        """Always 0."""

    def run(self, seed: int = 0, offset: int = 0, **kwargs) -> None:
        """
        run(seed=0, offset=0, logits=, tokens=, [logprobs=, temperature=, top_k=, top_p=, min_p=, seeds=], stream=): check the tensors and write one token per row on `stream`. No host work beyond the checks, no allocation: capturable in a CUDA graph (per-row tensors carry what changes between replays).
        """

def sample_call(tensors: dict, temperature: float, top_k: int, top_p: float, min_p: float, seed: int, offset: int, stream: object | None = None) -> str:
    """
    Functional entry: tensors by name (logits, tokens, logprobs, temperature, top_k, top_p, min_p, seeds; None = absent: the scalar is used), select (cached on the operands' metadata and the scalars) and run. Returns the SKU name.
    """

class PenaltiesDescriptor:
    """
    Repetition / presence / frequency penalties on logits [B, V] (in place) over prompt and output token lists [B, L] (int32 / int64; entries outside [0, V) are padding); each penalty a scalar here or a per-row tensor (the *_per_row flags). Pure data; hashable.
    """

    def __init__(self, logits: TensorSpec, prompt_tokens: TensorSpec | None = None, output_tokens: TensorSpec | None = None, *, repetition: float = 1.0, presence: float = 0.0, frequency: float = 0.0, repetition_per_row: bool = False, presence_per_row: bool = False, frequency_per_row: bool = False) -> None: ...

    @overload
    def __eq__(self, arg: PenaltiesDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def logits(self) -> TensorSpec: ...

    @property
    def repetition(self) -> float: ...

    @property
    def presence(self) -> float: ...

    @property
    def frequency(self) -> float: ...

class PenaltiesPlan:
    """Validated sampling penalties: select once, run every decode step."""

    @staticmethod
    def select(desc: PenaltiesDescriptor, preference: PlanPreference | None = None) -> PenaltiesPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> PenaltiesDescriptor: ...

    def workspace_bytes(self) -> int:
        """B x V x 4 (a count per row and token)."""

    def run(self, **kwargs) -> None:
        """
        run(logits=, [prompt_tokens=, output_tokens=, repetition_penalty=, presence_penalty=, frequency_penalty=], workspace=, stream=): check the tensors and penalise logits in place on `stream`; the workspace (workspace_bytes()) is the caller's tensor.
        """

def apply_penalties_call(tensors: dict, repetition: float, presence: float, frequency: float, stream: object | None = None, workspace_alloc: object | None = None) -> str:
    """
    Functional entry of the penalties: tensors by name (logits, prompt_tokens, output_tokens, repetition_penalty, presence_penalty, frequency_penalty; None = absent: the scalar is used), select (cached) and run. Returns the SKU name.
    """

class EmbeddingDescriptor:
    """
    Embedding forward (weight [V, D], indices -> out indices.shape + [D]) or backward (grad_out, indices -> grad_weight [V, D]; `weight` is then grad_weight's spec and `rows` grad_out's). Pure data; hashable.
    """

    def __init__(self, weight: TensorSpec, indices: TensorSpec, rows: TensorSpec, *, backward: bool = False, padding_idx: int = -1, scale_grad_by_freq: bool = False, deterministic: bool = True) -> None: ...

    @overload
    def __eq__(self, arg: EmbeddingDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def weight(self) -> TensorSpec: ...

    @property
    def indices(self) -> TensorSpec: ...

    @property
    def rows(self) -> TensorSpec: ...

    @property
    def backward(self) -> bool: ...

    @property
    def padding_idx(self) -> int: ...

    @property
    def scale_grad_by_freq(self) -> bool: ...

    @property
    def deterministic(self) -> bool: ...

class EmbeddingPlan:
    """A validated embedding gather or table gradient."""

    @staticmethod
    def select(desc: EmbeddingDescriptor, preference: PlanPreference | None = None) -> EmbeddingPlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> EmbeddingDescriptor: ...

    def workspace_bytes(self) -> int:
        """The deterministic backward's sort buffers and chunk sums; 0 otherwise."""

    def run(self, **kwargs) -> None:
        """
        run(indices=, weight=, out=, stream=) (forward) or run(indices=, grad_out=, grad_weight=, workspace=, stream=) (backward): check the tensors and launch on `stream`. No allocation: the backward's workspace (workspace_bytes()) is the caller's tensor.
        """

def embedding_call(tensors: dict, padding_idx: int, scale_grad_by_freq: bool, deterministic: bool, stream: object | None = None, workspace_alloc: object | None = None) -> str:
    """
    Functional entry: tensors by name (forward: weight, indices, out; backward: grad_out, indices, grad_weight; None = absent), select (cached on the operands' metadata and the flags) and run. Returns the SKU name.
    """

class MoeGateDescriptor:
    """
    MoE gating of logits [T, E]: top_k experts by softmax / sigmoid scores (+ correction_bias for the selection), optionally grouped (n_group, topk_group, group_score), renormalised and scaled; backward=True for the logits' gradient. Pure data; hashable.
    """

    def __init__(self, logits: TensorSpec, top_k: int, *, backward: bool = False, scoring: str = 'softmax', renormalize: bool = True, n_group: int = 1, topk_group: int = 1, group_score: str = 'max', correction_bias: bool = False, routed_scaling_factor: float = 1.0, ids_dtype: DType = DType.int32) -> None: ...

    @overload
    def __eq__(self, arg: MoeGateDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def logits(self) -> TensorSpec: ...

    @property
    def top_k(self) -> int: ...

    @property
    def backward(self) -> bool: ...

    @property
    def scoring(self) -> str: ...

    @property
    def renormalize(self) -> bool: ...

class MoeGatePlan:
    """A validated MoE gate (or its backward)."""

    @staticmethod
    def select(desc: MoeGateDescriptor, preference: PlanPreference | None = None) -> MoeGatePlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> MoeGateDescriptor: ...

    def workspace_bytes(self) -> int:
        """Always 0."""

    def run(self, **kwargs) -> None:
        """
        run(logits=, weights=, ids=, [correction_bias=], stream=) or, backward, run(logits=, ids=, grad_weights=, grad_logits=, stream=): check the tensors and launch on `stream` (no host work, no allocation).
        """

def moe_gate_call(tensors: dict, top_k: int, backward: bool, scoring: str, renormalize: bool, n_group: int, topk_group: int, group_score: str, routed_scaling_factor: float, stream: object | None = None) -> str:
    """
    Functional entry of the gate: tensors by name (logits, correction_bias, weights, ids; backward: logits, ids, grad_weights, grad_logits), select (cached) and run. Returns the SKU name.
    """

class MoePermuteDescriptor:
    """
    MoE token permutation: op 'permute' (x [T, H], ids [T, k] -> x_sorted, offsets [E + 1], pos), 'unpermute' (y_sorted [N, H], pos, weights? -> out [T, H]) or 'unpermute_backward' (grad_out [T, H], pos, weights? -> grad_y_sorted [N, H], grad_weights). `rows` is x / y_sorted / grad_out, `routing` ids / pos. Pure data; hashable.
    """

    def __init__(self, op: str, rows: TensorSpec, routing: TensorSpec, *, num_experts: int = 0, weights: bool = False, sorted_rows: int = -1, offsets_dtype: DType = DType.int32) -> None: ...

    @overload
    def __eq__(self, arg: MoePermuteDescriptor, /) -> bool: ...

    @overload
    def __eq__(self, arg: object, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def rows(self) -> TensorSpec: ...

    @property
    def routing(self) -> TensorSpec: ...

    @property
    def num_experts(self) -> int: ...

    @property
    def weights(self) -> bool: ...

class MoePermutePlan:
    """A validated MoE permute, unpermute or unpermute backward."""

    @staticmethod
    def select(desc: MoePermuteDescriptor, preference: PlanPreference | None = None) -> MoePermutePlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """
        The kernel (backend, algorithm) this plan runs, and its precision guarantee.
        """

    @property
    def descriptor(self) -> MoePermuteDescriptor: ...

    def workspace_bytes(self) -> int:
        """The permute's sort buffers; 0 otherwise."""

    def run(self, **kwargs) -> None:
        """
        run(**tensors, workspace=, stream=): the operands by their names (x, ids, x_sorted, offsets, pos; y_sorted, weights, out; grad_out, grad_y_sorted, grad_weights); the permute's workspace is the caller's tensor of workspace_bytes().
        """

def moe_permute_call(op: str, tensors: dict, num_experts: int = 0, sorted_rows: int = -1, stream: object | None = None, workspace_alloc: object | None = None) -> str:
    """
    Functional entry of permute / unpermute / unpermute_backward: tensors by name, select (cached) and run. Returns the SKU name.
    """

def xla_handler() -> object:
    """
    The XLA FFI handler that runs registered plans (a capsule for jax.ffi.register_ffi_target), or None when this build found no XLA FFI headers (jaxlib's, at build time).
    """

def xla_plan_count() -> int:
    """Plans registered for XLA (they live until exit)."""
