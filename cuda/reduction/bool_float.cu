// any / all (bool out) and count_nonzero (int64 out) of float inputs. NaN counts as nonzero.
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {

void launch_bool_float(const RedLaunch& L, void* stream) { launch_bool_group<FloatInputs>(L, stream); }

}  // namespace baracuda::reduction
