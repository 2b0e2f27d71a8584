// Gumbel-softmax forward / backward and the Gumbel noise field, templated on the storage type.
//
//   z = (x + g) * (1 / tau),  g = -log(-log(u)), u = Philox(seed, offset, logical index)  (philox.cuh)
//   y_soft = exp(z - max z) / sum(exp(z - max z))
//   hard: y = one-hot at the first index of the maximum of y_soft as rounded to T (torch's
//         y_soft.max(dim) index), exact 0 / 1 values
//   backward: gx = y_soft * (gy - sum(gy * y_soft)) / tau
// Half types compute in f32 with the f32 noise, f64 in f64 with the f64 noise. A row with NaN,
// +inf, or only -inf gives NaN (soft and hard), like softmax.
#pragma once
#include "common/compute_math.cuh"
#include "common/philox.cuh"
#include "softmax/rowops_common.cuh"

namespace baracuda::softmax::rowops {

namespace cmath = kernels::cmath;

// exp(z - m) of an element, capped at 1 (libm exp is not correctly rounded: exp of a tiny negative
// could exceed 1, and the rounded maximum of y_soft must be the one at z == m). -inf gives 0.
template <class C> __device__ __forceinline__ C gexp(C z, C m) {
  if (z == ninf<C>()) return C(0);
  const C e = cmath::exp(z - m);
  return e > C(1) ? C(1) : e;  // NaN stays NaN
}

// Online (max, sum of exp(z - max)) pairs, for the rows_global path (one pass instead of two).
// A NaN z poisons the sum; +inf makes the max +inf (the row is NaN below); padding is (-inf, 0).
template <class C> __device__ __forceinline__ void online_add(C& m, C& s, C z) {
  if (z > m) {
    s = s * cmath::exp(m - z) + C(1);  // m = -inf: s * 0 + 1
    m = z;
  } else if (z != ninf<C>()) {
    s += cmath::exp(z - m);
  }
}
template <class C> __device__ __forceinline__ void combine(C& m, C& s, C m2, C s2) {
  const C mm = m > m2 ? m : m2;
  const C a = m == mm ? C(1) : cmath::exp(m - mm);
  const C b = m2 == mm ? C(1) : cmath::exp(m2 - mm);
  s = s * a + s2 * b;
  m = mm;
}
template <bool WARP, class C> __device__ __forceinline__ void team_combine(C& m, C& s, Scratch<C>& sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) combine(m, s, shfl_x(m, o), shfl_x(s, o));
  if constexpr (!WARP) {
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads();
    if (l == 0) {
      sh.c[0][w] = m;
      sh.c[1][w] = s;
    }
    __syncthreads();
    m = l < nw ? sh.c[0][l] : ninf<C>();
    s = l < nw ? sh.c[1][l] : C(0);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) combine(m, s, shfl_x(m, o), shfl_x(s, o));
  }
}

// z of chunk c (elements [4c, 4c + 4)) of a row: x at `xr` (axis stride ax), logical index of
// element 0 at `lbase` (axis stride lax). Slots past the row are -inf.
template <class T, class C>
__device__ __forceinline__ void gumbel_z(const T* __restrict__ xr, int64_t ax, uint64_t lbase, int64_t lax, int64_t c,
                                         int64_t len, C inv_tau, uint64_t offset, uint64_t seed, C (&z)[4]) {
  const int64_t i0 = 4 * c;
  if (i0 >= len) {
#pragma unroll
    for (int j = 0; j < 4; ++j) z[j] = ninf<C>();
    return;
  }
  load4<T>(xr, ax, i0, len, z, C(0));
  uint32_t r[4];
  rng::words4_at(lbase + uint64_t(i0 * lax), lax, offset, seed, r);
#pragma unroll
  for (int j = 0; j < 4; ++j) z[j] = i0 + j < len ? (z[j] + rng::gumbel_of<C>(r[j])) * inv_tau : ninf<C>();
}

