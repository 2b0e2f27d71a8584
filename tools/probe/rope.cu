// The RoPE harness of tools/probe/probe.sh: cuda/rope/rope.cu's kernel (a variant of that file,
// linked in) on one fused qkv projection, bf16, in place, theta angles, int64 positions; by default
// the Llama-3-8B prefill (argv: tokens, q heads, kv heads, head dim). Per case (RoPE alone, and with
// the paged-cache append; 2 to 16 tokens per block): microseconds (median of 50, L2 flushed), GB/s,
// % of a device copy, and a checksum of every written byte.
//   PROBE_ARGS="8192 32 8 128;16384 16 4 64" bash tools/probe/probe.sh rope cuda/rope/rope.cu base ...
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "probe_common.cuh"
#include "rope/rope_launch.h"

using namespace baracuda;

int main(int argc, char** argv) {
  // tokens, q heads, kv heads, head dim (default the Llama-3-8B prefill)
  const int T = argc > 1 ? std::atoi(argv[1]) : 8192, hq = argc > 2 ? std::atoi(argv[2]) : 32,
            hkv = argc > 3 ? std::atoi(argv[3]) : 8, d = argc > 4 ? std::atoi(argv[4]) : 128;
  const int ps = 16, pages = T / ps + 64;
  const int heads = hq + 2 * hkv;
  const size_t qkv_elems = size_t(T) * heads * d, cache_elems = size_t(pages) * ps * hkv * d;
  std::mt19937 rng(7);
  std::vector<uint16_t> hqkv(qkv_elems);
  std::uniform_int_distribution<int> mant(0, 0x7f), expo(0x3c, 0x40);
  for (auto& v : hqkv) v = uint16_t((rng() & 1) << 15 | expo(rng) << 7 | mant(rng));  // bf16 in [2^-3, 4)
  std::vector<int64_t> pos(T), slots(size_t(pages) * ps);
  for (int t = 0; t < T; ++t) pos[t] = t;
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(T);

  const probe::Setup su = probe::setup();
  void *qkv0, *qkv, *kc, *vc, *dpos, *dslots;
  PROBE_CHECK(cudaMalloc(&qkv0, qkv_elems * 2));
  PROBE_CHECK(cudaMalloc(&qkv, qkv_elems * 2));
  PROBE_CHECK(cudaMalloc(&kc, cache_elems * 2));
  PROBE_CHECK(cudaMalloc(&vc, cache_elems * 2));
  PROBE_CHECK(cudaMalloc(&dpos, T * 8));
  PROBE_CHECK(cudaMalloc(&dslots, T * 8));
  PROBE_CHECK(cudaMemcpy(qkv0, hqkv.data(), qkv_elems * 2, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(dpos, pos.data(), T * 8, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(dslots, slots.data(), T * 8, cudaMemcpyHostToDevice));


  rope::Geometry g;
  g.dtype = DType::BFloat16;
  g.batch = 1;
  g.seq = T;
  g.head_dim = g.rotary_dim = d;
  for (int i = 0; i < d / 2; ++i) g.inv_freq[i] = float(std::pow(10000.0, -2.0 * i / d));
  g.positions = true;
  g.positions_dtype = DType::Int64;
  g.pos_seq = 1;
  g.wide = g.v_wide = true;
  g.slot_seq = 1;
  g.pages = pages;
  g.page_size = ps;
  g.kv_dtype = DType::BFloat16;

  auto operand = [&](int head0, int n) {
    rope::Operand o;
    o.in = o.out = static_cast<uint16_t*>(qkv) + size_t(head0) * d;
    o.in_seq = o.out_seq = int64_t(heads) * d;
    o.in_head = o.out_head = d;
    o.heads = n;
    return o;
  };
  auto paged = [&](rope::Operand& o, void* c) {
    o.paged = c;
    o.paged_page = int64_t(ps) * hkv * d;
    o.paged_slot = int64_t(hkv) * d;
    o.paged_head = d;
  };
  for (int append = 0; append < 2; ++append) {
    for (int tpb : {2, 4, 6, 8, 16}) {
      rope::Pointers p;
      p.x[0] = operand(0, hq);
      p.x[1] = operand(hq, hkv);
      p.count = 2;
      p.positions = dpos;
      if (append) {
        paged(p.x[1], kc);
        p.x[2] = operand(hq + hkv, hkv);
        paged(p.x[2], vc);
        p.x[2].copy_only = true;
        p.x[2].copy_dim = d;
        p.slots = dslots;
        p.count = 3;
      }
      g.tokens_per_block = tpb;
      PROBE_CHECK(cudaMemcpy(qkv, qkv0, qkv_elems * 2, cudaMemcpyDeviceToDevice));
      PROBE_CHECK(cudaMemset(kc, 0, cache_elems * 2));
      PROBE_CHECK(cudaMemset(vc, 0, cache_elems * 2));
      rope::rope(g, p, nullptr);  // once on fresh data: the checksum
      PROBE_CHECK(cudaDeviceSynchronize());
      const uint64_t sum = probe::device_fnv(qkv, qkv_elems * 2) ^ (append ? probe::device_fnv(kc, cache_elems * 2) * 3 ^
                                                                     probe::device_fnv(vc, cache_elems * 2) * 5
                                                                   : 0);
      // in place: later launches rotate the rotated values again (same traffic)
      const double us = probe::median_us([&] { rope::rope(g, p, nullptr); }, su.flush, su.flush_bytes);
      const double bytes = double(T) * (hq + hkv) * d * 2 * 2 + (append ? double(T) * hkv * d * 2 * 3 : 0);
      std::printf("t%d h%d/%d d%d %-12s tpb %2d: %8.1f us  %6.0f GB/s  %5.1f%% of copy (%0.f GB/s)  checksum %016llx\n",
                  T, hq, hkv, d, append ? "rope+append" : "rope", tpb, us, bytes / us / 1e3, 100.0 * bytes / us / 1e3 / su.copy_gbs,
                  su.copy_gbs, (unsigned long long)sum);
    }
  }
  return 0;
}
