// RMSNorm / LayerNorm forward (and, at the end, backward) for long rows on sm_90: a row split over
// a thread-block cluster. Included (it includes kernels.cuh) only by the per-dtype translation
// units, which instantiate fwd_cluster_launch<T> (norm_fwd_<dtype>.cu,
// BARACUDA_NORM_INSTANTIATE_FWD_CLUSTER) or bwd_cluster_launch<T> (norm_bwd_<dtype>.cu,
// BARACUDA_NORM_INSTANTIATE_BWD_CLUSTER).
//
// Why: the one-block register kernel holds a whole long row per SM (1024 threads x 8 vectors at
// H = 65536, 16-bit), so an SM alternates load -> reduce -> write of one row and the phases of
// different rows never overlap. Here a row is split over CS blocks of a cluster, each holding
// its 1/CS share in registers (TPR threads x I 16-byte vectors), so several blocks (of different
// rows) are resident per SM and one block's reduction overlaps another's loads.
//
// Layout: block rank r of the cluster holds the row's vectors [r * TPR * I, (r + 1) * TPR * I),
// vector i of thread l at r * TPR * I + i * TPR + l (a warp's loads are contiguous). Vectors past
// the row are zeros and never stored.
//
// Sums (deterministic, the same bits in every block of the cluster): each thread over its
// vectors in order, butterfly shuffles within a warp, the warps in index order, then the CS
// block sums in rank order. A block's sum is sent by threads 0..CS-1 into slot [rank] of every
// block (st.async into distributed shared memory, counted by the receiver's mbarrier:
// common/cluster_exchange.cuh), then each block adds its copies in rank order. LayerNorm: the
// mean, then the sum of squared deviations (two cluster reductions, the same two-pass math as
// the register kernel).
//
// One cluster per row, no loop over rows: a row loop lets the compiler hoist the row-invariant
// addresses out of it and the I = 4 kernels then spill at their 64-register budget.
//
// Barriers: each reduction has its own slots (no slot is reused). Sends go to the other blocks'
// shared memory, which must be running with its mbarriers initialized: the first send waits on
// a cluster barrier that every block arrives at when it starts (split arrive / wait, so the
// row's loads are in flight meanwhile). A block exits only after receiving every block's sums,
// so nothing is sent to an exited block and no further barrier is needed. (No cluster barrier
// per reduction: its release / acquire are a GPU-scope memory barrier, which would wait for the
// residual_out stores, and an L1 invalidation.)
#pragma once
#include "common/cluster_device.cuh"
#include "common/cluster_exchange.cuh"
#include "common/cluster_launch.h"
#include "common/per_arch.cuh"

#include "norm/kernels.cuh"

namespace baracuda::norm::kern {

// Blocks per SM the cluster kernel is compiled for: a register budget of 48 plus the packed
// share (4 registers per vector), at most the thread limit. 512 x 4 -> 2, 256 x 4 -> 4.
constexpr int cluster_min_blocks(int tpr, int items) {
  const int by_regs = 65536 / ((48 + 4 * items) * tpr);
  const int by_threads = 2048 / tpr;
  const int b = by_regs < by_threads ? by_regs : by_threads;
  return b < 1 ? 1 : b;
}

template <class T, int CS, int TPR, int I>
__global__ void __launch_bounds__(TPR, cluster_min_blocks(TPR, I)) fwd_cluster(const NormLaunch L) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // clusters need sm_90; the launcher never picks this kernel on older devices
#else
  using C = compute_t<T>;
  using P = VecOf<T>;
  constexpr int V = 16 / sizeof(T);
  constexpr int W = TPR / 32;
  static_assert(TPR % 32 == 0 && W <= 32 && CS >= 2 && CS <= 8, "cluster kernel shape");
  __shared__ C red[2][W];    // per-warp sums, one slot set per reduction
  __shared__ ClusterExchange<C, CS> part;  // the cluster's block sums, one slot set per reduction
  const int64_t row = blockIdx.x / CS;  // the grid is rows x CS blocks
  if (row >= L.rows) return;            // (never: the same row, hence the same exit, for the whole cluster)
  const int lane = threadIdx.x, warp = lane >> 5;
  const unsigned rank = cluster_block_rank();
  const int64_t H = L.H;
  const C invH = C(1) / C(H), eps = C(L.eps);
  const int64_t share0 = int64_t(rank) * (TPR * I);  // this block's first vector of the row
  const T* x = static_cast<const T*>(L.x);
  if (lane == 0) part.init();
  cluster_arrive_release();  // this block runs (and its mbarriers are initialized): the others may send to it

