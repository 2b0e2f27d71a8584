// RMSNorm / LayerNorm backward kernels: grad_x per row (bwd_reg, bwd_loop) and the column reductions of
// grad_weight / grad_bias (colred, finish). See kernels.cuh.
#pragma once
#include "norm/kernel_common.cuh"

namespace baracuda::norm::kern {
using namespace baracuda::kernels;

// ---- backward -------------------------------------------------------------------------------------
// Per row, with xhat = (x - mean) * rstd (mean = 0 for RMSNorm) and g = grad_out * weight:
//   grad_x = rstd * (g - mean(g) [LayerNorm only] - xhat * mean(g * xhat)) (+ grad_residual)
//   grad_weight = sum over rows of grad_out * xhat, grad_bias = sum over rows of grad_out.

// One vector of a row: loads grad_out and x, returns g and xhat, adds to the row sums.
template <int N, class T, class C>
__device__ __forceinline__ void bwd_load(const NormLaunch& L, int64_t row, int64_t col, C mean, C rstd, C* gy, C* g,
                                         C* xh, C& s1, C& s2) {
  load_n<N>(static_cast<const T*>(L.gy) + row * L.gy_rs + col, gy);
  load_n<N>(static_cast<const T*>(L.x) + row * L.x_rs + col, xh);
  C w[N];
  if (L.w) load_param<N, T>(L.w, L.w_f32, col, w);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    xh[k] = (xh[k] - mean) * rstd;
    g[k] = L.w ? gy[k] * w[k] : gy[k];
    s1 += g[k];
    s2 += g[k] * xh[k];
  }
}
template <int N, class T, class C>
__device__ __forceinline__ void bwd_store(const NormLaunch& L, int64_t row, int64_t col, C rstd, C c1, C c2, const C* g,
                                          const C* xh) {
  C dx[N];
#pragma unroll
  for (int k = 0; k < N; ++k) dx[k] = rstd * (g[k] - c1 - xh[k] * c2);
  if (L.gres) {
    C r[N];
    load_n<N>(static_cast<const T*>(L.gres) + row * L.gres_rs + col, r);
#pragma unroll
    for (int k = 0; k < N; ++k) dx[k] += r[k];
  }
  store_n<N>(static_cast<T*>(L.gx) + row * L.gx_rs + col, dx);
}

template <class T> __device__ __forceinline__ compute_t<T>* partial_w(const NormLaunch& L) {
  return static_cast<compute_t<T>*>(L.workspace);
}
template <class T> __device__ __forceinline__ compute_t<T>* partial_b(const NormLaunch& L) {
  return reinterpret_cast<compute_t<T>*>(static_cast<char*>(L.workspace) + L.bias_partial_offset);
}

