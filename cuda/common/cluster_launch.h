// One launch configuration for a kernel run in thread-block clusters (sm_90): `cs` blocks per
// cluster along x. Shared by every family with a cluster path (softmax, cross-entropy, norms).
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <utility>

#include "common/cuda_check.h"

namespace baracuda {

class ClusterLaunch {
 public:
  ClusterLaunch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, unsigned cs) {
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    attr_[0].id = cudaLaunchAttributeClusterDimension;
    attr_[0].val.clusterDim.x = cs;
    attr_[0].val.clusterDim.y = 1;
    attr_[0].val.clusterDim.z = 1;
    cfg.attrs = attr_;
    cfg.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;  // cfg.attrs points into this object
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;

  // cudaLaunchKernelEx; a failure is a CudaError naming `what`.
  template <class... Params, class... Args> void launch(void (*kernel)(Params...), const char* what, Args&&... args) {
    cuda_check(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), what);
  }

  cudaLaunchConfig_t cfg = {};  // adjustable before launch() (a persistent grid, say)

 private:
  cudaLaunchAttribute attr_[1];
};

// Clusters of `Kernel` launched as `cfg` resident at once on the current device, cached per
// device (the kernel's shared-memory attributes must be set before the first call); 0 when unknown
// (no device, or the query failed: not sticky). Persistent cluster grids are sized with it: a
// cluster beyond them starts only when a whole earlier one has ended.
template <auto Kernel> int resident_clusters(const cudaLaunchConfig_t& cfg) {
  static std::atomic<int> cache[64];  // 0: not asked yet (static storage: zero-initialized)
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  const bool cached = dev >= 0 && dev < 64;
  if (cached) {
    const int c = cache[dev].load(std::memory_order_relaxed);
    if (c) return c;
  }
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, Kernel, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (cached && n > 0) cache[dev].store(n, std::memory_order_relaxed);
  return n;
}

}  // namespace baracuda
