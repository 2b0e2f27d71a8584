// MoE token permutation. permute: (expert, pair) keys, a stable radix sort (common/radix_sort.h),
// then one thread group per sorted row writes pos, the offsets where the expert changes, and the
// row copy. unpermute: one thread group per token sums its k rows in pick order (float32); its
// backward scatters the scaled gradient rows and reduces the weights' dot products in the group.
#include <string>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/packed_vec.cuh"
#include "common/radix_sort.h"
#include "common/row_copy.cuh"
#include "moe/moe_launch.h"

namespace baracuda::moe {

namespace {

using kernels::Pack;
using kernels::TypeTag;
using kernels::compute_t;

constexpr int64_t kAlign = 256;
int64_t round_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

struct Layout {
  int64_t keys_in = 0, vals_in = 0, keys_out = 0, vals_out = 0, cub = 0, cub_bytes = 0, total = 0;
  bool known = true;
};
Layout layout_of(const PermuteParams& p) {
  const int64_t n = p.tokens * p.top_k;
  Layout L;
  int64_t at = 0;
  for (int64_t* f : {&L.keys_in, &L.vals_in, &L.keys_out, &L.vals_out}) {
    *f = at;
    at += round_up(n * 4);
  }
  L.cub = at;
  L.cub_bytes = radix_sort::scratch_bytes_or_estimate(n, radix_sort::bits_for(p.experts), L.known);
  L.total = at + round_up(L.cub_bytes);
  return L;
}

__global__ void keys_kernel(const PermuteParams p, uint32_t* keys, int32_t* vals) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= p.tokens * p.top_k) return;
  const int64_t at = (r / p.top_k) * p.id_stride + r % p.top_k;
  const int64_t id = p.ids_int32 ? int64_t(static_cast<const int32_t*>(p.ids)[at]) : static_cast<const int64_t*>(p.ids)[at];
  keys[r] = id >= 0 && id < p.experts ? uint32_t(id) : uint32_t(p.experts);
  vals[r] = int32_t(r);
}

__device__ __forceinline__ void put_offset(const PermuteParams& p, int64_t e, int64_t v) {
  if (p.offsets_int32) static_cast<int32_t*>(p.offsets)[e] = int32_t(v);
  else static_cast<int64_t*>(p.offsets)[e] = v;
}

template <int W>
__global__ void __launch_bounds__(256) scatter_kernel(const PermuteParams p, const uint32_t* keys, const int32_t* src,
                                                      int tpr_log2) {
  const kernels::RowLane rl = kernels::row_lane(tpr_log2);
  const int64_t n = p.tokens * p.top_k, r = rl.row;
  if (r >= n) return;
  const int64_t key = keys[r], pair = src[r], t = pair / p.top_k;
  if (rl.lane == 0) {
    p.pos[t * p.pos_stride + pair % p.top_k] = key < p.experts ? int32_t(r) : -1;
    const int64_t prev = r == 0 ? -1 : int64_t(keys[r - 1]);
    for (int64_t e = prev + 1; e <= key; ++e) put_offset(p, e, r);  // key <= E: offsets[E] = the first dropped row
    if (r == n - 1)
      for (int64_t e = key + 1; e <= p.experts; ++e) put_offset(p, e, n);
  }
  if (key >= p.experts) return;
  kernels::copy_words<W>(static_cast<char*>(p.x_sorted) + r * p.x_sorted_stride * p.elem_bytes,
                         static_cast<const char*>(p.x) + t * p.x_stride * p.elem_bytes,
                         p.hidden * p.elem_bytes / W, rl.lane, rl.tpr);
}

