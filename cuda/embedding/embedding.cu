// Embedding kernels. Forward: a dtype-blind row copy (tpr threads per row, W-byte accesses, four in
// flight per thread). Backward, deterministic: the sorted (key, position) list (embedding_sort.cu) is
// cut into fixed chunks; a block per (chunk, column tile) sums each run of equal keys inside its
// chunk in list order and writes the row, or (a run that crosses the chunk's end) leaves the sum as
// the chunk's partial; a second kernel adds a crossing run's partials chunk by chunk and its
// closing rows. Same list, same chunks, same order: the same bits every run. Backward, atomic: a
// scatter-add per row.
#include <algorithm>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/packed_vec.cuh"
#include "common/row_copy.cuh"
#include "embedding/embedding_internal.h"

namespace baracuda::embedding {

namespace {

using kernels::Pack;
using kernels::WordOf;
using kernels::TypeTag;
using kernels::from_compute;
using kernels::to_compute;

template <class Word> __device__ __forceinline__ Word nan_word(uint64_t bits) {
  const unsigned lo = unsigned(bits), hi = unsigned(bits >> 32);
  if constexpr (sizeof(Word) == 16) return make_uint4(lo, hi, lo, hi);
  else if constexpr (sizeof(Word) == 8) return make_uint2(lo, hi);
  else return Word(lo);
}

// A thread group's row (kernels::row_lane), its index and the element offset of its row of out /
// grad_out; row >= p.n past the end (idx and row_at unset).
struct RowTask {
  int tpr, lane;
  int64_t row, idx, row_at;
};
__device__ __forceinline__ RowTask row_task(const Params& p, int tpr_log2) {
  const kernels::RowLane rl = kernels::row_lane(tpr_log2);
  RowTask t;
  t.tpr = rl.tpr;
  t.lane = rl.lane;
  t.row = rl.row;
  if (t.row < p.n) {
    int64_t index_at;
    locate(p.map, t.row, index_at, t.row_at);
    t.idx = load_index(p, index_at);
  }
  return t;
}

// ---- forward ---------------------------------------------------------------------------------------
template <int W> __global__ void __launch_bounds__(256) gather_kernel(const Params p, int tpr_log2, uint64_t nan_bits) {
  using Word = typename WordOf<W>::type;
  const RowTask t = row_task(p, tpr_log2);
  if (t.row >= p.n) return;
  const int tpr = t.tpr, lane = t.lane;
  const int64_t idx = t.idx, row_at = t.row_at;
  const int64_t nvec = p.dim * p.elem_bytes / W;
  Word* __restrict__ dst = reinterpret_cast<Word*>(static_cast<char*>(p.rows_out) + row_at * p.elem_bytes);
  if (idx < 0 || idx >= p.num_embeddings) {
    const Word nan = nan_word<Word>(nan_bits);
    for (int64_t v = lane; v < nvec; v += tpr) dst[v] = nan;
    return;
  }
  kernels::copy_words<W>(dst, static_cast<const char*>(p.table_in) + idx * p.table_row_stride * p.elem_bytes, nvec,
                         lane, tpr);
}

// ---- backward --------------------------------------------------------------------------------------
template <class T> using acc_t = kernels::compute_t<T>;  // float, or double for double

// acc += rows[at[k] + col .. + VEC) for k in [0, count), in k order (loads four rows ahead).
template <class T, int VEC, class Offset>
__device__ __forceinline__ void add_rows(const T* __restrict__ rows, Offset&& row_at, int64_t count, int64_t col,
                                         acc_t<T> (&acc)[VEC]) {
  using P = Pack<T, VEC>;
  int64_t k = 0;
  for (; k + 4 <= count; k += 4) {
    P v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = *reinterpret_cast<const P*>(rows + row_at(k + u) + col);
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc[i] += to_compute(v[u].v[i]);
  }
  for (; k < count; ++k) {
    const P v = *reinterpret_cast<const P*>(rows + row_at(k) + col);
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[i] += to_compute(v.v[i]);
  }
}

template <class T, int VEC>
__device__ __forceinline__ void write_row(const Params& p, int64_t key, int64_t col, const acc_t<T> (&acc)[VEC],
                                          int64_t count) {
  const acc_t<T> scale = p.scale_grad_by_freq ? acc_t<T>(1) / acc_t<T>(count) : acc_t<T>(1);
  T* dst = static_cast<T*>(p.table_out) + key * p.table_row_stride + col;
  Pack<T, VEC> out;
#pragma unroll
  for (int i = 0; i < VEC; ++i) out.v[i] = from_compute<T>(p.scale_grad_by_freq ? acc[i] * scale : acc[i]);
  *reinterpret_cast<Pack<T, VEC>*>(dst) = out;
}

struct Sorted {
  const uint32_t* keys;
  const int32_t* pos;
  int64_t chunk;
};

template <class T, int VEC>
__global__ void __launch_bounds__(256) chunk_sums_kernel(const Params p, const Sorted s, acc_t<T>* partial) {
  const int64_t c = blockIdx.x, start = c * s.chunk, len = min(s.chunk, p.n - start);
  const int64_t col = (int64_t(blockIdx.y) * blockDim.x + threadIdx.x) * VEC;
  if (col >= p.dim) return;
  const uint32_t V = uint32_t(p.num_embeddings);
  const uint32_t* keys = s.keys + start;
  const uint32_t prev = start > 0 ? s.keys[start - 1] : ~0u;
  const uint32_t next = start + len < p.n ? s.keys[start + len] : ~0u;
  const T* rows = static_cast<const T*>(p.rows_in);
  auto row_at = [&](int64_t k) {
    int64_t index_at, at;
    locate(p.map, s.pos[start + k], index_at, at);
    return at;
  };
  for (int64_t j = 0; j < len;) {
    const uint32_t key = keys[j];
    if (key >= V) break;  // padding and out-of-range indices sort last
    int64_t e = j + 1;
    while (e < len && keys[e] == key) ++e;
    const bool continues = j == 0 && prev == key, open = e == len && next == key;
    if (!continues || open) {
      acc_t<T> acc[VEC] = {};
      add_rows<T, VEC>(rows, [&](int64_t k) { return row_at(j + k); }, e - j, col, acc);
      if (open) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) partial[c * p.dim + col + i] = acc[i];
      } else {
        write_row<T, VEC>(p, key, col, acc, e - j);
      }
    }
    j = e;
  }
}

