// LossPlan: cross-entropy validation, chunking of the rows, SKU, thin run().
#include "baracuda/loss.h"
#include "plan_util.h"

#include <algorithm>
#include <sstream>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "loss/loss_launch.h"

namespace baracuda {

namespace {
using loss::CeLaunch;
using loss::Reduction;

// Blocks that keep every SM of an H100 / H200 busy a few times over.
constexpr int64_t kTargetBlocks = 132 * 8;

}  // namespace

struct LossPlan::Impl {
  LossDescriptor desc;
  CeLaunch L;
  KernelSku sku;
  int64_t workspace = 0;
  DType lse_dtype = DType::Float32;
};

std::string LossDescriptor::str() const {
  std::ostringstream os;
  os << "LossDescriptor(" << op << ", input=" << input.str() << ", target=" << target.str();
  if (has_weight) os << ", weight=" << weight.str();
  os << ", reduction=" << reduction << ", ignore_index=" << ignore_index << ", label_smoothing=" << label_smoothing;
  if (with_grad) os << ", with_grad";
  if (has_grad_loss) os << ", grad_loss";
  if (with_grad || op != "cross_entropy") os << ", grad_input=" << grad_input.str();
  os << ")";
  return os.str();
}

LossPlan LossPlan::select(const LossDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  impl->desc = desc;
  const std::string& op = desc.op;
  if (op != "cross_entropy" && op != "cross_entropy_backward")
    throw InvalidArgument("loss: unknown op '" + op + "'; expected cross_entropy or cross_entropy_backward");
  if (!pref.allows(Backend::Bespoke))
    throw Unsupported(op + ": the only backend for losses is 'bespoke', and the preference forbids it");
  const bool fwd = op == "cross_entropy";
  const TensorSpec& x = desc.input;
  if (x.shape.size() != 2)
    throw InvalidArgument(op + ": input must be logits of shape [N, V], got rank " + std::to_string(x.shape.size()) +
                          " " + shape_str(x.shape) + "; flatten the leading dims first");
  if (!x.strides.empty() && x.strides.size() != 2)
    throw InvalidArgument(op + ": input has " + std::to_string(x.strides.size()) + " strides for rank 2");
  const int64_t N = x.shape[0], V = x.shape[1];
  if (N < 0 || V < 0) throw InvalidArgument(op + ": input has a negative dimension in shape " + shape_str(x.shape));
  if (V == 0) throw InvalidArgument(op + ": input has 0 classes (shape " + shape_str(x.shape) + "); expected V >= 1");
  if (!loss::ce_has_kernel(x.dtype))
    throw InvalidDType(op + ": input is " + std::string(dtype_name(x.dtype)) + "; supported: f16, bf16, f32, f64");
  const auto xs = x.effective_strides();
  if (V > 1 && xs[1] != 1)
    throw Unsupported(op + ": input has stride " + std::to_string(xs[1]) +
                      " along V; cross_entropy needs unit stride along V (any row stride); make it contiguous first");
  if (N > 1 && xs[0] < V && V > 1)
    throw InvalidArgument(op + ": input rows overlap (row stride " + std::to_string(xs[0]) + " < V = " +
                          std::to_string(V) + ")");
  const TensorSpec& t = desc.target;
  if (t.dtype != DType::Int64 && t.dtype != DType::Int32)
    throw InvalidDType(op + ": target is " + std::string(dtype_name(t.dtype)) + "; expected int64 or int32 class indices");
  if (t.shape != std::vector<int64_t>{N})
    throw InvalidArgument(op + ": target must have shape [" + std::to_string(N) + "] (one class per row of input), got " +
                          shape_str(t.shape));
  if (desc.has_weight) {
    if (desc.weight.shape != std::vector<int64_t>{V})
      throw InvalidArgument(op + ": weight must have shape [" + std::to_string(V) + "] (one per class), got " +
                            shape_str(desc.weight.shape));
    if (desc.weight.dtype != x.dtype)
      throw InvalidDType(op + ": weight is " + std::string(dtype_name(desc.weight.dtype)) + " but input is " +
                         dtype_name(x.dtype) + "; expected the input's dtype");
  }
  Reduction red;
  if (desc.reduction == "none") red = Reduction::None;
  else if (desc.reduction == "mean") red = Reduction::Mean;
  else if (desc.reduction == "sum") red = Reduction::Sum;
  else throw InvalidArgument(op + ": reduction '" + desc.reduction + "' is not one of none, mean, sum");
  if (!(desc.label_smoothing >= 0.0 && desc.label_smoothing <= 1.0))
    throw InvalidArgument(op + ": label_smoothing " + std::to_string(desc.label_smoothing) + " is outside [0, 1]");
  if (!fwd && !desc.has_grad_loss)
    throw InvalidArgument(op + ": grad_loss is required (the gradient of the loss)");
  if (fwd && desc.has_grad_loss && !desc.with_grad)
    throw InvalidArgument(op + ": grad_loss is given but with_grad is false; it scales the fused gradient only");
  const bool grad = !fwd || desc.with_grad;
  int64_t gxs0 = 0;
  if (grad) {
    const TensorSpec& g = desc.grad_input;
    if (g.shape != x.shape)
      throw InvalidArgument(op + ": grad_input must have the shape of input " + shape_str(x.shape) + ", got " +
                            shape_str(g.shape));
    if (g.dtype != x.dtype)
      throw InvalidDType(op + ": grad_input must be " + std::string(dtype_name(x.dtype)) + ", got " + dtype_name(g.dtype));
    const auto gs = g.effective_strides();
    if (V > 1 && gs[1] != 1)
      throw Unsupported(op + ": grad_input needs unit stride along V, got " + std::to_string(gs[1]));
    if (N > 1 && V > 1 && gs[0] < V)
      throw InvalidArgument(op + ": grad_input has overlapping rows (row stride " + std::to_string(gs[0]) + ")");
    gxs0 = gs[0];
  }
  if (N > (int64_t(1) << 31) - 1) throw Unsupported(op + ": more than 2^31 - 1 rows");

  CeLaunch& L = impl->L;
  L.dtype = x.dtype;
  L.target_dtype = t.dtype;
  L.n = N;
  L.v = V;
  L.x_stride = N > 1 ? xs[0] : 0;
  L.gx_stride = N > 1 ? gxs0 : 0;
  L.target_stride = t.effective_strides().empty() ? 1 : t.effective_strides()[0];
  L.weight_stride = desc.has_weight ? desc.weight.effective_strides()[0] : 1;
  L.ignore_index = desc.ignore_index;
  L.label_smoothing = desc.label_smoothing;
  L.reduction = red;
  L.forward = fwd;
  L.with_grad = grad && fwd;
  const int64_t VEC = 16 / int64_t(dtype_size(x.dtype));
  L.vec = L.x_stride % VEC == 0 && (!grad || L.gx_stride % VEC == 0);
  // Chunks: enough blocks for the GPU when rows are few, chunks of at least 2048 elements.
  int64_t chunks = std::clamp<int64_t>((kTargetBlocks + std::max<int64_t>(N, 1) - 1) / std::max<int64_t>(N, 1), 1,
                                       std::max<int64_t>(1, V / 2048));
  chunks = std::min<int64_t>(chunks, 65535);
  int64_t clen = (V + chunks - 1) / chunks;
  clen = (clen + VEC - 1) / VEC * VEC;
  L.chunk_len = clen;
  L.chunks = int((V + clen - 1) / clen);
  impl->workspace = loss::ce_workspace_bytes(L);
  impl->lse_dtype = x.dtype == DType::Float64 ? DType::Float64 : DType::Float32;

  KernelSku& k = impl->sku;
  k.category = "loss";
  k.op = op;
  k.layout = L.chunks > 1 ? "rows_chunked" : "rows";
  k.name = "loss." + op + "." + k.layout;
  k.dtypes = {x.dtype, x.dtype, t.dtype};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  const DType acc = x.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  pg.math = std::string(acc == DType::Float64 ? "f64 math" : (x.dtype == DType::Float32 ? "f32 math (libm expf)" :
                                                                   "f32 math with hardware exp")) +
            "; online max / sum over " + std::to_string(L.chunks) + " chunk(s) per row combined in order; " +
            "lse saved in " + dtype_name(impl->lse_dtype) + "; mean / sum reduced by one block in a fixed order " +
            "(no atomics); 16-byte loads when row strides and pointers are 16-byte aligned";
  pg.compute_dtype = acc;
  pg.accumulator_dtype = acc;
  pg.deterministic = true;
  pg.bit_stable = true;
  return LossPlan(impl);
}

const KernelSku& LossPlan::sku() const { return impl_->sku; }
const LossDescriptor& LossPlan::descriptor() const { return impl_->desc; }
int64_t LossPlan::workspace_bytes() const { return impl_->workspace; }

void LossPlan::run(const LossTensors& T, void* workspace, int64_t workspace_size, StreamHandle stream) const {
  const Impl& I = *impl_;
  const LossDescriptor& d = I.desc;
  const std::string& op = d.op;
  const bool fwd = op == "cross_entropy", grad = !fwd || d.with_grad;
  const int64_t N = I.L.n;
  const int device = T.input.device;
  auto check = [&](const TensorView& v, const TensorSpec& s, const std::string& name) {
    check_view(op, name, v, s, device, "input");
  };
  auto check_shape = [&](const TensorView& v, const std::vector<int64_t>& shape, DType dt, const std::string& name) {
    if (v.dtype != dt)
      throw InvalidDType(op + ": " + name + " must be " + std::string(dtype_name(dt)) + ", got " + dtype_name(v.dtype));
    bool ok = size_t(v.ndim) == shape.size();
    for (int i = 0; ok && i < v.ndim; ++i) ok = v.shape[i] == shape[i];
    if (!ok) throw InvalidArgument(op + ": " + name + " must have shape " + shape_str(shape) + ", got " +
                                   shape_str(v.shape, v.ndim));
    if (v.data == nullptr && v.numel() > 0) throw InvalidArgument(op + ": " + name + " has a null data pointer");
    if (v.device != device)
      throw InvalidArgument(op + ": " + name + " is on cuda:" + std::to_string(v.device) + " but input is on cuda:" +
                            std::to_string(device));
  };
  check(T.input, d.input, "input");
  check(T.target, d.target, "target");
  if (d.has_weight) {
    if (!T.weight.data && d.weight.shape[0] > 0) throw InvalidArgument(op + ": weight was in the descriptor but not given");
    check(T.weight, d.weight, "weight");
  }
  const bool per_row = I.L.reduction == Reduction::None;
  check_shape(T.lse, {N}, I.lse_dtype, "lse");
  if (fwd) check_shape(T.out, per_row ? std::vector<int64_t>{N} : std::vector<int64_t>{}, d.input.dtype, "out");
  if (grad) check(T.grad_input, d.grad_input, "grad_input");
  if (d.has_grad_loss)
    check_shape(T.grad_loss, per_row ? std::vector<int64_t>{N} : std::vector<int64_t>{}, d.input.dtype, "grad_loss");
  if (workspace == nullptr || workspace_size < I.workspace)
    throw InvalidArgument(op + ": workspace: this plan needs " + std::to_string(I.workspace) + " bytes, got " +
                          std::to_string(workspace ? workspace_size : 0));
  if (reinterpret_cast<uintptr_t>(workspace) % 256) throw InvalidArgument(op + ": workspace must be 256-byte aligned");

  CeLaunch L = I.L;
  L.x = T.input.data;
  L.target = T.target.data;
  L.weight = d.has_weight ? T.weight.data : nullptr;
  L.grad_loss = d.has_grad_loss ? T.grad_loss.data : nullptr;
  L.grad_loss_stride = per_row && d.has_grad_loss && T.grad_loss.ndim == 1 ? T.grad_loss.strides[0] : 0;
  L.out = fwd ? T.out.data : nullptr;
  L.out_stride = fwd && per_row && T.out.ndim == 1 ? T.out.strides[0] : 1;
  L.lse = T.lse.data;
  L.lse_stride = T.lse.ndim == 1 ? T.lse.strides[0] : 1;
  L.grad = grad ? T.grad_input.data : nullptr;
  L.workspace = workspace;
  if (reinterpret_cast<uintptr_t>(L.x) % 16 || (grad && reinterpret_cast<uintptr_t>(L.grad) % 16)) L.vec = false;
  if (N == 0 && (!fwd || per_row)) return;
  DeviceGuard guard(device);
  loss::ce_launch(L, stream);
}

FamilyInfo loss_family_info() {
  FamilyInfo f{"loss", "LossPlan", "cross-entropy for large vocabularies (fused gradient, label smoothing, "
                                   "class weights, ignore_index), with backward", {}};
  const std::vector<DType> fp = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
  f.ops.push_back(OpCoverage{"cross_entropy", "classification", fp, {"rows", "rows_chunked"}, Backend::Bespoke, true});
  return f;
}

}  // namespace baracuda
