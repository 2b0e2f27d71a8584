// Row-structured losses (torch.nn.functional's semantics): cosine_embedding_loss,
// multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss, triplet_margin_loss,
// forward and backward, templated on the storage type T (math in f32 for half / f32 storage, f64
// for f64, rounded once).
//
//   row_kernel<T, V, G, K>  loss kind K, one row per group of G threads (a warp, 8 rows per block,
//                        or a 256-thread block): the row's sums in a fixed order (per thread in
//                        column order, then a fixed shuffle / shared tree), then the row's loss
//                        (forward) or its gradients (backward, a second pass over the row where
//                        they depend on the row's sums). V elements per load (16-byte vectors when
//                        the plan allows), several loads of every operand issued before any is used
//                        (row_sweep). One kernel per kind: each gets its own register budget.
//   mlm_warp_kernel<T, M> multilabel margin for C <= 32 M: a warp per row, the row and its target
//                        list in registers (lane l holds classes q * 32 + l), counts exact in ints.
//   mlm_kernel<T>        multilabel margin, longer rows: one block per row, the row's target list
//                        and a class bitmap in shared memory; per-target counts with integer shared
//                        atomics (exact, so the order does not matter).
//   row_finish<T>        mean / sum: one block adds the per-row losses in a fixed order.
// No float atomics anywhere.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/cuda_check.h"
#include "common/compute_math.cuh"
#include "common/dtype_traits.cuh"
#include "common/smem_opt_in.h"
#include "loss/loss_common.cuh"
#include "loss/row_launch.h"

