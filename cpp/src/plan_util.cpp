#include "plan_util.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "baracuda/errors.h"

namespace baracuda {

std::pair<uintptr_t, uintptr_t> byte_range(const TensorView& v) {
  intptr_t lo = 0, hi = 0;
  const intptr_t es = intptr_t(dtype_size(v.dtype));
  for (int i = 0; i < v.ndim; ++i) {
    if (v.shape[i] == 0) return {0, 0};
    const intptr_t ext = intptr_t(v.strides[i]) * (v.shape[i] - 1) * es;
    (ext < 0 ? lo : hi) += ext;
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(v.data);
  return {base + lo, base + hi + es};
}

namespace {

// The outermost (largest-stride, size > 1) dim's stride in bytes and the byte span of one index of
// it (the other dims' reach); {0, 0} when there is no such dim or a stride is negative.
std::pair<int64_t, int64_t> outer_stride_and_row_span(const TensorView& v) {
  const int64_t es = int64_t(dtype_size(v.dtype));
  int outer = -1;
  for (int i = 0; i < v.ndim; ++i) {
    if (v.strides[i] < 0) return {0, 0};
    if (v.shape[i] > 1 && (outer < 0 || v.strides[i] > v.strides[outer])) outer = i;
  }
  if (outer < 0) return {0, 0};
  int64_t reach = 0;
  for (int i = 0; i < v.ndim; ++i)
    if (i != outer) reach += v.strides[i] * (v.shape[i] - 1);
  return {v.strides[outer] * es, (reach + 1) * es};
}

}  // namespace

bool views_may_overlap(const TensorView& a, const TensorView& b) {
  if (!ranges_overlap(byte_range(a), byte_range(b))) return false;
  const auto [sa, span_a] = outer_stride_and_row_span(a);
  const auto [sb, span_b] = outer_stride_and_row_span(b);
  if (sa == 0 || sa != sb || span_a > sa || span_b > sb) return true;
  const int64_t oa = int64_t(reinterpret_cast<uintptr_t>(a.data) % uint64_t(sa));
  const int64_t ob = int64_t(reinterpret_cast<uintptr_t>(b.data) % uint64_t(sa));
  // each row of a covers [oa, oa + span_a) modulo the stride, each row of b [ob, ob + span_b)
  return ((ob - oa) % sa + sa) % sa < span_a || ((oa - ob) % sa + sa) % sa < span_b;
}

bool same_view(const TensorView& a, const TensorView& b) {
  if (a.data != b.data || dtype_size(a.dtype) != dtype_size(b.dtype) || a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i] || (a.shape[i] > 1 && a.strides[i] != b.strides[i])) return false;
  return true;
}

bool non_overlapping(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size)
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return true;
    if (shape[i] > 1) dims.push_back({std::llabs(strides[i]), shape[i]});
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // largest offset reachable by the inner dims
  for (auto [st, sz] : dims) {
    if (st <= reach) return false;
    reach += st * (sz - 1);
  }
  return true;
}

void check_view(const std::string& op, const std::string& name, const TensorView& v, const TensorSpec& s,
                int device, const char* device_owner) {
  if (v.dtype != s.dtype)
    throw InvalidDType(op + ": " + name + " is " + dtype_name(v.dtype) + ", the plan was selected for " +
                       dtype_name(s.dtype));
  const auto st = s.effective_strides();
  bool ok = size_t(v.ndim) == s.shape.size();
  for (int i = 0; ok && i < v.ndim; ++i) ok = v.shape[i] == s.shape[i];
  if (!ok)
    throw InvalidArgument(op + ": " + name + " has shape " + shape_str(v.shape, v.ndim) +
                          ", the plan was selected for " + shape_str(s.shape));
  for (int i = 0; i < v.ndim; ++i)
    if (v.shape[i] > 1 && v.strides[i] != st[i])
      throw InvalidArgument(op + ": " + name + " has strides " + shape_str(v.strides, v.ndim) +
                            ", the plan was selected for " + shape_str(st) + " (select a plan for these strides)");
  if (v.data == nullptr && v.numel() > 0) throw InvalidArgument(op + ": " + name + " has a null data pointer");
  if (v.device != device)
    throw InvalidArgument(op + ": " + name + " is on cuda:" + std::to_string(v.device) + " but " + device_owner + " is on cuda:" +
                          std::to_string(device) + "; all operands must be on one device");
}

