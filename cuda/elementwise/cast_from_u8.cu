// Casts from u8 to every dtype, and the bit copies every cast unit shares.
#include "elementwise/cast_impl.cuh"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)
template void cast_launch<uint8_t>(const elementwise::EwLaunch&, void*);
// every cast unit's bit copies (cast_impl.cuh)
template void copy_bits_launch<uint8_t>(const elementwise::EwLaunch&, void*);
template void copy_bits_launch<uint16_t>(const elementwise::EwLaunch&, void*);
template void copy_bits_launch<uint32_t>(const elementwise::EwLaunch&, void*);
template void copy_bits_launch<uint64_t>(const elementwise::EwLaunch&, void*);
}  // namespace baracuda::elementwise::kern
