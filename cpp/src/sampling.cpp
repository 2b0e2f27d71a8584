// SamplingPlan: validation of the logits, the scalar and per-row parameters, and run().
#include "baracuda/sampling.h"

#include <cmath>
#include <sstream>

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

}  // namespace

std::string SamplingDescriptor::str() const {
  std::ostringstream os;
  os << "SamplingDescriptor(logits=" << logits.str() << ", tokens=" << dtype_name(token_dtype);
  auto param = [&](const char* name, bool per_row, double v) {
    os << ", " << name << "=";
    if (per_row) os << "per_row";
    else os << num_str(v);
  };
  param("temperature", temperature_per_row, temperature);
  param("top_k", top_k_per_row, double(top_k));
  if (top_k_per_row) os << "(" << dtype_name(top_k_dtype) << ")";
  param("top_p", top_p_per_row, top_p);
  param("min_p", min_p_per_row, min_p);
  if (seeds_per_row) os << ", seeds=per_row";
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
  need(L.shape.size() == 2, "logits has shape " + shape_str(L.shape) + "; expected [batch, vocab]");
  if (L.dtype != DType::Float32 && L.dtype != DType::Float16 && L.dtype != DType::BFloat16)
    throw InvalidDType(kOp + ": logits is " + dtype_name(L.dtype) + "; expected float32, float16 or bfloat16");
  need(L.shape[1] > 0 || L.shape[0] == 0, "logits has an empty vocabulary (shape " + shape_str(L.shape) + ")");
  if (L.shape[1] >= (int64_t(1) << 31))
    throw Unsupported(kOp + ": a vocabulary of " + std::to_string(L.shape[1]) + " tokens; at most 2^31 - 1");
  const auto st = L.effective_strides();
  if (L.shape[1] > 1 && st[1] != 1) throw Unsupported(kOp + ": logits must be contiguous along the vocabulary");
  if (st[0] < 0) throw Unsupported(kOp + ": logits has a negative stride");
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
  per_row(t.seeds, D.seeds_per_row, "seeds", DType::Int64);
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
  p.seeds = D.seeds_per_row ? static_cast<const int64_t*>(t.seeds.data) : nullptr;
  p.seed_stride = stride0(t.seeds);
  p.seed = t.seed;
  p.offset = t.offset;
  if (B == 0) return;
  DeviceGuard guard(device);
  sampling::sample(p, stream);
}

FamilyInfo sampling_family_info() {
  FamilyInfo f{"sampling", "SamplingPlan",
               "one token per row of logits: temperature, top-k, top-p, min-p, greedy (scalars or per-row tensors), "
               "no vocabulary sort; Philox seed / offset; optional log-probabilities",
               {}};
  f.ops.push_back(OpCoverage{"sample", "rows", {DType::Float32, DType::Float16, DType::BFloat16}, {"rows"},
                             Backend::Bespoke, false});
  return f;
}

}  // namespace baracuda
