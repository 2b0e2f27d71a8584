// Bindings of the paged-attention family: descriptor, plan, and the functional entry (operands by
// name; the table below is the one list of them).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "baracuda/errors.h"
#include "baracuda/paged_attention.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

constexpr int kNumSlots = 11;
const NamedOperand<PagedAttentionTensors> kRoles[kNumSlots] = {
    {"q", &PagedAttentionTensors::q},
    {"k_cache", &PagedAttentionTensors::k_cache},
    {"v_cache", &PagedAttentionTensors::v_cache},
    {"block_table", &PagedAttentionTensors::block_table},
    {"seq_lens", &PagedAttentionTensors::seq_lens},
    {"out", &PagedAttentionTensors::out},
    {"lse", &PagedAttentionTensors::lse},
    {"alibi_slopes", &PagedAttentionTensors::alibi_slopes},
    {"sinks", &PagedAttentionTensors::sinks},
    {"k_scale", &PagedAttentionTensors::k_scale},
    {"v_scale", &PagedAttentionTensors::v_scale}};
enum { Q, K_CACHE, V_CACHE, BLOCK_TABLE, SEQ_LENS, OUT, LSE, ALIBI, SINKS, K_SCALE, V_SCALE };

struct Operands {
  Imported held[kNumSlots];
  PagedAttentionTensors views;
};
void import_operands(nb::handle tensors, Operands& ops) {
  import_named("paged_attention", tensors, kRoles, ops.held, ops.views, [](int i) { return i == OUT || i == LSE; });
  if (!ops.held[Q].imported) throw InvalidArgument("paged_attention: q is missing");
}

constexpr int kMergeSlots = 6;
const NamedOperand<AttentionMergeTensors> kMergeRoles[kMergeSlots] = {
    {"out_a", &AttentionMergeTensors::out_a}, {"lse_a", &AttentionMergeTensors::lse_a},
    {"out_b", &AttentionMergeTensors::out_b}, {"lse_b", &AttentionMergeTensors::lse_b},
    {"out", &AttentionMergeTensors::out},     {"lse", &AttentionMergeTensors::lse}};
enum { M_OUT_A, M_LSE_A, M_OUT_B, M_LSE_B, M_OUT, M_LSE };

struct MergeOperands {
  Imported held[kMergeSlots];
  AttentionMergeTensors views;
};
void import_merge_operands(nb::handle tensors, MergeOperands& ops) {
  import_named("merge_attention_states", tensors, kMergeRoles, ops.held, ops.views,
               [](int i) { return i == M_OUT || i == M_LSE; });
  for (int i : {M_OUT_A, M_LSE_A, M_OUT_B, M_LSE_B, M_OUT})
    if (!ops.held[i].imported)
      throw InvalidArgument(std::string("merge_attention_states: ") + kMergeRoles[i].name + " is missing");
}

}  // namespace