// ---- unpermute ---------------------------------------------------------------------------------
template <class T, int VEC> __global__ void __launch_bounds__(256) combine_kernel(const UnpermuteParams p, int tpr_log2) {
  const kernels::RowLane rl = kernels::row_lane(tpr_log2);
  const int64_t t = rl.row;
  if (t >= p.tokens) return;
  using P = Pack<T, VEC>;
  const int32_t* pos = p.pos + t * p.pos_stride;
  const T* y = static_cast<const T*>(p.y_sorted);
  T* out = static_cast<T*>(p.out) + t * p.out_stride;
  for (int64_t col = int64_t(rl.lane) * VEC; col < p.hidden; col += int64_t(rl.tpr) * VEC) {
    compute_t<T> acc[VEC] = {};
    for (int64_t j = 0; j < p.top_k; ++j) {
      const int64_t r = pos[j];
      if (r < 0 || r >= p.sorted_rows) continue;
      const compute_t<T> w = p.weights ? compute_t<T>(p.weights[t * p.weight_stride + j]) : compute_t<T>(1);
      const P v = *reinterpret_cast<const P*>(y + r * p.y_sorted_stride + col);
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc[i] += w * kernels::to_compute(v.v[i]);
    }
    P o;
#pragma unroll
    for (int i = 0; i < VEC; ++i) o.v[i] = kernels::from_compute<T>(acc[i]);
    *reinterpret_cast<P*>(out + col) = o;
  }
}

// Every lane of the warp runs the same k iterations (its group may be past the last token): the
// weights' dot products are reduced across the group with full-warp shuffles.
template <class T, int VEC>
__global__ void __launch_bounds__(256) combine_backward_kernel(const UnpermuteParams p, int tpr_log2) {
  const kernels::RowLane rl = kernels::row_lane(tpr_log2);
  const int64_t t = rl.row;
  const bool active = t < p.tokens;
  using P = Pack<T, VEC>;
  const T* go = static_cast<const T*>(p.grad_out) + (active ? t : 0) * p.grad_out_stride;
  const T* y = static_cast<const T*>(p.y_sorted);
  T* gy = static_cast<T*>(p.grad_y_sorted);
  for (int64_t j = 0; j < p.top_k; ++j) {
    const int64_t r = active ? int64_t(p.pos[t * p.pos_stride + j]) : -1;
    const bool valid = r >= 0 && r < p.sorted_rows;
    const float w = valid && p.weights ? p.weights[t * p.weight_stride + j] : 1.f;
    float dot = 0.f;
    if (valid) {
      for (int64_t col = int64_t(rl.lane) * VEC; col < p.hidden; col += int64_t(rl.tpr) * VEC) {
        const P g = *reinterpret_cast<const P*>(go + col);
        P o;
#pragma unroll
        for (int i = 0; i < VEC; ++i) o.v[i] = kernels::from_compute<T>(compute_t<T>(w) * kernels::to_compute(g.v[i]));
        *reinterpret_cast<P*>(gy + r * p.grad_y_sorted_stride + col) = o;
        if (p.grad_weights) {
          const P v = *reinterpret_cast<const P*>(y + r * p.y_sorted_stride + col);
#pragma unroll
          for (int i = 0; i < VEC; ++i) dot += float(kernels::to_compute(g.v[i]) * kernels::to_compute(v.v[i]));
        }
      }
    }
    if (p.grad_weights) {
      for (int o = rl.tpr >> 1; o; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      if (active && rl.lane == 0) p.grad_weights[t * p.grad_weight_stride + j] = dot;
    }
  }
}

}  // namespace

int64_t permute_workspace_bytes(const PermuteParams& p, bool& known) {
  known = true;
  if (p.tokens * p.top_k == 0) return 0;
  const Layout L = layout_of(p);
  known = L.known;
  return L.total;
}