template <class T, bool WARP, int K, bool REG>
__global__ void __launch_bounds__(WARP ? 256 : 1024, WARP ? 4 : 1) gumbel_fwd(Geo g, T* __restrict__ out, T* __restrict__ soft,
                                                   const T* __restrict__ x, double inv_tau_d, bool hard,
                                                   uint64_t seed, uint64_t offset) {
  using C = compute_t<T>;
  __shared__ Scratch<C> sh;
  const Team<WARP> tm;
  const C inv_tau = C(inv_tau_d);
  const int64_t nch = (g.len + 3) / 4;
  const int nk = REG ? K : int((nch + tm.size - 1) / tm.size);
  for (int64_t row = tm.first; row < g.rows; row += tm.step) {
    int64_t o[4];
    row_offsets(g, row, o);
    const T* xr = x + o[1];
    C v[REG ? K : 1][4];
    auto chunk = [&](int k) { return int64_t(k) * tm.size + tm.lane; };
    C m = ninf<C>(), s = 0;
    if constexpr (REG) {
      // pass 1: z and its maximum
#pragma unroll
      for (int k = 0; k < K; ++k) {
        gumbel_z<T>(xr, g.ax[1], uint64_t(o[3]), g.ax[3], chunk(k), g.len, inv_tau, offset, seed, v[k]);
#pragma unroll
        for (int j = 0; j < 4; ++j) m = nmax(m, v[k][j]);
      }
      m = team_max<WARP>(m, sh);
      // pass 2: the sum of exp(z - m), keeping exp(z - m) in place of z
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          v[k][j] = gexp(v[k][j], m);
          s += v[k][j];
        }
      s = team_sum1<WARP>(s, sh);
    } else {
      // one pass: online (max, sum); the noise is regenerated in the later passes
      for (int k = 0; k < nk; ++k) {
        gumbel_z<T>(xr, g.ax[1], uint64_t(o[3]), g.ax[3], chunk(k), g.len, inv_tau, offset, seed, v[0]);
#pragma unroll
        for (int j = 0; j < 4; ++j) online_add(m, s, v[0][j]);
      }
      team_combine<WARP>(m, s, sh);
    }
    // a row whose max is -inf, +inf or NaN is NaN (a NaN z also left a NaN sum)
    if (!(m > ninf<C>() && m < std::numeric_limits<C>::infinity())) s = qnan<C>();
    const C r = C(1) / s;
    const C top = to_compute(from_compute<T>(r));  // the rounded maximum of y_soft
    // pass 3 (hard): the first index whose rounded y_soft equals the rounded maximum
    long long hot = -1;
    if (hard) {
      long long first = (long long)(~0ull >> 1);
#pragma unroll
      for (int k = 0; k < (REG ? K : nk); ++k) {
        C(&e)[4] = v[REG ? k : 0];
        if constexpr (!REG) {
          gumbel_z<T>(xr, g.ax[1], uint64_t(o[3]), g.ax[3], chunk(k), g.len, inv_tau, offset, seed, e);
#pragma unroll
          for (int j = 0; j < 4; ++j) e[j] = gexp(e[j], m);
        }
        const int64_t i0 = 4 * chunk(k);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const bool hit = i0 + j < g.len && to_compute(from_compute<T>(e[j] * r)) == top;
          if (hit && i0 + j < first) first = i0 + j;
        }
      }
      hot = team_min_i<WARP>(first, sh);
    }
    // pass 4: write y (and y_soft)
    T* orow = out + o[0];
    T* srow = soft ? soft + o[2] : nullptr;
#pragma unroll
    for (int k = 0; k < (REG ? K : nk); ++k) {
      C(&e)[4] = v[REG ? k : 0];
      const int64_t i0 = 4 * chunk(k);
      if (i0 >= g.len) continue;
      if constexpr (!REG) {
        gumbel_z<T>(xr, g.ax[1], uint64_t(o[3]), g.ax[3], chunk(k), g.len, inv_tau, offset, seed, e);
#pragma unroll
        for (int j = 0; j < 4; ++j) e[j] = gexp(e[j], m);
      }
      C y[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) y[j] = e[j] * r;
      if (srow) store4<T>(srow, g.ax[2], i0, g.len, y);
      if (hard) {
#pragma unroll
        for (int j = 0; j < 4; ++j) y[j] = s != s ? s : (i0 + j == hot ? C(1) : C(0));
      }
      store4<T>(orow, g.ax[0], i0, g.len, y);
    }
  }
}

