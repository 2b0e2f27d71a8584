// Sparsemax (Martins & Astudillo 2016) forward / backward, templated on the storage type.
//
//   y = max(x - t, 0) with t the unique solution of f(t) = sum(max(x - t, 0)) - 1 = 0.
//
// The row is shifted by its maximum m first (d = x - m <= 0, exact for every element that can
// be in the support), so t - m lies in [-1, 0) whatever the magnitude of x. f is convex,
// piecewise linear and decreasing; each pass over the row evaluates, at two thresholds, the
// support count c(t) = #{d > t} and f(t) = sum_{d > t}(d - t) - 1 (a sum of positive terms:
// no cancellation):
//   - the Newton point from the best lower bound lo (f(lo) >= 0): tn = lo + f(lo) / c(lo).
//     tn <= t* always, and tn == t* exactly when c(tn) == c(lo) (the support is final);
//   - the midpoint of [tn, hi], which at least halves the bracket, so a pathological row
//     (Newton creeping one element per pass) still ends within ~log2(1 / ulp) passes.
// The result takes t from the final support S: t = lo + f(lo) / |S| = (sum_S d - 1) / |S|,
// exact to the compute type's precision. Typical rows take 3..6 passes; the row stays in
// registers (Warp / Block) or is re-read from L2 per pass (Global).
//
// Backward: gx = [y > 0] * (gy - mean_{y > 0}(gy)).
// A row with NaN or +inf, or of only -inf, gives NaN; -inf elements get 0. In backward, NaN y
// counts as outside the support.
#pragma once
#include "softmax/rowops_common.cuh"

namespace baracuda::softmax::rowops {

template <class T, bool WARP, int K, bool REG>
__global__ void __launch_bounds__(WARP ? 256 : 1024, WARP ? 4 : 1) sparsemax_fwd(Geo g, T* __restrict__ out, const T* __restrict__ x) {
  using C = compute_t<T>;
  __shared__ Scratch<C> sh;
  const Team<WARP> tm;
  const int64_t nch = (g.len + 3) / 4;
  const int nk = REG ? K : int((nch + tm.size - 1) / tm.size);
  for (int64_t row = tm.first; row < g.rows; row += tm.step) {
    int64_t o[4];
    row_offsets(g, row, o);
    const T* xr = x + o[1];
    C v[REG ? K : 1][4];
    auto i0_of = [&](int k) { return 4 * (int64_t(k) * tm.size + tm.lane); };
    C m = ninf<C>();
#pragma unroll
    for (int k = 0; k < (REG ? K : nk); ++k) {
      C(&z)[4] = v[REG ? k : 0];
      load4<T>(xr, g.ax[1], i0_of(k), g.len, z, ninf<C>());
#pragma unroll
      for (int j = 0; j < 4; ++j) m = nmax(m, z[j]);
    }
    m = team_max<WARP>(m, sh);
    T* orow = out + o[0];
    if (!(m > ninf<C>() && m < std::numeric_limits<C>::infinity())) {  // NaN, +inf, or only -inf
      for (int64_t i = tm.lane; i < g.len; i += tm.size) orow[i * g.ax[0]] = from_compute<T>(qnan<C>());
      continue;
    }
    if constexpr (REG) {
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int j = 0; j < 4; ++j) v[k][j] -= m;  // -inf stays -inf
    }
    // Evaluates (f, c) at t0 and t1 over the row (every lane gets the team's totals).
    auto eval2 = [&](C t0, C t1, C& f0, long long& c0, C& f1, long long& c1) {
      C fs[2] = {0, 0};
      long long cs[2] = {0, 0};
#pragma unroll
      for (int k = 0; k < (REG ? K : nk); ++k) {
        C(&d)[4] = v[REG ? k : 0];
        if constexpr (!REG) {
          load4<T>(xr, g.ax[1], i0_of(k), g.len, d, ninf<C>());
#pragma unroll
          for (int j = 0; j < 4; ++j) d[j] -= m;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (d[j] > t0) {
            fs[0] += d[j] - t0;
            ++cs[0];
          }
          if (d[j] > t1) {
            fs[1] += d[j] - t1;
            ++cs[1];
          }
        }
      }
      team_sum<WARP, 2, 2>(fs, cs, sh);
      f0 = fs[0] - C(1);
      c0 = cs[0];
      f1 = fs[1] - C(1);
      c1 = cs[1];
    };
    C lo = C(-1), hi = C(0), f_lo, f_unused;
    long long c_lo, c_unused;
    eval2(lo, hi, f_lo, c_lo, f_unused, c_unused);  // c(-1) >= 1: the maximum is at d = 0
    C t = lo + f_lo / C(c_lo);
    for (int pass = 0; pass < 160; ++pass) {
      const C tn = t;
      const C tmid = tn + (hi - tn) * C(0.5);
      C fn, fm;
      long long cn, cm;
      eval2(tn, tmid, fn, cn, fm, cm);
      if (cn == c_lo || cn == 0) {  // the support is final (cn == 0 only through rounding)
        if (cn > 0) t = tn + fn / C(cn);
        break;
      }
      if (fm >= C(0) && tmid > tn) {
        lo = tmid;
        f_lo = fm;
        c_lo = cm;
      } else {
        if (tmid < hi) hi = tmid;
        if (fn >= C(0)) {
          lo = tn;
          f_lo = fn;
          c_lo = cn;
        } else if (tn < hi) {
          hi = tn;
        }
      }
      const C next = lo + f_lo / C(c_lo);
      if (!(hi > lo) || next == tn) {  // the bracket has no float left inside, or no progress
        t = next;
        break;
      }
      t = next;
    }
#pragma unroll
    for (int k = 0; k < (REG ? K : nk); ++k) {
      const int64_t i0 = i0_of(k);
      if (i0 >= g.len) continue;
      C(&d)[4] = v[REG ? k : 0];
      if constexpr (!REG) {
        load4<T>(xr, g.ax[1], i0, g.len, d, ninf<C>());
#pragma unroll
        for (int j = 0; j < 4; ++j) d[j] -= m;
      }
      C y[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) y[j] = d[j] > t ? d[j] - t : C(0);
      store4<T>(orow, g.ax[0], i0, g.len, y);
    }
  }
}

