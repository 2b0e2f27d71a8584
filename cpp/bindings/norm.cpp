// Bindings of the norm family: descriptor, plan, and a cached functional entry point.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <unordered_map>

#include "baracuda/errors.h"
#include "baracuda/norm.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

constexpr int kNumSlots = 13;
enum Slot { Y, X, W, B, RES, RES_OUT, MEAN, RSTD, GY, GX, GRES, GW, GB };
// Each slot's name (run()'s keyword, the name errors use) and field, in Slot order.
const NamedOperand<NormTensors> kSlots[kNumSlots] = {
    {"y", &NormTensors::y},
    {"x", &NormTensors::x},
    {"weight", &NormTensors::weight},
    {"bias", &NormTensors::bias},
    {"residual", &NormTensors::residual},
    {"residual_out", &NormTensors::residual_out},
    {"mean", &NormTensors::mean},
    {"rstd", &NormTensors::rstd},
    {"grad_out", &NormTensors::grad_out},
    {"grad_x", &NormTensors::grad_x},
    {"grad_residual", &NormTensors::grad_residual},
    {"grad_weight", &NormTensors::grad_weight},
    {"grad_bias", &NormTensors::grad_bias}};

bool is_output(int slot, bool backward) {
  if (backward) return slot == GX || slot == GW || slot == GB;
  return slot == Y || slot == RES_OUT || slot == MEAN || slot == RSTD;
}
bool is_backward_op(const std::string& op) { return op.size() > 9 && op.compare(op.size() - 9, 9, "_backward") == 0; }


// Imports every given tensor (None = absent) zero-copy, except those `keep` already holds (the
// functional entry imported them for the plan key); `keep` holds the arrays alive.
NormTensors import_all(const nb::handle* hs, bool backward, Imported* keep) {
  NormTensors t;
  for (int i = 0; i < kNumSlots; ++i) {
    if (hs[i].is_none()) continue;
    if (backward && i == B) continue;  // the backward reads no bias (grad_bias says it is wanted)
    if (!keep[i].imported) keep[i] = import_tensor(hs[i], kSlots[i].name, is_output(i, backward));
    t.*kSlots[i].member = keep[i].view;
  }
  return t;
}

// Imports, launches with the GIL released, hands results to JAX; a workspace from `ws_obj`.
void launch(const NormPlan& plan, const nb::handle* hs, nb::handle workspace, nb::handle workspace_alloc,
            nb::handle stream, Imported* imported = nullptr) {
  const bool backward = is_backward_op(plan.descriptor().op);
  Imported own[kNumSlots];
  Imported* keep = imported ? imported : own;
  NormTensors t = import_all(hs, backward, keep);
  const Imported& like = keep[X];
  StreamHandle s = resolve_stream(stream, like);
  const Workspace ws = given_or_allocated_workspace(workspace, plan.workspace_bytes(), workspace_alloc, like.view.device, s);
  {
    nb::gil_scoped_release release;
    plan.run(t, ws.data, ws.size, s);
  }
  finish_for_framework(like, s);
}

// ---- GroupNorm / InstanceNorm / BatchNorm ----
constexpr int kChanSlots = 12;
enum ChanSlot { CY, CX, CW, CB, CRM, CRV, CMEAN, CRSTD, CGY, CGX, CGW, CGB };
const char* kChanSlotNames[kChanSlots] = {"y",    "x",        "weight", "bias",   "running_mean", "running_var",
                                          "mean", "rstd",     "grad_out", "grad_x", "grad_weight", "grad_bias"};

bool chan_is_output(int slot, bool backward, bool running_updated) {
  if (backward) return slot == CGX || slot == CGW || slot == CGB;
  return slot == CY || slot == CMEAN || slot == CRSTD || (running_updated && (slot == CRM || slot == CRV));
}
TensorView& chan_slot_view(ChannelNormTensors& t, int slot) {
  switch (slot) {
    case CY: return t.y;
    case CX: return t.x;
    case CW: return t.weight;
    case CB: return t.bias;
    case CRM: return t.running_mean;
    case CRV: return t.running_var;
    case CMEAN: return t.mean;
    case CRSTD: return t.rstd;
    case CGY: return t.grad_out;
    case CGX: return t.grad_x;
    case CGW: return t.grad_weight;
    default: return t.grad_bias;
  }
}

