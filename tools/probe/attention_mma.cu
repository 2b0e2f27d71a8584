// The attention_mma harness of tools/probe/probe.sh: the mma.sync flash forward (the FlashAttention-2
// design, cuda/fa2/flash_fwd.cuh; its tile table cuda/fa2/flash_fwd_tiles.cuh) for bf16, built for
// sm_90 (what the GPU tests run through PlanPreference on an H100 / H200); the cases and what each
// prints: attention_fwd.cuh. Arguments: B S H HKV D CAUSAL BM BN [SOFTCAP] (a tile of the table; a
// softcap times the general score kernel), e.g. the plain and the general kernel of m128n64:
//   PROBE_ARGS="8 2048 16 16 128 0 128 64;8 2048 16 16 128 0 128 64 30" bash tools/probe/probe.sh \
//     attention_mma cuda/fa2/flash_fwd.cuh base
#include "attention_fwd.cuh"
#include "fa2/flash_fwd_tiles.cuh"

int main(int argc, char** argv) {
  // the bench's d128 / d64 rows, each head dim's default tile
  return probe::forward_main(
      argc, argv, false,
      [](const baracuda::attention::Geometry& g, const baracuda::attention::Pointers& p) {
        baracuda::attention::flash::forward<baracuda::kernels::bf16>(g, p, nullptr);
      },
      {{8, 2048, 16, 16, 128, 0, 64, 64}, {8, 2048, 16, 16, 128, 1, 64, 64},
       {8, 2048, 32, 32, 64, 0, 64, 64}, {8, 2048, 32, 32, 64, 1, 64, 64}});
}
