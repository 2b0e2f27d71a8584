// Low-M GEMV kernels for f32 (CUDA-core FMA; tensor cores would need TF32, which f32 GEMM
// must not silently use), plus the dispatch of every dtype: the configuration choice, the
// variant names and the public entry points of gemm_launch.h.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "gemm/gemv_lowm.cuh"

namespace baracuda::gemm {
namespace detail {

void gemv_launch_f32(const GemvLowMArgs& a, const GemvCfg& c, void* stream) {
  gemv_launch_t<float>(a, c, stream);
}
int gemv_occupancy_f32(const GemvCfg& c) { return gemv_occupancy_t<float>(c); }

int gemv_current_device() {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return dev;
}

int gemv_cached_occupancy(int family, DType dt, const GemvCfg& c, int dev, const GemvOccupancyQuery (&by_dtype)[3]) {
  static std::mutex mu;
  static std::unordered_map<uint64_t, int> cache;
  const uint64_t key = (uint64_t(family) << 56) | (uint64_t(uint32_t(dev + 1)) << 32) | (uint64_t(dt) << 24) |
                       (uint64_t(c.path) << 20) | (uint64_t(c.vec) << 19) | (uint64_t(c.mt) << 12) |
                       (uint64_t(c.rn) << 6) | uint64_t(c.kw);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  int blocks = 0;
  if (dev >= 0) blocks = by_dtype[dt == DType::BFloat16 ? 0 : dt == DType::Float16 ? 1 : 2](c);
  if (blocks > 0) {
    std::lock_guard<std::mutex> lock(mu);
    cache.emplace(key, blocks);
    return blocks;
  }
  // No device: assume ~96 registers per thread on a 64K-register, 2048-thread SM (the real
  // kernels use 56-128, so select-time names without a GPU can differ from run-time ones).
  const int threads = 32 * c.kw;
  int est = 65536 / (threads * 96);
  if (est > 2048 / threads) est = 2048 / threads;
  if (est > 32) est = 32;  // resident blocks per SM
  return est < 1 ? 1 : est;
}

int gemv_pow2_at_least(int64_t m) {
  int b = 1;
  while (b < m) b <<= 1;
  return b;
}

namespace {

// ---- the launch model ----------------------------------------------------------------
// Every configuration streams the same bytes of w; they differ in how many loads each warp
// keeps in flight, how many blocks are resident at once, and how many waves the grid takes.
// A wave of B resident blocks takes
//     max(bytes(B) / bandwidth(B), (iterations per warp + kEpilogue) * kLatency)
// (the second term: each warp iteration waits one DRAM round trip for its U x RN loads, so a
// wave cannot finish faster however little it reads), with bandwidth(B) the machine's peak, or
// less when B blocks occupy few SMs. The configuration with the least total time wins; ties
// (within 2%) go to the earlier candidate in the preference order below.
// Calibrated for H100 / H200 (132 SMs, 3.3-4.8 TB/s); on other parts only the ratios matter.
constexpr double kPeakPerSm = 30e9;  // bytes/s per SM with every SM busy (~4 TB/s / 132)
constexpr double kMaxPerSm = 80e9;   // bytes/s one SM can draw when few are busy
constexpr double kLatency = 1.0e-6;  // s, one loaded DRAM round trip
constexpr double kEpilogue = 1.5;    // round trips: block start, reduction, out/bias, store

constexpr int kDefaultSms = 132;

int device_sms(int dev) {
  static std::mutex mu;
  static std::unordered_map<int, int> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(dev);
  if (it != cache.end()) return it->second;
  int n = 0;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
    (void)cudaGetLastError();
    return kDefaultSms;
  }
  cache.emplace(dev, n);
  return n;
}

const GemvOccupancyQuery kDenseOccupancy[3] = {gemv_occupancy_bf16, gemv_occupancy_f16, gemv_occupancy_f32};
int occupancy(DType dt, const GemvCfg& c, int dev) { return gemv_cached_occupancy(0, dt, c, dev, kDenseOccupancy); }

// The split (and, for the mma path, the rows per block) select was told to force (a.kw, a.rn).
void apply_override(const GemvLowMArgs& a, GemvCfg& c) {
  const int kw = a.kw, rn = a.rn;
  if (kw == 1 || kw == 2 || kw == 4 || kw == 8 || kw == 16) c.kw = kw;
  if (c.path == GemvPath::Mma && (rn == 1 || rn == 2 || rn == 4)) c.rn = rn;
}

GemvCfg model_cfg(const GemvLowMArgs& a, GemvCfg c, int64_t K, int dev);

// The configuration for a: the path from dtype and alignment, the split from the model
// (memoized per device and shape: the model asks the occupancy API); no env override.
GemvCfg choose_cfg_model(const GemvLowMArgs& a) {
  const bool half = a.dtype != DType::Float32;
  const int es = half ? 2 : 4;
  const int V = 16 / es;
  GemvCfg c;
  c.vec = aligned16(a.x) && aligned16(a.w) && a.K % V == 0 && (a.M <= 1 || a.ldx % V == 0) &&
          (a.N <= 1 || a.ldw % V == 0);
  c.path = half && c.vec ? GemvPath::Mma : GemvPath::Fma;
  c.mt = c.path == GemvPath::Mma ? (a.M > 8 ? 16 : 8) : gemv_pow2_at_least(a.M < 1 ? 1 : a.M);
  c.rn = 1;
  c.kw = 1;
  const int64_t K = a.alpha == 0.0f ? 0 : a.K;
  if (K > 0) {
    struct Key {
      uint64_t tag;
      int64_t n, k;
      bool operator==(const Key& o) const { return tag == o.tag && n == o.n && k == o.k; }
    };
    struct KeyHash {
      size_t operator()(const Key& q) const {
        uint64_t h = q.tag * 0x9E3779B97F4A7C15ull;
        h ^= uint64_t(q.n) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
        h ^= uint64_t(q.k) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
        return size_t(h);
      }
    };
    static std::mutex mu;
    static std::unordered_map<Key, GemvCfg, KeyHash> memo;
    const int dev = gemv_current_device();
    const Key key{(uint64_t(uint32_t(dev + 1)) << 16) | (uint64_t(a.dtype) << 8) |
                      (uint64_t(c.vec) << 7) | uint64_t(c.mt),
                  a.N, K};
    bool found = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = memo.find(key);
      if (it != memo.end()) {
        c = it->second;
        found = true;
      }
    }
    if (!found) {
      c = model_cfg(a, c, K, dev);
      std::lock_guard<std::mutex> lock(mu);
      if (memo.size() > 4096) memo.clear();  // bound it under shape churn
      memo.emplace(key, c);
    }
  }
  return c;
}

// choose_cfg_model, then the override.
GemvCfg choose_cfg(const GemvLowMArgs& a) {
  GemvCfg c = choose_cfg_model(a);
  apply_override(a, c);
  return c;
}

GemvCfg model_cfg(const GemvLowMArgs& a, GemvCfg c, int64_t K, int dev) {
  const int es = a.dtype == DType::Float32 ? 4 : 2;
  {
    const int nsm = dev >= 0 ? device_sms(dev) : kDefaultSms;
    static const int kw_order[] = {8, 4, 16, 2, 1};
    static const int rn_order[] = {1, 2, 4};
    const int n_rn = c.path == GemvPath::Mma ? 3 : 1;
    double best = 0;
    GemvCfg pick = c;
    bool have = false;
    for (int kw : kw_order) {
      for (int ri = 0; ri < n_rn; ++ri) {
        GemvCfg t = c;
        t.kw = kw;
        t.rn = rn_order[ri];
        const int64_t rows = gemv_rows_per_block(t);
        const int64_t ch = gemv_chunk_k(t, es);
        const int64_t u = gemv_unroll(t);
        const int64_t ntiles = (a.N + rows - 1) / rows;
        const int64_t nch = (K + ch - 1) / ch;
        const int64_t per_warp = (nch + kw - 1) / kw;
        const double iters = double((per_warp + u - 1) / u);
        const int64_t resident = int64_t(occupancy(a.dtype, t, dev)) * nsm;
        const int64_t full = (ntiles - 1) / resident;  // waves before the last
        const int64_t last = ntiles - full * resident;
        auto wave = [&](int64_t blocks) {
          const double bytes = double(blocks) * double(rows) * double(K) * es;
          const double active = double(blocks < nsm ? blocks : nsm);
          double bw = active * kMaxPerSm;
          if (bw > nsm * kPeakPerSm) bw = nsm * kPeakPerSm;
          const double lat = (iters + kEpilogue) * kLatency;
          return bytes / bw > lat ? bytes / bw : lat;
        };
        const double time = double(full) * wave(resident) + wave(last);
        if (!have || time < best * 0.98) {
          have = true;
          best = time;
          pick = t;
        }
      }
    }
    c = pick;
  }
  return c;
}

}  // namespace

