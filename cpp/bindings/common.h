// What every binding file shares: tensors in through DLPack, streams, dtype conversion.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>

#include "baracuda/dtype.h"
#include "baracuda/plan.h"
#include "baracuda/tensor.h"

namespace nb = nanobind;

namespace baracuda::py {

// A tensor argument imported zero-copy through DLPack. `name` goes into every error.
// Keeps the nanobind array alive for as long as the view is used.
struct Imported {
  nb::ndarray<nb::ro> array;     // inputs
  nb::ndarray<> writable_array;  // outputs
  TensorView view;
  int framework = 0;  // 0 unknown, 1 torch, 2 cupy, 3 jax
};
Imported import_tensor(nb::handle h, const char* name, bool writable);

// The stream to launch on: explicit (int, .cuda_stream, .ptr) or, for None, the current
// stream of the framework that `like` comes from (torch, CuPy), else the legacy default.
StreamHandle resolve_stream(nb::handle stream, const Imported& like);
// JAX cannot be told about our stream: after launching on JAX arrays, wait for the work.
void finish_for_framework(const Imported& like, StreamHandle stream);

// The spec a view matches (size-1 dims' strides zeroed, contiguous strides dropped): what a
// functional entry puts in the descriptor it selects a plan for.
TensorSpec spec_of(const TensorView& v);
// Appends a view's dtype, shape and strides to a plan-cache key.
void append_key(std::string& key, const TensorView& v);

DType dtype_from_dlpack(nb::dlpack::dtype t, const char* name);
nb::dlpack::dtype dlpack_from_dtype(DType t);

void init_core(nb::module_& m);
void init_elementwise(nb::module_& m);
void init_reduction(nb::module_& m);
void init_norm(nb::module_& m);
void init_gemm(nb::module_& m);
void init_softmax(nb::module_& m);
void init_loss(nb::module_& m);
void init_scan(nb::module_& m);

}  // namespace baracuda::py
