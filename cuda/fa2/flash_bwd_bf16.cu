// Flash backward instantiations for bf16 (one file per dtype: parallel compiles).
#include "fa2/flash_bwd.cuh"

namespace baracuda::attention::flash {
template void backward<kernels::bf16>(const Geometry&, const Pointers&, cudaStream_t);
}