// Row in registers (grad_out and x as packed vectors of T; with XS, x's row goes to dynamic
// shared memory through cp.async and only grad_out stays in registers). Without XS the block's
// share of dweight / dbias accumulates in dynamic shared memory (each thread owns its columns;
// [RPB][SPAN] per gradient) and is written once, as row blockIdx.x of the [partials, H]
// workspace; with XS the column-reduction kernel computes them.
// The accumulators are stored chunk-major: a thread's V columns of vector i are NQ 16-byte
// chunks of E compute elements, chunk (i, q) of lane l at ((i * NQ + q) * TPR + l) * E, so that
// a warp's 16-byte shared accesses are contiguous (no bank conflicts; a lane-major layout with
// 32-byte lanes, as for 16-bit T, conflicts 2-way on every access).
// PF (prefetch, no XS): the group's next row of grad_out and x is brought in while this row is
// reduced, written and accumulated. Block groups copy it (cp.async, each thread its own vectors)
// into shared memory behind the accumulators, as in the forward's PF; small groups (RPB rows per
// block, a few vectors per thread) load it into registers, with its mean and rstd: twice the
// bytes in flight per warp for a handful of registers, where a row is too short for a warp's
// loads to cover the memory latency on their own.
// RA (register accumulators; 16-bit T, no XS): a thread's dweight / dbias columns are the same
// in every row, so they accumulate in registers, and a 16-bit weight is held packed in registers
// for the whole kernel, instead of a shared-memory read-modify-write and a weight load per row.
// Block groups write the partial row straight from the registers; small groups (RPB rows per
// block) store their registers into the shared [RPB][SPAN] accumulators once, at the end, and
// add them in group order there as the shared-memory kernel does.
template <class T, int TPR, int I, bool XS, bool PF, bool RA, int S>
__global__ void __launch_bounds__(block_threads(TPR), XS ? 1 : (RA ? bwd_regacc_min_blocks(TPR, I) : bwd_min_blocks(TPR, I)))
    bwd_reg(const NormLaunch L) {
  using C = compute_t<T>;
  const OperandFlags F = operand_flags<S>(L);
  constexpr int V = 16 / sizeof(T);
  using P = VecOf<T>;
  constexpr int RPB = TPR > 32 ? 1 : 128 / TPR;
  constexpr int SPAN = TPR * I * V;  // padded row length
  constexpr int E = int(16 / sizeof(C));  // compute elements per 16-byte chunk
  constexpr int NQ = V / E;               // chunks per vector (2 for 16-bit T, else 1)
  static_assert(NQ * E == V, "norm backward: vector / chunk mismatch");
  static_assert(!PF || !XS, "norm backward: the prefetching kernel holds x in registers");
  constexpr bool PF_SMEM = PF && RPB == 1, PF_REG = PF && RPB > 1;
  static_assert(!RA || (!XS && sizeof(T) == 2), "norm backward: register accumulators need 16-bit T, no xs");
  if (L.cfg.finish_pdl == 2) pdl_trigger();  // the finish's blocks may be placed (they wait for this grid)
  extern __shared__ __align__(16) unsigned char norm_bwd_dyn[];
  __shared__ C red[2][64];
  const int lane = threadIdx.x % TPR, group = threadIdx.x / TPR;
  const int64_t H = L.H;
  const C invH = C(1) / C(H);
  const bool acc = !XS && (F.gw || F.gb);
  C* accw = reinterpret_cast<C*>(norm_bwd_dyn) + group * SPAN;
  C* accb = reinterpret_cast<C*>(norm_bwd_dyn) + (F.gw ? RPB * SPAN : 0) + group * SPAN;
  P* xsm = reinterpret_cast<P*>(norm_bwd_dyn);
  // PF: [grad_out, x][I][TPR] vectors of the next row, after the accumulators.
  P* next_g = reinterpret_cast<P*>(norm_bwd_dyn + (RA ? 0 : ((F.gw ? 1 : 0) + (F.gb ? 1 : 0)) * SPAN * sizeof(C)));
  P* next_x = next_g + I * TPR;
  const T* gyp = static_cast<const T*>(L.gy);
  const T* xp = static_cast<const T*>(L.x);
  // (One base address per operand and constant offsets, a predicated copy per vector.)
  auto prefetch = [&](int64_t r) {
    if (r < L.rows) {
      const T* g0 = gyp + r * L.gy_rs + int64_t(lane) * V;
      const T* x0 = xp + r * L.x_rs + int64_t(lane) * V;
      const int64_t left = H - int64_t(lane) * V;  // elements from this lane's first column on
#pragma unroll
      for (int i = 0; i < I; ++i) {
        const bool in = int64_t(i) * TPR * V < left;
        cp_async16_if(&next_g[i * TPR + lane], g0 + i * TPR * V, in);
        cp_async16_if(&next_x[i * TPR + lane], x0 + i * TPR * V, in);
      }
    }
    __pipeline_commit();
  };
  if constexpr (PF_SMEM) prefetch(blockIdx.x);
  // PF_REG: the group's next row (grad_out, x, mean, rstd) in registers, loaded one row ahead.
  P ng[PF_REG ? I : 1], nx[PF_REG ? I : 1];
  C nmean = 0, nrstd = 0;
  auto load_next = [&](int64_t r) {
    const bool in_rows = r < L.rows;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      const bool ok = in_rows && col < H;
      ng[i] = ok ? ld_pack<P>(gyp + r * L.gy_rs + col) : zero_vec<T>();
      nx[i] = ok ? ld_pack<P>(xp + r * L.x_rs + col) : zero_vec<T>();
    }
    nmean = (in_rows && F.layer) ? static_cast<const C*>(L.mean)[r] : C(0);
    nrstd = in_rows ? static_cast<const C*>(L.rstd)[r] : C(0);
  };
  if constexpr (PF_REG) load_next(int64_t(blockIdx.x) * RPB + group);
  // RA: the accumulators. WR (RA, or an operand-specialized 16-bit kernel): the weight of this
  // thread's columns, packed in registers for the whole kernel (its columns are the same in every
  // row): no weight load and address per row.
  constexpr bool WR = RA || (sizeof(T) == 2 && S != kSpecGeneric && !XS);
  C ra_w[RA ? I : 1][RA ? V : 1], ra_b[RA ? I : 1][RA ? V : 1];
  P wpk[WR ? I : 1];
  const bool w_packed = WR && F.w && !F.w_f32;
  if constexpr (WR) {
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      wpk[i] = w_packed && col < H ? ld_pack<P>(static_cast<const T*>(L.w) + col) : zero_vec<T>();
    }
  }
  if constexpr (RA) {
#pragma unroll
    for (int i = 0; i < I; ++i)
#pragma unroll
      for (int k = 0; k < V; ++k) ra_w[i][k] = ra_b[i][k] = C(0);
  }
  // One E-chunk of the weight at vector i, chunk q (column col + q * E).
  auto weight_chunk = [&](int i, int q, int64_t col, C* w) {
    if constexpr (WR) {
      if (w_packed) {
#pragma unroll
        for (int e = 0; e < E; ++e) w[e] = unpack<T>(wpk[i], q * E + e);
        return;
      }
    }
    load_param<E, T>(L.w, F.w_f32, col + q * E, w);
  };
  if (acc && !RA) {
    C z[E];
#pragma unroll
    for (int k = 0; k < E; ++k) z[k] = 0;
#pragma unroll
    for (int c = 0; c < I * NQ; ++c) {
      const int o = (c * TPR + lane) * E;
      if (F.gw) store_n<E>(accw + o, z);
      if (F.gb) store_n<E>(accb + o, z);
    }
  }
  int parity = 0;
  for (int64_t base = int64_t(blockIdx.x) * RPB; base < L.rows; base += int64_t(gridDim.x) * RPB, parity ^= 1) {
    const int64_t row = base + group;
    const bool valid = row < L.rows;
    P gp[I];
    P xv[XS ? 1 : I];
    C mean_r = 0, rstd_r = 0;
    if constexpr (PF_SMEM) __pipeline_wait_prior(0);
    if constexpr (PF_REG) {  // this row from the registers, the next one's loads issued
#pragma unroll
      for (int i = 0; i < I; ++i) { gp[i] = ng[i]; xv[i] = nx[i]; }
      mean_r = nmean;
      rstd_r = nrstd;
      load_next(row + int64_t(gridDim.x) * RPB);
    }
#pragma unroll
    for (int i = 0; i < I && !PF_REG; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      const bool ok = valid && col < H;
      if constexpr (PF_SMEM) {
        xv[i] = ok ? next_x[i * TPR + lane] : zero_vec<T>();
        gp[i] = ok ? next_g[i * TPR + lane] : zero_vec<T>();
        continue;
      }
      if constexpr (XS) {
        if (ok) __pipeline_memcpy_async(&xsm[i * TPR + lane], xp + row * L.x_rs + col, 16);
      } else {
        xv[i] = ok ? ld_pack<P>(xp + row * L.x_rs + col) : zero_vec<T>();
      }
      gp[i] = ok ? ld_pack<P>(gyp + row * L.gy_rs + col) : zero_vec<T>();
    }
    if constexpr (XS) __pipeline_commit();
    const C mean = PF_REG ? mean_r : (valid && F.layer) ? static_cast<const C*>(L.mean)[row] : C(0);
    const C rstd = PF_REG ? rstd_r : valid ? static_cast<const C*>(L.rstd)[row] : C(0);
    if constexpr (XS) __pipeline_wait_prior(0);
    auto x_of = [&](int i) -> P {
      if constexpr (XS) return xsm[i * TPR + lane];
      else return xv[i];
    };
    C s1 = 0, s2 = 0;
    // xh = (x - mean) rstd, for 16-bit x as one fma(x, rstd, -mean rstd) (as the cluster kernel's
    // FOLD: the rounding of mean rstd is far below what a 16-bit x resolves of x - mean).
    constexpr bool fold_mean = sizeof(T) == 2;
    const C nmr = -mean * rstd;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      if (!valid || col >= H) continue;
      const P xi = x_of(i);
      // A vector in NQ chunks of E (its accumulator chunks): fewer live registers than all V at once.
#pragma unroll
      for (int q = 0; q < NQ; ++q) {
        C w[E], gyc[E], xh[E];
        if (F.w) weight_chunk(i, q, col, w);
#pragma unroll
        for (int e = 0; e < E; ++e) {
          gyc[e] = unpack<T>(gp[i], q * E + e);
          const C xk = unpack<T>(xi, q * E + e);
          xh[e] = fold_mean ? fma(xk, rstd, nmr) : (xk - mean) * rstd;
          const C g = F.w ? gyc[e] * w[e] : gyc[e];
          s1 += g;
          s2 += g * xh[e];
        }
        if constexpr (RA) {
#pragma unroll
          for (int e = 0; e < E; ++e) {
            ra_w[i][q * E + e] += gyc[e] * xh[e];
            ra_b[i][q * E + e] += gyc[e];
          }
        } else if (acc) {
          const int o = ((i * NQ + q) * TPR + lane) * E;
          C a[E];
          if (F.gw) {
            load_n<E>(accw + o, a);
#pragma unroll
            for (int e = 0; e < E; ++e) a[e] += gyc[e] * xh[e];
            store_n<E>(accw + o, a);
          }
          if (F.gb) {
            load_n<E>(accb + o, a);
#pragma unroll
            for (int e = 0; e < E; ++e) a[e] += gyc[e];
            store_n<E>(accb + o, a);
          }
        }
      }
    }
    group_sum2<TPR, !XS>(s1, s2, red[parity]);  // (XS: 1024-thread blocks at their register limit)
    // Every vector read from next_g / next_x went into s1 / s2 and the block's barrier is behind:
    // the buffers are free for the next row.
    if constexpr (PF_SMEM) prefetch(base + gridDim.x);
    // grad_x = rstd (g - c1 - xh c2), g = gy w, xh = (x - mean) rstd, evaluated as
    // rstd ((gy w - c1) - c2r (x - mean)) with c2r = c2 rstd: four instructions an element, not six;
    // for 16-bit T as rstd (gy w + k - c2r x) with k = c2r mean - c1 (three: the rounding of k is
    // far below the output's, since a 16-bit x resolves (x - mean) only to 2^-8..2^-11 of mean).
    const C c1 = F.layer ? s1 * invH : C(0), c2r = s2 * invH * rstd;
    const C k1 = fold_mean && F.layer ? fma(c2r, mean, -c1) : -c1;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      if (!valid || col >= H) continue;
      const P xi = x_of(i);
      const P r = F.gres ? ld_pack<P>(static_cast<const T*>(L.gres) + row * L.gres_rs + col) : zero_vec<T>();
      P dxv = zero_vec<T>();