  // The row sum of v over the cluster (every thread of every block gets the same bits): block
  // sums sent to every block (common/cluster_exchange.cuh; each slot set used once), added in
  // rank order.
  auto cluster_sum = [&](C v, int slot) -> C {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((lane & 31) == 0) red[slot][warp] = v;
    __syncthreads();
    if (slot == 0) cluster_wait_acquire();  // the start barrier: every block of the cluster runs
    if (lane < CS) {
      C b = 0;
#pragma unroll
      for (int i = 0; i < W; ++i) b += red[slot][i];
      part.send(slot, rank, unsigned(lane), b, C(0));
    }
    part.wait(slot, 0);
    C s = 0;
#pragma unroll
    for (int r = 0; r < CS; ++r) s += part.slot[slot][r][0];
    return s;
  };

  P h[I];
#pragma unroll
  for (int i = 0; i < I; ++i) {
    const int64_t col = (share0 + i * TPR + lane) * V;
    h[i] = col < H ? ld_pack<P>(x + row * L.x_rs + col) : zero_vec<T>();
  }
  if (L.res) {
    const T* r = static_cast<const T*>(L.res);
    T* ro = static_cast<T*>(L.res_out);
    // All residual loads before the first store: residual_out may alias residual.
    constexpr int Q = I < 4 ? I : 4;
#pragma unroll
    for (int i0 = 0; i0 < I; i0 += Q) {
      P rv[Q];
#pragma unroll
      for (int q = 0; q < Q; ++q) {
        const int64_t col = (share0 + (i0 + q) * TPR + lane) * V;
        rv[q] = (i0 + q < I && col < H) ? ld_pack<P>(r + row * L.res_rs + col) : zero_vec<T>();
      }
#pragma unroll
      for (int q = 0; q < Q; ++q) {
        const int i = i0 + q;
        if (i >= I) continue;
        const int64_t col = (share0 + i * TPR + lane) * V;
#pragma unroll
        for (int k = 0; k < V; ++k) pack_into<T>(h[i], k, unpack<T>(h[i], k) + unpack<T>(rv[q], k));
        if (col < H) stg16(ro + row * L.res_out_rs + col, h[i]);
      }
    }
  }
  C s = 0;
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const C c = unpack<T>(h[i], k);
      s += L.layer ? c : c * c;
    }
  s = cluster_sum(s, 0);
#pragma unroll
  for (int i = 0; i < I; ++i) launder(h[i]);
  C mean = 0, rstd;
  if (L.layer) {
    mean = s * invH;
    C d = 0;
#pragma unroll
    for (int i = 0; i < I; ++i)
      if ((share0 + i * TPR + lane) * V < H) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const C c = unpack<T>(h[i], k) - mean;
          d += c * c;
        }
      }
    d = cluster_sum(d, 1);
    rstd = inv_sqrt<T>(d * invH + eps);
    // (h - mean) of the pass above would otherwise stay alive in compute precision.
#pragma unroll
    for (int i = 0; i < I; ++i) launder(h[i]);
  } else {
    rstd = inv_sqrt<T>(s * invH + eps);
  }
  if (rank == 0 && lane == 0 && L.save_stats) {
    static_cast<C*>(L.rstd)[row] = rstd;
    if (L.layer) static_cast<C*>(L.mean)[row] = mean;
  }
  T* yp = static_cast<T*>(L.y);
