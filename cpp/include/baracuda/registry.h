// The registry of plan families: what each covers, for docs, `python -m baracuda` and tests.
#pragma once
#include <string>
#include <vector>

#include "baracuda/dtype.h"
#include "baracuda/plan.h"

namespace baracuda {

struct OpCoverage {
  std::string op;
  std::string kind;               // sub-category, e.g. "unary", "binary"
  std::vector<DType> dtypes;
  std::vector<std::string> layouts;
  Backend backend = Backend::Bespoke;
  bool has_backward = false;
};

struct FamilyInfo {
  std::string name;               // "elementwise"
  std::string plan_class;         // "ElementwisePlan"
  std::string summary;
  std::vector<OpCoverage> ops;
};

const std::vector<FamilyInfo>& families();

// Build facts: version, compiled archs, feature toggles.
struct BuildInfo {
  std::string version;
  std::string cuda_archs;          // "80,90"
  int cuda_runtime_version;        // e.g. 13000
  std::vector<std::pair<std::string, bool>> features;  // toggle name -> compiled in
};
BuildInfo build_info();

// Devices visible to the runtime; empty (not an error) without a driver or GPU.
struct DeviceInfo {
  int ordinal;
  std::string name;
  int sm_major, sm_minor;
  int multiprocessors;
  int64_t total_memory;
};
std::vector<DeviceInfo> devices();
std::string device_probe_message();  // why devices() is empty, or "" if it isn't

}  // namespace baracuda
