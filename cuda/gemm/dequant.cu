// Dequantizing epilogue of an int8 GEMM: out[m, n] = (float)acc[m, n] * row_scale[m] *
// col_scale[n] (+ bias[n]): f32 math, ((float)acc * row_scale) * col_scale + bias with the last
// multiply-add fused, one rounding to the output dtype.
//
// Memory-bound: each thread owns 4 consecutive columns (one 16-byte load of acc when aligned)
// and walks rows with a grid stride, so col_scale and bias are loaded once per thread and
// reused for every row it visits. Narrow matrices (N < 1024) put several rows in one block
// (2-D blocks) so that no block is mostly idle.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "gemm/gemm_launch.h"

namespace baracuda::gemm {
namespace {

using kernels::bf16;
using kernels::f16;

struct DequantParams {
  const int32_t* acc;
  const float* row_scale;
  const float* col_scale;
  const void* bias;
  void* out;
  int64_t M, N, ldacc, ldo;
  int bias_f32;  // bias is f32 (else the output dtype)
  int vec_in;    // acc 16-byte aligned and ldacc % 4 == 0
  int vec_out;   // out aligned to 4 elements and ldo % 4 == 0
};

template <class TO> __device__ __forceinline__ float load_bias(const DequantParams& p, int64_t n) {
  if (p.bias == nullptr) return 0.0f;
  if (p.bias_f32) return static_cast<const float*>(p.bias)[n];
  return kernels::to_compute(static_cast<const TO*>(p.bias)[n]);
}

// 4 output elements, as one 16-byte (f32) or 8-byte (f16/bf16) store.
template <class TO> struct alignas(4 * sizeof(TO)) Out4 { TO v[4]; };

template <class TO>
__global__ void __launch_bounds__(256) dequant_int32_kernel(const DequantParams p) {
  const int64_t n = 4 * (int64_t(blockIdx.x) * blockDim.x + threadIdx.x);
  if (n >= p.N) return;
  const int nv = p.N - n < 4 ? int(p.N - n) : 4;  // valid columns of this thread
  float cs[4], bs[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    cs[j] = (j < nv && p.col_scale != nullptr) ? p.col_scale[n + j] : 1.0f;
    bs[j] = j < nv ? load_bias<TO>(p, n + j) : 0.0f;
  }
  const int64_t mstride = int64_t(gridDim.y) * blockDim.y;
  for (int64_t m = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; m < p.M; m += mstride) {
    const int32_t* a = p.acc + m * p.ldacc + n;
    int32_t v[4] = {0, 0, 0, 0};
    if (p.vec_in && nv == 4) {
      const int4 q = __ldcs(reinterpret_cast<const int4*>(a));  // read once: evict-first
      v[0] = q.x;
      v[1] = q.y;
      v[2] = q.z;
      v[3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (j < nv) v[j] = __ldcs(a + j);
    }
    const float rs = p.row_scale != nullptr ? p.row_scale[m] : 1.0f;
    Out4<TO> o;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      o.v[j] = kernels::from_compute<TO>(fmaf(__int2float_rn(v[j]) * rs, cs[j], bs[j]));
    TO* dst = static_cast<TO*>(p.out) + m * p.ldo + n;
    if (p.vec_out && nv == 4) {
      *reinterpret_cast<Out4<TO>*>(dst) = o;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (j < nv) dst[j] = o.v[j];
    }
  }
}

bool aligned(const void* p, unsigned bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

template <class TO> void dequant_launch(const DequantArgs& a, cudaStream_t stream) {
  DequantParams p;
  p.acc = a.acc;
  p.row_scale = a.row_scale;
  p.col_scale = a.col_scale;
  p.bias = a.bias;
  p.out = a.out;
  p.M = a.M;
  p.N = a.N;
  p.ldacc = a.ldacc;
  p.ldo = a.ldo;
  p.bias_f32 = a.bias != nullptr && a.bias_dtype == DType::Float32;
  p.vec_in = aligned(a.acc, 16) && (a.M <= 1 || a.ldacc % 4 == 0);
  p.vec_out = aligned(a.out, 4 * sizeof(TO)) && (a.M <= 1 || a.ldo % 4 == 0);
  const int64_t nq = (a.N + 3) / 4;  // threads per row
  int bx = 256;
  while (bx > 1 && bx / 2 >= nq) bx /= 2;  // narrow rows: several rows per block
  const int by = 256 / bx;
  const int64_t gx = (nq + bx - 1) / bx;
  const int64_t gy_need = (a.M + by - 1) / by;
  const unsigned gy = static_cast<unsigned>(gy_need < 65535 ? gy_need : 65535);
  // gridDim.x <= 2^31 - 1: N <= 2^41 columns, never reached by a real matrix.
  dequant_int32_kernel<TO><<<dim3(static_cast<unsigned>(gx), gy), dim3(bx, by), 0, stream>>>(p);
  check_launch("dequant_int32_kernel");
}

}  // namespace

bool dequant_int32_supported(const DequantArgs& a) {
  const bool out_ok = a.out_dtype == DType::Float16 || a.out_dtype == DType::BFloat16 ||
                      a.out_dtype == DType::Float32;
  const bool bias_ok = a.bias_dtype == DType::Float32 || a.bias_dtype == a.out_dtype;
  return out_ok && bias_ok && a.M >= 0 && a.N >= 0;
}

void dequant_int32(const DequantArgs& a, void* stream) {
  if (!dequant_int32_supported(a))  // a contract violation: select() refuses these first
    throw Unsupported(std::string("dequant_int32: out dtype ") + dtype_name(a.out_dtype) +
                      " / bias " + dtype_name(a.bias_dtype) +
                      " has no kernel; expected f16, bf16 or f32 with an f32 or out-dtype bias");
  if (a.M == 0 || a.N == 0) return;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (a.out_dtype) {
    case DType::Float16: dequant_launch<f16>(a, s); break;
    case DType::BFloat16: dequant_launch<bf16>(a, s); break;
    default: dequant_launch<float>(a, s); break;
  }
}

}  // namespace baracuda::gemm
