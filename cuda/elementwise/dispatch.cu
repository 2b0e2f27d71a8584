// Runtime (category, dtype) -> the launcher instantiated for it. The predicates here are the
// single source of truth for has_kernel(), which select() consults.
#include "elementwise/launchers.h"
#include "elementwise/ops.h"

namespace baracuda::elementwise {
using namespace kernels;
using namespace kern;

namespace {
template <class T> constexpr bool covers(EwCategory c) {
  switch (c) {
    case EwCategory::Unary: case EwCategory::Predicate: case EwCategory::Binary:
    case EwCategory::Compare: case EwCategory::Ternary:
      return is_real_v<T>;
    case EwCategory::Cast: case EwCategory::Fill:
      return true;
    default:  // gated and every backward
      return is_fp_v<T>;
  }
}

template <class T> void launch_typed(const EwLaunch& L, void* s) {
  switch (L.category) {
    case EwCategory::Unary: if constexpr (is_real_v<T>) return unary_launch<T>(L, s); break;
    case EwCategory::Predicate: if constexpr (is_real_v<T>) return predicate_launch<T>(L, s); break;
    case EwCategory::Binary: if constexpr (is_real_v<T>) return binary_launch<T>(L, s); break;
    case EwCategory::Compare: if constexpr (is_real_v<T>) return compare_launch<T>(L, s); break;
    case EwCategory::Ternary: if constexpr (is_real_v<T>) return ternary_launch<T>(L, s); break;
    case EwCategory::Cast: return cast_launch<T>(L, s);
    case EwCategory::Fill: return fill_launch<T>(L, s);
    case EwCategory::Gated: if constexpr (is_fp_v<T>) return gated_launch<T>(L, s); break;
    case EwCategory::UnaryBackward: if constexpr (is_fp_v<T>) return unary_backward_launch<T>(L, s); break;
    case EwCategory::BinaryBackward: if constexpr (is_fp_v<T>) return binary_backward_launch<T>(L, s); break;
    case EwCategory::TernaryBackward: if constexpr (is_fp_v<T>) return ternary_backward_launch<T>(L, s); break;
    case EwCategory::GatedBackward: if constexpr (is_fp_v<T>) return gated_backward_launch<T>(L, s); break;
  }
  throw Unsupported(std::string("elementwise: no ") + category_name(L.category) + " kernel for " +
                    dtype_name(L.category == EwCategory::Fill ? L.out_dtype : L.in_dtype[0]));
}

// The dtype that selects the kernel: the data operand (where's is its second input,
// backward kinds' the gradient, fill's the output).
DType key_dtype(EwCategory c, DType in, DType out) {
  return c == EwCategory::Fill ? out : in;
}
}  // namespace

bool has_kernel(EwCategory c, DType in, DType out) {
  const DType k = key_dtype(c, in, out);
  if (is_complex(k)) return false;
  return kernels::dispatch_dtype(k, [&](auto tag) { return covers<typename decltype(tag)::type>(c); });
}

void launch(const EwLaunch& L, void* stream) {
  const DType k = key_dtype(L.category, L.in_dtype[L.category == EwCategory::Ternary && L.kind == int(TernaryKind::Where) ? 1 : 0],
                            L.out_dtype);
  kernels::dispatch_dtype(k, [&](auto tag) { launch_typed<typename decltype(tag)::type>(L, stream); });
}

}  // namespace baracuda::elementwise
