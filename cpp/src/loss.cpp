// LossPlan: validation, geometry and SKU of cross-entropy (chunked / cluster paths), nll_loss and
// the pointwise losses; thin run().
#include "baracuda/loss.h"
#include "common/knobs.h"
#include "plan_util.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "loss/loss_launch.h"
#include "loss_rows.h"

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
  LossDescriptor desc;
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

std::string LossDescriptor::str() const {
  std::ostringstream os;
  os << "LossDescriptor(" << op << ", input=" << input.str() << ", target=" << target.str();
  if (has_weight) os << ", weight=" << weight.str();
  os << ", reduction=" << reduction << ", ignore_index=" << ignore_index << ", label_smoothing=" << label_smoothing;
  if (with_grad) os << ", with_grad";
  if (has_grad_loss) os << ", grad_loss";
  if (with_grad || op != "cross_entropy") os << ", grad_input=" << grad_input.str();
  for (size_t i = 0; i < extra.size(); ++i) os << ", extra" << i << "=" << extra[i].str();
  os << ", param=" << param << ", log_target=" << log_target << ", log_input=" << log_input << ", full=" << full;
  if (has_grad_loss) os << ", grad_loss_spec=" << grad_loss.str();
  os << ", p=" << p << ", eps=" << eps << ", swap=" << swap;
  if (!wrt.empty()) {
    os << ", wrt=[";
    for (size_t i = 0; i < wrt.size(); ++i) os << (i ? ", " : "") << wrt[i];
    os << "]";
  }
  for (size_t i = 0; i < grads.size(); ++i) os << ", grad" << i << "=" << grads[i].str();
  os << ")";
  return os.str();
}

// ---- pointwise losses and nll_loss ------------------------------------------------------------
namespace {
using loss::PwKind;
using loss::PwLaunch;
using loss::NllLaunch;

struct PwOpInfo {
  const char* name;
  PwKind kind;
};
constexpr PwOpInfo kPwOps[] = {
    {"mse_loss", PwKind::Mse},
    {"l1_loss", PwKind::L1},
    {"huber_loss", PwKind::Huber},
    {"smooth_l1_loss", PwKind::SmoothL1},
    {"binary_cross_entropy", PwKind::Bce},
    {"binary_cross_entropy_with_logits", PwKind::BceLogits},
    {"kl_div", PwKind::KlDiv},
    {"poisson_nll_loss", PwKind::PoissonNll},
    {"gaussian_nll_loss", PwKind::GaussianNll},
    {"margin_ranking_loss", PwKind::MarginRanking},
    {"hinge_embedding_loss", PwKind::HingeEmbedding},
    {"soft_margin_loss", PwKind::SoftMargin},
};
}  // namespace

static bool pw_kind(const std::string& name, PwKind* out) {
  for (const auto& o : kPwOps)
    if (name == o.name) {
      if (out) *out = o.kind;
      return true;
    }
  return false;
}
static std::string loss_op_list() {
  std::string s = "cross_entropy, nll_loss";
  for (const auto& o : kPwOps) s += std::string(", ") + o.name;
  for (const char* n : kRowLossNames) s += std::string(", ") + n;
  return s;
}

