// GroupNorm / InstanceNorm / BatchNorm: the finalize pass (per-unit statistics, running stats, the
// apply table, parameter gradients). See channel_norm.cuh.
#pragma once
#include "norm/channel_norm_common.cuh"

namespace baracuda::norm::chan {
using namespace baracuda::kernels;

// ---- finalize --------------------------------------------------------------------------------
// The unit's channels: per-group units (n, g) cover channels g*Cg .. g*Cg+Cg-1 of sample n; a
// per-channel unit covers channel c of every sample.
__device__ __forceinline__ void unit_channels(const ChanNormLaunch& L, int64_t u, int64_t& n, int64_t& c0,
                                              int64_t& nch) {
  if (L.per_channel) { n = 0; c0 = u; nch = 1; }
  else { const int64_t cg = L.C / L.G; n = u / L.G; c0 = (u % L.G) * cg; nch = cg; }
}

// ---- pieces shared by the block-per-unit and warp-per-unit finalize kernels ----------------------
// Forward: the unit's mean / rstd (saved when asked) and the running-stat update or its per-instance
// record in aux; returns rstd. One thread per unit calls it.
template <class T, class C>
__device__ __forceinline__ C store_unit_stats(const ChanNormLaunch& L, const Pointers<C>& W, int64_t u, const Moments<C>& m) {
  const C var = m.m2 / m.n;  // biased, as the normalization uses
  const C rstd = C(1) / sqrt(var + C(L.eps));
  if (L.mean) static_cast<C*>(L.mean)[u] = m.mean;
  if (L.rstd) static_cast<C*>(L.rstd)[u] = rstd;
  const C unbiased = m.n > C(1) ? m.m2 / (m.n - C(1)) : C(NAN);
  if (L.update_running && L.per_channel) {
    const C mo = C(L.momentum);
    const C rm = ld_param<T, C>(L.rmean, L.r_f32, u), rv = ld_param<T, C>(L.rvar, L.r_f32, u);
    st_param<T, C>(L.rmean, L.r_f32, u, (C(1) - mo) * rm + mo * m.mean);
    st_param<T, C>(L.rvar, L.r_f32, u, (C(1) - mo) * rv + mo * unbiased);
  }
  if (L.update_running && !L.per_channel) {
    W.aux[2 * u] = m.mean;
    W.aux[2 * u + 1] = unbiased;
  }
  return rstd;
}
// Forward table entries (mean, rstd * w, b, 0) of the unit's channels j0, j0 + step, ...
template <class T, class C>
__device__ __forceinline__ void fill_forward_table(const ChanNormLaunch& L, const Pointers<C>& W, int64_t n, int64_t c0,
                                                   int64_t nch, C mean, C rstd, int64_t j0, int64_t step) {
  for (int64_t j = j0; j < nch; j += step) {
    const int64_t c = c0 + j;
    C* e = W.table + 4 * entry_of(L, n, c);
    e[0] = mean;
    e[1] = L.w ? rstd * ld_param<T, C>(L.w, L.w_f32, c) : rstd;
    e[2] = L.b ? ld_param<T, C>(L.b, L.b_f32, c) : C(0);
    e[3] = 0;
  }
}
// Backward, channel c of unit (n, ..): a warp sums its K partials (sum dy, sum dy * (x - mean)) in a
// fixed order; lane 0 writes grad_weight / grad_bias (per channel) or their per-sample record in
// aux (per group) and adds w * db, w * gw to its S1, S2.
template <class T, class C>
__device__ __forceinline__ void channel_backward_sums(const ChanNormLaunch& L, const Pointers<C>& W, int64_t n, int64_t c,
                                                      int64_t K, C rstd, int lane, C& S1, C& S2) {
  const C* src = W.partials + 3 * (L.per_channel ? c * K : (n * L.C + c) * K);
  C db = 0, ds = 0;
  for (int64_t i = lane; i < K; i += 32) { db += src[3 * i]; ds += src[3 * i + 1]; }
  db = warp_sum(db);
  ds = warp_sum(ds);
  if (lane == 0) {
    const C gw = ds * rstd;
    if (L.per_channel) {
      if (L.gw) st_param<T, C>(L.gw, L.w_f32, c, gw);
      if (L.gb) st_param<T, C>(L.gb, L.b_f32, c, db);
    } else if (L.gw || L.gb) {
      W.aux[2 * (n * L.C + c)] = gw;
      W.aux[2 * (n * L.C + c) + 1] = db;
    }
    const C w = L.w ? ld_param<T, C>(L.w, L.w_f32, c) : C(1);
    S1 += w * db;
    S2 += w * gw;
  }
}
// Backward table entries (mean, rstd * w, rstd * S1 / M, rstd^2 * S2 / M) of channels j0, j0 + step, ...
template <class T, class C>
__device__ __forceinline__ void fill_backward_table(const ChanNormLaunch& L, const Pointers<C>& W, int64_t n, int64_t c0,
                                                    int64_t nch, C mean, C rstd, C S1, C S2, int64_t j0, int64_t step) {
  const C M = L.per_channel ? C(double(L.N) * double(L.S)) : C(double(nch) * double(L.S));
  for (int64_t j = j0; j < nch; j += step) {
    const int64_t c = c0 + j;
    const C w = L.w ? ld_param<T, C>(L.w, L.w_f32, c) : C(1);
    C* e = W.table + 4 * entry_of(L, n, c);
    e[0] = mean;
    e[1] = rstd * w;
    e[2] = rstd * S1 / M;
    e[3] = rstd * rstd * S2 / M;
  }
}

// Forward: a block per unit merges its partials (a contiguous span), then writes the saved stats,
// the running stats (per-channel units), the InstanceNorm aux (mean, unbiased var) and the
// table entries (mean, rstd * weight, bias) of its channels.
template <class T> __global__ void __launch_bounds__(kChanThreads) finalize_forward(const ChanNormLaunch L, int64_t units) {
  using C = compute_t<T>;
  __shared__ C sh[3][kChanThreads];
  __shared__ C s_mean, s_rstd;
  const Pointers<C> W = ws<C>(L);
  const int64_t P = L.part.P;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    int64_t n, c0, nch;
    unit_channels(L, u, n, c0, nch);
    const int64_t span = L.per_channel ? L.N * P : nch * P;
    const C* src = W.partials + 3 * (L.per_channel ? c0 * L.N * P : (n * L.C + c0) * P);
    Moments<C> m{0, 0, 0};
    for (int64_t i = threadIdx.x; i < span; i += kChanThreads) m = merge(m, Moments<C>{src[3 * i], src[3 * i + 1], src[3 * i + 2]});
    sh[0][threadIdx.x] = m.n; sh[1][threadIdx.x] = m.mean; sh[2][threadIdx.x] = m.m2;
    __syncthreads();
    for (int h = kChanThreads / 2; h > 0; h >>= 1) {
      if (threadIdx.x < h) {
        const int o = threadIdx.x + h;
        m = merge(m, Moments<C>{sh[0][o], sh[1][o], sh[2][o]});
        sh[0][threadIdx.x] = m.n; sh[1][threadIdx.x] = m.mean; sh[2][threadIdx.x] = m.m2;
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      s_mean = m.mean;
      s_rstd = store_unit_stats<T>(L, W, u, m);
    }
    __syncthreads();
    const C mean = s_mean, rstd = s_rstd;
    fill_forward_table<T>(L, W, n, c0, nch, mean, rstd, threadIdx.x, kChanThreads);
    __syncthreads();  // s_mean / sh are reused by the next unit
  }
}

// InstanceNorm running stats: per channel, the mean over samples (in order) of the per-instance
// mean and unbiased variance, blended with momentum.
template <class T> __global__ void __launch_bounds__(kChanThreads) instance_running(const ChanNormLaunch L) {
  using C = compute_t<T>;
  const Pointers<C> W = ws<C>(L);
  for (int64_t c = int64_t(blockIdx.x) * kChanThreads + threadIdx.x; c < L.C; c += int64_t(gridDim.x) * kChanThreads) {
    C sm = 0, sv = 0;
    for (int64_t n = 0; n < L.N; ++n) {
      sm += W.aux[2 * (n * L.C + c)];
      sv += W.aux[2 * (n * L.C + c) + 1];
    }
    const C mo = C(L.momentum), inv_n = C(1) / C(L.N);
    const C rm = ld_param<T, C>(L.rmean, L.r_f32, c), rv = ld_param<T, C>(L.rvar, L.r_f32, c);
    st_param<T, C>(L.rmean, L.r_f32, c, (C(1) - mo) * rm + mo * (sm * inv_n));
    st_param<T, C>(L.rvar, L.r_f32, c, (C(1) - mo) * rv + mo * (sv * inv_n));
  }
}

// Running modes: per channel, the table from running_mean / running_var (forward: mean,
// rstd * weight, bias; backward: mean, weight * rstd, 0, 0) and, backward, (mean, rstd) in aux
// for the stats pass.
template <class T> __global__ void __launch_bounds__(kChanThreads) running_table(const ChanNormLaunch L) {
  using C = compute_t<T>;
  const Pointers<C> W = ws<C>(L);
  const bool bwd = L.mode == ChanMode::BackwardRunning;
  for (int64_t c = int64_t(blockIdx.x) * kChanThreads + threadIdx.x; c < L.C; c += int64_t(gridDim.x) * kChanThreads) {
    const C mean = ld_param<T, C>(L.rmean, L.r_f32, c);
    const C rstd = C(1) / sqrt(ld_param<T, C>(L.rvar, L.r_f32, c) + C(L.eps));
    const C w = L.w ? ld_param<T, C>(L.w, L.w_f32, c) : C(1);
    C* e = W.table + 4 * c;
    e[0] = mean;
    e[1] = rstd * w;
    e[2] = (!bwd && L.b) ? ld_param<T, C>(L.b, L.b_f32, c) : C(0);
    e[3] = 0;
    if (bwd) { W.aux[2 * c] = mean; W.aux[2 * c + 1] = rstd; }
  }
}

// Backward: a block per unit. Warp w sums the partials of the unit's channels w, w + 8, ...
// (sum dy, sum dy * (x - mean) of (n, c), or of c over all n), giving grad_bias / grad_weight
// contributions (per channel: written; per group: into aux for grad_weight_bias) and the
// unit's S1 = sum(dy * w), S2 = sum(dy * w * xhat); then the table entries
// (mean, rstd * w, rstd * S1 / M, rstd^2 * S2 / M) of its channels (grad_x = k1 dy - k2 - (x - mean) k3).
template <class T> __global__ void __launch_bounds__(kChanThreads) finalize_backward(const ChanNormLaunch L, int64_t units) {
  using C = compute_t<T>;
  __shared__ C sh[2][kWarps];
  const Pointers<C> W = ws<C>(L);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t P = L.part.P;
  const bool running = L.mode == ChanMode::BackwardRunning;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    int64_t n, c0, nch;
    unit_channels(L, u, n, c0, nch);
    C mean, rstd;
    unit_stats(L, W, u, mean, rstd);
    const int64_t K = L.per_channel ? L.N * P : P;  // partials per channel of the unit
    C S1 = 0, S2 = 0;
    for (int64_t j = warp; j < nch; j += kWarps) {
      const int64_t c = c0 + j;
      channel_backward_sums<T>(L, W, n, c, K, rstd, lane, S1, S2);
    }
    if (lane == 0) { sh[0][warp] = S1; sh[1][warp] = S2; }
    __syncthreads();
    S1 = 0; S2 = 0;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) { S1 += sh[0][i]; S2 += sh[1][i]; }
    if (!running) {
      fill_backward_table<T>(L, W, n, c0, nch, mean, rstd, S1, S2, threadIdx.x, kChanThreads);
    }
    __syncthreads();  // sh is reused by the next unit
  }
}