void check_like(const std::string& op, const TensorView& v, const TensorSpec& like, const std::string& name,
                const char* of, int device, const char* device_owner) {
  check_presence(op, v, true, name, "the plan writes or reads it");
  if (v.dtype != like.dtype)
    throw InvalidDType(op + ": " + name + " is " + std::string(dtype_name(v.dtype)) + "; expected " +
                       dtype_name(like.dtype) + " (" + of + "'s dtype)");
  if (!shape_is(v, like.shape))
    throw InvalidArgument(op + ": " + name + " has shape " + shape_str(v.shape, v.ndim) + "; expected " + of +
                          "'s shape " + shape_str(like.shape));
  check_same_device(op, v, device, name, device_owner);
  const int r = v.ndim;
  if (r > 0 && v.shape[r - 1] > 1 && v.strides[r - 1] != 1)
    throw Unsupported(op + ": " + name + " has stride " + std::to_string(v.strides[r - 1]) +
                      " along its last dimension, which must be contiguous");
  for (int d = 0; d + 1 < r; ++d)
    if (v.strides[d] < 0) throw Unsupported(op + ": " + name + " has a negative stride");
}

void check_presence(const std::string& op, const TensorView& v, bool needed, const std::string& name,
                    const std::string& why) {
  const bool given = v.data != nullptr;
  const bool has = given || (v.ndim > 0 && v.numel() == 0);
  if (needed && !has) throw InvalidArgument(op + ": " + name + " is missing; " + why);
  if (!needed && given) throw InvalidArgument(op + ": " + name + " is given; " + why);
}

void check_same_device(const std::string& op, const TensorView& v, int device, const std::string& name,
                       const char* device_owner) {
  if (v.device != device)
    throw InvalidArgument(op + ": " + name + " is on cuda:" + std::to_string(v.device) + " but " + device_owner +
                          " is on cuda:" + std::to_string(device) + "; all operands must be on one device");
}

bool shape_is(const TensorView& v, const std::vector<int64_t>& shape) {
  if (size_t(v.ndim) != shape.size()) return false;
  for (int i = 0; i < v.ndim; ++i)
    if (v.shape[i] != shape[i]) return false;
  return true;
}

int64_t checked_numel(const std::string& op, const std::string& name, const std::vector<int64_t>& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;  // empty, however large the rest
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      throw Unsupported(op + ": " + name + " of shape " + shape_str(shape) + " has more than 2^63 - 1 elements");
  return n;
}

void check_aliasing(const std::string& op, const std::vector<NamedView>& outputs, const std::vector<NamedView>& inputs,
                    const std::vector<std::pair<const TensorView*, const TensorView*>>& in_place) {
  for (size_t o = 0; o < outputs.size(); ++o) {
    const TensorView* out = outputs[o].view;
    if (!out || !out->data) continue;
    if (!non_overlapping(std::vector<int64_t>(out->shape, out->shape + out->ndim),
                         std::vector<int64_t>(out->strides, out->strides + out->ndim)))
      throw InvalidArgument(op + ": " + outputs[o].name + " has overlapping elements (strides " +
                            shape_str(out->strides, out->ndim) + "); an output must address each element once");
    for (const auto& [name, in] : inputs) {
      if (!in || !in->data || !views_may_overlap(*out, *in)) continue;
      bool allowed = false;
      for (const auto& [po, pi] : in_place) allowed = allowed || (po == out && pi == in && same_view(*out, *in));
      if (!allowed)
        throw InvalidArgument(op + ": " + outputs[o].name + " overlaps " + name +
                              (in_place.empty() ? std::string("; expected separate memory")
                                                : std::string(" without being the same view (in place)")));
    }
    for (size_t p = o + 1; p < outputs.size(); ++p)
      if (outputs[p].view && outputs[p].view->data && views_may_overlap(*out, *outputs[p].view))
        throw InvalidArgument(op + ": " + outputs[o].name + " overlaps " + outputs[p].name +
                              "; outputs must not overlap");
  }
}