void permute(const PermuteParams& p, void* workspace, int64_t workspace_size, cudaStream_t st) {
  const int64_t n = p.tokens * p.top_k;
  if (n == 0) {
    cuda_check(cudaMemsetAsync(p.offsets, 0, size_t((p.experts + 1) * (p.offsets_int32 ? 4 : 8)), st),
               "moe_permute: cudaMemsetAsync (offsets of no rows)");
    return;
  }
  const Layout L = layout_of(p);
  if (!L.known) throw CudaError("moe_permute: CUB's radix sort could not size its scratch on this device");
  if (workspace == nullptr || workspace_size < L.total)
    throw InvalidArgument("moe_permute: the workspace has " + std::to_string(workspace_size) + " bytes; the plan needs " +
                          std::to_string(L.total));
  char* ws = static_cast<char*>(workspace);
  auto* keys_in = reinterpret_cast<uint32_t*>(ws + L.keys_in);
  auto* vals_in = reinterpret_cast<int32_t*>(ws + L.vals_in);
  auto* keys_out = reinterpret_cast<uint32_t*>(ws + L.keys_out);
  auto* vals_out = reinterpret_cast<int32_t*>(ws + L.vals_out);
  keys_kernel<<<unsigned((n + 255) / 256), 256, 0, st>>>(p, keys_in, vals_in);
  check_launch("moe keys_kernel");
  radix_sort::sort_pairs(keys_in, keys_out, vals_in, vals_out, n, radix_sort::bits_for(p.experts), ws + L.cub,
                         L.cub_bytes, st, "moe_permute");
  const int w = p.vec_bytes < 2 ? 2 : p.vec_bytes;
  const int tl = kernels::row_tpr_log2(p.hidden * p.elem_bytes / w, n);
  const int64_t rows_per_block = 256 >> tl;
  const dim3 grid(unsigned((n + rows_per_block - 1) / rows_per_block));
  switch (w) {
    case 16: scatter_kernel<16><<<grid, 256, 0, st>>>(p, keys_out, vals_out, tl); break;
    case 8: scatter_kernel<8><<<grid, 256, 0, st>>>(p, keys_out, vals_out, tl); break;
    case 4: scatter_kernel<4><<<grid, 256, 0, st>>>(p, keys_out, vals_out, tl); break;
    default: scatter_kernel<2><<<grid, 256, 0, st>>>(p, keys_out, vals_out, tl); break;
  }
  check_launch("moe scatter_kernel");
}

void unpermute(const UnpermuteParams& p, cudaStream_t st) {
  if (p.backward && p.sorted_rows > 0 && p.hidden > 0) {  // rows no pair names are zeros
    const int64_t es = int64_t(dtype_size(p.dtype));
    const int64_t pitch = p.sorted_rows > 1 ? p.grad_y_sorted_stride * es : p.hidden * es;
    cuda_check(cudaMemset2DAsync(p.grad_y_sorted, size_t(pitch), 0, size_t(p.hidden * es), size_t(p.sorted_rows), st),
               "moe_unpermute_backward: cudaMemset2DAsync (zeroing grad_y_sorted)");
  }
  if (p.tokens == 0 || p.top_k == 0 || (p.hidden == 0 && !p.grad_weights)) return;
  kernels::dispatch_float_dtype(p.dtype, "moe: no kernel", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kWide = 16 / int(sizeof(T));
    auto launch = [&](auto vec_tag) {
      constexpr int VEC = decltype(vec_tag)::value;
      const int tl = kernels::row_tpr_log2((p.hidden + VEC - 1) / VEC);
      const int64_t rows_per_block = 256 >> tl;
      const dim3 grid(unsigned((p.tokens + rows_per_block - 1) / rows_per_block));
      if (p.backward) combine_backward_kernel<T, VEC><<<grid, 256, 0, st>>>(p, tl);
      else combine_kernel<T, VEC><<<grid, 256, 0, st>>>(p, tl);
      check_launch(p.backward ? "moe combine_backward_kernel" : "moe combine_kernel");
    };
    if (p.vec_bytes == 16) launch(std::integral_constant<int, kWide>{});
    else launch(std::integral_constant<int, 1>{});
  });
}

}  // namespace baracuda::moe
