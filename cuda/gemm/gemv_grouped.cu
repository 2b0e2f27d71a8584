// Dispatch of the grouped (mixture-of-experts) decode GEMV: the configuration choice, the
// grid size, the variant names and the public entry points of gemm_launch.h. The kernels are in
// gemv_grouped.cuh (one TU per dtype).
//
// The host does not know the group sizes. It sizes the launch for the most work the offsets
// can describe, items <= ntiles * min(E * ceil(max_rows / CM), min(E, T) + ceil(T / CM))
// (every expert with rows adds at most one partial chunk), and picks the split (warps per
// block, rows of w per block) with the dense kernel's launch model applied to that much work,
// i.e. to a dense GEMV with N' = N * chunks rows of w. Blocks past the real item count walk
// the offsets and exit without reading w. The device loop is grid-strided, so the result is
// right whatever the offsets hold; the estimate only sizes the grid.
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "gemm/gemv_grouped.cuh"

namespace baracuda::gemm {
namespace detail {
namespace {

struct GroupedChoice {
  GemvCfg c;
  int cm = 8;         // rows of x per work item
  int64_t chunks = 1; // upper estimate of the row chunks of all experts together
  int64_t grid = 1;
};

// The overrides select was told to force: the split (kw in {1,2,4,8,16}), the rows per block of
// the mma path (rn in {1,2,4}: 8/16/32 rows), and a grid cap of `waves` times the resident blocks.
void apply_grouped_override(const GroupedGemvArgs& a, GemvCfg& c, int& waves) {
  if (a.kw == 1 || a.kw == 2 || a.kw == 4 || a.kw == 8 || a.kw == 16) c.kw = a.kw;
  if (c.path == GemvPath::Mma && (a.rn == 1 || a.rn == 2 || a.rn == 4)) c.rn = a.rn;
  if (a.waves > 0) waves = a.waves;
}

const GemvOccupancyQuery kGroupedOccupancy[3] = {grouped_occupancy_bf16, grouped_occupancy_f16, grouped_occupancy_f32};
int grouped_occupancy(DType dt, const GemvCfg& c) {
  return gemv_cached_occupancy(1, dt, c, gemv_current_device(), kGroupedOccupancy);
}

GroupedChoice choose(const GroupedGemvArgs& a) {
  const bool half = a.dtype != DType::Float32;
  const int V = half ? 8 : 4;
  GroupedChoice r;
  GemvCfg& c = r.c;
  c.vec = aligned16(a.x) && aligned16(a.w) && a.K % V == 0 && (a.T <= 1 || a.ldx % V == 0) &&
          (a.N <= 1 || a.ldw % V == 0) && (a.E <= 1 || a.sw % V == 0);
  c.path = half && c.vec ? GemvPath::Mma : GemvPath::Fma;
  int64_t mr = a.max_rows > 0 && a.max_rows < a.T ? a.max_rows : a.T;
  if (mr < 1) mr = 1;
  const int64_t mr16 = mr < kGemvLowMMaxM ? mr : kGemvLowMMaxM;
  c.mt = c.path == GemvPath::Mma ? (mr16 > 8 ? 16 : 8) : gemv_pow2_at_least(mr16);
  r.cm = c.mt;

  // Row chunks, at most: each expert ceil(max_rows / CM); together T / CM plus one partial
  // chunk per expert with rows.
  const int64_t per_expert = (mr + r.cm - 1) / r.cm;
  const int64_t by_experts = a.E <= (int64_t(1) << 40) / per_expert ? a.E * per_expert : (int64_t(1) << 40);
  const int64_t by_rows = (a.E < a.T ? a.E : a.T) + (a.T + r.cm - 1) / r.cm;
  r.chunks = by_experts < by_rows ? by_experts : by_rows;
  if (r.chunks < 1) r.chunks = 1;

  // The split: the dense model on N * chunks rows of w (same path, bucket and alignment).
  c.rn = 1;
  c.kw = 1;
  const int64_t K = a.alpha == 0.0f ? 0 : a.K;
  if (K > 0) {
    GemvLowMArgs d;
    d.dtype = a.dtype;
    d.bias_dtype = a.dtype;
    d.M = r.cm;
    const int64_t cap = int64_t(1) << 40;
    d.N = a.N <= cap / r.chunks ? a.N * r.chunks : cap;
    d.K = K;
    d.x = c.vec ? nullptr : reinterpret_cast<const void*>(uintptr_t(1));  // same vec decision
    d.w = nullptr;
    d.ldx = d.ldw = K;
    d.alpha = a.alpha;
    const GemvCfg m = gemv_model_cfg(d);
    c.kw = m.kw;
    c.rn = c.path == GemvPath::Mma ? m.rn : 1;
  }
  int waves = 0;
  apply_grouped_override(a, c, waves);

  const int64_t rows = gemv_rows_per_block(c);
  const int64_t ntiles = (a.N + rows - 1) / rows;
  const int64_t max_grid = 0x7fffffff;
  r.grid = ntiles <= max_grid / r.chunks ? ntiles * r.chunks : max_grid;
  if (waves > 0) {
    const int64_t resident =
        int64_t(grouped_occupancy(a.dtype, c)) * int64_t(gemv_device_sms()) * int64_t(waves);
    if (resident > 0 && r.grid > resident) r.grid = resident;
  }
  if (r.grid < 1) r.grid = 1;
  return r;
}

}  // namespace
}  // namespace detail

bool grouped_gemv_supported(const GroupedGemvArgs& a) {
  const bool dt = a.dtype == DType::BFloat16 || a.dtype == DType::Float16 || a.dtype == DType::Float32;
  const bool off = a.offsets_dtype == DType::Int32 || a.offsets_dtype == DType::Int64;
  return dt && off && a.E >= 0 && a.N >= 0 && a.K >= 0 && a.T >= 0;
}

void grouped_gemv(const GroupedGemvArgs& a, void* stream) {
  if (!grouped_gemv_supported(a))  // a contract violation: select() refuses these first
    throw Unsupported(std::string("grouped_gemv: dtype ") + dtype_name(a.dtype) + " / offsets " +
                      dtype_name(a.offsets_dtype) +
                      " has no kernel; expected bf16, f16 or f32 with int32 or int64 offsets");
  if (a.E == 0 || a.N == 0 || a.T == 0) return;
  const detail::GroupedChoice r = detail::choose(a);
  detail::GemvGroupParams q;
  detail::GemvParams& p = q.p;
  p.x = a.x;
  p.w = a.w;
  p.out = a.out;
  p.bias = a.bias;
  p.ldx = a.ldx;
  p.ldw = a.ldw;
  p.ldo = a.ldo;
  p.N = a.N;
  p.K = a.alpha == 0.0f ? 0 : a.K;
  const int64_t rows = detail::gemv_rows_per_block(r.c);
  p.ntiles = (a.N + rows - 1) / rows;  // per expert
  p.M = 0;                             // per item
  p.alpha = a.alpha;
  p.beta = a.beta;
  p.bias_f32 = 0;  // bias has the output dtype
  q.offsets = a.offsets;
  q.E = a.E;
  q.T = a.T;
  q.sw = a.sw;
  q.sbias = a.sbias;
  q.off64 = a.offsets_dtype == DType::Int64;
  switch (a.dtype) {
    case DType::BFloat16: detail::grouped_launch_bf16(q, r.c, r.grid, stream); break;
    case DType::Float16: detail::grouped_launch_f16(q, r.c, r.grid, stream); break;
    default: detail::grouped_launch_f32(q, r.c, r.grid, stream); break;
  }
}

const char* grouped_gemv_variant(const GroupedGemvArgs& a) {
  static std::mutex mu;
  static std::unordered_set<std::string> names;  // node-based: c_str() stays valid
  std::string s;
  try {
    if (!grouped_gemv_supported(a)) s = "grouped_gemv.unsupported";
    else if (a.E == 0 || a.N == 0 || a.T == 0) s = "grouped_gemv.empty";
    else s = detail::gemv_variant_name("grouped_gemv", detail::choose(a).c, a.alpha == 0.0f || a.K == 0);
    std::lock_guard<std::mutex> lock(mu);
    return names.insert(s).first->c_str();
  } catch (...) {
    return "grouped_gemv";
  }
}

}  // namespace baracuda::gemm
