#include "baracuda/plan.h"

#include <algorithm>
#include <sstream>

namespace baracuda {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::Bespoke: return "bespoke";
    case Backend::CublasLt: return "cublaslt";
    case Backend::Cudnn: return "cudnn";
    case Backend::Cutlass: return "cutlass";
    case Backend::Nccl: return "nccl";
    case Backend::Cufft: return "cufft";
    case Backend::Cusolver: return "cusolver";
    case Backend::Cublas: return "cublas";
  }
  return "?";
}

bool PlanPreference::allows(Backend b) const {
  return std::find(forbid.begin(), forbid.end(), b) == forbid.end();
}

std::string KernelSku::str() const {
  std::ostringstream os;
  os << name << " [" << backend_name(backend) << ", " << layout << ", ";
  for (size_t i = 0; i < dtypes.size(); ++i) os << (i ? "," : "") << dtype_name(dtypes[i]);
  os << ", " << arch << "; " << precision.math << (precision.deterministic ? "; deterministic" : "")
     << "]";
  return os.str();
}

}  // namespace baracuda
