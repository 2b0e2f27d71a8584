// Runtime kind -> the translation unit that holds the kernels; workspace units.
#include "scan/tu_common.cuh"

namespace baracuda::scan {
using namespace kernels;
using namespace kern;

void launch(const ScanLaunch& L, void* stream) {
  const bool fp = is_floating(L.in_dtype);
  switch (L.kind) {
    case ScanKind::Cumsum: return fp ? launch_sum_float(L, stream) : launch_sum_int(L, stream);
    case ScanKind::CumsumBackward: return launch_sum_float(L, stream);
    case ScanKind::Cumprod: return launch_prod(L, stream);
    case ScanKind::Cummax: return launch_cummax(L, stream);
    case ScanKind::Cummin: return launch_cummin(L, stream);
    case ScanKind::Logcumsumexp: return launch_lcse(L, stream);
    default: return launch_bwd(L, stream);
  }
}

int64_t state_bytes(ScanKind k, DType in, DType out) {
  if (!is_floating(in)) {
    switch (k) {
      case ScanKind::Cummax: case ScanKind::Cummin: return sizeof(ExtOp<int64_t, true>::State);
      default: return sizeof(int64_t);
    }
  }
  const bool f64 = in == DType::Float64 || out == DType::Float64;
  switch (k) {
    case ScanKind::Cumsum: case ScanKind::Cumprod: case ScanKind::CumsumBackward:
      return f64 ? 8 : 4;
    case ScanKind::Logcumsumexp:
      return f64 ? sizeof(LcseOp<double>::State) : sizeof(LcseOp<float>::State);
    case ScanKind::Cummax: case ScanKind::Cummin:
      return f64 ? sizeof(ExtOp<double, true>::State) : sizeof(ExtOp<float, true>::State);
    case ScanKind::LogcumsumexpBackward:
      return f64 ? sizeof(LcseBwdOp<double>::State) : sizeof(LcseBwdOp<float>::State);
    case ScanKind::CumprodBackward:
      return f64 ? sizeof(CumprodBwdOp<double>::State) : sizeof(CumprodBwdOp<float>::State);
  }
  return 64;
}

}  // namespace baracuda::scan
