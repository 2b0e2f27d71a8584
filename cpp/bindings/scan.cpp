// Bindings of the scan family: the op table, descriptor, plan, and a cached functional entry
// point used by baracuda's functional scans.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <unordered_map>

#include "baracuda/errors.h"
#include "baracuda/scan.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

// Runs the imported `outs` / `ins` on `s`, hands results to JAX if needed.
void run_views(const ScanPlan& plan, const std::vector<Imported>& outs, const std::vector<Imported>& ins, void* ws,
               int64_t ws_size, StreamHandle s) {
  TensorView ov[2], iv[3];
  for (size_t i = 0; i < outs.size(); ++i) ov[i] = outs[i].view;
  for (size_t i = 0; i < ins.size(); ++i) iv[i] = ins[i].view;
  const Imported& like = ins[0];
  {
    nb::gil_scoped_release release;
    plan.run(ov, int(outs.size()), iv, int(ins.size()), ws, ws_size, s);
  }
  finish_for_framework(like, s);
}

std::vector<nb::handle> as_list(nb::handle h) {
  std::vector<nb::handle> v;
  if (nb::isinstance<nb::tuple>(h) || nb::isinstance<nb::list>(h)) {
    for (nb::handle e : h) v.push_back(e);
  } else {
    v.push_back(h);
  }
  return v;
}

std::vector<Imported> import_all(const std::vector<nb::handle>& hs, const std::vector<std::string>& names,
                                 const std::string& op, const char* what, bool writable) {
  if (hs.size() != names.size()) {
    std::string n;
    for (size_t i = 0; i < names.size(); ++i) n += (i ? ", " : "") + names[i];
    throw InvalidArgument(op + ": got " + std::to_string(hs.size()) + " " + what + ", the op takes " +
                          std::to_string(names.size()) + " (" + n + ")");
  }
  std::vector<Imported> v(hs.size());
  for (size_t i = 0; i < hs.size(); ++i) v[i] = import_tensor(hs[i], names[i].c_str(), writable);
  return v;
}

void run_plan(const ScanPlan& plan, nb::handle outputs, nb::handle inputs, nb::handle workspace, nb::handle stream) {
  const ScanOpInfo* info = find_scan_op(plan.sku().op);
  auto outs = import_all(as_list(outputs), info->outputs, info->name, "outputs", true);
  auto ins = import_all(as_list(inputs), info->inputs, info->name, "inputs", false);
  const Workspace w = import_workspace(workspace, outs.empty() ? 0 : outs[0].view.device);
  run_views(plan, outs, ins, w.data, w.size, resolve_stream(stream, ins[0]));
}

}  // namespace

