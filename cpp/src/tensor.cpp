#include "baracuda/tensor.h"

#include <sstream>

#include "baracuda/errors.h"

namespace baracuda {

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (int i = int(shape.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

TensorView make_view(void* data, DType dtype, const std::vector<int64_t>& shape,
                     const std::vector<int64_t>& strides, int device) {
  if (shape.size() > size_t(kMaxRank))
    throw Unsupported("tensor rank " + std::to_string(shape.size()) + " exceeds the supported " +
                      std::to_string(kMaxRank));
  if (!strides.empty() && strides.size() != shape.size())
    throw InvalidArgument("strides has " + std::to_string(strides.size()) + " entries for a rank-" +
                          std::to_string(shape.size()) + " shape");
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.ndim = int(shape.size());
  v.device = device;
  auto st = strides.empty() ? contiguous_strides(shape) : strides;
  for (int i = 0; i < v.ndim; ++i) {
    v.shape[i] = shape[i];
    v.strides[i] = st[i];
  }
  return v;
}

std::vector<int64_t> TensorSpec::effective_strides() const {
  return strides.empty() ? contiguous_strides(shape) : strides;
}

std::string shape_str(const int64_t* shape, int ndim) {
  std::ostringstream os;
  os << "(";
  for (int i = 0; i < ndim; ++i) os << (i ? ", " : "") << shape[i];
  if (ndim == 1) os << ",";
  os << ")";
  return os.str();
}

std::string TensorSpec::str() const {
  std::ostringstream os;
  os << dtype_name(dtype) << shape_str(shape);
  if (!strides.empty() && strides != contiguous_strides(shape)) os << " strides=" << shape_str(strides);
  return os.str();
}

}  // namespace baracuda
