// The shared vocabulary: dtypes, tensor specs, SKUs, preferences, the registry, build and
// device facts, a device allocation for frameworks that cannot lend us memory, and the
// translation of core errors into baracuda.errors exceptions.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "baracuda/errors.h"
#include "baracuda/registry.h"
#include "common.h"
#include "baracuda/runtime.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

PyObject* error_class(ErrorCode c) {
  static PyObject* classes[5] = {};
  static const char* names[5] = {"InvalidArgument", "InvalidDType", "Unsupported", "CudaError", "OutOfMemory"};
  const int i = int(c);
  if (!classes[i]) classes[i] = nb::object(nb::module_::import_("baracuda.errors").attr(names[i])).release().ptr();
  return classes[i];
}

std::vector<int64_t> shape_of(const nb::handle& seq) {
  std::vector<int64_t> v;
  for (nb::handle x : seq) v.push_back(nb::cast<int64_t>(x));
  return v;
}

}  // namespace

void init_core(nb::module_& m) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(error_class(e.code()), e.what());
    }
  });

  nb::enum_<DType>(m, "DType", "Element types. Convert from numpy / torch / JAX dtypes with baracuda.dtype().")
      .value("bool", DType::Bool)
      .value("int8", DType::Int8)
      .value("uint8", DType::UInt8)
      .value("int16", DType::Int16)
      .value("int32", DType::Int32)
      .value("int64", DType::Int64)
      .value("uint32", DType::UInt32)
      .value("float16", DType::Float16)
      .value("bfloat16", DType::BFloat16)
      .value("float32", DType::Float32)
      .value("float64", DType::Float64)
      .value("float8_e4m3fn", DType::Float8E4M3)
      .value("float8_e5m2", DType::Float8E5M2)
      .value("complex64", DType::Complex64)
      .value("complex128", DType::Complex128);
  m.def("dtype_size", &dtype_size, "dtype"_a, "Bytes per element.");

  nb::enum_<Backend>(m, "Backend", "Where a kernel comes from.")
      .value("bespoke", Backend::Bespoke)
      .value("cublaslt", Backend::CublasLt)
      .value("cudnn", Backend::Cudnn)
      .value("cutlass", Backend::Cutlass)
      .value("nccl", Backend::Nccl)
      .value("cufft", Backend::Cufft)
      .value("cusolver", Backend::Cusolver)
      .value("cublas", Backend::Cublas);

  nb::class_<TensorSpec>(m, "TensorSpec", "Shape, dtype and strides (in elements) of an operand, without data.")
      .def("__init__",
           [](TensorSpec* s, nb::handle shape, DType dtype, std::optional<std::vector<int64_t>> strides) {
             new (s) TensorSpec{shape_of(shape), dtype, strides.value_or(std::vector<int64_t>{})};
           },
           "shape"_a, "dtype"_a, "strides"_a = nb::none())
      .def_prop_ro("shape", [](const TensorSpec& s) { return s.shape; })
      .def_prop_ro("dtype", [](const TensorSpec& s) { return s.dtype; })
      .def_prop_ro("strides", [](const TensorSpec& s) { return s.effective_strides(); })
      .def("__eq__", [](const TensorSpec& a, const TensorSpec& b) { return a == b; })
      .def("__hash__", [](const TensorSpec& s) { return std::hash<std::string>{}(s.str()); })
      .def("__repr__", [](const TensorSpec& s) { return "TensorSpec(" + s.str() + ")"; });

  nb::class_<PrecisionGuarantee>(m, "PrecisionGuarantee", "What a kernel promises about its numerics.")
      .def_ro("math", &PrecisionGuarantee::math)
      .def_ro("compute_dtype", &PrecisionGuarantee::compute_dtype)
      .def_ro("accumulator_dtype", &PrecisionGuarantee::accumulator_dtype)
      .def_ro("deterministic", &PrecisionGuarantee::deterministic)
      .def_ro("bit_stable", &PrecisionGuarantee::bit_stable)
      .def("__repr__", [](const PrecisionGuarantee& p) {
        return "PrecisionGuarantee(" + p.math + ", compute=" + dtype_name(p.compute_dtype) +
               ", accumulate=" + dtype_name(p.accumulator_dtype) + (p.deterministic ? ", deterministic" : "") +
               (p.bit_stable ? ", bit-stable" : "") + ")";
      });

  nb::class_<KernelSku>(m, "KernelSku", "The kernel a plan picked, derived from the code path that runs.")
      .def_ro("name", &KernelSku::name)
      .def_ro("category", &KernelSku::category)
      .def_ro("op", &KernelSku::op)
      .def_ro("dtypes", &KernelSku::dtypes)
      .def_ro("layout", &KernelSku::layout)
      .def_ro("arch", &KernelSku::arch)
      .def_ro("backend", &KernelSku::backend)
      .def_ro("precision", &KernelSku::precision)
      .def("__repr__", [](const KernelSku& k) { return "KernelSku(" + k.str() + ")"; });

  nb::class_<PlanPreference>(m, "PlanPreference",
                             "Backend, numerics and tuning preferences for select(). tuning: 'key=value,...' "
                             "overrides of the family's tunable choices (unknown keys are refused; the SKU reports "
                             "what ran).")
      .def("__init__",
           [](PlanPreference* p, std::vector<Backend> prefer, std::vector<Backend> forbid, bool det, bool tf32,
              int64_t ws, std::string tuning) { new (p) PlanPreference{prefer, forbid, det, tf32, ws, std::move(tuning)}; },
           "prefer"_a = std::vector<Backend>{}, "forbid"_a = std::vector<Backend>{},
           "require_deterministic"_a = false, "allow_tf32"_a = false, "workspace_limit"_a = -1, "tuning"_a = "")
      .def_ro("prefer", &PlanPreference::prefer)
      .def_ro("forbid", &PlanPreference::forbid)
      .def_ro("require_deterministic", &PlanPreference::require_deterministic)
      .def_ro("allow_tf32", &PlanPreference::allow_tf32)
      .def_ro("workspace_limit", &PlanPreference::workspace_limit)
      .def_ro("tuning", &PlanPreference::tuning);

  m.def("families", [] {
    nb::list out;
    for (const auto& f : families()) {
      nb::list ops;
      for (const auto& o : f.ops) {
        nb::dict d;
        d["op"] = o.op; d["kind"] = o.kind; d["dtypes"] = o.dtypes; d["layouts"] = o.layouts;
        d["backend"] = o.backend; d["backward"] = o.has_backward;
        ops.append(d);
      }
      nb::dict d;
      d["name"] = f.name; d["plan"] = f.plan_class; d["summary"] = f.summary; d["ops"] = ops;
      out.append(d);
    }
    return out;
  }, "The registered plan families and their (op, dtype, layout, backend) coverage.");

  m.def("build_info", [] {
    BuildInfo b = build_info();
    nb::dict d, feats;
    d["version"] = b.version;
    d["cuda_archs"] = b.cuda_archs;
    d["cuda_runtime_version"] = b.cuda_runtime_version;
    for (auto& [k, v] : b.features) feats[nb::str(k.c_str())] = v;
    d["features"] = feats;
    return d;
  }, "Version, compiled CUDA archs, CUDA runtime version and feature toggles of this build.");

  m.def("devices", [] {
    nb::list out;
    for (const auto& dev : devices()) {
      nb::dict d;
      d["ordinal"] = dev.ordinal; d["name"] = dev.name; d["sm"] = dev.sm_major * 10 + dev.sm_minor;
      d["multiprocessors"] = dev.multiprocessors; d["total_memory"] = dev.total_memory;
      out.append(d);
    }
    return out;
  }, "CUDA devices the runtime sees; empty (not an error) without a driver or GPU.");
  m.def("device_probe_message", &device_probe_message, "Why devices() is empty, or ''.");
  m.def("add_library_dir", &add_library_dir, "dir"_a,
        "A directory to look for the libraries loaded at run time (libcublasLt, libcudnn) in, before their first use.");

  m.def("empty",
        [](std::vector<int64_t> shape, DType dtype, int device) {
          int64_t n = 1;
          for (int64_t s : shape) {
            if (s < 0) throw InvalidArgument("empty: shape " + shape_str(shape) + " has a negative dimension");
            n *= s;
          }
          void* p = device_malloc(n * int64_t(dtype_size(dtype)), device);
          nb::capsule owner(p, [](void* q) noexcept { device_free(q); });
          std::vector<size_t> sh(shape.begin(), shape.end());
          return nb::ndarray<nb::array_api>(p, sh.size(), sh.data(), owner, nullptr, dlpack_from_dtype(dtype), nb::device::cuda::value,
                               device);
        },
        "shape"_a, "dtype"_a, "device"_a = 0,
        "Device memory owned by the returned DLPack array (used for frameworks like JAX that cannot lend output buffers).");
  m.def("wrap",
        [](uintptr_t ptr, std::vector<int64_t> shape, DType dtype, int device, nb::object owner) {
          for (int64_t s : shape)
            if (s < 0) throw InvalidArgument("wrap: shape " + shape_str(shape) + " has a negative dimension");
          std::vector<size_t> sh(shape.begin(), shape.end());
          return nb::ndarray<nb::array_api>(reinterpret_cast<void*>(ptr), sh.size(), sh.data(), owner, nullptr,
                                            dlpack_from_dtype(dtype), nb::device::cuda::value, device);
        },
        "ptr"_a, "shape"_a, "dtype"_a, "device"_a, "owner"_a,
        "A contiguous DLPack array over device memory that `owner` keeps alive (e.g. a CuPy pool allocation "
        "holding a dtype CuPy has no array type for).");
  m.def("clear_workspaces", &clear_workspaces,
        "Frees the scratch buffers the functional ops keep per (device, stream) (cuBLASLt's workspace among "
        "them; the core's own device memory, outside the frameworks' pools); the next call allocates again. "
        "Waits for the device's queued work. Returns how many there were.");
}

}  // namespace baracuda::py
