// The sampler: one block of 1024 threads per row, no sort. The thresholds are found by radix select
// over an order-preserving 32-bit key of x = logit / T, one 8-bit digit per pass over the row (L2
// resident after the first): top-k by counts, top-p by fixed-point softmax mass (u64 sums of
// exp(x - max) * 2^32: integer adds, so the same bits in every order). The draw walks the kept mass
// in index order: warp w owns a contiguous chunk, the block scans the warp totals, and the warp
// holding the Philox target finds the token with warp scans.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "common/block_reduce.cuh"
#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/philox.cuh"
#include "sampling/sampling_launch.h"

namespace baracuda::sampling {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr uint64_t kOne = uint64_t(1) << 32;  // the mass of the maximum
constexpr int kCandidates = 2048;  // a top-k set up to this size is sampled from shared memory

// Order-preserving key: a > b as floats <=> key(a) > key(b). NaN maps to 0, below -inf.
__device__ __forceinline__ uint32_t key_of(float x) {
  if (x != x) return 0u;
  const uint32_t u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

template <class T> __device__ __forceinline__ float load(const T* row, int64_t i) {
  return kernels::to_compute(row[i]);
}

constexpr int kUnroll = 8;  // loads in flight per thread: the passes are L2-latency bound without them

// Calls f(i, x, in_range) for each index of the row with x = logit * inv_t (NaN past the end);
// kUnroll loads per thread are issued before any is used; the trip count is uniform over the
// block (warp_add needs every lane).
template <class T, class F>
__device__ __forceinline__ void over_row(const T* row, int64_t V, float inv_t, F&& f) {
  for (int64_t base = 0; base < V; base += int64_t(kThreads) * kUnroll) {
    float x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + int64_t(u) * kThreads + threadIdx.x;
      x[u] = i < V ? load(row, i) * inv_t : NAN;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + int64_t(u) * kThreads + threadIdx.x;
      f(i, x[u], i < V);
    }
  }
}

// The same over one warp's chunk [begin, end): lane l sees begin + l, + 32, ... in steps of 32 * kUnroll.
template <class T, class F>
__device__ __forceinline__ void over_chunk(const T* row, int64_t begin, int64_t end, float inv_t, F&& f) {
  const int lane = threadIdx.x & 31;
  for (int64_t base = begin; base < end; base += 32 * kUnroll) {
    float x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * 32 + lane;
      x[u] = i < end ? load(row, i) * inv_t : NAN;
    }
    bool stop = false;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (!stop) stop = f(base + u * 32 + lane, x[u], base + u * 32 + lane < end);
    if (stop) return;
  }
}

struct Row {
  float inv_t = 1.f;  // 1 / T (1 for greedy rows)
  float m = -INFINITY;  // max of x
  __device__ __forceinline__ uint64_t mass(float x) const {
    if (m == INFINITY) return x == INFINITY ? kOne : 0;
    const float e = __expf(x - m);  // in [0, 1]; NaN x gives NaN, which converts to 0
    return e > 0.f ? uint64_t(e * 4294967296.0f) : 0;
  }
  // exp(x - m) as a float, the log-probability's denominator's term (NaN past the end gives NaN: the
  // callers add only in-range values).
  __device__ __forceinline__ float rel_exp(float x) const {
    return m == INFINITY ? (x == INFINITY ? 1.f : 0.f) : __expf(x - m);
  }
};

// Adds `amount` (a count when kCount) to hist[bin] for the active lanes with one shared atomic per
// distinct bin of the warp: the first digits of a row's keys crowd into a few bins, where per-lane
// atomics would serialize. Called by all 32 lanes.
template <bool kCount>
__device__ __forceinline__ void warp_add(uint64_t* hist, uint32_t bin, uint64_t amount, bool active) {
  const unsigned act = __ballot_sync(0xffffffffu, active);
  if (!active) return;
  const unsigned peers = __match_any_sync(act, bin);
  uint64_t total;
  if constexpr (kCount) {
    total = uint64_t(__popc(peers));
  } else {  // amount <= 2^32: 16-bit halves keep each 32-lane sum inside 32 bits
    const uint32_t hi = __reduce_add_sync(peers, uint32_t(amount >> 16));
    const uint32_t lo = __reduce_add_sync(peers, uint32_t(amount & 0xffffu));
    total = (uint64_t(hi) << 16) + lo;
  }
  if (int(threadIdx.x & 31) == __ffs(peers) - 1 && total)
    atomicAdd(reinterpret_cast<unsigned long long*>(&hist[bin]), static_cast<unsigned long long>(total));
}

