#include "common.h"

#include <nanobind/stl/string.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "baracuda/errors.h"
#include "baracuda/runtime.h"
#include "dlpack_exchange.h"

namespace baracuda::py {

namespace {
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;
constexpr uint8_t kDLComplex = 5;  // DLDataTypeCode

// Framework of a tensor argument. Known tensor types are cached so the common case is a
// pointer compare; subclasses (torch.nn.Parameter) count as their framework.
int framework_of(nb::handle h) {
  static PyTypeObject* known[4] = {nullptr, nullptr, nullptr, nullptr};  // index = framework
  PyTypeObject* t = Py_TYPE(h.ptr());
  for (int f = 1; f < 4; ++f)
    if (known[f] && (t == known[f] || PyType_IsSubtype(t, known[f]))) return f;
  nb::object m = nb::getattr(nb::handle(reinterpret_cast<PyObject*>(t)), "__module__", nb::none());
  const std::string s = nb::cast<std::string>(
      nb::str(m.is_none() ? nb::getattr(nb::handle(reinterpret_cast<PyObject*>(t)), "__name__", nb::str("?")) : m));
  int f = 0;
  if (s.rfind("torch", 0) == 0) f = 1;
  else if (s.rfind("cupy", 0) == 0) f = 2;
  else if (s.rfind("jax", 0) == 0) f = 3;
  if (f && !known[f] && (f != 1 || s == "torch")) {  // cache torch.Tensor itself, not a subclass
    Py_INCREF(reinterpret_cast<PyObject*>(t));
    known[f] = t;
  }
  return f;
}

// torch.Tensor.__dlpack__ is Python code (~2.5 us); torch._C._to_dlpack makes the same
// DLPack capsule in C++ (~0.3 us). Same protocol, same zero-copy view.
nb::object torch_capsule(nb::handle h) {
  static nb::object* to_dlpack = nullptr;
  if (!to_dlpack) to_dlpack = new nb::object(nb::module_::import_("torch._C").attr("_to_dlpack"));
  return (*to_dlpack)(h);
}

// torch's exchange API, for torch.Tensor and nn.Parameter themselves (other subclasses, such as
// fake or functional tensors, take the capsule path and its checks). Looked up once per type.
const dlpack_exchange::Api* exchange_api(PyTypeObject* t) {
  static PyTypeObject *tensor = nullptr, *parameter = nullptr;
  static const dlpack_exchange::Api* api = nullptr;
  if (!tensor) {  // torch is imported: a torch tensor is at hand
    nb::module_ torch = nb::module_::import_("torch");
    nb::object p = torch.attr("nn").attr("Parameter"), t = torch.attr("Tensor");
    api = dlpack_exchange::api_of(reinterpret_cast<PyTypeObject*>(t.ptr()));
    parameter = reinterpret_cast<PyTypeObject*>(p.release().ptr());
    tensor = reinterpret_cast<PyTypeObject*>(t.release().ptr());
  }
  return t == tensor || t == parameter ? api : nullptr;
}

// x.is_neg() / x.is_conj() of a torch tensor: a method call by interned name, without building a
// bound method (vectorcall: in the stable ABI from 3.12, which the abi3 wheel targets).
bool torch_flag(nb::handle h, bool conj) {
  static PyObject* const is_neg = PyUnicode_InternFromString("is_neg");
  static PyObject* const is_conj = PyUnicode_InternFromString("is_conj");
  PyObject* self = h.ptr();
  PyObject* r = PyObject_VectorcallMethod(conj ? is_conj : is_neg, &self, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  if (!r) nb::raise_python_error();
  const bool yes = r == Py_True;
  Py_DECREF(r);
  return yes;
}

std::string py_type_name(nb::handle h) {
  return nb::cast<std::string>(nb::str(nb::getattr(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(h.ptr()))),
                                                   "__qualname__", nb::str("?"))));
}
}  // namespace

