// The flash kernels' entry points of the launch contract (attention_launch.h).
#include <algorithm>

#include "fa2/flash_bwd.cuh"
#include "fa2/flash_fwd_tiles.cuh"

namespace baracuda::attention {
namespace flash {  // compiled in flash_fwd_<dtype>.cu
extern template void forward<kernels::bf16>(const Geometry&, const Pointers&, cudaStream_t);
extern template void forward<kernels::f16>(const Geometry&, const Pointers&, cudaStream_t);
extern template void backward<kernels::bf16>(const Geometry&, const Pointers&, cudaStream_t);  // flash_bwd_<dtype>.cu
extern template void backward<kernels::f16>(const Geometry&, const Pointers&, cudaStream_t);
}  // namespace flash

std::vector<FlashTile> flash_forward_tiles(DType dtype, int64_t d, int64_t dv, const ForwardTileRule& rule) {
  std::vector<FlashTile> out, mma;
  if ((dtype != DType::BFloat16 && dtype != DType::Float16) || d != dv) return out;
  for (const flash::TileRow& r : flash::kForwardTiles)
    if (r.d == d && flash::head_dim_built(r.d)) mma.push_back({r.bm, r.bn});
  // Tiles that keep two blocks on an SM first: m128n128 at d 64 holds 55 KB of shared memory, so an
  // sm_86 / sm_89 (100 KB per SM) would run one block of four warps; there m128n64 (37 KB), the d 64
  // default before session 50, leads again. A block also reserves 1 KB.
  if (rule.smem_per_sm > 0)
    std::stable_partition(mma.begin(), mma.end(), [&](const FlashTile& t) {
      return 2 * (flash::forward_smem_bytes(int(d), t.bm, t.bn) + 1024) <= rule.smem_per_sm;
    });
  // The table's first is for a plain score over long spans; m64n64 first for a general score or for d 64
  // under a short mask (attention_launch.h says why).
  const bool m64n64_first = !rule.plain_score || (rule.short_masked_span && d <= 64);
  if (m64n64_first) {
    const auto m64n64 =
        std::find_if(mma.begin(), mma.end(), [](const FlashTile& t) { return t.bm == 64 && t.bn == 64; });
    if (m64n64 != mma.end()) std::rotate(mma.begin(), m64n64, m64n64 + 1);
  }
  // On sm_90 the Hopper kernels first: the warp-specialized w128n128 (1.3-1.6x w64n64 where its loads
  // go by TMA) or the one-warpgroup w64n64; both beat every mma.sync tile at d128 on a plain score. A
  // general score, or d 64 under a short mask, puts the mma.sync m64n64 first (docs/benchmark-notes.md,
  // attention, sessions 48 and 49).
  if (flash_sm90_supported(dtype, d, dv)) {
    const FlashTile w64n64{64, 64, true}, w128n64{128, 64, true}, w128n128{128, 128, true};
    if (d == 256) out.push_back(w128n64);  // at d256 the warp-specialized tile (flash_fwd_sm90.cuh)
    else if (rule.warp_specialized_first) out.insert(out.end(), {w128n128, w64n64, w128n64});
    else out.insert(out.end(), {w64n64, w128n64, w128n128});
  }
  out.insert(m64n64_first ? out.begin() : out.end(), mma.begin(), mma.end());
  return out;
}

void flash_forward(const Geometry& g, const Pointers& p, void* stream) {
  if (g.batch == 0 || g.sq == 0 || g.hq == 0) return;
  if (g.tile_wgmma) return flash_sm90_forward(g, p, stream);
  auto st = static_cast<cudaStream_t>(stream);
  if (g.dtype == DType::BFloat16) flash::forward<kernels::bf16>(g, p, st);
  else flash::forward<kernels::f16>(g, p, st);
}

std::vector<FlashTile> flash_backward_tiles(DType dtype, int64_t d, int64_t dv) {
  std::vector<FlashTile> out;
  if ((dtype != DType::BFloat16 && dtype != DType::Float16) || d != dv || !(d == 64 || d == 96 || d == 128) ||
      !flash::head_dim_built(int(d)))
    return out;
  if (flash_sm90_supported(dtype, d, dv)) out.push_back({64, 64, true});
  out.push_back({64, 64});
  return out;
}

void flash_backward(const Geometry& g, const Pointers& p, void* stream) {
  if (g.batch == 0 || g.hq == 0) return;
  backward_delta(g, p, stream);
  auto st = static_cast<cudaStream_t>(stream);
  if (g.tile_wgmma) flash_sm90_backward(g, p, stream);
  else if (g.dtype == DType::BFloat16) flash::backward<kernels::bf16>(g, p, st);
  else flash::backward<kernels::f16>(g, p, st);
  backward_sinks(g, p, stream);
}

}  // namespace baracuda::attention
