// Bindings of the embedding family: descriptor, plan, and the functional entry (operands by name).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "baracuda/embedding.h"
#include "baracuda/errors.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

constexpr int kNumSlots = 5;
const NamedOperand<EmbeddingTensors> kRoles[kNumSlots] = {{"weight", &EmbeddingTensors::weight},
                                                          {"indices", &EmbeddingTensors::indices},
                                                          {"out", &EmbeddingTensors::out},
                                                          {"grad_out", &EmbeddingTensors::grad_out},
                                                          {"grad_weight", &EmbeddingTensors::grad_weight}};
enum { WEIGHT, INDICES, OUT, GRAD_OUT, GRAD_WEIGHT };

struct Operands {
  Imported held[kNumSlots];
  EmbeddingTensors views;
};
void import_operands(nb::handle tensors, Operands& ops) {
  import_named("embedding", tensors, kRoles, ops.held, ops.views, [](int i) { return i == OUT || i == GRAD_WEIGHT; });
  if (!ops.held[INDICES].imported) throw InvalidArgument("embedding: indices is missing");
}

}  // namespace

void init_embedding(nb::module_& m) {
  bind_descriptor<EmbeddingDescriptor>(
      m, "EmbeddingDescriptor",
      "Embedding forward (weight [V, D], indices -> out indices.shape + [D]) or backward (grad_out, indices -> "
      "grad_weight [V, D]; `weight` is then grad_weight's spec and `rows` grad_out's). Pure data; hashable.")
      .def("__init__",
           [](EmbeddingDescriptor* d, TensorSpec weight, TensorSpec indices, TensorSpec rows, bool backward,
              int64_t padding_idx, bool scale_grad_by_freq, bool deterministic) {
             new (d) EmbeddingDescriptor{};
             d->weight = std::move(weight);
             d->indices = std::move(indices);
             d->rows = std::move(rows);
             d->backward = backward;
             d->padding_idx = padding_idx;
             d->scale_grad_by_freq = scale_grad_by_freq;
             d->deterministic = deterministic;
           },
           "weight"_a, "indices"_a, "rows"_a, nb::kw_only(), "backward"_a = false, "padding_idx"_a = -1,
           "scale_grad_by_freq"_a = false, "deterministic"_a = true)
      .def_ro("weight", &EmbeddingDescriptor::weight)
      .def_ro("indices", &EmbeddingDescriptor::indices)
      .def_ro("rows", &EmbeddingDescriptor::rows)
      .def_ro("backward", &EmbeddingDescriptor::backward)
      .def_ro("padding_idx", &EmbeddingDescriptor::padding_idx)
      .def_ro("scale_grad_by_freq", &EmbeddingDescriptor::scale_grad_by_freq)
      .def_ro("deterministic", &EmbeddingDescriptor::deterministic);

  bind_plan<EmbeddingPlan>(m, "EmbeddingPlan", "A validated embedding gather or table gradient.")
      .def("workspace_bytes", &EmbeddingPlan::workspace_bytes,
           "The deterministic backward's sort buffers and chunk sums; 0 otherwise.")
      .def("run",
           [](const EmbeddingPlan& plan, nb::kwargs kwargs) {
             const RunKwargs a = split_run_kwargs(kwargs);
             Operands ops;
             import_operands(a.tensors, ops);
             run_imported(plan, ops.views, ops.held[INDICES], a.workspace, nb::none(), a.stream);
           },
           "kwargs"_a,
           "run(indices=, weight=, out=, stream=) (forward) or run(indices=, grad_out=, grad_weight=, workspace=, "
           "stream=) (backward): check the tensors and launch on `stream`. No allocation: the backward's workspace "
           "(workspace_bytes()) is the caller's tensor.");

  m.def("embedding_call",
        [](nb::dict tensors, int64_t padding_idx, bool scale_grad_by_freq, bool deterministic, nb::handle stream,
           nb::handle workspace_alloc) {
          Operands ops;
          import_operands(tensors, ops);
          const bool backward = ops.held[GRAD_OUT].imported;
          std::string key;
          for (int i = 0; i < kNumSlots; ++i) {
            key.push_back(char(ops.held[i].imported));
            if (ops.held[i].imported) append_key(key, ops.held[i].view);
          }
          append_pod(key, padding_idx);
          key.push_back(char(scale_grad_by_freq));
          key.push_back(char(deterministic));
          const EmbeddingPlan plan = plan_cache<EmbeddingPlan>().get(key, [&] {
            const int table = backward ? GRAD_WEIGHT : WEIGHT, rows = backward ? GRAD_OUT : OUT;
            if (!ops.held[table].imported)
              throw InvalidArgument(std::string("embedding: ") + kRoles[table].name + " is missing");
            if (!ops.held[rows].imported)
              throw InvalidArgument(std::string("embedding: ") + kRoles[rows].name + " is missing");
            EmbeddingDescriptor d;
            d.backward = backward;
            d.weight = spec_of(ops.held[table].view);
            d.indices = spec_of(ops.views.indices);
            d.rows = spec_of(ops.held[rows].view);
            d.padding_idx = padding_idx;
            d.scale_grad_by_freq = scale_grad_by_freq;
            d.deterministic = deterministic;
            return EmbeddingPlan::select(d);
          });
          run_imported(plan, ops.views, ops.held[INDICES], nb::none(), workspace_alloc, stream);
          return plan.sku().name;
        },
        "tensors"_a, "padding_idx"_a, "scale_grad_by_freq"_a, "deterministic"_a, "stream"_a = nb::none(),
        "workspace_alloc"_a = nb::none(),
        "Functional entry: tensors by name (forward: weight, indices, out; backward: grad_out, indices, "
        "grad_weight; None = absent), select (cached on the operands' metadata and the flags) and run. Returns the "
        "SKU name.");

  def_xla_plan<EmbeddingPlan>(m, "embedding", kRoles);
}

}  // namespace baracuda::py
