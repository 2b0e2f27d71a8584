"""baracuda: GPU primitives for ML frameworks through one Plan-based API.

    import baracuda as bc
    desc = bc.ElementwiseDescriptor("silu", [bc.TensorSpec((4096, 4096), bc.bfloat16)],
                                    bc.TensorSpec((4096, 4096), bc.bfloat16))
    plan = bc.ElementwisePlan.select(desc)   # validate once, pick a kernel
    plan.sku                                 # which kernel, and its precision guarantee
    plan.run(y, x)                           # torch / CuPy / JAX / any DLPack tensor, zero-copy
    y = bc.silu(x)                           # functional form: cached plan, output in x's framework
"""
import os as _os

from . import errors  # noqa: F401  (imported first: the core raises these classes)
from . import _C
from ._C import (  # noqa: F401
    Backend,
    DType,
    ElementwiseDescriptor,
    ElementwisePlan,
    KernelSku,
    PlanPreference,
    PrecisionGuarantee,
    TensorSpec,
)
from ._dtypes import *  # noqa: F401,F403
from ._dtypes import dtype  # noqa: F401
from ._functional import FUNCTIONS as _FUNCTIONS, broadcast_shape  # noqa: F401

__version__ = _C.build_info()["version"]

_OPS = {}  # every functional op, by name (wrapped below with the autograd routing)

_OPS.update(_FUNCTIONS)

from ._C import ReductionDescriptor, ReductionPlan  # noqa: F401,E402
from ._reduction import FUNCTIONS as _REDUCTION_FUNCTIONS  # noqa: E402

_OPS.update(_REDUCTION_FUNCTIONS)

from ._C import ChannelNormDescriptor, ChannelNormPlan, NormDescriptor, NormPlan  # noqa: F401,E402
from ._norm import FUNCTIONS as _NORM_FUNCTIONS  # noqa: E402

_OPS.update(_NORM_FUNCTIONS)


def _register_library_dirs():
    # cuBLASLt and cuDNN are loaded on first use; tell the core where pip's nvidia-* wheels keep
    # them (torch and JAX load them themselves; this covers CuPy-only and plain installs).
    import importlib.util

    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return
    for base in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13", "cublas", "cudnn"):
            lib = _os.path.join(base, sub, "lib")
            if _os.path.isdir(lib):
                _C.add_library_dir(lib)


_register_library_dirs()

from ._C import GemmDescriptor, GemmPlan, GroupedGemmDescriptor, GroupedGemmPlan  # noqa: F401,E402
from ._gemm import FUNCTIONS as _GEMM_FUNCTIONS  # noqa: E402

_OPS.update(_GEMM_FUNCTIONS)

from ._C import SoftmaxDescriptor, SoftmaxPlan  # noqa: F401,E402
from ._softmax import FUNCTIONS as _SOFTMAX_FUNCTIONS  # noqa: E402

_OPS.update(_SOFTMAX_FUNCTIONS)

from ._C import CrossEntropyLossDescriptor, PointwiseLossDescriptor, RowLossDescriptor, LossPlan  # noqa: F401,E402
from ._C import CtcLossDescriptor, CtcLossPlan  # noqa: F401,E402
from ._loss import FUNCTIONS as _LOSS_FUNCTIONS  # noqa: E402
from ._loss_ctc import FUNCTIONS as _CTC_FUNCTIONS  # noqa: E402

_OPS.update(_LOSS_FUNCTIONS)
_OPS.update(_CTC_FUNCTIONS)

from ._C import ScanDescriptor, ScanPlan  # noqa: F401,E402
from ._scan import FUNCTIONS as _SCAN_FUNCTIONS  # noqa: E402

_OPS.update(_SCAN_FUNCTIONS)

from ._C import AttentionDescriptor, AttentionPlan  # noqa: F401,E402
from ._attention import FUNCTIONS as _ATTENTION_FUNCTIONS  # noqa: E402

_OPS.update(_ATTENTION_FUNCTIONS)

from ._C import RopeDescriptor, RopeFrequencies, RopePlan  # noqa: F401,E402
from ._rope import FUNCTIONS as _ROPE_FUNCTIONS, rope_frequencies  # noqa: E402,F401

_OPS.update(_ROPE_FUNCTIONS)

from ._C import KvCacheDescriptor, KvCachePlan  # noqa: F401,E402
from ._kv_cache import FUNCTIONS as _KV_CACHE_FUNCTIONS  # noqa: E402

_OPS.update(_KV_CACHE_FUNCTIONS)

