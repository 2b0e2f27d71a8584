// Pointwise losses (MSE, L1, Huber, smooth-L1, BCE, BCE-with-logits, KL-div, Poisson-NLL,
// Gaussian-NLL, margin-ranking, hinge-embedding, soft-margin): the kernels and their launcher,
// templated on the storage type T; the per-kind math is in pw_math.cuh (f32 for half / f32 storage,
// f64 for f64, rounded once), nll_loss in nll_kernels.cuh.
//
//   pw_none      grid-stride: out_e = loss_e (broadcast operands through per-operand strides).
//   pw_partial   kPwBlocks or fewer blocks, a fixed grid-stride order: partial sums of loss_e.
//   pw_finish    one block: sum of the partials in order, / divisor for mean / batchmean.
//   pw_backward  grid-stride: grad_e = g_e * d loss_e / d a_e.
//   pw_c_*       dense operands (one merged dim): 16-byte vectors.
//   pw_r_*       [rows, cols] with every operand dense along the row or one value per row:
//                16-byte vectors along the rows (elementwise, mean / sum stage 1, and the
//                gradient w.r.t. a one-value-per-row operand as a warp-per-row sum).
// No float atomics anywhere: every sum runs in an order fixed by the plan.
#pragma once
#include "loss/pw_math.cuh"

namespace baracuda::loss::detail {

template <class T>
__global__ void __launch_bounds__(kPwThreads) pw_none(PwLaunch L) {
  using A = acc_of<T>;
  T* out = static_cast<T*>(L.out);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < L.n; i += stride) {
    int64_t off[6];
    pw_offsets(L, i, off);
    const PwVals<T> v = pw_load<T>(L, off);
    out[off[4]] = from_compute<T>(pw_value<A>(L, v.a, v.b, v.c, v.d));
  }
}

// Stage 1 of a mean / sum: block b sums the elements b * 256 + t + k * (blocks * 256), k = 0, 1, ...
// per thread in order (kPwUnroll loads in flight), then the block in a fixed tree.
template <class T>
__global__ void __launch_bounds__(kPwThreads) pw_partial(PwLaunch L) {
  using A = acc_of<T>;
  __shared__ A sh[32];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  A acc = 0;
  for (int64_t i0 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i0 < L.n; i0 += stride * kPwUnroll) {
    A v[kPwUnroll];
#pragma unroll
    for (int u = 0; u < kPwUnroll; ++u) {
      const int64_t i = i0 + u * stride;
      v[u] = A(0);
      if (i < L.n) {
        int64_t off[6];
        pw_offsets(L, i, off);
        const PwVals<T> x = pw_load<T>(L, off);
        v[u] = pw_value<A>(L, x.a, x.b, x.c, x.d);
      }
    }
#pragma unroll
    for (int u = 0; u < kPwUnroll; ++u)
      if (i0 + u * stride < L.n) acc += v[u];
  }
  acc = block_sum(acc, sh);
  if (threadIdx.x == 0) static_cast<A*>(L.workspace)[blockIdx.x] = acc;
}

template <class T>
__global__ void __launch_bounds__(1024) pw_finish(PwLaunch L) {
  using A = acc_of<T>;
  __shared__ A sh[32];
  const A* part = static_cast<const A*>(L.workspace);
  A s = 0;
  for (int i = threadIdx.x; i < L.blocks; i += blockDim.x) s += part[i];
  s = block_sum(s, sh);
  if (threadIdx.x == 0) {
    if (L.reduction == Reduction::Mean) s = s / A(L.divisor);  // n = 0: 0 / 0 = NaN, as torch
    static_cast<T*>(L.out)[0] = from_compute<T>(s);
  }
}

template <class T>
__global__ void __launch_bounds__(kPwThreads) pw_backward(PwLaunch L) {
  using A = acc_of<T>;
  T* out = static_cast<T*>(L.out);
  const T* gl = static_cast<const T*>(L.grad_loss);
  const bool per_elem = L.reduction == Reduction::None;
  A gs = per_elem ? A(0) : A(to_compute(gl[0]));
  if (L.reduction == Reduction::Mean) gs = gs / A(L.divisor);
  if (L.negate) gs = -gs;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < L.n; i += stride) {
    int64_t off[6];
    pw_offsets(L, i, off);
    const PwVals<T> v = pw_load<T>(L, off);
    const A g = per_elem ? A(to_compute(gl[off[5]])) : gs;
    out[off[4]] = from_compute<T>(g * pw_grad<A>(L, v.a, v.b, v.c, v.d));
  }
}

