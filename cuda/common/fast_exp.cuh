// exp for 16-bit storage: one MUFU.EX2 with denormal results flushed to zero.
//
// Without .ftz, ex2.approx.f32 costs a compare and two predicated multiplies around MUFU.EX2 to
// produce denormal results: six instructions per exp(v) with the log2(e) scaling, against two.
// Results under 2^-126 are far below what a softmax / loss of 16-bit values resolves, so the
// softmax and loss kernels take this one for f16 / bf16 (f32 and f64 keep libm's exp).
#pragma once

namespace baracuda::kernels {

__device__ __forceinline__ float ex2_ftz(float v) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}
constexpr float kLog2e = 1.4426950408889634f;
__device__ __forceinline__ float exp_ftz(float v) { return ex2_ftz(v * kLog2e); }
// 1 / v and log(v) as one MUFU each (+ one FMUL for the log): ~2^-22 relative error, for
// per-row constants of 16-bit results (softmax's 1 / sum, log-softmax's log(sum)).
__device__ __forceinline__ float rcp_approx_ftz(float v) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}
constexpr float kLn2 = 0.6931471805599453f;
__device__ __forceinline__ float log_approx_ftz(float v) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r * kLn2;
}

}  // namespace baracuda::kernels
