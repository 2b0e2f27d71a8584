// The attention-backward harness of tools/probe/probe.sh: the flash backward of cuda/fa2/flash_bwd.cuh
// (a variant of that header, included: grad_q, then grad_k / grad_v; attention_bwd_sm90 includes this
// file for the sm_90a kernels of flash_bwd_sm90.cuh) on dense bf16 [B, S, H, D]
// operands, GQA by the kv heads, causal or not. The forward (out, lse) runs first on the mma.sync
// kernel (flash_fwd_tiles.cuh, tile m64n64), and delta = rowsum(grad_out * out) on a kernel of the
// harness. Per case: microseconds of the backward (median of 20, L2 flushed), TFLOP/s (10 B H S S D,
// halved when causal: the five products of the backward counted once), and a checksum of grad_q,
// grad_k and grad_v (variants that keep the math write the same bits). Without arguments it first
// checks a small case against a float64 backward on the host (the largest error of each gradient),
// then times the bench's d128 rows; `check` alone runs that check at d128 and d64 and stops.
// Arguments: B S H HKV D CAUSAL [SOFTCAP] (a softcap runs the general score path), e.g.
//   PROBE_ARGS="8 2048 16 16 128 0;4 4096 32 8 128 1" bash tools/probe/probe.sh attention_bwd \
//     cuda/fa2/flash_bwd.cuh base 'q64=s/DkvConfig<128, 32>/DkvConfig<128, 64>/'
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "fa2/flash_bwd.cuh"
#include "fa2/flash_fwd_tiles.cuh"
#if defined(PROBE_BWD_SM90)  // attention_bwd_sm90.cu: the warpgroup-MMA kernels
#include "fa2/flash_bwd_sm90.cuh"
#endif
#include "probe_common.cuh"

using namespace baracuda;
using namespace baracuda::attention;
using bf16 = __nv_bfloat16;

