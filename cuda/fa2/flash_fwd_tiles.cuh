// The flash forward's tile shapes (the one table: what select offers, what the dispatcher
// instantiates) and the dtype's dispatcher.
#pragma once
#include "fa2/flash_fwd.cuh"

namespace baracuda::attention::flash {

// {head dim, query rows, key rows} per block; the first row of a head dim is its default. bm 64 is
// 16 query rows per warp; bm 128 is 32 (every K / V fragment feeds two mma). m128n64 at D 128 and
// m128n128 at D 64 hold their accumulators in registers with the plain-score kernel (flash_fwd.cuh's
// kPlain); D 256 takes 32-key tiles to fit shared memory.
struct TileRow {
  int d, bm, bn;
};
constexpr TileRow kForwardTiles[] = {{64, 128, 128}, {64, 128, 64},  {64, 64, 64},   {96, 64, 64},
                                     {128, 128, 64}, {128, 64, 64}, {128, 128, 32}, {256, 64, 32}};
constexpr int kNumForwardTiles = int(sizeof(kForwardTiles) / sizeof(kForwardTiles[0]));

template <class T, int I = 0> void forward_tile(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  if constexpr (I < kNumForwardTiles) {
    constexpr TileRow r = kForwardTiles[I];
    if constexpr (head_dim_built(r.d))
      if (g.d == r.d && g.tile_bm == r.bm && g.tile_bn == r.bn)
        return launch_forward<T, FwdConfig<T, r.d, r.bn, r.bm / (16 * kWarps)>>(g, p, stream);
    return forward_tile<T, I + 1>(g, p, stream);
  } else {
    throw Unsupported("attention: no flash forward tile m" + std::to_string(g.tile_bm) + "n" +
                      std::to_string(g.tile_bn) + " for head dim " + std::to_string(g.d));
  }
}

template <class T> void forward(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  forward_tile<T>(g, p, stream);
}

}  // namespace baracuda::attention::flash
