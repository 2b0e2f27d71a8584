// CTC loss kernels (torch.nn.functional.ctc_loss semantics), templated on the log_probs type
// T; every log-space value is held in A = f32 (f64 for f64 log_probs).
//
//   ctc_alpha   one block per sample n: alpha_t(s) over the extended labels l' (blank, l_1,
//               blank, ..., l_tl, blank; s < 2 tl + 1), T sequential steps, one __syncthreads
//               per step; log_probs of the sample's labels gathered `tt` steps at a time into
//               shared memory; log_alpha [N, T, 2 S + 1] written whole (-inf outside the
//               sample's lattice, NaN for an invalid sample); the per-sample loss -log p.
//   ctc_reduce  one block: the per-sample values added in a fixed order (mean / sum).
//   ctc_beta    one block per sample: the same facts as ctc_alpha, -log p recomputed from
//               log_alpha, the gradient scale of the reduction, the label maps (first position
//               of each class, next position of the same label), beta_t(s) into the workspace.
//   ctc_grad    one block per row (t, n): log sum over {s : l'_s = c} of alpha_t(s) beta_t(s)
//               (the blank's group by a fixed-order block reduction, each label's by walking
//               its occurrences), then the row of C gradients, torch's formula:
//                   grad[t, n, c] = (exp(lp) - exp(log_sum_c + nll - lp)) * g_n    (t < il_n)
//               i.e. the gradient w.r.t. the inputs of a log_softmax that produced log_probs
//               (torch's convention), 0 for t >= il_n.
//
// The recursions mirror torch's CPU kernels step for step (same log-sum-exp of up to three
// terms, same handling of an all -inf triple), so results agree to rounding. Invalid samples
// (an input length outside [0, T], a target length outside [0, S], a label outside [0, C),
// concatenated lengths that do not add up to targets' length) get a NaN loss and NaN
// gradients; nothing is read out of bounds. A label equal to the blank is computed as torch
// does (no check).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <limits>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/smem_opt_in.h"
#include "loss/ctc_launch.h"
#include "loss/loss_common.cuh"

