// The per-translation-unit launchers dispatch.cu routes to (one TU per op group so that the
// build compiles them in parallel). Plain C++: the stream travels as void*.
#pragma once
#include "reduction/reduction_launch.h"

namespace baracuda::reduction {

void launch_sum_float(const RedLaunch& L, void* stream);   // Sum, Mean: f16, bf16, f32, f64
void launch_sum_int(const RedLaunch& L, void* stream);     // Sum: integers, bool
void launch_prod(const RedLaunch& L, void* stream);        // Prod: floats, integers, bool
void launch_extreme(const RedLaunch& L, void* stream);     // Amax, Amin: floats, integers
void launch_norm(const RedLaunch& L, void* stream);        // Norm2, Logsumexp: floats
void launch_var(const RedLaunch& L, void* stream);         // Var, Std: floats
void launch_arg_half(const RedLaunch& L, void* stream);        // Argmax, Argmin: f16, bf16
void launch_arg_float(const RedLaunch& L, void* stream);       // Argmax, Argmin: f32, f64
void launch_arg_int(const RedLaunch& L, void* stream);         // Argmax, Argmin: int32, int64, uint32
void launch_arg_int_narrow(const RedLaunch& L, void* stream);  // Argmax, Argmin: int8, uint8, int16
void launch_bool_float(const RedLaunch& L, void* stream);  // Any, All, CountNonzero: floats
void launch_bool_int(const RedLaunch& L, void* stream);    // Any, All, CountNonzero: integers, bool
void launch_stats(const RedLaunch& L, void* stream);       // MeanStat, Max/MinCountStat, ProdZeroStat: floats
void launch_bwd_map(const BwdLaunch& L, void* stream);     // the backward broadcast maps: floats

}  // namespace baracuda::reduction