void init_scan(nb::module_& m) {
  m.def("scan_ops", [] {
    nb::list out;
    for (const auto& r : scan_ops()) {
      nb::dict d;
      d["name"] = r.name;
      d["is_backward"] = r.is_backward;
      d["inputs"] = r.inputs;
      d["outputs"] = r.outputs;
      d["dtypes"] = r.dtypes;
      d["out_dtype"] = r.out_dtype;
      d["backward"] = r.backward;
      d["doc"] = r.doc;
      out.append(d);
    }
    return out;
  }, "The scan op table: name, is_backward, inputs, outputs (names, in order), dtypes, out_dtype rule, backward op, doc.");

  bind_descriptor<ScanDescriptor>(m, "ScanDescriptor",
                             "What to scan: op name, input specs (in the op table's order), axis (negative allowed), "
                             "output specs (cummax / cummin: values, indices). Pure data; hashable.")
      .def("__init__",
           [](ScanDescriptor* d, std::string op, std::vector<TensorSpec> inputs, std::vector<TensorSpec> outputs,
              int64_t axis) { new (d) ScanDescriptor{std::move(op), std::move(inputs), axis, std::move(outputs)}; },
           "op"_a, "inputs"_a, "outputs"_a, "axis"_a = -1)
      .def_ro("op", &ScanDescriptor::op)
      .def_ro("inputs", &ScanDescriptor::inputs)
      .def_ro("axis", &ScanDescriptor::axis)
      .def_ro("outputs", &ScanDescriptor::outputs);

  bind_plan<ScanPlan>(m, "ScanPlan", "A validated scan launch: select once, run many times.")
      .def_prop_ro("num_inputs", &ScanPlan::num_inputs)
      .def_prop_ro("num_outputs", &ScanPlan::num_outputs)
      .def("workspace_bytes", &ScanPlan::workspace_bytes, "Bytes of scratch memory run() needs (split scans).")
      .def("run",
           [](const ScanPlan& plan, nb::args args, nb::kwargs kwargs) {
             const ScanOpInfo* info = find_scan_op(plan.sku().op);
             if (args.size() > 0) {  // run(outputs, inputs, workspace=, stream=): the op table's order
               const OrderedOperands o = ordered_operands(info->name, nb::tuple(), kwargs, {}, {});
               if (args.size() != 2)
                 throw InvalidArgument(info->name + ": run() takes (outputs, inputs) by position, got " +
                                       std::to_string(args.size()) + " positional arguments");
               return run_plan(plan, args[0], args[1], o.workspace, o.stream);
             }
             std::vector<const char*> outs_at, ins_at;
             for (const std::string& n : info->outputs) outs_at.push_back(n.c_str());
             for (const std::string& n : info->inputs) ins_at.push_back(n.c_str());
             const OrderedOperands o = ordered_operands(info->name, args, kwargs, {outs_at.data(), int(outs_at.size())},
                                                        {ins_at.data(), int(ins_at.size())});
             nb::list outs, ins;
             for (int i = 0; i < o.n_outs; ++i) outs.append(o.outs[i]);
             for (int i = 0; i < o.n_ins; ++i) ins.append(o.ins[i]);
             run_plan(plan, nb::tuple(outs), nb::tuple(ins), o.workspace, o.stream);
           },
           nb::sig("def run(self, *args: object, **operands: object) -> None"),
           "run(<outputs and inputs by name, as scan_ops() names them>, workspace=, stream=) or run(outputs, "
           "inputs) (one tensor or a tuple each, in the op table's order): check the tensors against the "
           "descriptor and launch on `stream` (default: the current stream of the first input's framework). Never "
           "allocates, never synchronizes (except to hand results to JAX).");

  def_xla_plan_outputs<ScanPlan>(m, [](const ScanPlan& p, const TensorView* outs, int n_outs, const TensorView* ins,
                                        int n_ins, void* ws, int64_t wss, StreamHandle s) {
    p.run(outs, n_outs, ins, n_ins, ws, wss, s);
  });

  m.def("scan_call",
        [](const std::string& op, nb::tuple outputs, nb::tuple inputs, int64_t axis, nb::handle stream,
           nb::handle workspace_alloc) {
          const ScanOpInfo* info = find_scan_op(op);
          if (!info) throw InvalidArgument("scan: unknown op '" + op + "' (see baracuda.scan_ops())");
          std::vector<nb::handle> oh, ih;
          for (nb::handle h : outputs) oh.push_back(h);
          for (nb::handle h : inputs) ih.push_back(h);
          auto outs = import_all(oh, info->outputs, op, "outputs", true);
          auto ins = import_all(ih, info->inputs, op, "inputs", false);
          std::string key = op;
          key.push_back('\0');
          key.append(reinterpret_cast<const char*>(&axis), sizeof axis);
          for (const auto& o : outs) append_key(key, o.view);
          for (const auto& i : ins) append_key(key, i.view);
          const ScanPlan plan = plan_cache<ScanPlan>().get(key, [&] {
            ScanDescriptor d;
            d.op = op;
            d.axis = axis;
            for (const auto& i : ins) d.inputs.push_back(spec_of(i.view));
            for (const auto& o : outs) d.outputs.push_back(spec_of(o.view));
            return ScanPlan::select(d);
          });
          StreamHandle s = resolve_stream(stream, ins[0]);
          const Workspace ws = allocate_workspace(op, plan.workspace_bytes(), workspace_alloc, ins[0].view.device, s);
          run_views(plan, outs, ins, ws.data, ws.size, s);
        },
        "op"_a, "outputs"_a, "inputs"_a, "axis"_a = -1, "stream"_a = nb::none(), "workspace_alloc"_a = nb::none(),
        "Functional entry: select (cached on op, axis and operand metadata) and run.");
  m.def("scan_cache_size", [] { return plan_cache<ScanPlan>().size(); }, "Plans in the functional scan cache.");
}

}  // namespace baracuda::py