namespace baracuda::loss::detail {

namespace cmath = kernels::cmath;

template <class A> __device__ __forceinline__ A r_sigmoid(A v) {
  if (v >= A(0)) return A(1) / (A(1) + cmath::exp(-v));
  const A e = cmath::exp(v);
  return e / (A(1) + e);
}

// A sum over the G threads of a row, the same fixed order on every call; every thread gets it.
template <int G, class A> __device__ __forceinline__ A group_sum(A v, A* sh) {
  if constexpr (G == 32) return warp_sum(v);
  else return block_sum(v, sh);
}

// The row's class index (int32 / int64 targets).
__device__ __forceinline__ int64_t row_index(const RowLaunch& L, int64_t off) {
  return L.target_dtype == DType::Int64 ? static_cast<const int64_t*>(L.target)[off]
                                        : int64_t(static_cast<const int32_t*>(L.target)[off]);
}
// A numeric target (cosine's +-1): integers or the input's dtype.
template <class T> __device__ __forceinline__ acc_of<T> row_value(const RowLaunch& L, int64_t off) {
  using A = acc_of<T>;
  if (L.target_dtype == DType::Int64) return A(static_cast<const int64_t*>(L.target)[off]);
  if (L.target_dtype == DType::Int32) return A(static_cast<const int32_t*>(L.target)[off]);
  return A(to_compute(static_cast<const T*>(L.target)[off]));
}

template <class T, int V, class A>
__device__ __forceinline__ void row_st(const RowLaunch& L, int k, int64_t i, int64_t c0, const A (&v)[V]) {
  T* p = static_cast<T*>(L.grad[k]) + i * L.grs[k];
  if constexpr (V > 1) store_chunk<T, V>(p, c0, L.d, v);
  else p[c0 * L.gcs[k]] = from_compute<T>(v[0]);
}
// The upstream gradient of row i (mean: / n).
template <class T> __device__ __forceinline__ acc_of<T> row_grad_scale(const RowLaunch& L, int64_t i) {
  using A = acc_of<T>;
  const T* gl = static_cast<const T*>(L.grad_loss);
  if (L.reduction == Reduction::None) return A(to_compute(gl[i * L.gl_stride]));
  const A g = A(to_compute(gl[0]));
  return L.reduction == Reduction::Mean ? g / A(L.n) : g;
}
template <class T> __device__ __forceinline__ void row_put_loss(const RowLaunch& L, int64_t i, acc_of<T> loss) {
  if (L.reduction == Reduction::None) static_cast<T*>(L.out)[i * L.out_stride] = from_compute<T>(loss);
  else static_cast<acc_of<T>*>(L.workspace)[i] = loss;
}

// Chunks per batch: 4 16-byte loads per thread in flight forward (8 scalar ones), split over the
// operands; backward keeps fewer (its gradient stores need the registers; more spilled at 64).
template <int NOP, int V, bool B>
constexpr int row_batch() {
  const int want = B ? (V == 1 ? 4 : 2) : (V == 1 ? 8 : 4);
  return want / NOP > 0 ? want / NOP : 1;
}
// Raw storage of V elements of operand k at (row i, columns c..): one 16-byte load for a whole
// vector; the row's last, partial vector element by element (repeating column c past the end).
template <class T, int V>
__device__ __forceinline__ Pack<T, V> row_ld_raw(const RowLaunch& L, int k, int64_t i, int64_t c) {
  const T* p = static_cast<const T*>(L.x[k]) + i * L.rs[k];
  Pack<T, V> pk;
  if constexpr (V > 1) {
    if (c + V <= L.d) {
      pk = *reinterpret_cast<const Pack<T, V>*>(p + c);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) pk.v[j] = p[c + j < L.d ? c + j : c];
    }
  } else {
    pk.v[0] = p[c * L.cs[k]];
  }
  return pk;
}
// The row's columns for this thread (chunks c0 = lane * V + k * G * V, in order): NOP operands
// (slots 0 .. NOP-1) loaded U chunks at a time, all U * NOP loads issued before any is used;
// pre() runs once after the first batch's loads are issued (work that depends on another load,
// e.g. the target, overlaps the row's first loads); f(c, v) then takes chunk c (< d) with
// v[k][j] = operand k at column c + j (0 past the row's end).
template <class T, int V, int G, int NOP, bool B, class Pre, class Fn>
__device__ __forceinline__ void row_sweep(const RowLaunch& L, int64_t i, int lane, Pre&& pre, Fn&& f) {
  using A = acc_of<T>;
  constexpr int U = row_batch<NOP, V, B>();
  constexpr int64_t step = int64_t(G) * V;
  Pack<T, V> raw[U][NOP];
  int64_t c0 = int64_t(lane) * V;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int k = 0; k < NOP; ++k)
      if (c0 + u * step < L.d) raw[u][k] = row_ld_raw<T, V>(L, k, i, c0 + u * step);
  pre();
  while (true) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * step;
      if (c < L.d) {
        A v[NOP][V];
#pragma unroll
        for (int k = 0; k < NOP; ++k)
#pragma unroll
          for (int j = 0; j < V; ++j) v[k][j] = c + j < L.d ? A(to_compute(raw[u][k].v[j])) : A(0);
        f(c, v);
      }
    }
    c0 += U * step;
    if (c0 >= L.d) break;
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < NOP; ++k)
        if (c0 + u * step < L.d) raw[u][k] = row_ld_raw<T, V>(L, k, i, c0 + u * step);
  }
}
struct RowNoPre {
  __device__ __forceinline__ void operator()() const {}
};

