// any / all (bool out) and count_nonzero (int64 out) of integer and bool inputs.
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {

void launch_bool_int(const RedLaunch& L, void* stream) { launch_bool_group<IntLikeInputs>(L, stream); }

}  // namespace baracuda::reduction
