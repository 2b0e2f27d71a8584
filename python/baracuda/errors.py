"""Exceptions raised by baracuda. Every message names the argument and what was expected.

All derive from :class:`BaracudaError` and from the matching Python built-in, so
``except ValueError`` / ``except NotImplementedError`` keep working.
"""


class BaracudaError(Exception):
    """Base class of every baracuda error."""


class InvalidArgument(BaracudaError, ValueError):
    """The caller's mistake: shape, stride, device, aliasing, workspace, unknown op or parameter."""


class InvalidDType(InvalidArgument, TypeError):
    """The caller's mistake about an element type: wrong, mismatched, or not accepted by the op."""


class Unsupported(BaracudaError, NotImplementedError):
    """A valid request this build does not cover; the message says what is covered."""


class CudaError(BaracudaError, RuntimeError):
    """A CUDA runtime or library call failed; the message names the call."""


class OutOfMemory(BaracudaError, MemoryError):
    """A device allocation failed."""


__all__ = ["BaracudaError", "InvalidArgument", "InvalidDType", "Unsupported", "CudaError", "OutOfMemory"]
