// Bindings of the loss family: descriptor, plan, and the functional entries (cross_entropy's, and
// loss_call for the others), whose plans share the core's loss cache.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "baracuda/errors.h"
#include "baracuda/loss.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

// The fields every kind's descriptor has, for its __init__ and the functional entries: grad_input
// defaults to input's spec; grad_loss, when not given, to [] of input's dtype (has_grad_loss false).
template <class Desc>
Desc common_descriptor(std::string op, TensorSpec input, TensorSpec target, const std::optional<TensorSpec>& weight,
                       std::string reduction, const std::optional<TensorSpec>& grad_loss,
                       const std::optional<TensorSpec>& grad_input) {
  Desc d;
  d.op = std::move(op);
  d.input = std::move(input);
  d.target = std::move(target);
  d.has_weight = weight.has_value();
  if (weight) d.weight = *weight;
  d.reduction = std::move(reduction);
  d.grad_input = grad_input ? *grad_input : d.input;
  d.has_grad_loss = grad_loss.has_value();
  d.grad_loss = grad_loss ? *grad_loss : TensorSpec{{}, d.input.dtype, {}};
  return d;
}

// An imported operand's spec, or none when the caller passed none.
std::optional<TensorSpec> spec_if(const Imported& i) {
  return i.imported ? std::optional<TensorSpec>(spec_of(i.view)) : std::nullopt;
}

// The fields the three descriptors share, read-only from Python.
template <class Desc> void def_common_fields(nb::class_<Desc>& c) {
  c.def_ro("op", &Desc::op)
      .def_ro("input", &Desc::input)
      .def_ro("target", &Desc::target)
      .def_prop_ro("weight",
                   [](const Desc& d) { return d.has_weight ? std::optional<TensorSpec>(d.weight) : std::nullopt; })
      .def_ro("reduction", &Desc::reduction)
      .def_prop_ro("grad_loss",
                   [](const Desc& d) {
                     return d.has_grad_loss ? std::optional<TensorSpec>(d.grad_loss) : std::nullopt;
                   });
}

}  // namespace

