// MoE gating: one warp per token, EPL experts per lane (expert e = i * 32 + lane). Scores in
// float32; the group scores sit one per lane (lane g: group g); top-k is k rounds of a warp argmax
// (the larger selection score, then the lower expert id), lane j keeping the j-th pick. The
// backward recomputes the scores and applies the chain rule of the weights through them.
#include <climits>
#include <cmath>

#include "common/block_reduce.cuh"
#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/online_softmax.cuh"
#include "moe/moe_launch.h"

namespace baracuda::moe {

namespace {

using kernels::TypeTag;
using kernels::warp_sum;

constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float warp_max(float v) { return kernels::group_max<32>(v); }  // fmaxf: a NaN lane loses

// A candidate: selection value, expert (or group) id, score. The order is total (ids differ), so
// the butterfly leaves the same winner in every lane.
struct Pick {
  float val;
  int idx;
  float score;
};
__device__ __forceinline__ bool better(float av, int ai, float bv, int bi) { return av > bv || (av == bv && ai < bi); }
__device__ __forceinline__ Pick warp_best(Pick p) {
#pragma unroll
  for (int o = 16; o; o >>= 1) {
    const Pick q{__shfl_xor_sync(kFull, p.val, o), __shfl_xor_sync(kFull, p.idx, o),
                 __shfl_xor_sync(kFull, p.score, o)};
    if (better(q.val, q.idx, p.val, p.idx)) p = q;
  }
  return p;
}

template <class T, int EPL> __global__ void __launch_bounds__(256) gate_kernel(const GateParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t t = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (t >= p.tokens) return;  // uniform across the warp
  const int E = int(p.experts), K = p.top_k;
  const T* row = static_cast<const T*>(p.logits) + t * p.logit_stride;
  float s[EPL];
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int e = i * 32 + lane;
    s[i] = e < E ? float(kernels::to_compute(row[e])) : -INFINITY;
  }
  if (p.sigmoid) {
#pragma unroll
    for (int i = 0; i < EPL; ++i) s[i] = i * 32 + lane < E ? 1.f / (1.f + expf(-s[i])) : 0.f;
  } else {
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < EPL; ++i) m = fmaxf(m, s[i]);
    m = warp_max(m);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      s[i] = i * 32 + lane < E ? expf(s[i] - m) : 0.f;
      sum += s[i];
    }
    const float inv = 1.f / warp_sum(sum);
#pragma unroll
    for (int i = 0; i < EPL; ++i) s[i] *= inv;
  }

  if (p.backward) {
    // Lane j < K holds pick j: its expert and the gradient of its weight.
    int my_id = -1;
    float my_g = 0.f;
    if (lane < K) {
      const int64_t at = t * p.id_stride + lane;
      my_id = p.ids_int32 ? int(static_cast<const int32_t*>(p.ids)[at]) : int(static_cast<const int64_t*>(p.ids)[at]);
      my_g = p.grad_weights[t * p.grad_weight_stride + lane];
    }
    float ge[EPL], cnt[EPL];
#pragma unroll
    for (int i = 0; i < EPL; ++i) ge[i] = cnt[i] = 0.f;
    for (int j = 0; j < K; ++j) {
      const int id = __shfl_sync(kFull, my_id, j);
      const float g = __shfl_sync(kFull, my_g, j);
      if (id >= 0 && id < E && (id & 31) == lane) {
#pragma unroll
        for (int i = 0; i < EPL; ++i)
          if (i == (id >> 5)) {
            ge[i] += g;
            cnt[i] += 1.f;
          }
      }
    }
    // A = sum_j g_j s[id_j], S = sum_j s[id_j]; D = dL/ds.
    float a = 0.f, S = 0.f;
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      a += ge[i] * s[i];
      S += cnt[i] * s[i];
    }
    a = warp_sum(a);
    S = warp_sum(S);
    float d[EPL], r = 0.f;
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      d[i] = !p.renormalize ? p.scale * ge[i] : S > 0.f ? p.scale * (ge[i] / S - a * cnt[i] / (S * S)) : 0.f;
      r += s[i] * d[i];
    }
    if (!p.sigmoid) r = warp_sum(r);
    T* out = static_cast<T*>(p.grad_logits) + t * p.grad_logit_stride;
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      const int e = i * 32 + lane;
      if (e >= E) continue;
      const float dl = p.sigmoid ? d[i] * s[i] * (1.f - s[i]) : s[i] * (d[i] - r);
      out[e] = kernels::from_compute<T>(dl);
    }
    return;
  }

  // Selection values (NaN never wins), and which experts are still candidates.
  float sel[EPL];
  unsigned alive = 0;