#pragma unroll
      for (int q = 0; q < NQ; ++q) {  // chunks of E, packed as they are made (fewer live registers)
        C w[E];
        if (F.w) weight_chunk(i, q, col, w);
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const int k = q * E + e;
          const C gy = unpack<T>(gp[i], k);
          const C g1 = F.w ? fma(gy, w[e], k1) : gy + k1;
          C dx = rstd * fma(-c2r, fold_mean ? unpack<T>(xi, k) : unpack<T>(xi, k) - mean, g1);
          if (F.gres) dx += unpack<T>(r, k);
          pack_into<T>(dxv, k, dx);
        }
      }
      *reinterpret_cast<P*>(static_cast<T*>(L.gx) + row * L.gx_rs + col) = dxv;
    }
  }
  if (!acc) return;
  C* pw = partial_w<T>(L) + int64_t(blockIdx.x) * H;
  C* pb = partial_b<T>(L) + int64_t(blockIdx.x) * H;
  if constexpr (RA) {  // this thread's columns: of the block's partial row (block groups), or of
#pragma unroll        // its group's shared accumulators (small groups, added below)
    for (int i = 0; i < I; ++i) {
      const int64_t col = int64_t(i * TPR + lane) * V;
      if (col >= H) continue;
#pragma unroll
      for (int q = 0; q < NQ; ++q) {
        const int o = ((i * NQ + q) * TPR + lane) * E;
        if (F.gw) store_n<E>(RPB == 1 ? pw + col + q * E : accw + o, &ra_w[i][q * E]);
        if (F.gb) store_n<E>(RPB == 1 ? pb + col + q * E : accb + o, &ra_b[i][q * E]);
      }
    }
    if constexpr (RPB == 1) return;
  }
  // The row groups' sums added in group order (RPB = 1 for block groups), written as
  // consecutive 16-byte chunks of the partial row (coalesced): column chunk c4 is chunk
  // q = c4 % NQ of vector j = c4 / NQ, held by lane j % TPR as its vector j / TPR.
  __syncthreads();
  const C* aw0 = reinterpret_cast<const C*>(norm_bwd_dyn);
  const C* ab0 = aw0 + (F.gw ? RPB * SPAN : 0);
  for (int c4 = threadIdx.x; int64_t(c4) * E < H; c4 += blockDim.x) {
    const int j = c4 / NQ, q = c4 % NQ;
    const int so = (((j / TPR) * NQ + q) * TPR + j % TPR) * E;
    C tw[E], tb[E], a[E];
#pragma unroll
    for (int e = 0; e < E; ++e) tw[e] = tb[e] = 0;
#pragma unroll
    for (int gi = 0; gi < RPB; ++gi) {
      if (F.gw) {
        load_n<E>(aw0 + gi * SPAN + so, a);
#pragma unroll
        for (int e = 0; e < E; ++e) tw[e] += a[e];
      }
      if (F.gb) {
        load_n<E>(ab0 + gi * SPAN + so, a);
#pragma unroll
        for (int e = 0; e < E; ++e) tb[e] += a[e];
      }
    }
    if (F.gw) store_n<E>(pw + int64_t(c4) * E, tw);
    if (F.gb) store_n<E>(pb + int64_t(c4) * E, tb);
  }
}

