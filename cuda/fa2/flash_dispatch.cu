// The flash kernels' entry points of the launch contract (attention_launch.h).
#include "fa2/flash_fwd_tiles.cuh"

namespace baracuda::attention {
namespace flash {  // compiled in flash_fwd_<dtype>.cu
extern template void forward<kernels::bf16>(const Geometry&, const Pointers&, cudaStream_t);
extern template void forward<kernels::f16>(const Geometry&, const Pointers&, cudaStream_t);
}  // namespace flash

FlashTile flash_forward_tile(DType dtype, int64_t d, int64_t dv) {
  if ((dtype != DType::BFloat16 && dtype != DType::Float16) || d != dv) return {};
  using flash::CfgOf;
  using T = kernels::bf16;  // the tile shape does not depend on which 16-bit type
  switch (d) {
    case 64: return {CfgOf<T, 64>::BM, CfgOf<T, 64>::BN};
    case 96: return {CfgOf<T, 96>::BM, CfgOf<T, 96>::BN};
    case 128: return {CfgOf<T, 128>::BM, CfgOf<T, 128>::BN};
    case 256: return {CfgOf<T, 256>::BM, CfgOf<T, 256>::BN};
    default: return {};
  }
}

void flash_forward(const Geometry& g, const Pointers& p, void* stream) {
  if (g.batch == 0 || g.sq == 0 || g.hq == 0) return;
  auto st = static_cast<cudaStream_t>(stream);
  if (g.dtype == DType::BFloat16) flash::forward<kernels::bf16>(g, p, st);
  else flash::forward<kernels::f16>(g, p, st);
}

}  // namespace baracuda::attention
