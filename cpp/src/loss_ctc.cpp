// CtcLossPlan: validation, geometry and SKU of the CTC loss (forward and backward); thin run().
#include <algorithm>
#include <sstream>

#include "baracuda/errors.h"
#include "baracuda/loss.h"
#include "device_guard.h"
#include "loss/ctc_launch.h"
#include "plan_util.h"

namespace baracuda {

namespace {
using loss::CtcLaunch;
using loss::Reduction;

bool is_index_dtype(DType t) { return t == DType::Int32 || t == DType::Int64; }

// A [N] int32 / int64 lengths operand.
void check_lengths(const std::string& op, const char* name, const TensorSpec& s, int64_t N) {
  if (!is_index_dtype(s.dtype))
    throw InvalidDType(op + ": " + name + " is " + std::string(dtype_name(s.dtype)) + "; expected int64 or int32");
  if (s.shape != std::vector<int64_t>{N})
    throw InvalidArgument(op + ": " + name + " must have shape [" + std::to_string(N) +
                          "] (one length per sample of log_probs [T, N, C]), got " + shape_str(s.shape));
  if (!s.strides.empty() && s.strides.size() != 1)
    throw InvalidArgument(op + ": " + name + " has " + std::to_string(s.strides.size()) + " strides for rank 1");
}

Reduction ctc_reduction(const std::string& op, const std::string& r) {
  if (r == "none") return Reduction::None;
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  throw InvalidArgument(op + ": reduction '" + r + "' is not one of none, mean, sum");
}

constexpr int64_t kInt32Max = (int64_t(1) << 31) - 1;
}  // namespace

struct CtcLossPlan::Impl {
  CtcLossDescriptor desc;
  CtcLaunch L;
  KernelSku sku;
  int64_t workspace = 0;
  DType acc = DType::Float32;
};

std::string CtcLossDescriptor::str() const {
  std::ostringstream os;
  os << "CtcLossDescriptor(" << op << ", log_probs=" << log_probs.str() << ", targets=" << targets.str()
     << ", input_lengths=" << input_lengths.str() << ", target_lengths=" << target_lengths.str()
     << ", blank=" << blank << ", reduction=" << reduction << ", zero_infinity=" << zero_infinity
     << ", max_target_length=" << max_target_length;
  if (op == "ctc_loss_backward")
    os << ", grad_loss=" << grad_loss.str() << ", grad_log_probs=" << grad_log_probs.str();
  os << ")";
  return os.str();
}

CtcLossPlan CtcLossPlan::select(const CtcLossDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  impl->desc = desc;
  const std::string& op = desc.op;
  if (op != "ctc_loss" && op != "ctc_loss_backward")
    throw InvalidArgument("ctc_loss: unknown op '" + op + "'; expected ctc_loss or ctc_loss_backward");
  if (!pref.allows(Backend::Bespoke))
    throw Unsupported(op + ": the only backend for ctc_loss is 'bespoke', and the preference forbids it");
  const bool bwd = op == "ctc_loss_backward";

  const TensorSpec& lp = desc.log_probs;
  if (lp.shape.size() != 3)
    throw InvalidArgument(op + ": log_probs must have shape [T, N, C], got " + shape_str(lp.shape) +
                          " (an unbatched [T, C] input is [T, 1, C])");
  if (!lp.strides.empty() && lp.strides.size() != 3)
    throw InvalidArgument(op + ": log_probs has " + std::to_string(lp.strides.size()) + " strides for rank 3");
  const int64_t T = lp.shape[0], N = lp.shape[1], C = lp.shape[2];
  if (T < 0 || N < 0 || C < 0)
    throw InvalidArgument(op + ": log_probs has a negative dimension in " + shape_str(lp.shape));
  if (!loss::ctc_has_kernel(lp.dtype))
    throw InvalidDType(op + ": log_probs is " + std::string(dtype_name(lp.dtype)) + "; supported: f16, bf16, f32, f64");
  if (desc.blank < 0 || desc.blank >= C)
    throw InvalidArgument(op + ": blank " + std::to_string(desc.blank) + " is outside [0, C) for C = " +
                          std::to_string(C) + " classes");

  const TensorSpec& tg = desc.targets;
  if (!is_index_dtype(tg.dtype))
    throw InvalidDType(op + ": targets is " + std::string(dtype_name(tg.dtype)) + "; expected int64 or int32 labels");
  if (tg.shape.size() != 1 && tg.shape.size() != 2)
    throw InvalidArgument(op + ": targets must be [N, S] (padded) or [sum(target_lengths)] (concatenated), got " +
                          shape_str(tg.shape));
  if (!tg.strides.empty() && tg.strides.size() != tg.shape.size())
    throw InvalidArgument(op + ": targets has " + std::to_string(tg.strides.size()) + " strides for rank " +
                          std::to_string(tg.shape.size()));
  for (int64_t d : tg.shape)
    if (d < 0) throw InvalidArgument(op + ": targets has a negative dimension in " + shape_str(tg.shape));
  const bool concat = tg.shape.size() == 1;
  if (!concat && tg.shape[0] != N)
    throw InvalidArgument(op + ": targets [N, S] must have N = " + std::to_string(N) + " rows (log_probs " +
                          shape_str(lp.shape) + "), got " + shape_str(tg.shape));
  check_lengths(op, "input_lengths", desc.input_lengths, N);
  check_lengths(op, "target_lengths", desc.target_lengths, N);

  int64_t S = 0;
  if (concat) {
    if (desc.max_target_length < 0)
      throw InvalidArgument(op + ": max_target_length is required with concatenated (1-D) targets: a bound on "
                                 "every target length (the Python wrapper computes it from the lengths)");
    S = std::min(desc.max_target_length, tg.shape[0]);  // no sample can hold more than all labels
  } else {
    S = tg.shape[1];
    if (desc.max_target_length > S)
      throw InvalidArgument(op + ": max_target_length " + std::to_string(desc.max_target_length) +
                            " exceeds the padded targets' width S = " + std::to_string(S));
    if (desc.max_target_length >= 0) S = desc.max_target_length;
  }
  const Reduction red = ctc_reduction(op, desc.reduction);

  if (bwd) {
    const TensorSpec& gl = desc.grad_loss;
    const std::vector<int64_t> want = red == Reduction::None ? std::vector<int64_t>{N} : std::vector<int64_t>{};
    if (gl.shape != want)
      throw InvalidArgument(op + ": grad_loss must have shape " + shape_str(want) + " (reduction " + desc.reduction +
                            "), got " + shape_str(gl.shape));
    if (gl.dtype != lp.dtype)
      throw InvalidDType(op + ": grad_loss must be " + std::string(dtype_name(lp.dtype)) + " (log_probs' dtype), got " +
                         dtype_name(gl.dtype));
    const TensorSpec& g = desc.grad_log_probs;
    if (g.shape != lp.shape)
      throw InvalidArgument(op + ": grad_log_probs must have the shape of log_probs " + shape_str(lp.shape) +
                            ", got " + shape_str(g.shape));
    if (g.dtype != lp.dtype)
      throw InvalidDType(op + ": grad_log_probs must be " + std::string(dtype_name(lp.dtype)) + ", got " +
                         dtype_name(g.dtype));
    if (!g.strides.empty() && g.strides.size() != 3)
      throw InvalidArgument(op + ": grad_log_probs has " + std::to_string(g.strides.size()) + " strides for rank 3");
    if (!non_overlapping(g.shape, g.effective_strides()))
      throw InvalidArgument(op + ": grad_log_probs has overlapping elements (strides " +
                            shape_str(g.effective_strides()) + ")");
  }

  if (N > kInt32Max || C > kInt32Max || S > kInt32Max / 4 || (bwd && T * N > kInt32Max))
    throw Unsupported(op + ": more than 2^31 - 1 samples, classes or (time step, sample) rows");
  const int64_t acc = lp.dtype == DType::Float64 ? 8 : 4;
  const int64_t lmax = loss::ctc_ext(S);
  if (loss::ctc_recursion_smem(S, 1, acc) > loss::kCtcMaxSmem || loss::ctc_grad_smem(S, acc) > loss::kCtcMaxSmem)
    throw Unsupported(op + ": target length bound S = " + std::to_string(S) + " needs more than " +
                      std::to_string(loss::kCtcMaxSmem / 1024) + " KiB of shared memory per sample; at most " +
                      std::to_string((loss::kCtcMaxSmem - 3 * acc - 16) / (5 * acc + 4)) + " labels are supported" +
                      (lp.dtype == DType::Float64 ? " for f64" : ""));

  CtcLaunch& L = impl->L;
  L.dtype = lp.dtype;
  L.target_dtype = tg.dtype;
  L.il_dtype = desc.input_lengths.dtype;
  L.tl_dtype = desc.target_lengths.dtype;
  L.reduction = red;
  L.backward = bwd;
  L.zero_infinity = desc.zero_infinity;
  L.t = T;
  L.n = N;
  L.c = C;
  L.s = S;
  L.blank = desc.blank;
  const auto ls = lp.effective_strides();
  for (int i = 0; i < 3; ++i) L.lp_st[i] = ls[i];
  L.concat = concat;
  const auto ts = tg.effective_strides();
  L.tg_st0 = ts[0];
  L.tg_st1 = concat ? 0 : ts[1];
  L.targets_len = concat ? tg.shape[0] : 0;
  L.il_st = desc.input_lengths.effective_strides()[0];
  L.tl_st = desc.target_lengths.effective_strides()[0];
  if (bwd) {
    const auto gs = desc.grad_log_probs.effective_strides();
    for (int i = 0; i < 3; ++i) L.g_st[i] = gs[i];
    L.gl_st = red == Reduction::None ? desc.grad_loss.effective_strides()[0] : 0;
  }
  // Threads over the extended positions (a multiple of 32, at most 512: longer label sequences
  // loop); time steps gathered per chunk: as many as fit 48 KiB of shared memory, 1..32.
  L.threads = int(std::min<int64_t>(512, std::max<int64_t>(32, (lmax + 31) / 32 * 32)));
  const int64_t fixed = loss::ctc_recursion_smem(S, 0, acc);
  const int64_t per_step = (S + 1) * acc;
  L.tt = int(std::clamp<int64_t>((48 * 1024 - fixed) / per_step, 1, 32));
  L.grad_threads = std::max(C, lmax) > 256 ? 256 : 128;
  impl->workspace = loss::ctc_workspace_bytes(L);
  impl->acc = acc == 8 ? DType::Float64 : DType::Float32;

  KernelSku& k = impl->sku;
  k.category = "loss";
  k.op = op;
  k.layout = bwd ? "beta_per_sample+grad_rows" : "alpha_per_sample";
  k.name = "loss." + op + "." + k.layout;
  k.dtypes = {lp.dtype, lp.dtype, tg.dtype};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  const std::string a = dtype_name(impl->acc);
  pg.math = a + " log-space " + (bwd ? "beta" : "alpha") + " recursion (libm exp / log, torch's three-term " +
            "log-sum-exp), one block of " + std::to_string(L.threads) + " threads per sample over the 2 S + 1 = " +
            std::to_string(lmax) + " extended labels, T sequential steps, log_probs gathered " +
            std::to_string(L.tt) + " step(s) at a time into shared memory; " +
            (bwd ? "loss recomputed from the saved log_alpha; one block per (t, n) row: per-class log-sums of "
                   "alpha * beta (blank: a fixed-order block reduction; labels: their occurrences in order), "
                   "grad = (exp(lp) - exp(logsum + nll - lp)) * scale (torch's formula)"
                 : "log_alpha saved in " + a + (red == Reduction::None ? std::string("; loss per sample")
                                                : "; mean / sum added by one block in a fixed order (no atomics)"));
  pg.compute_dtype = impl->acc;
  pg.accumulator_dtype = impl->acc;
  pg.deterministic = true;
  pg.bit_stable = true;
  return CtcLossPlan(impl);
}

const KernelSku& CtcLossPlan::sku() const { return impl_->sku; }
const CtcLossDescriptor& CtcLossPlan::descriptor() const { return impl_->desc; }
int64_t CtcLossPlan::workspace_bytes() const { return impl_->workspace; }
std::vector<int64_t> CtcLossPlan::log_alpha_shape() const {
  return {impl_->L.n, impl_->L.t, loss::ctc_ext(impl_->L.s)};
}
DType CtcLossPlan::log_alpha_dtype() const { return impl_->acc; }

void CtcLossPlan::run(const CtcLossTensors& T, void* workspace, int64_t workspace_size, StreamHandle stream) const {
  const Impl& I = *impl_;
  const CtcLossDescriptor& d = I.desc;
  const std::string& op = d.op;
  const bool bwd = I.L.backward;
  const int device = T.log_probs.device;
  check_view(op, "log_probs", T.log_probs, d.log_probs, device, "log_probs");
  check_view(op, "targets", T.targets, d.targets, device, "log_probs");
  check_view(op, "input_lengths", T.input_lengths, d.input_lengths, device, "log_probs");
  check_view(op, "target_lengths", T.target_lengths, d.target_lengths, device, "log_probs");
  auto check_dense = [&](const TensorView& v, const std::vector<int64_t>& shape, DType dt, const std::string& name,
                         bool contiguous) {
    if (v.dtype != dt)
      throw InvalidDType(op + ": " + name + " must be " + std::string(dtype_name(dt)) + ", got " + dtype_name(v.dtype));
    bool ok = size_t(v.ndim) == shape.size();
    for (int i = 0; ok && i < v.ndim; ++i) ok = v.shape[i] == shape[i];
    if (!ok)
      throw InvalidArgument(op + ": " + name + " must have shape " + shape_str(shape) + ", got " +
                            shape_str(v.shape, v.ndim));
    if (contiguous && !v.is_contiguous())
      throw InvalidArgument(op + ": " + name + " must be contiguous (row-major), got strides " +
                            shape_str(v.strides, v.ndim));
    if (v.data == nullptr && v.numel() > 0) throw InvalidArgument(op + ": " + name + " has a null data pointer");
    if (v.device != device)
      throw InvalidArgument(op + ": " + name + " is on cuda:" + std::to_string(v.device) + " but log_probs is on cuda:" +
                            std::to_string(device) + "; all operands must be on one device");
  };
  check_dense(T.log_alpha, log_alpha_shape(), I.acc, "log_alpha", true);
  const bool per_sample = I.L.reduction == Reduction::None;
  const std::vector<NamedView> inputs = {{"log_probs", &T.log_probs},
                                         {"targets", &T.targets},
                                         {"input_lengths", &T.input_lengths},
                                         {"target_lengths", &T.target_lengths}};
  CtcLaunch L = I.L;
  if (!bwd) {
    check_dense(T.out, per_sample ? std::vector<int64_t>{I.L.n} : std::vector<int64_t>{}, d.log_probs.dtype, "out",
                false);
    check_aliasing(op, {{"log_alpha", &T.log_alpha}, {"out", &T.out}}, inputs);
    L.out_st = per_sample && T.out.ndim == 1 ? T.out.strides[0] : 1;
    L.out = T.out.data;
  } else {
    check_view(op, "grad_loss", T.grad_loss, d.grad_loss, device, "log_probs");
    check_view(op, "grad_log_probs", T.grad_log_probs, d.grad_log_probs, device, "log_probs");
    std::vector<NamedView> read = inputs;
    read.push_back({"log_alpha", &T.log_alpha});
    read.push_back({"grad_loss", &T.grad_loss});
    check_aliasing(op, {{"grad_log_probs", &T.grad_log_probs}}, read);
    L.grad_loss = T.grad_loss.data;
    L.grad = T.grad_log_probs.data;
  }
  std::vector<NamedView> all = inputs;
  all.push_back({"log_alpha", &T.log_alpha});
  all.push_back({"out", &T.out});
  all.push_back({"grad_loss", &T.grad_loss});
  all.push_back({"grad_log_probs", &T.grad_log_probs});
  check_workspace(op, workspace, workspace_size, I.workspace, all);
  L.log_probs = T.log_probs.data;
  L.targets = T.targets.data;
  L.input_lengths = T.input_lengths.data;
  L.target_lengths = T.target_lengths.data;
  L.log_alpha = T.log_alpha.data;
  L.workspace = workspace;
  if (bwd ? L.t * L.n * L.c == 0 : (per_sample && L.n == 0)) return;
  DeviceGuard guard(device);
  loss::ctc_launch(L, stream);
}

void append_ctc_loss_coverage(FamilyInfo& f) {
  f.ops.push_back(OpCoverage{"ctc_loss", "sequence",
                             {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64},
                             {"alpha_per_sample", "beta_per_sample+grad_rows"}, Backend::Bespoke, true});
}

}  // namespace baracuda
