// The family registry, build facts and device discovery.
#include "baracuda/registry.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "baracuda/elementwise.h"
#include "baracuda/reduction.h"
#include "baracuda/norm.h"
#include "baracuda/gemm.h"
#include "baracuda/softmax.h"
#include "baracuda/loss.h"
#include "baracuda/scan.h"
#include "baracuda/attention.h"
#include "baracuda/rope.h"
#include "baracuda/kv_cache.h"
#include "baracuda/paged_attention.h"
#include "baracuda/sampling.h"
#include "baracuda/embedding.h"
#include "baracuda/moe.h"

namespace baracuda {

namespace {
std::vector<FamilyInfo> build_families() {
  FamilyInfo ew{"elementwise", "ElementwisePlan",
                "unary, binary (broadcasting), compare, ternary, cast, fill, gated activations; with backward", {}};
  for (const auto& r : elementwise_ops()) {
    const bool backward_row = r.category == EwCategory::UnaryBackward || r.category == EwCategory::BinaryBackward ||
                              r.category == EwCategory::TernaryBackward || r.category == EwCategory::GatedBackward;
    if (backward_row) continue;  // listed through has_backward on the forward row
    ew.ops.push_back(OpCoverage{r.name, category_name(r.category), r.dtypes, {"contiguous", "strided"},
                                Backend::Bespoke, !r.backward.empty()});
  }
  std::vector<FamilyInfo> fams{ew};
  fams.push_back(reduction_family_info());
  fams.push_back(gemm_family_info());
  fams.push_back(softmax_family_info());
  fams.push_back(loss_family_info());
  fams.push_back(norm_family_info());
  fams.push_back(scan_family_info());
  fams.push_back(attention_family_info());
  fams.push_back(rope_family_info());
  fams.push_back(kv_cache_family_info());
  fams.push_back(paged_attention_family_info());
  fams.push_back(sampling_family_info());
  fams.push_back(embedding_family_info());
  fams.push_back(moe_family_info());
  return fams;
}
}  // namespace

const std::vector<FamilyInfo>& families() {
  static const std::vector<FamilyInfo> f = build_families();
  return f;
}

BuildInfo build_info() {
  BuildInfo b;
  b.version = BARACUDA_VERSION;
  b.cuda_archs = BARACUDA_CUDA_ARCHS;
  b.cuda_runtime_version = CUDART_VERSION;
  // BARACUDA_FEATURES: "cudnn=0,nccl=1,...", written by CMake from the toggles.
  const std::string f = BARACUDA_FEATURES;
  for (size_t i = 0; i < f.size();) {
    const size_t comma = std::min(f.find(',', i), f.size());
    const std::string item = f.substr(i, comma - i);
    const size_t eq = item.find('=');
    b.features.push_back({item.substr(0, eq), item.substr(eq + 1) == "1"});
    i = comma + 1;
  }
  return b;
}

namespace {
std::string& probe_message() {
  static std::string m;
  return m;
}
}  // namespace

std::vector<DeviceInfo> devices() {
  std::vector<DeviceInfo> out;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    probe_message() = std::string("no usable CUDA device: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    return out;
  }
  if (n == 0) probe_message() = "no CUDA device is visible";
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out.push_back(DeviceInfo{i, p.name, p.major, p.minor, p.multiProcessorCount, int64_t(p.totalGlobalMem)});
  }
  return out;
}

std::string device_probe_message() {
  devices();
  return probe_message();
}

}  // namespace baracuda
