// The plan vocabulary shared by every family: backends, SKUs, precision guarantees,
// preferences, and a stream handle that needs no CUDA header.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "baracuda/dtype.h"

namespace baracuda {

using StreamHandle = void*;  // a cudaStream_t; nullptr = the legacy default stream

enum class Backend { Bespoke, CublasLt, Cudnn, Cutlass, Nccl, Cufft, Cusolver, Cublas };
const char* backend_name(Backend b);

// What a kernel promises about its numerics. Every field a plan claims is tested.
struct PrecisionGuarantee {
  std::string math;              // how values are computed, e.g. "f32 math, one rounding to bf16"
  DType compute_dtype = DType::Float32;  // type intermediate values are held in
  DType accumulator_dtype = DType::Float32;  // for reductions; == compute for pure maps
  bool deterministic = true;     // same inputs, same launch config -> same bits
  bool bit_stable = true;        // same bits across runs, streams, batch positions
};

// The kernel a plan picked, derived from the code path that actually runs.
struct KernelSku {
  std::string name;       // stable id, e.g. "ew.unary.contiguous.vec16"
  std::string category;   // family, e.g. "elementwise"
  std::string op;         // op kind, e.g. "silu"
  std::vector<DType> dtypes;  // operand dtypes, output first
  std::string layout;     // "contiguous" | "strided" | ...
  std::string arch;       // archs the kernel is compiled for, e.g. "sm_80,sm_90"
  Backend backend = Backend::Bespoke;
  PrecisionGuarantee precision;
  std::string str() const;
};

struct PlanPreference {
  std::vector<Backend> prefer;   // tried first, in order
  std::vector<Backend> forbid;   // never used
  bool require_deterministic = false;
  bool allow_tf32 = false;
  int64_t workspace_limit = -1;  // bytes; -1 = no limit
  // "key=value,...": overrides of the family's tunable choices (its keys are listed in its
  // select(); an unknown key is refused). Empty: the heuristics, or the family's environment
  // variable (BARACUDA_<FAMILY>_CFG, a debug override read by select() only).
  std::string tuning;
  bool allows(Backend b) const;
};

}  // namespace baracuda