#pragma unroll
  for (int i = 0; i < I; ++i) {
    const int64_t col = (share0 + i * TPR + lane) * V;
    if (col >= H) continue;
    C w[V], b[V], y[V];
    if (L.w) load_param<V, T>(L.w, L.w_f32, col, w);
    if (L.b) load_param<V, T>(L.b, L.b_f32, col, b);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      y[k] = (unpack<T>(h[i], k) - mean) * rstd;
      if (L.w) y[k] *= w[k];
      if (L.b) y[k] += b[k];
    }
    stg16(yp + row * L.y_rs + col, pack16<T>(y));  // one 16-byte store (common/packed_vec.cuh)
  }
#endif
}

// False (nothing launched) when the device would not run the kernel's sm_90 code.
template <class T, int CS, int TPR, int I> bool fwd_cluster_go(const NormLaunch& L, cudaStream_t s) {
  if (!runs_sm90_code(fwd_cluster<T, CS, TPR, I>)) return false;
  ClusterLaunch(dim3(unsigned(L.cfg.grid)), dim3(TPR), 0, s, CS)  // grid: rows x CS (cluster_config)
      .launch(fwd_cluster<T, CS, TPR, I>, "launch of norm forward (cluster)", L);
  return true;
}

// A cluster kernel shape as a type, for the launchers' dispatch over their instantiated lists.
template <int CS, int TPR, int I> struct ShapeT {
  static constexpr int cs = CS, tpr = TPR, items = I;
};
// Calls go(shape) for the one of `shapes` equal to c's (cluster, tpr, items); false when none is.
template <class Go, class... Shapes> bool dispatch_cluster_shape(const Config& c, Go&& go, Shapes... shapes) {
  bool found = false;
  auto one = [&](auto shape) {
    using S = decltype(shape);
    if (!found && c.cluster == S::cs && c.tpr == S::tpr && c.items == S::items) {
      go(shape);
      found = true;
    }
  };
  (one(shapes), ...);
  return found;
}

// Launches the cluster kernel of L.cfg; false (nothing launched) on a device without clusters or
// without the kernel's sm_90 code.
template <class T> bool fwd_cluster_launch(const NormLaunch& L, cudaStream_t s) {
  if (!device_has_clusters()) return false;
  bool launched = false;
  // One shape per kClusterShapes entry (the static_assert keeps the two lists together).
  const bool found = dispatch_cluster_shape(
      L.cfg,
      [&](auto shape) {
        using S = decltype(shape);
        static_assert(cluster_supported(S::cs, S::tpr, S::items), "a cluster shape missing from kClusterShapes");
        launched = fwd_cluster_go<T, S::cs, S::tpr, S::items>(L, s);
      },
      ShapeT<2, 256, 4>{}, ShapeT<4, 256, 2>{}, ShapeT<2, 512, 2>{}, ShapeT<4, 256, 4>{}, ShapeT<8, 256, 2>{},
      ShapeT<4, 512, 4>{}, ShapeT<8, 256, 4>{}, ShapeT<8, 512, 2>{}, ShapeT<8, 512, 4>{});
  if (!found) throw Unsupported("norm: no cluster forward kernel for this configuration (internal)");
  if (launched) check_launch("norm forward (cluster)");
  return launched;
}