// Dynamic shared memory of bwd_reg: x's row (XS) or the dweight / dbias accumulators.
inline int64_t bwd_reg_smem(const NormLaunch& L, int compute_bytes) {
  const Config& c = L.cfg;
  if (c.xs) return int64_t(c.tpr) * c.items * 16;
  const int nacc = c.regacc && rows_per_block(c.tpr) == 1 ? 0 : (L.gw ? 1 : 0) + (L.gb ? 1 : 0);
  const int64_t span = int64_t(c.tpr) * c.items * c.vec;
  return int64_t(rows_per_block(c.tpr)) * span * compute_bytes * nacc + (c.prefetch ? bwd_prefetch_smem(c.tpr, c.items) : 0);
}

// Looped: grad_x only (two passes over grad_out and x); dweight / dbias come from colred.
template <class T, int TPR, int V>
__global__ void __launch_bounds__(block_threads(TPR)) bwd_loop(const NormLaunch L) {
  using C = compute_t<T>;
  constexpr int RPB = TPR > 32 ? 1 : 128 / TPR;
  __shared__ C red[2][64];
  const int lane = threadIdx.x % TPR, group = threadIdx.x / TPR;
  const int64_t H = L.H;
  const C invH = C(1) / C(H);
  int parity = 0;
  for (int64_t base = int64_t(blockIdx.x) * RPB; base < L.rows; base += int64_t(gridDim.x) * RPB, parity ^= 1) {
    const int64_t row = base + group;
    const bool valid = row < L.rows;
    const C mean = (valid && L.layer) ? static_cast<const C*>(L.mean)[row] : C(0);
    const C rstd = valid ? static_cast<const C*>(L.rstd)[row] : C(0);
    C s1 = 0, s2 = 0;
    if (valid)
      for (int64_t col = int64_t(lane) * V; col < H; col += int64_t(TPR) * V) {
        C gy[V], g[V], xh[V];
        bwd_load<V, T>(L, row, col, mean, rstd, gy, g, xh, s1, s2);
      }
    group_sum2<TPR>(s1, s2, red[parity]);
    if (!valid) continue;
    const C c1 = L.layer ? s1 * invH : C(0), c2 = s2 * invH;
    for (int64_t col = int64_t(lane) * V; col < H; col += int64_t(TPR) * V) {
      C gy[V], g[V], xh[V], t1 = 0, t2 = 0;
      bwd_load<V, T>(L, row, col, mean, rstd, gy, g, xh, t1, t2);
      bwd_store<V, T>(L, row, col, rstd, c1, c2, g, xh);
    }
  }
}