namespace {
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
// Class-index losses (cross-entropy, NLL): target [N] int64 / int32, optional weight [C] in the
// input's dtype.
void check_class_targets(const LossDescriptor& desc, int64_t N, int64_t C) {
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
// numpy / torch broadcasting of the operand shapes (right-aligned; 1 stretches).
std::vector<int64_t> broadcast_of(const std::string& op, const std::vector<const TensorSpec*>& specs,
                                  const std::vector<std::string>& names) {
  size_t rank = 0;
  for (auto* s : specs) rank = std::max(rank, s->shape.size());
  std::vector<int64_t> out(rank, 1);
  for (size_t k = 0; k < specs.size(); ++k) {
    const auto& sh = specs[k]->shape;
    for (size_t i = 0; i < sh.size(); ++i) {
      int64_t& o = out[rank - sh.size() + i];
      const int64_t v = sh[i];
      if (v < 0) throw InvalidArgument(op + ": " + names[k] + " has a negative dimension in " + shape_str(sh));
      if (o == 1) o = v;
      else if (v != 1 && v != o)
        throw InvalidArgument(op + ": " + names[k] + " of shape " + shape_str(sh) +
                              " does not broadcast with the other operands (to " + shape_str(out) +
                              "); expected equal sizes or 1 in each dimension");
    }
  }
  return out;
}
// Strides of `s` against the broadcast shape `full` (0 on broadcast dims).
std::vector<int64_t> strides_against(const TensorSpec& s, const std::vector<int64_t>& full) {
  std::vector<int64_t> st(full.size(), 0);
  const auto es = s.effective_strides();
  const size_t off = full.size() - s.shape.size();
  for (size_t i = 0; i < s.shape.size(); ++i) st[off + i] = s.shape[i] == 1 ? 0 : es[i];
  return st;
}
// Drops size-1 dims and merges neighbours that are contiguous for every slot into L.dims / L.st.
void merge_geometry(const std::string& op, const std::vector<int64_t>& full,
                    const std::vector<std::vector<int64_t>>& slot_strides, PwLaunch& L) {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> st(6);
  for (size_t i = 0; i < full.size(); ++i) {
    if (full[i] == 1) continue;
    const bool merge = !dims.empty() && [&] {
      for (int k = 0; k < 6; ++k)
        if (st[k].back() != slot_strides[k][i] * full[i]) return false;
      return true;
    }();
    if (merge) {
      dims.back() *= full[i];
      for (int k = 0; k < 6; ++k) st[k].back() = slot_strides[k][i];
    } else {
      dims.push_back(full[i]);
      for (int k = 0; k < 6; ++k) st[k].push_back(slot_strides[k][i]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (int k = 0; k < 6; ++k) st[k].push_back(0);
  }
  if (dims.size() > size_t(loss::kPwMaxDims))
    throw Unsupported(op + ": the operands need " + std::to_string(dims.size()) + " dims after merging; at most " +
                      std::to_string(loss::kPwMaxDims) + " are supported; make them contiguous first");
  L.nd = int(dims.size());
  for (int d = 0; d < L.nd; ++d) {
    L.dims[d] = dims[d];
    for (int k = 0; k < 6; ++k) L.st[k][d] = st[k][d];
  }
}
}  // namespace

static void select_pw(const LossDescriptor& desc, const std::string& base, LossPlan::Impl& I) {
  const std::string& op = desc.op;
  const bool bwd = base != op;
  PwLaunch& L = I.pw;
  I.which = 1;
  pw_kind(base, &L.kind);
  const TensorSpec& x = desc.input;
  if (!is_float_dtype(x.dtype))
    throw InvalidDType(op + ": input is " + std::string(dtype_name(x.dtype)) + "; supported: f16, bf16, f32, f64");
  L.dtype = x.dtype;
  L.backward = bwd;
  L.reduction = parse_reduction(op, desc.reduction, L.kind == PwKind::KlDiv);
  const bool batchmean = desc.reduction == "batchmean";
  // Operand slots: a input, b target, c weight / var / input2, d pos_weight.
  const TensorSpec* c = nullptr;
  const TensorSpec* dd = nullptr;
  std::string cname = "weight";
  const bool needs_extra = L.kind == PwKind::GaussianNll || L.kind == PwKind::MarginRanking;
  const size_t max_extra = needs_extra || L.kind == PwKind::BceLogits ? 1 : 0;
  if (desc.extra.size() > max_extra || (needs_extra && desc.extra.size() != 1))
    throw InvalidArgument(op + ": takes " + (needs_extra ? "1" : std::to_string(max_extra) + " or fewer") +
                          " extra operand(s) (" +
                          (L.kind == PwKind::GaussianNll ? "var" : L.kind == PwKind::MarginRanking ? "input2"
                           : L.kind == PwKind::BceLogits ? "pos_weight" : "none") + "), got " +
                          std::to_string(desc.extra.size()));
  const bool weighted_kind = L.kind == PwKind::Bce || L.kind == PwKind::BceLogits;
  if (desc.has_weight && !weighted_kind)
    throw InvalidArgument(op + ": takes no weight; weights are for binary_cross_entropy(_with_logits), nll_loss, "
                               "cross_entropy");
  TensorSpec var;  // gaussian: var with input's last dim dropped gets it back as 1
  if (desc.has_weight) c = &desc.weight;
  if (L.kind == PwKind::BceLogits && !desc.extra.empty()) dd = &desc.extra[0];
  if (L.kind == PwKind::MarginRanking) {
    c = &desc.extra[0];
    cname = "input2";
  }
  if (L.kind == PwKind::GaussianNll) {
    var = desc.extra[0];
    if (var.shape.size() + 1 == x.shape.size() && !x.shape.empty() &&
        std::equal(var.shape.begin(), var.shape.end(), x.shape.begin())) {  // torch: var.unsqueeze(-1)
      auto es = var.effective_strides();
      var.shape.push_back(1);
      es.push_back(1);
      var.strides = es;
    }
    c = &var;
    cname = "var";
  }
  std::vector<const TensorSpec*> specs = {&x, &desc.target};
  std::vector<std::string> names = {"input", "target"};
  if (c) {
    specs.push_back(c);
    names.push_back(cname);
  }
  if (dd) {
    specs.push_back(dd);
    names.push_back("pos_weight");
  }
  for (size_t k = 1; k < specs.size(); ++k)
    if (specs[k]->dtype != x.dtype)
      throw InvalidDType(op + ": " + names[k] + " is " + std::string(dtype_name(specs[k]->dtype)) + " but input is " +
                         dtype_name(x.dtype) + "; expected the input's dtype");
  if ((L.kind == PwKind::Bce || L.kind == PwKind::BceLogits) && desc.target.shape != x.shape)
    throw InvalidArgument(op + ": target must have the shape of input " + shape_str(x.shape) + ", got " +
                          shape_str(desc.target.shape) + " (as torch)");
  if ((L.kind == PwKind::Huber || L.kind == PwKind::SmoothL1) && !(desc.param >= 0.0))
    throw InvalidArgument(op + ": " + std::string(L.kind == PwKind::Huber ? "delta" : "beta") + " " +
                          std::to_string(desc.param) + " is negative; expected >= 0");
  if (L.kind == PwKind::Huber && desc.param == 0.0)
    throw InvalidArgument(op + ": delta must be > 0 (torch requires it)");
  if ((L.kind == PwKind::PoissonNll || L.kind == PwKind::GaussianNll) && !(desc.param >= 0.0))
    throw InvalidArgument(op + ": eps " + std::to_string(desc.param) + " is negative; expected >= 0");
  const std::vector<int64_t> full = broadcast_of(op, specs, names);
  int64_t n = 1;
  for (int64_t v : full) n *= v;
  L.n = n;
  if (batchmean && x.shape.empty()) throw InvalidArgument(op + ": reduction 'batchmean' needs an input of rank >= 1");
  L.divisor = batchmean ? double(x.shape[0]) : L.reduction == Reduction::Mean ? double(n) : 1.0;
  L.p0 = desc.param;
  L.f0 = L.kind == PwKind::KlDiv ? desc.log_target : desc.log_input;
  L.f1 = desc.full;

  std::vector<std::vector<int64_t>> slots(6, std::vector<int64_t>(full.size(), 0));
  for (size_t k = 0; k < specs.size(); ++k) {
    const int slot = k < 2 ? int(k) : (specs[k] == dd ? 3 : 2);
    slots[slot] = strides_against(*specs[k], full);
  }
  // Contiguous: one dense run with stride 1 for every operand the kernel reads or writes (no
  // broadcasting: a broadcast operand has stride 0 after merging).
  auto set_blocks = [&](PwLaunch& P) {
    P.contig = P.nd == 1 && P.dims[0] > 1 && [&] {
      for (int k = 0; k < 6; ++k) {
        const bool used = k < 2 || k == 4 || (k == 2 && c) || (k == 3 && dd) ||
                          (k == 5 && bwd && P.reduction == Reduction::None);
        if (used && P.st[k][0] != 1) return false;
      }
      return true;
    }();
    P.blocks = P.contig ? int(loss::pw_contig_blocks(n, x.dtype, loss::current_device_sms()))
                        : int(std::clamp<int64_t>((n + loss::kPwThreads * 4 - 1) / (loss::kPwThreads * 4), 1,
                                                  loss::kPwBlocks));
  };
  // Rows path: the shape as [rows, cols] with every operand the kernel reads (and an elementwise
  // output) dense along the row (unit inner stride, 16-byte row strides) or one value per row
  // (inner stride 0): 16-byte vectors along the rows. One merged dim is taken as one row. Rows
  // shorter than a vector stay on the strided kernels. `reduce` plans: only the gradient w.r.t. a
  // one-value-per-row operand (kept dim outer, summed dim inner).
  const int64_t vecw = 16 / int64_t(dtype_size(x.dtype));
  auto set_rows = [&](PwLaunch& P) {
    P.rows = false;
    if (P.contig || n == 0) return;
    PwLaunch Q = P;
    if (Q.nd == 1) {  // [1, n]
      Q.nd = 2;
      Q.dims[1] = Q.dims[0];
      Q.dims[0] = 1;
      for (int k = 0; k < 6; ++k) {
        Q.st[k][1] = Q.st[k][0];
        Q.st[k][0] = 0;
      }
    }
    if (Q.nd != 2 || Q.dims[1] < vecw) return;
    if (Q.reduce && (Q.red_cols || Q.dims[0] != Q.red_m || Q.dims[1] != Q.red_r)) return;
    for (int k = 0; k < 6; ++k) {
      const bool used = k < 2 || (k == 2 && c) || (k == 3 && dd) || (k == 4 && !Q.reduce) ||
                        (k == 5 && bwd && Q.reduction == Reduction::None);
      if (!used) continue;
      const int64_t in = Q.st[k][1];
      if (in != 0 && in != 1) return;
      if (k == 4 && in != 1) return;
      if (in == 1 && Q.dims[0] > 1 && Q.st[k][0] % vecw != 0) return;
    }
    Q.rows = true;
    P = Q;
  };
  I.workspace = 0;
  std::string reduce_note;
  if (bwd) {
    if (!desc.has_grad_loss) throw InvalidArgument(op + ": grad_loss is required (the gradient of the loss)");
    const TensorSpec& gl = desc.grad_loss;
    const std::vector<int64_t> want = L.reduction == Reduction::None ? full : std::vector<int64_t>{};
    if (gl.shape != want)
      throw InvalidArgument(op + ": grad_loss must have shape " + shape_str(want) + " (reduction " + desc.reduction +
                            "), got " + shape_str(gl.shape));
    if (gl.dtype != x.dtype)
      throw InvalidDType(op + ": grad_loss must be " + std::string(dtype_name(x.dtype)) + ", got " +
                         dtype_name(gl.dtype));
    if (L.reduction == Reduction::None) slots[5] = strides_against(gl, full);
    // The operands torch differentiates: input always; target except for hinge / soft margin
    // (torch has no derivative there); var of gaussian_nll_loss; input2 of margin_ranking_loss.
    const bool target_ok = L.kind != PwKind::HingeEmbedding && L.kind != PwKind::SoftMargin;
    std::vector<std::vector<std::string>> slot_names = {{"input"}, {"target"}, {}};
    std::vector<const TensorSpec*> slot_specs = {&x, target_ok ? &desc.target : nullptr, nullptr};
    if (L.kind == PwKind::MarginRanking) {
      slot_names[0].push_back("input1");
      slot_names[2] = {"input2"};
      slot_specs[2] = &desc.extra[0];
    } else if (L.kind == PwKind::GaussianNll) {
      slot_names[2] = {"var"};
      slot_specs[2] = &desc.extra[0];  // the caller's shape (the trailing 1 is added below)
    }
    if (desc.wrt.empty()) {  // the original API: grad_input, with its messages
      const TensorSpec& g = desc.grad_input;
      if (g.shape != x.shape)
        throw InvalidArgument(op + ": grad_input must have the shape of input " + shape_str(x.shape) + ", got " +
                              shape_str(g.shape));
      if (g.dtype != x.dtype)
        throw InvalidDType(op + ": grad_input must be " + std::string(dtype_name(x.dtype)) + ", got " +
                           dtype_name(g.dtype));
    }
    I.grads = resolve_wrt(desc, slot_names, slot_specs);
    for (const GradRequest& r : I.grads) {
      PwLaunch P = L;
      P.wrt = r.slot;
      TensorSpec gspec = r.spec;
      const TensorSpec* opnd = r.slot == 0 ? &x : r.slot == 1 ? &desc.target : c;
      if (r.slot == 2 && opnd->shape.size() != desc.extra[0].shape.size()) {  // gaussian var: the trailing 1
        gspec.strides = gspec.effective_strides();
        gspec.shape.push_back(1);
        gspec.strides.push_back(1);
      }
      auto sl = slots;
      sl[4] = strides_against(gspec, full);
      int64_t numel = 1;
      for (int64_t v : opnd->shape) numel *= v;
      if (numel == n) {  // not broadcast: one gradient element per loss element
        merge_geometry(op, full, sl, P);
        set_blocks(P);  // (an elementwise gradient needs no workspace)
        // The vector kernels differentiate w.r.t. input only; a loss odd in input - target (or
        // input1 - input2) has the other gradient = -(the input's): with a scalar upstream
        // gradient it runs there, negated once per kernel.
        const bool odd = (P.wrt == 1 && (L.kind == PwKind::Mse || L.kind == PwKind::L1 || L.kind == PwKind::Huber ||
                                         L.kind == PwKind::SmoothL1)) ||
                         (P.wrt == 2 && L.kind == PwKind::MarginRanking);
        if (odd && P.contig && P.reduction != Reduction::None) {
          P.wrt = 0;
          P.negate = true;
        }
        if (P.wrt != 0) P.contig = false;
        set_rows(P);  // any operand's gradient, broadcast operands along the rows included
      } else {
        // Summed over the dims the operand is broadcast along: kept dims first, then the summed
        // ones (no merging), so index j * R + r walks output j's terms.
        std::vector<size_t> kept, summed;
        const size_t off = full.size() - opnd->shape.size();
        for (size_t i = 0; i < full.size(); ++i) {
          if (full[i] == 1) continue;
          const int64_t sz = i >= off ? opnd->shape[i - off] : 1;
          (sz == full[i] ? kept : summed).push_back(i);
        }
        std::vector<size_t> order = kept;
        order.insert(order.end(), summed.begin(), summed.end());
        if (order.size() > size_t(loss::kPwMaxDims))
          throw Unsupported(op + ": the gradient w.r.t. " + r.name + " sums over a broadcast of " +
                            std::to_string(order.size()) + " dims; at most " + std::to_string(loss::kPwMaxDims) +
                            " are supported");
        P.reduce = true;
        P.contig = false;
        P.nd = std::max<int>(1, int(order.size()));
        P.red_m = 1;
        P.red_r = 1;
        for (size_t q = 0; q < order.size(); ++q) {
          P.dims[q] = full[order[q]];
          for (int k = 0; k < 6; ++k) P.st[k][q] = sl[size_t(k)][order[q]];
          (q < kept.size() ? P.red_m : P.red_r) *= full[order[q]];
        }
        if (order.empty()) {
          P.dims[0] = 1;
          for (int k = 0; k < 6; ++k) P.st[k][0] = 0;
        }
        // The innermost dim kept (a [D] target over [N, D]): a thread per output walks its terms
        // (adjacent threads read adjacent elements); else a warp per output, lanes along r.
        P.red_cols = !kept.empty() && !summed.empty() && kept.back() > summed.back();
        // One value per row (var [N] / [N, 1] against [N, D]; one kept and one summed dim, or
        // only a summed one): the rows kernel, 16-byte vectors along each row.
        if (order.size() <= 2 && kept.size() <= 1 && summed.size() == 1) set_rows(P);
        // Splits: enough warps (132 SMs x 64, each summing >= 512 terms) or threads (132 x 2048,
        // each >= 64 terms) for the GPU.
        const int64_t target_workers = P.red_cols ? 132 * 2048 : 132 * 64;
        const int64_t min_terms = P.red_cols ? 64 : 512;
        int64_t splits = std::clamp<int64_t>((target_workers + std::max<int64_t>(P.red_m, 1) - 1) /
                                                 std::max<int64_t>(P.red_m, 1),
                                             1, std::max<int64_t>(1, P.red_r / min_terms));
        splits = std::min<int64_t>(splits, 65535);
        P.red_chunk = std::max<int64_t>(1, (P.red_r + splits - 1) / splits);
        if (P.rows) P.red_chunk = (P.red_chunk + vecw - 1) / vecw * vecw;  // splits start on a vector
        P.red_splits = int(std::max<int64_t>(1, (P.red_r + P.red_chunk - 1) / P.red_chunk));
        const int64_t a = x.dtype == DType::Float64 ? 8 : 4;
        if (P.red_splits > 1) I.workspace = std::max(I.workspace, 256 + (P.red_splits * P.red_m * a + 255) / 256 * 256);
        reduce_note += "; the gradient w.r.t. " + r.name + " summed over its broadcast dims: " +
                       std::to_string(P.red_splits) + (P.red_cols ? " thread(s)" : " warp(s)") +
                       " per element in a fixed order" +
                       (P.rows ? " (16-byte vectors along the row when pointers are 16-byte aligned)" : "") +
                       (P.red_splits > 1 ? ", partials added in order by a second kernel" : "") + " (no atomics)";
      }
      I.pw_grads.push_back(P);
    }
    L = I.pw_grads[0];
  } else {
    slots[4] = strides_against(TensorSpec{full, x.dtype, {}}, full);  // out: contiguous broadcast shape
    merge_geometry(op, full, slots, L);
    set_blocks(L);
    set_rows(L);
    if (L.rows) L.blocks = int(loss::pw_contig_blocks(n, x.dtype, loss::current_device_sms()));
    I.workspace = loss::pw_workspace_bytes(L);
  }

  KernelSku& k = I.sku;
  k.category = "loss";
  k.op = op;
  auto layout_of = [](const PwLaunch& P) {
    return std::string(P.reduce ? (P.rows ? "pointwise_reduce_rows" : "pointwise_reduce")
                       : P.contig ? "pointwise_contiguous" : P.rows ? "pointwise_rows" : "pointwise_strided");
  };
  k.layout = layout_of(L);
  std::vector<std::string> seen = {k.layout};
  for (size_t q = 1; q < I.pw_grads.size(); ++q) {
    const std::string lq = layout_of(I.pw_grads[q]);
    if (std::find(seen.begin(), seen.end(), lq) == seen.end()) {
      seen.push_back(lq);
      k.layout += "+" + lq;
    }
  }
  k.name = "loss." + op + "." + k.layout;
  k.dtypes = {x.dtype, x.dtype, x.dtype};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  const DType acc = x.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  pg.math = std::string(acc == DType::Float64 ? "f64 math" : "f32 math (libm exp / log)") + ", rounded once; " +
            (bwd ? "gradient per element" : L.reduction == Reduction::None ? "loss per element" :
             "sum in two stages: " + std::to_string(L.blocks) + " block partial(s) in a fixed grid-stride order, "
             "then one block in order (no atomics)") +
            "; " + std::to_string(L.nd) + " merged dim(s) after broadcasting" +
            (L.contig ? "; contiguous: " + std::to_string(16 / dtype_size(x.dtype)) +
                            "-element 16-byte vector loads (strided kernels when a pointer is not 16-byte aligned)"
                      : std::string()) +
            (L.rows && !L.reduce ? "; rows: " + std::to_string(16 / dtype_size(x.dtype)) +
                                       "-element 16-byte vector loads along each row, one-value-per-row operands "
                                       "broadcast (strided kernels when a pointer is not 16-byte aligned)"
                                 : std::string()) +
            reduce_note;
  pg.compute_dtype = acc;
  pg.accumulator_dtype = acc;
  pg.deterministic = true;
  pg.bit_stable = true;
}

static void select_nll(const LossDescriptor& desc, LossPlan::Impl& I) {
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

namespace {

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
}  // namespace

void check_unselected(const std::string& op, const LossTensors& T, bool weight, bool grad_input, bool grad_loss) {
  const std::string why = "the plan was selected without it (select a descriptor that has it)";
  if (!weight) check_presence(op, T.weight, false, "weight", why);
  if (!grad_input) check_presence(op, T.grad_input, false, "grad_input", why);
  if (!grad_loss) check_presence(op, T.grad_loss, false, "grad_loss", why);
}

// The rows path's vector operands (inner stride 1) need 16-byte aligned pointers.
static bool rows_aligned(const PwLaunch& P) {
  const void* ptrs[6] = {P.a, P.b, P.c, P.d, P.reduce ? nullptr : P.out,
                         P.backward && P.reduction == Reduction::None ? P.grad_loss : nullptr};
  for (int k = 0; k < 6; ++k)
    if (ptrs[k] && P.st[k][1] == 1 && reinterpret_cast<uintptr_t>(ptrs[k]) % 16) return false;
  return true;
}

static void run_pw(const LossPlan::Impl& I, const LossTensors& T, void* ws, int64_t wsn, StreamHandle stream) {
  const LossDescriptor& d = I.desc;
  const std::string& op = d.op;
  const int device = T.input.device;
  PwLaunch L = I.pw;
  check_view(op, "input", T.input, d.input, device, "input");
  check_view(op, "target", T.target, d.target, device, "input");
  L.a = T.input.data;
  L.b = T.target.data;
  if (d.has_weight) {
    check_view(op, "weight", T.weight, d.weight, device, "input");
    L.c = T.weight.data;
  }
  if (T.extra.size() != d.extra.size())
    throw InvalidArgument(op + ": " + std::to_string(d.extra.size()) + " extra operand(s) in the descriptor, " +
                          std::to_string(T.extra.size()) + " given");
  check_unselected(op, T, d.has_weight, L.backward && d.wrt.empty(), L.backward);
  // What the kernels read: in place (an output that is one of these, same view) is taken only
  // where every element is read and written by one thread.
  std::vector<NamedView> reads = {
      {"input", &T.input}, {"target", &T.target}, {"weight", d.has_weight ? &T.weight : nullptr}};
  for (size_t i = 0; i < d.extra.size(); ++i) {
    const char* nm = L.kind == PwKind::GaussianNll ? "var" : L.kind == PwKind::MarginRanking ? "input2" : "pos_weight";
    check_view(op, nm, T.extra[i], d.extra[i], device, "input");
    if (L.kind == PwKind::BceLogits) L.d = T.extra[i].data;
    else L.c = T.extra[i].data;
    reads.push_back({nm, &T.extra[i]});
  }
  auto in_place_with_reads = [&](const TensorView* out) {
    std::vector<std::pair<const TensorView*, const TensorView*>> pairs;
    for (const auto& r : reads) pairs.push_back({out, r.view});
    return pairs;
  };
  if (L.backward) {
    check_view(op, "grad_loss", T.grad_loss, d.grad_loss, device, "input");
    L.grad_loss = T.grad_loss.data;
    reads.push_back({"grad_loss", &T.grad_loss});
    const std::vector<const TensorView*> gv = grad_views(d, T);
    bool any_reduce = false;
    std::vector<NamedView> writes;
    for (size_t r = 0; r < gv.size(); ++r) {
      const std::string nm = d.wrt.empty() ? std::string("grad_input") : "the gradient w.r.t. " + I.grads[r].name;
      check_view(op, nm, *gv[r], I.grads[r].spec, device, "input");
      any_reduce = any_reduce || I.pw_grads[r].reduce;
      writes.push_back({nm, gv[r]});
    }
    // Later launches read the inputs again, and a summed gradient is written once per output:
    // with several gradients or a summed one, no overlap at all. One elementwise gradient is
    // written by the thread that read its element: it may be one of the inputs (in place).
    if (gv.size() > 1 || any_reduce) check_aliasing(op, writes, reads);
    else if (!gv.empty()) check_aliasing(op, writes, reads, in_place_with_reads(gv[0]));
    check_workspace(op, ws, wsn, I.workspace, reads, writes);
    DeviceGuard guard(device);
    for (size_t r = 0; r < gv.size(); ++r) {
      PwLaunch P = I.pw_grads[r];
      P.a = L.a;
      P.b = L.b;
      P.c = L.c;
      P.d = L.d;
      P.grad_loss = L.grad_loss;
      P.out = gv[r]->data;
      P.workspace = ws;
      if (P.contig) {  // 16-byte vectors need 16-byte aligned pointers (a view like x[1:] is not)
        const void* ptrs[6] = {P.a, P.b, P.c, P.d, P.out, P.reduction == Reduction::None ? P.grad_loss : nullptr};
        for (const void* p : ptrs)
          if (p && reinterpret_cast<uintptr_t>(p) % 16) P.contig = false;
      }
      if (P.rows && !rows_aligned(P)) P.rows = false;
      if (P.reduce ? P.red_m == 0 : P.n == 0) continue;
      if (P.reduce && P.red_r == 0) {  // summed over an empty batch: zeros, as torch
        if (!fill_dense_bytes(*gv[r], 0, stream))
          throw Unsupported(op + ": the gradient w.r.t. " + I.grads[r].name + " of an empty batch is zero-filled, " +
                            "which needs a contiguous gradient tensor");
        continue;
      }
      loss::pw_launch(P, stream);
    }
    return;
  } else {
    check_small(op, "out", T.out, L.reduction == Reduction::None ? std::vector<int64_t>(T.out.shape, T.out.shape + T.out.ndim)
                                                                 : std::vector<int64_t>{},
                d.input.dtype, device);
    if (L.reduction == Reduction::None) {
      if (T.out.numel() != L.n)
        throw InvalidArgument(op + ": out has " + std::to_string(T.out.numel()) + " elements; the broadcast shape has " +
                              std::to_string(L.n));
      int64_t expect = 1;
      for (int i = T.out.ndim - 1; i >= 0; --i) {
        if (T.out.shape[i] != 1 && T.out.strides[i] != expect)
          throw InvalidArgument(op + ": out must be contiguous (row-major) for reduction 'none'");
        expect *= T.out.shape[i];
      }
    }
    L.out = T.out.data;
    // Per element (none) the thread that read an element writes its loss: in place works. A
    // reduced loss is written after every read.
    if (L.reduction == Reduction::None) check_aliasing(op, {{"out", &T.out}}, reads, in_place_with_reads(&T.out));
    else check_aliasing(op, {{"out", &T.out}}, reads);
    check_workspace(op, ws, wsn, L.reduction == Reduction::None ? 0 : I.workspace, reads, {{"out", &T.out}});
  }
  L.workspace = ws;
  if (L.contig) {  // 16-byte vectors need 16-byte aligned pointers (a view like x[1:] is not)
    const void* ptrs[6] = {L.a, L.b, L.c, L.d, L.out, L.reduction == Reduction::None ? L.grad_loss : nullptr};
    for (const void* p : ptrs)
      if (p && reinterpret_cast<uintptr_t>(p) % 16) L.contig = false;
  }
  if (L.rows && !rows_aligned(L)) L.rows = false;
  if (L.n == 0 && (L.backward || L.reduction == Reduction::None)) return;
  DeviceGuard guard(device);
  loss::pw_launch(L, stream);
}

static void run_nll(const LossPlan::Impl& I, const LossTensors& T, void* ws, int64_t wsn, StreamHandle stream) {
  const LossDescriptor& d = I.desc;
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

LossPlan LossPlan::select(const LossDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  impl->desc = desc;
  const std::string& op = desc.op;
  const std::string base = op.size() > 9 && op.compare(op.size() - 9, 9, "_backward") == 0 ? op.substr(0, op.size() - 9) : op;
  const bool known = base == "cross_entropy" || base == "nll_loss" || pw_kind(base, nullptr) || is_row_loss(base);
  if (!known)
    throw InvalidArgument("loss: unknown op '" + op + "'; expected one of " + loss_op_list() +
                          " (or <op>_backward)");
  if (!pref.allows(Backend::Bespoke))
    throw Unsupported(op + ": the only backend for losses is 'bespoke', and the preference forbids it");
  if ((!desc.wrt.empty() || !desc.grads.empty()) && (base == op || base == "cross_entropy" || base == "nll_loss"))
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
    select_pw(desc, base, *impl);
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
  const int major = loss::current_device_major();
  const bool sm90 = compiled_for(90) && (major == 0 || major >= 9);
  if (fwd && L.vec && sm90 && kn.path != 0 && N > 0) {
    const int64_t nv = (V + VEC - 1) / VEC;
    L.cluster = ce_cluster_geometry(nv, VEC, kn, L) && N * int64_t(L.cl_size) <= (int64_t(1) << 31) - 1;
    // Few rows: the chunked kernels spread them over the whole GPU (and the logits fit L2, so
    // their second read for a gradient is cheap); the cluster path wants >= 2 CTAs per SM.
    if (kn.path != 1 && N * int64_t(L.cl_size) < 2 * 132) L.cluster = false;
  }
  // The streaming forward: chunks of `iters` full iterations of ce_stream (default 4: on an
  // H200, 8192 x 128256 bf16 read at 4.4 TB/s = 105% of copy, 4.15x torch; the cluster path
  // 2.1 TB/s). Forward without a gradient on rows of >= 16384 classes, by default when the
  // chunks give at least two CTAs per SM; knob path=stream forces it, path=cluster|chunked not.
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
const LossDescriptor& LossPlan::descriptor() const { return impl_->desc; }
int64_t LossPlan::workspace_bytes() const { return impl_->workspace; }

void LossPlan::run(const LossTensors& T, void* workspace, int64_t workspace_size, StreamHandle stream) const {
  const Impl& I = *impl_;
  if (I.which == 1) return run_pw(I, T, workspace, workspace_size, stream);
  if (I.which == 2) return run_nll(I, T, workspace, workspace_size, stream);
  if (I.which == 3) return run_row_loss(I.desc, I.row, I.grads, I.workspace, T, workspace, workspace_size, stream);
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
  for (const auto& o : kPwOps) {
    const bool cls = o.kind == PwKind::Bce || o.kind == PwKind::BceLogits || o.kind == PwKind::SoftMargin;
    const bool rank = o.kind == PwKind::MarginRanking || o.kind == PwKind::HingeEmbedding;
    const bool prob = o.kind == PwKind::KlDiv || o.kind == PwKind::PoissonNll || o.kind == PwKind::GaussianNll;
    f.ops.push_back(OpCoverage{o.name, cls ? "classification" : rank ? "ranking" : prob ? "probabilistic" : "regression",
                               fp, {"pointwise_contiguous", "pointwise_strided"}, Backend::Bespoke, true});
  }
  add_row_loss_ops(f);
  append_ctc_loss_coverage(f);  // cpp/src/loss_ctc.cpp
  return f;
}

}  // namespace baracuda