void chan_launch(const ChannelNormPlan& plan, const nb::handle* hs, nb::handle workspace, nb::handle workspace_alloc,
                 nb::handle stream) {
  const ChannelNormDescriptor& d = plan.descriptor();
  const bool backward = is_backward_op(d.op);
  const bool running_updated = d.running && d.training && !backward;
  Imported keep[kChanSlots];
  ChannelNormTensors t;
  for (int i = 0; i < kChanSlots; ++i) {
    if (hs[i].is_none()) continue;
    if (backward && i == CB) continue;  // the backward reads no bias (grad_bias says it is wanted)
    keep[i] = import_tensor(hs[i], kChanSlotNames[i], chan_is_output(i, backward, running_updated));
    chan_slot_view(t, i) = keep[i].view;
  }
  const Imported& like = keep[CX];
  StreamHandle s = resolve_stream(stream, like);
  const Workspace ws = given_or_allocated_workspace(workspace, plan.workspace_bytes(), workspace_alloc, like.view.device, s);
  {
    nb::gil_scoped_release release;
    plan.run(t, ws.data, ws.size, s);
  }
  finish_for_framework(like, s);
}

}  // namespace

void init_norm(nb::module_& m) {
  bind_descriptor<NormDescriptor>(m, "NormDescriptor",
                             "RMSNorm / LayerNorm over the last dimension of x, forward or backward. op: 'rms_norm', "
                             "'layer_norm', 'rms_norm_backward', 'layer_norm_backward'; weight / bias: their dtype "
                             "(x's or float32) or None; residual: fused residual add (forward) or grad_residual "
                             "(backward); save_stats: write rstd (and mean) for backward. Pure data; hashable.")
      .def("__init__",
           [](NormDescriptor* d, std::string op, TensorSpec x, std::optional<DType> weight, std::optional<DType> bias,
              bool residual, double eps, bool save_stats) {
             new (d) NormDescriptor{std::move(op), std::move(x), weight, bias, residual, eps, save_stats};
           },
           "op"_a, "x"_a, "weight"_a = nb::none(), "bias"_a = nb::none(), "residual"_a = false, "eps"_a = 1e-6,
           "save_stats"_a = false)
      .def_ro("op", &NormDescriptor::op)
      .def_ro("x", &NormDescriptor::x)
      .def_ro("weight", &NormDescriptor::weight)
      .def_ro("bias", &NormDescriptor::bias)
      .def_ro("residual", &NormDescriptor::residual)
      .def_ro("eps", &NormDescriptor::eps)
      .def_ro("save_stats", &NormDescriptor::save_stats);

  bind_plan<NormPlan>(m, "NormPlan", "A validated norm launch: select once, run many times.")
      .def("workspace_bytes", &NormPlan::workspace_bytes,
           "Bytes of scratch run() needs: the grad_weight / grad_bias partial sums of a backward plan, else 0.")
      .def("run",
           [](const NormPlan& plan, nb::handle y, nb::handle x, nb::handle weight, nb::handle bias, nb::handle residual,
              nb::handle residual_out, nb::handle mean, nb::handle rstd, nb::handle grad_out, nb::handle grad_x,
              nb::handle grad_residual, nb::handle grad_weight, nb::handle grad_bias, nb::handle workspace,
              nb::handle stream) {
             const nb::handle hs[kNumSlots] = {y,    x,        weight, bias,          residual,    residual_out, mean,
                                               rstd, grad_out, grad_x, grad_residual, grad_weight, grad_bias};
             launch(plan, hs, workspace, nb::none(), stream);
           },
           nb::kw_only(), "y"_a = nb::none(), "x"_a = nb::none(), "weight"_a = nb::none(), "bias"_a = nb::none(),
           "residual"_a = nb::none(), "residual_out"_a = nb::none(), "mean"_a = nb::none(), "rstd"_a = nb::none(),
           "grad_out"_a = nb::none(), "grad_x"_a = nb::none(), "grad_residual"_a = nb::none(),
           "grad_weight"_a = nb::none(), "grad_bias"_a = nb::none(), "workspace"_a = nb::none(),
           "stream"_a = nb::none(),
           "Forward: run(y=, x=, [weight=, bias=, residual=, residual_out=, mean=, rstd=]); backward: "
           "run(grad_x=, grad_out=, x=, rstd=, [mean=, weight=, grad_weight=, grad_bias=, grad_residual=], "
           "workspace=). Checks the tensors against the descriptor and launches on `stream` (default: the current "
           "stream of x's framework). Never allocates, never synchronizes (except to hand results to JAX).");

  def_xla_plan<NormPlan>(m, "norm", kSlots);

  m.def("norm_call",
        [](const std::string& op, double eps, bool save_stats, nb::handle y, nb::handle x, nb::handle weight,
           nb::handle bias, nb::handle residual, nb::handle residual_out, nb::handle mean, nb::handle rstd,
           nb::handle grad_out, nb::handle grad_x, nb::handle grad_residual, nb::handle grad_weight,
           nb::handle grad_bias, nb::handle stream, nb::handle workspace_alloc) {
          const nb::handle hs[kNumSlots] = {y,    x,        weight, bias,          residual,    residual_out, mean,
                                            rstd, grad_out, grad_x, grad_residual, grad_weight, grad_bias};
          const bool backward = is_backward_op(op);
          // The plan key: op, eps, save_stats, x's metadata, and what is present (with dtypes). The
          // operands imported for it are handed to the launch (each tensor is imported once).
          Imported keep[kNumSlots];
          Imported& xi = keep[X] = import_tensor(x, "x", false);
          std::string key = op;
          key.push_back('\0');
          key.append(reinterpret_cast<const char*>(&eps), sizeof eps);
          key.push_back(char(save_stats));
          append_key(key, xi.view);
          std::optional<DType> wd, bd;
          bool res = false;
          auto dtype_of = [&](nb::handle h, int slot) {
            keep[slot] = import_tensor(h, kSlots[slot].name, is_output(slot, backward));
            return keep[slot].view.dtype;
          };
          if (!weight.is_none()) wd = dtype_of(weight, W);
          if (backward) {
            if (!grad_bias.is_none()) bd = dtype_of(grad_bias, GB);
            res = !grad_residual.is_none();
          } else {
            if (!bias.is_none()) bd = dtype_of(bias, B);
            res = !residual.is_none();
          }
          key.push_back(wd ? char(*wd) : char(-1));
          key.push_back(bd ? char(*bd) : char(-1));
          key.push_back(char(res));
          const NormPlan plan = plan_cache<NormPlan>().get(
              key, [&] { return NormPlan::select(NormDescriptor{op, spec_of(xi.view), wd, bd, res, eps, save_stats}); });
          launch(plan, hs, nb::none(), workspace_alloc, stream, keep);
        },
        "op"_a, "eps"_a, "save_stats"_a, "y"_a.none(), "x"_a.none(), "weight"_a.none(), "bias"_a.none(),
        "residual"_a.none(), "residual_out"_a.none(), "mean"_a.none(), "rstd"_a.none(), "grad_out"_a.none(),
        "grad_x"_a.none(), "grad_residual"_a.none(), "grad_weight"_a.none(), "grad_bias"_a.none(),
        "stream"_a = nb::none(), "workspace_alloc"_a = nb::none(),
        "Functional entry: select (cached on op, eps, flags and x's metadata) and run.");
  m.def("norm_cache_size", [] { return plan_cache<NormPlan>().size(); }, "Plans in the norm functional cache.");
  bind_descriptor<ChannelNormDescriptor>(
      m, "ChannelNormDescriptor",
      "GroupNorm / InstanceNorm / BatchNorm over x [N, C, *spatial], forward or backward. op: 'group_norm', "
      "'instance_norm', 'batch_norm' or one of them + '_backward'; num_groups: group_norm only (0 otherwise); "
      "weight / bias / running: dtypes (x's or float32) or None; training: batch statistics (batch_norm), "
      "use_input_stats (instance_norm), saved stats vs running stats (batch_norm_backward); save_stats: write "
      "mean / rstd. Pure data; hashable.")
      .def("__init__",
           [](ChannelNormDescriptor* d, std::string op, TensorSpec x, int64_t num_groups, std::optional<DType> weight,
              std::optional<DType> bias, std::optional<DType> running, bool training, double momentum, double eps,
              bool save_stats) {
             new (d) ChannelNormDescriptor{std::move(op), std::move(x), num_groups, weight, bias, running,
                                           training, momentum, eps, save_stats};
           },
           "op"_a, "x"_a, "num_groups"_a = 0, "weight"_a = nb::none(), "bias"_a = nb::none(),
           "running"_a = nb::none(), "training"_a = true, "momentum"_a = 0.1, "eps"_a = 1e-5, "save_stats"_a = false)
      .def_ro("op", &ChannelNormDescriptor::op)
      .def_ro("x", &ChannelNormDescriptor::x)
      .def_ro("num_groups", &ChannelNormDescriptor::num_groups)
      .def_ro("weight", &ChannelNormDescriptor::weight)
      .def_ro("bias", &ChannelNormDescriptor::bias)
      .def_ro("running", &ChannelNormDescriptor::running)
      .def_ro("training", &ChannelNormDescriptor::training)
      .def_ro("momentum", &ChannelNormDescriptor::momentum)
      .def_ro("eps", &ChannelNormDescriptor::eps)
      .def_ro("save_stats", &ChannelNormDescriptor::save_stats);

  bind_plan<ChannelNormPlan>(m, "ChannelNormPlan", "A validated group / instance / batch norm launch.")
      .def("workspace_bytes", &ChannelNormPlan::workspace_bytes,
           "Bytes of scratch run() needs: partial sums and the per-channel coefficient table (0 for empty x).")
      .def("run",
           [](const ChannelNormPlan& plan, nb::handle y, nb::handle x, nb::handle weight, nb::handle bias,
              nb::handle running_mean, nb::handle running_var, nb::handle mean, nb::handle rstd, nb::handle grad_out,
              nb::handle grad_x, nb::handle grad_weight, nb::handle grad_bias, nb::handle workspace,
              nb::handle stream) {
             const nb::handle hs[kChanSlots] = {y,    x,    weight,   bias,   running_mean, running_var,
                                                mean, rstd, grad_out, grad_x, grad_weight,  grad_bias};
             chan_launch(plan, hs, workspace, nb::none(), stream);
           },
           nb::kw_only(), "y"_a = nb::none(), "x"_a = nb::none(), "weight"_a = nb::none(), "bias"_a = nb::none(),
           "running_mean"_a = nb::none(), "running_var"_a = nb::none(), "mean"_a = nb::none(), "rstd"_a = nb::none(),
           "grad_out"_a = nb::none(), "grad_x"_a = nb::none(), "grad_weight"_a = nb::none(),
           "grad_bias"_a = nb::none(), "workspace"_a = nb::none(), "stream"_a = nb::none(),
           "Forward: run(y=, x=, [weight=, bias=, running_mean=, running_var=, mean=, rstd=], workspace=); backward: "
           "run(grad_x=, grad_out=, x=, mean=, [rstd=, running_var=, weight=, grad_weight=, grad_bias=], workspace=). "
           "Never allocates, never synchronizes (except to hand results to JAX).");

  m.def("channel_norm_call",
        [](const std::string& op, int64_t num_groups, bool training, double momentum, double eps, bool save_stats,
           nb::handle y, nb::handle x, nb::handle weight, nb::handle bias, nb::handle running_mean,
           nb::handle running_var, nb::handle mean, nb::handle rstd, nb::handle grad_out, nb::handle grad_x,
           nb::handle grad_weight, nb::handle grad_bias, nb::handle stream, nb::handle workspace_alloc) {
          const nb::handle hs[kChanSlots] = {y,    x,    weight,   bias,   running_mean, running_var,
                                             mean, rstd, grad_out, grad_x, grad_weight,  grad_bias};
          const bool backward = is_backward_op(op);
          Imported xi = import_tensor(x, "x", false);
          std::string key = op;
          key.push_back('\0');
          append_params(key, {{"eps", eps}, {"g", double(num_groups)}, {"momentum", momentum},
                              {"save", double(save_stats)}, {"training", double(training)}});
          append_key(key, xi.view);
          auto dtype_of = [&](nb::handle h, const char* name) { return import_tensor(h, name, false).view.dtype; };
          std::optional<DType> wd, bd, rd;
          if (!weight.is_none()) wd = dtype_of(weight, "weight");
          if (backward) {
            if (!grad_bias.is_none()) bd = dtype_of(grad_bias, "grad_bias");
          } else if (!bias.is_none()) {
            bd = dtype_of(bias, "bias");
          }
          if (!running_var.is_none()) rd = dtype_of(running_var, "running_var");
          else if (!running_mean.is_none()) rd = dtype_of(running_mean, "running_mean");
          key.push_back(wd ? char(*wd) : char(-1));
          key.push_back(bd ? char(*bd) : char(-1));
          key.push_back(rd ? char(*rd) : char(-1));
          const ChannelNormPlan plan = plan_cache<ChannelNormPlan>().get(key, [&] {
            ChannelNormDescriptor d{op, spec_of(xi.view), num_groups, wd, bd, rd, training, momentum, eps, save_stats};
            return ChannelNormPlan::select(d);
          });
          chan_launch(plan, hs, nb::none(), workspace_alloc, stream);
        },
        "op"_a, "num_groups"_a, "training"_a, "momentum"_a, "eps"_a, "save_stats"_a, "y"_a.none(), "x"_a.none(),
        "weight"_a.none(), "bias"_a.none(), "running_mean"_a.none(), "running_var"_a.none(), "mean"_a.none(),
        "rstd"_a.none(), "grad_out"_a.none(), "grad_x"_a.none(), "grad_weight"_a.none(), "grad_bias"_a.none(),
        "stream"_a = nb::none(), "workspace_alloc"_a = nb::none(),
        "Functional entry of group / instance / batch norm: select (cached on op, flags and x's metadata) and run.");
  m.def("channel_norm_cache_size", [] { return plan_cache<ChannelNormPlan>().size(); },
        "Plans in the channel-norm functional cache.");
}

}  // namespace baracuda::py