void init_paged_attention(nb::module_& m) {
  bind_descriptor<PagedAttentionDescriptor>(
      m, "PagedAttentionDescriptor",
      "Decode attention of q [B, Sq, Hq, D] (or [B, Hq, D]) over a paged cache [pages, page_size, Hkv, D] through a "
      "block table [B, max_pages] and lengths [B] (int32, read on the device). Pure data; hashable.")
      .def("__init__",
           [](PagedAttentionDescriptor* d, TensorSpec q, TensorSpec k_cache, TensorSpec v_cache, TensorSpec out,
              int64_t max_pages, std::optional<double> scale, bool causal, int64_t window_left, int64_t window_right,
              double softcap, bool alibi, bool sinks, bool lse, int64_t max_seqlen_k, int num_splits,
              std::string kernel, bool kv_scales, bool scale_per_head) {
             new (d) PagedAttentionDescriptor{};
             d->kv_scales = kv_scales;
             d->scale_per_head = scale_per_head;
             d->q = std::move(q);
             d->k_cache = std::move(k_cache);
             d->v_cache = std::move(v_cache);
             d->out = std::move(out);
             d->max_pages = max_pages;
             d->scale = scale;
             d->causal = causal;
             d->window_left = window_left;
             d->window_right = window_right;
             d->softcap = softcap;
             d->alibi = alibi;
             d->sinks = sinks;
             d->lse = lse;
             d->max_seqlen_k = max_seqlen_k;
             d->num_splits = num_splits;
             d->kernel = std::move(kernel);
           },
           "q"_a, "k_cache"_a, "v_cache"_a, "out"_a, "max_pages"_a, nb::kw_only(), "scale"_a = nb::none(),
           "causal"_a = true, "window_left"_a = -1, "window_right"_a = -1, "softcap"_a = 0.0, "alibi"_a = false,
           "sinks"_a = false, "lse"_a = false, "max_seqlen_k"_a = 0, "num_splits"_a = 0, "kernel"_a = "auto",
           "kv_scales"_a = false, "scale_per_head"_a = false)
      .def_ro("q", &PagedAttentionDescriptor::q)
      .def_ro("k_cache", &PagedAttentionDescriptor::k_cache)
      .def_ro("v_cache", &PagedAttentionDescriptor::v_cache)
      .def_ro("out", &PagedAttentionDescriptor::out)
      .def_ro("max_pages", &PagedAttentionDescriptor::max_pages)
      .def_ro("scale", &PagedAttentionDescriptor::scale)
      .def_ro("causal", &PagedAttentionDescriptor::causal)
      .def_ro("window_left", &PagedAttentionDescriptor::window_left)
      .def_ro("window_right", &PagedAttentionDescriptor::window_right)
      .def_ro("softcap", &PagedAttentionDescriptor::softcap)
      .def_ro("alibi", &PagedAttentionDescriptor::alibi)
      .def_ro("sinks", &PagedAttentionDescriptor::sinks)
      .def_ro("lse", &PagedAttentionDescriptor::lse)
      .def_ro("max_seqlen_k", &PagedAttentionDescriptor::max_seqlen_k)
      .def_ro("num_splits", &PagedAttentionDescriptor::num_splits)
      .def_ro("kernel", &PagedAttentionDescriptor::kernel);

  bind_plan<PagedAttentionPlan>(m, "PagedAttentionPlan",
                                "A validated paged decode attention: select once per batch shape, run every step.")
      .def("workspace_bytes", &PagedAttentionPlan::workspace_bytes,
           "Bytes of scratch run() needs: the splits' partial outputs; 0 with one split.")
      .def_prop_ro("num_splits", &PagedAttentionPlan::num_splits, "How many splits each request's keys take.")
      .def("run",
           [](const PagedAttentionPlan& plan, nb::kwargs kwargs) {
             const RunKwargs a = split_run_kwargs(kwargs);
             Operands ops;
             import_operands(a.tensors, ops);
             run_imported(plan, ops.views, ops.held[Q], a.workspace, nb::none(), a.stream);
           },
           "kwargs"_a,
           "run(q=, k_cache=, v_cache=, block_table=, seq_lens=, out=, [lse=, alibi_slopes=, sinks=], workspace=, "
           "stream=): check the tensors and launch on `stream`. No host work beyond the checks, no allocation: "
           "capturable in a CUDA graph and replayed as seq_lens grow.");
  def_xla_plan<PagedAttentionPlan>(m, "paged_attention", kRoles);

  bind_descriptor<AttentionMergeDescriptor>(
      m, "AttentionMergeDescriptor",
      "The merge of two attention states: out_a, out_b [..., H, D] and their lse [..., H] (f32) -> out (and lse). "
      "Pure data; hashable.")
      .def("__init__",
           [](AttentionMergeDescriptor* d, TensorSpec out_a, TensorSpec lse_a, TensorSpec out_b, TensorSpec lse_b,
              TensorSpec out, std::optional<TensorSpec> lse) {
             new (d) AttentionMergeDescriptor{std::move(out_a), std::move(lse_a), std::move(out_b), std::move(lse_b),
                                              std::move(out), lse.has_value(), lse.value_or(TensorSpec{})};
           },
           "out_a"_a, "lse_a"_a, "out_b"_a, "lse_b"_a, "out"_a, "lse"_a = nb::none())
      .def_ro("out_a", &AttentionMergeDescriptor::out_a)
      .def_ro("lse_a", &AttentionMergeDescriptor::lse_a)
      .def_ro("out_b", &AttentionMergeDescriptor::out_b)
      .def_ro("lse_b", &AttentionMergeDescriptor::lse_b)
      .def_ro("out", &AttentionMergeDescriptor::out);

  bind_plan<AttentionMergePlan>(m, "AttentionMergePlan",
                                "A validated merge of two attention states (cascade attention, split results).")
      .def("workspace_bytes", &AttentionMergePlan::workspace_bytes, "0: the merge needs no scratch.")
      .def("run",
           [](const AttentionMergePlan& plan, nb::kwargs kwargs) {
             const RunKwargs a = split_run_kwargs(kwargs);
             MergeOperands ops;
             import_merge_operands(a.tensors, ops);
             run_imported(plan, ops.views, ops.held[M_OUT_A], a.workspace, nb::none(), a.stream);
           },
           "kwargs"_a,
           "run(out_a=, lse_a=, out_b=, lse_b=, out=, [lse=], stream=): check the tensors and launch on `stream`; no "
           "allocation, no host synchronization.");
  def_xla_plan<AttentionMergePlan>(m, "merge_attention_states", kMergeRoles);

  m.def("merge_attention_states_call",
        [](nb::dict tensors, nb::handle stream) {
          MergeOperands ops;
          import_merge_operands(tensors, ops);
          const AttentionMergeTensors& t = ops.views;
          std::string key;
          for (int i = 0; i < kMergeSlots; ++i) {
            key.push_back(char(ops.held[i].imported));
            if (ops.held[i].imported) append_key(key, ops.held[i].view);
          }
          const AttentionMergePlan plan = plan_cache<AttentionMergePlan>().get(key, [&] {
            AttentionMergeDescriptor d{spec_of(t.out_a), spec_of(t.lse_a), spec_of(t.out_b), spec_of(t.lse_b),
                                       spec_of(t.out),   ops.held[M_LSE].imported, TensorSpec{}};
            if (d.lse) d.lse_out = spec_of(t.lse);
            return AttentionMergePlan::select(d);
          });
          run_imported(plan, ops.views, ops.held[M_OUT_A], nb::none(), nb::none(), stream);
        },
        "tensors"_a, "stream"_a = nb::none(),
        "Functional entry: tensors by name (out_a, lse_a, out_b, lse_b, out, lse; None = absent), select (cached on "
        "the operands' metadata) and run.");

  m.def("paged_attention_call",
        [](nb::dict tensors, std::optional<double> scale, bool causal, int64_t window_left, int64_t window_right,
           double softcap, int64_t max_seqlen_k, int num_splits, const std::string& kernel, nb::handle stream,
           nb::handle workspace_alloc) {
          Operands ops;
          import_operands(tensors, ops);
          const PagedAttentionTensors& t = ops.views;
          std::string key;
          append_pod(key, scale ? *scale : -1.0);
          append_pod(key, char(scale.has_value()));
          append_pod(key, char(causal));
          append_pod(key, window_left);
          append_pod(key, window_right);
          append_pod(key, softcap);
          append_pod(key, max_seqlen_k);
          append_pod(key, num_splits);
          key += kernel;
          key.push_back('\0');
          for (int i = 0; i < kNumSlots; ++i) {
            key.push_back(char(ops.held[i].imported));
            if (ops.held[i].imported && (i <= OUT || i == K_SCALE)) append_key(key, ops.held[i].view);
          }
          const PagedAttentionPlan plan = plan_cache<PagedAttentionPlan>().get(key, [&] {
            for (int i : {K_CACHE, V_CACHE, BLOCK_TABLE, SEQ_LENS, OUT})
              if (!ops.held[i].imported)
                throw InvalidArgument(std::string("paged_attention: ") + kRoles[i].name + " is missing");
            if (t.block_table.ndim != 2)
              throw InvalidArgument("paged_attention: block_table has shape " +
                                    shape_str(t.block_table.shape, t.block_table.ndim) +
                                    "; expected [batch, max_pages] (int32)");
            PagedAttentionDescriptor d;
            d.q = spec_of(t.q);
            d.k_cache = spec_of(t.k_cache);
            d.v_cache = spec_of(t.v_cache);
            d.out = spec_of(t.out);
            d.max_pages = t.block_table.shape[1];
            d.scale = scale;
            d.causal = causal;
            d.window_left = window_left;
            d.window_right = window_right;
            d.softcap = softcap;
            d.alibi = ops.held[ALIBI].imported;
            d.sinks = ops.held[SINKS].imported;
            d.lse = ops.held[LSE].imported;
            d.max_seqlen_k = max_seqlen_k;
            d.num_splits = num_splits;
            d.kernel = kernel;
            if (ops.held[K_SCALE].imported != ops.held[V_SCALE].imported)
              throw InvalidArgument("paged_attention: k_scale and v_scale go together");
            d.kv_scales = ops.held[K_SCALE].imported;
            d.scale_per_head = d.kv_scales && t.k_scale.ndim == 1 && t.k_scale.shape[0] > 1;
            return PagedAttentionPlan::select(d);
          });
          run_imported(plan, ops.views, ops.held[Q], nb::none(), workspace_alloc, stream);
          return plan.sku().name;
        },
        "tensors"_a, "scale"_a.none(), "causal"_a, "window_left"_a, "window_right"_a, "softcap"_a, "max_seqlen_k"_a,
        "num_splits"_a, "kernel"_a = "auto", "stream"_a = nb::none(), "workspace_alloc"_a = nb::none(),
        "Functional entry: tensors by name (a dict; None = absent), select (cached on the parameters and the "
        "operands' metadata) and run. Returns the SKU name of the kernel that ran.");
}

}  // namespace baracuda::py
