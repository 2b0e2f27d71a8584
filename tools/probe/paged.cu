// The paged-attention harness of tools/probe/probe.sh: the tensor-core decode kernel of
// cuda/paged_attention/paged_mma.cuh (a variant of that header, included) on the bench's decode rows
// (one query token, 32 / 8 or 16 / 4 heads, page size 16, pages shuffled: the layout knobs above
// env_on change that) over bf16 and fp8 e4m3 caches, with the split counts `select` gives them on an
// H200. Per case: microseconds (median of 30, L2 flushed), GB/s of the K / V bytes, % of a device
// copy, the largest error of 64 sampled rows against a float64 reference on the host (the splits
// merged on the host), and a checksum of the written bytes.
//   bash tools/probe/probe.sh paged cuda/paged_attention/paged_mma.cuh base 'name=sed expression' ...
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "paged_attention/paged_mma.cuh"
#include "probe_common.cuh"

using namespace baracuda;
using namespace baracuda::paged_attention;

struct Case {  // the cache type, head dim and key tile are run_case's template arguments
  const char* name;
  int batch, ctx, hq, hkv, splits;
};

// Operand values from a hash of (index, seed), written on the device and recomputed on the host for
// the reference: uniform in [-1, 1), rounded to the storage type the same way on both sides.
__host__ __device__ inline float hval(uint64_t i, uint32_t seed) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}
template <class S> __host__ __device__ inline S to_storage(float x) {
  if constexpr (std::is_same_v<S, __nv_bfloat16>) return __float2bfloat16(x);
  else return S(x);
}
template <class S> __global__ void fill(S* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = to_storage<S>(hval(i, seed));
}
template <class S> static double stored(size_t i, uint32_t seed) {
  const S v = to_storage<S>(hval(i, seed));
  if constexpr (std::is_same_v<S, __nv_bfloat16>) return double(__bfloat162float(v));
  else return double(float(v));
}

// PAGED_LENGTH_SWEEP=1 times 256-block rows of 16 to 128 tiles a block instead of the bench rows.
// PAGED_RAGGED=1 (environment) shortens each request by 0-60 keys, so the check covers partial tiles.
// The layout knobs (environment): PAGED_PAGE_SIZE (default 16; a power of two up to the context), PAGED_IN_ORDER=1
// (each request's pages consecutive in the pool instead of shuffled), PAGED_HEADS_FIRST=1. With all three
// (page size = context) a request's keys for one kv head are one contiguous span, as in an unpaged cache.
static bool env_on(const char* name) { return std::getenv(name) && std::getenv(name)[0] == '1'; }
static int page_size() { return std::getenv("PAGED_PAGE_SIZE") ? std::atoi(std::getenv("PAGED_PAGE_SIZE")) : 16; }

