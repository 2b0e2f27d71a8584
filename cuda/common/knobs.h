// Tuning knobs: "key=value,key=value" in an environment variable, read by select() (and by the
// decode GEMV at launch) so that one process can time several variants (bench --sweep modes).
// Host-only; no CUDA types. An unset or empty variable gives no knobs; items without '=' are
// skipped; each family checks its own keys and value ranges.
#pragma once
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace baracuda {

struct Knob {
  std::string key, value;
  long long num() const { return std::atoll(value.c_str()); }
};

inline std::vector<Knob> env_knobs(const char* name) {
  std::vector<Knob> out;
  const char* env = std::getenv(name);
  if (env == nullptr) return out;
  const std::string s(env);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (eq != std::string::npos) out.push_back({item.substr(0, eq), item.substr(eq + 1)});
    pos = end + 1;
  }
  return out;
}

}  // namespace baracuda
