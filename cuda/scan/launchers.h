// The per-translation-unit launchers dispatch.cu routes to (one TU per op group so that the
// build compiles them in parallel). Plain C++: the stream travels as void*.
#pragma once
#include "scan/scan_launch.h"

namespace baracuda::scan {

void launch_sum_float(const ScanLaunch& L, void* stream);  // Cumsum, CumsumBackward: f16, bf16, f32, f64
void launch_sum_int(const ScanLaunch& L, void* stream);    // Cumsum: integers, bool -> int64
void launch_prod(const ScanLaunch& L, void* stream);       // Cumprod: floats, integers, bool
void launch_cummax(const ScanLaunch& L, void* stream);     // Cummax: floats, integers
void launch_cummin(const ScanLaunch& L, void* stream);     // Cummin: floats, integers
void launch_lcse(const ScanLaunch& L, void* stream);       // Logcumsumexp: floats
void launch_bwd(const ScanLaunch& L, void* stream);        // CumprodBackward, LogcumsumexpBackward: floats

}  // namespace baracuda::scan
