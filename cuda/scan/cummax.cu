// cummax: values (exact) and int64 indices (the shared launcher is in tu_common.cuh).
#include "scan/tu_common.cuh"

namespace baracuda::scan {

void launch_cummax(const ScanLaunch& L, void* stream) { launch_ext<true>(L, stream); }

}  // namespace baracuda::scan