// ---- contiguous fast path ------------------------------------------------------------------
// Every operand (and out / grad_loss) dense with the broadcast shape, pointers 16-byte aligned
// (run() checks; else the strided kernels): thread g of G handles vectors g + k * G (V elements
// each, 16 bytes), U vectors of every operand loaded before any is used, then the n % V tail
// elements one each by threads 0 .. n % V - 1. The kind is switched on once per kernel (the
// loop is instantiated per kind), so kinds of two operands hold no registers for c / d.
template <class T> constexpr int pw_vec_width() { return int(16 / sizeof(T)); }
constexpr bool kind_has_c(PwKind k) {
  return k == PwKind::Bce || k == PwKind::BceLogits || k == PwKind::GaussianNll || k == PwKind::MarginRanking;
}
constexpr bool kind_has_d(PwKind k) { return k == PwKind::BceLogits; }
// Vectors per stream in flight per thread (16 bytes each; with 4 blocks of 256 per SM that is
// 32 KiB per stream per SM, above what HBM3 needs to stay busy).
constexpr int pw_unroll(PwKind, bool) { return kPwVecLoadsPerThread; }

template <class T> __device__ __forceinline__ Pack<T, pw_vec_width<T>()> pw_ldv(const void* p, int64_t vi) {
  static_assert(sizeof(Pack<T, pw_vec_width<T>()>) == 16, "16-byte packs");
  Pack<T, pw_vec_width<T>()> pk;
  *reinterpret_cast<uint4*>(&pk) = __ldg(reinterpret_cast<const uint4*>(p) + vi);
  return pk;
}

// One element at index i (the tail), kind K.
template <PwKind K, class T>
__device__ __forceinline__ acc_of<T> pw_c_one(const PwLaunch& L, int64_t i, bool grad, bool gv, acc_of<T> gs) {
  using A = acc_of<T>;
  const A a = A(to_compute(static_cast<const T*>(L.a)[i])), b = A(to_compute(static_cast<const T*>(L.b)[i]));
  const A c = kind_has_c(K) && L.c ? A(to_compute(static_cast<const T*>(L.c)[i])) : A(1);
  const A d = kind_has_d(K) && L.d ? A(to_compute(static_cast<const T*>(L.d)[i])) : A(1);
  if (!grad) return pw_value_k<K, A>(L, a, b, c, d);
  return (gv ? A(to_compute(static_cast<const T*>(L.grad_loss)[i])) : gs) * pw_deriv_k<K, A>(L, a, b, c, d);
}

// The scalar upstream gradient of a mean / sum backward (/ n for mean, negated where asked).
template <class T> __device__ __forceinline__ acc_of<T> pw_scalar_grad(const PwLaunch& L) {
  using A = acc_of<T>;
  A gs = A(to_compute(static_cast<const T*>(L.grad_loss)[0]));
  if (L.reduction == Reduction::Mean) gs = gs / A(L.divisor);
  if (L.negate) gs = -gs;
  return gs;
}
// One vector of results of kind K: the loss (GRAD false) or the upstream gradient (per element
// GV, else gs) times the derivative w.r.t. the input (ANY_WRT false) or the operand L.wrt names.
template <PwKind K, bool GRAD, bool GV, bool HC, bool HD, bool ANY_WRT, class T, int V, class A>
__device__ __forceinline__ Pack<T, V> pw_vec_result(const PwLaunch& L, const Pack<T, V>& ra, const Pack<T, V>& rb,
                                                    const Pack<T, V>& rc, const Pack<T, V>& rd, const Pack<T, V>& rg,
                                                    bool hc, bool hd, A gs) {
  Pack<T, V> o;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const A a = A(to_compute(ra.v[j])), b = A(to_compute(rb.v[j]));
    const A c = HC && hc ? A(to_compute(rc.v[j])) : A(1);
    const A d = HD && hd ? A(to_compute(rd.v[j])) : A(1);
    A r;
    if constexpr (GRAD) {
      const A deriv = ANY_WRT ? pw_grad_k<K, A>(L, a, b, c, d) : pw_deriv_k<K, A>(L, a, b, c, d);
      r = (GV ? A(to_compute(rg.v[j])) : gs) * deriv;
    } else {
      r = pw_value_k<K, A>(L, a, b, c, d);
    }
    o.v[j] = from_compute<T>(r);
  }
  return o;
}

