// GroupNorm / InstanceNorm / BatchNorm kernels (forward and backward) over [N, C, S] views.
// Included only by channel_norm_<dtype>.cu, which instantiate chan_launch_t<T>. The passes and
// the partition are described in channel_norm_launch.h. Half types compute in f32, f64 in f64;
// every sum has a fixed order (shuffle trees, shared-memory trees, sequential loops), so results
// are deterministic and depend only on the shape.
//
// The passes live in channel_norm_stats.cuh, channel_norm_finalize.cuh and channel_norm_apply.cuh
// (shared pieces in channel_norm_common.cuh); this header holds their launchers.
#pragma once
#include "norm/channel_norm_stats.cuh"
#include "norm/channel_norm_finalize.cuh"
#include "norm/channel_norm_apply.cuh"

namespace baracuda::norm::chan {
using namespace baracuda::kernels;

inline unsigned small_grid(int64_t n) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(chan_ceil_div(n, kChanThreads), kChanMaxGrid)));
}

template <class T, bool BWD> void stats(const ChanNormLaunch& L, cudaStream_t s) {
  if (L.part.columns && L.cvec) {
    stats_columns_vec<T, BWD><<<unsigned(L.part.vgrid), kChanThreads, 0, s>>>(L);
    check_launch("norm.channel.stats_columns_vec");
  } else if (L.part.columns) {
    stats_columns<T, BWD><<<unsigned(L.part.grid), kChanThreads, 0, s>>>(L);
    check_launch("norm.channel.stats_columns");
  } else {
    if (L.vec) stats_planes_vec<T, BWD><<<unsigned(L.part.grid), kChanThreads, 0, s>>>(L);
    else stats_planes_scalar<T, BWD><<<unsigned(L.part.grid), kChanThreads, 0, s>>>(L);
    check_launch("norm.channel.stats_planes");
  }
}
template <class T, bool BWD> void apply(const ChanNormLaunch& L, cudaStream_t s) {
  if (L.part.columns && L.cvec) {
    apply_columns_vec<T, BWD><<<unsigned(L.part.vgrid), kChanThreads, 0, s>>>(L);
    check_launch("norm.channel.apply_columns_vec");
  } else if (L.part.columns) {
    apply_columns<T, BWD><<<unsigned(L.part.grid), kChanThreads, 0, s>>>(L);
    check_launch("norm.channel.apply_columns");
  } else {
    if (L.vec) apply_planes_vec<T, BWD><<<unsigned(L.part.grid), kChanThreads, 0, s>>>(L);
    else apply_planes_scalar<T, BWD><<<unsigned(L.part.grid), kChanThreads, 0, s>>>(L);
    check_launch("norm.channel.apply_planes");
  }
}

}  // namespace baracuda::norm::chan

namespace baracuda::norm {

// The whole pass sequence of one run; N, C, S >= 1 (the plan handles empty tensors).
template <class T> void chan_launch_t(const ChanNormLaunch& L0, void* stream) {
  using namespace chan;
  ChanNormLaunch L = L0;
  const ChanWorkspace w = chan_workspace(L.dtype, L.part, L.N, L.C, L.per_channel);
  char* base = static_cast<char*>(L.workspace);
  L.partials = base;
  L.table = base + w.partials;
  L.aux = base + w.partials + w.table;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  // The finalize / running-table view: with folded columns ([1, C * S, N] in the stats and apply
  // passes) [fold, C, N], so that a channel's partials are fold x P (its S columns) and its count
  // is fold x N; otherwise the same view.
  ChanNormLaunch F = L;
  if (L.fold) {
    F.N = L.fold;
    F.C = L.C / L.fold;
    F.fold = 0;
  }
  const int64_t units = F.per_channel ? F.C : F.N * F.G;
  const unsigned ugrid = unsigned(std::min<int64_t>(units, kChanMaxGrid));
  // Many units with few partials each: a warp per unit (see finalize_forward_warps).
  const int64_t span = F.per_channel ? F.N * F.part.P : (F.C / F.G) * F.part.P;
  const bool warp_units = units >= 1024 && span <= 256;
  const unsigned wgrid = unsigned(std::min<int64_t>(chan_ceil_div(units, kWarps), kChanMaxGrid));
  auto finalize_fwd = [&] {
    if (warp_units) finalize_forward_warps<T><<<wgrid, kChanThreads, 0, s>>>(F, units);
    else finalize_forward<T><<<ugrid, kChanThreads, 0, s>>>(F, units);
    check_launch("norm.channel.finalize_forward");
  };
  auto finalize_bwd = [&] {
    if (warp_units) finalize_backward_warps<T><<<wgrid, kChanThreads, 0, s>>>(F, units);
    else finalize_backward<T><<<ugrid, kChanThreads, 0, s>>>(F, units);
    check_launch("norm.channel.finalize_backward");
  };
  switch (L.mode) {
    case ChanMode::Forward:
      stats<T, false>(L, s);
      finalize_fwd();
      if (L.update_running && !L.per_channel) {
        instance_running<T><<<small_grid(L.C), kChanThreads, 0, s>>>(L);
        check_launch("norm.channel.instance_running");
      }
      apply<T, false>(L, s);
      break;
    case ChanMode::ForwardRunning:
      running_table<T><<<small_grid(F.C), kChanThreads, 0, s>>>(F);
      check_launch("norm.channel.running_table");
      apply<T, false>(L, s);
      break;
    case ChanMode::Backward:
      stats<T, true>(L, s);
      finalize_bwd();
      if (!L.per_channel && (L.gw || L.gb)) {
        group_weight_grads<T><<<small_grid(L.C), kChanThreads, 0, s>>>(L);
        check_launch("norm.channel.group_weight_grads");
      }
      apply<T, true>(L, s);
      break;
    case ChanMode::BackwardRunning:
      running_table<T><<<small_grid(F.C), kChanThreads, 0, s>>>(F);
      check_launch("norm.channel.running_table");
      if (L.gw || L.gb) {
        stats<T, true>(L, s);
        finalize_bwd();
      }
      apply<T, true>(L, s);
      break;
  }
}

}  // namespace baracuda::norm

#define BARACUDA_CHAN_NORM_INSTANTIATE(T) \
  template void baracuda::norm::chan_launch_t<T>(const baracuda::norm::ChanNormLaunch&, void*);