// ---- backward: a persistent grid of clusters ---------------------------------------------------------
// Why: a row of more than 2048 vectors leaves no room in one block for its dweight / dbias
// accumulators, so the one-block (xs) kernel computes grad_x only and a column-reduction kernel
// reads grad_out and x a second time (5 passes over [rows, H] instead of 3). Here a row is split
// over a cluster of CS blocks; block rank r owns the row's vectors [r, r + 1) x TPR x I (vector i
// of thread l at r * TPR * I + i * TPR + l) and accumulates dweight / dbias of those columns in
// registers over every row its cluster handles. Cluster c handles rows c, c + G, c + 2G, ... (G =
// clusters of the grid) and writes row c of the [G, H] partial sums once at the end; `finish` adds
// the G rows in order. So grad_out and x are read once, grad_x written once, and the partials
// are G x H (G = the clusters resident at once, 30 of 8 x 256 x 4 on an H200: 7.5 MB per
// gradient at H = 65536).
//
// Pipelining (H200 profile of the one-row-at-a-time loop: 12.6 warps per SM issuing 0.39
// instructions per cycle, DRAM at 34%, each row waiting at its cluster barrier with nothing else
// to do): the rows are software-pipelined over three shared-memory buffers of the block's share
// (grad_out and x, 16-byte cp.async):
//   iteration j: wait for row j-1's block sums -> sums of row j, sent to the cluster ->
//                grad_x of row j-1 (and its dweight / dbias) -> copies of row j+2 into its buffer
// so row j's exchange is in flight while row j-1 is written, and a row's copies are issued two
// rows ahead. A thread copies and reads only its own vectors, so the wait on its own copies is
// the only synchronization the buffers need. The block sums travel by st.async into an mbarrier-
// counted slot of every block (common/cluster_exchange.cuh), not through cluster barriers: their
// release / acquire compile to a GPU-scope memory barrier and an L1 invalidation per row (ncu:
// membar and long-scoreboard stalls, DRAM at 34%).
//
// Sums (deterministic): each thread over its vectors in order, butterfly shuffles, warps in index
// order, then the CS block sums in rank order (every block the same bits), as in the forward.
// Slot sets alternate between rows (parity): a block sends row j's sums after receiving row
// j-1's from every block, each of which sent those only after reading row j-2's (the same slots).
// dweight / dbias: per column, the rows of the cluster in order, then the clusters in order.
template <int TPR> constexpr int bwd_cluster_min_blocks() { return 2048 / TPR / 4 > 1 ? 2048 / TPR / 4 : 1; }
constexpr int kBwdClusterBuffers = 3;
// Dynamic shared memory of a backward cluster block: the row buffers of its share, and with WS the
// weight of its share (16 KB at 256 x 4: two 8 x 256 x 4 blocks per SM still fit, 2 x 113 KB).
constexpr int64_t bwd_cluster_smem(int tpr, int items, bool ws = false) {
  return (int64_t(kBwdClusterBuffers) * 2 + (ws ? 1 : 0)) * tpr * items * 16;
}