// Many small units (InstanceNorm, GroupNorm with many samples): the same finalize work with a
// warp per unit (8 units per block, no block barriers). The summation order is fixed by the
// shape, as in the block kernels (which of the two runs depends only on the shape).
template <class T> __global__ void __launch_bounds__(kChanThreads) finalize_forward_warps(const ChanNormLaunch L, int64_t units) {
  using C = compute_t<T>;
  const Pointers<C> W = ws<C>(L);
  const int lane = threadIdx.x & 31;
  const int64_t P = L.part.P;
  for (int64_t u = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); u < units; u += int64_t(gridDim.x) * kWarps) {
    int64_t n, c0, nch;
    unit_channels(L, u, n, c0, nch);
    const int64_t span = L.per_channel ? L.N * P : nch * P;
    const C* src = W.partials + 3 * (L.per_channel ? c0 * L.N * P : (n * L.C + c0) * P);
    Moments<C> m{0, 0, 0};
    for (int64_t i = lane; i < span; i += 32) m = merge(m, Moments<C>{src[3 * i], src[3 * i + 1], src[3 * i + 2]});
    m = warp_merge(m);
    C rstd = C(0);
    if (lane == 0) rstd = store_unit_stats<T>(L, W, u, m);
    const C mean = __shfl_sync(0xffffffffu, m.mean, 0);
    rstd = __shfl_sync(0xffffffffu, rstd, 0);
    fill_forward_table<T>(L, W, n, c0, nch, mean, rstd, lane, 32);
  }
}