namespace baracuda::loss::detail {

// Per-sample facts, written by ctc_beta and read by ctc_grad.
struct CtcMeta {
  double nll, gr;   // -log p (as computed in A) and the gradient scale of the reduction
  int64_t off;      // element offset of the sample's first label in targets
  int32_t il, tl;
  int32_t status;   // 0: gradient; 1: zero gradient; 2: NaN gradient (invalid sample)
  int32_t pad;
};
// The workspace reserves kCtcMetaBytes per sample: a larger record would spill into the label maps.
static_assert(sizeof(CtcMeta) == kCtcMetaBytes && alignof(CtcMeta) <= 256, "CtcMeta vs the workspace layout");

template <class T> struct CtcParams {
  using A = acc_of<T>;
  const T* lp;
  const void* tg;
  const void* il;
  const void* tl;
  bool tg64, il64, tl64;
  int64_t tlen, n, c, s, lmax, blank;
  int64_t lp0, lp1, lp2;
  bool concat;
  int64_t tg0, tgk, tg_len;  // sample stride (padded) / element stride, label stride, concatenated length
  int64_t il_st, tl_st, out_st, gl_st;
  int64_t g0, g1, g2;
  int reduction;
  bool zero_inf;
  int tt;
  A* la;
  T* out;
  A* rloss;
  const T* gl;
  T* grad;
  CtcMeta* meta;
  int32_t* first;
  int32_t* next;
  A* lb;
};

__device__ __forceinline__ int64_t ctc_int(const void* p, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t*>(p)[i] : int64_t(static_cast<const int32_t*>(p)[i]);
}
__device__ __forceinline__ float ctc_exp(float v) { return expf(v); }
__device__ __forceinline__ double ctc_exp(double v) { return exp(v); }
__device__ __forceinline__ float ctc_log(float v) { return logf(v); }
__device__ __forceinline__ double ctc_log(double v) { return log(v); }

// log(exp(a) + exp(b) + exp(c)) as torch computes it: shifted by the largest, 0 when all are -inf.
template <class A> __device__ __forceinline__ A ctc_lse3(A a, A b, A c) {
  A m = a;
  if (b > m) m = b;
  if (c > m) m = c;
  if (m == ninf<A>()) m = 0;
  return ctc_log(ctc_exp(a - m) + ctc_exp(b - m) + ctc_exp(c - m)) + m;
}
// log p from the last alpha row `fin` of a sample with tl labels (L = 2 tl + 1).
template <class A> __device__ __forceinline__ A ctc_loglik(const A* fin, int64_t tl) {
  if (tl == 0) return fin[0];
  const int64_t L = 2 * tl + 1;
  const A l1 = fin[L - 1], l2 = fin[L - 2];
  A m = l1 > l2 ? l1 : l2;
  if (m == ninf<A>()) m = 0;
  return ctc_log(ctc_exp(l1 - m) + ctc_exp(l2 - m)) + m;
}
// Online log-sum-exp: (m, s) with s = sum exp(x - m); -inf terms add nothing, NaN propagates.
template <class A> __device__ __forceinline__ void ctc_acc(A& m, A& s, A x) {
  if (x == ninf<A>()) return;
  if (x > m) {
    s = s * ctc_exp(m - x) + A(1);
    m = x;
  } else {
    s += ctc_exp(x - m);
  }
}

struct CtcSample {
  int64_t il, tl, off, kst;
  bool bad;
};

// Block-wide (every thread calls it, every thread gets the result): the sample's lengths, where
// its labels start, its labels in lab[0, tl), and whether it is invalid.
template <class P> __device__ CtcSample ctc_sample(const P& p, int64_t n, int32_t* lab) {
  __shared__ unsigned long long sums[2];
  CtcSample r;
  r.il = ctc_int(p.il, p.il64, n * p.il_st);
  r.tl = ctc_int(p.tl, p.tl64, n * p.tl_st);
  int bad = r.il < 0 || r.il > p.tlen || r.tl < 0 || r.tl > p.s;
  if (p.concat) {
    if (threadIdx.x == 0) sums[0] = sums[1] = 0;
    __syncthreads();
    // Lengths clamped to tg_len + 1 so the sums cannot wrap; any larger one breaks the total anyway.
    unsigned long long before = 0, total = 0;
    int neg = 0;
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
      int64_t v = ctc_int(p.tl, p.tl64, i * p.tl_st);
      neg |= v < 0;
      v = v < 0 ? 0 : (v > p.tg_len ? p.tg_len + 1 : v);
      total += (unsigned long long)v;
      if (i < n) before += (unsigned long long)v;
    }
    atomicAdd(&sums[0], before);  // integer sums: the order does not change the result
    atomicAdd(&sums[1], total);
    neg = __syncthreads_or(neg);
    bad |= neg || (long long)sums[1] != p.tg_len;
    r.off = (long long)sums[0] * p.tgk;
  } else {
    r.off = n * p.tg0;
  }
  r.kst = p.tgk;
  int badl = 0;
  if (!bad)
    for (int64_t k = threadIdx.x; k < r.tl; k += blockDim.x) {
      const int64_t v = ctc_int(p.tg, p.tg64, r.off + k * r.kst);
      badl |= v < 0 || v >= p.c;
      lab[k] = int32_t(v);
    }
  r.bad = __syncthreads_or(bad || badl);
  return r;
}

// Gathers log_probs[t, n, l'] for t in [t_lo, t_lo + nt) into lpg[(t - t_lo) * (s + 1) + k]:
// k = 0 the blank, k = j + 1 label j.
template <class T>
__device__ __forceinline__ void ctc_gather(const CtcParams<T>& p, const T* lpn, const int32_t* lab, int64_t tl,
                                           int64_t t_lo, int64_t nt, acc_of<T>* lpg) {
  using A = acc_of<T>;
  const int64_t W = p.s + 1;
  const unsigned w = unsigned(tl + 1);  // nt * w <= 32 * (s + 1) < 2^32: 32-bit division
  for (unsigned j = threadIdx.x; j < unsigned(nt) * w; j += blockDim.x) {
    const unsigned i = j / w, k = j - i * w;
    const int64_t c = k == 0 ? p.blank : lab[k - 1];
    lpg[int64_t(i) * W + k] = A(to_compute(lpn[(t_lo + int64_t(i)) * p.lp0 + c * p.lp2]));
  }
}