// A run of equal keys that starts in chunk c and crosses its end: its partial, the partials of the
// chunks it covers whole, then its rows in the chunk where it closes.
template <class T, int VEC>
__global__ void __launch_bounds__(256) span_sums_kernel(const Params p, const Sorted s, const acc_t<T>* partial) {
  const int64_t c = blockIdx.x, start = c * s.chunk, end = min(start + s.chunk, p.n);
  const int64_t col = (int64_t(blockIdx.y) * blockDim.x + threadIdx.x) * VEC;
  if (end >= p.n || col >= p.dim) return;
  const uint32_t key = s.keys[end - 1];
  if (key >= uint32_t(p.num_embeddings) || s.keys[end] != key) return;
  if (start > 0 && s.keys[start - 1] == key) return;  // the run started in an earlier chunk: not ours
  int64_t first = end - 1;
  while (first > start && s.keys[first - 1] == key) --first;
  acc_t<T> acc[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) acc[i] = partial[c * p.dim + col + i];
  int64_t count = end - first;
  for (int64_t cc = c + 1;; ++cc) {
    const int64_t cs = cc * s.chunk, ce = min(cs + s.chunk, p.n);
    if (ce < p.n && s.keys[ce] == key) {  // covered whole
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc[i] += partial[cc * p.dim + col + i];
      count += ce - cs;
      continue;
    }
    int64_t e = cs;
    while (e < ce && s.keys[e] == key) ++e;
    add_rows<T, VEC>(static_cast<const T*>(p.rows_in),
                     [&](int64_t k) {
                       int64_t index_at, at;
                       locate(p.map, s.pos[cs + k], index_at, at);
                       return at;
                     },
                     e - cs, col, acc);
    count += e - cs;
    break;
  }
  write_row<T, VEC>(p, key, col, acc, count);
}

template <class T> __device__ __forceinline__ void atomic_add(T* dst, float v) {
  if constexpr (std::is_same_v<T, kernels::f16>) atomicAdd(dst, __float2half_rn(v));
  else atomicAdd(dst, __float2bfloat16_rn(v));
}