// The digit d of hist (256 bins, bin j = the next 8 key bits) where the running amount from the top
// reaches `target`: above + sum_{j > d} < target <= above + sum_{j >= d}. One warp; returns d and
// adds sum_{j > d} to *above (through shared `out`). Falls back to d = 0 when target is past the total.
__device__ void select_digit(const uint64_t* hist, uint64_t target, uint64_t* above, uint32_t* digit) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  uint64_t local = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) local += hist[lane * 8 + j];
  uint64_t inc = local;  // sum over lanes >= lane (the higher bins)
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t v = __shfl_down_sync(0xffffffffu, inc, o);
    if (lane + o < 32) inc += v;
  }
  const uint64_t base = *above;
  const uint64_t excl = inc - local;
  const bool mine = base + excl < target && target <= base + inc;
  const unsigned owner = __ballot_sync(0xffffffffu, mine);
  if (owner == 0) {
    if (lane == 0) *digit = 0;
    __syncwarp();
    return;
  }
  if (mine) {
    uint64_t acc = base + excl;
    int d = lane * 8;
    for (int j = 7; j >= 0; --j) {
      if (acc + hist[lane * 8 + j] >= target) {
        d = lane * 8 + j;
        break;
      }
      acc += hist[lane * 8 + j];
    }
    *digit = uint32_t(d);
    *above = acc;
  }
  __syncwarp();
}

// One step of the draw's walk, by a whole warp: lane l holds the kept mass w of the l-th next element;
// true on the lane whose running mass (acc plus the inclusive scan) first passes target. acc advances
// by the warp's total.
__device__ __forceinline__ bool draw_hit(uint64_t w, uint64_t& acc, uint64_t target) {
  const int lane = threadIdx.x & 31;
  uint64_t inc = w;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t v = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += v;
  }
  const bool hit = w > 0 && acc + inc - w <= target && target < acc + inc;
  acc += __shfl_sync(0xffffffffu, inc, 31);
  return hit;
}