std::string gemv_variant_name(const char* family, const GemvCfg& c, bool k0) {
  std::string s = std::string(family) + ".";
  s += c.path == GemvPath::Mma ? "mma" : "fma";
  s += ".m" + std::to_string(c.mt);
  s += ".n" + std::to_string(gemv_rows_per_block(c));
  s += c.vec ? ".vec16" : ".scalar";
  s += ".splitk" + std::to_string(c.kw);
  if (k0) s += ".k0";
  return s;
}

// For the grouped kernels (gemv_grouped.cu): the dense model's choice, and the SM count.
GemvCfg gemv_model_cfg(const GemvLowMArgs& a) { return choose_cfg_model(a); }
int gemv_device_sms() {
  const int dev = gemv_current_device();
  return dev >= 0 ? device_sms(dev) : kDefaultSms;
}

}  // namespace detail

bool gemv_lowm_supported(const GemvLowMArgs& a) {
  const bool dt = a.dtype == DType::BFloat16 || a.dtype == DType::Float16 || a.dtype == DType::Float32;
  const bool bias_dt = a.bias_dtype == a.dtype || a.bias_dtype == DType::Float32;
  return dt && bias_dt && a.M >= 0 && a.M <= kGemvLowMMaxM && a.N >= 0 && a.K >= 0;
}

