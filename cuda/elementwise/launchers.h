// Per-category launchers, explicitly instantiated per dtype in small translation units
// (unary_f32.cu, binary_int.cu, ...) so nvcc builds them in parallel. dispatch.cu maps a
// runtime DType onto them; the Covers<> traits below say which instantiations exist, so a
// mismatch is a link error, not a runtime surprise.
#pragma once
#include <type_traits>

#include "common/dtype_traits.cuh"
#include "elementwise/elementwise_launch.h"

namespace baracuda::elementwise::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

template <class T> constexpr bool is_fp_v = std::is_floating_point_v<T> || is_half_v<T>;  // f16 bf16 f32 f64
template <class T> constexpr bool is_intbool_v = std::is_integral_v<T>;                   // ints and bool
template <class T> constexpr bool is_real_v = is_fp_v<T> || is_intbool_v<T>;             // all but fp8

template <class T> void unary_launch(const elementwise::EwLaunch& L, void* stream);           // is_real_v
template <class T> void predicate_launch(const elementwise::EwLaunch& L, void* stream);       // is_real_v
template <class T> void binary_launch(const elementwise::EwLaunch& L, void* stream);          // is_real_v
template <class T> void compare_launch(const elementwise::EwLaunch& L, void* stream);         // is_real_v
template <class T> void ternary_launch(const elementwise::EwLaunch& L, void* stream);         // is_real_v
template <class Tin> void cast_launch(const elementwise::EwLaunch& L, void* stream);          // all 13
template <class T> void fill_launch(const elementwise::EwLaunch& L, void* stream);            // all 13
template <class T> void gated_launch(const elementwise::EwLaunch& L, void* stream);           // is_fp_v
template <class T> void unary_backward_launch(const elementwise::EwLaunch& L, void* stream);  // is_fp_v
template <class T> void binary_backward_launch(const elementwise::EwLaunch& L, void* stream); // is_fp_v
template <class T> void ternary_backward_launch(const elementwise::EwLaunch& L, void* stream);// is_fp_v
template <class T> void gated_backward_launch(const elementwise::EwLaunch& L, void* stream);  // is_fp_v

// The accumulation type of a gradient summed over broadcast dimensions.
template <class T> using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

}  // namespace baracuda::elementwise::kern