// WS (operand-specialized kernels, a 16-bit weight): the weight of the block's columns is copied
// into shared memory once, with the first row, and read from there in both passes of every row.
// Why: its per-vector global loads (L2) could not move above the previous vector's store (a
// `st.global` asm with a memory clobber), so each row waited on L2 latency once per vector.
template <class T, int CS, int TPR, int I, int S, bool WS = false>
__global__ void __launch_bounds__(TPR, bwd_cluster_min_blocks<TPR>()) bwd_cluster(const NormLaunch L) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // clusters need sm_90; the launcher never picks this kernel on older devices
#else
  if (L.cfg.finish_pdl == 2) pdl_trigger();  // the finish's blocks may be placed (they wait for this grid)
  const OperandFlags F = operand_flags<S>(L);
  using C = compute_t<T>;
  using P = VecOf<T>;
  constexpr int V = 16 / sizeof(T);
  constexpr int W = TPR / 32;
  constexpr int SH = TPR * I;  // vectors of a block's share
  constexpr int NB = kBwdClusterBuffers;
  static_assert(TPR % 32 == 0 && W <= 32 && CS >= 2 && CS <= 8, "cluster kernel shape");
  static_assert(!WS || S != kSpecGeneric, "norm backward cluster: the shared weight needs the specialized kernel");
  extern __shared__ __align__(16) unsigned char norm_bwd_cl_dyn[];
  P* stage = reinterpret_cast<P*>(norm_bwd_cl_dyn);  // [NB buffers][grad_out, x][SH]
  P* wshare = stage + NB * 2 * SH;                    // WS: [SH] weight vectors of this block's columns
  __shared__ C red[2][2][W];      // per-warp (s1, s2), one slot set per parity
  __shared__ ClusterExchange<C, CS> part;  // the cluster's block sums, one slot set per parity
  const int lane = threadIdx.x, warp = lane >> 5;
  const unsigned rank = cluster_block_rank();
  const int64_t G = int64_t(gridDim.x) / CS;  // clusters
  const int64_t c0 = int64_t(blockIdx.x) / CS;
  const int64_t H = L.H;
  const C invH = C(1) / C(H);
  const int64_t share0 = int64_t(rank) * SH;
  const T* gyp = static_cast<const T*>(L.gy);
  const T* xp = static_cast<const T*>(L.x);
  const C* meanp = static_cast<const C*>(L.mean);
  const C* rstdp = static_cast<const C*>(L.rstd);
  const int64_t nrows = c0 < L.rows ? (L.rows - 1 - c0) / G + 1 : 0;  // rows c0, c0 + G, ...
  if (lane == 0) part.init();
  cluster_arrive_release();  // this block runs (and its mbarriers are initialized): the others may send to it
  // This thread's columns: col0 + i * VS for its vectors i, those inside the row flagged in
  // vmask. Every address below is a per-row base plus a constant (SASS: the 64-bit column and
  // row arithmetic per vector had been a third of the loop's instructions).
  const int64_t col0 = (share0 + lane) * V;
  constexpr int VS = TPR * V;
  unsigned vmask = 0;
