// Bindings of the attention family: descriptor, plan, and the functional entry. Operands are named
// (the table below is the one list of them: run()'s keywords, the functional entry's dict keys, the
// JAX roles and the names errors use).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "baracuda/attention.h"
#include "baracuda/errors.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

constexpr int kNumSlots = 15;
const NamedOperand<AttentionTensors> kRoles[kNumSlots] = {
    {"q", &AttentionTensors::q},
    {"k", &AttentionTensors::k},
    {"v", &AttentionTensors::v},
    {"out", &AttentionTensors::out},
    {"lse", &AttentionTensors::lse},
    {"cu_seqlens_q", &AttentionTensors::cu_seqlens_q},
    {"cu_seqlens_k", &AttentionTensors::cu_seqlens_k},
    {"seqused_k", &AttentionTensors::seqused_k},
    {"alibi_slopes", &AttentionTensors::alibi_slopes},
    {"sinks", &AttentionTensors::sinks},
    {"grad_out", &AttentionTensors::grad_out},
    {"grad_q", &AttentionTensors::grad_q},
    {"grad_k", &AttentionTensors::grad_k},
    {"grad_v", &AttentionTensors::grad_v},
    {"grad_sinks", &AttentionTensors::grad_sinks}};
enum { Q, K, V, OUT, LSE, CU_Q, CU_K, SEQUSED_K, ALIBI, SINKS, GRAD_OUT, GRAD_Q, GRAD_K, GRAD_V, GRAD_SINKS };
bool is_output(int slot, bool backward) { return backward ? slot >= GRAD_Q : slot == OUT || slot == LSE; }

// Every tensor of `tensors` (a dict name -> tensor or None), imported once, by slot.
struct Operands {
  Imported held[kNumSlots];
  AttentionTensors views;
};
void import_operands(nb::dict tensors, bool backward, Operands& ops) {
  import_named("attention", tensors, kRoles, ops.held, ops.views, [&](int i) { return is_output(i, backward); });
  if (!ops.held[Q].imported) throw InvalidArgument("attention: q is missing");
}

}  // namespace

