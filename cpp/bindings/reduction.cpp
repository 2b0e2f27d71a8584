// Bindings of the reduction family: the op table, descriptor, plan, and a cached functional
// entry point used by baracuda's functional reductions.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <unordered_map>

#include "baracuda/errors.h"
#include "baracuda/reduction.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

const char* const* input_names(int n) {
  static const char* kFwd[] = {"x"};
  static const char* kBwd[] = {"grad_out", "x", "y"};
  return n == 1 ? kFwd : kBwd;
}

void run_plan(const ReductionPlan& plan, nb::handle out, const nb::handle* inputs, int n_inputs, nb::handle workspace,
              nb::handle stream) {
  const int want = plan.num_inputs();
  if (n_inputs != want)
    throw InvalidArgument(plan.sku().op + ": run() got " + std::to_string(n_inputs) + " inputs, the plan takes " +
                          std::to_string(want));
  const char* const* names = input_names(want);
  Imported o = import_tensor(out, "out", true);
  Imported ins[3];
  TensorView views[3];
  for (int i = 0; i < want; ++i) {
    ins[i] = import_tensor(inputs[i], names[i], false);
    views[i] = ins[i].view;
  }
  const Workspace w = import_workspace(workspace, o.view.device);
  const Imported& like = ins[want == 1 ? 0 : 1];
  StreamHandle s = resolve_stream(stream, like);
  {
    nb::gil_scoped_release release;
    plan.run(o.view, views, want, w.data, w.size, s);
  }
  finish_for_framework(like, s);
}

std::vector<int64_t> axes_of(nb::handle axes) {
  std::vector<int64_t> a;
  if (axes.is_none()) return a;
  if (nb::isinstance<nb::int_>(axes)) {
    a.push_back(nb::cast<int64_t>(axes));
    return a;
  }
  for (nb::handle h : axes) a.push_back(nb::cast<int64_t>(h));
  return a;
}

}  // namespace