TensorSpec spec_of(const TensorView& v) {
  TensorSpec s;
  s.shape.assign(v.shape, v.shape + v.ndim);
  s.dtype = v.dtype;
  s.strides.assign(v.strides, v.strides + v.ndim);
  for (int i = 0; i < v.ndim; ++i)
    if (v.shape[i] == 1) s.strides[i] = 0;  // a size-1 dim's stride carries no meaning
  if (s.strides == contiguous_strides(s.shape)) s.strides.clear();
  return s;
}

void append_params(std::string& key, const std::map<std::string, double>& params) {
  for (const auto& [k, v] : params) {
    key += k;
    key.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
}

namespace {
// The core's own device memory (not the framework's pool: a buffer kept across calls must not sit
// in a pool that torch's CUDA-graph trees account for). A grown buffer's predecessor is retired,
// not freed, so work still queued on it stays valid without a sync; clear_workspaces frees both.
struct CachedWorkspace {
  void* data = nullptr;
  int64_t size = 0;
  std::vector<void*> retired;
};
std::map<std::pair<int, StreamHandle>, CachedWorkspace>& workspace_cache() {
  static auto* cache = new std::map<std::pair<int, StreamHandle>, CachedWorkspace>();
  return *cache;
}
}  // namespace

Workspace allocate_workspace(const std::string& op, int64_t bytes, nb::handle workspace_alloc, int device,
                             StreamHandle stream) {
  Workspace w;
  if (bytes <= 0) return w;
  if (stream_is_capturing(stream)) {  // the graph's pool owns memory allocated for a captured call
    if (workspace_alloc.is_none()) throw InvalidArgument(op + ": needs a workspace allocator under CUDA-graph capture");
    w.owner = workspace_alloc(bytes);
    w.imported = import_tensor(w.owner, "workspace", true);
    w.data = w.imported.view.data;
    w.size = bytes;
    return w;
  }
  CachedWorkspace& c = workspace_cache()[{device, stream}];
  if (c.size < bytes) {
    void* grown = device_malloc(bytes, device);
    if (c.data) c.retired.push_back(c.data);
    c.data = grown;
    c.size = bytes;
  }
  w.data = c.data;
  w.size = bytes;
  return w;
}

size_t clear_workspaces() {
  size_t n = 0;
  for (auto& [key, c] : workspace_cache()) {
    for (void* p : c.retired) device_free(p);  // cudaFree waits for the device's queued work
    if (c.data) device_free(c.data);
    n += c.data != nullptr;
  }
  workspace_cache().clear();
  return n;
}

Workspace import_workspace(nb::handle workspace, int device) {
  Workspace w;
  if (!present(workspace)) return w;
  w.imported = import_tensor(workspace, "workspace", true);
  const TensorView& v = w.imported.view;
  // run() sees a pointer and a byte count: a strided or broadcast view would be written past.
  if (!v.is_contiguous())
    throw InvalidArgument("workspace: expected a contiguous tensor (its bytes are used as one block), got shape " +
                          shape_str(v.shape, v.ndim) + " with strides " + shape_str(v.strides, v.ndim));
  if (v.numel() > 0 && v.device != device)
    throw InvalidArgument("workspace: is on cuda:" + std::to_string(v.device) + " but the operands are on cuda:" +
                          std::to_string(device));
  w.data = v.data;
  w.size = v.numel() * int64_t(dtype_size(v.dtype));
  return w;
}

Workspace given_or_allocated_workspace(nb::handle workspace, int64_t bytes, nb::handle workspace_alloc, int device,
                                       StreamHandle stream) {
  if (workspace.is_none()) {
    if (workspace_alloc.is_none()) return Workspace{};
    return allocate_workspace("workspace", bytes, workspace_alloc, device, stream);  // empty when bytes == 0
  }
  return import_workspace(workspace, device);
}

void append_key(std::string& key, const TensorView& v) {
  key.push_back(char(v.dtype));
  key.push_back(char(v.ndim));
  key.append(reinterpret_cast<const char*>(v.shape), sizeof(int64_t) * v.ndim);
  for (int i = 0; i < v.ndim; ++i) {
    const int64_t st = v.shape[i] == 1 ? 0 : v.strides[i];
    key.append(reinterpret_cast<const char*>(&st), sizeof st);
  }
}

DType dtype_from_dlpack(nb::dlpack::dtype t, const char* name) {
  using C = nb::dlpack::dtype_code;
  if (t.lanes != 1) throw Unsupported(std::string(name) + ": vector dtypes (lanes > 1) are not supported");
  switch (C(t.code)) {
    case C::Bool: if (t.bits == 8) return DType::Bool; break;
    case C::Int:
      if (t.bits == 8) return DType::Int8;
      if (t.bits == 16) return DType::Int16;
      if (t.bits == 32) return DType::Int32;
      if (t.bits == 64) return DType::Int64;
      break;
    case C::UInt:
      if (t.bits == 8) return DType::UInt8;
      if (t.bits == 32) return DType::UInt32;
      break;
    case C::Float:
      if (t.bits == 16) return DType::Float16;
      if (t.bits == 32) return DType::Float32;
      if (t.bits == 64) return DType::Float64;
      break;
    case C::Bfloat: if (t.bits == 16) return DType::BFloat16; break;
    case C::Float8_E4M3FN: return DType::Float8E4M3;
    case C::Float8_E5M2: return DType::Float8E5M2;
    case C::Complex:
      if (t.bits == 64) return DType::Complex64;
      if (t.bits == 128) return DType::Complex128;
      break;
    default: break;
  }
  throw InvalidDType(std::string(name) + ": DLPack dtype (code " + std::to_string(t.code) + ", " +
                     std::to_string(t.bits) + " bits) has no baracuda equivalent");
}

nb::dlpack::dtype dlpack_from_dtype(DType t) {
  using C = nb::dlpack::dtype_code;
  auto mk = [](C c, int bits) { nb::dlpack::dtype d; d.code = uint8_t(c); d.bits = uint8_t(bits); d.lanes = 1; return d; };
  switch (t) {
    case DType::Bool: return mk(C::Bool, 8);
    case DType::Int8: return mk(C::Int, 8);
    case DType::UInt8: return mk(C::UInt, 8);
    case DType::Int16: return mk(C::Int, 16);
    case DType::Int32: return mk(C::Int, 32);
    case DType::Int64: return mk(C::Int, 64);
    case DType::UInt32: return mk(C::UInt, 32);
    case DType::Float16: return mk(C::Float, 16);
    case DType::BFloat16: return mk(C::Bfloat, 16);
    case DType::Float32: return mk(C::Float, 32);
    case DType::Float64: return mk(C::Float, 64);
    case DType::Float8E4M3: return mk(C::Float8_E4M3FN, 8);
    case DType::Float8E5M2: return mk(C::Float8_E5M2, 8);
    case DType::Complex64: return mk(C::Complex, 64);
    case DType::Complex128: return mk(C::Complex, 128);
  }
  return mk(C::Float, 32);
}

// What an import reads from either source (a nanobind ndarray or a DLTensor of the exchange API).
struct RawTensor {
  int device_type, device_id, ndim;
  nb::dlpack::dtype dtype;
  void* data;  // byte offset applied
  const int64_t* shape;
  const int64_t* strides;  // null: compact row-major
};

template <class Arr> RawTensor raw_of(const Arr& arr) {
  return RawTensor{arr.device_type(), arr.device_id(), int(arr.ndim()), arr.dtype(),
                   const_cast<void*>(static_cast<const void*>(arr.data())), arr.shape_ptr(), arr.stride_ptr()};
}

RawTensor raw_of(const dlpack_exchange::Tensor& t) {
  nb::dlpack::dtype d;
  d.code = t.dtype.code;
  d.bits = t.dtype.bits;
  d.lanes = t.dtype.lanes;
  return RawTensor{t.device.type, t.device.id, t.ndim, d,
                   t.data ? static_cast<char*>(t.data) + t.byte_offset : nullptr, t.shape, t.strides};
}

void fill_view(Imported& r, const RawTensor& t, const char* name) {
  const int dev = t.device_type;
  if (dev != kDLCUDA && dev != kDLCUDAManaged) {
    const char* where = dev == kDLCPU ? "a CPU tensor" : (dev == kDLCUDAHost ? "a pinned host tensor" : "a non-CUDA tensor");
    throw InvalidArgument(std::string(name) + ": expected a CUDA tensor, got " + where);
  }
  if (t.ndim > kMaxRank)
    throw Unsupported(std::string(name) + ": rank " + std::to_string(t.ndim) + " exceeds the supported " +
                      std::to_string(kMaxRank));
  TensorView& v = r.view;
  v.data = t.data;
  v.dtype = dtype_from_dlpack(t.dtype, name);
  v.ndim = t.ndim;
  v.device = t.device_id;
  int64_t running = 1;
  for (int i = v.ndim - 1; i >= 0; --i) {
    v.shape[i] = t.shape[i];
    v.strides[i] = t.strides ? t.strides[i] : running;
    running *= t.shape[i];
  }
  // Kernels load whole elements (and wider vectors where aligned): a producer's view that starts
  // mid-element (a byte offset into another dtype's buffer) would fault or read torn values.
  const size_t es = dtype_size(v.dtype);
  if (v.data && es > 1 && reinterpret_cast<uintptr_t>(v.data) % es)
    throw InvalidArgument(std::string(name) + ": its data pointer is not aligned to its " + std::to_string(es) +
                          "-byte elements (" + dtype_name(v.dtype) + ")");
}

// A stride whose byte offset cannot exist (|stride x element size x (extent - 1)| beyond 2^62):
// what CuPy's __dlpack__ exports for a negative stride before cupy/cupy#10228 (the byte stride
// taken as unsigned, then divided by the element size). Such a view is re-read from the array's
// own signed byte strides (CuPy's `.strides`); any other producer's is refused.
void check_strides(Imported& r, nb::handle original, const char* name) {
  TensorView& v = r.view;
  const int64_t es = int64_t(dtype_size(v.dtype));
  constexpr int64_t kLimit = int64_t(1) << 62;
  auto impossible = [&](int i) {
    if (v.shape[i] <= 1) return false;
    if (v.strides[i] == std::numeric_limits<int64_t>::min()) return true;
    const int64_t s = v.strides[i] < 0 ? -v.strides[i] : v.strides[i];
    return s > kLimit / es / (v.shape[i] - 1);
  };
  auto first_impossible = [&] {
    for (int i = 0; i < v.ndim; ++i)
      if (impossible(i)) return i;
    return -1;
  };
  int bad = first_impossible();
  if (bad < 0) return;
  if (r.framework == 2) {
    nb::object st = nb::getattr(original, "strides", nb::none());
    if (nb::isinstance<nb::tuple>(st) && nb::len(st) == size_t(v.ndim)) {
      bool whole = true;
      int64_t fixed[kMaxRank];
      for (int i = 0; i < v.ndim; ++i) {
        const int64_t b = nb::cast<int64_t>(st[i]);
        whole = whole && b % es == 0;
        fixed[i] = b / es;
      }
      if (whole) {
        for (int i = 0; i < v.ndim; ++i) v.strides[i] = fixed[i];
        bad = first_impossible();
        if (bad < 0) return;
      }
    }
  }
  throw InvalidArgument(std::string(name) + ": stride " + std::to_string(v.strides[bad]) + " along dimension " +
                        std::to_string(bad) + " (shape " + shape_str(v.shape, v.ndim) +
                        ") addresses no real memory; the producer exported a broken view (pass a contiguous copy)");
}

Imported import_tensor(nb::handle h, const char* name, bool writable) {
  Imported r;
  r.imported = true;
  if (h.is_none()) throw InvalidArgument(std::string(name) + ": expected a CUDA tensor, got None");
  r.framework = framework_of(h);
  if (r.framework == 3) {
    // DLPack stream protocol for a producer we cannot hand a stream to: wait until ready.
    nb::object ready = nb::getattr(h, "block_until_ready", nb::none());
    if (!ready.is_none()) ready();
  }
  const nb::handle original = h;
  nb::object capsule, resolved;
  if (r.framework == 1) {
    const dlpack_exchange::Api* api = exchange_api(Py_TYPE(h.ptr()));
    dlpack_exchange::Tensor t;
    if (api && api->dltensor_from_py_object_no_sync(h.ptr(), &t) != 0) nb::raise_python_error();
    // torch's lazy x.neg() / x.conj() views export their raw bytes through DLPack: the sign would
    // be lost. Inputs are materialised (as torch's own ops do); an output cannot be. Only a complex
    // tensor can carry the conjugate bit.
    const bool neg = torch_flag(h, false), conj = (!api || t.dtype.code == kDLComplex) && torch_flag(h, true);
    if (neg || conj) {
      if (writable)
        throw InvalidArgument(std::string(name) + ": is a torch view with the " + (neg ? "negative" : "conjugate") +
                              " bit set (a lazy neg / conj); an output must be a materialised tensor");
      resolved = h.attr("resolve_neg")().attr("resolve_conj")();
      h = resolved;
      api = exchange_api(Py_TYPE(h.ptr()));
      if (api && api->dltensor_from_py_object_no_sync(h.ptr(), &t) != 0) nb::raise_python_error();
    }
    if (api) {
      fill_view(r, raw_of(t), name);
      r.exchange = api;
      r.owner = std::move(resolved);
      check_strides(r, original, name);
      return r;
    }
    capsule = torch_capsule(h);
    h = capsule;
  }
  if (writable && r.framework == 3)
    throw InvalidArgument(std::string(name) + ": JAX arrays are immutable; leave out= unset to get a new array");
  if (writable) {
    if (!nb::try_cast<nb::ndarray<>>(h, r.writable_array, false)) {
      if (nb::try_cast<nb::ndarray<nb::ro>>(h, r.array, false))
        throw InvalidArgument(std::string(name) + ": is read-only; an output must be writable");
      throw InvalidArgument(std::string(name) + ": expected a tensor that supports DLPack (torch, CuPy, JAX, ...), got " +
                            py_type_name(h));
    }
    fill_view(r, raw_of(r.writable_array), name);
  } else {
    if (!nb::try_cast<nb::ndarray<nb::ro>>(h, r.array, false))
      throw InvalidArgument(std::string(name) + ": expected a tensor that supports DLPack (torch, CuPy, JAX, ...), got " +
                            py_type_name(h));
    fill_view(r, raw_of(r.array), name);
  }
  check_strides(r, original, name);
  return r;
}

StreamHandle resolve_stream(nb::handle stream, const Imported& like) {
  if (!stream.is_none()) {
    if (nb::isinstance<nb::int_>(stream)) return reinterpret_cast<StreamHandle>(nb::cast<uintptr_t>(stream));
    for (const char* attr : {"cuda_stream", "ptr"}) {
      nb::object v = nb::getattr(stream, attr, nb::none());
      if (!v.is_none()) return reinterpret_cast<StreamHandle>(nb::cast<uintptr_t>(v));
    }
    throw InvalidArgument("stream: expected an int, a torch.cuda.Stream or a cupy Stream, got " + py_type_name(stream));
  }
  if (like.exchange) {
    void* s = nullptr;
    if (like.exchange->current_work_stream(kDLCUDA, like.view.device, &s) != 0) nb::raise_python_error();
    return reinterpret_cast<StreamHandle>(s);
  }
  if (like.framework == 1) {
    static nb::object* get = nullptr;
    if (!get) get = new nb::object(nb::module_::import_("torch._C").attr("_cuda_getCurrentRawStream"));
    return reinterpret_cast<StreamHandle>(nb::cast<uintptr_t>((*get)(like.view.device)));
  }
  if (like.framework == 2) {
    static nb::object* get = nullptr;
    if (!get) get = new nb::object(nb::module_::import_("cupy.cuda").attr("get_current_stream"));
    return reinterpret_cast<StreamHandle>(nb::cast<uintptr_t>((*get)().attr("ptr")));
  }
  return nullptr;  // legacy default stream
}

namespace dlpack_exchange {
const Api* api_of(PyTypeObject* type) {
  nb::object capsule = nb::getattr(nb::handle(reinterpret_cast<PyObject*>(type)), "__dlpack_c_exchange_api__",
                                   nb::none());
  if (capsule.is_none() || !PyCapsule_IsValid(capsule.ptr(), "dlpack_exchange_api")) return nullptr;
  const auto* api = static_cast<const Api*>(PyCapsule_GetPointer(capsule.ptr(), "dlpack_exchange_api"));
  // The capsule lives on the type, and the table in the framework's library, for the process's life.
  if (!api || api->header.version.major != 1 || !api->dltensor_from_py_object_no_sync || !api->current_work_stream)
    return nullptr;
  return api;
}
}  // namespace dlpack_exchange

void finish_for_framework(const Imported& like, StreamHandle stream) {
  if (like.framework != 3) return;
  nb::gil_scoped_release release;
  synchronize_stream(stream);
}

OrderedOperands ordered_operands(const std::string& op, const nb::tuple& args, const nb::kwargs& kwargs, Names outs,
                                 Names ins, Names extras) {
  OrderedOperands r;
  auto takes = [&] {
    std::string t;
    for (const Names* names : {&outs, &ins, &extras})
      for (int i = 0; i < names->n; ++i) t += std::string(names->at[i]) + "=, ";
    return t + "workspace=, stream=";
  };
  const int npos = int(args.size());
  const bool by_position = npos > 0;
  if (by_position) {
    if (npos > outs.n + OrderedOperands::kMax)
      throw InvalidArgument(op + ": run() got " + std::to_string(npos) + " operands, more than it takes (" + takes() +
                            ")");
    for (int i = 0; i < npos; ++i) {
      nb::handle a(PyTuple_GetItem(args.ptr(), i));  // limited API: no GET_ITEM macro
      if (i < outs.n) r.outs[r.n_outs++] = a;
      else r.ins[r.n_ins++] = a;
    }
  } else {
    r.n_outs = std::min(outs.n, 2);
    r.n_ins = std::min(ins.n, int(OrderedOperands::kMax));
    for (int i = 0; i < r.n_outs; ++i) r.outs[i] = nb::none();
    for (int i = 0; i < r.n_ins; ++i) r.ins[i] = nb::none();
  }
  for (int i = 0; i < 3; ++i) r.extra[i] = nb::none();
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(kwargs.ptr(), &pos, &key, &value)) {
    const char* name = PyUnicode_AsUTF8AndSize(key, nullptr);
    if (!name) throw nb::python_error();
    if (!std::strcmp(name, "workspace")) { r.workspace = value; continue; }
    if (!std::strcmp(name, "stream")) { r.stream = value; continue; }
    bool placed = false;
    for (int i = 0; i < extras.n && i < 3 && !placed; ++i)
      if (!std::strcmp(name, extras.at[i])) r.extra[i] = value, placed = true;
    for (auto [names, slots, n] : {std::make_tuple(&outs, r.outs, r.n_outs), std::make_tuple(&ins, r.ins, r.n_ins)})
      for (int i = 0; i < names->n && !placed; ++i)
        if (!std::strcmp(name, names->at[i])) {
          if (by_position)
            throw InvalidArgument(op + ": run() got operands by position and '" + name +
                                  "' by name; give them all one way (" + takes() + ")");
          if (i < n) slots[i] = value, placed = true;
        }
    if (!placed) throw InvalidArgument(op + ": run() got an unknown keyword '" + name + "'; it takes " + takes());
  }
  return r;
}

}  // namespace baracuda::py
