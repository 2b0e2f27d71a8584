// The scan operators. Each is an associative `combine(a, b)` over a State, where `a` comes
// first in scan order (for the reverse scans of the backward ops, `a` holds the higher axis
// indices), with an identity, plus how an element is loaded / lifted and how an output is
// stored.
//
//   Elem load(const Row&, i)            the operand values at axis index i
//   State lift(const Elem&, i)
//   void store(const Row&, i, const Elem&, const State& inclusive)
// Ops with kVec = true read one tensor (in0) of T and write one (out0) of O; they also offer
// lift_value(T) and finish(State) -> O for the 16-byte vector paths.
// Ops with kVecIdx = true (cummax / cummin) read one tensor (in0) of T and write out0 of T plus
// int64 indices (out1); they offer finish(State) -> T and index(State) -> int64 for the rows
// path's 16-byte vectors (the columns path keeps them scalar).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/dtype_traits.cuh"
#include "scan/scan_launch.h"

namespace baracuda::scan::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

using baracuda::scan::kOps;

// Whether Op has the values + indices vector variant (kVecIdx, see the top of the file).
template <class Op, class = void> struct vec_idx : std::false_type {};
template <class Op> struct vec_idx<Op, std::void_t<decltype(Op::kVecIdx)>> : std::bool_constant<Op::kVecIdx> {};

// One row's operands: base pointers (bytes) and axis strides (elements).
struct Row {
  const char* in[3];
  char* out[2];
  int64_t as[kOps];
};

template <class T> __device__ __forceinline__ const T& at_in(const Row& r, int k, int64_t i) {
  return reinterpret_cast<const T*>(r.in[k])[i * r.as[k]];
}
template <class T> __device__ __forceinline__ T& at_out(const Row& r, int k, int64_t i) {
  return reinterpret_cast<T*>(r.out[k])[i * r.as[3 + k]];
}

// Accumulator type: f32 for 16-bit floats, the float type itself otherwise, int64 for integers.
template <class T> using acc_t = std::conditional_t<is_float_v<T>, compute_t<T>, int64_t>;

template <class C, class T> __device__ __forceinline__ C lift_cast(T v) {
  if constexpr (is_half_v<T>) return C(static_cast<float>(v));
  else return C(v);
}

template <class C> __device__ __forceinline__ bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}

// A log-sum-exp held as (m, s), worth m + log(s): m is the largest term seen, s the sum of
// exp(term - m), so s >= 1 once a finite term is in. Adding two costs one exp (of -|m_a - m_b|)
// where log(exp(a) + exp(b)) costs an exp and a log1p, and the log is taken once per output.
// m = -inf is empty whatever s holds; a NaN term, or +inf meeting +inf, ends in m = NaN / +inf
// (torch's rules: NaN propagates, +inf stays). FAST: MUFU exp / log (16-bit outputs).
template <class C> struct Lse {
  C m, s;
};
template <class C, bool FAST> __device__ __forceinline__ C lse_exp(C x) {
  if constexpr (FAST && std::is_same_v<C, float>) return __expf(x);
  else return exp(x);
}
template <class C, bool FAST> __device__ __forceinline__ C lse_log(C x) {
  if constexpr (FAST && std::is_same_v<C, float>) return __logf(x);
  else return log(x);
}
template <class C> __device__ __forceinline__ Lse<C> lse_empty() { return Lse<C>{C(-INFINITY), C(0)}; }
template <class C, bool FAST> __device__ __forceinline__ Lse<C> lse_add(const Lse<C>& a, const Lse<C>& b) {
  const C d = b.m - a.m;  // NaN: a NaN term, or both m infinite with one sign
  const bool a_big = d <= C(0);
  const C e = lse_exp<C, FAST>(-fabs(d));  // 0 when one side is empty (d = +-inf)
  Lse<C> r{a_big ? a.m : b.m, fma(a_big ? b.s : a.s, e, a_big ? a.s : b.s)};
  if (d != d) r = Lse<C>{a.m + b.m, C(1)};  // -inf + -inf, +inf + +inf, NaN
  return r;
}
template <class C, bool FAST> __device__ __forceinline__ C lse_value(const Lse<C>& x) {
  return x.m + lse_log<C, FAST>(x.s);
}

