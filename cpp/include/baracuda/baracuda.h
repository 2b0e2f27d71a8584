// Umbrella header for C++ users of the core.
#pragma once
#include "baracuda/dtype.h"
#include "baracuda/elementwise.h"
#include "baracuda/errors.h"
#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/runtime.h"
#include "baracuda/tensor.h"
