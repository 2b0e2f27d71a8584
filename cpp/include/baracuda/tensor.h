// TensorView: a non-owning view of device memory. Shapes and strides are int64 and in
// elements; strides may be 0 (broadcast) or negative.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "baracuda/dtype.h"

namespace baracuda {

// Rank of a view. Views of higher rank are refused with Unsupported; elementwise plans
// coalesce dimensions first, so this bounds the caller's rank, not the kernel's work.
constexpr int kMaxRank = 12;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::Float32;
  int32_t ndim = 0;
  int32_t device = 0;          // CUDA device ordinal
  int64_t shape[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  bool is_contiguous() const;  // row-major dense (size-1 dims' strides ignored)
};

// Build a view from a shape and optional strides (empty = row-major contiguous).
TensorView make_view(void* data, DType dtype, const std::vector<int64_t>& shape,
                     const std::vector<int64_t>& strides = {}, int device = 0);

// Shape + dtype + strides, without a pointer: what descriptors hold.
struct TensorSpec {
  std::vector<int64_t> shape;
  DType dtype = DType::Float32;
  std::vector<int64_t> strides;  // empty = row-major contiguous
  std::vector<int64_t> effective_strides() const;
  bool operator==(const TensorSpec& o) const {
    return shape == o.shape && dtype == o.dtype && effective_strides() == o.effective_strides();
  }
  std::string str() const;
};

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
std::string shape_str(const int64_t* shape, int ndim);
inline std::string shape_str(const std::vector<int64_t>& s) { return shape_str(s.data(), (int)s.size()); }

}  // namespace baracuda
