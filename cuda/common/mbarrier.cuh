// Shared-memory mbarriers (sm_90) and the bulk copies that complete on them.
//
// A bulk copy (cp.async.bulk, the TMA unit's non-tensor form) moves a contiguous, 16-byte aligned
// span of global memory into this block's shared memory and counts its bytes on an mbarrier;
// threads wait on the barrier's phase. One thread issues it: no per-thread addresses, no
// per-vector cp.async through the load / store unit (the long-row kernels that prefetch their
// next row were throttled there: ncu MIO-throttle stalls on top, softmax 512 x 262144).
#pragma once
#include <cstdint>

#include "common/per_arch.cuh"

namespace baracuda::kernels {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
// One thread: `count` arrivals complete a phase. Made visible to the cluster's async proxy.
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival that also expects `bytes` more of asynchronous transactions in this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
// One plain arrival (the phase completes when `count` of them, and any expected bytes, are in).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// Waits until the phase of parity `parity` (0, 1, 0, ... for the barrier's 1st, 2nd, 3rd phase)
// has completed; its bulk copies' and st.async's data are then visible to the caller.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  const unsigned a = smem_u32(bar);
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(a), "r"(parity & 1u)
        : "memory");
  } while (!done);
}
// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global `src` to this block's
// shared `dst`, counted on `bar` (whose phase must expect them).
__device__ __forceinline__ void bulk_copy_g2s(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
// One thread: `bytes` from src to dst in chunks of at most 32 KB, counted on `bar` (the caller's
// arrival must expect them: mbar_arrive_expect_tx). From one thread because the copy takes its
// addresses in uniform registers: lanes with different addresses make the compiler loop.
__device__ __forceinline__ void bulk_copy_span(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  constexpr unsigned kChunk = 32u * 1024u;
  for (unsigned off = 0; off < bytes; off += kChunk) {
    const unsigned n = bytes - off < kChunk ? bytes - off : kChunk;
    bulk_copy_g2s(static_cast<char*>(dst) + off, static_cast<const char*>(src) + off, n, bar);
  }
}
#else  // before sm_90: the kernels that use these never run there (they trap or are not picked)
__device__ __forceinline__ void mbar_init(uint64_t*, unsigned) {}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t*, unsigned) {}
__device__ __forceinline__ void mbar_arrive(uint64_t*) {}
__device__ __forceinline__ void mbar_wait(uint64_t*, unsigned) {}
__device__ __forceinline__ void bulk_copy_g2s(void*, const void*, unsigned, uint64_t*) {}
__device__ __forceinline__ void bulk_copy_span(void*, const void*, unsigned, uint64_t*) {}
#endif

}  // namespace baracuda::kernels