#pragma unroll
  for (int i = 0; i < I; ++i)
    if (col0 + int64_t(i) * VS < H) vmask |= 1u << i;
  auto has = [&](int i) { return ((vmask >> i) & 1u) != 0; };
  // The operand-specialized (16-bit) kernels fold the mean into one fma or one sum per thread
  // (both passes below), where its rounding is provably below a 16-bit output's.
  constexpr bool FOLD = S != kSpecGeneric;

  // Issues the copies of this cluster's row j (this thread's vectors) into buffer b, and one
  // commit group (empty past the last row, so that the groups count rows).
  auto prefetch = [&](int64_t j, int b) {
    if (j < nrows) {
      const int64_t row = c0 + j * G;
      const T* g0 = gyp + row * L.gy_rs + col0;
      const T* x0 = xp + row * L.x_rs + col0;
#pragma unroll
      for (int i = 0; i < I; ++i) {
        cp_async16_if(&stage[(b * 2 + 0) * SH + i * TPR + lane], g0 + i * VS, has(i));
        cp_async16_if(&stage[(b * 2 + 1) * SH + i * TPR + lane], x0 + i * VS, has(i));
      }
    }
    __pipeline_commit();
  };

  C aw[I][V], ab[I][V];
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int k = 0; k < V; ++k) aw[i][k] = ab[i][k] = 0;

  // The weight of this thread's columns and the grad_x row written next, as pointers kept in
  // registers: at ~126 registers NVVM otherwise rebuilt them per vector (the 64-bit row times
  // stride: ~16 of the ~100 instructions per vector of the grad_x pass). grad_x's advances by
  // G rows per written row; the weight's is laundered once per row (not rematerialized).
  const T* w0 = L.w ? static_cast<const T*>(L.w) + col0 : nullptr;  // (read when the weight is T)
  T* gx_row = static_cast<T*>(L.gx) + c0 * L.gx_rs + col0;
  const int64_t gx_step = G * L.gx_rs;
  auto load_w = [&](int i, C (&w)[V]) {
    if constexpr (WS) {
      const P wv = wshare[i * TPR + lane];
#pragma unroll
      for (int k = 0; k < V; ++k) w[k] = unpack<T>(wv, k);
    } else if (F.w_f32) {
      load_param<V, T>(L.w, true, col0 + i * VS, w);
    } else {
      load_n<V>(w0 + i * VS, w);
    }
  };

  if constexpr (WS) {  // (joins row 0's commit group: waited for with row 0's copies)
#pragma unroll
    for (int i = 0; i < I; ++i) cp_async16_if(&wshare[i * TPR + lane], w0 + i * VS, has(i));
  }
  prefetch(0, 0);
  prefetch(1, 1);
  // Statistics of the row being reduced (j) and of the row being written (j - 1).
  C mean_c = 0, rstd_c = 0, mean_p = 0, rstd_p = 0;
  if (nrows > 0) {
    mean_c = F.layer ? meanp[c0] : C(0);
    rstd_c = rstdp[c0];
  }
  int bc = 0;  // buffer of row j (row j - 1's is the one before, cyclically)
  for (int64_t j = 0; j <= nrows; ++j) {
    const int bp = bc == 0 ? NB - 1 : bc - 1;
    const int par = int(j & 1);
    asm volatile("" : "+l"(w0));
    C c1 = 0, c2 = 0;
    if (j == 0) {
      cluster_wait_acquire();  // the start barrier: every block runs
    } else {      // row j - 1's block sums, all in
      part.wait(par ^ 1, unsigned((j - 1) >> 1));
      C t1 = 0, t2 = 0;
#pragma unroll
      for (int r = 0; r < CS; ++r) { t1 += part.slot[par ^ 1][r][0]; t2 += part.slot[par ^ 1][r][1]; }
      c1 = F.layer ? t1 * invH : C(0);
      c2 = t2 * invH;
      if (lane == 0 && j + 1 < nrows) part.rearm(par ^ 1);  // for row j + 1
    }
    C mean_n = 0, rstd_n = 0;
    if (j < nrows) {  // row j: its sums over the cluster
      if (j + 1 < nrows) {
        const int64_t nx = c0 + (j + 1) * G;
        mean_n = F.layer ? meanp[nx] : C(0);
        rstd_n = rstdp[nx];
      }
      __pipeline_wait_prior(1);  // row j's copies (row j + 1's may still be in flight)
      const P* gs = stage + (bc * 2 + 0) * SH;
      const P* xs = stage + (bc * 2 + 1) * SH;
      // s2: sum of g (x - mean), times rstd once below (not per element); with FOLD as
      // sum(g x) - mean sum(g), the mean taken out once per thread: one instruction an element
      // less; the cancellation costs ~2^-24 |mean| / std of s2 (this thread's 32 products), far
      // below a 16-bit grad_x's rounding even at hundreds of std (tested).
      C s1 = 0, s2 = 0;
#pragma unroll
      for (int i = 0; i < I; ++i) {
        if (!has(i)) continue;
        const P gv = gs[i * TPR + lane], xv = xs[i * TPR + lane];
        C w[V];
        if (F.w) load_w(i, w);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const C gy = unpack<T>(gv, k);
          const C xc = FOLD ? unpack<T>(xv, k) : unpack<T>(xv, k) - mean_c;
          const C g = F.w ? gy * w[k] : gy;
          s1 += g;
          s2 = fma(g, xc, s2);
        }
      }
      if (FOLD && F.layer) s2 = fma(-mean_c, s1, s2);
      s2 *= rstd_c;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        s1 += __shfl_xor_sync(0xffffffffu, s1, o);
        s2 += __shfl_xor_sync(0xffffffffu, s2, o);
      }
      if ((lane & 31) == 0) { red[par][0][warp] = s1; red[par][1][warp] = s2; }
      __syncthreads();
      if (lane < CS) {
        C t1 = 0, t2 = 0;
#pragma unroll
        for (int i = 0; i < W; ++i) { t1 += red[par][0][i]; t2 += red[par][1][i]; }
        part.send(par, rank, unsigned(lane), t1, t2);
      }
    }
    if (j > 0) {  // row j - 1: grad_x, and its dweight / dbias terms, while row j's sums travel
      const int64_t row = c0 + (j - 1) * G;
      const P* gs = stage + (bp * 2 + 0) * SH;
      const P* xs = stage + (bp * 2 + 1) * SH;
      T* const gx0 = gx_row;
      gx_row += gx_step;
      // xh = (x - mean) rstd; with FOLD as one fma(x, rstd, -mean rstd): the rounding of mean rstd
      // (~2^-24 |mean| / std) is far below a 16-bit grad_x's or dweight's, also for rows whose mean
      // is hundreds of std (tested).
      const C nmr = -mean_p * rstd_p;
#pragma unroll
      for (int i = 0; i < I; ++i) {
        if (!has(i)) continue;
        const P gv = gs[i * TPR + lane], xv = xs[i * TPR + lane];
        const P r = F.gres ? ld_pack<P>(static_cast<const T*>(L.gres) + row * L.gres_rs + col0 + i * VS) : zero_vec<T>();
        C w[V];
        if (F.w) load_w(i, w);
        P dxv = zero_vec<T>();  // packed as it is made, one 16-byte store
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const C gy = unpack<T>(gv, k);
          const C xk = unpack<T>(xv, k);
          const C xh = FOLD ? fma(xk, rstd_p, nmr) : (xk - mean_p) * rstd_p;
          const C g1 = F.w ? fma(gy, w[k], -c1) : gy - c1;  // rstd (g - c1 - xh c2), g = gy w
          C dx = rstd_p * fma(-c2, xh, g1);
          if (F.gres) dx += unpack<T>(r, k);
          pack_into<T>(dxv, k, dx);
          aw[i][k] += gy * xh;
          ab[i][k] += gy;
        }
        stg16(gx0 + i * VS, dxv);
      }
    }
    // Row j - 1's buffer is read (this thread's vectors, by this thread): row j + 2 goes there.
    prefetch(j + 2, bp);
    mean_p = mean_c;
    rstd_p = rstd_c;
    mean_c = mean_n;
    rstd_c = rstd_n;
    bc = bc == NB - 1 ? 0 : bc + 1;
  }
  // Every block has received every row's sums (its last wait), so nothing is sent to a block that
  // has exited. Row c0 of the partial sums, this block's columns (coalesced 16-byte chunks).
  C* pw = static_cast<C*>(L.workspace) + c0 * H;
  C* pb = reinterpret_cast<C*>(static_cast<char*>(L.workspace) + L.bias_partial_offset) + c0 * H;