void init_attention(nb::module_& m) {
  bind_descriptor<AttentionDescriptor>(
      m, "AttentionDescriptor",
      "Scaled dot-product attention, forward ('attention') or backward ('attention_backward'), over q / k / v "
      "[B, S, H, D] (or packed [total, H, D] with varlen=True) and the forward's out. Pure data; hashable.")
      .def("__init__",
           [](AttentionDescriptor* d, std::string op, TensorSpec q, TensorSpec k, TensorSpec v, TensorSpec out,
              std::optional<double> scale, bool causal, std::string causal_alignment, int64_t window_left,
              int64_t window_right, double softcap, int alibi, bool sinks, bool varlen, int64_t batch,
              int64_t max_seqlen_q, int64_t max_seqlen_k, bool seqused_k, bool lse, bool deterministic,
              std::string kernel, std::string tile) {
             new (d) AttentionDescriptor{};
             d->op = std::move(op);
             d->q = std::move(q);
             d->k = std::move(k);
             d->v = std::move(v);
             d->out = std::move(out);
             d->scale = scale;
             d->causal = causal;
             d->causal_alignment = std::move(causal_alignment);
             d->window_left = window_left;
             d->window_right = window_right;
             d->softcap = softcap;
             d->alibi = alibi;
             d->sinks = sinks;
             d->varlen = varlen;
             d->batch = batch;
             d->max_seqlen_q = max_seqlen_q;
             d->max_seqlen_k = max_seqlen_k;
             d->seqused_k = seqused_k;
             d->lse = lse;
             d->deterministic = deterministic;
             d->kernel = std::move(kernel);
             d->tile = std::move(tile);
           },
           "op"_a, "q"_a, "k"_a, "v"_a, "out"_a, nb::kw_only(), "scale"_a = nb::none(), "causal"_a = false,
           "causal_alignment"_a = "bottom_right", "window_left"_a = -1, "window_right"_a = -1, "softcap"_a = 0.0,
           "alibi"_a = 0, "sinks"_a = false, "varlen"_a = false, "batch"_a = 0, "max_seqlen_q"_a = 0,
           "max_seqlen_k"_a = 0, "seqused_k"_a = false, "lse"_a = false, "deterministic"_a = false,
           "kernel"_a = "auto", "tile"_a = "auto")
      .def_ro("op", &AttentionDescriptor::op)
      .def_ro("q", &AttentionDescriptor::q)
      .def_ro("k", &AttentionDescriptor::k)
      .def_ro("v", &AttentionDescriptor::v)
      .def_ro("out", &AttentionDescriptor::out)
      .def_ro("scale", &AttentionDescriptor::scale)
      .def_ro("causal", &AttentionDescriptor::causal)
      .def_ro("causal_alignment", &AttentionDescriptor::causal_alignment)
      .def_ro("window_left", &AttentionDescriptor::window_left)
      .def_ro("window_right", &AttentionDescriptor::window_right)
      .def_ro("softcap", &AttentionDescriptor::softcap)
      .def_ro("alibi", &AttentionDescriptor::alibi)
      .def_ro("sinks", &AttentionDescriptor::sinks)
      .def_ro("varlen", &AttentionDescriptor::varlen)
      .def_ro("batch", &AttentionDescriptor::batch)
      .def_ro("max_seqlen_q", &AttentionDescriptor::max_seqlen_q)
      .def_ro("max_seqlen_k", &AttentionDescriptor::max_seqlen_k)
      .def_ro("seqused_k", &AttentionDescriptor::seqused_k)
      .def_ro("lse", &AttentionDescriptor::lse)
      .def_ro("deterministic", &AttentionDescriptor::deterministic)
      .def_ro("kernel", &AttentionDescriptor::kernel)
      .def_ro("tile", &AttentionDescriptor::tile);

  bind_plan<AttentionPlan>(m, "AttentionPlan", "A validated attention launch: select once, run many times.")
      .def("workspace_bytes", &AttentionPlan::workspace_bytes,
           "Bytes of scratch run() needs: the backward's per-row sum(grad_out * out); 0 for the forward.")
      .def("run",
           [](const AttentionPlan& plan, nb::kwargs kwargs) {
             const RunKwargs a = split_run_kwargs(kwargs);
             Operands ops;
             import_operands(a.tensors, plan.descriptor().op == "attention_backward", ops);
             run_imported(plan, ops.views, ops.held[Q], a.workspace, nb::none(), a.stream);
           },
           "kwargs"_a,
           "run(q=, k=, v=, out=, [lse=, cu_seqlens_q=, cu_seqlens_k=, seqused_k=, alibi_slopes=, sinks=], "
           "[grad_out=, grad_q=, grad_k=, grad_v=, grad_sinks=, workspace=], stream=): check the tensors against the "
           "descriptor and launch on `stream` (default: the current stream of q's framework). Never allocates.");

  def_xla_plan<AttentionPlan>(m, "attention", kRoles);

  m.def("attention_call",
        [](const std::string& op, nb::dict tensors, std::optional<double> scale, bool causal,
           const std::string& causal_alignment, int64_t window_left, int64_t window_right, double softcap,
           int64_t batch, int64_t max_seqlen_q, int64_t max_seqlen_k, bool deterministic, const std::string& kernel,
           nb::handle stream, nb::handle workspace_alloc) {
          const bool backward = op == "attention_backward";
          Operands ops;
          import_operands(tensors, backward, ops);
          const AttentionTensors& t = ops.views;
          const bool varlen = ops.held[CU_Q].imported;
          const int alibi = !ops.held[ALIBI].imported ? 0 : t.alibi_slopes.ndim == 2 ? 2 : 1;
          std::string key = op;
          key.push_back('\0');
          append_pod(key, scale ? *scale : -1.0);
          append_pod(key, char(scale.has_value()));
          append_pod(key, char(causal));
          key += causal_alignment;
          key.push_back('\0');
          append_pod(key, window_left);
          append_pod(key, window_right);
          append_pod(key, softcap);
          append_pod(key, batch);
          append_pod(key, max_seqlen_q);
          append_pod(key, max_seqlen_k);
          append_pod(key, char(deterministic));
          key += kernel;
          key.push_back('\0');
          for (int i = Q; i <= LSE; ++i) {
            key.push_back(char(ops.held[i].imported));
            if (ops.held[i].imported && i != LSE) append_key(key, ops.held[i].view);
          }
          key.push_back(char(varlen));
          key.push_back(char(alibi));
          key.push_back(char(ops.held[SEQUSED_K].imported));
          key.push_back(char(ops.held[SINKS].imported));
          const AttentionPlan plan = plan_cache<AttentionPlan>().get(key, [&] {
            if (!ops.held[OUT].imported) throw InvalidArgument(op + ": out is missing");
            AttentionDescriptor d;
            d.op = op;
            d.q = spec_of(t.q);
            d.k = spec_of(t.k);
            d.v = spec_of(t.v);
            d.out = spec_of(t.out);
            d.scale = scale;
            d.causal = causal;
            d.causal_alignment = causal_alignment;
            d.window_left = window_left;
            d.window_right = window_right;
            d.softcap = softcap;
            d.alibi = alibi;
            d.sinks = ops.held[SINKS].imported;
            d.varlen = varlen;
            d.batch = batch;
            d.max_seqlen_q = max_seqlen_q;
            d.max_seqlen_k = max_seqlen_k;
            d.seqused_k = ops.held[SEQUSED_K].imported;
            d.lse = !backward && ops.held[LSE].imported;
            d.deterministic = deterministic;
            d.kernel = kernel;
            return AttentionPlan::select(d);
          });
          run_imported(plan, ops.views, ops.held[Q], nb::none(), workspace_alloc, stream);
          return plan.sku().name;
        },
        "op"_a, "tensors"_a, "scale"_a.none(), "causal"_a, "causal_alignment"_a, "window_left"_a, "window_right"_a,
        "softcap"_a, "batch"_a, "max_seqlen_q"_a, "max_seqlen_k"_a, "deterministic"_a, "kernel"_a,
        "stream"_a = nb::none(), "workspace_alloc"_a = nb::none(),
        "Functional entry: tensors by name (a dict; None = absent), select (cached on the parameters and the "
        "operands' metadata) and run. Returns the SKU name of the kernel that ran.");
  m.def("attention_cache_size", [] { return plan_cache<AttentionPlan>().size(); }, "Plans in the attention functional cache.");
}

}  // namespace baracuda::py
