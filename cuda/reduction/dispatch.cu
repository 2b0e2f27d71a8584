// Runtime (kind, dtype) -> the translation unit that holds the kernels; workspace units.
#include "reduction/launchers.h"
#include "reduction/reducers.cuh"
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {
using namespace kernels;
using namespace kern;

void launch(const RedLaunch& L, void* stream) {
  const bool fp = is_floating(L.in_dtype);
  switch (L.kind) {
    case RedKind::Sum: return fp ? launch_sum_float(L, stream) : launch_sum_int(L, stream);
    case RedKind::Mean: return launch_sum_float(L, stream);
    case RedKind::Prod: return launch_prod(L, stream);
    case RedKind::Amax: case RedKind::Amin: return launch_extreme(L, stream);
    case RedKind::Norm2: case RedKind::Logsumexp: return launch_norm(L, stream);
    case RedKind::Var: case RedKind::Std: return launch_var(L, stream);
    case RedKind::Argmax: case RedKind::Argmin:
      switch (L.in_dtype) {
        case DType::Float16: case DType::BFloat16: return launch_arg_half(L, stream);
        case DType::Int8: case DType::UInt8: case DType::Int16: return launch_arg_int_narrow(L, stream);
        default: return fp ? launch_arg_float(L, stream) : launch_arg_int(L, stream);
      }
    case RedKind::Any: case RedKind::All: case RedKind::CountNonzero:
      return fp ? launch_bool_float(L, stream) : launch_bool_int(L, stream);
    default: return launch_stats(L, stream);
  }
}

void launch_backward(const BwdLaunch& L, void* stream) {
  if (L.has_pre) launch(L.pre, stream);
  launch_bwd_map(L, stream);
}

namespace {
template <class T> int64_t state_bytes_t(RedKind k) {
  switch (k) {
    case RedKind::Sum: case RedKind::Mean: return sizeof(typename SumR<T, T>::State);
    case RedKind::Prod: return sizeof(typename ProdR<T, T>::State);
    case RedKind::Amax: case RedKind::Amin: return sizeof(typename ExtremeR<T, T, true>::State);
    case RedKind::Norm2: return sizeof(typename Norm2R<T, T>::State);
    case RedKind::Logsumexp: return sizeof(typename LogSumExpR<T, T>::State);
    case RedKind::Var: case RedKind::Std: return sizeof(typename VarR<T, T>::State);
    case RedKind::Argmax: case RedKind::Argmin:
      return sizeof(typename ArgR<T, true>::State);
    case RedKind::Any: case RedKind::All: return sizeof(typename BoolR<T, bool, 0>::State);
    case RedKind::CountNonzero: return sizeof(typename BoolR<T, int64_t, 2>::State);
    case RedKind::MeanStat: return sizeof(typename MeanStatR<T>::State);
    case RedKind::MaxCountStat: case RedKind::MinCountStat: return sizeof(typename ExtremeCountStatR<T, true>::State);
    case RedKind::ProdZeroStat: return sizeof(typename ProdZeroStatR<T>::State);
  }
  return 32;
}
}  // namespace

int64_t state_bytes(RedKind k, DType in) {
  if (is_complex(in)) return 32;
  return dispatch_dtype(in, [&](auto tag) -> int64_t {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp8_v<T>) return 32;
    else return state_bytes_t<T>(k);
  });
}

}  // namespace baracuda::reduction
