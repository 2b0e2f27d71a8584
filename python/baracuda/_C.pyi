"""
baracuda core bindings (use the baracuda package, not this module directly)
"""

from collections.abc import Mapping, Sequence
import enum
from typing import Any


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
    """Backend and numerics preferences for select()."""

    def __init__(self, prefer: Sequence[Backend] = [], forbid: Sequence[Backend] = [], require_deterministic: bool = False, allow_tf32: bool = False, workspace_limit: int = -1) -> None: ...

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

def empty(shape: Sequence[int], dtype: DType, device: int = 0) -> Any:
    """
    Device memory owned by the returned DLPack array (used for frameworks like JAX that cannot lend output buffers).
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

    @property
    def op(self) -> str: ...

    @property
    def inputs(self) -> list[TensorSpec]: ...

    @property
    def out(self) -> TensorSpec: ...

    @property
    def params(self) -> dict[str, float]: ...

    def __eq__(self, arg: ElementwiseDescriptor, /) -> bool: ...

    def __hash__(self) -> int: ...

    def __repr__(self) -> str: ...

class ElementwisePlan:
    """A validated elementwise launch: select once, run many times."""

    @staticmethod
    def select(desc: ElementwiseDescriptor, preference: PlanPreference | None = None) -> ElementwisePlan:
        """
        Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.
        """

    @property
    def sku(self) -> KernelSku:
        """The kernel this plan runs, and its precision guarantee."""

    @property
    def descriptor(self) -> ElementwiseDescriptor: ...

    def workspace_bytes(self) -> int:
        """Bytes of scratch memory run() needs (0 for most ops)."""

    def run(self, out: object | None, *inputs, workspace: object | None = None, stream: object | None = None) -> None:
        """
        Check the tensors against the descriptor and launch on `stream` (default: the current stream of the inputs' framework). Never allocates, never synchronizes (except to hand results to JAX).
        """

def elementwise_call(op: str, out: object, inputs: tuple, params: Mapping[str, float], stream: object | None = None, workspace_alloc: object | None = None) -> None:
    """
    Functional entry: select (cached on op, params and operand metadata) and run.
    """

def elementwise_cache_size() -> int:
    """Plans in the functional cache."""
