// Thread-block cluster basics shared by every family with a cluster kernel (softmax, norms):
// the device-side rank / barrier / remote-read helpers, and the host-side checks that decide
// whether a cluster kernel may be launched at all. Clusters need sm_90: the device helpers
// compile to nothing (rank 0, no barrier, a local read) for older architectures, where the
// launchers never pick a cluster kernel.
#pragma once
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "common/cuda_check.h"
#include "common/per_arch.cuh"

namespace baracuda {

__device__ __forceinline__ unsigned cluster_block_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().block_rank();
#else
  return 0;
#endif
}
// Split cluster barrier: arrive (release: this block's earlier shared / global writes become
// visible to the cluster) and wait (acquire).
__device__ __forceinline__ void cluster_arrive_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait_acquire() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

// The value `v` of block `rank` of this cluster (v must be in shared memory).
template <class C> __device__ __forceinline__ C cluster_read(C* v, unsigned rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return *cooperative_groups::this_cluster().map_shared_rank(v, rank);
#else
  return *v;
#endif
}

// Whether the current device has thread-block clusters (sm_90 or newer), cached per device.
inline bool device_has_clusters() {
  static int cache[64] = {};  // 0 unknown, 1 yes, 2 no (benign races: every writer writes the same)
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev >= 0 && dev < 64 && cache[dev]) return cache[dev] == 1;
  int major = 0;
  cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
  if (dev >= 0 && dev < 64) cache[dev] = major >= 9 ? 1 : 2;
  return major >= 9;
}

// Whether this device runs the kernel's sm_90 code: a build without sm_90 in its arch list would
// run it from older PTX, where the cluster code compiled to nothing (cached per device and kernel
// signature: the build's arch list decides, not the kernel).
template <class K> bool runs_sm90_code(K kernel) {
  static int cache[64] = {};  // 0 unknown, 1 yes, 2 no
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev >= 0 && dev < 64 && cache[dev]) return cache[dev] == 1;
  cudaFuncAttributes a{};
  cuda_check(cudaFuncGetAttributes(&a, kernel), "cudaFuncGetAttributes(cluster kernel)");
  const bool yes = a.binaryVersion >= 90;
  if (dev >= 0 && dev < 64) cache[dev] = yes ? 1 : 2;
  return yes;
}

}  // namespace baracuda