#pragma unroll
  for (int i = 0; i < I; ++i) {
    if (!has(i)) continue;
    if (F.gw) store_n<V>(pw + col0 + i * VS, aw[i]);
    if (F.gb) store_n<V>(pb + col0 + i * VS, ab[i]);
  }
#endif
}

// Launches the backward cluster kernel of L.cfg (dynamic shared memory: the kBwdClusterBuffers
// row buffers of the block's share of grad_out and x); false, with nothing launched, without
// clusters / sm_90 code.
template <class T, int CS, int TPR, int I, int S, bool WS> bool bwd_cluster_go_spec(const NormLaunch& L, cudaStream_t s) {
  const auto kernel = bwd_cluster<T, CS, TPR, I, S, WS>;
  if (!runs_sm90_code(kernel)) return false;
  const int64_t smem = bwd_cluster_smem(TPR, I, WS);
  allow_smem(kernel, smem);
  ClusterLaunch(dim3(unsigned(L.cfg.grid)), dim3(TPR), size_t(smem), s, CS)  // grid: clusters x CS
      .launch(kernel, "launch of norm backward (cluster)", L);
  return true;
}
template <class T, int CS, int TPR, int I> bool bwd_cluster_go(const NormLaunch& L, cudaStream_t s) {
  return with_operand_spec<sizeof(T) == 2 && bwd_cluster_spec_shape(CS, TPR, I)>(L, [&](auto spec) {
    constexpr int S = decltype(spec)::value;
    if constexpr (S != kSpecGeneric) {
      if (L.cfg.param_smem) return bwd_cluster_go_spec<T, CS, TPR, I, S, true>(L, s);
    }
    return bwd_cluster_go_spec<T, CS, TPR, I, S, false>(L, s);
  });
}