template <class T> __global__ void __launch_bounds__(kChanThreads) finalize_backward_warps(const ChanNormLaunch L, int64_t units) {
  using C = compute_t<T>;
  const Pointers<C> W = ws<C>(L);
  const int lane = threadIdx.x & 31;
  const int64_t P = L.part.P;
  const bool running = L.mode == ChanMode::BackwardRunning;
  for (int64_t u = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); u < units; u += int64_t(gridDim.x) * kWarps) {
    int64_t n, c0, nch;
    unit_channels(L, u, n, c0, nch);
    C mean, rstd;
    unit_stats(L, W, u, mean, rstd);
    const int64_t K = L.per_channel ? L.N * P : P;
    C S1 = 0, S2 = 0;
    for (int64_t j = 0; j < nch; ++j) {
      const int64_t c = c0 + j;
      channel_backward_sums<T>(L, W, n, c, K, rstd, lane, S1, S2);
    }
    S1 = __shfl_sync(0xffffffffu, S1, 0);
    S2 = __shfl_sync(0xffffffffu, S2, 0);
    if (!running) {
      fill_backward_table<T>(L, W, n, c0, nch, mean, rstd, S1, S2, lane, 32);
    }
  }
}

// GroupNorm grad_weight / grad_bias: per channel, the sum over samples (in order) of aux.
template <class T> __global__ void __launch_bounds__(kChanThreads) group_weight_grads(const ChanNormLaunch L) {
  using C = compute_t<T>;
  const Pointers<C> W = ws<C>(L);
  for (int64_t c = int64_t(blockIdx.x) * kChanThreads + threadIdx.x; c < L.C; c += int64_t(gridDim.x) * kChanThreads) {
    C gw = 0, gb = 0;
    for (int64_t n = 0; n < L.N; ++n) {
      gw += W.aux[2 * (n * L.C + c)];
      gb += W.aux[2 * (n * L.C + c) + 1];
    }
    if (L.gw) st_param<T, C>(L.gw, L.w_f32, c, gw);
    if (L.gb) st_param<T, C>(L.gb, L.b_f32, c, gb);
  }
}

}  // namespace baracuda::norm::chan
