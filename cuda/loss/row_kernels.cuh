// Row-structured losses (torch.nn.functional's semantics): cosine_embedding_loss,
// multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss, triplet_margin_loss,
// forward and backward, templated on the storage type T (math in f32 for half / f32 storage, f64
// for f64, rounded once).
//
//   row_kernel<T, V, G>  one row per group of G threads (a warp, 8 rows per block, or a 256-thread
//                        block): the row's sums in a fixed order (per thread in column order, then
//                        a fixed shuffle / shared tree), then the row's loss (forward) or its
//                        gradients (backward, a second pass over the row where they depend on the
//                        row's sums). V elements per load (16-byte vectors when the plan allows).
//   mlm_kernel<T>        multilabel margin: one block per row, the row's target list and a class
//                        bitmap in shared memory; per-target counts with integer shared atomics
//                        (exact, so the order does not matter).
//   row_finish<T>        mean / sum: one block adds the per-row losses in a fixed order.
// No float atomics anywhere.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "loss/loss_common.cuh"
#include "loss/row_launch.h"

namespace baracuda::loss::detail {

template <class A> __device__ __forceinline__ A r_abs(A v) {
  if constexpr (std::is_same_v<A, double>) return fabs(v);
  else return fabsf(v);
}
template <class A> __device__ __forceinline__ A r_exp(A v) {
  if constexpr (std::is_same_v<A, double>) return exp(v);
  else return expf(v);
}
template <class A> __device__ __forceinline__ A r_log1p(A v) {
  if constexpr (std::is_same_v<A, double>) return log1p(v);
  else return log1pf(v);
}
template <class A> __device__ __forceinline__ A r_sqrt(A v) {
  if constexpr (std::is_same_v<A, double>) return sqrt(v);
  else return sqrtf(v);
}
template <class A> __device__ __forceinline__ A r_pow(A v, A e) {
  if constexpr (std::is_same_v<A, double>) return pow(v, e);
  else return powf(v, e);
}
// max(v, 0) that keeps NaN (torch's clamp_min).
template <class A> __device__ __forceinline__ A r_relu(A v) { return v > A(0) ? v : (v != v ? v : A(0)); }
template <class A> __device__ __forceinline__ A r_sgn(A v) {
  return v > A(0) ? A(1) : (v < A(0) ? A(-1) : (v != v ? v : A(0)));
}
// softplus(v) = log(1 + exp(v)), stably.
template <class A> __device__ __forceinline__ A r_softplus(A v) { return r_log1p(r_exp(-r_abs(v))) + r_relu(v); }
template <class A> __device__ __forceinline__ A r_sigmoid(A v) {
  if (v >= A(0)) return A(1) / (A(1) + r_exp(-v));
  const A e = r_exp(v);
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

// V elements of float operand k at (row i, columns c0 ..): vectors (unit column stride) or one.
template <class T, int V, class A>
__device__ __forceinline__ void row_ld(const RowLaunch& L, int k, int64_t i, int64_t c0, A (&v)[V]) {
  const T* p = static_cast<const T*>(L.x[k]) + i * L.rs[k];
  if constexpr (V > 1) load_chunk<T, V>(p, c0, L.d, v, A(0));
  else v[0] = A(to_compute(p[c0 * L.cs[k]]));
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

// ---- cosine_embedding_loss ----------------------------------------------------------------------
// cos = x1.x2 / sqrt((|x1|^2 + eps)(|x2|^2 + eps)); loss = 1 - cos (y = 1), max(cos - margin, 0)
// (y = -1), 0 otherwise. d cos / d x1 = x2 / denom - cos x1 / (|x1|^2 + eps).
template <class T, int V, int G>
__device__ void row_cosine(const RowLaunch& L, int64_t i, int lane, acc_of<T>* sh) {
  using A = acc_of<T>;
  A dot = 0, m1 = 0, m2 = 0;
  for (int64_t c0 = int64_t(lane) * V; c0 < L.d; c0 += int64_t(G) * V) {
    A a[V], b[V];
    row_ld<T, V>(L, 0, i, c0, a);
    row_ld<T, V>(L, 1, i, c0, b);
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (c0 + j < L.d) {
        dot += a[j] * b[j];
        m1 += a[j] * a[j];
        m2 += b[j] * b[j];
      }
  }
  dot = group_sum<G>(dot, sh);
  m1 = group_sum<G>(m1, sh) + A(L.eps);
  m2 = group_sum<G>(m2, sh) + A(L.eps);
  const A denom = r_sqrt(m1 * m2);
  const A cosv = dot / denom;
  const A y = row_value<T>(L, i * L.t_rs);
  const A margin = A(L.margin);
  if (!L.backward) {
    const A loss = (y == A(1) ? A(1) - cosv : A(0)) + (y == A(-1) ? r_relu(cosv - margin) : A(0));
    if (lane == 0) row_put_loss<T>(L, i, loss);
    return;
  }
  // clamp_min passes the gradient where cos - margin >= 0 (torch).
  const A dc = y == A(1) ? A(-1) : (y == A(-1) ? (cosv - margin >= A(0) ? A(1) : A(0)) : A(0));
  const A gr = row_grad_scale<T>(L, i) * dc;
  const A inv_d = A(1) / denom, c1 = cosv / m1, c2 = cosv / m2;
  for (int64_t c0 = int64_t(lane) * V; c0 < L.d; c0 += int64_t(G) * V) {
    A a[V], b[V], ga[V], gb[V];
    row_ld<T, V>(L, 0, i, c0, a);
    row_ld<T, V>(L, 1, i, c0, b);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      ga[j] = gr * (b[j] * inv_d - c1 * a[j]);
      gb[j] = gr * (a[j] * inv_d - c2 * b[j]);
    }
    if (L.want[0]) row_st<T, V>(L, 0, i, c0, ga);
    if (L.want[1]) row_st<T, V>(L, 1, i, c0, gb);
  }
}

// ---- multi_margin_loss --------------------------------------------------------------------------
// loss = w[y] / C * sum_{j != y, z_j > 0} z_j^p with z_j = margin - x[y] + x[j] (torch's kernel:
// the weight multiplies z^p). grad[j] = g w[y] / C * (p == 1 ? 1 : 2 z_j) for z_j > 0, grad[y] =
// -sum_j grad[j]. A target outside [0, C) makes the row NaN.
template <class T, int V, int G>
__device__ void row_multi_margin(const RowLaunch& L, int64_t i, int lane, acc_of<T>* sh) {
  using A = acc_of<T>;
  const int64_t y = row_index(L, i * L.t_rs);
  const bool bad = y < 0 || y >= L.d;
  if (bad) {  // group-uniform
    if (!L.backward) {
      if (lane == 0) row_put_loss<T>(L, i, qnan<A>());
      return;
    }
    for (int64_t c0 = int64_t(lane) * V; c0 < L.d; c0 += int64_t(G) * V) {
      A nan[V];
#pragma unroll
      for (int j = 0; j < V; ++j) nan[j] = qnan<A>();
      row_st<T, V>(L, 0, i, c0, nan);
    }
    return;
  }
  const T* xr = static_cast<const T*>(L.x[0]) + i * L.rs[0];
  const A xy = A(to_compute(xr[y * L.cs[0]]));
  const A wy = L.weight ? A(to_compute(static_cast<const T*>(L.weight)[y * L.w_cs])) : A(1);
  const A margin = A(L.margin);
  const bool p1 = L.p == 1.0;
  const A gs = L.backward ? row_grad_scale<T>(L, i) * wy / A(L.d) : A(0);
  A s = 0;
  for (int64_t c0 = int64_t(lane) * V; c0 < L.d; c0 += int64_t(G) * V) {
    A x[V], gx[V];
    row_ld<T, V>(L, 0, i, c0, x);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A z = margin - xy + x[j];
      const bool on = c0 + j < L.d && c0 + j != y && z > A(0);
      gx[j] = A(0);
      if (on) {
        if (L.backward) gx[j] = gs * (p1 ? A(1) : A(2) * z);
        s += L.backward ? gx[j] : (p1 ? z : z * z);
      }
    }
    if (L.backward) row_st<T, V>(L, 0, i, c0, gx);  // column y gets 0 here, its value below
  }
  s = group_sum<G>(s, sh);
  if (!L.backward) {
    if (lane == 0) row_put_loss<T>(L, i, wy * s / A(L.d));
    return;
  }
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
template <class T, int V, int G>
__device__ void row_multilabel_soft(const RowLaunch& L, int64_t i, int lane, acc_of<T>* sh) {
  using A = acc_of<T>;
  const A gs = L.backward ? row_grad_scale<T>(L, i) / A(L.d) : A(0);
  const T* w = static_cast<const T*>(L.weight);
  A s = 0;
  for (int64_t c0 = int64_t(lane) * V; c0 < L.d; c0 += int64_t(G) * V) {
    A x[V], t[V], gx[V], gt[V];
    row_ld<T, V>(L, 0, i, c0, x);
    row_ld<T, V>(L, 1, i, c0, t);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const bool in = c0 + j < L.d;
      const A wj = w && in ? A(to_compute(w[(c0 + j) * L.w_cs])) : A(1);
      if (L.backward) {
        gx[j] = gs * wj * (r_sigmoid(x[j]) - t[j]);
        gt[j] = -gs * wj * x[j];
      } else if (in) {
        s += wj * (t[j] * r_softplus(-x[j]) + (A(1) - t[j]) * r_softplus(x[j]));
      }
    }
    if (L.backward && L.want[0]) row_st<T, V>(L, 0, i, c0, gx);
    if (L.backward && L.want[1]) row_st<T, V>(L, 1, i, c0, gt);
  }
  if (L.backward) return;
  s = group_sum<G>(s, sh);
  if (lane == 0) row_put_loss<T>(L, i, s / A(L.d));
}

// ---- triplet_margin_loss ------------------------------------------------------------------------
// d_ap = ||a - p + eps||_P, d_an = ||a - n + eps||_P (swap: min with ||p - n + eps||_P);
// loss = max(margin + d_ap - d_an, 0). The norm's derivative as torch's norm backward.
template <class A> __device__ __forceinline__ A norm_term(A v, A p) {
  if (p == A(2)) return v * v;
  if (p == A(1)) return r_abs(v);
  return r_pow(r_abs(v), p);
}
template <class A> __device__ __forceinline__ A norm_root(A s, A p) {
  if (p == A(2)) return r_sqrt(s);
  if (p == A(1)) return s;
  return r_pow(s, A(1) / p);
}
// d ||v||_p / d v_k for the norm `nrm` of v.
template <class A> __device__ __forceinline__ A norm_deriv(A vk, A nrm, A p) {
  if (p == A(2)) return nrm == A(0) ? A(0) : vk / nrm;
  if (p == A(1)) return r_sgn(vk);
  if (p < A(1)) return vk == A(0) ? A(0) : r_sgn(vk) * r_pow(r_abs(vk), p - A(1)) * r_pow(nrm, A(1) - p);
  return nrm == A(0) ? A(0) : r_sgn(vk) * r_pow(r_abs(vk), p - A(1)) / r_pow(nrm, p - A(1));
}

template <class T, int V, int G>
__device__ void row_triplet(const RowLaunch& L, int64_t i, int lane, acc_of<T>* sh) {
  using A = acc_of<T>;
  const A p = A(L.p), eps = A(L.eps);
  A sp = 0, sn = 0, ss = 0;
  for (int64_t c0 = int64_t(lane) * V; c0 < L.d; c0 += int64_t(G) * V) {
    A a[V], q[V], r[V];
    row_ld<T, V>(L, 0, i, c0, a);
    row_ld<T, V>(L, 1, i, c0, q);
    row_ld<T, V>(L, 2, i, c0, r);
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (c0 + j < L.d) {
        sp += norm_term(a[j] - q[j] + eps, p);
        sn += norm_term(a[j] - r[j] + eps, p);
        if (L.swap) ss += norm_term(q[j] - r[j] + eps, p);
      }
  }
  const A dp = norm_root(group_sum<G>(sp, sh), p);
  const A dn = norm_root(group_sum<G>(sn, sh), p);
  const A ds = L.swap ? norm_root(group_sum<G>(ss, sh), p) : A(0);
  // torch.min(d_an, d_swap): the smaller takes the gradient, a tie splits it in halves.
  const A dneg = !L.swap ? dn : dn != dn ? dn : ds != ds ? ds : ds < dn ? ds : dn;  // NaN propagates
  const A v = A(L.margin) + dp - dneg;
  if (!L.backward) {
    if (lane == 0) row_put_loss<T>(L, i, r_relu(v));
    return;
  }
  const A gr = row_grad_scale<T>(L, i) * (v >= A(0) ? A(1) : A(0));
  A cn = -gr, cs = A(0);
  if (L.swap) {
    if (dn == ds) cn = cs = -gr / A(2);
    else if (dn > ds) { cs = -gr; cn = A(0); }
  }
  for (int64_t c0 = int64_t(lane) * V; c0 < L.d; c0 += int64_t(G) * V) {
    A a[V], q[V], r[V], ga[V], gq[V], gn[V];
    row_ld<T, V>(L, 0, i, c0, a);
    row_ld<T, V>(L, 1, i, c0, q);
    row_ld<T, V>(L, 2, i, c0, r);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A up = gr * norm_deriv(a[j] - q[j] + eps, dp, p);
      const A un = cn * norm_deriv(a[j] - r[j] + eps, dn, p);
      const A us = L.swap ? cs * norm_deriv(q[j] - r[j] + eps, ds, p) : A(0);
      ga[j] = up + un;
      gq[j] = us - up;
      gn[j] = -un - us;
    }
    if (L.want[0]) row_st<T, V>(L, 0, i, c0, ga);
    if (L.want[1]) row_st<T, V>(L, 1, i, c0, gq);
    if (L.want[2]) row_st<T, V>(L, 2, i, c0, gn);
  }
}

