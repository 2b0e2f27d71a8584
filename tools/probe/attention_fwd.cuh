// What the flash forward harnesses of tools/probe/probe.sh share (attention.cu: the sm_90a kernel;
// attention_mma.cu: the mma.sync one): dense bf16 [B, S, H, D] q / k / v (GQA by the kv heads), causal
// or not. Per case: microseconds (median of 20, L2 flushed), TFLOP/s (4 B H S S D, halved when causal),
// the largest error against a reference kernel (f32, one block per row) on 64 rows of each head of the
// first sequence, and a checksum of the output (variants that keep the math write the same bits).
#pragma once
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "attention/attention_launch.h"
#include "probe_common.cuh"

namespace probe {
using namespace baracuda;
using bf16 = __nv_bfloat16;

// out[i] of head h, sequence 0, for the sampled rows (row = blockIdx.x * step), f32 throughout.
__global__ void reference_rows(const bf16* q, const bf16* k, const bf16* v, float* out, int S, int H, int HKV, int D,
                               bool causal, int step, float softcap) {
  extern __shared__ float p[];  // [S]
  __shared__ float red[32];
  const int i = blockIdx.x * step, h = blockIdx.y, hk = h / (H / HKV);
  const int keys = causal ? i + 1 : S;
  const float scale = rsqrtf(float(D));
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < keys; j += blockDim.x) {
    float s = 0.f;
    for (int c = 0; c < D; ++c)
      s += __bfloat162float(q[(size_t(i) * H + h) * D + c]) * __bfloat162float(k[(size_t(j) * HKV + hk) * D + c]);
    p[j] = softcap > 0.f ? softcap * tanhf(s * scale / softcap) : s * scale;
    mx = fmaxf(mx, p[j]);
  }
  for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int w = 0; w < int(blockDim.x) / 32; ++w) mx = fmaxf(mx, red[w]);
  __syncthreads();
  float sum = 0.f;
  for (int j = threadIdx.x; j < keys; j += blockDim.x) sum += (p[j] = __expf(p[j] - mx));
  for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = sum;
  __syncthreads();
  sum = 0.f;
  for (int w = 0; w < int(blockDim.x) / 32; ++w) sum += red[w];
  for (int c = threadIdx.x; c < D; c += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < keys; ++j) acc += p[j] * __bfloat162float(v[(size_t(j) * HKV + hk) * D + c]);
    out[(size_t(blockIdx.y) * gridDim.x + blockIdx.x) * D + c] = acc / sum;
  }
}

// One case through `forward` (the kernel under test: the sm_90a one, or the mma.sync one with
// wgmma false).
template <class Forward>
void run_case(int B, int S, int H, int HKV, int D, bool causal, int bm, int bn, float softcap, bool wgmma,
              Forward forward,
              const Setup& su) {
  const size_t nq = size_t(B) * S * H * D, nk = size_t(B) * S * HKV * D;
  std::vector<bf16> hq(nq), hk(nk), hv(nk);
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& x : hq) x = __float2bfloat16(nd(rng));
  for (auto& x : hk) x = __float2bfloat16(nd(rng));
  for (auto& x : hv) x = __float2bfloat16(nd(rng));
  bf16 *q, *k, *v, *out;
  float* lse;
  PROBE_CHECK(cudaMalloc(&q, nq * 2));
  PROBE_CHECK(cudaMalloc(&k, nk * 2));
  PROBE_CHECK(cudaMalloc(&v, nk * 2));
  PROBE_CHECK(cudaMalloc(&out, nq * 2));
  PROBE_CHECK(cudaMalloc(&lse, size_t(B) * H * S * 4));
  PROBE_CHECK(cudaMemcpy(q, hq.data(), nq * 2, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(k, hk.data(), nk * 2, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(v, hv.data(), nk * 2, cudaMemcpyHostToDevice));

  attention::Geometry g;
  g.dtype = DType::BFloat16;
  g.batch = B, g.sq = g.sk = S, g.hq = H, g.hkv = HKV, g.d = g.dv = D;
  g.scale = 1.0 / std::sqrt(double(D));
  g.softcap = softcap;  // > 0: the general score kernels
  g.window_right = causal ? 0 : -1;
  g.lse_batch = int64_t(H) * S, g.lse_head = S;
  g.tile_bm = bm, g.tile_bn = bn, g.tile_wgmma = wgmma;
  attention::Pointers p;
  p.q = {q, int64_t(S) * H * D, int64_t(H) * D, D};
  p.k = {k, int64_t(S) * HKV * D, int64_t(HKV) * D, D};
  p.v = {v, int64_t(S) * HKV * D, int64_t(HKV) * D, D};
  p.out = {out, int64_t(S) * H * D, int64_t(H) * D, D};
  p.lse = lse;
  auto launch = [&] { forward(g, p); };
  PROBE_CHECK(cudaMemset(out, 0xff, nq * 2));  // NaN bits
  launch();
  PROBE_CHECK(cudaDeviceSynchronize());

  const int rows = 64, step = S / rows;
  float* ref;
  PROBE_CHECK(cudaMalloc(&ref, size_t(H) * rows * D * 4));
  reference_rows<<<dim3(rows, H), 256, S * 4>>>(q, k, v, ref, S, H, HKV, D, causal, step, softcap);
  PROBE_CHECK(cudaGetLastError());
  const std::vector<float> want = to_host<float>(ref, size_t(H) * rows * D);
  const std::vector<bf16> got = to_host<bf16>(out, nq);
  double err = 0;
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < D; ++c) {
        const double o = __bfloat162float(got[(size_t(r) * step * H + h) * D + c]);
        const double e = std::fabs(o - want[(size_t(h) * rows + r) * D + c]);
        err = std::isnan(o) ? INFINITY : std::max(err, e);
      }
  const uint64_t sum = device_fnv(out, nq * 2);

  const double us = median_us(launch, su.flush, su.flush_bytes, 20);
  const double flops = 4.0 * B * H * double(S) * S * D / (causal ? 2 : 1);
  std::printf("b%d s%d h%d/%d d%d %-6s%s %c%dn%d: %9.1f us %6.0f TFLOP/s  max err %.1e  checksum %016llx\n", B, S, H,
              HKV, D, causal ? "causal" : "", softcap > 0.f ? " softcap" : "", wgmma ? 'w' : 'm', bm, bn, us,
              flops / us / 1e6, err, (unsigned long long)sum);
  for (void* ptr : {(void*)q, (void*)k, (void*)v, (void*)out, (void*)lse, (void*)ref}) PROBE_CHECK(cudaFree(ptr));
}

// Arguments B S H HKV D CAUSAL BM BN [SOFTCAP]: one case (a softcap > 0 takes the general score
// kernels); none: `defaults` (each {B, S, H, HKV, D, causal, bm, bn}).
struct Case {
  int b, s, h, hkv, d, causal, bm, bn;
};
template <class Forward>
int forward_main(int argc, char** argv, bool wgmma, Forward forward, std::initializer_list<Case> defaults) {
  const Setup su = setup();
  if (argc == 9 || argc == 10) {
    run_case(std::atoi(argv[1]), std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]),
             std::atoi(argv[6]) != 0, std::atoi(argv[7]), std::atoi(argv[8]),
             argc == 10 ? float(std::atof(argv[9])) : 0.f, wgmma, forward, su);
    return 0;
  }
  for (const Case& c : defaults)
    run_case(c.b, c.s, c.h, c.hkv, c.d, c.causal != 0, c.bm, c.bn, 0.f, wgmma, forward, su);
  return 0;
}

}  // namespace probe
