// The embedding harness of tools/probe/probe.sh: the forward gather of cuda/embedding/embedding.cu
// (a variant of that file, or of cuda/common/row_copy.cuh, the row copy it uses) on the bench's rows:
// uniform random int64 indices into a [V, H] table, the rows written contiguous. Per case:
// microseconds (median of 50, L2 flushed), GB/s (the rows read and written once), % of a device
// copy, whether every row matches its table row, and a checksum of the output.
//   bash tools/probe/probe.sh embedding cuda/common/row_copy.cuh base \
//     'f8=s/constexpr int kInFlight = 4;/constexpr int kInFlight = 8;/'
#include <cuda_bf16.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "embedding/embedding_launch.h"
#include "probe_common.cuh"

using namespace baracuda;

static void run_case(int64_t tokens, int64_t vocab, int64_t hidden, int elem_bytes, const probe::Setup& s,
                     std::mt19937_64& rng) {
  const size_t table_bytes = size_t(vocab) * hidden * elem_bytes, out_bytes = size_t(tokens) * hidden * elem_bytes;
  std::vector<int64_t> idx(tokens);
  for (auto& i : idx) i = int64_t(rng() % uint64_t(vocab));
  void *table, *out, *dix;
  PROBE_CHECK(cudaMalloc(&table, table_bytes));
  PROBE_CHECK(cudaMalloc(&out, out_bytes));
  PROBE_CHECK(cudaMalloc(&dix, tokens * 8));
  {
    std::vector<uint8_t> h(table_bytes);
    for (size_t i = 0; i < table_bytes; i += 8) {
      const uint64_t r = rng() & 0x3f3f3f3f3f3f3f3full;  // finite in bf16 / f32
      std::memcpy(&h[i], &r, std::min<size_t>(8, table_bytes - i));
    }
    PROBE_CHECK(cudaMemcpy(table, h.data(), table_bytes, cudaMemcpyHostToDevice));
  }
  PROBE_CHECK(cudaMemcpy(dix, idx.data(), tokens * 8, cudaMemcpyHostToDevice));

  embedding::Params p;
  p.dtype = elem_bytes == 2 ? DType::BFloat16 : DType::Float32;
  p.elem_bytes = elem_bytes;
  p.num_embeddings = vocab;
  p.dim = hidden;
  p.table_row_stride = hidden;
  p.table_in = table;
  p.rows_out = out;
  p.indices = dix;
  p.n = tokens;
  p.map.rank = 1;
  p.map.shape[0] = tokens;
  p.map.index_stride[0] = 1;
  p.map.row_stride[0] = hidden;
  p.vec_bytes = (hidden * elem_bytes) % 16 == 0 ? 16 : (hidden * elem_bytes) % 8 == 0 ? 8 : 4;
  auto launch = [&] { embedding::forward(p, nullptr); };
  PROBE_CHECK(cudaMemset(out, 0xff, out_bytes));
  launch();
  PROBE_CHECK(cudaDeviceSynchronize());
  const std::vector<uint8_t> got = probe::to_host<uint8_t>(out, out_bytes), tab = probe::to_host<uint8_t>(table, table_bytes);
  const size_t row = size_t(hidden) * elem_bytes;
  bool ok = true;
  for (int64_t t = 0; t < tokens && ok; ++t) ok = std::memcmp(&got[t * row], &tab[idx[t] * row], row) == 0;
  const double us = probe::median_us(launch, s.flush, s.flush_bytes);
  const double bytes = 2.0 * out_bytes;
  std::printf("fwd t%-6lld V%-7lld H%-5lld %s: %8.1f us %6.0f GB/s %5.1f%% of copy  %s  checksum %016llx\n",
              (long long)tokens, (long long)vocab, (long long)hidden, elem_bytes == 2 ? "bf16" : "f32 ", us,
              bytes / us / 1e3, 100.0 * bytes / us / 1e3 / s.copy_gbs, ok ? "rows ok" : "ROWS WRONG",
              (unsigned long long)probe::fnv(got.data(), got.size()));
  for (void* d : {table, out, dix}) PROBE_CHECK(cudaFree(d));
}

int main() {
  const probe::Setup s = probe::setup();
  std::mt19937_64 rng(5);
  // the forward rows of bench/bench_embedding.py
  run_case(16384, 128256, 4096, 2, s, rng);
  run_case(8192, 32000, 4096, 2, s, rng);
  run_case(16384, 50257, 768, 4, s, rng);
  run_case(64, 128256, 4096, 2, s, rng);
  return 0;
}
