// Typed errors. Every refusal names the argument and what was expected.
#pragma once
#include <stdexcept>
#include <string>

namespace baracuda {

enum class ErrorCode { InvalidArgument, InvalidDType, Unsupported, CudaError, OutOfMemory };

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  ErrorCode code() const noexcept { return code_; }
 private:
  ErrorCode code_;
};
// The caller's mistake: shape, stride, device, aliasing, missing workspace.
struct InvalidArgument : Error {
  explicit InvalidArgument(const std::string& m) : Error(ErrorCode::InvalidArgument, m) {}
};
// The caller's mistake about a dtype (wrong or mismatched element type).
struct InvalidDType : Error {
  explicit InvalidDType(const std::string& m) : Error(ErrorCode::InvalidDType, m) {}
};
// A valid request this build does not cover; the message says what is covered.
struct Unsupported : Error {
  explicit Unsupported(const std::string& m) : Error(ErrorCode::Unsupported, m) {}
};
// A CUDA runtime / library call failed; the message names the call.
struct CudaError : Error {
  explicit CudaError(const std::string& m) : Error(ErrorCode::CudaError, m) {}
};
struct OutOfMemory : Error {
  explicit OutOfMemory(const std::string& m) : Error(ErrorCode::OutOfMemory, m) {}
};

}  // namespace baracuda