// delta[(b * H + h) * S + i] = sum_d grad_out * out over one row (a warp per row).
__global__ void delta_rows(const bf16* go, const bf16* o, float* delta, int64_t rows, int S, int H, int D) {
  const int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;  // row (b, i, h) of [B, S, H, D]
  if (r >= rows) return;
  float acc = 0.f;
  for (int c = threadIdx.x % 32; c < D; c += 32) acc += __bfloat162float(go[r * D + c]) * __bfloat162float(o[r * D + c]);
  for (int m = 16; m; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  const int64_t h = r % H, i = (r / H) % S, b = r / (int64_t(H) * S);
  if (threadIdx.x % 32 == 0) delta[(b * H + h) * S + i] = acc;
}

struct Case {
  int B, S, H, HKV, D;
  bool causal;
  float softcap = 0.f;
  size_t nq() const { return size_t(B) * S * H * D; }
  size_t nk() const { return size_t(B) * S * HKV * D; }
};

struct Buffers {
  bf16 *q, *k, *v, *o, *go, *gq, *gk, *gv;
  float *lse, *delta;
};

static Buffers upload(const Case& c, const std::vector<bf16>& hq, const std::vector<bf16>& hk,
                      const std::vector<bf16>& hv, const std::vector<bf16>& hgo) {
  Buffers d;
  for (auto [p, n] : {std::pair{&d.q, c.nq()}, {&d.o, c.nq()}, {&d.go, c.nq()}, {&d.gq, c.nq()}, {&d.k, c.nk()},
                      {&d.v, c.nk()}, {&d.gk, c.nk()}, {&d.gv, c.nk()}})
    PROBE_CHECK(cudaMalloc(p, n * 2));
  PROBE_CHECK(cudaMalloc(&d.lse, size_t(c.B) * c.H * c.S * 4));
  PROBE_CHECK(cudaMalloc(&d.delta, size_t(c.B) * c.H * c.S * 4));
  PROBE_CHECK(cudaMemcpy(d.q, hq.data(), c.nq() * 2, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(d.k, hk.data(), c.nk() * 2, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(d.v, hv.data(), c.nk() * 2, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(d.go, hgo.data(), c.nq() * 2, cudaMemcpyHostToDevice));
  return d;
}

static void release(Buffers& d) {
  for (void* p : {(void*)d.q, (void*)d.k, (void*)d.v, (void*)d.o, (void*)d.go, (void*)d.gq, (void*)d.gk,
                  (void*)d.gv, (void*)d.lse, (void*)d.delta})
    PROBE_CHECK(cudaFree(p));
}

// Forward, delta, then the backward launch (returned for timing).
static auto prepare(const Case& c, Buffers& d, Geometry& g, Pointers& p) {
  g.dtype = DType::BFloat16;
  g.batch = c.B, g.sq = g.sk = c.S, g.hq = c.H, g.hkv = c.HKV, g.d = g.dv = c.D;
  g.scale = 1.0 / std::sqrt(double(c.D));
  g.window_right = c.causal ? 0 : -1;
  g.softcap = c.softcap;
  g.lse_batch = int64_t(c.H) * c.S, g.lse_head = c.S;
  g.tile_bm = 64, g.tile_bn = 64;
  const int64_t qb = int64_t(c.S) * c.H * c.D, qr = int64_t(c.H) * c.D, kb = int64_t(c.S) * c.HKV * c.D,
                kr = int64_t(c.HKV) * c.D;
  p.q = {d.q, qb, qr, c.D}, p.out = {d.o, qb, qr, c.D}, p.grad_out = {d.go, qb, qr, c.D}, p.grad_q = {d.gq, qb, qr, c.D};
  p.k = {d.k, kb, kr, c.D}, p.v = {d.v, kb, kr, c.D}, p.grad_k = {d.gk, kb, kr, c.D}, p.grad_v = {d.gv, kb, kr, c.D};
  p.lse = d.lse, p.delta = d.delta;
  flash::forward<bf16>(g, p, nullptr);
  const int64_t rows = int64_t(c.B) * c.S * c.H;
  delta_rows<<<unsigned((rows + 7) / 8), 256>>>(d.go, d.o, d.delta, rows, c.S, c.H, c.D);
  PROBE_CHECK(cudaGetLastError());
  PROBE_CHECK(cudaDeviceSynchronize());
  return [g, p] {
#if defined(PROBE_BWD_SM90)
    flash::backward_sm90<bf16>(g, p, nullptr);
#else
    flash::backward<bf16>(g, p, nullptr);
#endif
  };
}

static std::vector<bf16> random_bf16(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<bf16> h(n);
  for (auto& x : h) x = __float2bfloat16(nd(rng));
  return h;
}

// The small case against float64 on the host (head dim 128, or 64 too with PROBE_ARGS=check):
// P = softmax(scale q k^T) (causal: j <= i), dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO o)),
// dQ = scale dS K, dK = scale dS^T Q (summed over a group).
static void check_small(const probe::Setup&, int head_dim = 128) {
  const Case c{1, 150, 4, 2, head_dim, true};
  std::mt19937 rng(7);
  const auto hq = random_bf16(c.nq(), rng), hk = random_bf16(c.nk(), rng), hv = random_bf16(c.nk(), rng),
             hgo = random_bf16(c.nq(), rng);
  Buffers d = upload(c, hq, hk, hv, hgo);
  Geometry g;
  Pointers p;
  auto launch = prepare(c, d, g, p);
  launch();
  PROBE_CHECK(cudaDeviceSynchronize());
  const auto gq = probe::to_host<bf16>(d.gq, c.nq()), gk = probe::to_host<bf16>(d.gk, c.nk()),
             gv = probe::to_host<bf16>(d.gv, c.nk());
  const int S = c.S, H = c.H, HKV = c.HKV, D = c.D, G = H / HKV;
  const double scale = 1.0 / std::sqrt(double(D));
  auto f = [](bf16 x) { return double(__bfloat162float(x)); };
  std::vector<double> rq(c.nq(), 0), rk(c.nk(), 0), rv(c.nk(), 0);
  std::vector<double> P(S), dP(S), o(D);
  for (int h = 0; h < H; ++h) {
    const int kh = h / G;
    for (int i = 0; i < S; ++i) {
      const int keys = c.causal ? i + 1 : S;
      double mx = -INFINITY;
      for (int j = 0; j < keys; ++j) {
        double s = 0;
        for (int e = 0; e < D; ++e) s += f(hq[(size_t(i) * H + h) * D + e]) * f(hk[(size_t(j) * HKV + kh) * D + e]);
        P[j] = s * scale;
        mx = std::max(mx, P[j]);
      }
      double sum = 0;
      for (int j = 0; j < keys; ++j) sum += (P[j] = std::exp(P[j] - mx));
      for (int e = 0; e < D; ++e) o[e] = 0;
      for (int j = 0; j < keys; ++j) {
        P[j] /= sum;
        for (int e = 0; e < D; ++e) o[e] += P[j] * f(hv[(size_t(j) * HKV + kh) * D + e]);
      }
      double dl = 0;
      for (int e = 0; e < D; ++e) dl += f(hgo[(size_t(i) * H + h) * D + e]) * o[e];
      for (int j = 0; j < keys; ++j) {
        double s = 0;
        for (int e = 0; e < D; ++e) {
          const double go = f(hgo[(size_t(i) * H + h) * D + e]);
          s += go * f(hv[(size_t(j) * HKV + kh) * D + e]);
          rv[(size_t(j) * HKV + kh) * D + e] += P[j] * go;
        }
        dP[j] = P[j] * (s - dl);  // dS
        for (int e = 0; e < D; ++e) {
          rq[(size_t(i) * H + h) * D + e] += scale * dP[j] * f(hk[(size_t(j) * HKV + kh) * D + e]);
          rk[(size_t(j) * HKV + kh) * D + e] += scale * dP[j] * f(hq[(size_t(i) * H + h) * D + e]);
        }
      }
    }
  }
  auto err = [&](const std::vector<bf16>& got, const std::vector<double>& want) {
    double e = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double x = f(got[i]);
      e = std::isnan(x) ? INFINITY : std::max(e, std::fabs(x - want[i]));
    }
    return e;
  };
  std::printf("check b1 s150 h4/2 d%d causal vs float64: max err grad_q %.1e grad_k %.1e grad_v %.1e\n", D,
              err(gq, rq), err(gk, rk), err(gv, rv));
  release(d);
}

static void run_case(const Case& c, const probe::Setup& su) {
  std::mt19937 rng(1234);
  Buffers d = upload(c, random_bf16(c.nq(), rng), random_bf16(c.nk(), rng), random_bf16(c.nk(), rng),
                     random_bf16(c.nq(), rng));
  Geometry g;
  Pointers p;
  auto launch = prepare(c, d, g, p);
  PROBE_CHECK(cudaMemset(d.gq, 0xff, c.nq() * 2));
  PROBE_CHECK(cudaMemset(d.gk, 0xff, c.nk() * 2));
  PROBE_CHECK(cudaMemset(d.gv, 0xff, c.nk() * 2));
  launch();
  PROBE_CHECK(cudaDeviceSynchronize());
  uint64_t sum = probe::device_fnv(d.gq, c.nq() * 2);
  {
    const auto hk = probe::to_host<uint8_t>(d.gk, c.nk() * 2), hv = probe::to_host<uint8_t>(d.gv, c.nk() * 2);
    sum = probe::fnv(hv.data(), hv.size(), probe::fnv(hk.data(), hk.size(), sum));
  }
  const double us = probe::median_us(launch, su.flush, su.flush_bytes, 20);
  const double flops = 10.0 * c.B * c.H * double(c.S) * c.S * c.D / (c.causal ? 2 : 1);
  std::printf("b%d s%d h%d/%d d%d %-6s%s backward: %9.1f us %6.0f TFLOP/s  checksum %016llx\n", c.B, c.S, c.H,
              c.HKV, c.D, c.causal ? "causal" : "", c.softcap > 0 ? " softcap" : "", us, flops / us / 1e6,
              (unsigned long long)sum);
  release(d);
}

int main(int argc, char** argv) {
  const probe::Setup su = probe::setup();
  if (argc == 7 || argc == 8) {
    run_case({std::atoi(argv[1]), std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]),
              std::atoi(argv[6]) != 0, argc == 8 ? float(std::atof(argv[7])) : 0.f},
             su);
    return 0;
  }
  check_small(su);
  if (argc == 2 && std::string(argv[1]) == "check") {  // PROBE_ARGS=check: the float64 checks alone
    check_small(su, 64);
    return 0;
  }
  run_case({8, 2048, 16, 16, 128, false}, su);
  run_case({8, 2048, 16, 16, 128, true}, su);
  run_case({4, 4096, 32, 8, 128, false}, su);
  run_case({4, 4096, 32, 8, 128, true}, su);
  return 0;
}