template <class T>
__global__ void __launch_bounds__(kThreads) sample_kernel(const Params p) {
  __shared__ uint64_t hist[256];
  __shared__ uint64_t above;
  __shared__ uint32_t digit;
  __shared__ float red_m[kWarps];
  __shared__ int64_t red_i[kWarps];
  __shared__ uint64_t warp_mass[kWarps];
  __shared__ float warp_sum[kWarps];
  __shared__ int64_t picked;
  __shared__ int32_t cand_i[kCandidates];
  __shared__ float cand_x[kCandidates];
  __shared__ int cand_n;

  const int64_t b = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t V = p.vocab;
  const T* row = static_cast<const T*>(p.logits) + b * p.row_stride;

  // ---- the row's parameters (uniform over the block)
  const float temp = p.temperature ? p.temperature[b * p.temperature_stride] : p.temperature_value;
  const bool greedy = !(temp > 0.f);
  Row r;
  r.inv_t = greedy ? 1.f : 1.f / temp;
  int64_t k = p.top_k_value;
  if (p.top_k) {
    const int64_t at = b * p.top_k_stride;
    k = p.top_k_int32 ? int64_t(static_cast<const int32_t*>(p.top_k)[at]) : static_cast<const int64_t*>(p.top_k)[at];
  }
  const bool use_k = !greedy && k > 0 && k < V;
  float top_p = p.top_p ? p.top_p[b * p.top_p_stride] : p.top_p_value;
  const bool use_p = !greedy && top_p < 1.f;  // NaN: off
  top_p = fmaxf(top_p, 0.f);
  float min_p = p.min_p ? p.min_p[b * p.min_p_stride] : p.min_p_value;
  const bool use_min_p = !greedy && min_p > 0.f;  // NaN: off
  min_p = fminf(min_p, 1.f);
  const uint64_t seed = !p.seeds ? p.seed
                        : p.seeds_int32 ? uint64_t(int64_t(static_cast<const int32_t*>(p.seeds)[b * p.seed_stride]))
                                        : uint64_t(static_cast<const int64_t*>(p.seeds)[b * p.seed_stride]);

  // ---- pass 1: max and first argmax of x; top-k's first digit histogram
  if (tid < 256) hist[tid] = 0;
  __syncthreads();
  float m = -INFINITY;
  int64_t arg = -1;
  over_row(row, V, r.inv_t, [&](int64_t i, float x, bool in) {
    if (x > m) {  // indices rise within a thread: the first maximum stays
      m = x;
      arg = i;
    }
    if (use_k) warp_add<true>(hist, key_of(x) >> 24, 1, in);
  });
  for (int o = 16; o > 0; o >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, m, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, arg, o);
    if (om > m || (om == m && oi >= 0 && (arg < 0 || oi < arg))) {
      m = om;
      arg = oi;
    }
  }
  if (lane == 0) {
    red_m[warp] = m;
    red_i[warp] = arg;
  }
  __syncthreads();
  m = red_m[0];
  arg = red_i[0];
  for (int w = 1; w < kWarps; ++w)
    if (red_m[w] > m || (red_m[w] == m && red_i[w] >= 0 && (arg < 0 || red_i[w] < arg))) {
      m = red_m[w];
      arg = red_i[w];
    }
  r.m = m;

  auto write = [&](int64_t token, float logprob) {
    if (tid != 0) return;
    if (p.tokens_int32) static_cast<int32_t*>(p.tokens)[b * p.token_stride] = int32_t(token);
    else static_cast<int64_t*>(p.tokens)[b * p.token_stride] = token;
    if (p.logprobs) p.logprobs[b * p.logprob_stride] = logprob;
  };
  // The row's sum of exp(x - max) from the warps' partials in warp_sum; a token's log-probability.
  auto warps_total = [&] {
    float total = 0.f;
    for (int w = 0; w < kWarps; ++w) total += warp_sum[w];
    return total;
  };
  auto logprob_of = [&](int64_t token, float total) { return load(row, token) * r.inv_t - m - __logf(total); };
  // The row's 64 random bits for the draw (Philox-4x32-10 of the row, offset and seed): the target is
  // umulhi(Z, word), uniform in [0, Z).
  auto draw_word = [&] {
    const rng::Words4 words = rng::philox4x32_10(uint64_t(b), p.offset, seed);
    return (uint64_t(words.w[0]) << 32) | words.w[1];
  };
  if (arg < 0) {  // nothing but NaN and -inf
    write(-1, NAN);
    return;
  }

  // ---- thresholds: keep keys >= th
  uint32_t th = 0;
  if (use_k) {
    uint32_t prefix = 0;
    __syncthreads();
    if (tid == 0) above = 0;
    for (int pass = 0; pass < 4; ++pass) {
      const int shift = 24 - 8 * pass;
      if (pass > 0) {
        if (tid < 256) hist[tid] = 0;
        __syncthreads();
        over_row(row, V, r.inv_t, [&](int64_t, float x, bool in) {
          const uint32_t key = key_of(x);
          warp_add<true>(hist, (key >> shift) & 255u, 1, in && (key >> (shift + 8)) == (prefix >> (shift + 8)));
        });
      }
      __syncthreads();
      select_digit(hist, uint64_t(k), &above, &digit);
      __syncthreads();
      prefix |= digit << shift;
      __syncthreads();
    }
    th = prefix;
  }
  // Top-p: radix select over the fixed-point mass of the keys >= th (the top-k set), 8 bits per pass.
  // `each(f)` calls f(x) for every element (x NaN past the end) with a trip count uniform over the block.
  auto top_p_threshold = [&](auto&& each) {
    uint32_t prefix = 0;
    uint64_t target = 0;
    if (tid == 0) above = 0;
    for (int pass = 0; pass < 4; ++pass) {
      const int shift = 24 - 8 * pass;
      if (tid < 256) hist[tid] = 0;
      __syncthreads();
      each([&](float x) {
        const uint32_t key = key_of(x);
        const uint64_t w = r.mass(x);  // 0 past the end (x = NaN)
        warp_add<false>(hist, (key >> shift) & 255u, w,
                        w && key >= th && (pass == 0 || (key >> (shift + 8)) == (prefix >> (shift + 8))));
      });
      __syncthreads();
      if (pass == 0) {  // the top-k set's mass is the histogram's total
        uint64_t s = 0;
        if (tid < 32) {
#pragma unroll
          for (int j = 0; j < 8; ++j) s += hist[tid * 8 + j];
          s = kernels::warp_sum(s);
        }
        if (tid == 0) warp_mass[0] = s;
        __syncthreads();
        const double want = double(top_p) * double(warp_mass[0]);
        target = want < 1.0 ? 1 : uint64_t(ceil(want));
      }
      select_digit(hist, target, &above, &digit);
      __syncthreads();
      prefix |= digit << shift;
      __syncthreads();
    }
    th = max(th, prefix);
  };

  // ---- a small top-k set (the usual case): gathered into shared memory in index order, so that top-p,
  // min-p, the kept mass and the draw read about k elements instead of the row (same thresholds, the
  // same integer masses in the same order: the same token as the row path below).
  if (use_k && V <= INT32_MAX && above + hist[digit] <= uint64_t(kCandidates)) {  // keys >= th, from the select
    __syncthreads();  // every thread has read above / hist before they change
    if (tid == 0) cand_n = 0;
    __syncthreads();
    float sum = 0.f;
    over_row(row, V, r.inv_t, [&](int64_t i, float x, bool in) {
      if (in && p.logprobs) sum += r.rel_exp(x);
      const bool keep = in && key_of(x) >= th;
      const unsigned ballot = __ballot_sync(0xffffffffu, keep);
      if (ballot == 0u) return;
      int base = 0;
      if (lane == 0) base = atomicAdd(&cand_n, __popc(ballot));
      base = __shfl_sync(0xffffffffu, base, 0) + __popc(ballot & ((1u << lane) - 1u));
      if (keep && base < kCandidates) {
        cand_i[base] = int32_t(i);
        cand_x[base] = x;
      }
    });
    sum = kernels::warp_sum(sum);
    if (lane == 0) warp_sum[warp] = sum;
    __syncthreads();
    const int n = cand_n;
    if (n <= kCandidates) {  // (the select's count is exact unless k passed the row's valid keys)
      const float total_sum = p.logprobs ? warps_total() : 0.f;
      int pad = 1;
      while (pad < n) pad <<= 1;
      for (int c = n + tid; c < pad; c += kThreads) cand_i[c] = INT32_MAX;
      __syncthreads();
      for (int len = 2; len <= pad; len <<= 1)  // bitonic sort by index
        for (int j = len >> 1; j > 0; j >>= 1) {
          for (int c = tid; c < pad; c += kThreads) {
            const int o = c ^ j;
            if (o > c && (cand_i[c] > cand_i[o]) == ((c & len) == 0)) {
              const int32_t ti = cand_i[c];
              cand_i[c] = cand_i[o];
              cand_i[o] = ti;
              const float tx = cand_x[c];
              cand_x[c] = cand_x[o];
              cand_x[o] = tx;
            }
          }
          __syncthreads();
        }
      const int trips = (n + kThreads - 1) / kThreads;
      if (use_p)
        top_p_threshold([&](auto&& f) {
          for (int t = 0; t < trips; ++t) {
            const int c = t * kThreads + tid;
            f(c < n ? cand_x[c] : NAN);
          }
        });
      if (use_min_p) th = max(th, key_of(m + __logf(min_p)));
      if (tid == 0) picked = arg;  // unreachable fallback: the maximum is always kept
      __syncthreads();
      if (warp == 0) {  // the draw: one warp walks the candidates in index order
        auto mass_at = [&](int c) { return c < n && key_of(cand_x[c]) >= th ? r.mass(cand_x[c]) : uint64_t(0); };
        uint64_t Z = 0;
        for (int c = lane; c < n; c += 32) Z += mass_at(c);
        Z = kernels::warp_sum(Z);
        const uint64_t target = __umul64hi(Z, draw_word());
        uint64_t acc = 0;
        for (int c0 = 0; c0 < n; c0 += 32) {
          const bool hit = draw_hit(mass_at(c0 + lane), acc, target);
          if (hit) picked = cand_i[c0 + lane];
          if (__ballot_sync(0xffffffffu, hit) != 0u) break;
        }
      }
      __syncthreads();
      const int64_t token = picked;
      write(token, p.logprobs ? logprob_of(token, total_sum) : 0.f);
      return;
    }
  }

  if (use_p) top_p_threshold([&](auto&& f) { over_row(row, V, r.inv_t, [&](int64_t, float x, bool) { f(x); }); });
  if (use_min_p) th = max(th, key_of(m + __logf(min_p)));

  // ---- the kept mass per warp chunk (and the row's sum of exp for the log-probability)
  const int64_t chunk = ((V + kWarps - 1) / kWarps + 31) / 32 * 32;
  const int64_t begin = int64_t(warp) * chunk, end = min(V, begin + chunk);
  const bool need_draw = !greedy;
  uint64_t kept = 0;
  float sum = 0.f;
  if (need_draw || p.logprobs) {
    over_chunk(row, begin, end, r.inv_t, [&](int64_t, float x, bool in) {
      if (in && p.logprobs) sum += r.rel_exp(x);
      if (in && need_draw && key_of(x) >= th) kept += r.mass(x);
      return false;
    });
    kept = kernels::warp_sum(kept);
    sum = kernels::warp_sum(sum);
    if (lane == 0) {
      warp_mass[warp] = kept;
      warp_sum[warp] = sum;
    }
  }
  __syncthreads();
  const float total_sum = p.logprobs ? warps_total() : 0.f;
  if (greedy) {
    write(arg, p.logprobs ? logprob_of(arg, total_sum) : 0.f);
    return;
  }

  // ---- the draw: target uniform in [0, Z), the first token whose running kept mass passes it
  uint64_t Z = 0, start = 0;
  int owner = -1;
  const uint64_t u64 = draw_word();
  for (int w = 0; w < kWarps; ++w) Z += warp_mass[w];
  const uint64_t target = __umul64hi(Z, u64);
  for (int w = 0; w < kWarps && owner < 0; ++w) {
    if (target < start + warp_mass[w]) owner = w;
    else start += warp_mass[w];
  }
  if (tid == 0) picked = arg;  // unreachable fallback: Z > 0 always holds the maximum
  __syncthreads();
  if (warp == owner) {
    uint64_t acc = start;
    over_chunk(row, begin, end, r.inv_t, [&](int64_t i, float x, bool in) {
      const bool hit = draw_hit(in && key_of(x) >= th ? r.mass(x) : 0, acc, target);
      if (hit) picked = i;
      return __ballot_sync(0xffffffffu, hit) != 0u;
    });
  }
  __syncthreads();
  const int64_t token = picked;
  write(token, p.logprobs ? logprob_of(token, total_sum) : 0.f);
}

}  // namespace

void sample(const Params& p, void* stream) {
  if (p.rows == 0) return;
  auto st = static_cast<cudaStream_t>(stream);
  const dim3 grid(unsigned(p.rows));
  switch (p.dtype) {
    case DType::Float32: sample_kernel<float><<<grid, kThreads, 0, st>>>(p); break;
    case DType::Float16: sample_kernel<__half><<<grid, kThreads, 0, st>>>(p); break;
    case DType::BFloat16: sample_kernel<__nv_bfloat16><<<grid, kThreads, 0, st>>>(p); break;
    default: throw Unsupported(std::string("sample: logits dtype ") + dtype_name(p.dtype) + " has no kernel");
  }
  cuda_check(cudaGetLastError(), "sample launch");
}

}  // namespace baracuda::sampling
