"""Types of the public API's annotations: any tensor that speaks DLPack, Python scalars, streams."""
from typing import Any, Protocol, Tuple, Union, runtime_checkable


@runtime_checkable
class DLPackTensor(Protocol):
    """Anything baracuda takes as a tensor: torch, CuPy, JAX arrays and every DLPack producer."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...

    def __dlpack_device__(self) -> Tuple[int, int]: ...


Scalar = Union[bool, int, float]
TensorOrScalar = Union[DLPackTensor, Scalar]
# an int (cudaStream_t), a torch.cuda.Stream (.cuda_stream), a CuPy stream (.ptr), or None
Stream = Any

__all__ = ["DLPackTensor", "Scalar", "TensorOrScalar", "Stream"]
