# The CUDA units compiled once per architecture (cicc and ptxas for each) rather than from the lowest
# architecture's PTX (cmake/shared_ptx.cmake), because their device code differs by architecture.
# Those that include cuda/common/per_arch.cuh (clusters, PDL, mbarriers, bulk copies) or convert fp8
# fail to compile as shared units; the others say why they are here. Globs, from the source root.
set(BARACUDA_PER_ARCH_UNITS
  cuda/common/radix_sort.cu       # CUB: per-architecture tuning policies
  cuda/elementwise/cast_from_*.cu # fp8 conversions
  cuda/elementwise/gated_fill.cu  # fp8 conversions
  cuda/embedding/embedding.cu     # 16-bit atomicAdd: one instruction on sm_90, a compare-and-swap loop before
  cuda/kv_cache/kv_cache.cu       # fp8 conversions
  cuda/loss/ce_*.cu               # cross-entropy's cluster kernel
  cuda/norm/norm_*.cu             # the norms' cluster kernels
  cuda/paged_attention/cudnn_paged.cu  # fp8 conversions, as the four below
  cuda/paged_attention/paged_decode.cu
  cuda/paged_attention/paged_prefill_*.cu
  cuda/paged_attention/paged_rowwise.cu
  cuda/rope/rope.cu
  cuda/softmax/softmax_*.cu       # softmax's cluster and bulk-copy kernels
)