void gemv_lowm(const GemvLowMArgs& a, void* stream) {
  if (!gemv_lowm_supported(a))  // a contract violation: select() refuses these first
    throw Unsupported(std::string("gemv_lowm: dtype ") + dtype_name(a.dtype) + " / bias " +
                      dtype_name(a.bias_dtype) + " with M = " + std::to_string(a.M) +
                      " has no kernel; expected bf16, f16 or f32 with M <= 16");
  if (a.M == 0 || a.N == 0) return;
  const detail::GemvCfg c = detail::choose_cfg(a);
  switch (a.dtype) {
    case DType::BFloat16: detail::gemv_launch_bf16(a, c, stream); break;
    case DType::Float16: detail::gemv_launch_f16(a, c, stream); break;
    default: detail::gemv_launch_f32(a, c, stream); break;
  }
}

const char* gemv_lowm_variant(const GemvLowMArgs& a) {
  static std::mutex mu;
  static std::unordered_set<std::string> names;  // node-based: c_str() stays valid
  std::string s;
  try {
    if (!gemv_lowm_supported(a)) s = "gemv_lowm.unsupported";
    else if (a.M == 0 || a.N == 0) s = "gemv_lowm.empty";
    else s = detail::gemv_variant_name("gemv_lowm", detail::choose_cfg(a), a.alpha == 0.0f || a.K == 0);
    std::lock_guard<std::mutex> lock(mu);
    return names.insert(s).first->c_str();
  } catch (...) {
    return "gemv_lowm";
  }
}

}  // namespace baracuda::gemm
