// Counter-based random numbers: Philox-4x32-10 (Salmon et al., SC'11) and the Gumbel noise of
// gumbel_softmax. Stateless: a value depends only on (seed, offset, logical element index), so
// it is the same for every launch geometry, layout and replay.
//
// Element L of the noise field (seed, offset) is word L % 4 of
//   philox4x32_10(counter = {lo(L / 4), hi(L / 4), lo(offset), hi(offset)}, key = {lo(seed), hi(seed)}).
// Uniforms are strictly inside (0, 1): f32 u = (2 * (r >> 9) + 1) * 2^-24, f64 u = (2 * r + 1) * 2^-33
// (both exact in their type), and g = -log(-log(u)).
#pragma once
#include <cmath>
#include <cstdint>

namespace baracuda::rng {

struct Words4 {
  uint32_t w[4];
};

__host__ __device__ __forceinline__ uint32_t mulhi32(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return uint32_t((uint64_t(a) * uint64_t(b)) >> 32);
#endif
}

__host__ __device__ __forceinline__ Words4 philox4x32_10(uint64_t block, uint64_t offset, uint64_t seed) {
  uint32_t c0 = uint32_t(block), c1 = uint32_t(block >> 32), c2 = uint32_t(offset), c3 = uint32_t(offset >> 32);
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint32_t lo0 = 0xD2511F53u * c0, hi0 = mulhi32(0xD2511F53u, c0);
    const uint32_t lo1 = 0xCD9E8D57u * c2, hi1 = mulhi32(0xCD9E8D57u, c2);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return Words4{{c0, c1, c2, c3}};
}

__host__ __device__ __forceinline__ uint32_t pick(const Words4& p, uint32_t j) {
  return j == 0 ? p.w[0] : j == 1 ? p.w[1] : j == 2 ? p.w[2] : p.w[3];
}

// The random word of logical element L.
__host__ __device__ __forceinline__ uint32_t word_at(uint64_t L, uint64_t offset, uint64_t seed) {
  return pick(philox4x32_10(L >> 2, offset, seed), uint32_t(L & 3));
}

// The four words of logical elements L0, L0 + step, L0 + 2 step, L0 + 3 step: one or two Philox
// calls when step == 1, four otherwise.
__host__ __device__ __forceinline__ void words4_at(uint64_t L0, int64_t step, uint64_t offset, uint64_t seed,
                                                   uint32_t (&r)[4]) {
  if (step == 1) {
    const Words4 a = philox4x32_10(L0 >> 2, offset, seed);
    const uint32_t s = uint32_t(L0 & 3);
    if (s == 0) {
#pragma unroll
      for (int j = 0; j < 4; ++j) r[j] = a.w[j];
    } else {
      const Words4 b = philox4x32_10((L0 >> 2) + 1, offset, seed);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t q = s + uint32_t(j);
        r[j] = q < 4 ? pick(a, q) : pick(b, q - 4);
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) r[j] = word_at(L0 + uint64_t(int64_t(j) * step), offset, seed);
  }
}

template <class C> __device__ __forceinline__ C gumbel_of(uint32_t r);
template <> __device__ __forceinline__ float gumbel_of<float>(uint32_t r) {
  const float u = float(2u * (r >> 9) + 1u) * 5.9604644775390625e-8f;  // 2^-24
  return -logf(-logf(u));
}
template <> __device__ __forceinline__ double gumbel_of<double>(uint32_t r) {
  const double u = (2.0 * double(r) + 1.0) * 1.16415321826934814453125e-10;  // 2^-33
  return -log(-log(u));
}

}  // namespace baracuda::rng
