// Bindings of the sampling family: descriptor, plan, and the functional entry (operands by name).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "baracuda/errors.h"
#include "baracuda/sampling.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

constexpr int kNumSlots = 8;
const NamedOperand<SamplingTensors> kRoles[kNumSlots] = {
    {"logits", &SamplingTensors::logits},   {"tokens", &SamplingTensors::tokens},
    {"logprobs", &SamplingTensors::logprobs}, {"temperature", &SamplingTensors::temperature},
    {"top_k", &SamplingTensors::top_k},     {"top_p", &SamplingTensors::top_p},
    {"min_p", &SamplingTensors::min_p},     {"seeds", &SamplingTensors::seeds}};
enum { LOGITS, TOKENS, LOGPROBS, TEMPERATURE, TOP_K, TOP_P, MIN_P, SEEDS };

struct Operands {
  Imported held[kNumSlots];
  SamplingTensors views;
};
void import_operands(nb::handle tensors, Operands& ops) {
  import_named("sample", tensors, kRoles, ops.held, ops.views, [](int i) { return i == TOKENS || i == LOGPROBS; });
  if (!ops.held[LOGITS].imported) throw InvalidArgument("sample: logits is missing");
}

PlanCache<SamplingPlan>& cache() {
  static auto* c = new PlanCache<SamplingPlan>();
  return *c;
}

}  // namespace

void init_sampling(nb::module_& m) {
  bind_descriptor<SamplingDescriptor>(
      m, "SamplingDescriptor",
      "One token per row of logits [B, V]: temperature, top_k, top_p, min_p as scalars (here) or per-row tensors "
      "(the *_per_row flags), Philox seed / offset at run. Pure data; hashable.")
      .def("__init__",
           [](SamplingDescriptor* d, TensorSpec logits, DType token_dtype, bool logprobs, double temperature,
              int64_t top_k, double top_p, double min_p, bool temperature_per_row, bool top_k_per_row,
              DType top_k_dtype, bool top_p_per_row, bool min_p_per_row, bool seeds_per_row) {
             new (d) SamplingDescriptor{};
             d->logits = std::move(logits);
             d->token_dtype = token_dtype;
             d->logprobs = logprobs;
             d->temperature = temperature;
             d->top_k = top_k;
             d->top_p = top_p;
             d->min_p = min_p;
             d->temperature_per_row = temperature_per_row;
             d->top_k_per_row = top_k_per_row;
             d->top_k_dtype = top_k_dtype;
             d->top_p_per_row = top_p_per_row;
             d->min_p_per_row = min_p_per_row;
             d->seeds_per_row = seeds_per_row;
           },
           "logits"_a, nb::kw_only(), "token_dtype"_a = DType::Int64, "logprobs"_a = false, "temperature"_a = 1.0,
           "top_k"_a = 0, "top_p"_a = 1.0, "min_p"_a = 0.0, "temperature_per_row"_a = false,
           "top_k_per_row"_a = false, "top_k_dtype"_a = DType::Int32, "top_p_per_row"_a = false,
           "min_p_per_row"_a = false, "seeds_per_row"_a = false)
      .def_ro("logits", &SamplingDescriptor::logits)
      .def_ro("token_dtype", &SamplingDescriptor::token_dtype)
      .def_ro("logprobs", &SamplingDescriptor::logprobs)
      .def_ro("temperature", &SamplingDescriptor::temperature)
      .def_ro("top_k", &SamplingDescriptor::top_k)
      .def_ro("top_p", &SamplingDescriptor::top_p)
      .def_ro("min_p", &SamplingDescriptor::min_p);

  bind_plan<SamplingPlan>(m, "SamplingPlan", "A validated sampler: select once, run every decode step.")
      .def("workspace_bytes", &SamplingPlan::workspace_bytes, "Always 0.")
      .def("run",
           [](const SamplingPlan& plan, uint64_t seed, uint64_t offset, nb::kwargs kwargs) {
             const RunKwargs a = split_run_kwargs(kwargs);
             if (present(a.workspace)) throw InvalidArgument("sample: run() takes no workspace");
             Operands ops;
             import_operands(a.tensors, ops);
             ops.views.seed = seed;
             ops.views.offset = offset;
             run_imported(plan, ops.views, ops.held[LOGITS], nb::none(), nb::none(), a.stream);
           },
           "seed"_a = 0, "offset"_a = 0, "kwargs"_a,
           "run(seed=0, offset=0, logits=, tokens=, [logprobs=, temperature=, top_k=, top_p=, min_p=, seeds=], "
           "stream=): check the tensors and write one token per row on `stream`. No host work beyond the checks, "
           "no allocation: capturable in a CUDA graph (per-row tensors carry what changes between replays).");

  m.def("sample_call",
        [](nb::dict tensors, double temperature, int64_t top_k, double top_p, double min_p, uint64_t seed,
           uint64_t offset, nb::handle stream) {
          Operands ops;
          import_operands(tensors, ops);
          std::string key;
          for (int i = 0; i < kNumSlots; ++i) {
            key.push_back(char(ops.held[i].imported));
            if (ops.held[i].imported) append_key(key, ops.held[i].view);
          }
          for (double v : {temperature, top_p, min_p}) append_pod(key, v);
          append_pod(key, top_k);
          const SamplingPlan plan = cache().get(key, [&] {
            if (!ops.held[TOKENS].imported) throw InvalidArgument("sample: tokens is missing");
            SamplingDescriptor d;
            d.logits = spec_of(ops.views.logits);
            d.token_dtype = ops.views.tokens.dtype;
            d.logprobs = ops.held[LOGPROBS].imported;
            d.temperature = temperature;
            d.top_k = top_k;
            d.top_p = top_p;
            d.min_p = min_p;
            d.temperature_per_row = ops.held[TEMPERATURE].imported;
            d.top_k_per_row = ops.held[TOP_K].imported;
            if (d.top_k_per_row) d.top_k_dtype = ops.views.top_k.dtype;
            d.top_p_per_row = ops.held[TOP_P].imported;
            d.min_p_per_row = ops.held[MIN_P].imported;
            d.seeds_per_row = ops.held[SEEDS].imported;
            return SamplingPlan::select(d);
          });
          ops.views.seed = seed;
          ops.views.offset = offset;
          run_imported(plan, ops.views, ops.held[LOGITS], nb::none(), nb::none(), stream);
          return plan.sku().name;
        },
        "tensors"_a, "temperature"_a, "top_k"_a, "top_p"_a, "min_p"_a, "seed"_a, "offset"_a, "stream"_a = nb::none(),
        "Functional entry: tensors by name (logits, tokens, logprobs, temperature, top_k, top_p, min_p, seeds; "
        "None = absent: the scalar is used), select (cached on the operands' metadata and the scalars) and run. "
        "Returns the SKU name.");
}

}  // namespace baracuda::py
