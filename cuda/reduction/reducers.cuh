// The reduction functors. Each one is a monoid over a State:
//   init()            the identity
//   add(s, v, idx)    fold one input element (idx: its logical index in the reduced space,
//                     used by argmax / argmin only)
//   merge(a, b)       fold another partial state into a (every merge here is commutative and
//                     associative up to rounding; the kernels merge in a fixed order)
//   finish(s, n)      the output value, n = elements reduced per output
//   store(out, o, s, n)  instead of finish where Out = void: writes output element o itself, in a
//                     type chosen at run time (an index as int32 or int64, an integer sum as int64
//                     or the input's type): one kernel set for both output types
//   add_n<ORDERED>(s, v[N], idx)   optional (kBulk = true): fold N elements at once, with a
//                     short dependency chain (pairwise trees, one merge into s). ORDERED: the
//                     elements come in increasing logical index (argmax may then skip index
//                     compares inside the chunk). idx(j) gives element j's logical index.
// Half types accumulate in f32, f32 in f32, f64 in f64, integers and bool in int64.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cuda/std/limits>
#include <type_traits>

#include "common/dtype_traits.cuh"

namespace baracuda::reduction::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

// Accumulator of sums / products of T.
template <class T> using acc_t =
    std::conditional_t<std::is_same_v<T, double>, double, std::conditional_t<is_float_v<T>, float, int64_t>>;
// Accumulator of float statistics (var, logsumexp, backward stats) of T.
template <class T> using facc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class A, class T> __device__ __forceinline__ A to_acc(T v) {
  if constexpr (is_half_v<T> || is_fp8_v<T>) return A(to_compute(v));
  else return A(v);
}
template <class T> __device__ __forceinline__ bool nonzero(T v) {
  if constexpr (std::is_same_v<T, bool>) return v;
  else if constexpr (is_half_v<T> || is_fp8_v<T>) return to_compute(v) != 0.0f;
  else return v != T(0);
}
template <class C> __device__ __forceinline__ bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}
template <class O, class A> __device__ __forceinline__ O to_out(A v) {
  if constexpr (std::is_same_v<O, bool>) return v != A(0);
  else return from_compute<O>(v);
}

template <class A> struct Stat2 { A a, b; };

// Pairwise tree over a[0..N) in a fixed shape: a[j] = op(a[j], a[j + w]) for w = 1, 2, 4, ...
// (the left operand always holds the smaller positions).
template <int N, class A, class Op> __device__ __forceinline__ A tree(A (&a)[N], Op op) {
#pragma unroll
  for (int w = 1; w < N; w *= 2) {
#pragma unroll
    for (int j = 0; j + w < N; j += 2 * w) a[j] = op(a[j], a[j + w]);
  }
  return a[0];
}
struct Plus {
  template <class A> __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};
// exp for the softmax-like statistics: exp2 of a pre-scaled argument in f32 (one MUFU op plus
// the scaling, 2 ulp), the libm exp in f64.
template <class A> __device__ __forceinline__ A fexp(A d) {
  if constexpr (std::is_same_v<A, float>) return exp2f(d * 1.4426950408889634f);
  else return exp(d);
}

// ---- sum / mean / prod / norm2 ------------------------------------------------------------
// A plain sum of the inputs in accumulator A (the state of sum, mean, and the mean statistic):
// the reducer's init / add / add_n / merge; the reducer adds its finish.
template <class T, class A> struct SumState {
  using State = A;
  static constexpr bool kIndex = false;
  static constexpr bool kBulk = true;
  using In = T;
  __device__ State init() const { return A(0); }
  __device__ void add(State& s, T v, int64_t) const { s += to_acc<A>(v); }
  template <bool ORDERED, int N, class IdxF> __device__ void add_n(State& s, const T (&v)[N], IdxF) const {
    A a[N];
#pragma unroll
    for (int j = 0; j < N; ++j) a[j] = to_acc<A>(v[j]);
    s += tree(a, Plus{});
  }
  __device__ void merge(State& a, const State& b) const { a += b; }
};

