// Pointwise losses (MSE, L1, Huber, smooth-L1, BCE, BCE-with-logits, KL-div, Poisson-NLL,
// Gaussian-NLL, margin-ranking, hinge-embedding, soft-margin): each kind's value and derivatives, and
// the operand loads the kernels of pw_kernels.cuh share. Math in f32 for half / f32 storage (f64 for
// f64).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/cuda_check.h"
#include "common/compute_math.cuh"
#include "common/dtype_traits.cuh"
#include "loss/loss_common.cuh"
#include "loss/loss_launch.h"

namespace baracuda::loss::detail {

namespace cmath = kernels::cmath;

constexpr int kPwUnroll = 4;

// Per-element offsets of the six operand slots for broadcast-shape index i (row-major).
__device__ __forceinline__ void pw_offsets(const PwLaunch& L, int64_t i, int64_t (&off)[6]) {
  if (L.nd == 1) {
#pragma unroll
    for (int k = 0; k < 6; ++k) off[k] = i * L.st[k][0];
    return;
  }
#pragma unroll
  for (int k = 0; k < 6; ++k) off[k] = 0;
  for (int d = L.nd - 1; d >= 0; --d) {
    const int64_t q = i / L.dims[d], r = i - q * L.dims[d];
    i = q;
#pragma unroll
    for (int k = 0; k < 6; ++k) off[k] += r * L.st[k][d];
  }
}

template <class T> struct PwVals {
  using A = acc_of<T>;
  A a, b, c, d;
};
template <class T> __device__ __forceinline__ PwVals<T> pw_load(const PwLaunch& L, const int64_t (&off)[6]) {
  using A = acc_of<T>;
  PwVals<T> v;
  v.a = A(to_compute(static_cast<const T*>(L.a)[off[0]]));
  v.b = L.b ? A(to_compute(static_cast<const T*>(L.b)[off[1]])) : A(0);
  v.c = L.c ? A(to_compute(static_cast<const T*>(L.c)[off[2]])) : A(1);
  v.d = L.d ? A(to_compute(static_cast<const T*>(L.d)[off[3]])) : A(1);
  return v;
}

// The loss kind as a type, so a whole chunk of elements runs under one switch (with_kind); the
// launchers use the same switch on the host to pick the kernel of the kind.
template <PwKind K> struct KindC { static constexpr PwKind value = K; };
template <class F> __host__ __device__ __forceinline__ void with_kind(PwKind k, F&& f) {
  switch (k) {
    case PwKind::Mse: return f(KindC<PwKind::Mse>{});
    case PwKind::L1: return f(KindC<PwKind::L1>{});
    case PwKind::Huber: return f(KindC<PwKind::Huber>{});
    case PwKind::SmoothL1: return f(KindC<PwKind::SmoothL1>{});
    case PwKind::Bce: return f(KindC<PwKind::Bce>{});
    case PwKind::BceLogits: return f(KindC<PwKind::BceLogits>{});
    case PwKind::KlDiv: return f(KindC<PwKind::KlDiv>{});
    case PwKind::PoissonNll: return f(KindC<PwKind::PoissonNll>{});
    case PwKind::GaussianNll: return f(KindC<PwKind::GaussianNll>{});
    case PwKind::MarginRanking: return f(KindC<PwKind::MarginRanking>{});
    case PwKind::HingeEmbedding: return f(KindC<PwKind::HingeEmbedding>{});
    case PwKind::SoftMargin: return f(KindC<PwKind::SoftMargin>{});
  }
}

// The loss of one element (kind K).
template <PwKind K, class A> __device__ __forceinline__ A pw_value_k(const PwLaunch& L, A a, A b, A c, A d) {
  const A p0 = A(L.p0);
  switch (K) {
    case PwKind::Mse: {
      const A x = a - b;
      return x * x;
    }
    case PwKind::L1: return cmath::abs(a - b);
    case PwKind::Huber: {
      const A z = cmath::abs(a - b);
      return z < p0 ? A(0.5) * z * z : p0 * (z - A(0.5) * p0);
    }
    case PwKind::SmoothL1: {
      const A z = cmath::abs(a - b);
      if (p0 == A(0)) return z;
      return z < p0 ? A(0.5) * z * z / p0 : z - A(0.5) * p0;
    }
    case PwKind::Bce: {  // c: weight (1 when absent); logs clamped at -100 as torch
      const A l1 = cmax(xlog(a), A(-100)), l0 = cmax(cmath::log1p(-a), A(-100));
      const A v = (b - A(1)) * l0 - b * l1;
      return (a != a) ? a : c * v;  // cmax drops NaN: keep a NaN input
    }
    case PwKind::BceLogits: {  // c: weight, d: pos_weight (1 when absent)
      const A lw = L.d ? (d - A(1)) * b + A(1) : A(1);
      const A sp = cmath::log1p(cmath::exp(-cmath::abs(a))) + cmath::relu_nan(-a);  // softplus(-a)
      return c * ((A(1) - b) * a + lw * sp);
    }
    case PwKind::KlDiv: {  // a: log-probabilities; b: probabilities (log-probabilities with log_target)
      if (L.f0) return cmath::exp(b) * (b - a);
      const A xl = (b == A(0)) ? A(0) : b * xlog(b);
      return xl - b * a;
    }
    case PwKind::PoissonNll: {  // f0: log_input, f1: full, p0: eps
      A v = L.f0 ? cmath::exp(a) - b * a : a - b * xlog(a + p0);
      if (L.f1 && b > A(1)) v += b * xlog(b) - b + A(0.5) * xlog(A(2) * A(3.14159265358979323846) * b);
      return v;
    }
    case PwKind::GaussianNll: {  // c: var, clamped to eps (p0); f1: full
      const A var = c < p0 ? p0 : c;
      const A x = a - b;
      A v = A(0.5) * (xlog(var) + x * x / var);
      if (L.f1) v += A(0.5) * xlog(A(2) * A(3.14159265358979323846));
      return v;
    }
    case PwKind::MarginRanking: return cmath::relu_nan(-b * (a - c) + p0);  // c: input2, b: target
    case PwKind::HingeEmbedding: {
      const A m = b != A(1) ? cmath::relu_nan(p0 - a) : A(0);
      const A s = b != A(-1) ? a : A(0);
      return m + s;
    }
    case PwKind::SoftMargin: return cmath::log1p(cmath::exp(-b * a));
  }
  return A(0);
}

// d loss / d a of one element (kind K).
template <PwKind K, class A> __device__ __forceinline__ A pw_deriv_k(const PwLaunch& L, A a, A b, A c, A d) {
  const A p0 = A(L.p0);
  switch (K) {
    case PwKind::Mse: return A(2) * (a - b);
    case PwKind::L1: return cmath::sgn(a - b);
    case PwKind::Huber: {
      const A x = a - b;
      return x <= -p0 ? -p0 : (x >= p0 ? p0 : x);
    }
    case PwKind::SmoothL1: {
      const A x = a - b;
      if (p0 == A(0)) return cmath::sgn(x);
      return x <= -p0 ? A(-1) : (x >= p0 ? A(1) : x / p0);
    }
    case PwKind::Bce: {
      const A den = cmax((A(1) - a) * a, A(1e-12));
      return (a != a) ? a : c * (a - b) / den;
    }
    case PwKind::BceLogits: {
      const A lw = L.d ? (d - A(1)) * b + A(1) : A(1);
      const A sig_neg = A(1) / (A(1) + cmath::exp(a));  // sigmoid(-a)
      return c * ((A(1) - b) - lw * sig_neg);
    }
    case PwKind::KlDiv: return L.f0 ? -cmath::exp(b) : -b;
    case PwKind::PoissonNll: return L.f0 ? cmath::exp(a) - b : A(1) - b / (a + p0);
    case PwKind::GaussianNll: {
      const A var = c < p0 ? p0 : c;
      return (a - b) / var;
    }
    case PwKind::MarginRanking: {
      const A v = -b * (a - c) + p0;
      return v > A(0) ? -b : (v != v ? v : A(0));
    }
    case PwKind::HingeEmbedding: {
      A g = b != A(-1) ? A(1) : A(0);
      if (b != A(1)) {
        const A v = p0 - a;
        g += v > A(0) ? A(-1) : (v != v ? v : A(0));
      }
      return g;
    }
    case PwKind::SoftMargin: {
      const A z = cmath::exp(-b * a);
      return -b * z / (A(1) + z);
    }
  }
  return A(0);
}

// d loss / d b (the target) of one element, as torch.autograd gives it (kinds whose target torch
// does not differentiate are refused by select()).
template <PwKind K, class A> __device__ __forceinline__ A pw_deriv_b_k(const PwLaunch& L, A a, A b, A c, A d) {
  switch (K) {
    case PwKind::Mse:
    case PwKind::L1:
    case PwKind::Huber:
    case PwKind::SmoothL1: return -pw_deriv_k<K, A>(L, a, b, c, d);  // odd in a - b (ties included)
    case PwKind::Bce: return (a != a) ? a : -c * (xlog(a) - cmath::log1p(-a));  // -w logit(a), unclamped (torch)
    case PwKind::BceLogits: {
      const A sp = cmath::log1p(cmath::exp(-cmath::abs(a))) + cmath::relu_nan(-a);  // softplus(-a)
      return c * ((L.d ? d - A(1) : A(0)) * sp - a);
    }
    case PwKind::KlDiv:  // log_target: exp(b) (b - a + 1); else log(b) + 1 - a (b = 0: 0 / 0 = NaN, as
                         // torch's xlogy gradient)
      if (L.f0) return cmath::exp(b) * (b - a + A(1));
      return b == A(0) ? qnan<A>() : xlog(b) + A(1) - a;
    case PwKind::PoissonNll: {
      A g = L.f0 ? -a : -xlog(a + A(L.p0));
      // Stirling's term is masked where b <= 1; torch's gradient through the mask is 0 there,
      // but 0 * inf = NaN at b = 0 (log(0)), which torch returns too.
      if (L.f1) g += b > A(1) ? xlog(b) + A(0.5) / b : (b > A(0) ? A(0) : qnan<A>());
      return g;
    }
    case PwKind::GaussianNll: {
      const A var = c < A(L.p0) ? A(L.p0) : c;
      return (b - a) / var;
    }
    case PwKind::MarginRanking: {  // b: target
      const A v = -b * (a - c) + A(L.p0);
      return v > A(0) ? -(a - c) : (v != v ? v : A(0));
    }
    default: return qnan<A>();
  }
}
// d loss / d c (var of gaussian_nll_loss: its clamp to eps is outside autograd in torch, so the
// gradient flows through it; input2 of margin_ranking_loss).
template <PwKind K, class A> __device__ __forceinline__ A pw_deriv_c_k(const PwLaunch& L, A a, A b, A c, A d) {
  switch (K) {
    case PwKind::GaussianNll: {
      const A var = c < A(L.p0) ? A(L.p0) : c;
      const A x = a - b;
      return A(0.5) * (A(1) / var - x * x / (var * var));
    }
    case PwKind::MarginRanking: return -pw_deriv_k<K, A>(L, a, b, c, d);
    default: return qnan<A>();
  }
}
// The derivative w.r.t. the operand L.wrt names.
template <PwKind K, class A> __device__ __forceinline__ A pw_grad_k(const PwLaunch& L, A a, A b, A c, A d) {
  if (L.wrt == 1) return pw_deriv_b_k<K, A>(L, a, b, c, d);
  if (L.wrt == 2) return pw_deriv_c_k<K, A>(L, a, b, c, d);
  return pw_deriv_k<K, A>(L, a, b, c, d);
}

// Runtime-kind forms (one element; the strided kernels).
template <class A> __device__ __forceinline__ A pw_value(const PwLaunch& L, A a, A b, A c, A d) {
  A r = A(0);
  with_kind(L.kind, [&](auto kc) { r = pw_value_k<decltype(kc)::value, A>(L, a, b, c, d); });
  return r;
}
template <class A> __device__ __forceinline__ A pw_grad(const PwLaunch& L, A a, A b, A c, A d) {
  A r = A(0);
  with_kind(L.kind, [&](auto kc) { r = pw_grad_k<decltype(kc)::value, A>(L, a, b, c, d); });
  return r;
}

}  // namespace baracuda::loss::detail
