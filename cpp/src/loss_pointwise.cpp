// The pointwise losses (MSE, L1, Huber, BCE, KL, ...): validation, broadcast geometry and SKU at
// select, the checks and launches of run (see loss_internal.h).
#include <algorithm>
#include <array>
#include <cstdint>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "loss/loss_launch.h"
#include "loss_internal.h"
#include "plan_util.h"

namespace baracuda {

using loss::Reduction;

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

bool pw_kind(const std::string& name, PwKind* out) {
  for (const auto& o : kPwOps)
    if (name == o.name) {
      if (out) *out = o.kind;
      return true;
    }
  return false;
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
  MergedDims<6> m;
  for (size_t i = 0; i < full.size(); ++i) {
    if (full[i] == 1) continue;
    std::array<int64_t, 6> s;
    for (int k = 0; k < 6; ++k) s[k] = slot_strides[k][i];
    m.push(full[i], s);
  }
  if (m.rank() == 0) m.push(1, {});
  if (m.rank() > loss::kPwMaxDims)
    throw Unsupported(op + ": the operands need " + std::to_string(m.rank()) + " dims after merging; at most " +
                      std::to_string(loss::kPwMaxDims) + " are supported; make them contiguous first");
  L.nd = m.rank();
  for (int d = 0; d < L.nd; ++d) {
    L.dims[d] = m.size[d];
    for (int k = 0; k < 6; ++k) L.st[k][d] = m.stride[d][k];
  }
}
}  // namespace

void select_pointwise_loss(const LossSpec& desc, const std::string& base, loss::PwLaunch& launch,
                           std::vector<loss::PwLaunch>& grad_launches, std::vector<GradRequest>& grads, KernelSku& sku,
                           int64_t& workspace) {
  const std::string& op = desc.op;
  const bool bwd = base != op;
  PwLaunch& L = launch;
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
    P.blocks = P.contig ? int(loss::pw_contig_blocks(n, x.dtype, current_device_sms()))
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
  workspace = 0;
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
    grads = resolve_wrt(desc, slot_names, slot_specs);
    for (const GradRequest& r : grads) {
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
        if (P.red_splits > 1) workspace = std::max(workspace, 256 + (P.red_splits * P.red_m * a + 255) / 256 * 256);
        reduce_note += "; the gradient w.r.t. " + r.name + " summed over its broadcast dims: " +
                       std::to_string(P.red_splits) + (P.red_cols ? " thread(s)" : " warp(s)") +
                       " per element in a fixed order" +
                       (P.rows ? " (16-byte vectors along the row when pointers are 16-byte aligned)" : "") +
                       (P.red_splits > 1 ? ", partials added in order by a second kernel" : "") + " (no atomics)";
      }
      grad_launches.push_back(P);
    }
    L = grad_launches[0];
  } else {
    slots[4] = strides_against(TensorSpec{full, x.dtype, {}}, full);  // out: contiguous broadcast shape
    merge_geometry(op, full, slots, L);
    set_blocks(L);
    set_rows(L);
    if (L.rows) L.blocks = int(loss::pw_contig_blocks(n, x.dtype, current_device_sms()));
    workspace = loss::pw_workspace_bytes(L);
  }

  KernelSku& k = sku;
  k.category = "loss";
  k.op = op;
  auto layout_of = [](const PwLaunch& P) {
    return std::string(P.reduce ? (P.rows ? "pointwise_reduce_rows" : "pointwise_reduce")
                       : P.contig ? "pointwise_contiguous" : P.rows ? "pointwise_rows" : "pointwise_strided");
  };
  k.layout = layout_of(L);
  std::vector<std::string> seen = {k.layout};
  for (size_t q = 1; q < grad_launches.size(); ++q) {
    const std::string lq = layout_of(grad_launches[q]);
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

// The rows path's vector operands (inner stride 1) need 16-byte aligned pointers.
namespace {

bool rows_aligned(const PwLaunch& P) {
  const void* ptrs[6] = {P.a, P.b, P.c, P.d, P.reduce ? nullptr : P.out,
                         P.backward && P.reduction == Reduction::None ? P.grad_loss : nullptr};
  for (int k = 0; k < 6; ++k)
    if (ptrs[k] && P.st[k][1] == 1 && reinterpret_cast<uintptr_t>(ptrs[k]) % 16) return false;
  return true;
}

}  // namespace

void run_pointwise_loss(const LossSpec& d, const loss::PwLaunch& launch,
                        const std::vector<loss::PwLaunch>& grad_launches, const std::vector<GradRequest>& grads,
                        int64_t workspace_need, const LossTensors& T, void* ws, int64_t wsn, StreamHandle stream) {
  const std::string& op = d.op;
  const int device = T.input.device;
  PwLaunch L = launch;
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
      const std::string nm = d.wrt.empty() ? std::string("grad_input") : "the gradient w.r.t. " + grads[r].name;
      check_view(op, nm, *gv[r], grads[r].spec, device, "input");
      any_reduce = any_reduce || grad_launches[r].reduce;
      writes.push_back({nm, gv[r]});
    }
    // Later launches read the inputs again, and a summed gradient is written once per output:
    // with several gradients or a summed one, no overlap at all. One elementwise gradient is
    // written by the thread that read its element: it may be one of the inputs (in place).
    if (gv.size() > 1 || any_reduce) check_aliasing(op, writes, reads);
    else if (!gv.empty()) check_aliasing(op, writes, reads, in_place_with_reads(gv[0]));
    check_workspace(op, ws, wsn, workspace_need, reads, writes);
    DeviceGuard guard(device);
    for (size_t r = 0; r < gv.size(); ++r) {
      PwLaunch P = grad_launches[r];
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
          throw Unsupported(op + ": the gradient w.r.t. " + grads[r].name + " of an empty batch is zero-filled, " +
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
    check_workspace(op, ws, wsn, L.reduction == Reduction::None ? 0 : workspace_need, reads, {{"out", &T.out}});
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

bool is_pointwise_loss(const std::string& base) { return pw_kind(base, nullptr); }

void append_pointwise_loss_names(std::string& list) {
  for (const auto& o : kPwOps) list += std::string(", ") + o.name;
}

void add_pointwise_loss_ops(FamilyInfo& f) {
  const std::vector<DType> fp = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
  for (const auto& o : kPwOps) {
    const bool cls = o.kind == PwKind::Bce || o.kind == PwKind::BceLogits || o.kind == PwKind::SoftMargin;
    const bool rank = o.kind == PwKind::MarginRanking || o.kind == PwKind::HingeEmbedding;
    const bool prob = o.kind == PwKind::KlDiv || o.kind == PwKind::PoissonNll || o.kind == PwKind::GaussianNll;
    f.ops.push_back(OpCoverage{o.name, cls ? "classification" : rank ? "ranking" : prob ? "probabilistic" : "regression",
                               fp, {"pointwise_contiguous", "pointwise_strided"}, Backend::Bespoke, true});
  }
}

}  // namespace baracuda