// gx = [y > 0] * (gy - mean_{y > 0}(gy))
template <class C> struct SparsemaxBackwardRule {
  C sum[1], mean;
  long long cnt[1];
  __device__ __forceinline__ void reset() {
    sum[0] = 0;
    cnt[0] = 0;
  }
  __device__ __forceinline__ void add(const C (&gy)[4], const C (&y)[4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (y[j] > C(0)) {
        sum[0] += gy[j];
        ++cnt[0];
      }
  }
  template <bool WARP> __device__ __forceinline__ void finish(Scratch<C>& sh) {
    team_sum<WARP, 1, 1>(sum, cnt, sh);
    mean = cnt[0] > 0 ? sum[0] / C(cnt[0]) : C(0);
  }
  __device__ __forceinline__ void grad(const C (&gy)[4], const C (&y)[4], C (&gx)[4]) const {
#pragma unroll
    for (int j = 0; j < 4; ++j) gx[j] = y[j] > C(0) ? gy[j] - mean : C(0);
  }
};
template <class T, bool WARP, int K, bool REG>
__global__ void __launch_bounds__(WARP ? 256 : 1024, WARP ? 4 : 1) sparsemax_bwd(Geo g, T* __restrict__ gx, const T* __restrict__ gy,
                                                      const T* __restrict__ y) {
  using C = compute_t<T>;
  __shared__ Scratch<C> sh;
  const Team<WARP> tm;
  SparsemaxBackwardRule<C> rule;
  row_backward<T, WARP, K, REG>(tm, g, gx, gy, y, rule, sh);
}

template <class T, bool WARP, int K, bool REG>
void sparsemax_launch_one(const RowOpLaunch& L, const Geo& g, cudaStream_t st) {
  const unsigned blocks = row_grid(L);
  if (L.op == RowOp::Sparsemax)
    sparsemax_fwd<T, WARP, K, REG><<<blocks, L.threads, 0, st>>>(g, static_cast<T*>(L.out), static_cast<const T*>(L.in0));
  else if constexpr (K <= 4 || !REG)  // the backward never takes k = 8 (select)
    sparsemax_bwd<T, WARP, K, REG><<<blocks, L.threads, 0, st>>>(g, static_cast<T*>(L.out), static_cast<const T*>(L.in0),
                                                                 static_cast<const T*>(L.in1));
  else
    throw Unsupported("sparsemax_backward: no kernel for k = 8 chunks per lane");
  check_launch(L.op == RowOp::Sparsemax ? "sparsemax" : "sparsemax_backward");
}

template <class T> void sparsemax_launch(const RowOpLaunch& L, cudaStream_t st) {
  const Geo g = geo_of(L);
  for_row_geometry<T>(L, [&](auto warp, auto k, auto reg) { sparsemax_launch_one<T, decltype(warp)::value, decltype(k)::value, decltype(reg)::value>(L, g, st); });
}

}  // namespace baracuda::softmax::rowops