// ---- cosine_embedding_loss ----------------------------------------------------------------------
// cos = x1.x2 / sqrt((|x1|^2 + eps)(|x2|^2 + eps)); loss = 1 - cos (y = 1), max(cos - margin, 0)
// (y = -1), 0 otherwise. d cos / d x1 = x2 / denom - cos x1 / (|x1|^2 + eps).
template <class T, int V, int G, bool B>
__device__ void row_cosine(const RowLaunch& L, int64_t i, int lane, acc_of<T>* sh) {
  using A = acc_of<T>;
  A dot = 0, m1 = 0, m2 = 0;
  row_sweep<T, V, G, 2, B>(L, i, lane, RowNoPre{}, [&](int64_t c0, const A (&v)[2][V]) {
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (c0 + j < L.d) {
        dot += v[0][j] * v[1][j];
        m1 += v[0][j] * v[0][j];
        m2 += v[1][j] * v[1][j];
      }
  });
  dot = group_sum<G>(dot, sh);
  m1 = group_sum<G>(m1, sh) + A(L.eps);
  m2 = group_sum<G>(m2, sh) + A(L.eps);
  const A denom = cmath::sqrt(m1 * m2);
  const A cosv = dot / denom;
  const A y = row_value<T>(L, i * L.t_rs);
  const A margin = A(L.margin);
  if constexpr (!B) {
    const A loss = (y == A(1) ? A(1) - cosv : A(0)) + (y == A(-1) ? cmath::relu_nan(cosv - margin) : A(0));
    if (lane == 0) row_put_loss<T>(L, i, loss);
    return;
  }
  // clamp_min passes the gradient where cos - margin >= 0 (torch).
  const A dc = y == A(1) ? A(-1) : (y == A(-1) ? (cosv - margin >= A(0) ? A(1) : A(0)) : A(0));
  const A gr = row_grad_scale<T>(L, i) * dc;
  const A inv_d = A(1) / denom, c1 = cosv / m1, c2 = cosv / m2;
  row_sweep<T, V, G, 2, B>(L, i, lane, RowNoPre{}, [&](int64_t c0, const A (&v)[2][V]) {
    A ga[V], gb[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      ga[j] = gr * (v[1][j] * inv_d - c1 * v[0][j]);
      gb[j] = gr * (v[0][j] * inv_d - c2 * v[1][j]);
    }
    if (L.want[0]) row_st<T, V>(L, 0, i, c0, ga);
    if (L.want[1]) row_st<T, V>(L, 1, i, c0, gb);
  });
}

// ---- multi_margin_loss --------------------------------------------------------------------------
// loss = w[y] / C * sum_{j != y, z_j > 0} z_j^p with z_j = margin - x[y] + x[j] (torch's kernel:
// the weight multiplies z^p). grad[j] = g w[y] / C * (p == 1 ? 1 : 2 z_j) for z_j > 0, grad[y] =
// -sum_j grad[j]. A target outside [0, C) makes the row NaN.
template <class T, int V, int G, bool B>
__device__ void row_multi_margin(const RowLaunch& L, int64_t i, int lane, acc_of<T>* sh) {
  using A = acc_of<T>;
  // The target, then (row_sweep) the row's first loads, then x[y] and w[y]: the row does not wait
  // for the target. A bad target is carried as a flag (no early return between the loads).
  const int64_t y = row_index(L, i * L.t_rs);
  const T* xr = static_cast<const T*>(L.x[0]) + i * L.rs[0];
  const A margin = A(L.margin);
  const bool p1 = L.p == 1.0;
  bool bad = false;
  A xy = A(0), wy = A(1), gs = A(0);
  auto pre = [&]() {
    bad = y < 0 || y >= L.d;  // group-uniform
    if (!bad) {
      xy = A(to_compute(xr[y * L.cs[0]]));
      if (L.weight) wy = A(to_compute(static_cast<const T*>(L.weight)[y * L.w_cs]));
    }
    if (B) gs = bad ? qnan<A>() : row_grad_scale<T>(L, i) * wy / A(L.d);
  };
  A s = 0;
  row_sweep<T, V, G, 1, B>(L, i, lane, pre, [&](int64_t c0, const A (&v)[1][V]) {
    A gx[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A z = margin - xy + v[0][j];
      const bool on = c0 + j < L.d && c0 + j != y && z > A(0);
      gx[j] = bad ? gs : A(0);  // a bad row: NaN everywhere
      if (on) {
        if (B) gx[j] = gs * (p1 ? A(1) : A(2) * z);
        s += B ? gx[j] : (p1 ? z : z * z);
      }
    }
    if (B) row_st<T, V>(L, 0, i, c0, gx);  // column y gets 0 here, its value below
  });
  s = group_sum<G>(s, sh);
  if constexpr (!B) {
    if (lane == 0) row_put_loss<T>(L, i, bad ? qnan<A>() : wy * s / A(L.d));
    return;
  }
  if (bad) return;
  // The thread that stored y's chunk (0 there) writes grad[y]: program order keeps the last write.
  const int64_t yc = y / V;  // chunk index of y
  if (int(yc % G) == lane) {
    T* g = static_cast<T*>(L.grad[0]) + i * L.grs[0];
    g[y * L.gcs[0]] = from_compute<T>(-s);
  }
}