template <class T, class O> struct SumR : SumState<T, acc_t<T>> {
  using A = acc_t<T>;
  using typename SumState<T, A>::State;
  using Out = O;
  bool mean = false;
  __device__ O finish(const State& s, int64_t n) const {
    if constexpr (std::is_floating_point_v<A>) {
      if (mean) return to_out<O>(s / A(n));
    }
    return to_out<O>(s);
  }
};

// Half sums and means accumulate in f32 whether the plan writes the input's type or f32
// (sum(dtype=float32)): the output type is chosen per output (Out = void, store), one kernel set.
template <class T> struct SumHalfR : SumR<T, float> {
  using Out = void;
  bool out_f32 = false;
  __device__ void store(void* out, int64_t o, const float& s, int64_t n) const {
    const float v = this->finish(s, n);
    if (out_f32) static_cast<float*>(out)[o] = v;
    else static_cast<T*>(out)[o] = from_compute<T>(v);
  }
};

template <class T, class O> struct ProdR {
  using A = acc_t<T>;
  using State = A;
  static constexpr bool kIndex = false;
  using In = T;
  using Out = O;
  __device__ State init() const { return A(1); }
  __device__ static A mul(A a, A b) {
    if constexpr (std::is_integral_v<A>) return A(uint64_t(a) * uint64_t(b));  // two's-complement wrap
    else return a * b;
  }
  __device__ void add(State& s, T v, int64_t) const { s = mul(s, to_acc<A>(v)); }
  __device__ void merge(State& a, const State& b) const { a = mul(a, b); }
  __device__ O finish(const State& s, int64_t) const { return to_out<O>(s); }
};

// Integer sums and products accumulate in int64 whichever output the plan asked for (int64, or
// the input's own type, wrapping): the output type is chosen at run time (Out = void, store), so
// one kernel set serves both.
template <class T> __device__ __forceinline__ void store_int(void* out, int64_t o, int64_t v, bool as_input) {
  if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, int64_t>) {
    if (as_input) {
      static_cast<T*>(out)[o] = static_cast<T>(v);
      return;
    }
  }
  static_cast<int64_t*>(out)[o] = v;
}
template <class T> struct SumIntR : SumState<T, int64_t> {
  using Out = void;
  bool as_input = false;  // write the input's type, else int64
  __device__ void store(void* out, int64_t o, const int64_t& s, int64_t) const { store_int<T>(out, o, s, as_input); }
};
template <class T> struct ProdIntR : ProdR<T, int64_t> {
  using Out = void;
  bool as_input = false;
  __device__ void store(void* out, int64_t o, const int64_t& s, int64_t) const { store_int<T>(out, o, s, as_input); }
};

template <class T, class O> struct Norm2R {
  using A = facc_t<T>;
  using State = A;
  static constexpr bool kIndex = false;
  using In = T;
  using Out = O;
  __device__ State init() const { return A(0); }
  static constexpr bool kBulk = true;
  __device__ void add(State& s, T v, int64_t) const {
    const A x = to_acc<A>(v);
    s += x * x;
  }
  template <bool ORDERED, int N, class IdxF> __device__ void add_n(State& s, const T (&v)[N], IdxF) const {
    A a[N];
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const A x = to_acc<A>(v[j]);
      a[j] = x * x;
    }
    s += tree(a, Plus{});
  }
  __device__ void merge(State& a, const State& b) const { a += b; }
  __device__ O finish(const State& s, int64_t) const { return to_out<O>(sqrt(s)); }
};

