#include "baracuda/dtype.h"

#include <cstring>

namespace baracuda {

namespace {
struct DTypeRow { DType t; const char* name; size_t size; };
constexpr DTypeRow kRows[kNumDTypes] = {
    {DType::Bool, "bool", 1},        {DType::Int8, "int8", 1},        {DType::UInt8, "uint8", 1},
    {DType::Int16, "int16", 2},      {DType::Int32, "int32", 4},      {DType::Int64, "int64", 8},
    {DType::UInt32, "uint32", 4},    {DType::Float16, "float16", 2},  {DType::BFloat16, "bfloat16", 2},
    {DType::Float32, "float32", 4},  {DType::Float64, "float64", 8},  {DType::Float8E4M3, "float8_e4m3fn", 1},
    {DType::Float8E5M2, "float8_e5m2", 1}, {DType::Complex64, "complex64", 8}, {DType::Complex128, "complex128", 16},
};
}  // namespace

size_t dtype_size(DType t) { return kRows[static_cast<int>(t)].size; }
const char* dtype_name(DType t) { return kRows[static_cast<int>(t)].name; }
std::optional<DType> dtype_from_name(const std::string& name) {
  for (const auto& r : kRows)
    if (name == r.name) return r.t;
  return std::nullopt;
}

}  // namespace baracuda
