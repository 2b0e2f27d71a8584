// Bindings of the MoE routing family: the gate and permute descriptors and plans, and their
// functional entries (operands by name).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "baracuda/errors.h"
#include "baracuda/moe.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

const NamedOperand<MoeGateTensors> kGateRoles[] = {
    {"logits", &MoeGateTensors::logits},           {"correction_bias", &MoeGateTensors::correction_bias},
    {"weights", &MoeGateTensors::weights},         {"ids", &MoeGateTensors::ids},
    {"grad_weights", &MoeGateTensors::grad_weights}, {"grad_logits", &MoeGateTensors::grad_logits}};
enum { G_LOGITS, G_BIAS, G_WEIGHTS, G_IDS, G_GRAD_WEIGHTS, G_GRAD_LOGITS, G_NUM };

const NamedOperand<MoePermuteTensors> kPermuteRoles[] = {
    {"x", &MoePermuteTensors::x},
    {"ids", &MoePermuteTensors::ids},
    {"x_sorted", &MoePermuteTensors::x_sorted},
    {"offsets", &MoePermuteTensors::offsets},
    {"pos", &MoePermuteTensors::pos},
    {"y_sorted", &MoePermuteTensors::y_sorted},
    {"weights", &MoePermuteTensors::weights},
    {"out", &MoePermuteTensors::out},
    {"grad_out", &MoePermuteTensors::grad_out},
    {"grad_y_sorted", &MoePermuteTensors::grad_y_sorted},
    {"grad_weights", &MoePermuteTensors::grad_weights}};
enum { P_X, P_IDS, P_X_SORTED, P_OFFSETS, P_POS, P_Y_SORTED, P_WEIGHTS, P_OUT, P_GRAD_OUT, P_GRAD_Y, P_GRAD_W, P_NUM };

struct GateOperands {
  Imported held[G_NUM];
  MoeGateTensors views;
};
// ids is written by the forward and read by the backward.
void import_gate(nb::handle tensors, GateOperands& ops, bool backward) {
  import_named("moe_gate", tensors, kGateRoles, ops.held, ops.views, [backward](int i) {
    return i == G_WEIGHTS || (i == G_IDS && !backward) || i == G_GRAD_LOGITS;
  });
  if (!ops.held[G_LOGITS].imported) throw InvalidArgument("moe_gate: logits is missing");
}

struct PermuteOperands {
  Imported held[P_NUM];
  MoePermuteTensors views;
};
int lead_slot(const std::string& op) { return op == "permute" ? P_X : op == "unpermute" ? P_Y_SORTED : P_GRAD_OUT; }

// Imports the operands of `op` and returns its lead operand's slot (x, y_sorted or grad_out: the
// stream's and the device's owner), which must be given.
int import_permute(const std::string& op, nb::handle tensors, PermuteOperands& ops) {
  import_named("moe_permute", tensors, kPermuteRoles, ops.held, ops.views, [&op](int i) {
    return i == P_X_SORTED || i == P_OFFSETS || (i == P_POS && op == "permute") || i == P_OUT || i == P_GRAD_Y ||
           i == P_GRAD_W;
  });
  const int lead = lead_slot(op);
  if (!ops.held[lead].imported) throw InvalidArgument("moe_" + op + ": " + kPermuteRoles[lead].name + " is missing");
  return lead;
}

}  // namespace

