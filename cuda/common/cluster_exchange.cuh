// Per-row exchange of two partial values among the CS blocks of a thread-block cluster (sm_90),
// without a cluster barrier per row.
//
// Why: barrier.cluster.arrive.release compiles to MEMBAR.ALL.GPU (the arriving thread waits
// until every global store it issued before is complete: a long-row kernel's previous row of
// output) and barrier.cluster.wait.acquire to CCTL.IVALL (the SM's L1 is invalidated: the next
// weight loads miss). Once per row, those stalls held the norm backward cluster kernel at about
// half of the DRAM bandwidth (ncu on an H200: membar and long-scoreboard stalls on top).
//
// How: block r sends its pair (a, b) into slot [r] of every block of the cluster with st.async
// (a remote shared-memory store that counts its bytes on the receiver's mbarrier, complete_tx),
// and a block waits on its own mbarrier until all CS pairs are in. No fence, no L1 invalidation.
// Two slot sets, used by alternate rows (set = row & 1); each set's mbarrier is armed for its
// first row by init() and re-armed by rearm() after each wait.
//
// The caller's loop must guarantee, as the row-pipelined kernels do: a block sends row j + 2
// only after receiving row j + 1 from every block, and a block sends row j + 1 only after all of
// its threads have read row j (a __syncthreads between). Then a set is never overwritten before
// it is read, and no thread can miss a phase of the mbarrier it waits on. init() must be made
// visible to the cluster (a cluster barrier with release / acquire) before the first send.
#pragma once
#include <cstdint>

#include "common/mbarrier.cuh"
#include "common/per_arch.cuh"

namespace baracuda::kernels {

template <class C, int CS> struct ClusterExchange {
  static_assert(sizeof(C) == 4 || sizeof(C) == 8, "ClusterExchange: 32- or 64-bit values");
  static constexpr unsigned kBytes = unsigned(CS * 2 * sizeof(C));  // one row's pairs into one block
  alignas(16) C slot[2][CS][2];
  uint64_t bar[2];

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __device__ __forceinline__ void arm(int set) { mbar_arrive_expect_tx(&bar[set], kBytes); }
  // One thread: both mbarriers (one arrival each: the arming), each armed for its first row.
  __device__ __forceinline__ void init() {
    for (int s = 0; s < 2; ++s) mbar_init(&bar[s], 1);
    arm(0);
    arm(1);
  }
  // One thread, after its wait on `set`: arms it for the row two later.
  __device__ __forceinline__ void rearm(int set) { arm(set); }
  // Sends this block's pair (a, b) for a row of set `set` into slot [rank] of block `dest`.
  __device__ __forceinline__ void send(int set, unsigned rank, unsigned dest, C a, C b) {
    unsigned ra, rb;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(smem_u32(&slot[set][rank][0])), "r"(dest));
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(smem_u32(&bar[set])), "r"(dest));
    if constexpr (sizeof(C) == 8)
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f64 [%0], {%1, %2}, [%3];" ::"r"(ra),
                   "d"(a), "d"(b), "r"(rb)
                   : "memory");
    else
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(ra),
                   "f"(a), "f"(b), "r"(rb)
                   : "memory");
  }
  // Every thread: waits until all CS pairs of set `set` are in, for its `use`-th row (0, 1, ...).
  __device__ __forceinline__ void wait(int set, unsigned use) { mbar_wait(&bar[set], use & 1u); }
#else  // no clusters before sm_90: the kernels that use this trap there
  __device__ void init() {}
  __device__ void rearm(int) {}
  __device__ void send(int, unsigned, unsigned, C, C) {}
  __device__ void wait(int, unsigned) {}
#endif
};

}  // namespace baracuda::kernels
