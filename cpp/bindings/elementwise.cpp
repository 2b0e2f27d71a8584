// Bindings of the elementwise family: the op table, descriptor, plan, and a cached
// functional entry point used by baracuda's functional ops.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <unordered_map>

#include "baracuda/elementwise.h"
#include "baracuda/errors.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

// The operand names of an op's inputs, as its plan names them in errors.
const char* const* operand_names(const std::string& op, size_t n) {
  static const char* kUnary[] = {"x"};
  static const char* kBinary[] = {"a", "b"};
  static const char* kTernary[] = {"x0", "x1", "x2"};
  static const char* kWhere[] = {"cond", "a", "b"};
  static const char* kBackward[] = {"grad_out", "x0", "x1", "x2"};
  static const char* kUnaryBackward[] = {"grad_out", "x"};
  static const char* kGeneric[] = {"input 0", "input 1", "input 2", "input 3"};
  const EwOpInfo* info = find_elementwise_op(op);
  if (!info || size_t(info->arity) != n) return kGeneric;
  switch (info->category) {
    case EwCategory::UnaryBackward: case EwCategory::GatedBackward: return kUnaryBackward;
    case EwCategory::BinaryBackward: case EwCategory::TernaryBackward: return kBackward;
    case EwCategory::Ternary: return op == "where" ? kWhere : kTernary;
    default: return n == 1 ? kUnary : (n == 2 ? kBinary : kGeneric);
  }
}

// Imports out and inputs, checks, launches with the GIL released, hands off to JAX.
void run_plan(const ElementwisePlan& plan, nb::handle out, const nb::handle* inputs, int n_inputs, nb::handle workspace,
              nb::handle stream) {
  const int n = std::min(n_inputs, 4);
  const char* const* names = operand_names(plan.descriptor().op, size_t(n));
  Imported ins[4];
  TensorView views[4];
  for (int i = 0; i < n; ++i) {
    ins[i] = import_tensor(inputs[i], names[i], false);
    views[i] = ins[i].view;
  }
  Imported o = import_tensor(out, "out", true);
  const Imported& like = n == 0 ? o : ins[0];
  const Workspace w = import_workspace(workspace, o.view.device);
  StreamHandle s = resolve_stream(stream, like);
  if (n_inputs > 4) throw InvalidArgument(plan.sku().op + ": run() got " + std::to_string(n_inputs) + " inputs");
  {
    nb::gil_scoped_release release;
    plan.run(o.view, views, n, w.data, w.size, s);
  }
  finish_for_framework(like, s);
}

// The functional path's plan cache: key = op, params and every operand's metadata.
}  // namespace

void init_elementwise(nb::module_& m) {
  m.def("elementwise_ops", [] {
    nb::list out;
    for (const auto& r : elementwise_ops()) {
      nb::dict d;
      d["name"] = r.name;
      d["category"] = category_name(r.category);
      d["arity"] = r.arity;
      nb::list ps;
      for (size_t i = 0; i < r.params.size(); ++i) ps.append(nb::make_tuple(r.params[i], r.defaults[i]));
      d["params"] = ps;
      d["dtypes"] = r.dtypes;
      d["backward"] = r.backward;
      d["doc"] = r.doc;
      out.append(d);
    }
    return out;
  }, "The elementwise op table: name, category, arity, params (name, default), dtypes, backward op, doc.");

  bind_descriptor<ElementwiseDescriptor>(m, "ElementwiseDescriptor",
                                    "What to compute: op name, input specs, output spec, scalar params. Pure data; "
                                    "hashable; the plan-cache key.")
      .def("__init__",
           [](ElementwiseDescriptor* d, std::string op, std::vector<TensorSpec> inputs, TensorSpec out,
              std::map<std::string, double> params) {
             new (d) ElementwiseDescriptor{std::move(op), std::move(inputs), std::move(out), std::move(params)};
           },
           "op"_a, "inputs"_a, "out"_a, "params"_a = std::map<std::string, double>{})
      .def_ro("op", &ElementwiseDescriptor::op)
      .def_ro("inputs", &ElementwiseDescriptor::inputs)
      .def_ro("out", &ElementwiseDescriptor::out)
      .def_ro("params", &ElementwiseDescriptor::params);

  bind_plan<ElementwisePlan>(m, "ElementwisePlan", "A validated elementwise launch: select once, run many times.")
      .def("workspace_bytes", &ElementwisePlan::workspace_bytes, "Bytes of scratch memory run() needs (0 for most ops).")
      .def("run",
           out_and_inputs_run<ElementwisePlan>(
               [](const ElementwisePlan& plan) {
                 const size_t arity = plan.descriptor().inputs.size();
                 return Names{operand_names(plan.descriptor().op, arity), int(std::min<size_t>(arity, 4))};
               },
               run_plan),
           nb::sig("def run(self, *args: object, **operands: object) -> None"),
           "run(out=, <inputs by name>, workspace=, stream=), the names as the op's functional form (x; a, b; "
           "cond, a, b; x0, x1, x2; grad_out, ...), or run(out, *inputs): check the tensors against the "
           "descriptor and launch on `stream` (default: the current stream of the inputs' framework). Never "
           "allocates, never synchronizes (except to hand results to JAX).");

  def_xla_plan_positional<ElementwisePlan>(
      m, [](const ElementwisePlan& p, const TensorView& out, const TensorView* in, int n, void* ws, int64_t wss,
            StreamHandle s) { p.run(out, in, n, ws, wss, s); });

  m.def("elementwise_call",
        [](const std::string& op, nb::handle out, nb::tuple inputs, std::map<std::string, double> params,
           nb::handle stream, nb::handle workspace_alloc) {
          if (inputs.size() > 4) throw InvalidArgument(op + ": at most 4 inputs");
          const char* const* names = operand_names(op, inputs.size());
          // Inputs first: a CPU x is reported as x, not as the output allocated from it.
          Imported ins[4];
          TensorView views[4];
          for (size_t i = 0; i < inputs.size(); ++i) {
            ins[i] = import_tensor(inputs[i], names[i], false);
            views[i] = ins[i].view;
          }
          Imported o = import_tensor(out, "out", true);
          std::string key = op;
          key.push_back('\0');
          append_params(key, params);
          append_key(key, o.view);
          for (size_t i = 0; i < inputs.size(); ++i) append_key(key, ins[i].view);
          const ElementwisePlan plan = plan_cache<ElementwisePlan>().get(key, [&] {
            ElementwiseDescriptor d{op, {}, spec_of(o.view), params};
            for (size_t i = 0; i < inputs.size(); ++i) d.inputs.push_back(spec_of(views[i]));
            return ElementwisePlan::select(d);
          });
          const Imported& like = inputs.size() ? ins[0] : o;
          StreamHandle s = resolve_stream(stream, like);
          const Workspace ws = allocate_workspace(op, plan.workspace_bytes(), workspace_alloc, like.view.device, s);
          {
            nb::gil_scoped_release release;
            plan.run(o.view, views, int(inputs.size()), ws.data, ws.size, s);
          }
          finish_for_framework(like, s);
        },
        "op"_a, "out"_a, "inputs"_a, "params"_a, "stream"_a = nb::none(), "workspace_alloc"_a = nb::none(),
        "Functional entry: select (cached on op, params and operand metadata) and run.");
  m.def("elementwise_cache_size", [] { return plan_cache<ElementwisePlan>().size(); }, "Plans in the functional cache.");
}

}  // namespace baracuda::py
