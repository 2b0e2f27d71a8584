// Tuning knobs: "key=value,key=value", the explicit overrides of a family's tunable choices
// (thread counts, splits, paths), read by select() only: from PlanPreference::tuning, or, when the
// preference has none, from the family's environment variable (a debug override for bench sweeps).
// Every key is checked against the family's list (an unknown key is InvalidArgument naming it and
// where it came from); each family checks its own value ranges. Host-only; no CUDA types.
#pragma once
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "baracuda/errors.h"

namespace baracuda {

struct Knob {
  std::string key, value;
  long long num() const { return std::atoll(value.c_str()); }
};

// "key=value,key=value" -> knobs; an item without '=' gets an empty value (the key check names it).
inline std::vector<Knob> parse_knobs(const std::string& s) {
  std::vector<Knob> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (!item.empty()) out.push_back(eq == std::string::npos ? Knob{item, ""} : Knob{item.substr(0, eq), item.substr(eq + 1)});
    pos = end + 1;
  }
  return out;
}

// The knobs of one select(): `tuning` (the preference's) when not empty, else the variable `env`.
// Throws InvalidArgument when a key is not in `keys` or has no value.
inline std::vector<Knob> tuning_knobs(const std::string& family, const std::string& tuning, const char* env,
                                      std::initializer_list<const char*> keys) {
  const char* from_env = tuning.empty() ? std::getenv(env) : nullptr;
  const std::vector<Knob> knobs = parse_knobs(tuning.empty() ? (from_env ? from_env : "") : tuning);
  const std::string source = tuning.empty() ? std::string("the environment variable ") + env
                                            : std::string("PlanPreference.tuning");
  for (const Knob& k : knobs) {
    bool known = false;
    std::string names;
    for (const char* name : keys) {
      known = known || k.key == name;
      names += (names.empty() ? "" : ", ") + std::string(name);
    }
    if (!known || k.value.empty())
      throw InvalidArgument(family + ": tuning item '" + k.key + (k.value.empty() ? "" : "=" + k.value) + "' in " +
                            source + (known ? " has no value" : " is not a tuning key of this family") +
                            "; expected key=value with a key among: " + names);
  }
  return knobs;
}

}  // namespace baracuda