// Adds the loss values of kind K of a vector's first `valid` elements (all V when valid >= V) to
// acc, one element at a time in order (the stage-1 sums of mean / sum).
template <PwKind K, bool HC, bool HD, class T, int V, class A>
__device__ __forceinline__ void pw_vec_value_acc(const PwLaunch& L, const Pack<T, V>& ra, const Pack<T, V>& rb,
                                                 const Pack<T, V>& rc, const Pack<T, V>& rd, bool hc, bool hd,
                                                 int64_t valid, A& acc) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if (j >= valid) break;
    const A a = A(to_compute(ra.v[j])), b = A(to_compute(rb.v[j]));
    const A c = HC && hc ? A(to_compute(rc.v[j])) : A(1);
    const A d = HD && hd ? A(to_compute(rd.v[j])) : A(1);
    acc += pw_value_k<K, A>(L, a, b, c, d);
  }
}

// Elementwise (reduction none forward: GRAD false; every backward w.r.t. input: GRAD true, GV
// when grad_loss is per element; gradients w.r.t. other operands take the strided kernels).
template <PwKind K, class T, bool GRAD, bool GV>
__device__ __forceinline__ void pw_c_elem_body(const PwLaunch& L) {
  using A = acc_of<T>;
  constexpr int V = pw_vec_width<T>(), U = pw_unroll(K, GV);
  constexpr bool HC = kind_has_c(K), HD = kind_has_d(K);
  using P = Pack<T, V>;
  const int64_t nvec = L.n / V;
  const int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const A gs = GRAD && !GV ? pw_scalar_grad<T>(L) : A(1);
  const bool hc = HC && L.c, hd = HD && L.d;
  P* out = static_cast<P*>(L.out);
  // Block b takes the U * blockDim vectors from b * U * blockDim (thread t: t, t + blockDim, ..),
  // then strides by the grid (the launch sizes the grid to cover every vector in one step).
  const int64_t per_block = int64_t(blockDim.x) * U;
  for (int64_t v0 = int64_t(blockIdx.x) * per_block + threadIdx.x; v0 < nvec; v0 += int64_t(gridDim.x) * per_block) {
    P ra[U], rb[U], rc[U], rd[U], rg[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t vi = v0 + u * int64_t(blockDim.x);
      if (vi < nvec) {
        ra[u] = pw_ldv<T>(L.a, vi);
        rb[u] = pw_ldv<T>(L.b, vi);
        if (HC && hc) rc[u] = pw_ldv<T>(L.c, vi);
        if (HD && hd) rd[u] = pw_ldv<T>(L.d, vi);
        if (GV) rg[u] = pw_ldv<T>(L.grad_loss, vi);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t vi = v0 + u * int64_t(blockDim.x);
      if (vi >= nvec) break;
      const P o = pw_vec_result<K, GRAD, GV, HC, HD, false>(L, ra[u], rb[u], rc[u], rd[u], rg[u], hc, hd, gs);
      out[vi] = o;
    }
  }
  const int64_t i = nvec * V + g;  // the tail
  if (i < L.n) static_cast<T*>(L.out)[i] = from_compute<T>(pw_c_one<K, T>(L, i, GRAD, GV, gs));
}

// One kernel per (kind, mode): 0 forward, 1 gradient with a scalar upstream gradient, 2 with a
// per-element one (pw_mode), so each gets its own registers (all kinds in one kernel spilled ~500
// bytes under the 64-register cap).
// Register caps (blocks of 256 per SM): 4 (64 registers) for the light kinds; one block fewer
// for the kinds with logs / exps / divisions or a per-element upstream gradient, two for both and
// for BCE-with-logits (four operands); R: the rows kernels (index math per vector, broadcast
// operands held as packs) one fewer again. Each step removed the spills -Xptxas -v showed.
constexpr bool pw_heavy(PwKind k) {
  return k == PwKind::Bce || k == PwKind::BceLogits || k == PwKind::KlDiv || k == PwKind::PoissonNll ||
         k == PwKind::GaussianNll || k == PwKind::SoftMargin;
}
template <PwKind K, int MODE, bool R = false> constexpr int pw_min_blocks() {
  int b = kPwMinBlocks - (pw_heavy(K) || MODE == 2 ? 1 : 0) - (R ? 1 : 0);
  if ((pw_heavy(K) && MODE == 2) || K == PwKind::BceLogits) --b;  // four operands / a per-element g
  return b < 1 ? 1 : b;
}
template <class T, PwKind K, int MODE>
__global__ void __launch_bounds__(kPwThreads, pw_min_blocks<K, MODE>()) pw_c_elem(PwLaunch L) {
  pw_c_elem_body<K, T, MODE != 0, MODE == 2>(L);
}
inline int pw_mode(const PwLaunch& L) { return !L.backward ? 0 : L.reduction == Reduction::None ? 2 : 1; }
// Launches kernel<T, K, mode> for the launch's kind and mode.
#define BARACUDA_PW_LAUNCH_KM(KERNEL, T, L, GRID, ST)                                         \
  with_kind((L).kind, [&](auto kc) {                                                        \
    constexpr PwKind K_ = decltype(kc)::value;                                              \
    const int m_ = pw_mode(L);                                                              \
    if (m_ == 0) KERNEL<T, K_, 0><<<(GRID), kPwThreads, 0, (ST)>>>(L);                     \
    else if (m_ == 1) KERNEL<T, K_, 1><<<(GRID), kPwThreads, 0, (ST)>>>(L);                \
    else KERNEL<T, K_, 2><<<(GRID), kPwThreads, 0, (ST)>>>(L);                             \
  })
#define BARACUDA_PW_LAUNCH_K(KERNEL, T, L, GRID, ST)                                          \
  with_kind((L).kind, [&](auto kc) {                                                        \
    KERNEL<T, decltype(kc)::value><<<(GRID), kPwThreads, 0, (ST)>>>(L);                     \
  })

// Stage 1 of a mean / sum on the contiguous path: L.blocks blocks (fixed by the plan); per thread
// U running sums (sum u takes vectors v0 + u * G, in order), added in order, then the tail
// element, then the block in a fixed tree. Stage 2 is pw_finish.
template <PwKind K, class T>
__device__ __forceinline__ acc_of<T> pw_c_partial_body(const PwLaunch& L) {
  using A = acc_of<T>;
  constexpr int V = pw_vec_width<T>(), U = pw_unroll(K, false);
  constexpr bool HC = kind_has_c(K), HD = kind_has_d(K);
  using P = Pack<T, V>;
  const int64_t nvec = L.n / V, G = int64_t(gridDim.x) * blockDim.x;
  const int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool hc = HC && L.c, hd = HD && L.d;
  A acc[U];
#pragma unroll
  for (int u = 0; u < U; ++u) acc[u] = A(0);
  for (int64_t v0 = g; v0 < nvec; v0 += G * U) {
    P ra[U], rb[U], rc[U], rd[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t vi = v0 + u * G;
      if (vi < nvec) {
        ra[u] = pw_ldv<T>(L.a, vi);
        rb[u] = pw_ldv<T>(L.b, vi);
        if (HC && hc) rc[u] = pw_ldv<T>(L.c, vi);
        if (HD && hd) rd[u] = pw_ldv<T>(L.d, vi);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (v0 + u * G >= nvec) break;
      pw_vec_value_acc<K, HC, HD>(L, ra[u], rb[u], rc[u], rd[u], hc, hd, int64_t(V), acc[u]);
    }
  }
  A s = acc[0];
#pragma unroll
  for (int u = 1; u < U; ++u) s += acc[u];
  const int64_t i = nvec * V + g;  // the tail (fewer than V elements: threads of block 0)
  if (i < L.n) s += pw_c_one<K, T>(L, i, false, false, A(0));
  return s;
}

template <class T, PwKind K>
__global__ void __launch_bounds__(kPwThreads, pw_min_blocks<K, 0>()) pw_c_partial(PwLaunch L) {
  using A = acc_of<T>;
  __shared__ A sh[32];
  A s = pw_c_partial_body<K, T>(L);
  s = block_sum(s, sh);
  if (threadIdx.x == 0) static_cast<A*>(L.workspace)[blockIdx.x] = s;
}

// ---- gradients w.r.t. a broadcast operand ----------------------------------------------------
// Warp w of the grid-stride loop takes output j = w % red_m, split s = w / red_m (adjacent warps:
// adjacent outputs); lane l sums the elements r = s * chunk + l + 32 k of the split in order,
// then the warp in a fixed shuffle tree.
template <class T>
__global__ void __launch_bounds__(kPwThreads) pw_grad_reduce(PwLaunch L) {
  using A = acc_of<T>;
  T* out = static_cast<T*>(L.out);
  const T* gl = static_cast<const T*>(L.grad_loss);
  const bool per_elem = L.reduction == Reduction::None;
  A gs = per_elem ? A(0) : A(to_compute(gl[0]));
  if (L.reduction == Reduction::Mean) gs = gs / A(L.divisor);
  const int64_t total = L.red_m * L.red_splits;
  if (L.red_cols) {  // a thread per (output, split); threads t, t + 1 on outputs j, j + 1
    const int64_t threads = int64_t(gridDim.x) * kPwThreads;
    for (int64_t t = int64_t(blockIdx.x) * kPwThreads + threadIdx.x; t < total; t += threads) {
      const int64_t j = t % L.red_m, s = t / L.red_m;
      const int64_t r0 = s * L.red_chunk, r1 = std::min(L.red_r, r0 + L.red_chunk);
      A acc = A(0);
      for (int64_t r = r0; r < r1; ++r) {
        int64_t off[6];
        pw_offsets(L, j * L.red_r + r, off);
        const PwVals<T> v = pw_load<T>(L, off);
        const A g = per_elem ? A(to_compute(gl[off[5]])) : gs;
        acc += g * pw_grad<A>(L, v.a, v.b, v.c, v.d);
      }
      if (L.red_splits == 1) {
        int64_t off[6];
        pw_offsets(L, j * L.red_r, off);
        out[off[4]] = from_compute<T>(acc);
      } else {
        static_cast<A*>(L.workspace)[s * L.red_m + j] = acc;
      }
    }
    return;
  }
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t(gridDim.x) * (kPwThreads / 32);
  for (int64_t w = int64_t(blockIdx.x) * (kPwThreads / 32) + threadIdx.x / 32; w < total; w += warps) {
    const int64_t j = w % L.red_m, s = w / L.red_m;
    const int64_t r0 = s * L.red_chunk, r1 = std::min(L.red_r, r0 + L.red_chunk);
    A acc = A(0);
    for (int64_t r = r0 + lane; r < r1; r += 32) {
      int64_t off[6];
      pw_offsets(L, j * L.red_r + r, off);
      const PwVals<T> v = pw_load<T>(L, off);
      const A g = per_elem ? A(to_compute(gl[off[5]])) : gs;
      acc += g * pw_grad<A>(L, v.a, v.b, v.c, v.d);
    }
    acc = warp_sum(acc);
    if (lane == 0) {
      if (L.red_splits == 1) {
        int64_t off[6];
        pw_offsets(L, j * L.red_r, off);
        out[off[4]] = from_compute<T>(acc);
      } else {
        static_cast<A*>(L.workspace)[s * L.red_m + j] = acc;
      }
    }
  }
}
template <class T>
__global__ void __launch_bounds__(kPwThreads) pw_grad_reduce_finish(PwLaunch L) {
  using A = acc_of<T>;
  const A* part = static_cast<const A*>(L.workspace);
  T* out = static_cast<T*>(L.out);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < L.red_m; j += stride) {
    A s = A(0);
    for (int k = 0; k < L.red_splits; ++k) s += part[int64_t(k) * L.red_m + j];
    int64_t off[6];
    pw_offsets(L, j * L.red_r, off);
    out[off[4]] = from_compute<T>(s);
  }
}

// ---- rows path -----------------------------------------------------------------------------
// Operand slot k's element (r, c) at r * st[k][0] + c * st[k][1], st[k][1] 0 or 1 (see PwLaunch).
// V elements of slot k at (row, c..) as raw storage: a broadcast value repeated, one 16-byte load,
// or (the row's last, partial vector) element by element, column c repeated past the row's end.
template <class T>
__device__ __forceinline__ Pack<T, pw_vec_width<T>()> pw_r_raw(const PwLaunch& L, const void* p, int k, int64_t row,
                                                               int64_t c) {
  constexpr int V = pw_vec_width<T>();
  const T* b = static_cast<const T*>(p) + row * L.st[k][0];
  Pack<T, V> pk;
  if (L.st[k][1] == 0) {
    const T v = b[0];
#pragma unroll
    for (int j = 0; j < V; ++j) pk.v[j] = v;
  } else if (c + V <= L.dims[1]) {
    *reinterpret_cast<uint4*>(&pk) = __ldg(reinterpret_cast<const uint4*>(b + c));
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) pk.v[j] = b[c + j < L.dims[1] ? c + j : c];
  }
  return pk;
}
// Vector vi of the [rows, ceil(cols / V)] vector grid: its row and first column (32-bit division
// when the grid fits).
template <int V>
__device__ __forceinline__ void pw_r_pos(int64_t vi, int64_t cv, bool d32, int64_t& row, int64_t& col) {
  row = d32 ? int64_t(uint32_t(vi) / uint32_t(cv)) : vi / cv;
  col = (vi - row * cv) * V;
}