void init_loss(nb::module_& m) {
  auto ce = bind_descriptor<CrossEntropyLossDescriptor>(
      m, "CrossEntropyLossDescriptor",
      "cross_entropy over logits [N, V] (with_grad: the gradient in the same call) or nll_loss over "
      "log-probabilities [N, C], and their '<op>_backward'; class-index targets [N]. Pure data; hashable; "
      "the plan-cache key.");
  ce.def("__init__",
         [](CrossEntropyLossDescriptor* d, std::string op, TensorSpec input, TensorSpec target,
            std::optional<TensorSpec> weight, std::string reduction, int64_t ignore_index, double label_smoothing,
            bool with_grad, bool has_grad_loss, std::optional<TensorSpec> grad_input,
            std::optional<TensorSpec> grad_loss) {
           new (d) CrossEntropyLossDescriptor(common_descriptor<CrossEntropyLossDescriptor>(
               std::move(op), std::move(input), std::move(target), weight, std::move(reduction), grad_loss,
               grad_input));
           d->has_grad_loss = d->has_grad_loss || has_grad_loss;
           d->ignore_index = ignore_index;
           d->label_smoothing = label_smoothing;
           d->with_grad = with_grad;
         },
         "op"_a, "input"_a, "target"_a, "weight"_a = nb::none(), "reduction"_a = "mean", "ignore_index"_a = -100,
         "label_smoothing"_a = 0.0, "with_grad"_a = false, "has_grad_loss"_a = false, "grad_input"_a = nb::none(),
         "grad_loss"_a = nb::none());
  def_common_fields(ce);
  ce.def_ro("ignore_index", &CrossEntropyLossDescriptor::ignore_index)
      .def_ro("label_smoothing", &CrossEntropyLossDescriptor::label_smoothing)
      .def_ro("with_grad", &CrossEntropyLossDescriptor::with_grad);

  auto pw = bind_descriptor<PointwiseLossDescriptor>(
      m, "PointwiseLossDescriptor",
      "A pointwise loss (mse_loss, l1_loss, huber_loss, smooth_l1_loss, binary_cross_entropy, "
      "binary_cross_entropy_with_logits, kl_div, poisson_nll_loss, gaussian_nll_loss, margin_ranking_loss, "
      "hinge_embedding_loss, soft_margin_loss) or its '<op>_backward'. extra: [pos_weight] / [var] / [input2]; "
      "param: delta / beta / margin / eps; grad_loss: the upstream gradient's spec (backward); wrt: the operands "
      "to differentiate (default ['input']) and grads the spec of each gradient. Pure data; hashable.");
  pw.def("__init__",
         [](PointwiseLossDescriptor* d, std::string op, TensorSpec input, TensorSpec target,
            std::optional<TensorSpec> weight, std::vector<TensorSpec> extra, std::string reduction, double param,
            bool log_target, bool log_input, bool full, std::optional<TensorSpec> grad_loss,
            std::optional<TensorSpec> grad_input, std::vector<std::string> wrt, std::vector<TensorSpec> grads) {
           new (d) PointwiseLossDescriptor(common_descriptor<PointwiseLossDescriptor>(
               std::move(op), std::move(input), std::move(target), weight, std::move(reduction), grad_loss,
               grad_input));
           d->extra = std::move(extra);
           d->param = param;
           d->log_target = log_target;
           d->log_input = log_input;
           d->full = full;
           d->wrt = std::move(wrt);
           d->grads = std::move(grads);
         },
         "op"_a, "input"_a, "target"_a, "weight"_a = nb::none(), "extra"_a = std::vector<TensorSpec>{},
         "reduction"_a = "mean", "param"_a = 0.0, "log_target"_a = false, "log_input"_a = true, "full"_a = false,
         "grad_loss"_a = nb::none(), "grad_input"_a = nb::none(), "wrt"_a = std::vector<std::string>{},
         "grads"_a = std::vector<TensorSpec>{});
  def_common_fields(pw);
  pw.def_ro("extra", &PointwiseLossDescriptor::extra)
      .def_ro("param", &PointwiseLossDescriptor::param)
      .def_ro("log_target", &PointwiseLossDescriptor::log_target)
      .def_ro("log_input", &PointwiseLossDescriptor::log_input)
      .def_ro("full", &PointwiseLossDescriptor::full)
      .def_ro("wrt", &PointwiseLossDescriptor::wrt);

  auto row = bind_descriptor<RowLossDescriptor>(
      m, "RowLossDescriptor",
      "A row loss (cosine_embedding_loss, multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss, "
      "triplet_margin_loss) or its '<op>_backward'. extra: [input2] / [negative]; p, eps, swap: multi margin / "
      "triplet; grad_loss, wrt, grads as PointwiseLossDescriptor's. Pure data; hashable.");
  row.def("__init__",
          [](RowLossDescriptor* d, std::string op, TensorSpec input, TensorSpec target,
             std::optional<TensorSpec> weight,
             std::vector<TensorSpec> extra, std::string reduction, double margin, double p, double eps, bool swap,
             std::optional<TensorSpec> grad_loss, std::optional<TensorSpec> grad_input, std::vector<std::string> wrt,
             std::vector<TensorSpec> grads) {
            new (d) RowLossDescriptor(common_descriptor<RowLossDescriptor>(
                std::move(op), std::move(input), std::move(target), weight, std::move(reduction), grad_loss,
                grad_input));
            d->extra = std::move(extra);
            d->margin = margin;
            d->p = p;
            d->eps = eps;
            d->swap = swap;
            d->wrt = std::move(wrt);
            d->grads = std::move(grads);
          },
          "op"_a, "input"_a, "target"_a, "weight"_a = nb::none(), "extra"_a = std::vector<TensorSpec>{},
          "reduction"_a = "mean", "margin"_a = 0.0, "p"_a = 2.0, "eps"_a = 1e-6, "swap"_a = false,
          "grad_loss"_a = nb::none(), "grad_input"_a = nb::none(), "wrt"_a = std::vector<std::string>{},
          "grads"_a = std::vector<TensorSpec>{});
  def_common_fields(row);
  row.def_ro("extra", &RowLossDescriptor::extra)
      .def_ro("margin", &RowLossDescriptor::margin)
      .def_ro("p", &RowLossDescriptor::p)
      .def_ro("eps", &RowLossDescriptor::eps)
      .def_ro("swap", &RowLossDescriptor::swap)
      .def_ro("wrt", &RowLossDescriptor::wrt);

  bind_plan<LossPlan>(m, "LossPlan", "A validated loss launch: select once, run many times.")
      .def("workspace_bytes", &LossPlan::workspace_bytes, "Bytes of 256-byte aligned scratch run() needs.")
      .def("run",
           [](const LossPlan& plan, nb::handle input, nb::handle target, nb::handle lse, nb::handle workspace,
              nb::handle out, nb::handle weight, nb::handle grad_input, nb::handle grad_loss, nb::handle stream,
              nb::handle extra, nb::handle grads) {
             Imported x = import_tensor(input, "input", false);
             Imported t = import_tensor(target, "target", false);
             LossTensors T;
             T.input = x.view;
             T.target = t.view;
             const bool fwd = plan.op() == "cross_entropy";
             Imported l;
             if (!lse.is_none()) { l = import_tensor(lse, "lse", fwd); T.lse = l.view; }
             Imported o, w, g, gl;
             std::vector<Imported> ex;
             if (!extra.is_none()) {
               for (nb::handle e : extra) ex.push_back(import_tensor(e, "extra", false));
               for (auto& e : ex) T.extra.push_back(e.view);
             }
             if (!out.is_none()) { o = import_tensor(out, "out", true); T.out = o.view; }
             if (!weight.is_none()) { w = import_tensor(weight, "weight", false); T.weight = w.view; }
             if (!grad_input.is_none()) { g = import_tensor(grad_input, "grad_input", true); T.grad_input = g.view; }
             if (!grad_loss.is_none()) { gl = import_tensor(grad_loss, "grad_loss", false); T.grad_loss = gl.view; }
             std::vector<Imported> gs;
             if (!grads.is_none()) {
               for (nb::handle e : grads) gs.push_back(import_tensor(e, "grads", true));
               for (auto& e : gs) T.grads.push_back(e.view);
             }
             const Workspace ws = import_workspace(workspace, x.view.device);
             StreamHandle s = resolve_stream(stream, x);
             {
               nb::gil_scoped_release release;
               plan.run(T, ws.data, ws.size, s);
             }
             finish_for_framework(x, s);
           },
           "input"_a, "target"_a, "lse"_a = nb::none(), "workspace"_a = nb::none(), "out"_a = nb::none(), "weight"_a = nb::none(),
           "grad_input"_a = nb::none(), "grad_loss"_a = nb::none(), "stream"_a = nb::none(), "extra"_a = nb::none(),
           "grads"_a = nb::none(),
           "Check the tensors against the descriptor and launch. cross_entropy: forward writes out (the loss) and "
           "lse (f32 [N], f64 for f64 logits), and grad_input when with_grad; backward reads lse and writes "
           "grad_input. Other losses: lse is None; extra is the list of extra operands; forward writes out, "
           "backward writes grad_input, or with the descriptor's wrt one tensor per entry of grads (in wrt order).");

  m.def("cross_entropy_call",
        [](nb::handle input, nb::handle target, nb::handle out, nb::handle lse, const std::string& reduction,
           int64_t ignore_index, double label_smoothing, nb::handle weight, nb::handle grad_input, nb::handle stream,
           nb::handle workspace_alloc) {
          // Inputs first: a CPU input is named, not an output allocated from it.
          Imported x = import_tensor(input, "input", false), t = import_tensor(target, "target", false), w, g;
          if (present(weight)) w = import_tensor(weight, "weight", false);
          Imported o = import_tensor(out, "out", true), l = import_tensor(lse, "lse", true);
          if (present(grad_input)) g = import_tensor(grad_input, "grad_input", true);
          std::string key = reduction;
          key.push_back('\0');
          append_pod(key, ignore_index);
          append_pod(key, label_smoothing);
          for (const Imported* i : {&x, &t, &o, &l, &w, &g}) {
            key.push_back(i->imported ? '+' : '-');
            if (i->imported) append_key(key, i->view);
          }
          const LossPlan plan = plan_cache<LossPlan>().get(key, [&] {
            auto d = common_descriptor<CrossEntropyLossDescriptor>("cross_entropy", spec_of(x.view), spec_of(t.view),
                                                                   spec_if(w), reduction, std::nullopt, spec_if(g));
            d.ignore_index = ignore_index;
            d.label_smoothing = label_smoothing;
            d.with_grad = g.imported;
            return LossPlan::select(d);
          });
          LossTensors T;
          T.input = x.view;
          T.target = t.view;
          T.out = o.view;
          T.lse = l.view;
          if (w.imported) T.weight = w.view;
          if (g.imported) T.grad_input = g.view;
          run_imported(plan, T, x, nb::none(), workspace_alloc, stream);
        },
        "input"_a, "target"_a, "out"_a, "lse"_a, "reduction"_a, "ignore_index"_a, "label_smoothing"_a,
        "weight"_a.none(), "grad_input"_a.none(), "stream"_a = nb::none(), "workspace_alloc"_a = nb::none(),
        "Functional entry of cross_entropy (with_grad when grad_input is given): select (cached on the parameters "
        "and operand metadata) and run.");
  m.def("loss_call",
        [](const std::string& op, nb::handle input, nb::handle target, nb::handle weight, nb::handle extra,
           nb::handle out, nb::handle grad_loss, nb::handle grad_input, nb::handle grads,
           const std::vector<std::string>& wrt, const std::string& reduction, int64_t ignore_index, double param,
           bool log_target, bool log_input, bool full, double p, double eps, bool swap, nb::handle stream,
           nb::handle workspace_alloc) {
          // Inputs first: a CPU input is named, not an output allocated from it.
          Imported x = import_tensor(input, "input", false), t = import_tensor(target, "target", false), w, gl, o, g;
          if (present(weight)) w = import_tensor(weight, "weight", false);
          if (present(grad_loss)) gl = import_tensor(grad_loss, "grad_loss", false);
          std::vector<Imported> ex, gs;
          if (present(extra))
            for (nb::handle e : extra) ex.push_back(import_tensor(e, "extra", false));
          if (present(out)) o = import_tensor(out, "out", true);
          if (present(grad_input)) g = import_tensor(grad_input, "grad_input", true);
          if (present(grads))
            for (nb::handle e : grads) gs.push_back(import_tensor(e, "grads", true));
          // The key: the op (never a reduction's name: cross_entropy_call's keys start with one), the
          // parameters, and each operand's presence and metadata.
          std::string key = op;
          key.push_back('\0');
          key += reduction;
          key.push_back('\0');
          for (double v : {param, p, eps}) append_pod(key, v);
          append_pod(key, ignore_index);
          key.push_back(char(int(log_target) | int(log_input) << 1 | int(full) << 2 | int(swap) << 3));
          for (const std::string& n : wrt) key += n + '\0';
          auto add = [&](const Imported& i) {
            key.push_back(i.imported ? '+' : '-');
            if (i.imported) append_key(key, i.view);
          };
          for (const Imported* i : {&x, &t, &w, &gl, &o, &g}) add(*i);
          key.push_back(char(ex.size()));
          for (const Imported& e : ex) add(e);
          key.push_back(char(gs.size()));
          for (const Imported& e : gs) add(e);
          const LossPlan plan = plan_cache<LossPlan>().get(key, [&] {
            auto common = [&](auto kind) {
              return common_descriptor<decltype(kind)>(op, spec_of(x.view), spec_of(t.view), spec_if(w), reduction,
                                                       spec_if(gl), spec_if(g));
            };
            std::vector<TensorSpec> exs, gss;
            for (const Imported& e : ex) exs.push_back(spec_of(e.view));
            for (const Imported& e : gs) gss.push_back(spec_of(e.view));
            switch (loss_kind(op)) {
              case LossKind::CrossEntropy: {  // nll_loss (cross_entropy has its own entry)
                auto d = common(CrossEntropyLossDescriptor{});
                d.ignore_index = ignore_index;
                if (!wrt.empty() || !gss.empty())
                  throw InvalidArgument(op + ": wrt / grads name the gradients of a backward; they are for the "
                                             "pointwise and row losses' <op>_backward");
                return LossPlan::select(d);
              }
              case LossKind::Row: {
                auto d = common(RowLossDescriptor{});
                d.extra = exs;
                d.margin = param;
                d.p = p;
                d.eps = eps;
                d.swap = swap;
                d.wrt = wrt;
                d.grads = gss;
                return LossPlan::select(d);
              }
              default: {  // pointwise; an unknown op is named by select
                auto d = common(PointwiseLossDescriptor{});
                d.extra = exs;
                d.param = param;
                d.log_target = log_target;
                d.log_input = log_input;
                d.full = full;
                d.wrt = wrt;
                d.grads = gss;
                return LossPlan::select(d);
              }
            }
          });
          LossTensors T;
          T.input = x.view;
          T.target = t.view;
          if (w.imported) T.weight = w.view;
          if (gl.imported) T.grad_loss = gl.view;
          for (const Imported& e : ex) T.extra.push_back(e.view);
          if (o.imported) T.out = o.view;
          if (g.imported) T.grad_input = g.view;
          for (const Imported& e : gs) T.grads.push_back(e.view);
          run_imported(plan, T, x, nb::none(), workspace_alloc, stream);
        },
        "op"_a, "input"_a, "target"_a, "weight"_a.none(), "extra"_a.none(), "out"_a.none(), "grad_loss"_a.none(),
        "grad_input"_a.none(), "grads"_a.none(), "wrt"_a, "reduction"_a, "ignore_index"_a, "param"_a, "log_target"_a,
        "log_input"_a, "full"_a, "p"_a, "eps"_a, "swap"_a, "stream"_a = nb::none(), "workspace_alloc"_a = nb::none(),
        "Functional entry of every loss but cross_entropy (nll, pointwise, row losses; forward writes out, backward "
        "grad_input or grads in wrt order): select (cached with the other losses' plans on the op, the "
        "parameters and the operand metadata) and run.");
  m.def("loss_cache_size", [] { return plan_cache<LossPlan>().size(); }, "Plans in the functional loss cache.");

  static const NamedOperand<LossTensors> kOperands[] = {
      {"input", &LossTensors::input}, {"target", &LossTensors::target},       {"weight", &LossTensors::weight},
      {"grad_loss", &LossTensors::grad_loss}, {"out", &LossTensors::out}, {"lse", &LossTensors::lse},
      {"grad_input", &LossTensors::grad_input}};
  def_xla_plan<LossPlan>(m, "loss", kOperands);

  void init_ctc_loss(nb::module_ & m);  // the CTC loss block below
  init_ctc_loss(m);
}