#pragma unroll
  for (int i = 0; i < EPL; ++i) {
    const int e = i * 32 + lane;
    sel[i] = -INFINITY;
    if (e < E) {
      const float v = s[i] + (p.bias ? p.bias[e] : 0.f);
      sel[i] = isnan(v) ? -INFINITY : v;
      alive |= 1u << i;
    }
  }
  if (p.n_group > 1) {
    const int gs = E / p.n_group;
    float gscore = -INFINITY;  // lane g: group g's score
    for (int g = 0; g < p.n_group; ++g) {
      float a = -INFINITY, b = -INFINITY;  // this lane's best two in group g
#pragma unroll
      for (int i = 0; i < EPL; ++i) {
        const int e = i * 32 + lane;
        if (e < E && e / gs == g) {
          if (sel[i] > a) {
            b = a;
            a = sel[i];
          } else if (sel[i] > b) {
            b = sel[i];
          }
        }
      }
      if (p.top2_sum) {
#pragma unroll
        for (int o = 16; o; o >>= 1) {
          const float qa = __shfl_xor_sync(kFull, a, o), qb = __shfl_xor_sync(kFull, b, o);
          const float na = fmaxf(a, qa), nb = fmaxf(fminf(a, qa), fmaxf(b, qb));
          a = na;
          b = nb;
        }
        a += b;
      } else {
        a = warp_max(a);
      }
      if (lane == g) gscore = isnan(a) ? -INFINITY : a;
    }
    unsigned kept = 0;
    for (int r = 0; r < p.topk_group; ++r) {
      const bool cand = lane < p.n_group && !((kept >> lane) & 1u);
      const Pick c = warp_best(Pick{cand ? gscore : -INFINITY, cand ? lane : INT_MAX, 0.f});
      if (c.idx != INT_MAX) kept |= 1u << c.idx;
    }
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      const int e = i * 32 + lane;
      if (e < E && !((kept >> (e / gs)) & 1u)) alive &= ~(1u << i);
    }
  }
  int my_id = -1;
  float my_s = 0.f;
  for (int j = 0; j < K; ++j) {
    Pick c{-INFINITY, INT_MAX, 0.f};
#pragma unroll
    for (int i = 0; i < EPL; ++i) {
      const int e = i * 32 + lane;
      if (((alive >> i) & 1u) && better(sel[i], e, c.val, c.idx)) c = Pick{sel[i], e, s[i]};
    }
    c = warp_best(c);
    if (c.idx != INT_MAX && (c.idx & 31) == lane) alive &= ~(1u << (c.idx >> 5));
    if (lane == j) {
      my_id = c.idx == INT_MAX ? -1 : c.idx;
      my_s = c.score;
    }
  }
  float w = lane < K ? my_s : 0.f;
  if (p.renormalize) w /= warp_sum(w);
  w *= p.scale;
  if (lane < K) {
    p.weights[t * p.weight_stride + lane] = w;
    const int64_t at = t * p.id_stride + lane;
    if (p.ids_int32) static_cast<int32_t*>(p.ids)[at] = my_id;
    else static_cast<int64_t*>(p.ids)[at] = my_id;
  }
}

template <class T> void launch(const GateParams& p, cudaStream_t st) {
  const dim3 grid(unsigned((p.tokens + 7) / 8));
  const int64_t per_lane = (p.experts + 31) / 32;
  if (per_lane <= 1) gate_kernel<T, 1><<<grid, 256, 0, st>>>(p);
  else if (per_lane <= 2) gate_kernel<T, 2><<<grid, 256, 0, st>>>(p);
  else if (per_lane <= 4) gate_kernel<T, 4><<<grid, 256, 0, st>>>(p);
  else if (per_lane <= 8) gate_kernel<T, 8><<<grid, 256, 0, st>>>(p);
  else if (per_lane <= 16) gate_kernel<T, 16><<<grid, 256, 0, st>>>(p);
  else gate_kernel<T, 32><<<grid, 256, 0, st>>>(p);
  check_launch("moe gate_kernel");
}

}  // namespace

void gate(const GateParams& p, cudaStream_t stream) {
  if (p.tokens == 0) return;
  switch (p.dtype) {
    case DType::Float32: return launch<float>(p, stream);
    case DType::Float16: return launch<kernels::f16>(p, stream);
    case DType::BFloat16: return launch<kernels::bf16>(p, stream);
    default: throw Unsupported(std::string("moe_gate: no kernel for ") + dtype_name(p.dtype));
  }
}

}  // namespace baracuda::moe
