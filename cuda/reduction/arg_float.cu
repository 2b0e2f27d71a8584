// argmax / argmin of f32 / f64 inputs: (value, index) pairs; NaN is the extreme; ties take the
// first index. Output int64 or int32.
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {

void launch_arg_float(const RedLaunch& L, void* stream) { launch_arg_group<WideFloatInputs>(L, stream); }

}  // namespace baracuda::reduction
