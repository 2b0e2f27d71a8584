// Bindings of the sampling family: descriptor, plan, and the functional entry (operands by name).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <tuple>

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

const NamedOperand<PenaltiesTensors> kPenaltyRoles[] = {
    {"logits", &PenaltiesTensors::logits},
    {"prompt_tokens", &PenaltiesTensors::prompt_tokens},
    {"output_tokens", &PenaltiesTensors::output_tokens},
    {"repetition_penalty", &PenaltiesTensors::repetition_penalty},
    {"presence_penalty", &PenaltiesTensors::presence_penalty},
    {"frequency_penalty", &PenaltiesTensors::frequency_penalty}};
enum { PN_LOGITS, PN_PROMPT, PN_OUTPUT, PN_REP, PN_PRES, PN_FREQ, PN_NUM };

struct PenaltyOperands {
  Imported held[PN_NUM];
  PenaltiesTensors views;
};
void import_penalties(nb::handle tensors, PenaltyOperands& ops) {
  import_named("apply_penalties", tensors, kPenaltyRoles, ops.held, ops.views, [](int i) { return i == PN_LOGITS; });
  if (!ops.held[PN_LOGITS].imported) throw InvalidArgument("apply_penalties: logits is missing");
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
              DType top_k_dtype, bool top_p_per_row, bool min_p_per_row, bool seeds_per_row, DType seeds_dtype) {
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
             d->seeds_dtype = seeds_dtype;
           },
           "logits"_a, nb::kw_only(), "token_dtype"_a = DType::Int64, "logprobs"_a = false, "temperature"_a = 1.0,
           "top_k"_a = 0, "top_p"_a = 1.0, "min_p"_a = 0.0, "temperature_per_row"_a = false,
           "top_k_per_row"_a = false, "top_k_dtype"_a = DType::Int32, "top_p_per_row"_a = false,
           "min_p_per_row"_a = false, "seeds_per_row"_a = false, "seeds_dtype"_a = DType::Int64)
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
          const SamplingPlan plan = plan_cache<SamplingPlan>().get(key, [&] {
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
            if (d.seeds_per_row) d.seeds_dtype = ops.views.seeds.dtype;
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

  bind_descriptor<PenaltiesDescriptor>(
      m, "PenaltiesDescriptor",
      "Repetition / presence / frequency penalties on logits [B, V] (in place) over prompt and output token lists "
      "[B, L] (int32 / int64; entries outside [0, V) are padding); each penalty a scalar here or a per-row tensor "
      "(the *_per_row flags). Pure data; hashable.")
      .def("__init__",
           [](PenaltiesDescriptor* d, TensorSpec logits, std::optional<TensorSpec> prompt_tokens,
              std::optional<TensorSpec> output_tokens, double repetition, double presence, double frequency,
              bool repetition_per_row, bool presence_per_row, bool frequency_per_row) {
             new (d) PenaltiesDescriptor{};
             d->logits = std::move(logits);
             for (auto [spec, on, dt, len, name] :
                  {std::tuple{&prompt_tokens, &d->prompt, &d->prompt_dtype, &d->prompt_len, "prompt_tokens"},
                   std::tuple{&output_tokens, &d->output, &d->output_dtype, &d->output_len, "output_tokens"}}) {
               if (!spec->has_value()) continue;
               if ((*spec)->shape.size() != 2)
                 throw InvalidArgument(std::string("PenaltiesDescriptor: ") + name + " has shape " +
                                       shape_str((*spec)->shape) + "; expected [batch, length]");
               *on = true;
               *dt = (*spec)->dtype;
               *len = (*spec)->shape[1];
             }
             d->repetition = repetition;
             d->presence = presence;
             d->frequency = frequency;
             d->repetition_per_row = repetition_per_row;
             d->presence_per_row = presence_per_row;
             d->frequency_per_row = frequency_per_row;
           },
           "logits"_a, "prompt_tokens"_a = nb::none(), "output_tokens"_a = nb::none(), nb::kw_only(),
           "repetition"_a = 1.0, "presence"_a = 0.0, "frequency"_a = 0.0, "repetition_per_row"_a = false,
           "presence_per_row"_a = false, "frequency_per_row"_a = false)
      .def_ro("logits", &PenaltiesDescriptor::logits)
      .def_ro("repetition", &PenaltiesDescriptor::repetition)
      .def_ro("presence", &PenaltiesDescriptor::presence)
      .def_ro("frequency", &PenaltiesDescriptor::frequency);

  bind_plan<PenaltiesPlan>(m, "PenaltiesPlan", "Validated sampling penalties: select once, run every decode step.")
      .def("workspace_bytes", &PenaltiesPlan::workspace_bytes, "B x V x 4 (a count per row and token).")
      .def("run",
           [](const PenaltiesPlan& plan, nb::kwargs kwargs) {
             const RunKwargs a = split_run_kwargs(kwargs);
             PenaltyOperands ops;
             import_penalties(a.tensors, ops);
             run_imported(plan, ops.views, ops.held[PN_LOGITS], a.workspace, nb::none(), a.stream);
           },
           "kwargs"_a,
           "run(logits=, [prompt_tokens=, output_tokens=, repetition_penalty=, presence_penalty=, "
           "frequency_penalty=], workspace=, stream=): check the tensors and penalise logits in place on `stream`; "
           "the workspace (workspace_bytes()) is the caller's tensor.");

  m.def("apply_penalties_call",
        [](nb::dict tensors, double repetition, double presence, double frequency, nb::handle stream,
           nb::handle workspace_alloc) {
          PenaltyOperands ops;
          import_penalties(tensors, ops);
          std::string key;
          for (int i = 0; i < PN_NUM; ++i) {
            key.push_back(char(ops.held[i].imported));
            if (ops.held[i].imported) append_key(key, ops.held[i].view);
          }
          for (double v : {repetition, presence, frequency}) append_pod(key, v);
          const PenaltiesPlan plan = plan_cache<PenaltiesPlan>().get(key, [&] {
            PenaltiesDescriptor d;
            d.logits = spec_of(ops.views.logits);
            for (auto [i, on, dt, len] : {std::tuple{int(PN_PROMPT), &d.prompt, &d.prompt_dtype, &d.prompt_len},
                                          std::tuple{int(PN_OUTPUT), &d.output, &d.output_dtype, &d.output_len}}) {
              if (!ops.held[i].imported) continue;
              const TensorView& v = ops.held[i].view;
              if (v.ndim != 2)
                throw InvalidArgument(std::string("apply_penalties: ") + kPenaltyRoles[i].name + " has shape " +
                                      shape_str(v.shape, v.ndim) + "; expected [batch, length]");
              *on = true;
              *dt = v.dtype;
              *len = v.shape[1];
            }
            d.repetition = repetition;
            d.presence = presence;
            d.frequency = frequency;
            d.repetition_per_row = ops.held[PN_REP].imported;
            d.presence_per_row = ops.held[PN_PRES].imported;
            d.frequency_per_row = ops.held[PN_FREQ].imported;
            return PenaltiesPlan::select(d);
          });
          run_imported(plan, ops.views, ops.held[PN_LOGITS], nb::none(), workspace_alloc, stream);
          return plan.sku().name;
        },
        "tensors"_a, "repetition"_a, "presence"_a, "frequency"_a, "stream"_a = nb::none(),
        "workspace_alloc"_a = nb::none(),
        "Functional entry of the penalties: tensors by name (logits, prompt_tokens, output_tokens, "
        "repetition_penalty, presence_penalty, frequency_penalty; None = absent: the scalar is used), select (cached) "
        "and run. Returns the SKU name.");

  def_xla_plan<SamplingPlan>(m, "sample", kRoles);
  def_xla_plan<PenaltiesPlan>(m, "apply_penalties", kPenaltyRoles);
}

}  // namespace baracuda::py