template <class T, int VEC> __global__ void __launch_bounds__(256) scatter_add_kernel(const Params p, int tpr_log2) {
  const RowTask t = row_task(p, tpr_log2);
  if (t.row >= p.n) return;
  const int tpr = t.tpr, lane = t.lane;
  const int64_t idx = t.idx, row_at = t.row_at;
  if (idx < 0 || idx >= p.num_embeddings || idx == p.padding_idx) return;
  const T* src = static_cast<const T*>(p.rows_in) + row_at;
  T* dst = static_cast<T*>(p.table_out) + idx * p.table_row_stride;
  for (int64_t col = int64_t(lane) * VEC; col < p.dim; col += int64_t(tpr) * VEC) {
    const Pack<T, VEC> g = *reinterpret_cast<const Pack<T, VEC>*>(src + col);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
#pragma unroll
      for (int i = 0; i < VEC; ++i) atomicAdd(dst + col + i, g.v[i]);
    } else if constexpr (VEC % 2 == 0) {
      using T2 = std::conditional_t<std::is_same_v<T, kernels::f16>, __half2, __nv_bfloat162>;
#pragma unroll
      for (int i = 0; i < VEC; i += 2) atomicAdd(reinterpret_cast<T2*>(dst + col + i), T2{g.v[i], g.v[i + 1]});
    } else {
#pragma unroll
      for (int i = 0; i < VEC; ++i) atomic_add(dst + col + i, to_compute(g.v[i]));
    }
  }
}

}  // namespace

void forward(const Params& p, void* stream) {
  if (p.n == 0 || p.dim == 0) return;
  auto st = static_cast<cudaStream_t>(stream);
  const int w = std::max(p.vec_bytes, 2);
  const int tl = kernels::row_tpr_log2(p.dim * p.elem_bytes / w, p.n);
  const int64_t rows_per_block = 256 >> tl;
  const dim3 grid(unsigned((p.n + rows_per_block - 1) / rows_per_block));
  uint64_t nan = 0;
  switch (p.dtype) {
    case DType::Float64: nan = 0x7ff8000000000000ull; break;
    case DType::Float32: nan = 0x7fc000007fc00000ull; break;
    case DType::Float16: nan = 0x7e007e007e007e00ull; break;
    default: nan = 0x7fc07fc07fc07fc0ull; break;  // bfloat16
  }
  switch (w) {
    case 16: gather_kernel<16><<<grid, 256, 0, st>>>(p, tl, nan); break;
    case 8: gather_kernel<8><<<grid, 256, 0, st>>>(p, tl, nan); break;
    case 4: gather_kernel<4><<<grid, 256, 0, st>>>(p, tl, nan); break;
    default: gather_kernel<2><<<grid, 256, 0, st>>>(p, tl, nan); break;
  }
  check_launch("embedding gather_kernel");
}

void backward(const Params& p, void* workspace, int64_t workspace_size, void* stream) {
  if (p.num_embeddings == 0 || p.dim == 0) return;
  auto st = static_cast<cudaStream_t>(stream);
  const int64_t pitch = p.num_embeddings > 1 ? p.table_row_stride * p.elem_bytes : p.dim * p.elem_bytes;
  cuda_check(cudaMemset2DAsync(p.table_out, size_t(pitch), 0, size_t(p.dim * p.elem_bytes),
                               size_t(p.num_embeddings), st),
             "embedding backward: cudaMemset2DAsync (zeroing grad_weight)");
  if (p.n == 0) return;
  const bool wide = p.vec_bytes == 16;
  kernels::dispatch_float_dtype(p.dtype, "embedding: no kernel", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kWide = 16 / int(sizeof(T));
    auto launch = [&](auto vec_tag) {
      constexpr int VEC = decltype(vec_tag)::value;
      const int64_t vectors = p.dim / VEC;
      if (!p.deterministic) {
        const int tl = kernels::row_tpr_log2(vectors);
        const int64_t rows_per_block = 256 >> tl;
        scatter_add_kernel<T, VEC><<<unsigned((p.n + rows_per_block - 1) / rows_per_block), 256, 0, st>>>(p, tl);
        check_launch("embedding scatter_add_kernel");
        return;
      }
      const Layout L = layout_of(p);
      char* ws = static_cast<char*>(workspace);
      sort_indices(p, L, ws, workspace_size, st);
      const Sorted s{reinterpret_cast<const uint32_t*>(ws + L.keys_out), reinterpret_cast<const int32_t*>(ws + L.pos_out),
                     L.chunk};
      auto* partial = reinterpret_cast<acc_t<T>*>(ws + L.partial);
      const int threads = int(std::min<int64_t>(256, (vectors + 31) / 32 * 32));
      const dim3 grid(unsigned(L.chunks), unsigned((vectors + threads - 1) / threads));
      chunk_sums_kernel<T, VEC><<<grid, threads, 0, st>>>(p, s, partial);
      check_launch("embedding chunk_sums_kernel");
      span_sums_kernel<T, VEC><<<grid, threads, 0, st>>>(p, s, partial);
      check_launch("embedding span_sums_kernel");
    };
    if (wide) launch(std::integral_constant<int, kWide>{});
    else launch(std::integral_constant<int, 1>{});
  });
}

}  // namespace baracuda::embedding