// dweight / dbias partials of the looped and XS paths: block (x: kColredThreads x V columns,
// y: a chunk of rows); rows in order, four rows' loads issued together.
template <class T, int V>
__global__ void __launch_bounds__(kColredThreads) colred(const NormLaunch L) {
  using C = compute_t<T>;
  if (L.cfg.finish_pdl == 2) pdl_trigger();  // the finish's blocks may be placed (they wait for this grid)
  const int64_t col = (int64_t(blockIdx.x) * kColredThreads + threadIdx.x) * V;
  if (col >= L.H) return;
  const int64_t r0 = int64_t(blockIdx.y) * L.cfg.rows_per_chunk;
  const int64_t r1 = r0 + L.cfg.rows_per_chunk < L.rows ? r0 + L.cfg.rows_per_chunk : L.rows;
  const T* gy = static_cast<const T*>(L.gy);
  const T* x = static_cast<const T*>(L.x);
  const C* mean = static_cast<const C*>(L.mean);
  const C* rstd = static_cast<const C*>(L.rstd);
  C aw[V], ab[V];
#pragma unroll
  for (int k = 0; k < V; ++k) aw[k] = ab[k] = 0;
  constexpr int U = 4;
  int64_t r = r0;
  for (; r + U <= r1; r += U) {
    C g[U][V], xv[U][V], m[U], rs[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      load_n<V>(gy + (r + u) * L.gy_rs + col, g[u]);
      load_n<V>(x + (r + u) * L.x_rs + col, xv[u]);
      m[u] = L.layer ? mean[r + u] : C(0);
      rs[u] = rstd[r + u];
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        aw[k] += g[u][k] * ((xv[u][k] - m[u]) * rs[u]);
        ab[k] += g[u][k];
      }
  }
  for (; r < r1; ++r) {
    C g[V], xv[V];
    load_n<V>(gy + r * L.gy_rs + col, g);
    load_n<V>(x + r * L.x_rs + col, xv);
    const C m = L.layer ? mean[r] : C(0), rs = rstd[r];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      aw[k] += g[k] * ((xv[k] - m) * rs);
      ab[k] += g[k];
    }
  }
  if (L.gw) store_n<V>(partial_w<T>(L) + int64_t(blockIdx.y) * L.H + col, aw);
  if (L.gb) store_n<V>(partial_b<T>(L) + int64_t(blockIdx.y) * L.H + col, ab);
}

