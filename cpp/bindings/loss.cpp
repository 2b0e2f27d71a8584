// Bindings of the loss family: descriptor and plan (the functional API caches plans in Python).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "baracuda/errors.h"
#include "baracuda/loss.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

void init_loss(nb::module_& m) {
  nb::class_<LossDescriptor>(m, "LossDescriptor",
                             "A loss: 'cross_entropy' (optionally with_grad), 'nll_loss', or a pointwise loss "
                             "(mse_loss, l1_loss, huber_loss, smooth_l1_loss, binary_cross_entropy, "
                             "binary_cross_entropy_with_logits, kl_div, poisson_nll_loss, gaussian_nll_loss, "
                             "margin_ranking_loss, hinge_embedding_loss, soft_margin_loss), or '<op>_backward'. "
                             "extra: [pos_weight] / [var] / [input2]; param: delta / beta / margin / eps; grad_loss: "
                             "the spec of the upstream gradient (backward). Pure data; hashable; the plan-cache key.")
      .def("__init__",
           [](LossDescriptor* d, std::string op, TensorSpec input, TensorSpec target, std::optional<TensorSpec> weight,
              std::string reduction, int64_t ignore_index, double label_smoothing, bool with_grad, bool has_grad_loss,
              std::optional<TensorSpec> grad_input, std::vector<TensorSpec> extra, double param, bool log_target,
              bool log_input, bool full, std::optional<TensorSpec> grad_loss) {
             new (d) LossDescriptor{};
             d->op = std::move(op);
             d->input = std::move(input);
             d->target = std::move(target);
             d->has_weight = weight.has_value();
             if (weight) d->weight = *weight;
             d->reduction = std::move(reduction);
             d->ignore_index = ignore_index;
             d->label_smoothing = label_smoothing;
             d->with_grad = with_grad;
             d->has_grad_loss = has_grad_loss;
             d->grad_input = grad_input ? *grad_input : d->input;
             d->extra = std::move(extra);
             d->param = param;
             d->log_target = log_target;
             d->log_input = log_input;
             d->full = full;
             if (grad_loss) {
               d->has_grad_loss = true;
               d->grad_loss = *grad_loss;
             } else {
               d->grad_loss = TensorSpec{{}, d->input.dtype, {}};
             }
           },
           "op"_a, "input"_a, "target"_a, "weight"_a = nb::none(), "reduction"_a = "mean", "ignore_index"_a = -100,
           "label_smoothing"_a = 0.0, "with_grad"_a = false, "has_grad_loss"_a = false, "grad_input"_a = nb::none(),
           "extra"_a = std::vector<TensorSpec>{}, "param"_a = 0.0, "log_target"_a = false, "log_input"_a = true,
           "full"_a = false, "grad_loss"_a = nb::none())
      .def_ro("op", &LossDescriptor::op)
      .def_ro("input", &LossDescriptor::input)
      .def_ro("target", &LossDescriptor::target)
      .def_ro("reduction", &LossDescriptor::reduction)
      .def_ro("ignore_index", &LossDescriptor::ignore_index)
      .def_ro("label_smoothing", &LossDescriptor::label_smoothing)
      .def_ro("with_grad", &LossDescriptor::with_grad)
      .def_ro("extra", &LossDescriptor::extra)
      .def_ro("param", &LossDescriptor::param)
      .def_ro("log_target", &LossDescriptor::log_target)
      .def_ro("log_input", &LossDescriptor::log_input)
      .def_ro("full", &LossDescriptor::full)
      .def("__eq__", [](const LossDescriptor& a, const LossDescriptor& b) { return a == b; })
      .def("__hash__", [](const LossDescriptor& d) { return std::hash<std::string>{}(d.str()); })
      .def("__repr__", &LossDescriptor::str);

  nb::class_<LossPlan>(m, "LossPlan", "A validated loss launch: select once, run many times.")
      .def_static("select",
                  [](const LossDescriptor& d, std::optional<PlanPreference> pref) {
                    return LossPlan::select(d, pref.value_or(PlanPreference{}));
                  },
                  "desc"_a, "preference"_a = nb::none())
      .def_prop_ro("sku", &LossPlan::sku)
      .def_prop_ro("descriptor", &LossPlan::descriptor)
      .def("workspace_bytes", &LossPlan::workspace_bytes, "Bytes of 256-byte aligned scratch run() needs.")
      .def("run",
           [](const LossPlan& plan, nb::handle input, nb::handle target, nb::handle lse, nb::handle workspace,
              nb::handle out, nb::handle weight, nb::handle grad_input, nb::handle grad_loss, nb::handle stream,
              nb::handle extra) {
             Imported x = import_tensor(input, "input", false);
             Imported t = import_tensor(target, "target", false);
             LossTensors T;
             T.input = x.view;
             T.target = t.view;
             const bool fwd = plan.descriptor().op == "cross_entropy";
             Imported l;
             if (!lse.is_none()) { l = import_tensor(lse, "lse", fwd); T.lse = l.view; }
             Imported o, w, g, gl, ws;
             std::vector<Imported> ex;
             if (!extra.is_none()) {
               for (nb::handle e : extra) ex.push_back(import_tensor(e, "extra", false));
               for (auto& e : ex) T.extra.push_back(e.view);
             }
             if (!out.is_none()) { o = import_tensor(out, "out", true); T.out = o.view; }
             if (!weight.is_none()) { w = import_tensor(weight, "weight", false); T.weight = w.view; }
             if (!grad_input.is_none()) { g = import_tensor(grad_input, "grad_input", true); T.grad_input = g.view; }
             if (!grad_loss.is_none()) { gl = import_tensor(grad_loss, "grad_loss", false); T.grad_loss = gl.view; }
             void* wsp = nullptr;
             int64_t wsn = 0;
             if (!workspace.is_none()) {
               ws = import_tensor(workspace, "workspace", true);
               wsp = ws.view.data;
               wsn = ws.view.numel() * int64_t(dtype_size(ws.view.dtype));
             }
             StreamHandle s = resolve_stream(stream, x);
             {
               nb::gil_scoped_release release;
               plan.run(T, wsp, wsn, s);
             }
             finish_for_framework(x, s);
           },
           "input"_a, "target"_a, "lse"_a.none(), "workspace"_a.none(), "out"_a = nb::none(), "weight"_a = nb::none(),
           "grad_input"_a = nb::none(), "grad_loss"_a = nb::none(), "stream"_a = nb::none(), "extra"_a = nb::none(),
           "Check the tensors against the descriptor and launch. cross_entropy: forward writes out (the loss) and "
           "lse (f32 [N], f64 for f64 logits), and grad_input when with_grad; backward reads lse and writes "
           "grad_input. Other losses: lse is None; extra is the list of extra operands; forward writes out, "
           "backward writes grad_input.");
}

}  // namespace baracuda::py
