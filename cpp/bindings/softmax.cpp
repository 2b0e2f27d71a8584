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



// The input names: forward x; backward grad_out, y (the output then grad_x); gumbel_noise none.
Names input_names(const SoftmaxPlan& plan) {
  static const char* kFwd[] = {"x"};
  static const char* kBwd[] = {"grad_out", "y"};
  const int n = int(std::min<size_t>(plan.descriptor().inputs.size(), 2));
  return {n == 2 ? kBwd : kFwd, n};
}

// `names` / `out_name`: the operand names run() parsed the operands with (input_names and grad_x / out).
void sm_run(const SoftmaxPlan& plan, Names names, const char* out_name, nb::handle out, const nb::handle* inputs,
            int n_inputs, nb::handle stream,
            std::optional<uint64_t> seed, uint64_t offset, nb::handle soft_out) {
  if (n_inputs > 2 || (n_inputs < 1 && plan.sku().op != "gumbel_noise"))
    throw InvalidArgument(plan.sku().op + ": run() takes 1 (forward) or 2 (backward) inputs, got " +
                          std::to_string(n_inputs));
  Imported o = import_tensor(out, out_name, true);
  Imported ins[2];
  TensorView views[2];
  const int n = n_inputs;
  for (int i = 0; i < n; ++i) {
    ins[i] = import_tensor(inputs[i], i < names.n ? names.at[i] : "input", false);
    views[i] = ins[i].view;
  }
  SoftmaxRunArgs args;
  args.has_seed = seed.has_value();
  args.seed = seed.value_or(0);
  args.offset = offset;
  Imported so;
  if (!soft_out.is_none()) {
    so = import_tensor(soft_out, "soft_out", true);
    args.soft_out = &so.view;
  }
  const Imported& like = n > 0 ? ins[0] : o;
  StreamHandle s = resolve_stream(stream, like);
  {
    nb::gil_scoped_release release;
    plan.run(o.view, views, n, args, s);
  }
  finish_for_framework(like, s);
}

}  // namespace

