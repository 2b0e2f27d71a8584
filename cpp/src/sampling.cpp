// SamplingPlan: validation of the logits, the scalar and per-row parameters, and run().
#include "baracuda/sampling.h"

#include <cmath>
#include <sstream>
#include <tuple>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "plan_util.h"
#include "sampling/sampling_launch.h"

namespace baracuda {

namespace {

const std::string kOp = "sample";

void need(bool ok, const std::string& what) {
  if (!ok) throw InvalidArgument(kOp + ": " + what);
}

// ", name=value" or ", name=per_row" (descriptor strings).
void put_param(std::ostringstream& os, const char* name, bool per_row, double v) {
  os << ", " << name << "=";
  if (per_row) os << "per_row";
  else os << num_str(v);
}

// Logits [B, V] of a float dtype the kernels take, V contiguous, V < 2^31.
void check_logits(const std::string& op, const TensorSpec& L) {
  if (L.shape.size() != 2)
    throw InvalidArgument(op + ": logits has shape " + shape_str(L.shape) + "; expected [batch, vocab]");
  if (L.dtype != DType::Float32 && L.dtype != DType::Float16 && L.dtype != DType::BFloat16)
    throw InvalidDType(op + ": logits is " + dtype_name(L.dtype) + "; expected float32, float16 or bfloat16");
  if (L.shape[1] >= (int64_t(1) << 31))
    throw Unsupported(op + ": a vocabulary of " + std::to_string(L.shape[1]) + " tokens; at most 2^31 - 1");
  const auto st = L.effective_strides();
  if (L.shape[1] > 1 && st[1] != 1) throw Unsupported(op + ": logits must be contiguous along the vocabulary");
  if (st[0] < 0) throw Unsupported(op + ": logits has a negative stride");
}

}  // namespace

std::string SamplingDescriptor::str() const {
  std::ostringstream os;
  os << "SamplingDescriptor(logits=" << logits.str() << ", tokens=" << dtype_name(token_dtype);
  put_param(os, "temperature", temperature_per_row, temperature);
  put_param(os, "top_k", top_k_per_row, double(top_k));
  if (top_k_per_row) os << "(" << dtype_name(top_k_dtype) << ")";
  put_param(os, "top_p", top_p_per_row, top_p);
  put_param(os, "min_p", min_p_per_row, min_p);
  if (seeds_per_row) os << ", seeds=per_row(" << dtype_name(seeds_dtype) << ")";
  if (logprobs) os << ", logprobs";
  os << ")";
  return os.str();
}

struct SamplingPlan::Impl {
  SamplingDescriptor desc;
  KernelSku sku;
};

SamplingPlan SamplingPlan::select(const SamplingDescriptor& desc, const PlanPreference& pref) {
  const TensorSpec& L = desc.logits;
  check_logits(kOp, L);
  need(L.shape[1] > 0 || L.shape[0] == 0, "logits has an empty vocabulary (shape " + shape_str(L.shape) + ")");
  if (desc.token_dtype != DType::Int64 && desc.token_dtype != DType::Int32)
    throw InvalidDType(kOp + ": tokens must be int64 or int32, not " + dtype_name(desc.token_dtype));
  if (!desc.temperature_per_row)
    need(std::isfinite(desc.temperature) && desc.temperature >= 0,
         "temperature=" + num_str(desc.temperature) + "; expected a finite value >= 0 (0: greedy)");
  if (!desc.top_p_per_row)
    need(desc.top_p > 0 && desc.top_p <= 1, "top_p=" + num_str(desc.top_p) + "; expected 0 < top_p <= 1 (1: off)");
  if (!desc.min_p_per_row)
    need(desc.min_p >= 0 && desc.min_p <= 1, "min_p=" + num_str(desc.min_p) + "; expected 0 <= min_p <= 1 (0: off)");
  if (!desc.top_k_per_row) need(desc.top_k >= 0, "top_k=" + std::to_string(desc.top_k) + "; expected >= 0 (0: off)");
  if (desc.top_k_per_row && desc.top_k_dtype != DType::Int32 && desc.top_k_dtype != DType::Int64)
    throw InvalidDType(kOp + ": a per-row top_k must be int32 or int64, not " + dtype_name(desc.top_k_dtype));
  if (desc.seeds_per_row && desc.seeds_dtype != DType::Int64 && desc.seeds_dtype != DType::Int32)
    throw InvalidDType(kOp + ": per-row seeds must be int64 or int32, not " + dtype_name(desc.seeds_dtype));
  for (Backend b : pref.forbid)
    if (b == Backend::Bespoke) throw Unsupported(kOp + ": the preference forbids the only backend (bespoke)");

  auto impl = std::make_shared<Impl>();
  impl->desc = desc;
  KernelSku& k = impl->sku;
  k.category = "sampling";
  k.op = "sample";
  k.name = "sampling.radix_select";
  k.layout = "rows";
  k.dtypes = {desc.token_dtype, L.dtype};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  k.precision.compute_dtype = DType::Float32;
  k.precision.accumulator_dtype = DType::Int64;
  k.precision.math =
      "one block per row; top-k / top-p thresholds by radix select (8-bit digits) over an order-preserving key of "
      "x = logit / T; fixed-point (2^-32) softmax masses summed as integers; Philox-4x32-10 draw of (seed, offset, "
      "row) in index order";
  return SamplingPlan(impl);
}

const KernelSku& SamplingPlan::sku() const { return impl_->sku; }
const SamplingDescriptor& SamplingPlan::descriptor() const { return impl_->desc; }

void SamplingPlan::run(const SamplingTensors& t, void*, int64_t, StreamHandle stream) const {
  const SamplingDescriptor& D = impl_->desc;
  const int device = t.logits.device;
  const int64_t B = D.logits.shape[0];
  check_view(kOp, "logits", t.logits, D.logits, device, "logits");
  check_side_operand(kOp, t.tokens, true, "tokens", D.token_dtype, {B}, "the plan writes a token per row", false,
                     device, "logits");
  check_side_operand(kOp, t.logprobs, D.logprobs, "logprobs", DType::Float32, {B},
                     D.logprobs ? "the plan was selected with logprobs" : "the plan was selected without logprobs",
                     false, device, "logits");
  auto per_row = [&](const TensorView& v, bool on, const char* name, DType dt) {
    check_side_operand(kOp, v, on, name, dt, {B},
                       on ? "the plan was selected with a per-row " + std::string(name)
                          : "the plan was selected with a scalar " + std::string(name),
                       false, device, "logits");
  };
  per_row(t.temperature, D.temperature_per_row, "temperature", DType::Float32);
  per_row(t.top_k, D.top_k_per_row, "top_k", D.top_k_dtype);
  per_row(t.top_p, D.top_p_per_row, "top_p", DType::Float32);
  per_row(t.min_p, D.min_p_per_row, "min_p", DType::Float32);
  per_row(t.seeds, D.seeds_per_row, "seeds", D.seeds_dtype);
  check_aliasing(kOp, {{"tokens", &t.tokens}, {"logprobs", &t.logprobs}},
                 {{"logits", &t.logits}, {"temperature", &t.temperature}, {"top_k", &t.top_k},
                  {"top_p", &t.top_p}, {"min_p", &t.min_p}, {"seeds", &t.seeds}});

  sampling::Params p;
  p.logits = t.logits.data;
  p.dtype = D.logits.dtype;
  p.rows = B;
  p.vocab = D.logits.shape[1];
  p.row_stride = t.logits.strides[0];
  auto stride0 = [](const TensorView& v) { return v.ndim ? v.strides[0] : int64_t(1); };
  p.tokens = t.tokens.data;
  p.tokens_int32 = D.token_dtype == DType::Int32;
  p.token_stride = stride0(t.tokens);
  p.logprobs = D.logprobs ? static_cast<float*>(t.logprobs.data) : nullptr;
  p.logprob_stride = stride0(t.logprobs);
  p.temperature = D.temperature_per_row ? static_cast<const float*>(t.temperature.data) : nullptr;
  p.temperature_stride = stride0(t.temperature);
  p.temperature_value = float(D.temperature);
  p.top_k = D.top_k_per_row ? t.top_k.data : nullptr;
  p.top_k_int32 = D.top_k_dtype == DType::Int32;
  p.top_k_stride = stride0(t.top_k);
  p.top_k_value = D.top_k;
  p.top_p = D.top_p_per_row ? static_cast<const float*>(t.top_p.data) : nullptr;
  p.top_p_stride = stride0(t.top_p);
  p.top_p_value = float(D.top_p);
  p.min_p = D.min_p_per_row ? static_cast<const float*>(t.min_p.data) : nullptr;
  p.min_p_stride = stride0(t.min_p);
  p.min_p_value = float(D.min_p);
  p.seeds = D.seeds_per_row ? t.seeds.data : nullptr;
  p.seeds_int32 = D.seeds_dtype == DType::Int32;
  p.seed_stride = stride0(t.seeds);
  p.seed = t.seed;
  p.offset = t.offset;
  if (B == 0) return;
  DeviceGuard guard(device);
  sampling::sample(p, stream);
}

// ---- penalties ----------------------------------------------------------------------------------

std::string PenaltiesDescriptor::str() const {
  std::ostringstream os;
  os << "PenaltiesDescriptor(logits=" << logits.str();
  if (prompt) os << ", prompt=" << dtype_name(prompt_dtype) << "[" << prompt_len << "]";
  if (output) os << ", output=" << dtype_name(output_dtype) << "[" << output_len << "]";
  put_param(os, "repetition", repetition_per_row, repetition);
  put_param(os, "presence", presence_per_row, presence);
  put_param(os, "frequency", frequency_per_row, frequency);
  os << ")";
  return os.str();
}

struct PenaltiesPlan::Impl {
  PenaltiesDescriptor desc;
  KernelSku sku;
};

PenaltiesPlan PenaltiesPlan::select(const PenaltiesDescriptor& d, const PlanPreference& pref) {
  const std::string op = "apply_penalties";
  const TensorSpec& L = d.logits;
  check_logits(op, L);
  if (!non_overlapping(L.shape, L.effective_strides()))
    throw InvalidArgument(op + ": logits' strides make two of its elements share memory");
  for (auto [on, dt, len, name] : {std::tuple{d.prompt, d.prompt_dtype, d.prompt_len, "prompt_tokens"},
                                   std::tuple{d.output, d.output_dtype, d.output_len, "output_tokens"}}) {
    if (!on) continue;
    if (dt != DType::Int32 && dt != DType::Int64)
      throw InvalidDType(op + ": " + name + " is " + dtype_name(dt) + "; expected int32 or int64");
    if (len < 0) throw InvalidArgument(op + ": " + name + " has a negative length");
  }
  if (!d.repetition_per_row && !(d.repetition > 0 && std::isfinite(d.repetition)))
    throw InvalidArgument(op + ": repetition_penalty=" + num_str(d.repetition) + "; expected a finite value > 0 (1: off)");
  for (auto [per_row, v, name] : {std::tuple{d.presence_per_row, d.presence, "presence_penalty"},
                                  std::tuple{d.frequency_per_row, d.frequency, "frequency_penalty"}})
    if (!per_row && !std::isfinite(v))
      throw InvalidArgument(op + ": " + name + "=" + num_str(v) + "; expected a finite value (0: off)");
  for (Backend b : pref.forbid)
    if (b == Backend::Bespoke) throw Unsupported(op + ": the preference forbids the only backend (bespoke)");
  auto impl = std::make_shared<Impl>();
  impl->desc = d;
  KernelSku& k = impl->sku;
  k.category = "sampling";
  k.op = op;
  k.name = "sampling.penalties.count_then_apply";
  k.layout = "rows";
  k.dtypes = {L.dtype};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  k.precision.compute_dtype = DType::Float32;
  k.precision.accumulator_dtype = DType::Int32;
  k.precision.math = "per (row, token) counts by atomics in the workspace; each token's penalty applied once in "
                     "float32, rounded to logits' dtype";
  return PenaltiesPlan(impl);
}

const KernelSku& PenaltiesPlan::sku() const { return impl_->sku; }
const PenaltiesDescriptor& PenaltiesPlan::descriptor() const { return impl_->desc; }
int64_t PenaltiesPlan::workspace_bytes() const {
  const PenaltiesDescriptor& d = impl_->desc;
  if (!d.prompt && !d.output) return 0;
  return sampling::penalty_workspace_bytes(d.logits.shape[0], d.logits.shape[1]);
}

void PenaltiesPlan::run(const PenaltiesTensors& t, void* workspace, int64_t workspace_size, StreamHandle stream) const {
  const PenaltiesDescriptor& D = impl_->desc;
  const std::string op = "apply_penalties";
  const int device = t.logits.device;
  const int64_t B = D.logits.shape[0];
  check_view(op, "logits", t.logits, D.logits, device, "logits");
  sampling::PenaltyParams p;
  auto list = [&](const TensorView& v, bool on, DType dt, int64_t len, const char* name) {
    check_presence(op, v, on, name, on ? "the plan was selected with it" : "the plan was selected without it");
    sampling::TokenList l;
    if (!on) return l;
    if (v.dtype != dt)
      throw InvalidDType(op + ": " + name + " is " + dtype_name(v.dtype) + "; expected " + dtype_name(dt));
    if (!shape_is(v, {B, len}))
      throw InvalidArgument(op + ": " + name + " has shape " + shape_str(v.shape, v.ndim) + "; expected [batch, " +
                            std::to_string(len) + "]");
    check_same_device(op, v, device, name, "logits");
    if (len > 1 && v.strides[1] != 1) throw Unsupported(op + ": " + name + " must be contiguous along its length");
    if (v.strides[0] < 0) throw Unsupported(op + ": " + name + " has a negative stride");
    l.data = v.data;
    l.int32 = dt == DType::Int32;
    l.len = len;
    l.row_stride = v.strides[0];
    return l;
  };
  p.prompt = list(t.prompt_tokens, D.prompt, D.prompt_dtype, D.prompt_len, "prompt_tokens");
  p.output = list(t.output_tokens, D.output, D.output_dtype, D.output_len, "output_tokens");
  auto per_row = [&](const TensorView& v, bool on, const char* name) {
    check_side_operand(op, v, on, name, DType::Float32, {B},
                       on ? "the plan was selected with a per-row " + std::string(name)
                          : "the plan was selected with a scalar " + std::string(name),
                       false, device, "logits");
    return on ? static_cast<const float*>(v.data) : nullptr;
  };
  auto stride0 = [](const TensorView& v) { return v.ndim ? v.strides[0] : int64_t(1); };
  p.repetition = per_row(t.repetition_penalty, D.repetition_per_row, "repetition_penalty");
  p.presence = per_row(t.presence_penalty, D.presence_per_row, "presence_penalty");
  p.frequency = per_row(t.frequency_penalty, D.frequency_per_row, "frequency_penalty");
  p.repetition_stride = stride0(t.repetition_penalty);
  p.presence_stride = stride0(t.presence_penalty);
  p.frequency_stride = stride0(t.frequency_penalty);
  p.repetition_value = float(D.repetition);
  p.presence_value = float(D.presence);
  p.frequency_value = float(D.frequency);
  const std::vector<NamedView> reads = {{"prompt_tokens", &t.prompt_tokens},   {"output_tokens", &t.output_tokens},
                                        {"repetition_penalty", &t.repetition_penalty},
                                        {"presence_penalty", &t.presence_penalty},
                                        {"frequency_penalty", &t.frequency_penalty}};
  check_aliasing(op, {{"logits", &t.logits}}, reads);
  check_workspace(op, workspace, workspace_size, workspace_bytes(), reads, {{"logits", &t.logits}});
  p.logits = t.logits.data;
  p.dtype = D.logits.dtype;
  p.rows = B;
  p.vocab = D.logits.shape[1];
  p.row_stride = t.logits.strides[0];
  if (workspace_bytes() == 0 || B == 0) return;
  DeviceGuard guard(device);
  sampling::apply_penalties(p, workspace, stream);
}

FamilyInfo sampling_family_info() {
  FamilyInfo f{"sampling", "SamplingPlan, PenaltiesPlan",
               "one token per row of logits: temperature, top-k, top-p, min-p, greedy (scalars or per-row tensors), "
               "no vocabulary sort; Philox seed / offset; optional log-probabilities",
               {}};
  f.ops.push_back(OpCoverage{"sample", "rows", {DType::Float32, DType::Float16, DType::BFloat16}, {"rows"},
                             Backend::Bespoke, false});
  f.ops.push_back(OpCoverage{"apply_penalties", "rows", {DType::Float32, DType::Float16, DType::BFloat16}, {"rows"},
                             Backend::Bespoke, false});
  return f;
}

}  // namespace baracuda