#define BARACUDA_SCAN_VEC_OP_IO                                                                        \
  using Elem = T;                                                                                      \
  static constexpr bool kVec = true;                                                                   \
  __device__ static Elem load(const Row& r, int64_t i) { return at_in<T>(r, 0, i); }                   \
  __device__ static State lift(const Elem& e, int64_t) { return lift_value(e); }                       \
  __device__ static void store(const Row& r, int64_t i, const Elem&, const State& s) {                 \
    at_out<O>(r, 0, i) = finish(s);                                                                    \
  }

// cumsum (and, scanned in reverse, cumsum's backward).
template <class T, class O> struct SumOp {
  using C = std::conditional_t<is_float_v<O>, acc_t<O>, int64_t>;
  using State = C;
  __device__ static State identity() { return C(0); }
  __device__ static State combine(const State& a, const State& b) { return a + b; }
  __device__ static State lift_value(T v) { return lift_cast<C>(v); }
  __device__ static O finish(const State& s) { return from_compute<O>(s); }
  BARACUDA_SCAN_VEC_OP_IO
};

template <class T, class O> struct ProdOp {
  using C = std::conditional_t<is_float_v<O>, acc_t<O>, int64_t>;
  using State = C;
  __device__ static State identity() { return C(1); }
  __device__ static State combine(const State& a, const State& b) { return a * b; }
  __device__ static State lift_value(T v) { return lift_cast<C>(v); }
  __device__ static O finish(const State& s) { return from_compute<O>(s); }
  BARACUDA_SCAN_VEC_OP_IO
};

template <class T> struct LcseOp {
  using O = T;
  using C = compute_t<T>;
  using State = Lse<C>;
  static constexpr bool kFast = is_half_v<T>;
  __device__ static State identity() { return lse_empty<C>(); }
  __device__ static State combine(const State& a, const State& b) { return lse_add<C, kFast>(a, b); }
  __device__ static State lift_value(T v) { return State{lift_cast<C>(v), C(1)}; }
  __device__ static O finish(const State& s) { return from_compute<O>(lse_value<C, kFast>(s)); }
  BARACUDA_SCAN_VEC_OP_IO
};

// cummax / cummin with torch's rules: the later element wins ties (>= / <=), a NaN always
// wins over what came before, so the index is that of the last NaN seen. That is the maximum
// of the key (is_nan, value, index) in lexicographic order: associative. idx < 0 = identity.
template <class T, bool Max> struct ExtOp {
  using C = std::conditional_t<is_float_v<T>, compute_t<T>, T>;
  struct State {
    C v;
    int64_t i;
  };
  using Elem = T;
  static constexpr bool kVec = false;
  // The rows path's 16-byte vector variant (values + int64 indices, see rows_kernel); 1-byte
  // types stay scalar (16 elements x 16-byte states per lane would spill).
  static constexpr bool kVecIdx = sizeof(T) >= 2;
  __device__ static T finish(const State& s) { return from_compute<T>(s.v); }
  __device__ static int64_t index(const State& s) { return s.i; }
  __device__ static State identity() { return State{C(0), -1}; }
  __device__ static State combine(const State& a, const State& b) {
    if (b.i < 0) return a;
    if (a.i < 0) return b;
    if (is_nan(b.v)) return b;
    if (is_nan(a.v)) return a;
    if constexpr (Max) return b.v >= a.v ? b : a;
    else return b.v <= a.v ? b : a;
  }
  __device__ static Elem load(const Row& r, int64_t i) { return at_in<T>(r, 0, i); }
  __device__ static State lift(const Elem& e, int64_t i) { return State{lift_cast<C>(e), i}; }
  __device__ static void store(const Row& r, int64_t i, const Elem&, const State& s) {
    at_out<T>(r, 0, i) = from_compute<T>(s.v);
    at_out<int64_t>(r, 1, i) = s.i;
  }
};

