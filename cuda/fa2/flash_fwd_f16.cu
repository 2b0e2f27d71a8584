// Flash forward instantiations for f16 (one file per dtype: parallel compiles).
#include "fa2/flash_fwd_tiles.cuh"

namespace baracuda::attention::flash {
template void forward<kernels::f16>(const Geometry&, const Pointers&, cudaStream_t);
}