void init_softmax(nb::module_& m) {
  bind_descriptor<SoftmaxDescriptor>(m, "SoftmaxDescriptor",
                                "Softmax / log-softmax / gumbel_softmax / sparsemax (forward: inputs [x]; backward: "
                                "inputs [grad_out, y]; gumbel_noise: no input) along `axis`. Pure data; hashable; "
                                "the plan-cache key.")
      .def("__init__",
           [](SoftmaxDescriptor* d, std::string op, std::vector<TensorSpec> inputs, int64_t axis, TensorSpec out,
              double tau, bool hard, std::optional<TensorSpec> soft_out) {
             new (d) SoftmaxDescriptor{std::move(op), std::move(inputs), axis, std::move(out)};
             d->tau = tau;
             d->hard = hard;
             if (soft_out) d->soft_out.push_back(std::move(*soft_out));
           },
           "op"_a, "inputs"_a, "axis"_a, "out"_a, nb::kw_only(), "tau"_a = 1.0, "hard"_a = false,
           "soft_out"_a = nb::none(),
           "tau / hard / soft_out (a second output, y_soft) are parameters of gumbel_softmax (tau also of "
           "gumbel_softmax_backward).")
      .def_ro("op", &SoftmaxDescriptor::op)
      .def_ro("inputs", &SoftmaxDescriptor::inputs)
      .def_ro("axis", &SoftmaxDescriptor::axis)
      .def_ro("out", &SoftmaxDescriptor::out)
      .def_ro("tau", &SoftmaxDescriptor::tau)
      .def_ro("hard", &SoftmaxDescriptor::hard)
      .def_prop_ro("soft_out",
                   [](const SoftmaxDescriptor& d) -> std::optional<TensorSpec> {
                     if (d.soft_out.empty()) return std::nullopt;
                     return d.soft_out[0];
                   });

  bind_plan<SoftmaxPlan>(m, "SoftmaxPlan", "A validated softmax launch: select once, run many times.")
      .def("workspace_bytes", &SoftmaxPlan::workspace_bytes, "Always 0: softmax needs no workspace.")
      .def("run",
           [](const SoftmaxPlan& plan, nb::args args, nb::kwargs kwargs) {
             static const char* kExtras[] = {"seed", "offset", "soft_out"};
             const Names names = input_names(plan);
             const char* out_name[] = {names.n == 2 ? "grad_x" : "out"};
             const OrderedOperands o =
                 ordered_operands(plan.sku().op, args, kwargs, {out_name, 1}, names, {kExtras, 3});
             if (!o.workspace.is_none())
               throw InvalidArgument(plan.sku().op + ": run() takes no workspace (the plan needs none)");
             auto counter = [&](int k) -> std::optional<uint64_t> {
               const nb::handle h = o.extra[k];
               if (h.is_none()) return std::nullopt;
               uint64_t v = 0;
               if (!PyIndex_Check(h.ptr()) || !nb::try_cast(nb::steal(PyNumber_Index(h.ptr())), v))
                 throw InvalidArgument(plan.sku().op + ": " + kExtras[k] + " must be an int in [0, 2**64), got " +
                                       nb::cast<std::string>(nb::repr(h)));
               return v;
             };
             sm_run(plan, names, out_name[0], o.n_outs ? o.outs[0] : nb::none(), o.ins, o.n_ins, o.stream, counter(0),
                    counter(1).value_or(0), o.extra[2]);
           },
           nb::sig("def run(self, *args: object, **operands: object) -> None"),
           "run(out=, x=) or run(grad_x=, grad_out=, y=) (or by position: run(out, x), run(grad_x, grad_out, "
           "y)), with stream= (and seed=, offset=, soft_out= below): check the tensors against the descriptor and "
           "launch on "
           "`stream` (default: the current stream of the inputs' framework). Never allocates. gumbel_softmax and "
           "gumbel_noise (run(g) with no input) need `seed` (and `offset`, default 0); gumbel_softmax with a "
           "soft_out spec needs `soft_out`.");

  def_xla_plan_positional<SoftmaxPlan>(
      m, [](const SoftmaxPlan& p, const TensorView& out, const TensorView* in, int n, void*, int64_t,
            StreamHandle s) { p.run(out, in, n, s); });

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
          const SoftmaxPlan plan = plan_cache<SoftmaxPlan>().get(key, [&] {
            SoftmaxDescriptor d{op, {}, axis, spec_of(o.view)};
            for (size_t i = 0; i < inputs.size(); ++i) d.inputs.push_back(spec_of(views[i]));
            return SoftmaxPlan::select(d);
          });
          StreamHandle s = resolve_stream(stream, ins[0]);
          {
            nb::gil_scoped_release release;
            plan.run(o.view, views, int(inputs.size()), s);
          }
          finish_for_framework(ins[0], s);
        },
        "op"_a, "out"_a, "inputs"_a, "axis"_a, "stream"_a = nb::none(),
        "Functional entry: select (cached on op, axis and operand metadata) and run.");
  m.def("softmax_rowop_call",
        [](const std::string& op, nb::handle out, nb::tuple inputs, int64_t axis, double tau, bool hard,
           std::optional<uint64_t> seed, uint64_t offset, nb::handle soft_out, nb::handle stream, nb::handle like_h) {
          static const char* kNames[] = {"input 0", "input 1"};
          if (inputs.size() > 2) throw InvalidArgument(op + ": takes 0, 1 or 2 inputs");
          Imported o = import_tensor(out, "out", true);
          Imported ins[2];
          TensorView views[2];
          std::string key = op;
          key.push_back('\0');
          key.append(reinterpret_cast<const char*>(&axis), sizeof axis);
          key.append(reinterpret_cast<const char*>(&tau), sizeof tau);
          key.push_back(hard ? 'h' : 's');
          append_key(key, o.view);
          for (size_t i = 0; i < inputs.size(); ++i) {
            ins[i] = import_tensor(inputs[i], kNames[i], false);
            views[i] = ins[i].view;
            append_key(key, views[i]);
          }
          SoftmaxRunArgs args;
          args.has_seed = seed.has_value();
          args.seed = seed.value_or(0);
          args.offset = offset;
          Imported so;
          if (!soft_out.is_none()) {
            so = import_tensor(soft_out, "soft_out", true);
            args.soft_out = &so.view;
            key.push_back('+');
            append_key(key, so.view);
          }
          const SoftmaxPlan plan = plan_cache<SoftmaxPlan>().get(key, [&] {
            SoftmaxDescriptor d{op, {}, axis, spec_of(o.view)};
            d.tau = tau;
            d.hard = hard;
            for (size_t i = 0; i < inputs.size(); ++i) d.inputs.push_back(spec_of(views[i]));
            if (args.soft_out) d.soft_out.push_back(spec_of(so.view));
            return SoftmaxPlan::select(d);
          });
          // gumbel_noise has no input: `like` (the tensor whose shape and framework the noise takes)
          // picks the stream and the JAX hand-off instead.
          Imported like_in;
          if (inputs.size() == 0 && !like_h.is_none()) like_in = import_tensor(like_h, "like", false);
          const Imported& like = inputs.size() > 0 ? ins[0] : (like_h.is_none() ? o : like_in);
          StreamHandle s = resolve_stream(stream, like);
          {
            nb::gil_scoped_release release;
            plan.run(o.view, views, int(inputs.size()), args, s);
          }
          finish_for_framework(like, s);
        },
        "op"_a, "out"_a, "inputs"_a, "axis"_a, "tau"_a, "hard"_a, "seed"_a.none(), "offset"_a, "soft_out"_a.none(),
        "stream"_a = nb::none(), "like"_a = nb::none(),
        "Functional entry of gumbel_softmax(_backward), gumbel_noise and sparsemax(_backward): select (cached on "
        "op, axis, tau, hard and operand metadata; not on seed / offset) and run.");
  m.def("softmax_cache_size", [] { return plan_cache<SoftmaxPlan>().size(); }, "Plans in the softmax functional cache.");
}

}  // namespace baracuda::py
