// The sm_90a flash backward's bf16 instantiation (one file per dtype: parallel compiles).
#if defined(BARACUDA_HAVE_CUTLASS)
#include "fa2/flash_bwd_sm90.cuh"

namespace baracuda::attention::flash {
template void backward_sm90<kernels::bf16>(const Geometry&, const Pointers&, cudaStream_t);
}
#endif