// ---- CTC loss ----------------------------------------------------------------------------------
void init_ctc_loss(nb::module_& m) {
  bind_descriptor<CtcLossDescriptor>(m, "CtcLossDescriptor",
                                "CTC loss, torch.nn.functional.ctc_loss's semantics: 'ctc_loss' (forward: the "
                                "loss and log_alpha [N, T, 2 S + 1]) or 'ctc_loss_backward' (grad_log_probs from "
                                "log_alpha). log_probs [T, N, C]; targets [N, S] padded or [sum(target_lengths)] "
                                "concatenated; input_lengths, target_lengths [N] device int tensors. "
                                "max_target_length: required for concatenated targets (a bound on every target "
                                "length), optional for padded ones (default S). Pure data; hashable; the "
                                "plan-cache key.")
      .def("__init__",
           [](CtcLossDescriptor* d, std::string op, TensorSpec log_probs, TensorSpec targets, TensorSpec input_lengths,
              TensorSpec target_lengths, int64_t blank, std::string reduction, bool zero_infinity,
              int64_t max_target_length, std::optional<TensorSpec> grad_loss,
              std::optional<TensorSpec> grad_log_probs) {
             new (d) CtcLossDescriptor{};
             d->op = std::move(op);
             d->log_probs = std::move(log_probs);
             d->targets = std::move(targets);
             d->input_lengths = std::move(input_lengths);
             d->target_lengths = std::move(target_lengths);
             d->blank = blank;
             d->reduction = std::move(reduction);
             d->zero_infinity = zero_infinity;
             d->max_target_length = max_target_length;
             const int64_t n = d->log_probs.shape.size() == 3 ? d->log_probs.shape[1] : 0;
             d->grad_loss = grad_loss ? *grad_loss
                                      : TensorSpec{d->reduction == "none" ? std::vector<int64_t>{n} : std::vector<int64_t>{},
                                                   d->log_probs.dtype, {}};
             d->grad_log_probs = grad_log_probs ? *grad_log_probs : TensorSpec{d->log_probs.shape, d->log_probs.dtype, {}};
           },
           "op"_a, "log_probs"_a, "targets"_a, "input_lengths"_a, "target_lengths"_a, "blank"_a = 0,
           "reduction"_a = "mean", "zero_infinity"_a = false, "max_target_length"_a = -1, "grad_loss"_a = nb::none(),
           "grad_log_probs"_a = nb::none())
      .def_ro("op", &CtcLossDescriptor::op)
      .def_ro("log_probs", &CtcLossDescriptor::log_probs)
      .def_ro("targets", &CtcLossDescriptor::targets)
      .def_ro("input_lengths", &CtcLossDescriptor::input_lengths)
      .def_ro("target_lengths", &CtcLossDescriptor::target_lengths)
      .def_ro("blank", &CtcLossDescriptor::blank)
      .def_ro("reduction", &CtcLossDescriptor::reduction)
      .def_ro("zero_infinity", &CtcLossDescriptor::zero_infinity)
      .def_ro("max_target_length", &CtcLossDescriptor::max_target_length)
      .def_ro("grad_loss", &CtcLossDescriptor::grad_loss)
      .def_ro("grad_log_probs", &CtcLossDescriptor::grad_log_probs);

  bind_plan<CtcLossPlan>(m, "CtcLossPlan", "A validated CTC loss launch: select once, run many times.")
      .def("workspace_bytes", &CtcLossPlan::workspace_bytes, "Bytes of 256-byte aligned scratch run() needs.")
      .def("log_alpha_shape", &CtcLossPlan::log_alpha_shape, "[N, T, 2 S + 1]: the saved forward variables.")
      .def("log_alpha_dtype", &CtcLossPlan::log_alpha_dtype, "float32 (float64 for float64 log_probs).")
      .def("run",
           [](const CtcLossPlan& plan, nb::handle log_probs, nb::handle targets, nb::handle input_lengths,
              nb::handle target_lengths, nb::handle log_alpha, nb::handle workspace, nb::handle out,
              nb::handle grad_loss, nb::handle grad_log_probs, nb::handle stream) {
             const bool fwd = plan.descriptor().op == "ctc_loss";
             Imported x = import_tensor(log_probs, "log_probs", false);
             Imported tg = import_tensor(targets, "targets", false);
             Imported il = import_tensor(input_lengths, "input_lengths", false);
             Imported tl = import_tensor(target_lengths, "target_lengths", false);
             Imported la = import_tensor(log_alpha, "log_alpha", fwd);
             CtcLossTensors T;
             T.log_probs = x.view;
             T.targets = tg.view;
             T.input_lengths = il.view;
             T.target_lengths = tl.view;
             T.log_alpha = la.view;
             Imported o, gl, g;
             if (!out.is_none()) { o = import_tensor(out, "out", true); T.out = o.view; }
             if (!grad_loss.is_none()) { gl = import_tensor(grad_loss, "grad_loss", false); T.grad_loss = gl.view; }
             if (!grad_log_probs.is_none()) {
               g = import_tensor(grad_log_probs, "grad_log_probs", true);
               T.grad_log_probs = g.view;
             }
             const Workspace ws = import_workspace(workspace, x.view.device);
             StreamHandle s = resolve_stream(stream, x);
             {
               nb::gil_scoped_release release;
               plan.run(T, ws.data, ws.size, s);
             }
             finish_for_framework(x, s);
           },
           "log_probs"_a, "targets"_a, "input_lengths"_a, "target_lengths"_a, "log_alpha"_a, "workspace"_a = nb::none(),
           "out"_a = nb::none(), "grad_loss"_a = nb::none(), "grad_log_probs"_a = nb::none(), "stream"_a = nb::none(),
           "Check the tensors against the descriptor and launch. Forward writes out (the loss: [] for mean / sum, "
           "[N] for none) and log_alpha (log_alpha_shape(), log_alpha_dtype(), contiguous); backward reads "
           "log_alpha and grad_loss and writes grad_log_probs.");
}

}  // namespace baracuda::py
