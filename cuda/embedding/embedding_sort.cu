// The deterministic embedding backward's sort: indices -> (key, flat position) pairs, stably
// sorted by key (common/radix_sort.h) over the bits V needs, and the workspace layout.
#include <string>

#include "common/cuda_check.h"
#include "common/radix_sort.h"
#include "embedding/embedding_internal.h"

namespace baracuda::embedding {

namespace {

constexpr int64_t kAlign = 256;
constexpr int64_t kMaxChunks = 2048;

int64_t round_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

__global__ void keys_kernel(const Params p, uint32_t* keys, int32_t* pos) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= p.n) return;
  int64_t index_at, row_at;
  locate(p.map, r, index_at, row_at);
  const int64_t idx = load_index(p, index_at);
  const bool kept = idx >= 0 && idx < p.num_embeddings && idx != p.padding_idx;
  keys[r] = kept ? uint32_t(idx) : uint32_t(p.num_embeddings);
  pos[r] = int32_t(r);
}

}  // namespace

Layout layout_of(const Params& p) {
  Layout L;
  L.chunk = 64;
  while ((p.n + L.chunk - 1) / L.chunk > kMaxChunks) L.chunk *= 2;
  L.chunks = (p.n + L.chunk - 1) / L.chunk;
  const int64_t acc_bytes = p.dtype == DType::Float64 ? 8 : 4;
  int64_t at = 0;
  for (int64_t* f : {&L.keys_in, &L.pos_in, &L.keys_out, &L.pos_out}) {
    *f = at;
    at += round_up(p.n * 4);
  }
  L.partial = at;
  at += round_up(L.chunks * p.dim * acc_bytes);
  L.cub = at;
  L.cub_bytes = radix_sort::scratch_bytes_or_estimate(p.n, radix_sort::bits_for(p.num_embeddings), L.cub_known);
  L.total = at + round_up(L.cub_bytes);
  return L;
}

Workspace backward_workspace(const Params& p) {
  if (!p.deterministic || p.n == 0 || p.dim == 0 || p.num_embeddings == 0) return {0, 0, true};
  const Layout L = layout_of(p);
  return {L.total, L.chunk, L.cub_known};
}

void sort_indices(const Params& p, const Layout& L, char* ws, int64_t workspace_size, cudaStream_t st) {
  if (!L.cub_known) throw CudaError("embedding backward: CUB's radix sort could not size its scratch on this device");
  if (ws == nullptr || workspace_size < L.total)
    throw InvalidArgument("embedding_backward: the workspace has " + std::to_string(workspace_size) +
                          " bytes; the plan needs " + std::to_string(L.total));
  auto* keys_in = reinterpret_cast<uint32_t*>(ws + L.keys_in);
  auto* pos_in = reinterpret_cast<int32_t*>(ws + L.pos_in);
  keys_kernel<<<unsigned((p.n + 255) / 256), 256, 0, st>>>(p, keys_in, pos_in);
  check_launch("embedding keys_kernel");
  radix_sort::sort_pairs(keys_in, reinterpret_cast<uint32_t*>(ws + L.keys_out), pos_in,
                         reinterpret_cast<int32_t*>(ws + L.pos_out), p.n, radix_sort::bits_for(p.num_embeddings),
                         ws + L.cub, L.cub_bytes, st, "embedding backward");
}

}  // namespace baracuda::embedding