// ---- multilabel_soft_margin_loss ----------------------------------------------------------------
// loss = 1/C sum_j w_j (t_j softplus(-x_j) + (1 - t_j) softplus(x_j)); grad x = g w_j / C
// (sigmoid(x_j) - t_j); grad t = g w_j / C (softplus(-x_j) - softplus(x_j)) = -g w_j / C x_j.
template <class T, int V, int G, bool B>
__device__ void row_multilabel_soft(const RowLaunch& L, int64_t i, int lane, acc_of<T>* sh) {
  using A = acc_of<T>;
  const A gs = B ? row_grad_scale<T>(L, i) / A(L.d) : A(0);
  const T* w = static_cast<const T*>(L.weight);
  A s = 0;
  row_sweep<T, V, G, 2, B>(L, i, lane, RowNoPre{}, [&](int64_t c0, const A (&v)[2][V]) {
    A gx[V], gt[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A x = v[0][j], t = v[1][j];
      const bool in = c0 + j < L.d;
      const A wj = w && in ? A(to_compute(w[(c0 + j) * L.w_cs])) : A(1);
      if (B) {
        gx[j] = gs * wj * (r_sigmoid(x) - t);
        gt[j] = -gs * wj * x;
      } else if (in) {
        s += wj * (t * cmath::softplus(-x) + (A(1) - t) * cmath::softplus(x));
      }
    }
    if (B && L.want[0]) row_st<T, V>(L, 0, i, c0, gx);
    if (B && L.want[1]) row_st<T, V>(L, 1, i, c0, gt);
  });
  if (B) return;
  s = group_sum<G>(s, sh);
  if (lane == 0) row_put_loss<T>(L, i, s / A(L.d));
}

// ---- triplet_margin_loss ------------------------------------------------------------------------
// d_ap = ||a - p + eps||_P, d_an = ||a - n + eps||_P (swap: min with ||p - n + eps||_P);
// loss = max(margin + d_ap - d_an, 0). The norm's derivative as torch's norm backward.
template <class A> __device__ __forceinline__ A norm_term(A v, A p) {
  if (p == A(2)) return v * v;
  if (p == A(1)) return cmath::abs(v);
  return cmath::pow(cmath::abs(v), p);
}
template <class A> __device__ __forceinline__ A norm_root(A s, A p) {
  if (p == A(2)) return cmath::sqrt(s);
  if (p == A(1)) return s;
  return cmath::pow(s, A(1) / p);
}
// d ||v||_p / d v_k for the norm `nrm` of v.
template <class A> __device__ __forceinline__ A norm_deriv(A vk, A nrm, A p) {
  if (p == A(2)) return nrm == A(0) ? A(0) : vk / nrm;
  if (p == A(1)) return cmath::sgn(vk);
  if (p < A(1)) return vk == A(0) ? A(0) : cmath::sgn(vk) * cmath::pow(cmath::abs(vk), p - A(1)) * cmath::pow(nrm, A(1) - p);
  return nrm == A(0) ? A(0) : cmath::sgn(vk) * cmath::pow(cmath::abs(vk), p - A(1)) / cmath::pow(nrm, p - A(1));
}

