// The tile shape of each head dim (what flash_forward_tile reports) and the dtype's dispatcher.
#pragma once
#include "fa2/flash_fwd.cuh"

namespace baracuda::attention::flash {

// 16 query rows per warp (MT = 1) keeps every head dim in registers without spills; D 256 takes
// 32-key tiles to fit shared memory.
template <int D> struct TileOf;
template <> struct TileOf<64> { static constexpr int BN = 64, MT = 1; };
template <> struct TileOf<96> { static constexpr int BN = 64, MT = 1; };
template <> struct TileOf<128> { static constexpr int BN = 64, MT = 1; };
template <> struct TileOf<256> { static constexpr int BN = 32, MT = 1; };

template <class T, int D> using CfgOf = FwdConfig<T, D, TileOf<D>::BN, TileOf<D>::MT>;

template <class T> void forward(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  switch (g.d) {
    case 64: return launch_forward<T, CfgOf<T, 64>>(g, p, stream);
    case 96: return launch_forward<T, CfgOf<T, 96>>(g, p, stream);
    case 128: return launch_forward<T, CfgOf<T, 128>>(g, p, stream);
    case 256: return launch_forward<T, CfgOf<T, 256>>(g, p, stream);
    default: throw Unsupported("attention: no flash kernel for head dim " + std::to_string(g.d));
  }
}

}  // namespace baracuda::attention::flash
