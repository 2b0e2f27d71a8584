// Device-side types for each DType, the type math happens in, and a dispatcher that maps
// a runtime DType to a compile-time tag (pruned with `if constexpr` at the call site).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "baracuda/dtype.h"
#include "baracuda/errors.h"

namespace baracuda::kernels {

using f16 = __half;
using bf16 = __nv_bfloat16;
using e4m3 = __nv_fp8_e4m3;
using e5m2 = __nv_fp8_e5m2;

template <class T> struct TypeTag { using type = T; };

template <class T> constexpr bool is_half_v = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;
template <class T> constexpr bool is_fp8_v = std::is_same_v<T, e4m3> || std::is_same_v<T, e5m2>;
template <class T> constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T> || is_fp8_v<T>;
template <class T> constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// The unsigned integer of T's width: a kernel that only moves or tests bits (where's select, the bit
// copies among casts, any / all's zero test) is compiled once per width, not once per dtype.
template <size_t Bytes> struct UIntOfWidth;
template <> struct UIntOfWidth<1> { using type = uint8_t; };
template <> struct UIntOfWidth<2> { using type = uint16_t; };
template <> struct UIntOfWidth<4> { using type = uint32_t; };
template <> struct UIntOfWidth<8> { using type = uint64_t; };
template <class T> using bits_t = typename UIntOfWidth<sizeof(T)>::type;

// The type arithmetic is done in: f32 for 16- and 8-bit floats, the type itself otherwise.
template <class T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<f16> { using type = float; };
template <> struct ComputeOf<bf16> { using type = float; };
template <> struct ComputeOf<e4m3> { using type = float; };
template <> struct ComputeOf<e5m2> { using type = float; };
template <class T> using compute_t = typename ComputeOf<T>::type;

// Two e4m3 values as f16 bits without sm_89's cvt: a byte's exponent and mantissa moved into f16's
// fields give its value / 2^8 exactly, normal or subnormal (the biases differ by 8), so one f16x2
// multiply by 256 finishes it; the NaN bytes (0x7f, 0xff) give 0x7fff, as cuda_fp8's own software
// path does. Branch-free where that path loops per subnormal (5x the sm_80 compile time of the
// paged kernels, which convert every cache fragment).
__device__ __forceinline__ __half2_raw e4m3x2_to_half2_sw(uint32_t bits) {
  const uint32_t w = ((bits & 0xffu) << 8) | ((bits & 0xff00u) << 16);  // each byte atop a 16-bit lane
  const uint32_t mag = (w & 0x7f007f00u) >> 1;                            // into f16's exponent / mantissa
  __half2_raw h;
  h.x = uint16_t((w & 0x8000u) | (mag & 0xffffu));
  h.y = uint16_t(((w >> 16) & 0x8000u) | (mag >> 16));
  const __half_raw k256{0x5c00};  // 2^8
  __half2_raw r = __hmul2(__half2(h), __half2(__half(k256), __half(k256)));
  if ((mag & 0xffffu) == 0x3f80u) r.x = 0x7fff;
  if ((mag >> 16) == 0x3f80u) r.y = 0x7fff;
  return r;
}

// fp8 conversions are instructions from sm_89 on, a software decode before: a unit converting fp8
// differs by architecture and must not be a shared-PTX unit (common/per_arch.cuh says why).
template <class T> __host__ __device__ constexpr void fp8_needs_per_arch_ptx() {
#if defined(BARACUDA_SHARED_PTX)
  static_assert(!is_fp8_v<T>, "fp8 conversion in a shared-PTX unit: list it in cmake/per_arch_units.cmake");
#endif
}

template <class T> __device__ __forceinline__ compute_t<T> to_compute(T v) {
  fp8_needs_per_arch_ptx<T>();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  if constexpr (std::is_same_v<T, e4m3>) {  // the branch-free decode above, one lane of it
    __half_raw h;
    h.x = e4m3x2_to_half2_sw(v.__x).x;
    return __half2float(__half(h));
  }
#endif
  if constexpr (is_half_v<T> || is_fp8_v<T>) return static_cast<float>(v);
  else return v;
}
// Round a compute value to storage (round-to-nearest-even; fp8 saturates to finite).
template <class T, class C> __device__ __forceinline__ T from_compute(C v) {
  fp8_needs_per_arch_ptx<T>();
  if constexpr (std::is_same_v<T, f16>) return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bf16>) return __float2bfloat16_rn(static_cast<float>(v));
  else if constexpr (is_fp8_v<T>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

// Two fp8 values (the low byte first) as f16 bits: one cvt on sm_89+; exact, NaN and inf kept.
template <class F8> __device__ __forceinline__ __half2_raw fp8x2_to_half2(uint32_t bits) {
  static_assert(is_fp8_v<F8>);
  fp8_needs_per_arch_ptx<F8>();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  if constexpr (std::is_same_v<F8, e4m3>) return e4m3x2_to_half2_sw(bits);
#endif
  return __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(bits & 0xffffu),
                                    std::is_same_v<F8, e4m3> ? __NV_E4M3 : __NV_E5M2);
}
// The same as two floats (exact).
template <class F8> __device__ __forceinline__ float2 fp8x2_to_float2(uint32_t bits) {
  return __half22float2(__half2(fp8x2_to_half2<F8>(bits)));
}
// Two fp8 values as a packed pair of T (f16 or bf16), for mma fragments (through f32 for bf16); exact.
template <class T, class F8> __device__ __forceinline__ uint32_t fp8x2_to_pair(uint32_t bits) {
  static_assert(is_half_v<T>);
  if constexpr (std::is_same_v<T, f16>) {
    const __half2_raw h = fp8x2_to_half2<F8>(bits);
    return uint32_t(h.x) | (uint32_t(h.y) << 16);
  } else {
    const __nv_bfloat162 b = __float22bfloat162_rn(fp8x2_to_float2<F8>(bits));
    return *reinterpret_cast<const uint32_t*>(&b);
  }
}

// Runtime DType -> TypeTag<T>. `f` is called with the tag of the matching type; the caller
// prunes unsupported types with `if constexpr` and throws for them.
template <class F> decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f(TypeTag<bool>{});
    case DType::Int8: return f(TypeTag<int8_t>{});
    case DType::UInt8: return f(TypeTag<uint8_t>{});
    case DType::Int16: return f(TypeTag<int16_t>{});
    case DType::Int32: return f(TypeTag<int32_t>{});
    case DType::Int64: return f(TypeTag<int64_t>{});
    case DType::UInt32: return f(TypeTag<uint32_t>{});
    case DType::Float16: return f(TypeTag<f16>{});
    case DType::BFloat16: return f(TypeTag<bf16>{});
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: return f(TypeTag<double>{});
    case DType::Float8E4M3: return f(TypeTag<e4m3>{});
    case DType::Float8E5M2: return f(TypeTag<e5m2>{});
    default: break;
  }
  throw Unsupported(std::string("dtype ") + dtype_name(t) + " has no kernel here");
}

// The floating dtypes most row kernels take (float16, bfloat16, float32, float64): `f` gets the tag;
// any other dtype throws Unsupported "<what> for <dtype>".
template <class F> decltype(auto) dispatch_float_dtype(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::Float16: return f(TypeTag<f16>{});
    case DType::BFloat16: return f(TypeTag<bf16>{});
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: return f(TypeTag<double>{});
    default: break;
  }
  throw Unsupported(std::string(what) + " for " + dtype_name(t));
}

}  // namespace baracuda::kernels