// ---- amax / amin (NaN propagates, as torch) -----------------------------------------------
template <class T, class O, bool MAX> struct ExtremeR {
  using C = compute_t<T>;
  using State = C;
  static constexpr bool kIndex = false;
  using In = T;
  using Out = O;
  __device__ State init() const {
    if constexpr (std::is_floating_point_v<C>)
      return MAX ? -cuda::std::numeric_limits<C>::infinity() : cuda::std::numeric_limits<C>::infinity();
    else
      return MAX ? cuda::std::numeric_limits<C>::lowest() : cuda::std::numeric_limits<C>::max();
  }
  static constexpr bool kBulk = true;
  __device__ static void fold(State& s, C v) {
    if ((MAX ? v > s : v < s) || is_nan(v)) s = v;
  }
  __device__ void add(State& s, T v, int64_t) const { fold(s, to_compute(v)); }
  template <bool ORDERED, int N, class IdxF> __device__ void add_n(State& s, const T (&v)[N], IdxF) const {
    C a[N];
#pragma unroll
    for (int j = 0; j < N; ++j) a[j] = to_compute(v[j]);
    fold(s, tree(a, [](C x, C y) { return ((MAX ? y > x : y < x) || is_nan(y)) ? y : x; }));
  }
  __device__ void merge(State& a, const State& b) const { fold(a, b); }
  __device__ O finish(const State& s, int64_t) const { return to_out<O>(s); }
};

// ---- logsumexp: running (max, sum of exp(x - max)) -------------------------------------------
// Any NaN makes the state NaN at once (m = NaN); a +inf max is the result whatever else comes
// (but NaN); -inf elements contribute nothing.
template <class T, class O> struct LogSumExpR {
  using A = facc_t<T>;
  struct State { A m, s; };
  static constexpr bool kIndex = false;
  static constexpr bool kBulk = true;
  using In = T;
  using Out = O;
  __device__ State init() const { return {-cuda::std::numeric_limits<A>::infinity(), A(0)}; }
  __device__ static void fold(State& st, A m, A s) {
    constexpr A kInf = cuda::std::numeric_limits<A>::infinity();
    if (is_nan(m) || is_nan(st.m)) { st.m = cuda::std::numeric_limits<A>::quiet_NaN(); st.s = A(1); return; }
    if (m == -kInf || st.m == kInf) return;                       // nothing to add / stays +inf
    if (m == kInf) { st.m = m; st.s = A(1); return; }
    if (m > st.m) {
      st.s = st.s * fexp(st.m - m) + s;
      st.m = m;
    } else {
      st.s += s * fexp(m - st.m);
    }
  }
  __device__ void add(State& st, T v, int64_t) const { fold(st, to_acc<A>(v), A(1)); }
  // A chunk: its max (NaN ignored), then one exp per element against it. A NaN element makes
  // the chunk sum NaN, which folds as NaN; non-finite maxima take the element-wise path.
  template <bool ORDERED, int N, class IdxF> __device__ void add_n(State& st, const T (&v)[N], IdxF) const {
    // (Converts v twice rather than keeping N converted values live: fewer registers.)
    A a[N];
#pragma unroll
    for (int j = 0; j < N; ++j) a[j] = to_acc<A>(v[j]);
    const A cm = tree(a, [](A p, A q) { return fmax(p, q); });
    if (isfinite(cm)) {
#pragma unroll
      for (int j = 0; j < N; ++j) a[j] = fexp(to_acc<A>(v[j]) - cm);
      const A cs = tree(a, Plus{});
      fold(st, is_nan(cs) ? cs : cm, cs);
    } else {
#pragma unroll
      for (int j = 0; j < N; ++j) fold(st, to_acc<A>(v[j]), A(1));
    }
  }
  __device__ void merge(State& a, const State& b) const { fold(a, b.m, b.s); }
  __device__ O finish(const State& st, int64_t) const {
    // +-inf max (or NaN) is the result itself; otherwise m + log(s).
    if (is_nan(st.m) || isinf(st.m)) return to_out<O>(st.m);
    return to_out<O>(st.m + log(st.s));
  }
};

