// argmax / argmin of int32 / int64 / uint32 inputs: (value, index) pairs; ties take the first
// index. Output int64 or int32.
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {

void launch_arg_int(const RedLaunch& L, void* stream) { launch_arg_group<WideIntInputs>(L, stream); }

}  // namespace baracuda::reduction
