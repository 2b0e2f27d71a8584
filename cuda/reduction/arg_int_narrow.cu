// argmax / argmin of int8 / uint8 / int16 inputs: (value, index) pairs; ties take the first
// index. Output int64 or int32.
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {

void launch_arg_int_narrow(const RedLaunch& L, void* stream) { launch_arg_group<NarrowIntInputs>(L, stream); }

}  // namespace baracuda::reduction
