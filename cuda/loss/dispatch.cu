// Runtime dtype -> the loss launchers instantiated for it (ce_<dtype>.cu).
#include <cuda_runtime.h>

#include <algorithm>

#include "common/dtype_traits.cuh"
#include "loss/loss_launch.h"
#include "plan_util.h"

namespace baracuda::loss {
namespace detail {
template <class T> void ce_launch_typed(const CeLaunch&, cudaStream_t);
template <class T> void pw_launch_typed(const PwLaunch&, cudaStream_t);
template <class T> void nll_launch_typed(const NllLaunch&, cudaStream_t);
}  // namespace detail

bool ce_has_kernel(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}

int64_t ce_workspace_bytes(const CeLaunch& L) {
  const int64_t a = L.dtype == DType::Float64 ? 8 : 4;
  const int64_t body = L.forward ? (3 * L.n * int64_t(L.chunks) + 2 * L.n) * a : 0;
  return 256 + (body + 255) / 256 * 256;
}

int64_t pw_contig_blocks(int64_t n, DType t, int sms) {
  const int64_t per_block = int64_t(kPwThreads) * kPwVecLoadsPerThread * pw_vec_elems(t);
  const int64_t cap = std::min<int64_t>(int64_t(sms > 0 ? sms : 132) * kPwMinBlocks, kPwBlocks);
  return std::max<int64_t>(1, std::min<int64_t>((n + per_block - 1) / per_block, cap));
}

void ce_launch(const CeLaunch& L0, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  CeLaunch L = L0;
  if (L.cluster && current_device_major() < 9) L.cluster = false;  // no clusters: the chunked kernels
  switch (L.dtype) {
    case DType::Float32: return detail::ce_launch_typed<float>(L, st);
    case DType::Float64: return detail::ce_launch_typed<double>(L, st);
    case DType::Float16: return detail::ce_launch_typed<kernels::f16>(L, st);
    case DType::BFloat16: return detail::ce_launch_typed<kernels::bf16>(L, st);
    default: break;
  }
  throw Unsupported(std::string("cross_entropy: no kernel for ") + dtype_name(L.dtype));
}

int64_t pw_workspace_bytes(const PwLaunch& L) {
  const int64_t a = L.dtype == DType::Float64 ? 8 : 4;
  return 256 + (int64_t(L.blocks) * a + 255) / 256 * 256;
}

void pw_launch(const PwLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  switch (L.dtype) {
    case DType::Float32: return detail::pw_launch_typed<float>(L, st);
    case DType::Float64: return detail::pw_launch_typed<double>(L, st);
    case DType::Float16: return detail::pw_launch_typed<kernels::f16>(L, st);
    case DType::BFloat16: return detail::pw_launch_typed<kernels::bf16>(L, st);
    default: break;
  }
  throw Unsupported(std::string("loss: no pointwise kernel for ") + dtype_name(L.dtype));
}

int64_t nll_workspace_bytes(const NllLaunch& L) {
  const int64_t a = L.dtype == DType::Float64 ? 8 : 4;
  return 256 + ((2 + 2 * int64_t(kPwBlocks)) * a + 255) / 256 * 256;
}

void nll_launch(const NllLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  switch (L.dtype) {
    case DType::Float32: return detail::nll_launch_typed<float>(L, st);
    case DType::Float64: return detail::nll_launch_typed<double>(L, st);
    case DType::Float16: return detail::nll_launch_typed<kernels::f16>(L, st);
    case DType::BFloat16: return detail::nll_launch_typed<kernels::bf16>(L, st);
    default: break;
  }
  throw Unsupported(std::string("nll_loss: no kernel for ") + dtype_name(L.dtype));
}

}  // namespace baracuda::loss