void check_workspace(const std::string& op, const void* workspace, int64_t workspace_size, int64_t need,
                     const std::vector<NamedView>& operands) {
  if (need <= 0) return;
  if (workspace == nullptr || workspace_size < need)
    throw InvalidArgument(op + ": workspace: this plan needs " + std::to_string(need) + " bytes, got " +
                          std::to_string(workspace ? workspace_size : 0));
  const uintptr_t w = reinterpret_cast<uintptr_t>(workspace);
  if (w % 256) throw InvalidArgument(op + ": workspace must be 256-byte aligned");
  const std::pair<uintptr_t, uintptr_t> wr{w, w + uintptr_t(need)};
  for (const auto& [name, v] : operands)
    if (v && v->data && ranges_overlap(wr, byte_range(*v))) throw InvalidArgument(op + ": workspace overlaps " + name);
}

void check_workspace(const std::string& op, const void* workspace, int64_t workspace_size, int64_t need,
                     const std::vector<NamedView>& reads, const std::vector<NamedView>& writes) {
  std::vector<NamedView> operands = reads;
  operands.insert(operands.end(), writes.begin(), writes.end());
  check_workspace(op, workspace, workspace_size, need, operands);
}

std::string compiled_archs() {
  // "80,90" -> "sm_80,sm_90"; CMake's "90-virtual" (PTX only, JIT-compiled by the driver) ->
  // "compute_90"; "90-real" -> "sm_90".
  std::string out, list = BARACUDA_CUDA_ARCHS;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string a = list.substr(start, end - start);
    std::string prefix = "sm_";
    for (const char* suffix : {"-virtual", "-real"}) {
      const size_t n = std::char_traits<char>::length(suffix);
      if (a.size() > n && a.compare(a.size() - n, n, suffix) == 0) {
        if (suffix[1] == 'v') prefix = "compute_";
        a.resize(a.size() - n);
      }
    }
    if (!a.empty()) out += (out.empty() ? "" : ",") + prefix + a;
    start = end + 1;
  }
  return out;
}

bool compiled_for(int min_arch) {
  const std::string a = compiled_archs();
  for (size_t pos = 0; (pos = a.find('_', pos)) != std::string::npos; ++pos)
    if (std::atoi(a.c_str() + pos + 1) >= min_arch) return true;
  return false;
}

void check_feature_vector(const std::string& op, const TensorView& v, DType want, const std::string& name, int64_t n,
                          const std::string& n_of, const std::string& dtype_of, int device) {
  if (v.dtype != want)
    throw InvalidDType(op + ": " + name + " is " + std::string(dtype_name(v.dtype)) + "; expected " + dtype_name(want) +
                       " (" + dtype_of + ")");
  if (v.ndim != 1 || v.shape[0] != n)
    throw InvalidArgument(op + ": " + name + " has shape " + shape_str(v.shape, v.ndim) + "; expected (" +
                          std::to_string(n) + ",) (" + n_of + ")");
  if (n > 1 && v.strides[0] != 1)
    throw Unsupported(op + ": " + name + " has stride " + std::to_string(v.strides[0]) + "; unit stride is required");
  check_same_device(op, v, device, name);
}

void check_side_operand(const std::string& op, const TensorView& v, bool needed, const std::string& name, DType want,
                        const std::vector<int64_t>& shape, const std::string& why, bool contiguous, int device,
                        const char* device_owner) {
  check_presence(op, v, needed, name, why);
  if (!needed) return;
  if (v.dtype != want)
    throw InvalidDType(op + ": " + name + " is " + std::string(dtype_name(v.dtype)) + "; expected " + dtype_name(want));
  if (!shape_is(v, shape))
    throw InvalidArgument(op + ": " + name + " has shape " + shape_str(v.shape, v.ndim) + "; expected " +
                          shape_str(shape));
  if (contiguous) {
    if (v.numel() > 0 && !v.is_contiguous()) throw InvalidArgument(op + ": " + name + " must be contiguous");
  } else {
    for (int d = 0; d < v.ndim; ++d)
      if (v.strides[d] < 0) throw Unsupported(op + ": " + name + " has a negative stride");
  }
  check_same_device(op, v, device, name, device_owner);
}