void init_reduction(nb::module_& m) {
  m.def("reduction_ops", [] {
    nb::list out;
    for (const auto& r : reduction_ops()) {
      nb::dict d;
      d["name"] = r.name;
      d["category"] = red_category_name(r.category);
      nb::list ps;
      for (size_t i = 0; i < r.params.size(); ++i) ps.append(nb::make_tuple(r.params[i], r.defaults[i]));
      d["params"] = ps;
      d["dtypes"] = r.dtypes;
      d["out_dtype"] = r.out_dtype;
      d["backward"] = r.backward;
      d["backward_inputs"] = r.backward_inputs;
      d["doc"] = r.doc;
      out.append(d);
    }
    return out;
  }, "The reduction op table: name, category, params (name, default), dtypes, out_dtype rule, backward op, "
     "backward_inputs, doc.");

  bind_descriptor<ReductionDescriptor>(m, "ReductionDescriptor",
                                  "What to reduce: op name, input spec, output spec, axes (None / empty = all; an int or a list), keepdim, "
                                  "scalar params; backward ops also grad_out (and y). Pure data; hashable.")
      .def("__init__",
           [](ReductionDescriptor* d, std::string op, TensorSpec input, TensorSpec out, nb::handle axes, bool keepdim,
              std::map<std::string, double> params, std::optional<TensorSpec> grad_out, std::optional<TensorSpec> y) {
             new (d) ReductionDescriptor{std::move(op), std::move(input), axes_of(axes), keepdim, std::move(out),
                                         std::move(params), grad_out.value_or(TensorSpec{}), y.value_or(TensorSpec{})};
           },
           "op"_a, "input"_a, "out"_a, "axes"_a.none() = nb::none(), "keepdim"_a = false,
           "params"_a = std::map<std::string, double>{}, "grad_out"_a = nb::none(), "y"_a = nb::none())
      .def_ro("op", &ReductionDescriptor::op)
      .def_ro("input", &ReductionDescriptor::input)
      .def_ro("axes", &ReductionDescriptor::axes)
      .def_ro("keepdim", &ReductionDescriptor::keepdim)
      .def_ro("out", &ReductionDescriptor::out)
      .def_ro("params", &ReductionDescriptor::params)
      .def_ro("grad_out", &ReductionDescriptor::grad_out)
      .def_ro("y", &ReductionDescriptor::y);

  bind_plan<ReductionPlan>(m, "ReductionPlan", "A validated reduction launch: select once, run many times.")
      .def_prop_ro("num_inputs", &ReductionPlan::num_inputs, "1 (x) for forward ops; 2 or 3 (grad_out, x[, y]) for backward ops.")
      .def("workspace_bytes", &ReductionPlan::workspace_bytes, "Bytes of scratch memory run() needs (split passes, backward statistics).")
      .def("run",
           out_and_inputs_run<ReductionPlan>(
               [](const ReductionPlan& plan) {
                 const int n = std::min(plan.num_inputs(), 3);
                 return Names{input_names(n), n};
               },
               run_plan),
           nb::sig("def run(self, *args: object, **operands: object) -> None"),
           "run(out=, x=) or, for a backward, run(out=, grad_out=, x=[, y=]), with workspace= and stream=; or "
           "run(out, *inputs): check the tensors against the descriptor and launch on `stream` (default: the "
           "current stream of the inputs' framework). Never allocates, never synchronizes (except to hand results "
           "to JAX).");

  def_xla_plan_positional<ReductionPlan>(
      m, [](const ReductionPlan& p, const TensorView& out, const TensorView* in, int n, void* ws, int64_t wss,
            StreamHandle s) { p.run(out, in, n, ws, wss, s); });

  m.def("reduction_call",
        [](const std::string& op, nb::handle out, nb::tuple inputs, nb::handle axes, bool keepdim,
           std::map<std::string, double> params, nb::handle stream, nb::handle workspace_alloc) {
          static const char* kFwd[] = {"x"};
          static const char* kBwd[] = {"grad_out", "x", "y"};
          if (inputs.size() < 1 || inputs.size() > 3) throw InvalidArgument(op + ": takes 1 to 3 input tensors");
          const char** names = inputs.size() == 1 ? kFwd : kBwd;
          const std::vector<int64_t> ax = axes_of(axes);
          Imported o = import_tensor(out, "out", true);
          Imported ins[3];
          TensorView views[3];
          std::string key = op;
          key.push_back('\0');
          key.push_back(char(keepdim));
          key.push_back(char(ax.size()));
          key.append(reinterpret_cast<const char*>(ax.data()), sizeof(int64_t) * ax.size());
          append_params(key, params);
          append_key(key, o.view);
          for (size_t i = 0; i < inputs.size(); ++i) {
            ins[i] = import_tensor(inputs[i], names[i], false);
            views[i] = ins[i].view;
            append_key(key, ins[i].view);
          }
          const ReductionPlan plan = plan_cache<ReductionPlan>().get(key, [&] {
            ReductionDescriptor d;
            d.op = op;
            d.axes = ax;
            d.keepdim = keepdim;
            d.out = spec_of(o.view);
            d.params = params;
            if (inputs.size() == 1) {
              d.input = spec_of(views[0]);
            } else {
              d.grad_out = spec_of(views[0]);
              d.input = spec_of(views[1]);
              if (inputs.size() == 3) d.y = spec_of(views[2]);
            }
            return ReductionPlan::select(d);
          });
          if (plan.num_inputs() != int(inputs.size()))
            throw InvalidArgument(op + ": takes " + std::to_string(plan.num_inputs()) + " input tensors, got " +
                                  std::to_string(inputs.size()));
          const Imported& like = ins[inputs.size() == 1 ? 0 : 1];
          StreamHandle s = resolve_stream(stream, like);
          const Workspace ws = allocate_workspace(op, plan.workspace_bytes(), workspace_alloc, like.view.device, s);
          {
            nb::gil_scoped_release release;
            plan.run(o.view, views, int(inputs.size()), ws.data, ws.size, s);
          }
          finish_for_framework(like, s);
        },
        "op"_a, "out"_a, "inputs"_a, "axes"_a.none() = nb::none(), "keepdim"_a = false,
        "params"_a = std::map<std::string, double>{}, "stream"_a = nb::none(), "workspace_alloc"_a = nb::none(),
        "Functional entry: select (cached on op, axes, keepdim, params and operand metadata) and run.");
  m.def("reduction_cache_size", [] { return plan_cache<ReductionPlan>().size(); }, "Plans in the functional reduction cache.");
}

}  // namespace baracuda::py