template <class T, int V, int G, bool B>
__device__ void row_triplet(const RowLaunch& L, int64_t i, int lane, acc_of<T>* sh) {
  using A = acc_of<T>;
  const A p = A(L.p), eps = A(L.eps);
  A sp = 0, sn = 0, ss = 0;
  row_sweep<T, V, G, 3, B>(L, i, lane, RowNoPre{}, [&](int64_t c0, const A (&v)[3][V]) {
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (c0 + j < L.d) {
        sp += norm_term(v[0][j] - v[1][j] + eps, p);
        sn += norm_term(v[0][j] - v[2][j] + eps, p);
        if (L.swap) ss += norm_term(v[1][j] - v[2][j] + eps, p);
      }
  });
  const A dp = norm_root(group_sum<G>(sp, sh), p);
  const A dn = norm_root(group_sum<G>(sn, sh), p);
  const A ds = L.swap ? norm_root(group_sum<G>(ss, sh), p) : A(0);
  // torch.min(d_an, d_swap): the smaller takes the gradient, a tie splits it in halves.
  const A dneg = !L.swap ? dn : dn != dn ? dn : ds != ds ? ds : ds < dn ? ds : dn;  // NaN propagates
  const A v = A(L.margin) + dp - dneg;
  if constexpr (!B) {
    if (lane == 0) row_put_loss<T>(L, i, cmath::relu_nan(v));
    return;
  }
  const A gr = row_grad_scale<T>(L, i) * (v >= A(0) ? A(1) : A(0));
  A cn = -gr, cs = A(0);
  if (L.swap) {
    if (dn == ds) cn = cs = -gr / A(2);
    else if (dn > ds) { cs = -gr; cn = A(0); }
  }
  row_sweep<T, V, G, 3, B>(L, i, lane, RowNoPre{}, [&](int64_t c0, const A (&v)[3][V]) {
    A ga[V], gq[V], gn[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A a = v[0][j], q = v[1][j], r = v[2][j];
      const A up = gr * norm_deriv(a - q + eps, dp, p);
      const A un = cn * norm_deriv(a - r + eps, dn, p);
      const A us = L.swap ? cs * norm_deriv(q - r + eps, ds, p) : A(0);
      ga[j] = up + un;
      gq[j] = us - up;
      gn[j] = -un - us;
    }
    if (L.want[0]) row_st<T, V>(L, 0, i, c0, ga);
    if (L.want[1]) row_st<T, V>(L, 1, i, c0, gq);
    if (L.want[2]) row_st<T, V>(L, 2, i, c0, gn);
  });
}

// At most 64 registers for a warp-per-row forward (4 blocks of 256 per SM), else 80 (3 blocks;
// triplet's norms: 80 forward, no cap backward): left free, ptxas takes 120..250 for the batched loads, which caps a
// warp-per-row launch at a few rows per SM. Checked with -Xptxas -v: no spills.
template <RowKind K, bool B, int G> constexpr int row_min_blocks() {
  return K == RowKind::TripletMargin ? (B ? 1 : 3) : (B || G > 32 ? 3 : 4);
}
template <class T, int V, int G, RowKind K, bool B>
__global__ void __launch_bounds__(kRowThreads, row_min_blocks<K, B, G>()) row_kernel(RowLaunch L) {
  using A = acc_of<T>;
  __shared__ A sh[32];
  constexpr int R = kRowThreads / G;  // rows per block
  const int64_t i = int64_t(blockIdx.x) * R + threadIdx.x / G;
  const int lane = int(threadIdx.x % G);
  if (i >= L.n) return;  // group-uniform (G == 256: one row per block)
  if constexpr (K == RowKind::CosineEmbedding) row_cosine<T, V, G, B>(L, i, lane, sh);
  else if constexpr (K == RowKind::MultiMargin) row_multi_margin<T, V, G, B>(L, i, lane, sh);
  else if constexpr (K == RowKind::MultilabelSoftMargin) row_multilabel_soft<T, V, G, B>(L, i, lane, sh);
  else if constexpr (K == RowKind::TripletMargin) row_triplet<T, V, G, B>(L, i, lane, sh);
}

