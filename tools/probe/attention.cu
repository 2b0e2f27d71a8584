// The attention harness of tools/probe/probe.sh: the sm_90a flash forward of cuda/fa2/flash_fwd_sm90.cuh
// (a variant of that file); the cases and what each prints: attention_fwd.cuh.
// Arguments: B S H HKV D CAUSAL BM BN [SOFTCAP] (the tile: 64 64, 128 64, or 128 128 the
// warp-specialized), e.g.
//   PROBE_ARGS="8 2048 16 16 128 0 64 64;4 4096 32 8 128 1 64 64" bash tools/probe/probe.sh attention \
//     cuda/fa2/flash_fwd_sm90.cuh base 'b3=s/__launch_bounds__(Cfg::kThreads)/__launch_bounds__(Cfg::kThreads, 3)/'
#include "attention_fwd.cuh"

namespace baracuda {
int current_device_cc() { return 90; }  // flash_sm90_supported's (the harness runs on sm_90)
}  // namespace baracuda

int main(int argc, char** argv) {
  // the bench's d128 rows, the default tile
  return probe::forward_main(
      argc, argv, true,
      [](const baracuda::attention::Geometry& g, const baracuda::attention::Pointers& p) {
        baracuda::attention::flash_sm90_forward(g, p, nullptr);
      },
      {{8, 2048, 16, 16, 128, 0, 64, 64}, {8, 2048, 16, 16, 128, 1, 64, 64},
       {4, 4096, 32, 8, 128, 0, 64, 64}, {4, 4096, 32, 8, 128, 1, 64, 64}});
}
