// max |x| of a GEMM output (the amax fp8 recipes keep), for outputs cuBLASLt has no amax for.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "gemm/gemm_launch.h"

namespace baracuda::gemm {

namespace {

using kernels::to_compute;

template <class T>
__global__ void absmax_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, int64_t ld,
                              unsigned int* __restrict__ out) {
  float m = 0.0f;
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    const float v = fabsf(to_compute(x[r * ld + c]));
    m = (v > m || v != v) ? v : m;  // keep NaN
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, m, o);
    m = (v > m || v != v) ? v : m;
  }
  __shared__ float warp_max[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_max[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = lane < int(blockDim.x >> 5) ? warp_max[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
      const float v = __shfl_xor_sync(0xffffffffu, m, o);
      m = (v > m || v != v) ? v : m;
    }
    if (lane == 0) atomicMax(out, __float_as_uint(m));
  }
}

template <class T>
void launch(const AbsMaxArgs& a, cudaStream_t s) {
  const int threads = 256;
  const int64_t n = a.rows * a.cols;
  const int blocks = int(std::min<int64_t>((n + threads - 1) / threads, 132 * 8));
  absmax_kernel<T><<<blocks, threads, 0, s>>>(static_cast<const T*>(a.x), a.rows, a.cols, a.ld,
                                              reinterpret_cast<unsigned int*>(a.out));
  check_launch("absmax_kernel");
}

}  // namespace

void absmax(const AbsMaxArgs& a, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cuda_check(cudaMemsetAsync(a.out, 0, sizeof(float), s), "cudaMemsetAsync(amax)");
  if (a.rows * a.cols == 0) return;
  switch (a.dtype) {
    case DType::Float32: return launch<float>(a, s);
    case DType::Float16: return launch<__half>(a, s);
    case DType::BFloat16: return launch<__nv_bfloat16>(a, s);
    default: throw Unsupported(std::string("absmax: ") + dtype_name(a.dtype));
  }
}

}  // namespace baracuda::gemm