// ---- multilabel_margin_loss ---------------------------------------------------------------------
// Row i: targets y[0..L) up to the first negative entry (-1; entries after it are ignored; an
// entry below -1 there, or one >= C before it, makes the row NaN). loss = 1/C sum_{k < L} sum_{j
// not a target} max(0, 1 - x[y_k] + x[j]) (a repeated target counts each time, as torch).
// Gradient: g/C * #{k: z_kj > 0} at non-target j; -g/C * sum_{k: y_k = c} #{j: z_kj > 0} at target c.
// Shared memory (dynamic): xt[C] (acc), tidx[C], cnt[C] (int), bitmap[(C + 31) / 32].
// A warp per row for C <= 32 M (same semantics as mlm_kernel below): lane l holds x[q * 32 + l]
// and target entries q * 32 + l (q < M) in registers. The row and the first 32 target entries are
// loaded together; later entries only while no negative entry has been seen. Targets are walked
// in list order k (warp-uniform: each entry broadcast by a shuffle, x[y_k] by a shuffle from its
// owner lane); per lane the loss terms add in (k, q) order, then a fixed shuffle tree. Counts are
// ints (exact): per column the number of k with z_kj > 0, per target the warp's total for k.
template <class T, int M>
__global__ void __launch_bounds__(kRowThreads) mlm_warp_kernel(RowLaunch L) {
  using A = acc_of<T>;
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = int(threadIdx.x & 31);
  const int64_t i = int64_t(blockIdx.x) * (kRowThreads / 32) + threadIdx.x / 32;
  if (i >= L.n) return;  // warp-uniform
  const int C = int(L.d);
  const T* xr = static_cast<const T*>(L.x[0]) + i * L.rs[0];
  const int64_t tr = i * L.t_rs;
  A xv[M];
  int tv[M];
#pragma unroll
  for (int q = 0; q < M; ++q) {
    const int j = q * 32 + lane;
    xv[q] = j < C ? A(to_compute(xr[int64_t(j) * L.cs[0]])) : A(0);
    tv[q] = -1;
  }
  int len = C;
  bool done = false, bad = false;
#pragma unroll
  for (int q = 0; q < M; ++q) {
    if (done) break;  // warp-uniform
    const int k = q * 32 + lane;
    // Entries past C end the scan like a -1 (the list then has all C entries).
    const int64_t t = k < C ? row_index(L, tr + int64_t(k) * L.t_cs) : int64_t(-1);
    const unsigned neg = __ballot_sync(kAll, t < 0);
    int first = 32;
    if (neg) {
      first = __ffs(neg) - 1;
      len = q * 32 + first;
      done = true;
      if (__shfl_sync(kAll, t, first) < -1) bad = true;  // the list ends below -1 (k < C there)
    }
    if (__ballot_sync(kAll, lane < first && t >= C)) bad = true;  // a class >= C inside the list
    tv[q] = int(t < C ? t : int64_t(-1));
  }
  if (bad) {  // warp-uniform
    if (!L.backward) {
      if (lane == 0) row_put_loss<T>(L, i, qnan<A>());
      return;
    }
    T* g = static_cast<T*>(L.grad[0]) + i * L.grs[0];
    for (int j = lane; j < C; j += 32) g[int64_t(j) * L.gcs[0]] = from_compute<T>(qnan<A>());
    return;
  }
  // Which of this lane's columns are targets (bit q: column q * 32 + lane).
  unsigned tmask = 0;
#pragma unroll
  for (int q = 0; q < M; ++q) {
    if (q * 32 >= len) break;
    const int kn = min(32, len - q * 32);
    for (int kk = 0; kk < kn; ++kk) {
      const int t = __shfl_sync(kAll, tv[q], kk);
      if ((t & 31) == lane) tmask |= 1u << (t >> 5);
    }
  }
  A lsum = 0;
  int cj[M], gt[M];
#pragma unroll
  for (int q = 0; q < M; ++q) cj[q] = gt[q] = 0;
#pragma unroll
  for (int q = 0; q < M; ++q) {
    if (q * 32 >= len) break;
    const int kn = min(32, len - q * 32);
    for (int kk = 0; kk < kn; ++kk) {
      const int t = __shfl_sync(kAll, tv[q], kk);  // warp-uniform
      const int ts = t >> 5;
      A own = xv[0];
#pragma unroll
      for (int m = 1; m < M; ++m)
        if (ts == m) own = xv[m];
      const A xt = __shfl_sync(kAll, own, t & 31);
      int cnt = 0;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const A z = A(1) - xt + xv[m];
        // NaN: not counted (torch's `if (z > 0)`)
        const bool on = m * 32 + lane < C && !((tmask >> m) & 1u) && z > A(0);
        if (on) {
          lsum += z;
          ++cj[m];
          ++cnt;
        }
      }
      if (L.backward) {  // launch-uniform
        cnt = warp_sum(cnt);
        if ((t & 31) == lane) {
#pragma unroll
          for (int m = 0; m < M; ++m)
            if (ts == m) gt[m] += cnt;
        }
      }
    }
  }
  if (L.backward) {
    const A gs = row_grad_scale<T>(L, i) / A(C);
    T* g = static_cast<T*>(L.grad[0]) + i * L.grs[0];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int j = m * 32 + lane;
      if (j < C) g[int64_t(j) * L.gcs[0]] = from_compute<T>((tmask >> m) & 1u ? -gs * A(gt[m]) : gs * A(cj[m]));
    }
    return;
  }
  lsum = warp_sum(lsum);
  if (lane == 0) row_put_loss<T>(L, i, lsum / A(C));
}

