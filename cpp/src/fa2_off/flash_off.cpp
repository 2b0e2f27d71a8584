// The flash kernels' entry points (cuda/attention/attention_launch.h) in a build without them
// (BARACUDA_ENABLE_FA2=OFF): no case is covered, so no plan selects them, and the launchers refuse if
// reached. The same interface as cuda/fa2/flash_dispatch.cu, so the plan has one code path (the
// library must still resolve every symbol it names).
#include "attention/attention_launch.h"
#include "baracuda/errors.h"

namespace baracuda::attention {

namespace {
[[noreturn]] void no_flash() { throw Unsupported("attention: this build has no flash kernels (BARACUDA_ENABLE_FA2=OFF)"); }
}  // namespace

std::vector<FlashTile> flash_forward_tiles(DType, int64_t, int64_t, const ForwardTileRule&) { return {}; }
std::vector<FlashTile> flash_backward_tiles(DType, int64_t, int64_t) { return {}; }
void flash_forward(const Geometry&, const Pointers&, void*) { no_flash(); }
void flash_backward(const Geometry&, const Pointers&, void*) { no_flash(); }

}  // namespace baracuda::attention
