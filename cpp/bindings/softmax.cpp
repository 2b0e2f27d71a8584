// Bindings of the softmax family: descriptor, plan, and a cached functional entry point.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <unordered_map>

#include "baracuda/errors.h"
#include "baracuda/softmax.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {



std::unordered_map<std::string, SoftmaxPlan>& sm_cache() {
  static auto* cache = new std::unordered_map<std::string, SoftmaxPlan>();
  return *cache;
}

void sm_run(const SoftmaxPlan& plan, nb::handle out, const nb::args& inputs, nb::handle stream) {
  static const char* kNames[] = {"input 0", "input 1"};
  if (inputs.size() < 1 || inputs.size() > 2)
    throw InvalidArgument(plan.sku().op + ": run() takes 1 (forward) or 2 (backward) inputs, got " +
                          std::to_string(inputs.size()));
  Imported o = import_tensor(out, "out", true);
  Imported ins[2];
  TensorView views[2];
  const int n = int(inputs.size());
  for (int i = 0; i < n; ++i) {
    ins[i] = import_tensor(inputs[i], kNames[i], false);
    views[i] = ins[i].view;
  }
  StreamHandle s = resolve_stream(stream, ins[0]);
  {
    nb::gil_scoped_release release;
    plan.run(o.view, views, n, s);
  }
  finish_for_framework(ins[0], s);
}

}  // namespace

void init_softmax(nb::module_& m) {
  nb::class_<SoftmaxDescriptor>(m, "SoftmaxDescriptor",
                                "Softmax / log-softmax (forward: inputs [x]; backward: inputs [grad_out, y]) "
                                "along `axis`. Pure data; hashable; the plan-cache key.")
      .def("__init__",
           [](SoftmaxDescriptor* d, std::string op, std::vector<TensorSpec> inputs, int64_t axis, TensorSpec out) {
             new (d) SoftmaxDescriptor{std::move(op), std::move(inputs), axis, std::move(out)};
           },
           "op"_a, "inputs"_a, "axis"_a, "out"_a)
      .def_ro("op", &SoftmaxDescriptor::op)
      .def_ro("inputs", &SoftmaxDescriptor::inputs)
      .def_ro("axis", &SoftmaxDescriptor::axis)
      .def_ro("out", &SoftmaxDescriptor::out)
      .def("__eq__", [](const SoftmaxDescriptor& a, const SoftmaxDescriptor& b) { return a == b; })
      .def("__hash__", [](const SoftmaxDescriptor& d) { return std::hash<std::string>{}(d.str()); })
      .def("__repr__", &SoftmaxDescriptor::str);

  nb::class_<SoftmaxPlan>(m, "SoftmaxPlan", "A validated softmax launch: select once, run many times.")
      .def_static("select",
                  [](const SoftmaxDescriptor& d, std::optional<PlanPreference> pref) {
                    return SoftmaxPlan::select(d, pref.value_or(PlanPreference{}));
                  },
                  "desc"_a, "preference"_a = nb::none(),
                  "Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.")
      .def_prop_ro("sku", &SoftmaxPlan::sku, "The kernel this plan runs, and its precision guarantee.")
      .def_prop_ro("descriptor", &SoftmaxPlan::descriptor)
      .def("workspace_bytes", &SoftmaxPlan::workspace_bytes, "Always 0: softmax needs no workspace.")
      .def("run", &sm_run, "out"_a, "inputs"_a, "stream"_a = nb::none(),
           "run(out, x) or run(grad_x, grad_out, y): check the tensors against the descriptor and launch on "
           "`stream` (default: the current stream of the inputs' framework). Never allocates.");

  m.def("softmax_call",
        [](const std::string& op, nb::handle out, nb::tuple inputs, int64_t axis, nb::handle stream) {
          static const char* kNames[] = {"input 0", "input 1"};
          if (inputs.size() < 1 || inputs.size() > 2) throw InvalidArgument(op + ": takes 1 or 2 inputs");
          Imported o = import_tensor(out, "out", true);
          Imported ins[2];
          TensorView views[2];
          std::string key = op;
          key.push_back('\0');
          key.append(reinterpret_cast<const char*>(&axis), sizeof axis);
          append_key(key, o.view);
          for (size_t i = 0; i < inputs.size(); ++i) {
            ins[i] = import_tensor(inputs[i], kNames[i], false);
            views[i] = ins[i].view;
            append_key(key, views[i]);
          }
          auto& cache = sm_cache();
          auto it = cache.find(key);
          if (it == cache.end()) {
            if (cache.size() >= 4096) cache.clear();
            SoftmaxDescriptor d{op, {}, axis, spec_of(o.view)};
            for (size_t i = 0; i < inputs.size(); ++i) d.inputs.push_back(spec_of(views[i]));
            it = cache.emplace(key, SoftmaxPlan::select(d)).first;
          }
          const SoftmaxPlan plan = it->second;
          StreamHandle s = resolve_stream(stream, ins[0]);
          {
            nb::gil_scoped_release release;
            plan.run(o.view, views, int(inputs.size()), s);
          }
          finish_for_framework(ins[0], s);
        },
        "op"_a, "out"_a, "inputs"_a, "axis"_a, "stream"_a = nb::none(),
        "Functional entry: select (cached on op, axis and operand metadata) and run.");
  m.def("softmax_cache_size", [] { return sm_cache().size(); }, "Plans in the softmax functional cache.");
}

}  // namespace baracuda::py
