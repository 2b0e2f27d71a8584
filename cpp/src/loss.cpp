// LossPlan: validation, geometry and SKU of cross-entropy (chunked / cluster paths) and nll_loss,
// dispatch to the pointwise (loss_pointwise.cpp), row (loss_rows.cpp) and CTC losses; thin run().
#include "baracuda/loss.h"
#include "common/knobs.h"
#include "plan_util.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "loss/loss_launch.h"
#include "loss_internal.h"

namespace baracuda {

namespace {
using loss::CeLaunch;
using loss::Reduction;

// Blocks that keep every SM of an H100 / H200 busy a few times over.
constexpr int64_t kTargetBlocks = 132 * 8;

// Tuning knobs of the cross-entropy cluster path (PlanPreference.tuning, or the debug variable
// BARACUDA_CE_CFG; bench --sweep sets the variable):
//   "path=cluster|chunked|stream,k=8,threads=256,cluster=8,iters=2"
// path=stream: the streaming forward (forward only, no label smoothing, 16-byte rows), `iters`
// iterations of 256 threads x 8 vectors per CTA (chunks of iters * 16384 bf16 elements).
// Unset keys keep the defaults below; invalid values are ignored (the defaults apply).
struct CeKnobs {
  int path = -1;  // -1 auto, 0 chunked, 1 cluster, 2 stream
  int k = 0, threads = 0, cluster = 0, iters = 0;
};
CeKnobs ce_knobs(const PlanPreference& pref) {
  CeKnobs c;
  for (const Knob& kn : tuning_knobs("cross_entropy", pref.tuning, "BARACUDA_CE_CFG",
                                     {"path", "k", "threads", "cluster", "iters"})) {
    const std::string& key = kn.key;
    const long long iv = kn.num();
    if (key == "path")
      c.path = kn.value == "cluster" ? 1 : kn.value == "chunked" ? 0 : kn.value == "stream" ? 2 : -1;
    else if (key == "iters" && iv >= 1 && iv <= 64) c.iters = int(iv);
    else if (key == "k" && (iv == 2 || iv == 4 || iv == 8)) c.k = int(iv);
    else if (key == "threads" && iv >= 32 && iv <= 512 && iv % 32 == 0) c.threads = int(iv);
    else if (key == "cluster" && iv >= 1 && iv <= 16) c.cluster = int(iv);
  }
  return c;
}

// The cluster path's geometry for rows of nv 16-byte vectors: C CTAs of `threads` threads, K
// vectors per thread. Default: K = 8 and up to 256 threads (2048 vectors = 32 KB per CTA), the
// fewest CTAs per row that hold it (<= 16); the threads trimmed to the slice. False: no fit.
bool ce_cluster_geometry(int64_t nv, int64_t vec, const CeKnobs& kn, CeLaunch& L) {
  const int K = kn.k ? kn.k : 8;
  const int tmax = std::min(kn.threads ? kn.threads : loss::ce_cluster_max_threads(K), loss::ce_cluster_max_threads(K));
  const int64_t cap = int64_t(tmax) * K;
  int64_t C = kn.cluster ? kn.cluster : (nv + cap - 1) / cap;
  if (C < 1 || C > 16) return false;
  const int64_t per = (nv + C - 1) / C;              // vectors per CTA
  C = (nv + per - 1) / per;                          // no empty CTA
  int k = K;
  if (!kn.k)
    while (k > 2 && per <= int64_t(32) * (k / 2)) k /= 2;  // short rows: one warp, fewer vectors each
  const int64_t thr = (per + k - 1) / k;
  const int64_t threads = (thr + 31) / 32 * 32;
  if (threads > std::min(tmax, loss::ce_cluster_max_threads(k))) return false;
  L.cl_k = k;
  L.cl_threads = int(threads);
  L.cl_size = int(C);
  L.cl_slice = per * vec;
  return true;
}

}  // namespace

struct LossPlan::Impl {
  AnyLossDescriptor public_desc;  // what the caller selected with
  LossSpec desc;
  int which = 0;  // 0 cross-entropy, 1 pointwise, 2 nll, 3 row losses
  loss::PwLaunch pw;
  loss::RowLaunch row;
  std::vector<GradRequest> grads;  // row / pointwise losses: the gradients a backward plan writes
  std::vector<loss::PwLaunch> pw_grads;  // pointwise backward: one launch per entry of grads
  loss::NllLaunch nll;
  CeLaunch L;
  KernelSku sku;
  int64_t workspace = 0;
  DType lse_dtype = DType::Float32;
};

namespace {
void put_specs(std::ostringstream& os, const char* name, const std::vector<TensorSpec>& v) {
  for (size_t i = 0; i < v.size(); ++i) os << ", " << name << i << "=" << v[i].str();
}
void put_grads(std::ostringstream& os, bool has_grad_loss, const TensorSpec& grad_loss,
               const std::vector<std::string>& wrt, const std::vector<TensorSpec>& grads) {
  if (has_grad_loss) os << ", grad_loss=" << grad_loss.str();
  if (!wrt.empty()) {
    os << ", wrt=[";
    for (size_t i = 0; i < wrt.size(); ++i) os << (i ? ", " : "") << wrt[i];
    os << "]";
  }
  put_specs(os, "grad", grads);
}
}  // namespace

std::string CrossEntropyLossDescriptor::str() const {
  std::ostringstream os;
  os << "CrossEntropyLossDescriptor(" << op << ", input=" << input.str() << ", target=" << target.str();
  if (has_weight) os << ", weight=" << weight.str();
  os << ", reduction=" << reduction << ", ignore_index=" << ignore_index << ", label_smoothing=" << label_smoothing;
  if (with_grad) os << ", with_grad";
  if (with_grad || op != "cross_entropy") os << ", grad_input=" << grad_input.str();
  if (has_grad_loss) os << ", grad_loss=" << grad_loss.str();
  os << ")";
  return os.str();
}

std::string PointwiseLossDescriptor::str() const {
  std::ostringstream os;
  os << "PointwiseLossDescriptor(" << op << ", input=" << input.str() << ", target=" << target.str();
  if (has_weight) os << ", weight=" << weight.str();
  put_specs(os, "extra", extra);
  os << ", reduction=" << reduction << ", param=" << param << ", log_target=" << log_target
     << ", log_input=" << log_input << ", full=" << full << ", grad_input=" << grad_input.str();
  put_grads(os, has_grad_loss, grad_loss, wrt, grads);
  os << ")";
  return os.str();
}

std::string RowLossDescriptor::str() const {
  std::ostringstream os;
  os << "RowLossDescriptor(" << op << ", input=" << input.str() << ", target=" << target.str();
  if (has_weight) os << ", weight=" << weight.str();
  put_specs(os, "extra", extra);
  os << ", reduction=" << reduction << ", margin=" << margin << ", p=" << p << ", eps=" << eps << ", swap=" << swap
     << ", grad_input=" << grad_input.str();
  put_grads(os, has_grad_loss, grad_loss, wrt, grads);
  os << ")";
  return os.str();
}

// ---- the helpers every loss shares (loss_internal.h), and nll_loss --------------------------------
namespace {
using loss::NllLaunch;
using loss::PwLaunch;

std::string loss_op_list() {
  std::string s = "cross_entropy, nll_loss";
  append_pointwise_loss_names(s);
  for (const char* n : kRowLossNames) s += std::string(", ") + n;
  return s;
}

// Class-index losses (cross-entropy, NLL): target [N] int64 / int32, optional weight [C] in the
// input's dtype.
void check_class_targets(const LossSpec& desc, int64_t N, int64_t C) {
  const std::string& op = desc.op;
  const TensorSpec& x = desc.input;
  const TensorSpec& t = desc.target;
  if (t.dtype != DType::Int64 && t.dtype != DType::Int32)
    throw InvalidDType(op + ": target is " + std::string(dtype_name(t.dtype)) + "; expected int64 or int32 class indices");
  if (t.shape != std::vector<int64_t>{N})
    throw InvalidArgument(op + ": target must have shape [" + std::to_string(N) + "] (one class per row of input), got " +
                          shape_str(t.shape));
  if (desc.has_weight) {
    if (desc.weight.shape != std::vector<int64_t>{C})
      throw InvalidArgument(op + ": weight must have shape [" + std::to_string(C) + "] (one per class), got " +
                            shape_str(desc.weight.shape));
    if (desc.weight.dtype != x.dtype)
      throw InvalidDType(op + ": weight is " + std::string(dtype_name(desc.weight.dtype)) + " but input is " +
                         dtype_name(x.dtype) + "; expected the input's dtype");
  }
}

}  // namespace

bool is_float_dtype(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
Reduction parse_reduction(const std::string& op, const std::string& r, bool batchmean_ok) {
  if (r == "none") return Reduction::None;
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "batchmean" && batchmean_ok) return Reduction::Mean;  // divisor: input.size(0)
  throw InvalidArgument(op + ": reduction '" + r + "' is not one of none, mean, sum" +
                        (batchmean_ok ? ", batchmean" : ""));
}
static void select_nll(const LossSpec& desc, LossPlan::Impl& I) {
  const std::string& op = desc.op;
  const bool bwd = op == "nll_loss_backward";
  NllLaunch& L = I.nll;
  I.which = 2;
  const TensorSpec& x = desc.input;
  if (x.shape.size() != 2)
    throw InvalidArgument(op + ": input must be log-probabilities of shape [N, C], got " + shape_str(x.shape) +
                          "; flatten the leading dims first");
  if (!is_float_dtype(x.dtype))
    throw InvalidDType(op + ": input is " + std::string(dtype_name(x.dtype)) + "; supported: f16, bf16, f32, f64");
  const int64_t N = x.shape[0], C = x.shape[1];
  if (N < 0 || C < 0) throw InvalidArgument(op + ": input has a negative dimension in " + shape_str(x.shape));
  const TensorSpec& t = desc.target;
  check_class_targets(desc, N, C);
  L.reduction = parse_reduction(op, desc.reduction, false);
  L.dtype = x.dtype;
  L.target_dtype = t.dtype;
  L.backward = bwd;
  L.n = N;
  L.c = C;
  const auto xs = x.effective_strides();
  L.x_stride0 = xs[0];
  L.x_stride1 = xs[1];
  L.t_stride = t.effective_strides()[0];
  L.w_stride = desc.has_weight ? desc.weight.effective_strides()[0] : 1;
  L.ignore_index = desc.ignore_index;
  if (bwd) {
    const TensorSpec& g = desc.grad_input;
    if (g.shape != x.shape)
      throw InvalidArgument(op + ": grad_input must have the shape of input " + shape_str(x.shape) + ", got " +
                            shape_str(g.shape));
    if (g.dtype != x.dtype)
      throw InvalidDType(op + ": grad_input must be " + std::string(dtype_name(x.dtype)) + ", got " + dtype_name(g.dtype));
    if (!non_overlapping(g.shape, g.effective_strides()))
      throw InvalidArgument(op + ": grad_input has overlapping elements");
    const auto gs = g.effective_strides();
    L.g_stride0 = gs[0];
    L.g_stride1 = gs[1];
    if (!desc.has_grad_loss) throw InvalidArgument(op + ": grad_loss is required (the gradient of the loss)");
    const std::vector<int64_t> want = L.reduction == Reduction::None ? std::vector<int64_t>{N} : std::vector<int64_t>{};
    if (desc.grad_loss.shape != want)
      throw InvalidArgument(op + ": grad_loss must have shape " + shape_str(want) + ", got " +
                            shape_str(desc.grad_loss.shape));
    if (desc.grad_loss.dtype != x.dtype)
      throw InvalidDType(op + ": grad_loss must be " + std::string(dtype_name(x.dtype)) + ", got " +
                         dtype_name(desc.grad_loss.dtype));
    L.gl_stride = L.reduction == Reduction::None ? desc.grad_loss.effective_strides()[0] : 0;
  }
  I.workspace = loss::nll_workspace_bytes(L);
  KernelSku& k = I.sku;
  k.category = "loss";
  k.op = op;
  k.layout = "rows";
  k.name = "loss." + op + ".rows";
  k.dtypes = {x.dtype, x.dtype, t.dtype};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  const DType acc = x.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  pg.math = std::string(acc == DType::Float64 ? "f64" : "f32") +
            " sums of -w[t] * x[i, t] and w[t] in two fixed-order stages (no atomics); mean = sum / sum of "
            "weights of the non-ignored targets; a target outside [0, C) that is not ignore_index gives NaN";
  pg.compute_dtype = acc;
  pg.accumulator_dtype = acc;
  pg.deterministic = true;
  pg.bit_stable = true;
}


void check_small(const std::string& op, const std::string& name, const TensorView& v, const std::vector<int64_t>& shape,
                 DType dt, int device) {
  if (v.dtype != dt)
    throw InvalidDType(op + ": " + name + " must be " + std::string(dtype_name(dt)) + ", got " + dtype_name(v.dtype));
  bool ok = size_t(v.ndim) == shape.size();
  for (int i = 0; ok && i < v.ndim; ++i) ok = v.shape[i] == shape[i];
  if (!ok)
    throw InvalidArgument(op + ": " + name + " must have shape " + shape_str(shape) + ", got " + shape_str(v.shape, v.ndim));
  if (v.data == nullptr && v.numel() > 0) throw InvalidArgument(op + ": " + name + " has a null data pointer");
  if (v.device != device)
    throw InvalidArgument(op + ": " + name + " is on cuda:" + std::to_string(v.device) + " but input is on cuda:" +
                          std::to_string(device));
}

void check_unselected(const std::string& op, const LossTensors& T, bool weight, bool grad_input, bool grad_loss) {
  const std::string why = "the plan was selected without it (select a descriptor that has it)";
  if (!weight) check_presence(op, T.weight, false, "weight", why);
  if (!grad_input) check_presence(op, T.grad_input, false, "grad_input", why);
  if (!grad_loss) check_presence(op, T.grad_loss, false, "grad_loss", why);
}

static void run_nll(const LossPlan::Impl& I, const LossTensors& T, void* ws, int64_t wsn, StreamHandle stream) {
  const LossSpec& d = I.desc;
  const std::string& op = d.op;
  const int device = T.input.device;
  NllLaunch L = I.nll;
  check_view(op, "input", T.input, d.input, device, "input");
  check_view(op, "target", T.target, d.target, device, "input");
  L.x = T.input.data;
  L.target = T.target.data;
  if (d.has_weight) {
    check_view(op, "weight", T.weight, d.weight, device, "input");
    L.weight = T.weight.data;
  }
  const bool per_row = L.reduction == Reduction::None;
  check_unselected(op, T, d.has_weight, L.backward, L.backward);
  std::vector<NamedView> reads = {
      {"input", &T.input}, {"target", &T.target}, {"weight", d.has_weight ? &T.weight : nullptr}};
  std::vector<NamedView> writes;
  if (L.backward) {
    check_view(op, "grad_input", T.grad_input, d.grad_input, device, "input");
    check_view(op, "grad_loss", T.grad_loss, d.grad_loss, device, "input");
    L.out = T.grad_input.data;
    L.grad_loss = T.grad_loss.data;
    reads.push_back({"grad_loss", &T.grad_loss});
    writes = {{"grad_input", &T.grad_input}};
  } else {
    check_small(op, "out", T.out, per_row ? std::vector<int64_t>{L.n} : std::vector<int64_t>{}, d.input.dtype, device);
    L.out = T.out.data;
    L.out_stride = per_row && T.out.ndim == 1 ? T.out.strides[0] : 1;
    writes = {{"out", &T.out}};
  }
  check_aliasing(op, writes, reads);
  check_workspace(op, ws, wsn, I.workspace, reads, writes);
  L.workspace = ws;
  if (L.backward ? L.n * L.c == 0 && per_row : (per_row && L.n == 0)) return;
  DeviceGuard guard(device);
  loss::nll_launch(L, stream);
}

namespace {
std::string base_of(const std::string& op) {
  return op.size() > 9 && op.compare(op.size() - 9, 9, "_backward") == 0 ? op.substr(0, op.size() - 9) : op;
}
}  // namespace

LossKind loss_kind(const std::string& op) {
  const std::string base = base_of(op);
  if (base == "cross_entropy" || base == "nll_loss") return LossKind::CrossEntropy;
  if (is_pointwise_loss(base)) return LossKind::Pointwise;
  if (is_row_loss(base)) return LossKind::Row;
  return LossKind::Unknown;
}

static LossPlan select_spec(const LossSpec& desc, AnyLossDescriptor public_desc, const PlanPreference& pref);

// The fields every kind's descriptor has.
template <class Desc> LossSpec common_spec(const Desc& d) {
  LossSpec s;
  s.op = d.op;
  s.input = d.input;
  s.target = d.target;
  s.has_weight = d.has_weight;
  s.weight = d.weight;
  s.reduction = d.reduction;
  s.has_grad_loss = d.has_grad_loss;
  s.grad_loss = d.grad_loss;
  s.grad_input = d.grad_input;
  return s;
}

// Each descriptor's op must be of its kind; the error names the descriptor that takes it.
static void check_kind(const std::string& op, LossKind want, const char* desc_name) {
  const LossKind k = loss_kind(op);
  if (k == want || k == LossKind::Unknown) return;  // unknown ops: select names the known ones
  static const char* const kNames[] = {"CrossEntropyLossDescriptor", "PointwiseLossDescriptor", "RowLossDescriptor"};
  throw InvalidArgument(std::string(desc_name) + ": op '" + op + "' is described by " + kNames[int(k)]);
}

LossPlan LossPlan::select(const CrossEntropyLossDescriptor& d, const PlanPreference& pref) {
  check_kind(d.op, LossKind::CrossEntropy, "CrossEntropyLossDescriptor");
  LossSpec s = common_spec(d);
  s.ignore_index = d.ignore_index;
  s.label_smoothing = d.label_smoothing;
  s.with_grad = d.with_grad;
  return select_spec(s, AnyLossDescriptor(d), pref);
}

LossPlan LossPlan::select(const PointwiseLossDescriptor& d, const PlanPreference& pref) {
  check_kind(d.op, LossKind::Pointwise, "PointwiseLossDescriptor");
  LossSpec s = common_spec(d);
  s.extra = d.extra;
  s.param = d.param;
  s.log_target = d.log_target;
  s.log_input = d.log_input;
  s.full = d.full;
  s.wrt = d.wrt;
  s.grads = d.grads;
  return select_spec(s, AnyLossDescriptor(d), pref);
}

LossPlan LossPlan::select(const RowLossDescriptor& d, const PlanPreference& pref) {
  check_kind(d.op, LossKind::Row, "RowLossDescriptor");
  LossSpec s = common_spec(d);
  s.extra = d.extra;
  s.param = d.margin;
  s.p = d.p;
  s.eps = d.eps;
  s.swap = d.swap;
  s.wrt = d.wrt;
  s.grads = d.grads;
  return select_spec(s, AnyLossDescriptor(d), pref);
}

LossPlan LossPlan::select(const AnyLossDescriptor& d, const PlanPreference& pref) {
  return std::visit([&](const auto& x) { return LossPlan::select(x, pref); }, d);
}

static LossPlan select_spec(const LossSpec& desc, AnyLossDescriptor public_desc, const PlanPreference& pref) {
  using Impl = LossPlan::Impl;
  auto impl = std::make_shared<Impl>();
  impl->public_desc = std::move(public_desc);
  impl->desc = desc;
  const std::string& op = desc.op;
  const std::string base = base_of(op);
  if (loss_kind(op) == LossKind::Unknown)
    throw InvalidArgument("loss: unknown op '" + op + "'; expected one of " + loss_op_list() +
                          " (or <op>_backward)");
  if (!pref.allows(Backend::Bespoke))
    throw Unsupported(op + ": the only backend for losses is 'bespoke', and the preference forbids it");
  // (cross-entropy / nll descriptors have no wrt: only a forward of the other kinds can carry one)
  if ((!desc.wrt.empty() || !desc.grads.empty()) && base == op)
    throw InvalidArgument(op + ": wrt / grads name the gradients of a backward; they are for the pointwise and row "
                               "losses' <op>_backward");
  if (base == "nll_loss") {
    select_nll(desc, *impl);
    return LossPlan(impl);
  }
  if (is_row_loss(base)) {
    impl->which = 3;
    select_row_loss(desc, base, impl->row, impl->grads, impl->sku, impl->workspace);
    return LossPlan(impl);
  }
  if (base != "cross_entropy") {
    impl->which = 1;
    select_pointwise_loss(desc, base, impl->pw, impl->pw_grads, impl->grads, impl->sku, impl->workspace);
    return LossPlan(impl);
  }
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
  check_class_targets(desc, N, V);
  const Reduction red = parse_reduction(op, desc.reduction, false);
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
  // The one-read cluster path: forward (and fused), 16-byte rows, a build and a device with sm_90.
  const CeKnobs kn = ce_knobs(pref);
  const int major = current_device_major();
  const bool sm90 = compiled_for(90) && (major == 0 || major >= 9);
  if (fwd && L.vec && sm90 && kn.path != 0 && N > 0) {
    const int64_t nv = (V + VEC - 1) / VEC;
    L.cluster = ce_cluster_geometry(nv, VEC, kn, L) && N * int64_t(L.cl_size) <= (int64_t(1) << 31) - 1;
    // Few rows: the chunked kernels spread them over the whole GPU (and the logits fit L2, so
    // their second read for a gradient is cheap); the cluster path wants >= 2 CTAs per SM.
    if (kn.path != 1 && N * int64_t(L.cl_size) < 2 * 132) L.cluster = false;
  }
  // The streaming forward: chunks of `iters` full iterations of ce_stream (default 4;
  // docs/benchmark-notes.md, cross-entropy: the streaming forward). Forward without a gradient on
  // rows of >= 16384 classes, by default when the chunks give at least two CTAs per SM; knob
  // path=stream forces it, path=cluster|chunked not.
  const int64_t span = int64_t(256) * 8 * VEC;  // one iteration: kThreads x 8 vectors
  int64_t slen = span * (kn.iters ? kn.iters : 4);
  while ((V + slen - 1) / slen > 65535) slen *= 2;
  slen = std::min<int64_t>(slen, (V + span - 1) / span * span);
  const bool stream_default = kn.path == -1 && V >= 16384 && N * ((V + slen - 1) / slen) >= 2 * 132;
  if (fwd && !grad && L.vec && desc.label_smoothing == 0.0 && (kn.path == 2 || stream_default) && N > 0) {
    L.stream = true;
    L.cluster = false;
    L.chunk_len = slen;
    L.chunks = int((V + slen - 1) / slen);
  }
  impl->workspace = loss::ce_workspace_bytes(L);
  impl->lse_dtype = x.dtype == DType::Float64 ? DType::Float64 : DType::Float32;

  KernelSku& k = impl->sku;
  k.category = "loss";
  k.op = op;
  k.layout = L.cluster ? "rows_cluster" : L.stream ? "rows_stream" : L.chunks > 1 ? "rows_chunked" : "rows";
  k.name = "loss." + op + "." + k.layout;
  k.dtypes = {x.dtype, x.dtype, t.dtype};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  const DType acc = x.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  pg.math = std::string(acc == DType::Float64 ? "f64 math" : (x.dtype == DType::Float32 ? "f32 math (libm expf)" :
                                                                   "f32 math with hardware exp")) +
            (L.cluster ? "; one read: a cluster of " + std::to_string(L.cl_size) + " CTA(s) x " +
                             std::to_string(L.cl_threads) + " threads x " + std::to_string(L.cl_k) +
                             " 16-byte vectors per row held in registers, partials combined in rank order through "
                             "distributed shared memory (rows_chunked kernels on a device below sm_90)"
                       : L.stream ? "; streaming forward: " + std::to_string(L.chunks) + " chunk(s) of " +
                                        std::to_string(L.chunk_len) + " per row, 256 threads x 8 16-byte loads in "
                                        "flight per iteration, (max, sum exp) partials combined in order"
                       : "; online max / sum over " + std::to_string(L.chunks) + " chunk(s) per row combined in order") +
            "; " +
            "lse saved in " + dtype_name(impl->lse_dtype) + "; mean / sum reduced by one block in a fixed order " +
            "(no atomics); 16-byte loads when row strides and pointers are 16-byte aligned";
  pg.compute_dtype = acc;
  pg.accumulator_dtype = acc;
  pg.deterministic = true;
  pg.bit_stable = true;
  return LossPlan(impl);
}

const KernelSku& LossPlan::sku() const { return impl_->sku; }
const AnyLossDescriptor& LossPlan::descriptor() const { return impl_->public_desc; }
const std::string& LossPlan::op() const { return impl_->desc.op; }
int64_t LossPlan::workspace_bytes() const { return impl_->workspace; }

void LossPlan::run(const LossTensors& T, void* workspace, int64_t workspace_size, StreamHandle stream) const {
  const Impl& I = *impl_;
  if (I.which == 1)
    return run_pointwise_loss(I.desc, I.pw, I.pw_grads, I.grads, I.workspace, T, workspace, workspace_size, stream);
  if (I.which == 2) return run_nll(I, T, workspace, workspace_size, stream);
  if (I.which == 3) return run_row_loss(I.desc, I.row, I.grads, I.workspace, T, workspace, workspace_size, stream);
  const LossSpec& d = I.desc;
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
  check_unselected(op, T, d.has_weight, grad, d.has_grad_loss);
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
  std::vector<NamedView> reads = {{"input", &T.input},
                                  {"target", &T.target},
                                  {"weight", d.has_weight ? &T.weight : nullptr},
                                  {"grad_loss", d.has_grad_loss ? &T.grad_loss : nullptr}};
  std::vector<NamedView> writes;
  if (fwd) {
    writes = {{"out", &T.out}, {"lse", &T.lse}};
    if (grad) writes.push_back({"grad_input", &T.grad_input});
    // The fused forward's cluster kernel reads a row's logits after other warps wrote gradients:
    // no overlap at all, in place included.
    check_aliasing(op, writes, reads);
  } else {
    reads.push_back({"lse", &T.lse});
    writes = {{"grad_input", &T.grad_input}};
    // The backward reads each logit and writes its gradient in the same thread: in place works.
    check_aliasing(op, writes, reads, {{&T.grad_input, &T.input}});
  }
  check_workspace(op, workspace, workspace_size, I.workspace, reads, writes);

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
  if (reinterpret_cast<uintptr_t>(L.x) % 16 || (grad && reinterpret_cast<uintptr_t>(L.grad) % 16)) {
    L.vec = false;
    L.cluster = false;
  }
  if (N == 0 && (!fwd || per_row)) return;
  DeviceGuard guard(device);
  loss::ce_launch(L, stream);
}

FamilyInfo loss_family_info() {
  FamilyInfo f{"loss", "LossPlan", "cross-entropy for large vocabularies (fused gradient, label smoothing, "
                                   "class weights, ignore_index), nll_loss and torch's pointwise losses (MSE, L1, "
                                   "Huber, smooth-L1, BCE, BCE-with-logits, KL, Poisson, Gaussian, ranking, "
                                   "hinge, soft-margin), the row losses (cosine embedding, multi margin, multilabel "
                                   "margin, multilabel soft margin, triplet margin), each with none / mean / sum and "
                                   "backward", {}};
  const std::vector<DType> fp = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
  f.ops.push_back(OpCoverage{"cross_entropy", "classification", fp, {"rows_cluster", "rows_stream", "rows", "rows_chunked"},
                               Backend::Bespoke, true});
  f.ops.push_back(OpCoverage{"nll_loss", "classification", fp, {"rows"}, Backend::Bespoke, true});
  add_pointwise_loss_ops(f);
  add_row_loss_ops(f);
  append_ctc_loss_coverage(f);  // cpp/src/loss_ctc.cpp
  return f;
}

}  // namespace baracuda