// dweight / dbias from their [P, H] partial rows (P: the row chunks of the backward kernel), both
// gradients in one launch (grid.y). A block: 32 column groups of V columns (one 16-byte load per
// partial row when V > 1) x TY slices of the partial rows. Sum order, fixed by (P, H, TY): each
// thread its rows p = s, s + TY, ... (s its slice), then the TY slices in order. The partials are
// mostly L2-resident (written last by the kernel before), so the cost is blocks and latency, not
// bytes: four loads in flight per thread, few blocks. H100, LayerNorm bf16, the span of
// the backward (tools/profile_one.py --timeline): 2048 x 65536 (30 partials) 320.4 us with TY = 8
// against 336.7 at TY = 32 (338.5 without PDL) and 338.3 for the kernel before (two launches,
// 1024-thread blocks of 32 columns, one scalar load each); 4096 x 16384 150.3 vs 155.8 at TY = 32. Clusters of blocks
// splitting the partial rows measured slower everywhere (4096 x 16384: 167 / 188 / 231 us at 2 /
// 4 / 8 blocks) or equal (262144 x 128).
template <class C> struct FinishArgs {
  const C* part[2];  // [P, H] partial rows of gradient 0 / 1 (grid.y)
  void* out[2];      // [H] gradient (T, or float where f32)
  bool f32[2];
  int64_t P = 0, H = 0;
};
template <class T, int V>
__global__ void __launch_bounds__(1024) finish(const FinishArgs<compute_t<T>> a) {
  using C = compute_t<T>;
  __shared__ __align__(16) C sm[32][32 * V];  // [slice][column of the block]
  pdl_wait();  // launched early (PDL): from here on the partials are written
  const int tx = threadIdx.x, ty = threadIdx.y, TY = int(blockDim.y);
  const int64_t col = (int64_t(blockIdx.x) * 32 + tx) * V;
  const C* part = a.part[blockIdx.y];
  const int64_t H = a.H, P = a.P;
  C t[V];
#pragma unroll
  for (int k = 0; k < V; ++k) t[k] = 0;
  if (col < H) {
    int64_t p = ty;
    for (; p + 3 * TY < P; p += 4 * TY) {  // four loads issued, then added in row order
      C v[4][V];
#pragma unroll
      for (int u = 0; u < 4; ++u) load_n<V>(part + (p + u * TY) * H + col, v[u]);
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) t[k] += v[u][k];
    }
    for (; p < P; p += TY) {
      C v[V];
      load_n<V>(part + p * H + col, v);
#pragma unroll
      for (int k = 0; k < V; ++k) t[k] += v[k];
    }
  }
  store_n<V>(&sm[ty][tx * V], t);
  __syncthreads();
  if (ty == 0 && col < H) {  // the slices in order; scalar stores (the gradient may be 2-byte aligned)
#pragma unroll
    for (int k = 0; k < V; ++k) t[k] = 0;
    for (int j = 0; j < TY; ++j) {
      C v[V];
      load_n<V>(&sm[j][tx * V], v);
#pragma unroll
      for (int k = 0; k < V; ++k) t[k] += v[k];
    }
    void* out = a.out[blockIdx.y];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (a.f32[blockIdx.y]) static_cast<float*>(out)[col + k] = float(t[k]);
      else static_cast<T*>(out)[col + k] = from_compute<T>(t[k]);
    }
  }
}

}  // namespace baracuda::norm::kern