// Calls go(shape) for the instantiated backward cluster shape equal to c's; false when none is.
template <class Go> bool dispatch_bwd_cluster_shape(const Config& c, Go&& go) {
  return dispatch_cluster_shape(
      c,
      [&](auto shape) {
        using S = decltype(shape);
        static_assert(bwd_cluster_supported(S::cs, S::tpr, S::items), "a cluster shape missing from kBwdClusterShapes");
        go(shape);
      },
      ShapeT<4, 256, 3>{}, ShapeT<4, 256, 4>{}, ShapeT<8, 256, 3>{}, ShapeT<8, 256, 4>{});
}

template <class T> bool bwd_cluster_launch(const NormLaunch& L, cudaStream_t s) {
  if (!device_has_clusters()) return false;
  bool launched = false;
  const bool found = dispatch_bwd_cluster_shape(L.cfg, [&](auto shape) {
    using S = decltype(shape);
    launched = bwd_cluster_go<T, S::cs, S::tpr, S::items>(L, s);
  });
  if (!found) throw Unsupported("norm: no cluster backward kernel for this configuration (internal)");
  if (launched) check_launch("norm backward (cluster)");
  return launched;
}

// Clusters of the backward kernel of c's shape resident at once on the current device, for the
// persistent grid (a cluster beyond them would start only when a whole earlier one has ended, and
// then run its rows alone: 33 clusters of 8 x 256 x 4 took 1.5x the time of 30 on an H200). 0 when
// unknown (no device, no clusters, no sm_90 code): the plan keeps its default grid. The generic
// kernel is asked (a specialized one uses no more registers).
template <class T> int bwd_cluster_resident(const Config& c) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();  // no device here (a host-only plan): not an error of this call
    return 0;
  }
  if (!device_has_clusters()) return 0;
  int n = 0;
  dispatch_bwd_cluster_shape(c, [&](auto shape) {
    using S = decltype(shape);
    auto kern = bwd_cluster<T, S::cs, S::tpr, S::items, kSpecGeneric>;
    if (!runs_sm90_code(kern)) return;
    const int64_t smem = bwd_cluster_smem(S::tpr, S::items, true);  // (the larger of the two sizes)
    allow_smem(kern, smem);
    ClusterLaunch cl(dim3(unsigned(S::cs)), dim3(S::tpr), size_t(smem), nullptr, S::cs);
    n = resident_clusters<bwd_cluster<T, S::cs, S::tpr, S::items, kSpecGeneric>>(cl.cfg);  // 0: the default grid
  });
  return n;
}

}  // namespace baracuda::norm::kern

#define BARACUDA_NORM_INSTANTIATE_BWD_CLUSTER(T)                                                               \
  template bool baracuda::norm::kern::bwd_cluster_launch<T>(const baracuda::norm::NormLaunch&, cudaStream_t); \
  template int baracuda::norm::kern::bwd_cluster_resident<T>(const baracuda::norm::Config&);
#define BARACUDA_NORM_INSTANTIATE_FWD_CLUSTER(T) \
  template bool baracuda::norm::kern::fwd_cluster_launch<T>(const baracuda::norm::NormLaunch&, cudaStream_t);