from ._C import AttentionMergeDescriptor, AttentionMergePlan, PagedAttentionDescriptor, PagedAttentionPlan  # noqa: F401,E402
from ._paged_attention import FUNCTIONS as _PAGED_ATTENTION_FUNCTIONS  # noqa: E402

_OPS.update(_PAGED_ATTENTION_FUNCTIONS)

from ._C import PenaltiesDescriptor, PenaltiesPlan, SamplingDescriptor, SamplingPlan  # noqa: F401,E402
from ._sampling import FUNCTIONS as _SAMPLING_FUNCTIONS  # noqa: E402

_OPS.update(_SAMPLING_FUNCTIONS)

from ._C import EmbeddingDescriptor, EmbeddingPlan  # noqa: F401,E402
from ._embedding import FUNCTIONS as _EMBEDDING_FUNCTIONS  # noqa: E402

_OPS.update(_EMBEDDING_FUNCTIONS)

from ._C import MoeGateDescriptor, MoeGatePlan, MoePermuteDescriptor, MoePermutePlan  # noqa: F401,E402
from ._moe import FUNCTIONS as _MOE_FUNCTIONS  # noqa: E402

_OPS.update(_MOE_FUNCTIONS)

from ._autograd import compile_routed as _compile_routed, guard_all as _guard_all  # noqa: E402
from ._fastpaths import functions as _fast_functions  # noqa: E402

_OPS.update(_fast_functions())  # the torch fast paths in front of the hottest ops

# Ops whose outputs carry no gradient (bool / index results, fills, noise): they take tensors that
# require grad and run as they are, as torch's do.
_NON_DIFFERENTIABLE = {r["name"] for r in _C.elementwise_ops() if r["category"] in ("predicate", "compare")} | {
    "argmax", "argmin", "any", "all", "count_nonzero", "fill", "full_like", "gumbel_noise", "sample"}
globals().update(_guard_all(_OPS, _NON_DIFFERENTIABLE))
sample = _compile_routed("sample", sample)  # noqa: F821 (set just above)


def features() -> dict:
    """Which optional families this build holds: {'cudnn': False, 'nccl': False, ...}, and
    'xla_ffi': whether the JAX handler (baracuda.jax) was compiled."""
    return {**_C.build_info()["features"], "xla_ffi": _C.xla_handler() is not None}


def build_info() -> dict:
    """Version, compiled CUDA archs, CUDA runtime version and feature toggles."""
    return dict(_C.build_info())


def devices() -> list:
    """CUDA devices the runtime sees (empty, not an error, without a GPU)."""
    return list(_C.devices())


def families() -> list:
    """The registered plan families and their (op, dtype, layout, backend) coverage."""
    return list(_C.families())


def reduction_ops() -> list:
    """The reduction op table (name, category, params, dtypes, out_dtype, backward, backward_inputs, doc)."""
    return list(_C.reduction_ops())


def scan_ops() -> list:
    """The scan op table (name, is_backward, inputs, outputs, dtypes, out_dtype, backward, doc)."""
    return list(_C.scan_ops())


def elementwise_ops() -> list:
    """The elementwise op table (name, category, arity, params, dtypes, backward, doc)."""
    return list(_C.elementwise_ops())


def clear_workspaces() -> int:
    """Free the scratch buffers the functional ops keep, one per (device, stream), grown to the
    largest need seen (cuBLASLt's 32 MiB among them). They are the core's own device memory,
    outside the frameworks' pools (so torch's memory stats do not count them). Waits for the
    device's queued work; the next call allocates again. Returns how many were held."""
    return int(_C.clear_workspaces())


def get_include() -> str:
    """Directory of the C++ headers, for embedding the core without Python."""
    return _os.path.join(_os.path.dirname(__file__), "include")


def get_library_dir() -> str:
    """Directory holding libbaracuda.so (link with -L<dir> -lbaracuda)."""
    return _os.path.dirname(__file__)


def get_cmake_dir() -> str:
    """Directory of baracudaConfig.cmake: ``find_package(baracuda CONFIG)`` with ``-Dbaracuda_DIR=<it>``
    gives the imported target ``baracuda::baracuda`` (the core library and its headers)."""
    return _os.path.join(_os.path.dirname(__file__), "cmake")


from ._types import DLPackTensor, Scalar, Stream, TensorOrScalar  # noqa: F401,E402

# The public namespace: the plan classes and vocabulary of _C, the dtype objects, every functional
# op, the introspection functions above and errors. stubs/baracuda/__init__.pyi is generated from it.
__all__ = sorted(
    [n for n in globals() if not n.startswith("_") and n not in ("annotations",)]
)