void init_moe(nb::module_& m) {
  bind_descriptor<MoeGateDescriptor>(
      m, "MoeGateDescriptor",
      "MoE gating of logits [T, E]: top_k experts by softmax / sigmoid scores (+ correction_bias for the selection), "
      "optionally grouped (n_group, topk_group, group_score), renormalised and scaled; backward=True for the "
      "logits' gradient. Pure data; hashable.")
      .def("__init__",
           [](MoeGateDescriptor* d, TensorSpec logits, int64_t top_k, bool backward, std::string scoring,
              bool renormalize, int64_t n_group, int64_t topk_group, std::string group_score, bool correction_bias,
              double routed_scaling_factor, DType ids_dtype) {
             new (d) MoeGateDescriptor{};
             d->logits = std::move(logits);
             d->top_k = top_k;
             d->backward = backward;
             d->scoring = std::move(scoring);
             d->renormalize = renormalize;
             d->n_group = n_group;
             d->topk_group = topk_group;
             d->group_score = std::move(group_score);
             d->correction_bias = correction_bias;
             d->routed_scaling_factor = routed_scaling_factor;
             d->ids_dtype = ids_dtype;
           },
           "logits"_a, "top_k"_a, nb::kw_only(), "backward"_a = false, "scoring"_a = "softmax",
           "renormalize"_a = true, "n_group"_a = 1, "topk_group"_a = 1, "group_score"_a = "max",
           "correction_bias"_a = false, "routed_scaling_factor"_a = 1.0, "ids_dtype"_a = DType::Int32)
      .def_ro("logits", &MoeGateDescriptor::logits)
      .def_ro("top_k", &MoeGateDescriptor::top_k)
      .def_ro("backward", &MoeGateDescriptor::backward)
      .def_ro("scoring", &MoeGateDescriptor::scoring)
      .def_ro("renormalize", &MoeGateDescriptor::renormalize);

  bind_plan<MoeGatePlan>(m, "MoeGatePlan", "A validated MoE gate (or its backward).")
      .def("workspace_bytes", &MoeGatePlan::workspace_bytes, "Always 0.")
      .def("run",
           [](const MoeGatePlan& plan, nb::kwargs kwargs) {
             const RunKwargs a = split_run_kwargs(kwargs);
             GateOperands ops;
             import_gate(a.tensors, ops, plan.descriptor().backward);
             run_imported(plan, ops.views, ops.held[G_LOGITS], nb::none(), nb::none(), a.stream);
           },
           "kwargs"_a,
           "run(logits=, weights=, ids=, [correction_bias=], stream=) or, backward, run(logits=, ids=, "
           "grad_weights=, grad_logits=, stream=): check the tensors and launch on `stream` (no host work, no "
           "allocation).");

  m.def("moe_gate_call",
        [](nb::dict tensors, int64_t top_k, bool backward, std::string scoring, bool renormalize, int64_t n_group,
           int64_t topk_group, std::string group_score, double routed_scaling_factor, nb::handle stream) {
          GateOperands ops;
          import_gate(tensors, ops, backward);
          std::string key;
          for (int i = 0; i < G_NUM; ++i) {
            key.push_back(char(ops.held[i].imported));
            if (ops.held[i].imported) append_key(key, ops.held[i].view);
          }
          for (int64_t v : {top_k, n_group, topk_group}) append_pod(key, v);
          append_pod(key, routed_scaling_factor);
          key += scoring + "|" + group_score;
          key.push_back(char(backward));
          key.push_back(char(renormalize));
          const MoeGatePlan plan = plan_cache<MoeGatePlan>().get(key, [&] {
            if (!ops.held[G_IDS].imported) throw InvalidArgument("moe_gate: ids is missing");
            MoeGateDescriptor d;
            d.backward = backward;
            d.logits = spec_of(ops.views.logits);
            d.top_k = top_k;
            d.scoring = scoring;
            d.renormalize = renormalize;
            d.n_group = n_group;
            d.topk_group = topk_group;
            d.group_score = group_score;
            d.correction_bias = ops.held[G_BIAS].imported;
            d.routed_scaling_factor = routed_scaling_factor;
            d.ids_dtype = ops.views.ids.dtype;
            return MoeGatePlan::select(d);
          });
          run_imported(plan, ops.views, ops.held[G_LOGITS], nb::none(), nb::none(), stream);
          return plan.sku().name;
        },
        "tensors"_a, "top_k"_a, "backward"_a, "scoring"_a, "renormalize"_a, "n_group"_a, "topk_group"_a,
        "group_score"_a, "routed_scaling_factor"_a, "stream"_a = nb::none(),
        "Functional entry of the gate: tensors by name (logits, correction_bias, weights, ids; backward: logits, ids, "
        "grad_weights, grad_logits), select (cached) and run. Returns the SKU name.");

  bind_descriptor<MoePermuteDescriptor>(
      m, "MoePermuteDescriptor",
      "MoE token permutation: op 'permute' (x [T, H], ids [T, k] -> x_sorted, offsets [E + 1], pos), 'unpermute' "
      "(y_sorted [N, H], pos, weights? -> out [T, H]) or 'unpermute_backward' (grad_out [T, H], pos, weights? -> "
      "grad_y_sorted [N, H], grad_weights). `rows` is x / y_sorted / grad_out, `routing` ids / pos. Pure data; "
      "hashable.")
      .def("__init__",
           [](MoePermuteDescriptor* d, std::string op, TensorSpec rows, TensorSpec routing, int64_t num_experts,
              bool weights, int64_t sorted_rows, DType offsets_dtype) {
             new (d) MoePermuteDescriptor{};
             d->op = std::move(op);
             d->rows = std::move(rows);
             d->routing = std::move(routing);
             d->num_experts = num_experts;
             d->weights = weights;
             d->sorted_rows = sorted_rows;
             d->offsets_dtype = offsets_dtype;
           },
           "op"_a, "rows"_a, "routing"_a, nb::kw_only(), "num_experts"_a = 0, "weights"_a = false,
           "sorted_rows"_a = -1, "offsets_dtype"_a = DType::Int32)
      .def_ro("op", &MoePermuteDescriptor::op)
      .def_ro("rows", &MoePermuteDescriptor::rows)
      .def_ro("routing", &MoePermuteDescriptor::routing)
      .def_ro("num_experts", &MoePermuteDescriptor::num_experts)
      .def_ro("weights", &MoePermuteDescriptor::weights);

  bind_plan<MoePermutePlan>(m, "MoePermutePlan", "A validated MoE permute, unpermute or unpermute backward.")
      .def("workspace_bytes", &MoePermutePlan::workspace_bytes, "The permute's sort buffers; 0 otherwise.")
      .def("run",
           [](const MoePermutePlan& plan, nb::kwargs kwargs) {
             const RunKwargs a = split_run_kwargs(kwargs);
             const std::string& op = plan.descriptor().op;
             PermuteOperands ops;
             const int lead = import_permute(op, a.tensors, ops);
             run_imported(plan, ops.views, ops.held[lead], a.workspace, nb::none(), a.stream);
           },
           "kwargs"_a,
           "run(**tensors, workspace=, stream=): the operands by their names (x, ids, x_sorted, offsets, pos; "
           "y_sorted, weights, out; grad_out, grad_y_sorted, grad_weights); the permute's workspace is the caller's "
           "tensor of workspace_bytes().");

  m.def("moe_permute_call",
        [](std::string op, nb::dict tensors, int64_t num_experts, int64_t sorted_rows, nb::handle stream,
           nb::handle workspace_alloc) {
          PermuteOperands ops;
          const int lead = import_permute(op, tensors, ops);
          const int routing = op == "permute" ? P_IDS : P_POS;
          std::string key = op + "|";
          for (int i = 0; i < P_NUM; ++i) {
            key.push_back(char(ops.held[i].imported));
            if (ops.held[i].imported) append_key(key, ops.held[i].view);
          }
          append_pod(key, num_experts);
          append_pod(key, sorted_rows);
          const MoePermutePlan plan = plan_cache<MoePermutePlan>().get(key, [&] {
            if (!ops.held[routing].imported)
              throw InvalidArgument("moe_" + op + ": " + kPermuteRoles[routing].name + " is missing");
            MoePermuteDescriptor d;
            d.op = op;
            d.rows = spec_of(ops.held[lead].view);
            d.routing = spec_of(ops.held[routing].view);
            d.num_experts = num_experts;
            d.weights = ops.held[P_WEIGHTS].imported;
            d.sorted_rows = sorted_rows;
            if (ops.held[P_OFFSETS].imported) d.offsets_dtype = ops.views.offsets.dtype;
            return MoePermutePlan::select(d);
          });
          run_imported(plan, ops.views, ops.held[lead], nb::none(), workspace_alloc, stream);
          return plan.sku().name;
        },
        "op"_a, "tensors"_a, "num_experts"_a = 0, "sorted_rows"_a = -1, "stream"_a = nb::none(),
        "workspace_alloc"_a = nb::none(),
        "Functional entry of permute / unpermute / unpermute_backward: tensors by name, select (cached) and run. "
        "Returns the SKU name.");

  def_xla_plan<MoeGatePlan>(m, "moe_gate", kGateRoles);
  def_xla_plan<MoePermutePlan>(m, "moe_permute", kPermuteRoles);
}

}  // namespace baracuda::py