template <class T> __global__ void __launch_bounds__(512) ctc_alpha(CtcParams<T> p) {
  using A = acc_of<T>;
  extern __shared__ __align__(16) unsigned char ctc_smem[];
  A* buf = reinterpret_cast<A*>(ctc_smem);  // two alpha rows of lmax
  A* lpg = buf + 2 * p.lmax;                // tt x (s + 1)
  int32_t* lab = reinterpret_cast<int32_t*>(lpg + int64_t(p.tt) * (p.s + 1));
  const int64_t n = blockIdx.x;
  const CtcSample sm = ctc_sample(p, n, lab);
  A* la = p.la + n * p.tlen * p.lmax;
  const int64_t il = sm.bad ? 0 : sm.il, tl = sm.bad ? 0 : sm.tl;
  const int64_t L = 2 * tl + 1, W = p.s + 1;
  const T* lpn = p.lp + n * p.lp1;
  for (int64_t t0 = 0; t0 < il; t0 += p.tt) {
    const int64_t nt = min(int64_t(p.tt), il - t0);
    __syncthreads();  // the previous chunk is consumed
    ctc_gather(p, lpn, lab, tl, t0, nt, lpg);
    __syncthreads();
    for (int64_t i = 0; i < nt; ++i) {
      const int64_t t = t0 + i;
      const A* prev = buf + ((t + 1) & 1) * p.lmax;
      A* cur = buf + (t & 1) * p.lmax;
      for (int64_t s = threadIdx.x; s < p.lmax; s += blockDim.x) {
        A v = ninf<A>();
        if (s < L) {
          const int64_t k = (s - 1) >> 1;  // the label of an odd s
          const A lpv = lpg[i * W + ((s & 1) ? k + 1 : 0)];
          if (t == 0) {
            v = s <= 1 ? lpv : ninf<A>();
          } else {
            const A a1 = prev[s];
            const A a2 = s > 0 ? prev[s - 1] : ninf<A>();
            const A a3 = ((s & 1) && s > 1 && lab[k] != lab[k - 1]) ? prev[s - 2] : ninf<A>();
            v = ctc_lse3(a1, a2, a3) + lpv;
          }
          cur[s] = v;
        }
        la[t * p.lmax + s] = v;
      }
      __syncthreads();
    }
  }
  // Rows past the input length: -inf (NaN for an invalid sample, whose il is taken as 0).
  const A fill = sm.bad ? qnan<A>() : ninf<A>();
  for (int64_t i = il * p.lmax + threadIdx.x; i < p.tlen * p.lmax; i += blockDim.x) la[i] = fill;
  if (threadIdx.x == 0) {
    A nll;
    if (sm.bad) nll = qnan<A>();
    else if (il == 0) nll = tl == 0 ? A(0) : std::numeric_limits<A>::infinity();
    else nll = -ctc_loglik(buf + ((il - 1) & 1) * p.lmax, tl);
    if (p.zero_inf && nll == std::numeric_limits<A>::infinity()) nll = 0;
    if (p.reduction == int(Reduction::None)) p.out[n * p.out_st] = from_compute<T>(nll);
    else p.rloss[n] = p.reduction == int(Reduction::Mean) ? nll / A(sm.tl > 1 ? sm.tl : 1) : nll;
  }
}

template <class T> __global__ void __launch_bounds__(256) ctc_reduce(CtcParams<T> p) {
  using A = acc_of<T>;
  __shared__ A sh[32];
  A s = 0;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) s += p.rloss[i];
  s = block_sum(s, sh);
  if (threadIdx.x == 0) p.out[0] = from_compute<T>(p.reduction == int(Reduction::Mean) ? s / A(p.n) : s);
}