// ---- var / std: Welford per thread on data shifted by the thread's first element (so the
// running mean is small and keeps its precision when the data sit far from 0, e.g. 1e4 + N(0,1));
// Chan's formula to merge (the shift difference enters the mean delta exactly).
template <class T, class O> struct VarR {
  using A = facc_t<T>;
  struct State { A shift, mean, m2; int64_t n; };
  static constexpr bool kIndex = false;
  using In = T;
  using Out = O;
  static constexpr bool kBulk = true;
  A correction = A(1);
  bool take_sqrt = false;
  __device__ State init() const { return {A(0), A(0), A(0), 0}; }
  // A chunk: shifted by the state's shift, its exact mean and M2 (two passes in registers),
  // merged with Chan's formula (one division per chunk instead of one per element).
  template <bool ORDERED, int N, class IdxF> __device__ void add_n(State& s, const T (&v)[N], IdxF) const {
    // (Converts v twice rather than keeping N converted values live: fewer registers.)
    A a[N];
    if (s.n == 0) s.shift = to_acc<A>(v[0]);
    const A shift = s.shift;
#pragma unroll
    for (int j = 0; j < N; ++j) a[j] = to_acc<A>(v[j]) - shift;
    const A mean = tree(a, Plus{}) * (A(1) / A(N));
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const A d = (to_acc<A>(v[j]) - shift) - mean;
      a[j] = d * d;
    }
    merge(s, State{s.shift, mean, tree(a, Plus{}), int64_t(N)});
  }
  __device__ void add(State& s, T v, int64_t) const {
    const A x = to_acc<A>(v);
    if (s.n == 0) s.shift = x;
    const A xs = x - s.shift;
    s.n += 1;
    const A d = xs - s.mean;
    s.mean += d / A(s.n);
    s.m2 += d * (xs - s.mean);
  }
  __device__ void merge(State& a, const State& b) const {
    if (b.n == 0) return;
    if (a.n == 0) { a = b; return; }
    const int64_t n = a.n + b.n;
    const A d = (b.shift - a.shift) + (b.mean - a.mean);
    const A fb = A(b.n) / A(n);
    a.mean += d * fb;
    a.m2 += b.m2 + d * d * A(a.n) * fb;
    a.n = n;
  }
  __device__ O finish(const State& s, int64_t) const {
    A dof = A(s.n) - correction;
    if (dof < A(0)) dof = A(0);
    const A var = s.m2 / dof;
    return to_out<O>(take_sqrt ? sqrt(var) : var);
  }
};

// ---- argmax / argmin: (value, index); NaN is the extreme; ties go to the first index --------
// argmax (MAX) or argmin; the index written as int32 or int64 at the end (store), so one kernel
// set serves both index types (a choice per output, not per element).
template <class T, bool MAX> struct ArgR {
  using C = compute_t<T>;
  struct State { C v; int64_t i; };
  static constexpr bool kIndex = true;
  using In = T;
  using Out = void;  // store() writes the index type out32 names
  bool out32 = false;
  __device__ State init() const { return {C(0), -1}; }
  __device__ static bool better(const State& b, const State& a) {  // does b replace a?
    if (b.i < 0) return false;
    if (a.i < 0) return true;
    const bool bn = is_nan(b.v), an = is_nan(a.v);
    if (bn || an) return bn && (!an || b.i < a.i);
    if (b.v == a.v) return b.i < a.i;
    return MAX ? b.v > a.v : b.v < a.v;
  }
  static constexpr bool kBulk = true;
  __device__ void add(State& s, T v, int64_t idx) const {
    const State b{to_compute(v), idx};
    if (better(b, s)) s = b;
  }
  // ORDERED chunks: a tree over (value, position) where the left side always holds the smaller
  // positions, so ties keep the left one without comparing indices; one full merge at the end.
  template <bool ORDERED, int N, class IdxF> __device__ void add_n(State& s, const T (&v)[N], IdxF idx) const {
    if constexpr (!ORDERED) {
#pragma unroll
      for (int j = 0; j < N; ++j) add(s, v[j], idx(j));
    } else {
      C a[N];
      int p[N];
#pragma unroll
      for (int j = 0; j < N; ++j) { a[j] = to_compute(v[j]); p[j] = j; }
#pragma unroll
      for (int w = 1; w < N; w *= 2) {
#pragma unroll
        for (int j = 0; j + w < N; j += 2 * w) {
          const bool right = (MAX ? a[j + w] > a[j] : a[j + w] < a[j]) || (is_nan(a[j + w]) && !is_nan(a[j]));
          if (right) { a[j] = a[j + w]; p[j] = p[j + w]; }
        }
      }
      const State b{a[0], idx(p[0])};
      if (better(b, s)) s = b;
    }
  }
  __device__ void merge(State& a, const State& b) const {
    if (better(b, a)) a = b;
  }
  __device__ void store(void* out, int64_t o, const State& s, int64_t) const {
    if (out32) static_cast<int32_t*>(out)[o] = int32_t(s.i);
    else static_cast<int64_t*>(out)[o] = s.i;
  }
};