template <class T>
__global__ void __launch_bounds__(kRowThreads) mlm_kernel(RowLaunch L) {
  using A = acc_of<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ A sh[32];
  __shared__ int s_len, s_bad;
  const int64_t C = L.d;
  A* xt = reinterpret_cast<A*>(smem);
  int* tidx = reinterpret_cast<int*>(xt + C);
  int* cnt = tidx + C;
  unsigned* bits = reinterpret_cast<unsigned*>(cnt + C);
  const int nwords = int((C + 31) / 32);
  const int64_t i = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31;
  const T* xr = static_cast<const T*>(L.x[0]) + i * L.rs[0];
  const int64_t tr = i * L.t_rs;
  if (tid == 0) {
    s_len = int(C);
    s_bad = 0;
  }
  for (int w = tid; w < nwords; w += kRowThreads) bits[w] = 0u;
  __syncthreads();
  for (int64_t k = tid; k < C; k += kRowThreads)
    if (row_index(L, tr + k * L.t_cs) < 0) atomicMin(&s_len, int(k));
  __syncthreads();
  const int len = s_len;
  for (int k = tid; k < len; k += kRowThreads) {
    const int64_t t = row_index(L, tr + int64_t(k) * L.t_cs);
    cnt[k] = 0;
    if (t >= C) {
      s_bad = 1;
      tidx[k] = -1;
      xt[k] = A(0);
    } else {
      tidx[k] = int(t);
      xt[k] = A(to_compute(xr[t * L.cs[0]]));
      atomicOr(&bits[t >> 5], 1u << (t & 31));
    }
  }
  if (tid == 0 && len < C && row_index(L, tr + int64_t(len) * L.t_cs) < -1) s_bad = 1;
  __syncthreads();
  if (s_bad) {  // block-uniform
    if (!L.backward) {
      if (tid == 0) row_put_loss<T>(L, i, qnan<A>());
      return;
    }
    T* g = static_cast<T*>(L.grad[0]) + i * L.grs[0];
    for (int64_t j = tid; j < C; j += kRowThreads) g[j * L.gcs[0]] = from_compute<T>(qnan<A>());
    return;
  }
  const A gs = L.backward ? row_grad_scale<T>(L, i) / A(C) : A(0);
  T* g = L.backward ? static_cast<T*>(L.grad[0]) + i * L.grs[0] : nullptr;
  A lsum = 0;
  for (int64_t j0 = 0; j0 < C; j0 += kRowThreads) {  // every thread runs every round (ballots)
    const int64_t j = j0 + tid;
    const bool valid = j < C;
    const bool is_t = valid && ((bits[j >> 5] >> (j & 31)) & 1u);
    const bool active = valid && !is_t;
    const A xj = valid ? A(to_compute(xr[j * L.cs[0]])) : A(0);
    int cj = 0;
    for (int k = 0; k < len; ++k) {
      const A z = A(1) - xt[k] + xj;
      const bool on = active && z > A(0);  // NaN: not counted (torch's `if (z > 0)`)
      if (on) {
        lsum += z;
        ++cj;
      }
      if (L.backward) {
        const unsigned m = __ballot_sync(0xffffffffu, on);
        if (lane == 0 && m) atomicAdd(&cnt[k], __popc(m));
      }
    }
    if (L.backward && active) g[j * L.gcs[0]] = from_compute<T>(gs * A(cj));
  }
  if (L.backward) {
    __syncthreads();
    for (int64_t j = tid; j < C; j += kRowThreads) {
      if (!((bits[j >> 5] >> (j & 31)) & 1u)) continue;
      int s = 0;
      for (int k = 0; k < len; ++k) s += tidx[k] == int(j) ? cnt[k] : 0;
      g[j * L.gcs[0]] = from_compute<T>(-gs * A(s));
    }
    return;
  }
  lsum = block_sum(lsum, sh);
  if (tid == 0) row_put_loss<T>(L, i, lsum / A(C));
}