template <class T> __global__ void __launch_bounds__(512) ctc_beta(CtcParams<T> p) {
  using A = acc_of<T>;
  extern __shared__ __align__(16) unsigned char ctc_smem[];
  A* buf = reinterpret_cast<A*>(ctc_smem);
  A* lpg = buf + 2 * p.lmax;
  int32_t* lab = reinterpret_cast<int32_t*>(lpg + int64_t(p.tt) * (p.s + 1));
  __shared__ int status_sh;
  const int64_t n = blockIdx.x;
  const CtcSample sm = ctc_sample(p, n, lab);
  const int64_t il = sm.bad ? 0 : sm.il, tl = sm.bad ? 0 : sm.tl;
  const int64_t L = 2 * tl + 1, W = p.s + 1;
  if (threadIdx.x == 0) {
    CtcMeta m;
    A nll;
    if (sm.bad) nll = qnan<A>();
    else if (il == 0) nll = tl == 0 ? A(0) : std::numeric_limits<A>::infinity();
    else nll = -ctc_loglik(p.la + (n * p.tlen + il - 1) * p.lmax, tl);
    A g = A(to_compute(p.gl[p.reduction == int(Reduction::None) ? n * p.gl_st : 0]));
    if (p.reduction == int(Reduction::Mean)) g = g / A(p.n) / A(tl > 1 ? tl : 1);  // torch: mean, then / tl
    m.nll = double(nll);
    m.gr = double(g);
    m.off = sm.off;
    m.il = int32_t(il);
    m.tl = int32_t(tl);
    m.status = sm.bad ? 2 : (il == 0 || (p.zero_inf && nll == std::numeric_limits<A>::infinity())) ? 1 : 0;
    m.pad = 0;
    p.meta[n] = m;
    status_sh = m.status;
  }
  __syncthreads();
  if (status_sh != 0) return;  // ctc_grad writes zeros / NaN without the maps or beta

  // Label maps: first[c] = the first position of class c among the labels (-1: none; labels
  // equal to the blank join the blank's group instead), next[k] = the next position of lab[k].
  int32_t* first = p.first + n * p.c;
  int32_t* next = p.next + n * p.s;
  for (int64_t c = threadIdx.x; c < p.c; c += blockDim.x) first[c] = -1;
  __syncthreads();  // orders the -1 fill before the leaders' writes (same block, global memory)
  for (int64_t k = threadIdx.x; k < tl; k += blockDim.x) {
    const int32_t c = lab[k];
    int32_t nx = -1;
    for (int64_t k2 = k + 1; k2 < tl; ++k2)
      if (lab[k2] == c) {
        nx = int32_t(k2);
        break;
      }
    next[k] = nx;
    bool lead = c != p.blank;
    for (int64_t k2 = 0; lead && k2 < k; ++k2) lead = lab[k2] != c;
    if (lead) first[c] = int32_t(k);
  }

  A* lb = p.lb + n * p.tlen * p.lmax;
  const T* lpn = p.lp + n * p.lp1;
  for (int64_t hi = il - 1; hi >= 0; hi -= p.tt) {
    const int64_t nt = min(int64_t(p.tt), hi + 1), lo = hi - nt + 1;
    __syncthreads();
    ctc_gather(p, lpn, lab, tl, lo, nt, lpg);
    __syncthreads();
    for (int64_t t = hi; t >= lo; --t) {
      const int64_t i = t - lo;
      const A* nxt = buf + ((t + 1) & 1) * p.lmax;
      A* cur = buf + (t & 1) * p.lmax;
      for (int64_t s = threadIdx.x; s < L; s += blockDim.x) {
        const int64_t k = (s - 1) >> 1;
        const A lpv = lpg[i * W + ((s & 1) ? k + 1 : 0)];
        A v;
        if (t == il - 1) {
          v = (s == L - 1 || s == L - 2) ? lpv : ninf<A>();
        } else {
          const A b1 = nxt[s];
          const A b2 = s < L - 1 ? nxt[s + 1] : ninf<A>();
          const A b3 = ((s & 1) && s < L - 2 && lab[k + 1] != lab[k]) ? nxt[s + 2] : ninf<A>();
          v = ctc_lse3(b1, b2, b3) + lpv;
        }
        cur[s] = v;
        lb[t * p.lmax + s] = v;
      }
      __syncthreads();
    }
  }
}

