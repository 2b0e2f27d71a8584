// Checks and descriptions every plan family shares: a view against the spec it was selected
// for, byte ranges for aliasing checks, the compiled-arch string for SKUs.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "baracuda/tensor.h"

namespace baracuda {

// [lo, hi) bytes a view touches ({0, 0} when empty).
std::pair<uintptr_t, uintptr_t> byte_range(const TensorView& v);
inline bool ranges_overlap(std::pair<uintptr_t, uintptr_t> a, std::pair<uintptr_t, uintptr_t> b) {
  return a.first < b.second && b.first < a.second;
}
// May two views share a byte? Their byte ranges overlap and they are not interleaved rows of one
// buffer (same outermost stride, each one's row span within it, the spans disjoint modulo that
// stride: q, k and v as column slices of a fused qkv projection).
bool views_may_overlap(const TensorView& a, const TensorView& b);
// Same pointer, element size, shape and strides of non-size-1 dims (an in-place operand).
bool same_view(const TensorView& a, const TensorView& b);
// n rounded up to a multiple of 256: workspace regions start 256-byte aligned.
constexpr int64_t align256(int64_t n) { return (n + 255) / 256 * 256; }
// True when no two in-bounds indices of (shape, strides) address the same element.
bool non_overlapping(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);

// Throws InvalidDType / InvalidArgument "<op>: <name> ..." when `v` differs from `s` (dtype,
// shape, strides of non-size-1 dims), has a null pointer, or is not on `device`.
// `device_owner` names the operand whose device the others must share.
void check_view(const std::string& op, const std::string& name, const TensorView& v, const TensorSpec& s,
                int device, const char* device_owner = "out");

// An optional operand's presence must match the plan: throws "<op>: <name> is missing; <why>" or
// "<op>: <name> is given; <why>". An empty tensor may have a null pointer: it counts as present.
void check_presence(const std::string& op, const TensorView& v, bool needed, const std::string& name,
                    const std::string& why);
// Throws "<op>: <name> is on cuda:a but <owner> is on cuda:b" unless v is on `device`.
void check_same_device(const std::string& op, const TensorView& v, int device, const std::string& name,
                       const char* device_owner = "x");
bool shape_is(const TensorView& v, const std::vector<int64_t>& shape);
// An output (or gradient) laid out by the caller, matching `like` (the spec of operand `of`) in
// dtype and shape, on `device`, last dim contiguous, no negative stride; throws naming `name`.
void check_like(const std::string& op, const TensorView& v, const TensorSpec& like, const std::string& name,
                const char* of, int device, const char* device_owner);
// A per-feature vector (a norm's weight, bias or their gradients, a channel norm's running
// statistics): dtype `want` (`dtype_of` says whose dtype that is), shape (n,) (`n_of` says what n
// is), unit stride when n > 1, on `device`; throws naming `name`.
void check_feature_vector(const std::string& op, const TensorView& v, DType want, const std::string& name, int64_t n,
                          const std::string& n_of, const std::string& dtype_of, int device);
// A side operand (a table, offsets, slopes, lse) of a fixed dtype and shape: present exactly when
// `needed` (check_presence with `why`), then its dtype, shape, layout (row-major contiguous when
// `contiguous`, else any non-negative strides) and device; throws naming it.
void check_side_operand(const std::string& op, const TensorView& v, bool needed, const std::string& name, DType want,
                        const std::vector<int64_t>& shape, const std::string& why, bool contiguous, int device,
                        const char* device_owner);
// The checks every strided operand of a plan gets in select: rank at most kMaxRank, no negative
// dimension, as many strides as dimensions (when strides are given), and, unless `complex_ok`, no
// complex dtype. Errors name `op` and the operand.
void check_spec(const std::string& op, const TensorSpec& s, const std::string& name, bool complex_ok = true);
// A paged KV cache [pages, page_size, heads, dim] for a source `sname` of `heads` x `dim` rows of
// `dtype`: rank, heads / dim, dtype (the append is a copy; with `quantized_ok` an fp8 cache of a
// float32 / float16 / bfloat16 source too), the last dim contiguous, no negative stride, no two
// slots sharing memory (a heads-first cache passes as its permuted view).
void check_paged_cache(const std::string& op, const TensorSpec& cache, int64_t heads, int64_t dim, DType dtype,
                       const char* cname, const char* sname, bool quantized_ok = false);
// An fp8 cache dtype a float32 / float16 / bfloat16 source quantizes into.
bool is_fp8_cache_of(DType cache, DType src);
// The widest memory access, in bytes (16 down to 1), that every value fitted so far is a multiple of:
// row lengths and strides in bytes, and data addresses (the vector width a copy kernel may use).
struct AccessWidth {
  int64_t bytes = 16;
  void fit(int64_t v) {
    while (bytes > 1 && v % bytes != 0) bytes /= 2;
  }
  void fit(const void* p) { fit(int64_t(reinterpret_cast<uintptr_t>(p))); }
};
// An iteration space's dims merged where they are contiguous for every operand: push them
// outermost first (size-1 dims dropped by the caller: their strides say nothing); a dim of n
// elements folds into the previous one when each operand's previous stride is its stride times n.
// A stride the caller encodes as 0 for some dims (a reduced dim's output, a kept dim's reduction
// index) keeps those dims from merging with the others. Elementwise, reduction, scan, softmax and
// the pointwise losses build their launch geometry on it.
template <int N> struct MergedDims {
  std::vector<int64_t> size;
  std::vector<std::array<int64_t, N>> stride;
  void push(int64_t n, const std::array<int64_t, N>& s) {
    if (!size.empty()) {
      bool merge = true;
      for (int a = 0; a < N && merge; ++a) merge = stride.back()[a] == s[a] * n;
      if (merge) {
        size.back() *= n;
        stride.back() = s;
        return;
      }
    }
    size.push_back(n);
    stride.push_back(s);
  }
  int rank() const { return int(size.size()); }
};

// A double as the shortest text an ostream gives it (error messages).
std::string num_str(double v);

// The element count of `shape` (a broadcast view's logical size may exceed its memory); throws
// Unsupported "<op>: <name> of shape ... has more than 2^63 - 1 elements" when it overflows.
int64_t checked_numel(const std::string& op, const std::string& name, const std::vector<int64_t>& shape);

// A named operand for the checks below; views with data == nullptr are skipped.
struct NamedView {
  std::string name;
  const TensorView* view;
};
// The aliasing rules of one run: every output addresses each of its elements once (no 0 or too
// short stride), overlaps no other output, and overlaps no input unless (output, input) is listed
// in `in_place` and the two are the same view (kernels that read and write an element in the
// same thread). Views with data == nullptr are skipped. Throws InvalidArgument naming both.
void check_aliasing(const std::string& op, const std::vector<NamedView>& outputs, const std::vector<NamedView>& inputs,
                    const std::vector<std::pair<const TensorView*, const TensorView*>>& in_place = {});
// The workspace of a run: `need` bytes or more, 256-byte aligned, overlapping none of
// `operands`. Nothing is checked when need == 0.
void check_workspace(const std::string& op, const void* workspace, int64_t workspace_size, int64_t need,
                     const std::vector<NamedView>& operands);
// The same over two lists (a run's reads and writes).
void check_workspace(const std::string& op, const void* workspace, int64_t workspace_size, int64_t need,
                     const std::vector<NamedView>& reads, const std::vector<NamedView>& writes);

// The current device's compute-capability major and multiprocessor count (0 when there is no
// device or driver; the failed query's error is cleared): what select() sizes grids by.
int current_device_major();
int current_device_sms();
// The current device's shared memory per multiprocessor in bytes (0 when there is none).
int current_device_smem_per_sm();
// The current device's ordinal, -1 when there is no device or driver (the error cleared): whether
// select() can prepare per-device state now, or leaves it to the first run.
int current_device();
// major * 10 + minor (90 for an H100 / H200): arch-specific code (sm_90a) runs on that one only.
int current_device_cc();

// "sm_80,sm_90": the archs this build compiled kernels for.
std::string compiled_archs();
// Whether this build compiled kernels (SASS or PTX) for sm_<min_arch> or later, e.g. 90: clusters.
bool compiled_for(int min_arch);

}  // namespace baracuda
