// The DLPack C exchange API (DLPack 1.2+): a framework publishes, on its tensor type, a capsule
// `__dlpack_c_exchange_api__` ("dlpack_exchange_api") of C functions that describe a tensor and
// name the framework's current stream without a Python call (torch 2.10+): no capsule is made,
// parsed and released per operand.
//
// The declarations below follow the DLPack ABI (dlpack.h, `DLTensor`, `DLPackExchangeAPI`); only
// what the import needs. Major version 1 keeps this layout; anything else is not used.
#pragma once
#include <Python.h>

#include <cstdint>

namespace baracuda::py::dlpack_exchange {

struct Device {
  int32_t type;  // DLDeviceType: 1 CPU, 2 CUDA, 3 CUDA host, 13 CUDA managed
  int32_t id;
};
struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // may be null: compact row-major
  uint64_t byte_offset;
};
struct Version {
  uint32_t major;
  uint32_t minor;
};
struct ManagedTensorVersioned;
using SetError = void (*)(void* ctx, const char* kind, const char* message);

struct ApiHeader {
  Version version;
  ApiHeader* prev_api;
};
struct Api {
  ApiHeader header;
  int (*managed_tensor_allocator)(Tensor* prototype, ManagedTensorVersioned** out, void* error_ctx, SetError);
  int (*managed_tensor_from_py_object_no_sync)(void* py_object, ManagedTensorVersioned** out);
  int (*managed_tensor_to_py_object_no_sync)(ManagedTensorVersioned* tensor, void** out_py_object);
  int (*dltensor_from_py_object_no_sync)(void* py_object, Tensor* out);  // may be null
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** out_stream);
};

// The exchange API of a tensor type (looked up on the type once, then cached), or null when the
// type publishes none, a major version other than 1, or no non-owning tensor export.
const Api* api_of(PyTypeObject* type);

}  // namespace baracuda::py::dlpack_exchange