// ---- any / all / count_nonzero ----------------------------------------------------------------
template <class T, class O, int MODE> struct BoolR {  // MODE 0 any, 1 all, 2 count
  using State = std::conditional_t<MODE == 2, int64_t, int32_t>;
  static constexpr bool kIndex = false;
  using In = T;
  using Out = O;
  __device__ State init() const { return MODE == 1 ? 1 : 0; }
  __device__ void add(State& s, T v, int64_t) const {
    if constexpr (MODE == 0) s |= State(nonzero(v));
    else if constexpr (MODE == 1) s &= State(nonzero(v));
    else s += State(nonzero(v));
  }
  __device__ void merge(State& a, const State& b) const {
    if constexpr (MODE == 0) a |= b;
    else if constexpr (MODE == 1) a &= b;
    else a += b;
  }
  __device__ O finish(const State& s, int64_t) const {
    if constexpr (MODE == 2) return O(s);
    else return s != 0;
  }
};

// ---- statistics for backward plans (out = Stat2<facc_t<T>>) -----------------------------------
template <class T> struct MeanStatR : SumState<T, facc_t<T>> {
  using A = facc_t<T>;
  using typename SumState<T, A>::State;
  using O = Stat2<A>;
  using Out = O;
  __device__ O finish(const State& s, int64_t n) const { return {s / A(n), A(0)}; }
};

template <class T, bool MAX> struct ExtremeCountStatR {
  using A = facc_t<T>;
  struct State { A m, c; };
  using O = Stat2<A>;
  static constexpr bool kIndex = false;
  using In = T;
  using Out = O;
  __device__ State init() const {
    return {MAX ? -cuda::std::numeric_limits<A>::infinity() : cuda::std::numeric_limits<A>::infinity(), A(0)};
  }
  __device__ static void fold(State& s, A m, A c) {
    if (is_nan(s.m)) return;
    if (is_nan(m) || (MAX ? m > s.m : m < s.m)) { s.m = m; s.c = c; }
    else if (m == s.m) s.c += c;
  }
  __device__ void add(State& s, T v, int64_t) const { fold(s, to_acc<A>(v), A(1)); }
  __device__ void merge(State& a, const State& b) const { fold(a, b.m, b.c); }
  __device__ O finish(const State& s, int64_t) const { return {s.m, s.c}; }
};

template <class T> struct ProdZeroStatR {
  using A = facc_t<T>;
  struct State { A p, z; };
  using O = Stat2<A>;
  static constexpr bool kIndex = false;
  using In = T;
  using Out = O;
  __device__ State init() const { return {A(1), A(0)}; }
  __device__ void add(State& s, T v, int64_t) const {
    const A x = to_acc<A>(v);
    if (x == A(0)) s.z += A(1);
    else s.p *= x;
  }
  __device__ void merge(State& a, const State& b) const { a.p *= b.p; a.z += b.z; }
  __device__ O finish(const State& s, int64_t) const { return {s.p, s.z}; }
};

}  // namespace baracuda::reduction::kern