template <class T> __global__ void __launch_bounds__(256) ctc_grad(CtcParams<T> p) {
  using A = acc_of<T>;
  extern __shared__ __align__(16) unsigned char ctc_smem[];
  A* ab = reinterpret_cast<A*>(ctc_smem);  // lmax: alpha + beta of row t
  A* q = ab + p.lmax;                      // s: log-sum of each label's group, at its first position
  int32_t* lab = reinterpret_cast<int32_t*>(q + p.s);
  int32_t* nxt = lab + p.s;
  __shared__ A shm[32], shs[32];
  const int64_t row = blockIdx.x;
  const int64_t t = row / p.n, n = row - t * p.n;
  const CtcMeta m = p.meta[n];
  T* g = p.grad + t * p.g0 + n * p.g1;
  if (m.status != 0 || t >= m.il) {
    const T v = from_compute<T>(m.status == 2 ? qnan<A>() : A(0));
    for (int64_t c = threadIdx.x; c < p.c; c += blockDim.x) g[c * p.g2] = v;
    return;
  }
  const int64_t tl = m.tl, L = 2 * tl + 1;
  for (int64_t k = threadIdx.x; k < tl; k += blockDim.x) {
    lab[k] = int32_t(ctc_int(p.tg, p.tg64, m.off + k * p.tgk));
    nxt[k] = p.next[n * p.s + k];
  }
  const A* la = p.la + (n * p.tlen + t) * p.lmax;
  const A* lb = p.lb + (n * p.tlen + t) * p.lmax;
  for (int64_t s = threadIdx.x; s < L; s += blockDim.x) ab[s] = la[s] + lb[s];
  __syncthreads();
  // The blank's group: every s whose extended label is the blank.
  A bm = ninf<A>(), bs = 0;
  for (int64_t s = threadIdx.x; s < L; s += blockDim.x)
    if (!(s & 1) || lab[s >> 1] == p.blank) ctc_acc(bm, bs, ab[s]);
  block_combine<A>(bm, bs, shm, shs);  // fixed order; every thread gets the result
  const A qb = bm == ninf<A>() ? ninf<A>() : bm + ctc_log(bs);
  const int32_t* first = p.first + n * p.c;
  for (int64_t k = threadIdx.x; k < tl; k += blockDim.x) {
    const int32_t c = lab[k];
    if (c == p.blank || first[c] != k) continue;
    A mx = ninf<A>();
    for (int32_t j = int32_t(k); j >= 0; j = nxt[j]) mx = cmax(mx, ab[2 * j + 1]);
    A sum = 0;
    if (mx != ninf<A>())
      for (int32_t j = int32_t(k); j >= 0; j = nxt[j]) sum += ctc_exp(ab[2 * j + 1] - mx);
    q[k] = mx == ninf<A>() ? ninf<A>() : mx + ctc_log(sum);
  }
  __syncthreads();
  const A nll = A(m.nll), gr = A(m.gr);
  const T* lpr = p.lp + t * p.lp0 + n * p.lp1;
  for (int64_t c = threadIdx.x; c < p.c; c += blockDim.x) {
    const A lp = A(to_compute(lpr[c * p.lp2]));
    A lsum = ninf<A>();
    if (c == p.blank) {
      lsum = qb;
    } else {
      const int32_t f = first[c];
      if (f >= 0) lsum = q[f];
    }
    // lp = -inf (a class with probability 0): no path uses it; 0 rather than torch's CPU NaN.
    const A v = lp == ninf<A>() ? A(0) : (ctc_exp(lp) - ctc_exp(lsum + nll - lp)) * gr;
    g[c * p.g2] = from_compute<T>(v);
  }
}