std::string num_str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

namespace {
int device_attribute(cudaDeviceAttr attr) {
  int dev = 0, value = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&value, attr, dev) != cudaSuccess) {
    cudaGetLastError();  // clear the failed query's error
    return 0;
  }
  return value;
}
}  // namespace

int current_device_major() { return device_attribute(cudaDevAttrComputeCapabilityMajor); }
int current_device_cc() {
  return 10 * current_device_major() + device_attribute(cudaDevAttrComputeCapabilityMinor);
}
int current_device_sms() { return device_attribute(cudaDevAttrMultiProcessorCount); }
int current_device_smem_per_sm() { return device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor); }
int current_device() {
  int devices = 0, dev = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 || cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();  // clear the "no device" status
    return -1;
  }
  return dev;
}

bool is_fp8_cache_of(DType cache, DType src) {
  return (cache == DType::Float8E4M3 || cache == DType::Float8E5M2) &&
         (src == DType::Float32 || src == DType::Float16 || src == DType::BFloat16);
}

void check_spec(const std::string& op, const TensorSpec& s, const std::string& name, bool complex_ok) {
  if (s.shape.size() > size_t(kMaxRank))
    throw Unsupported(op + ": " + name + " has rank " + std::to_string(s.shape.size()) + "; at most " +
                      std::to_string(kMaxRank) + " is supported");
  for (int64_t d : s.shape)
    if (d < 0) throw InvalidArgument(op + ": " + name + " has a negative dimension in shape " + shape_str(s.shape));
  if (!s.strides.empty() && s.strides.size() != s.shape.size())
    throw InvalidArgument(op + ": " + name + " has " + std::to_string(s.strides.size()) + " strides for rank " +
                          std::to_string(s.shape.size()));
  if (!complex_ok && is_complex(s.dtype))
    throw Unsupported(op + ": " + name + " is " + dtype_name(s.dtype) + "; complex dtypes are not covered yet");
}

void check_paged_cache(const std::string& op, const TensorSpec& cache, int64_t heads, int64_t dim, DType dtype,
                       const char* cname, const char* sname, bool quantized_ok) {
  if (cache.shape.size() != 4)
    throw InvalidArgument(op + ": " + cname + " has shape " + shape_str(cache.shape) +
                          "; expected [pages, page_size, kv_heads, head_dim] (a heads-first cache as its permuted view)");
  if (cache.shape[2] != heads || cache.shape[3] != dim)
    throw InvalidArgument(op + ": " + cname + " has shape " + shape_str(cache.shape) + " but " + sname + " has " +
                          std::to_string(heads) + " heads of " + std::to_string(dim) +
                          ": kv_heads and head_dim must match");
  if (cache.dtype != dtype && !(quantized_ok && is_fp8_cache_of(cache.dtype, dtype)))
    throw InvalidDType(op + ": " + cname + " is " + dtype_name(cache.dtype) + " but " + sname + " is " +
                       dtype_name(dtype) + (quantized_ok ? "; expected the same dtype, or an fp8 cache of a float32 / "
                                                           "float16 / bfloat16 source"
                                                         : "; the append is a copy (convert before)"));
  const auto st = cache.effective_strides();
  if (cache.shape.back() > 1 && st.back() != 1)
    throw Unsupported(op + ": " + std::string(cname) + " must be contiguous along head_dim");
  for (int64_t v : st)
    if (v < 0) throw Unsupported(op + ": " + std::string(cname) + " has a negative stride");
  if (!non_overlapping(cache.shape, st))
    throw InvalidArgument(op + ": " + std::string(cname) + "'s strides make two cache slots share memory");
}

}  // namespace baracuda
