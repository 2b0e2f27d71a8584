"""Fake CUDA tensors for host tests: hand-made DLPack capsules that describe memory at a given
address on a CUDA device, which nobody ever dereferences. A run() given them must refuse (or
have nothing to do) before anything reaches the device: on a machine without a GPU, a run that
passed every check ends in a CudaError from the first CUDA call instead."""
import ctypes

import baracuda as bc


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

_CODES = {bc.float32: (2, 32), bc.float16: (2, 16), bc.float64: (2, 64), bc.bfloat16: (4, 16), bc.int32: (0, 32),
          bc.int64: (0, 64), bc.uint8: (1, 8), bc.DType.bool: (6, 8)}


class FakeTensor:
    """Exports a DLPack capsule describing memory at `addr` on a CUDA device (type 2).

    The memory does not exist: use only where run() must refuse before launching.
    """

    def __init__(self, shape, dtype=bc.float32, strides=None, addr=0x7F0000000000, device_type=2, device=0,
                 code_bits=None, lanes=1):
        n = len(shape)
        if strides is None:
            strides, acc = [], 1
            for s in reversed(shape):
                strides.insert(0, acc)
                acc *= s
        self.shape = tuple(shape)
        self._shape = (ctypes.c_int64 * max(n, 1))(*shape)
        self._strides = (ctypes.c_int64 * max(n, 1))(*strides)
        self._code_bits = code_bits or _CODES[dtype]
        self._lanes, self._addr, self._dev = lanes, addr, (device_type, device)
        self._keep = []

    def __dlpack__(self, **kwargs):
        mt = _DLManagedTensor()
        t = mt.dl_tensor
        t.data, t.device, t.ndim = self._addr, _DLDevice(*self._dev), len(self.shape)
        t.dtype = _DLDataType(self._code_bits[0], self._code_bits[1], self._lanes)
        t.shape, t.strides = self._shape, self._strides
        self._keep.append(mt)
        return _capsule_new(ctypes.addressof(mt), b"dltensor", None)

    def __dlpack_device__(self):
        return self._dev