template <class KV, int D, int TILE>
static void run_case(const Case& c, const probe::Setup& s, std::mt19937& rng) {
  using T = __nv_bfloat16;
  const int ps = page_size(), max_pages = c.ctx / ps, group = c.hq / c.hkv;
  const int64_t pages = int64_t(c.batch) * max_pages;
  const size_t q_elems = size_t(c.batch) * c.hq * D, cache_elems = size_t(pages) * ps * c.hkv * D;
  std::vector<int32_t> table(pages), lens(c.batch, c.ctx);
  if (env_on("PAGED_RAGGED"))  // lengths ending inside a tile (the last tile partly absent)
    for (int b = 0; b < c.batch; ++b) lens[b] = c.ctx - (b * 37) % 61;
  std::iota(table.begin(), table.end(), 0);
  if (!env_on("PAGED_IN_ORDER")) std::shuffle(table.begin(), table.end(), rng);

  void *dq, *dk, *dv, *dout, *dtable, *dlens, *dws = nullptr;
  PROBE_CHECK(cudaMalloc(&dq, q_elems * 2));
  PROBE_CHECK(cudaMalloc(&dout, q_elems * 2));
  PROBE_CHECK(cudaMalloc(&dk, cache_elems * sizeof(KV)));
  PROBE_CHECK(cudaMalloc(&dv, cache_elems * sizeof(KV)));
  PROBE_CHECK(cudaMalloc(&dtable, pages * 4));
  PROBE_CHECK(cudaMalloc(&dlens, c.batch * 4));
  fill<T><<<1024, 256>>>(static_cast<T*>(dq), q_elems, 1);
  fill<KV><<<4096, 256>>>(static_cast<KV*>(dk), cache_elems, 2);
  fill<KV><<<4096, 256>>>(static_cast<KV*>(dv), cache_elems, 3);
  PROBE_CHECK(cudaGetLastError());
  PROBE_CHECK(cudaMemcpy(dtable, table.data(), pages * 4, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(dlens, lens.data(), c.batch * 4, cudaMemcpyHostToDevice));

  Geometry g;
  g.dtype = DType::BFloat16;
  g.cache_dtype = std::is_same_v<KV, T> ? DType::BFloat16 : DType::Float8E4M3;
  g.d = D;
  g.batch = c.batch;
  g.sq = 1;
  g.hq = c.hq;
  g.hkv = c.hkv;
  g.group = group;
  g.row_groups = (group + kRowsPerBlock - 1) / kRowsPerBlock;
  g.pages = pages;
  g.page_size = ps;
  g.max_pages = max_pages;
  g.scale = float(1.0 / std::sqrt(double(D)));
  g.tile_keys = TILE;
  const int64_t tiles = (c.ctx + kKeysPerTile - 1) / kKeysPerTile, mult = TILE / kKeysPerTile;
  const int64_t per_split = ((tiles + c.splits - 1) / c.splits + mult - 1) / mult * mult;
  g.splits = int((tiles + per_split - 1) / per_split);
  g.split_keys = per_split * kKeysPerTile;
  g.q_batch = g.out_batch = int64_t(c.hq) * D;
  g.q_token = g.out_token = int64_t(c.hq) * D;
  g.q_head = g.out_head = D;
  // the caches' layout: [pages, page_size, Hkv, D], or heads first ([pages, Hkv, page_size, D]) when the
  // environment has PAGED_HEADS_FIRST=1
  const bool heads_first = env_on("PAGED_HEADS_FIRST");
  g.k_page = g.v_page = int64_t(ps) * c.hkv * D;
  g.k_slot = g.v_slot = heads_first ? D : int64_t(c.hkv) * D;
  g.k_head = g.v_head = heads_first ? int64_t(ps) * D : D;
  g.table_row = max_pages;
  g.table_col = 1;
  g.seq_lens_stride = 1;
  Pointers p;
  p.q = dq;
  p.k_cache = dk;
  p.v_cache = dv;
  p.block_table = static_cast<const int32_t*>(dtable);
  p.seq_lens = static_cast<const int32_t*>(dlens);
  p.out = dout;
  const int64_t ws = workspace_bytes(g);
  if (ws) {
    PROBE_CHECK(cudaMalloc(&dws, ws));
    p.partial_out = static_cast<float*>(dws);
    p.partial_lse = reinterpret_cast<float*>(static_cast<char*>(dws) + partial_lse_offset(g));
  }
  auto launch = [&] { launch_kernel<T, KV, D, false, TILE>(g, p, nullptr); };
  launch();
  PROBE_CHECK(cudaDeviceSynchronize());

  // The written bytes (out, or the split partials), and 64 sampled rows against float64.
  const size_t rows_total = size_t(c.batch) * c.hq;
  std::vector<uint8_t> bytes;
  std::vector<float> po, pl;
  std::vector<T> out;
  auto append = [&](const void* d, size_t n) {
    const auto* b = static_cast<const uint8_t*>(d);
    bytes.insert(bytes.end(), b, b + n);
  };
  if (g.splits > 1) {
    po = probe::to_host<float>(p.partial_out, size_t(g.splits) * rows_total * D);
    pl = probe::to_host<float>(p.partial_lse, size_t(g.splits) * rows_total);
    append(po.data(), po.size() * 4);
    append(pl.data(), pl.size() * 4);
  } else {
    out = probe::to_host<T>(dout, q_elems);
    append(out.data(), out.size() * 2);
  }
  auto kv_at = [&](uint32_t seed, int b, int j, int h, int e) {
    const size_t page = size_t(table[size_t(b) * max_pages + j / ps]);
    const size_t i = heads_first ? ((page * c.hkv + h) * ps + j % ps) * D + e : (page * ps + j % ps) * c.hkv * D + size_t(h) * D + e;
    return stored<KV>(i, seed);
  };
  double max_err = 0;
  std::uniform_int_distribution<int> pick_b(0, c.batch - 1), pick_h(0, c.hq - 1);
  for (int s = 0; s < 64; ++s) {
    const int b = pick_b(rng), h = pick_h(rng), kh = h / group;
    std::vector<double> sc(lens[b]), o(D, 0.0);
    double m = -1e300, l = 0;
    for (int j = 0; j < lens[b]; ++j) {
      double acc = 0;
      for (int e = 0; e < D; ++e) acc += stored<T>((size_t(b) * c.hq + h) * D + e, 1) * kv_at(2, b, j, kh, e);
      sc[j] = acc * g.scale;
      m = std::max(m, sc[j]);
    }
    for (int j = 0; j < lens[b]; ++j) {
      const double w = std::exp(sc[j] - m);
      l += w;
      for (int e = 0; e < D; ++e) o[e] += w * kv_at(3, b, j, kh, e);
    }
    const size_t row = size_t(b) * c.hq + h;  // sq = 1: (b * sq + 0) * hq + h
    for (int e = 0; e < D; ++e) {
      double got;
      if (g.splits > 1) {  // merge the normalised partials by their log2-domain lse
        double M = -1e300, L = 0, acc = 0;
        for (int sp = 0; sp < g.splits; ++sp) M = std::max(M, double(pl[sp * rows_total + row]));
        for (int sp = 0; sp < g.splits; ++sp) {
          const double w = std::exp2(double(pl[sp * rows_total + row]) - M);
          L += w;
          acc += w * po[(sp * rows_total + row) * D + e];
        }
        got = acc / L;
      } else {
        got = __bfloat162float(out[row * D + e]);
      }
      max_err = std::max(max_err, std::abs(got - o[e] / l));
    }
  }

  const double us = probe::median_us(launch, s.flush, s.flush_bytes, 30);
  const double kv_bytes = 2.0 * double(c.batch) * c.ctx * c.hkv * D * sizeof(KV);
  std::printf("%-34s s%-3d t%-3d %8.1f us %6.0f GB/s %5.1f%% of copy  max err %.1e  checksum %016llx\n", c.name,
              g.splits, TILE, us, kv_bytes / us / 1e3, 100.0 * kv_bytes / us / 1e3 / s.copy_gbs, max_err,
              (unsigned long long)probe::fnv(bytes.data(), bytes.size()));
  for (void* d : {dq, dk, dv, dout, dtable, dlens}) PROBE_CHECK(cudaFree(d));
  if (dws) PROBE_CHECK(cudaFree(dws));
}

int main() {
  const probe::Setup s = probe::setup();
  std::mt19937 rng(11);
  std::printf("page size %d, pages %s, caches %s\n", page_size(), env_on("PAGED_IN_ORDER") ? "in order" : "shuffled",
              env_on("PAGED_HEADS_FIRST") ? "heads first: [pages, Hkv, page_size, D]" : "[pages, page_size, Hkv, D]");
  // the bench's rows, with the splits select gives them on an H200 (docs/benchmarks.md, paged decode)
  if (env_on("PAGED_SPLIT_SWEEP")) {  // the rows whose split count select's rule is least sure of
    using bf16 = __nv_bfloat16;
    for (int sp : {1, 2, 3, 4}) run_case<bf16, 128, 64>({"b16 ctx4096 h64/8 d128 bf16", 16, 4096, 64, 8, sp}, s, rng);
    for (int sp : {1, 2, 3, 4}) run_case<bf16, 128, 64>({"b128 ctx1024 h32/8 d128 bf16", 128, 1024, 32, 8, sp}, s, rng);
    for (int sp : {8, 12, 16}) run_case<bf16, 128, 64>({"b4 ctx32768 h32/8 d128 bf16", 4, 32768, 32, 8, sp}, s, rng);
    for (int sp : {1, 2}) run_case<bf16, 64, 128>({"b64 ctx2048 h16/4 d64 bf16", 64, 2048, 16, 4, sp}, s, rng);
    return 0;
  }
  if (env_on("PAGED_LENGTH_SWEEP")) {  // 256 blocks (all resident) of 16..128 tiles: the fixed cost per block
    using bf16 = __nv_bfloat16;
    for (int ctx : {1024, 2048, 4096, 8192}) {
      const std::string name = "b32 ctx" + std::to_string(ctx) + " h32/8 d128 bf16";
      run_case<bf16, 128, 64>({name.c_str(), 32, ctx, 32, 8, 1}, s, rng);
    }
    // 32 tiles a block four ways: group 4 or 8, unsplit or in two splits (b16 ctx4096 h64/8: the bench row)
    run_case<bf16, 128, 64>({"b32 ctx2048 h64/8 d128 bf16", 32, 2048, 64, 8, 1}, s, rng);
    run_case<bf16, 128, 64>({"b16 ctx4096 h64/8 d128 bf16", 16, 4096, 64, 8, 2}, s, rng);
    run_case<bf16, 128, 64>({"b16 ctx4096 h32/8 d128 bf16", 16, 4096, 32, 8, 2}, s, rng);
    return 0;
  }
  run_case<__nv_bfloat16, 128, 64>({"b32 ctx8192 h32/8 d128 bf16", 32, 8192, 32, 8, 1}, s, rng);
  run_case<__nv_bfloat16, 128, 64>({"b64 ctx8192 h32/8 d128 bf16", 64, 8192, 32, 8, 4}, s, rng);
  run_case<__nv_bfloat16, 64, 64>({"b64 ctx2048 h16/4 d64 bf16", 64, 2048, 16, 4, 1}, s, rng);
  run_case<__nv_bfloat16, 128, 64>({"b16 ctx4096 h64/8 d128 bf16", 16, 4096, 64, 8, 2}, s, rng);
  run_case<__nv_bfloat16, 128, 64>({"b128 ctx1024 h32/8 d128 bf16", 128, 1024, 32, 8, 1}, s, rng);
  // 16-bit caches on 128-key tiles: at d64 a tile of d128's 64-key bytes (two stages of 64 KB, three
  // blocks per SM; select's choice since session 52). (At d128, one block per SM: 72% of copy, session 51.)
  run_case<__nv_bfloat16, 64, 128>({"b64 ctx2048 h16/4 d64 bf16", 64, 2048, 16, 4, 1}, s, rng);
  run_case<kernels::e4m3, 128, 128>({"b32 ctx8192 h32/8 d128 fp8", 32, 8192, 32, 8, 1}, s, rng);
  run_case<kernels::e4m3, 128, 128>({"b64 ctx8192 h32/8 d128 fp8", 64, 8192, 32, 8, 4}, s, rng);
  run_case<kernels::e4m3, 128, 128>({"b4 ctx32768 h32/8 d128 fp8", 4, 32768, 32, 8, 8}, s, rng);
  run_case<kernels::e4m3, 64, 128>({"b64 ctx2048 h16/4 d64 fp8", 64, 2048, 16, 4, 1}, s, rng);
  return 0;
}