template <class T, int V, int G>
__global__ void __launch_bounds__(kRowThreads) row_kernel(RowLaunch L) {
  using A = acc_of<T>;
  __shared__ A sh[32];
  constexpr int R = kRowThreads / G;  // rows per block
  const int64_t i = int64_t(blockIdx.x) * R + threadIdx.x / G;
  const int lane = int(threadIdx.x % G);
  if (i >= L.n) return;  // group-uniform (G == 256: one row per block)
  switch (L.kind) {
    case RowKind::CosineEmbedding: return row_cosine<T, V, G>(L, i, lane, sh);
    case RowKind::MultiMargin: return row_multi_margin<T, V, G>(L, i, lane, sh);
    case RowKind::MultilabelSoftMargin: return row_multilabel_soft<T, V, G>(L, i, lane, sh);
    case RowKind::TripletMargin: return row_triplet<T, V, G>(L, i, lane, sh);
    default: return;
  }
}

// ---- multilabel_margin_loss ---------------------------------------------------------------------
// Row i: targets y[0..L) up to the first negative entry (-1; entries after it are ignored; an
// entry below -1 there, or one >= C before it, makes the row NaN). loss = 1/C sum_{k < L} sum_{j
// not a target} max(0, 1 - x[y_k] + x[j]) (a repeated target counts each time, as torch).
// Gradient: g/C * #{k: z_kj > 0} at non-target j; -g/C * sum_{k: y_k = c} #{j: z_kj > 0} at target c.
// Shared memory (dynamic): xt[C] (acc), tidx[C], cnt[C] (int), bitmap[(C + 31) / 32].
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

template <class T, int V>
void row_launch_vg(const RowLaunch& L, cudaStream_t st) {
  if (L.group == 32) {
    const int64_t grid = (L.n + kRowThreads / 32 - 1) / (kRowThreads / 32);
    row_kernel<T, V, 32><<<unsigned(grid), kRowThreads, 0, st>>>(L);
  } else {
    row_kernel<T, V, kRowThreads><<<unsigned(L.n), kRowThreads, 0, st>>>(L);
  }
  check_launch(L.backward ? "loss row backward" : "loss row");
}

template <class T>
void row_launch_typed(const RowLaunch& L, cudaStream_t st) {
  using A = acc_of<T>;
  if (L.n > 0 && L.d > 0) {
    if (L.kind == RowKind::MultilabelMargin) {
      const size_t smem = size_t(L.d) * (sizeof(A) + 2 * sizeof(int)) + size_t((L.d + 31) / 32) * sizeof(unsigned);
      if (smem > 48 * 1024)
        cuda_check(cudaFuncSetAttribute(mlm_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                   "cudaFuncSetAttribute(multilabel_margin_loss)");
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