// gx = y_soft * (gy - sum(gy * y_soft)) * inv_tau
template <class C> struct GumbelBackwardRule {
  C inv_tau, d;
  __device__ __forceinline__ void reset() { d = 0; }
  __device__ __forceinline__ void add(const C (&gy)[4], const C (&y)[4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) d += gy[j] * y[j];
  }
  template <bool WARP> __device__ __forceinline__ void finish(Scratch<C>& sh) { d = team_sum1<WARP>(d, sh); }
  __device__ __forceinline__ void grad(const C (&gy)[4], const C (&y)[4], C (&gx)[4]) const {
#pragma unroll
    for (int j = 0; j < 4; ++j) gx[j] = y[j] * (gy[j] - d) * inv_tau;
  }
};
template <class T, bool WARP, int K, bool REG>
__global__ void __launch_bounds__(WARP ? 256 : 1024, WARP ? 4 : 1) gumbel_bwd(Geo g, T* __restrict__ gx, const T* __restrict__ gy,
                                                   const T* __restrict__ ys, double inv_tau_d) {
  using C = compute_t<T>;
  __shared__ Scratch<C> sh;
  const Team<WARP> tm;
  GumbelBackwardRule<C> rule{C(inv_tau_d), C(0)};
  row_backward<T, WARP, K, REG>(tm, g, gx, gy, ys, rule, sh);
}

// The noise field itself, written to out (f32 or f64) at its strides: a thread per 4 logical
// elements (row-major index L of out's shape).
template <class C>
__global__ void __launch_bounds__(256) gumbel_noise_kernel(Geo g, C* __restrict__ out, int64_t numel, uint64_t seed,
                                                           uint64_t offset) {
  const int64_t nq = (numel + 3) / 4;
  for (int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < nq; q += int64_t(gridDim.x) * blockDim.x) {
    const rng::Words4 w = rng::philox4x32_10(uint64_t(q), offset, seed);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int64_t L = 4 * q + j;
      if (L >= numel) break;
      // row-major index -> element offset (dims and strides of out, all of them)
      int64_t off = 0;
      for (int d = g.nd - 1; d >= 0; --d) {
        const int64_t qd = L / g.dims[d];
        off += (L - qd * g.dims[d]) * g.st[0][d];
        L = qd;
      }
      out[off] = rng::gumbel_of<C>(w.w[j]);
    }
  }
}

template <class T, bool WARP, int K, bool REG>
void gumbel_launch_one(const RowOpLaunch& L, const Geo& g, cudaStream_t st) {
  const unsigned blocks = row_grid(L);
  if (L.op == RowOp::GumbelSoftmax)
    gumbel_fwd<T, WARP, K, REG><<<blocks, L.threads, 0, st>>>(g, static_cast<T*>(L.out),
                                                              L.has_out2 ? static_cast<T*>(L.out2) : nullptr,
                                                              static_cast<const T*>(L.in0), L.inv_tau, L.hard, L.seed,
                                                              L.offset);
  else if constexpr (K <= 4 || !REG)  // the backward never takes k = 8 (select)
    gumbel_bwd<T, WARP, K, REG><<<blocks, L.threads, 0, st>>>(g, static_cast<T*>(L.out), static_cast<const T*>(L.in0),
                                                              static_cast<const T*>(L.in1), L.inv_tau);
  else
    throw Unsupported("gumbel_softmax_backward: no kernel for k = 8 chunks per lane");
  check_launch(L.op == RowOp::GumbelSoftmax ? "gumbel_softmax" : "gumbel_softmax_backward");
}

template <class T> void gumbel_launch(const RowOpLaunch& L, cudaStream_t st) {
  const Geo g = geo_of(L);
  for_row_geometry<T>(L, [&](auto warp, auto k, auto reg) { gumbel_launch_one<T, decltype(warp)::value, decltype(k)::value, decltype(reg)::value>(L, g, st); });
}

}  // namespace baracuda::softmax::rowops