template <PwKind K, class T, bool GRAD, bool GV>
__device__ __forceinline__ void pw_r_elem_body(const PwLaunch& L) {
  using A = acc_of<T>;
  constexpr int V = pw_vec_width<T>(), U = kPwVecLoadsPerThread;
  constexpr bool HC = kind_has_c(K), HD = kind_has_d(K);
  using P = Pack<T, V>;
  const int64_t cols = L.dims[1], cv = (cols + V - 1) / V, nvec = L.dims[0] * cv;
  const bool d32 = nvec <= int64_t(0xffffffffu);
  const A gs = GRAD && !GV ? pw_scalar_grad<T>(L) : A(1);
  const bool hc = HC && L.c, hd = HD && L.d;
  const int64_t per_block = int64_t(blockDim.x) * U;
  for (int64_t v0 = int64_t(blockIdx.x) * per_block + threadIdx.x; v0 < nvec; v0 += int64_t(gridDim.x) * per_block) {
    P ra[U], rb[U], rc[U], rd[U], rg[U];
    int64_t row[U], col[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t vi = v0 + u * int64_t(blockDim.x);
      if (vi < nvec) {
        pw_r_pos<V>(vi, cv, d32, row[u], col[u]);
        ra[u] = pw_r_raw<T>(L, L.a, 0, row[u], col[u]);
        rb[u] = pw_r_raw<T>(L, L.b, 1, row[u], col[u]);
        if (HC && hc) rc[u] = pw_r_raw<T>(L, L.c, 2, row[u], col[u]);
        if (HD && hd) rd[u] = pw_r_raw<T>(L, L.d, 3, row[u], col[u]);
        if (GV) rg[u] = pw_r_raw<T>(L, L.grad_loss, 5, row[u], col[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t vi = v0 + u * int64_t(blockDim.x);
      if (vi >= nvec) break;
      const P o = pw_vec_result<K, GRAD, GV, HC, HD, true>(L, ra[u], rb[u], rc[u], rd[u], rg[u], hc, hd, gs);
      T* ob = static_cast<T*>(L.out) + row[u] * L.st[4][0];
      if (col[u] + V <= cols) {
        *reinterpret_cast<P*>(ob + col[u]) = o;
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (col[u] + j < cols) ob[col[u] + j] = o.v[j];
      }
    }
  }
}

template <class T, PwKind K, int MODE>
__global__ void __launch_bounds__(kPwThreads, pw_min_blocks<K, MODE, true>()) pw_r_elem(PwLaunch L) {
  pw_r_elem_body<K, T, MODE != 0, MODE == 2>(L);
}

// Stage 1 of a mean / sum on the rows path: L.blocks blocks; thread g sums vectors g + k * G in
// order (U running sums, added in order), then the block in a fixed tree. Stage 2 is pw_finish.
template <PwKind K, class T>
__device__ __forceinline__ acc_of<T> pw_r_partial_body(const PwLaunch& L) {
  using A = acc_of<T>;
  constexpr int V = pw_vec_width<T>(), U = kPwVecLoadsPerThread;
  constexpr bool HC = kind_has_c(K), HD = kind_has_d(K);
  using P = Pack<T, V>;
  const int64_t cols = L.dims[1], cv = (cols + V - 1) / V, nvec = L.dims[0] * cv;
  const bool d32 = nvec <= int64_t(0xffffffffu);
  const int64_t G = int64_t(gridDim.x) * blockDim.x, g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool hc = HC && L.c, hd = HD && L.d;
  A acc[U];
#pragma unroll
  for (int u = 0; u < U; ++u) acc[u] = A(0);
  for (int64_t v0 = g; v0 < nvec; v0 += G * U) {
    P ra[U], rb[U], rc[U], rd[U];
    int64_t row[U], col[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t vi = v0 + u * G;
      if (vi < nvec) {
        pw_r_pos<V>(vi, cv, d32, row[u], col[u]);
        ra[u] = pw_r_raw<T>(L, L.a, 0, row[u], col[u]);
        rb[u] = pw_r_raw<T>(L, L.b, 1, row[u], col[u]);
        if (HC && hc) rc[u] = pw_r_raw<T>(L, L.c, 2, row[u], col[u]);
        if (HD && hd) rd[u] = pw_r_raw<T>(L, L.d, 3, row[u], col[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (v0 + u * G >= nvec) break;
      pw_vec_value_acc<K, HC, HD>(L, ra[u], rb[u], rc[u], rd[u], hc, hd, cols - col[u], acc[u]);
    }
  }
  A s = acc[0];
#pragma unroll
  for (int u = 1; u < U; ++u) s += acc[u];
  return s;
}

template <class T, PwKind K>
__global__ void __launch_bounds__(kPwThreads, pw_min_blocks<K, 0, true>()) pw_r_partial(PwLaunch L) {
  using A = acc_of<T>;
  __shared__ A sh[32];
  A s = pw_r_partial_body<K, T>(L);
  s = block_sum(s, sh);
  if (threadIdx.x == 0) static_cast<A*>(L.workspace)[blockIdx.x] = s;
}

// The gradient w.r.t. a one-value-per-row operand (reduce, rows): warp w takes row j = w % red_m,
// split s = w / red_m (columns [s * red_chunk, ..) of the row); lane l sums its vectors l, l + 32,
// .. of the split in order (U per operand in flight), then the warp in a fixed shuffle tree.
constexpr int kPwRowReduceUnroll = 2;
template <PwKind K, class T>
__device__ __forceinline__ void pw_r_reduce_body(const PwLaunch& L) {
  using A = acc_of<T>;
  constexpr int V = pw_vec_width<T>(), U = kPwRowReduceUnroll;
  constexpr bool HC = kind_has_c(K), HD = kind_has_d(K);
  using P = Pack<T, V>;
  const bool per_elem = L.reduction == Reduction::None;
  const T* gl = static_cast<const T*>(L.grad_loss);
  A gs = per_elem ? A(0) : A(to_compute(gl[0]));
  if (L.reduction == Reduction::Mean) gs = gs / A(L.divisor);
  const bool hc = HC && L.c, hd = HD && L.d;
  const int lane = threadIdx.x & 31;
  const int64_t total = L.red_m * L.red_splits, cols = L.dims[1];
  const int64_t warps = int64_t(gridDim.x) * (kPwThreads / 32);
  for (int64_t w = int64_t(blockIdx.x) * (kPwThreads / 32) + threadIdx.x / 32; w < total; w += warps) {
    const int64_t j = w % L.red_m, s = w / L.red_m;
    const int64_t r0 = s * L.red_chunk, r1 = std::min(cols, r0 + L.red_chunk);
    A acc = A(0);
    for (int64_t c0 = r0 + int64_t(lane) * V; c0 < r1; c0 += int64_t(32) * V * U) {
      P ra[U], rb[U], rc[U], rd[U], rg[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t c = c0 + int64_t(u) * 32 * V;
        if (c < r1) {
          ra[u] = pw_r_raw<T>(L, L.a, 0, j, c);
          rb[u] = pw_r_raw<T>(L, L.b, 1, j, c);
          if (HC && hc) rc[u] = pw_r_raw<T>(L, L.c, 2, j, c);
          if (HD && hd) rd[u] = pw_r_raw<T>(L, L.d, 3, j, c);
          if (per_elem) rg[u] = pw_r_raw<T>(L, L.grad_loss, 5, j, c);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t c = c0 + int64_t(u) * 32 * V;
        if (c >= r1) break;
#pragma unroll
        for (int e = 0; e < V; ++e) {
          if (c + e >= r1) break;
          const A a = A(to_compute(ra[u].v[e])), b = A(to_compute(rb[u].v[e]));
          const A cc = HC && hc ? A(to_compute(rc[u].v[e])) : A(1);
          const A d = HD && hd ? A(to_compute(rd[u].v[e])) : A(1);
          const A g = per_elem ? A(to_compute(rg[u].v[e])) : gs;
          acc += g * pw_grad_k<K, A>(L, a, b, cc, d);
        }
      }
    }
    acc = warp_sum(acc);
    if (lane == 0) {
      if (L.red_splits == 1) static_cast<T*>(L.out)[j * L.st[4][0]] = from_compute<T>(acc);
      else static_cast<A*>(L.workspace)[s * L.red_m + j] = acc;
    }
  }
}

template <class T, PwKind K>
__global__ void __launch_bounds__(kPwThreads, pw_min_blocks<K, 2, true>()) pw_r_reduce(PwLaunch L) {
  pw_r_reduce_body<K, T>(L);
}

// Stage 2 of a split gradient reduction (red_splits partial sums per output), when it is split.
template <class T> void pw_grad_reduce_finish_launch(const PwLaunch& L, cudaStream_t st) {
  if (L.red_splits <= 1) return;
  const unsigned g2 = unsigned(std::clamp<int64_t>((L.red_m + kPwThreads - 1) / kPwThreads, 1, 132 * 16));
  pw_grad_reduce_finish<T><<<g2, kPwThreads, 0, st>>>(L);
  check_launch("loss pointwise gradient finish");
}
// Stage 2 of a mean / sum: one block adds the stage-1 partials in order.
template <class T> void pw_finish_launch(const PwLaunch& L, cudaStream_t st) {
  pw_finish<T><<<1, 1024, 0, st>>>(L);
  check_launch("loss pointwise finish");
}

template <class T>
void pw_rows_launch(const PwLaunch& L, cudaStream_t st) {
  constexpr int V = pw_vec_width<T>();
  if (L.reduce) {
    if (L.red_m == 0) return;
    const int64_t total = L.red_m * L.red_splits, per_block = kPwThreads / 32;
    const unsigned grid = unsigned(std::clamp<int64_t>((total + per_block - 1) / per_block, 1, int64_t(1) << 30));
    BARACUDA_PW_LAUNCH_K(pw_r_reduce, T, L, grid, st);
    check_launch("loss pointwise gradient (rows, one value per row)");
    pw_grad_reduce_finish_launch<T>(L, st);
    return;
  }
  if (!L.backward && L.reduction != Reduction::None) {
    BARACUDA_PW_LAUNCH_K(pw_r_partial, T, L, unsigned(L.blocks), st);
    check_launch("loss pointwise partial (rows)");
    pw_finish_launch<T>(L, st);
    return;
  }
  if (L.n == 0) return;
  const int64_t nvec = L.dims[0] * ((L.dims[1] + V - 1) / V);
  const int64_t per_block = int64_t(kPwThreads) * kPwVecLoadsPerThread;
  const unsigned grid = unsigned(std::clamp<int64_t>((nvec + per_block - 1) / per_block, 1, int64_t(1) << 30));
  BARACUDA_PW_LAUNCH_KM(pw_r_elem, T, L, grid, st);
  check_launch(L.backward ? "loss pointwise backward (rows)" : "loss pointwise (rows)");
}

template <class T>
void pw_launch_typed(const PwLaunch& L, cudaStream_t st) {
  if (L.rows) return pw_rows_launch<T>(L, st);
  if (L.reduce) {
    if (L.red_m == 0) return;
    const int64_t total = L.red_m * L.red_splits, per_block = L.red_cols ? kPwThreads : kPwThreads / 32;
    const unsigned grid = unsigned(std::clamp<int64_t>((total + per_block - 1) / per_block, 1, 132 * 16));
    pw_grad_reduce<T><<<grid, kPwThreads, 0, st>>>(L);
    check_launch("loss pointwise gradient (broadcast operand)");
    pw_grad_reduce_finish_launch<T>(L, st);
    return;
  }
  if (L.contig) {
    if (L.reduction != Reduction::None && !L.backward) {
      BARACUDA_PW_LAUNCH_K(pw_c_partial, T, L, unsigned(L.blocks), st);
      check_launch("loss pointwise partial (contiguous)");
      pw_finish_launch<T>(L, st);
      return;
    }
    if (L.n == 0) return;
    // One block per kPwThreads * kPwVecLoadsPerThread vectors (no grid-stride loop in practice):
    // many short blocks keep every SM's loads in flight while others compute or store, as the
    // elementwise family's contiguous kernel (a one-wave grid-stride grid reached ~88% of copy).
    const int64_t nvec = L.n / pw_vec_width<T>();
    const int64_t per_block = int64_t(kPwThreads) * kPwVecLoadsPerThread;
    const unsigned grid = unsigned(std::clamp<int64_t>((nvec + per_block - 1) / per_block, 1, int64_t(1) << 30));
    BARACUDA_PW_LAUNCH_KM(pw_c_elem, T, L, grid, st);
    check_launch(L.backward ? "loss pointwise backward (contiguous)" : "loss pointwise (contiguous)");
    return;
  }
  const int64_t want = (L.n + int64_t(kPwThreads) * kPwUnroll - 1) / (int64_t(kPwThreads) * kPwUnroll);
  const unsigned grid = unsigned(std::max<int64_t>(1, std::min<int64_t>(want, 132 * 16)));
  if (L.backward) {
    if (L.n == 0) return;
    pw_backward<T><<<grid, kPwThreads, 0, st>>>(L);
    check_launch("loss pointwise backward");
    return;
  }
  if (L.reduction == Reduction::None) {
    if (L.n == 0) return;
    pw_none<T><<<grid, kPwThreads, 0, st>>>(L);
    check_launch("loss pointwise");
    return;
  }
  pw_partial<T><<<unsigned(L.blocks), kPwThreads, 0, st>>>(L);
  check_launch("loss pointwise partial");
  pw_finish_launch<T>(L, st);
}

}  // namespace baracuda::loss::detail
