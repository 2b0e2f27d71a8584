// Umbrella header for C++ users of the core.
#pragma once
#include "baracuda/dtype.h"
#include "baracuda/elementwise.h"
#include "baracuda/loss.h"
#include "baracuda/errors.h"
#include "baracuda/norm.h"
#include "baracuda/gemm.h"
#include "baracuda/plan.h"
#include "baracuda/reduction.h"
#include "baracuda/registry.h"
#include "baracuda/runtime.h"
#include "baracuda/softmax.h"
#include "baracuda/tensor.h"
