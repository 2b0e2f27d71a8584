// The element types the library speaks. Pure data; no CUDA headers here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace baracuda {

enum class DType : uint8_t {
  Bool, Int8, UInt8, Int16, Int32, Int64, UInt32,
  Float16, BFloat16, Float32, Float64,
  Float8E4M3, Float8E5M2,
  Complex64, Complex128,
};
constexpr int kNumDTypes = 15;

size_t dtype_size(DType t);            // bytes per element
const char* dtype_name(DType t);       // "bf16", "f32", "e4m3", ...
std::optional<DType> dtype_from_name(const std::string& name);

inline bool is_floating(DType t) {     // real floating point, fp8 included
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 ||
         t == DType::Float64 || t == DType::Float8E4M3 || t == DType::Float8E5M2;
}
inline bool is_integer(DType t) {      // integers, bool excluded
  return t == DType::Int8 || t == DType::UInt8 || t == DType::Int16 || t == DType::Int32 ||
         t == DType::Int64 || t == DType::UInt32;
}
inline bool is_complex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }
inline bool is_fp8(DType t) { return t == DType::Float8E4M3 || t == DType::Float8E5M2; }

}  // namespace baracuda
