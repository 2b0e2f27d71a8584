// Flash forward instantiations for bf16 (one file per dtype: parallel compiles).
#include "fa2/flash_fwd_tiles.cuh"

namespace baracuda::attention::flash {
template void forward<kernels::bf16>(const Geometry&, const Pointers&, cudaStream_t);
}