template <class T>
__global__ void __launch_bounds__(1024) row_finish(RowLaunch L) {
  using A = acc_of<T>;
  __shared__ A sh[32];
  const A* part = static_cast<const A*>(L.workspace);
  A s = 0;
  for (int64_t i = threadIdx.x; i < L.n; i += blockDim.x) s += part[i];
  s = block_sum(s, sh);
  if (threadIdx.x == 0) {
    if (L.reduction == Reduction::Mean) s = s / A(L.n);  // n = 0: 0 / 0 = NaN, as torch
    static_cast<T*>(L.out)[0] = from_compute<T>(s);
  }
}

template <class T, int V, RowKind K, bool B>
void row_launch_vgkb(const RowLaunch& L, cudaStream_t st) {
  if (L.group == 32) {
    const int64_t grid = (L.n + kRowThreads / 32 - 1) / (kRowThreads / 32);
    row_kernel<T, V, 32, K, B><<<unsigned(grid), kRowThreads, 0, st>>>(L);
  } else {
    row_kernel<T, V, kRowThreads, K, B><<<unsigned(L.n), kRowThreads, 0, st>>>(L);
  }
  check_launch(B ? "loss row backward" : "loss row");
}
template <class T, int V, RowKind K>
void row_launch_vgk(const RowLaunch& L, cudaStream_t st) {
  if (L.backward) row_launch_vgkb<T, V, K, true>(L, st);
  else row_launch_vgkb<T, V, K, false>(L, st);
}
template <class T, int V>
void row_launch_vg(const RowLaunch& L, cudaStream_t st) {
  switch (L.kind) {
    case RowKind::CosineEmbedding: return row_launch_vgk<T, V, RowKind::CosineEmbedding>(L, st);
    case RowKind::MultiMargin: return row_launch_vgk<T, V, RowKind::MultiMargin>(L, st);
    case RowKind::MultilabelSoftMargin: return row_launch_vgk<T, V, RowKind::MultilabelSoftMargin>(L, st);
    case RowKind::TripletMargin: return row_launch_vgk<T, V, RowKind::TripletMargin>(L, st);
    default: return;
  }
}

template <class T, int M>
void mlm_warp_launch(const RowLaunch& L, cudaStream_t st) {
  const int64_t grid = (L.n + kRowThreads / 32 - 1) / (kRowThreads / 32);
  mlm_warp_kernel<T, M><<<unsigned(grid), kRowThreads, 0, st>>>(L);
  check_launch(L.backward ? "multilabel_margin_loss backward" : "multilabel_margin_loss");
}

template <class T>
void row_launch_typed(const RowLaunch& L, cudaStream_t st) {
  using A = acc_of<T>;
  if (L.n > 0 && L.d > 0) {
    if (L.kind == RowKind::MultilabelMargin && L.group == 32) {
      if (L.d <= 32) mlm_warp_launch<T, 1>(L, st);
      else if (L.d <= 64) mlm_warp_launch<T, 2>(L, st);
      else if (L.d <= 128) mlm_warp_launch<T, 4>(L, st);
      else if (L.d <= 256) mlm_warp_launch<T, 8>(L, st);
      else mlm_warp_launch<T, 16>(L, st);  // select(): d <= kMultilabelWarpMaxClasses = 512
    } else if (L.kind == RowKind::MultilabelMargin) {
      const size_t smem = size_t(L.d) * (sizeof(A) + 2 * sizeof(int)) + size_t((L.d + 31) / 32) * sizeof(unsigned);
      opt_in_dynamic_smem(mlm_kernel<T>, smem, "cudaFuncSetAttribute(multilabel_margin_loss)");
      mlm_kernel<T><<<unsigned(L.n), kRowThreads, smem, st>>>(L);
      check_launch(L.backward ? "multilabel_margin_loss backward" : "multilabel_margin_loss");
    } else if (L.vec > 1) {
      row_launch_vg<T, int(16 / sizeof(T))>(L, st);
    } else {
      row_launch_vg<T, 1>(L, st);
    }
  }  // select() refuses d == 0, so every row writes its loss
  if (!L.backward && L.reduction != Reduction::None) {
    row_finish<T><<<1, 1024, 0, st>>>(L);
    check_launch("loss row finish");
  }
}

}  // namespace baracuda::loss::detail
