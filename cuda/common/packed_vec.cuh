// The kernels' shared vector vocabulary. Pack<T, N>: N values as one aligned vector, with the
// tail-safe load_chunk / store_chunk of a row (every family reads and writes through these).
// The 16-byte form as four 32-bit words (uint4), so that 16-bit types really take 4 registers
// (an array of 8 bf16 would occupy 8): elements are unpacked on use (a shift / mask for bf16, a
// half conversion for f16), so the compiler has no reason to keep 2x larger compute-type copies
// alive (the norm kernels), and store_vec / stg16, one 16-byte store.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common/dtype_traits.cuh"

namespace baracuda::kernels {

// N values of T as one aligned vector: a single global access up to 16 bytes (the widest on
// sm_90; a longer pack is read as several). The shared vector type of every family's kernels.
template <class T, int N> struct alignas(sizeof(T) * N >= 16 ? 16 : sizeof(T) * N) Pack { T v[N]; };

// Loads V elements at p[idx..idx+V) as compute values (one vector access when all are in
// range, p + idx aligned to the pack); slots at or past len get `fill`.
template <class T, int V, class C>
__device__ __forceinline__ void load_chunk(const T* __restrict__ p, int64_t idx, int64_t len, C (&v)[V], C fill) {
  if (idx + V <= len) {
    const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(p + idx);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = to_compute(pk.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = idx + j < len ? to_compute(p[idx + j]) : fill;
  }
}

__device__ __forceinline__ unsigned word(const uint4& u, int w) { return w == 0 ? u.x : w == 1 ? u.y : w == 2 ? u.z : u.w; }
__device__ __forceinline__ void set_word(uint4& u, int w, unsigned v) {
  if (w == 0) u.x = v; else if (w == 1) u.y = v; else if (w == 2) u.z = v; else u.w = v;
}
template <class T> __device__ __forceinline__ compute_t<T> unpack(const uint4& u, int k) {
  if constexpr (std::is_same_v<T, bf16>) {
    const unsigned w = word(u, k >> 1);
    return __uint_as_float((k & 1) ? (w & 0xffff0000u) : (w << 16));
  } else if constexpr (std::is_same_v<T, f16>) {
    const unsigned w = word(u, k >> 1);
    return __half2float(__ushort_as_half((unsigned short)((k & 1) ? (w >> 16) : (w & 0xffffu))));
  } else if constexpr (std::is_same_v<T, float>) {
    return __uint_as_float(word(u, k));
  } else {
    return __hiloint2double(int(word(u, 2 * k + 1)), int(word(u, 2 * k)));
  }
}
template <class T> __device__ __forceinline__ void pack_into(uint4& u, int k, compute_t<T> v) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {
    unsigned short b;
    if constexpr (std::is_same_v<T, bf16>) b = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    else b = __half_as_ushort(__float2half_rn(v));
    const unsigned w = word(u, k >> 1);
    set_word(u, k >> 1, (k & 1) ? ((w & 0xffffu) | (unsigned(b) << 16)) : ((w & 0xffff0000u) | b));
  } else if constexpr (std::is_same_v<T, float>) {
    set_word(u, k, __float_as_uint(v));
  } else {
    set_word(u, 2 * k, unsigned(__double2loint(v)));
    set_word(u, 2 * k + 1, unsigned(__double2hiint(v)));
  }
}

// The 16-byte vector of V = 16 / sizeof(T) compute values (for stg16).
template <class T, int V, class C> __device__ __forceinline__ uint4 pack16(const C (&v)[V]) {
  static_assert(V * sizeof(T) == 16, "pack16: V values of T fill 16 bytes");
  uint4 u = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int k = 0; k < V; ++k) pack_into<T>(u, k, v[k]);
  return u;
}

// One 16-byte global store (p 16-byte aligned, in global memory). A plain vector store through a
// T* that the compiler could not prove 16-byte aligned came out of NVVM split into 2- or 4-byte
// stores for some of a thread's vectors (the first one of the softmax / norm cluster kernels).
__device__ __forceinline__ void stg16(void* p, const uint4& u) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(u.x), "r"(u.y), "r"(u.z), "r"(u.w) : "memory");
}

// Stores V compute values as T at p (aligned to the V values): one st.global.v4 when they fill
// 16 bytes, else one store of an aligned array.
template <class T, int V, class C> __device__ __forceinline__ void store_vec(T* p, const C (&v)[V]) {
  if constexpr (V * sizeof(T) == 16) {
    stg16(p, pack16<T>(v));
  } else {
    struct alignas(sizeof(T) * V) Arr { T e[V]; } a;
#pragma unroll
    for (int j = 0; j < V; ++j) a.e[j] = from_compute<T>(v[j]);
    *reinterpret_cast<Arr*>(p) = a;
  }
}

// Stores V compute values at p[idx..idx+V) (one vector store when all are in range); slots at or
// past len are left alone.
template <class T, int V, class C>
__device__ __forceinline__ void store_chunk(T* __restrict__ p, int64_t idx, int64_t len, const C (&v)[V]) {
  if (idx + V <= len) {
    store_vec<T>(p + idx, v);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (idx + j < len) p[idx + j] = from_compute<T>(v[j]);
  }
}

}  // namespace baracuda::kernels