// logcumsumexp backward (reverse scan): grad_x[i] = sum_{j >= i} g[j] exp(x[i] - y[j]), split by
// the sign of g into two reverse logcumsumexps of log|g[j]| - y[j] (torch's formulation).
// Inputs: in0 = grad_out, in1 = x, in2 = y.
template <class T> struct LcseBwdOp {
  using C = compute_t<T>;
  static constexpr bool kFast = is_half_v<T>;
  struct State {
    Lse<C> p, n;
  };
  struct Elem {
    C g, y;
  };
  static constexpr bool kVec = false;
  __device__ static State identity() { return State{lse_empty<C>(), lse_empty<C>()}; }
  __device__ static State combine(const State& a, const State& b) {
    return State{lse_add<C, kFast>(a.p, b.p), lse_add<C, kFast>(a.n, b.n)};
  }
  __device__ static Elem load(const Row& r, int64_t i) {
    return Elem{lift_cast<C>(at_in<T>(r, 0, i)), lift_cast<C>(at_in<T>(r, 2, i))};
  }
  __device__ static State lift(const Elem& e, int64_t) {
    const Lse<C> t{lse_log<C, kFast>(fabs(e.g)) - e.y, C(1)};
    return State{e.g > 0 ? t : lse_empty<C>(), e.g < 0 ? t : lse_empty<C>()};
  }
  // exp(x + m + log s) = s exp(x + m); an empty side (m = -inf) adds 0.
  __device__ static void store(const Row& r, int64_t i, const Elem&, const State& s) {
    const C x = lift_cast<C>(at_in<T>(r, 1, i));
    const C pos = s.p.m == C(-INFINITY) ? C(0) : s.p.s * lse_exp<C, kFast>(x + s.p.m);
    const C neg = s.n.m == C(-INFINITY) ? C(0) : s.n.s * lse_exp<C, kFast>(x + s.n.m);
    at_out<T>(r, 0, i) = from_compute<T>(pos - neg);
  }
};

// cumprod backward (reverse scan), torch's result at zeros. With z the first zero of x:
//   i < z:  grad_x[i] = (sum_{j >= i} g[j] y[j]) / x[i]
//   i == z: grad_x[z] = y[z-1] * sum_{j >= z} g[j] prod_{z < k <= j} x[k]
//   i > z:  0
// "i > z" is read as y[i-1] == 0 (exact after a zero; after an underflow both rules give 0).
// A segment's state: s1 = sum g*y; v = sum_j g[j] prod_{first < k <= j} x[k];
// q = prod_{first < k <= last} x[k]; f = x[first]; e = empty (the identity).
// Inputs: in0 = grad_out, in1 = x, in2 = y.
template <class T> struct CumprodBwdOp {
  using C = compute_t<T>;
  struct State {
    C s1, v, q, f;
    int e;
  };
  struct Elem {
    C g, x, y;
  };
  static constexpr bool kVec = false;
  __device__ static State identity() { return State{C(0), C(0), C(1), C(1), 1}; }
  // a: the higher indices (scanned first); b: the lower indices, prepended.
  __device__ static State combine(const State& a, const State& b) {
    if (a.e) return b;
    if (b.e) return a;
    const C bq = b.q * a.f;
    return State{a.s1 + b.s1, b.v + bq * a.v, bq * a.q, b.f, 0};
  }
  __device__ static Elem load(const Row& r, int64_t i) {
    return Elem{lift_cast<C>(at_in<T>(r, 0, i)), lift_cast<C>(at_in<T>(r, 1, i)), lift_cast<C>(at_in<T>(r, 2, i))};
  }
  __device__ static State lift(const Elem& e, int64_t) { return State{e.g * e.y, e.g, C(1), e.x, 0}; }
  __device__ static void store(const Row& r, int64_t i, const Elem& e, const State& s) {
    const C prev = i == 0 ? C(1) : lift_cast<C>(at_in<T>(r, 2, i - 1));
    C gx;
    if (prev == C(0)) gx = C(0);
    else if (e.x == C(0)) gx = prev * s.v;
    else gx = s.s1 / e.x;
    at_out<T>(r, 0, i) = from_compute<T>(gx);
  }
};

#undef BARACUDA_SCAN_VEC_OP_IO

}  // namespace baracuda::scan::kern