template <class T> void ctc_launch_typed(const CtcLaunch& L, cudaStream_t st) {
  using A = acc_of<T>;
  CtcParams<T> p;
  p.lp = static_cast<const T*>(L.log_probs);
  p.tg = L.targets;
  p.il = L.input_lengths;
  p.tl = L.target_lengths;
  p.tg64 = L.target_dtype == DType::Int64;
  p.il64 = L.il_dtype == DType::Int64;
  p.tl64 = L.tl_dtype == DType::Int64;
  p.tlen = L.t;
  p.n = L.n;
  p.c = L.c;
  p.s = L.s;
  p.lmax = ctc_ext(L.s);
  p.blank = L.blank;
  p.lp0 = L.lp_st[0];
  p.lp1 = L.lp_st[1];
  p.lp2 = L.lp_st[2];
  p.concat = L.concat;
  p.tg0 = L.tg_st0;
  p.tgk = L.concat ? L.tg_st0 : L.tg_st1;
  p.tg_len = L.targets_len;
  p.il_st = L.il_st;
  p.tl_st = L.tl_st;
  p.out_st = L.out_st;
  p.gl_st = L.gl_st;
  p.g0 = L.g_st[0];
  p.g1 = L.g_st[1];
  p.g2 = L.g_st[2];
  p.reduction = int(L.reduction);
  p.zero_inf = L.zero_infinity;
  p.tt = L.tt;
  p.la = static_cast<A*>(L.log_alpha);
  p.out = static_cast<T*>(L.out);
  p.gl = static_cast<const T*>(L.grad_loss);
  p.grad = static_cast<T*>(L.grad);
  int64_t offs[4] = {0, 0, 0, 0};
  ctc_workspace_layout(L, offs);
  char* ws = static_cast<char*>(L.workspace);
  p.rloss = L.backward ? nullptr : reinterpret_cast<A*>(ws + offs[0]);
  p.meta = L.backward ? reinterpret_cast<CtcMeta*>(ws + offs[0]) : nullptr;
  p.first = L.backward ? reinterpret_cast<int32_t*>(ws + offs[1]) : nullptr;
  p.next = L.backward ? reinterpret_cast<int32_t*>(ws + offs[2]) : nullptr;
  p.lb = L.backward ? reinterpret_cast<A*>(ws + offs[3]) : nullptr;

  const int64_t rsmem = ctc_recursion_smem(L.s, L.tt, int64_t(sizeof(A)));
  if (!L.backward) {
    if (L.n > 0) {
      opt_in_dynamic_smem(&ctc_alpha<T>, size_t(rsmem), "cudaFuncSetAttribute(ctc_alpha)");
      ctc_alpha<T><<<unsigned(L.n), unsigned(L.threads), size_t(rsmem), st>>>(p);
      check_launch("ctc_loss alpha");
    }
    if (L.reduction != Reduction::None) {
      ctc_reduce<T><<<1, 256, 0, st>>>(p);
      check_launch("ctc_loss reduce");
    }
    return;
  }
  if (L.n == 0 || L.t == 0 || L.c == 0) return;  // an empty gradient
  opt_in_dynamic_smem(&ctc_beta<T>, size_t(rsmem), "cudaFuncSetAttribute(ctc_beta)");
  ctc_beta<T><<<unsigned(L.n), unsigned(L.threads), size_t(rsmem), st>>>(p);
  check_launch("ctc_loss beta");
  const int64_t gsmem = ctc_grad_smem(L.s, int64_t(sizeof(A)));
  opt_in_dynamic_smem(&ctc_grad<T>, size_t(gsmem), "cudaFuncSetAttribute(ctc_grad)");
  ctc_grad<T><<<unsigned(L.t * L.n), unsigned(L.grad_threads), size_t(gsmem), st>>>(p);
  check_launch("ctc_loss grad");
}

}  // namespace baracuda::loss::detail
