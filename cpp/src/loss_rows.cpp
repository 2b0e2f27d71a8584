// The row losses of the loss family (cosine_embedding_loss, multi_margin_loss,
// multilabel_margin_loss, multilabel_soft_margin_loss, triplet_margin_loss): validation, geometry,
// SKU and a thin run(); and the resolution of `wrt` shared with the pointwise losses.
#include "loss_internal.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "plan_util.h"

namespace baracuda {

using loss::Reduction;
using loss::RowKind;
using loss::RowLaunch;

// ---- wrt ------------------------------------------------------------------------------------------
std::vector<GradRequest> resolve_wrt(const LossSpec& desc, const std::vector<std::vector<std::string>>& slot_names,
                                     const std::vector<const TensorSpec*>& slot_specs) {
  const std::string& op = desc.op;
  std::vector<GradRequest> out;
  if (desc.wrt.empty()) {
    if (!desc.grads.empty())
      throw InvalidArgument(op + ": grads has " + std::to_string(desc.grads.size()) +
                            " spec(s) but wrt is empty; name the operand of each gradient in wrt");
    out.push_back(GradRequest{0, "input", desc.grad_input});
  } else {
    if (!desc.grads.empty() && desc.grads.size() != desc.wrt.size())
      throw InvalidArgument(op + ": wrt names " + std::to_string(desc.wrt.size()) + " operand(s) but grads has " +
                            std::to_string(desc.grads.size()) + " spec(s); expected one spec per wrt entry (or none)");
    std::string names;
    for (size_t k = 0; k < slot_names.size(); ++k)
      if (slot_specs[k])
        for (const auto& n : slot_names[k]) names += (names.empty() ? "" : ", ") + n;
    for (size_t i = 0; i < desc.wrt.size(); ++i) {
      const std::string& w = desc.wrt[i];
      int slot = -1;
      for (size_t k = 0; k < slot_names.size() && slot < 0; ++k)
        if (slot_specs[k] && std::find(slot_names[k].begin(), slot_names[k].end(), w) != slot_names[k].end())
          slot = int(k);
      if (slot < 0)
        throw InvalidArgument(op + ": wrt '" + w + "' is not a differentiable operand of this loss; expected one of " +
                              names);
      for (const auto& r : out)
        if (r.slot == slot) throw InvalidArgument(op + ": wrt names operand '" + w + "' twice");
      const TensorSpec& s = *slot_specs[size_t(slot)];
      out.push_back(GradRequest{slot, w, desc.grads.empty() ? TensorSpec{s.shape, s.dtype, {}} : desc.grads[i]});
    }
  }
  for (const auto& r : out) {
    const TensorSpec& s = *slot_specs[size_t(r.slot)];
    const std::string gname = "gradient w.r.t. " + r.name;
    if (r.spec.shape != s.shape)
      throw InvalidArgument(op + ": the " + gname + " must have the shape of " + r.name + " " + shape_str(s.shape) +
                            ", got " + shape_str(r.spec.shape));
    if (r.spec.dtype != s.dtype)
      throw InvalidDType(op + ": the " + gname + " must be " + std::string(dtype_name(s.dtype)) + ", got " +
                         dtype_name(r.spec.dtype));
    if (!r.spec.strides.empty() && r.spec.strides.size() != r.spec.shape.size())
      throw InvalidArgument(op + ": the " + gname + " has " + std::to_string(r.spec.strides.size()) +
                            " strides for rank " + std::to_string(r.spec.shape.size()));
    if (!non_overlapping(r.spec.shape, r.spec.effective_strides()))
      throw InvalidArgument(op + ": the " + gname + " has overlapping elements (strides " +
                            shape_str(r.spec.effective_strides()) + ")");
  }
  return out;
}

std::vector<const TensorView*> grad_views(const LossSpec& desc, const LossTensors& t) {
  std::vector<const TensorView*> v;
  if (desc.wrt.empty()) {
    v.push_back(&t.grad_input);
    return v;
  }
  if (t.grads.size() != desc.wrt.size())
    throw InvalidArgument(desc.op + ": " + std::to_string(desc.wrt.size()) + " gradient(s) in the descriptor (wrt), " +
                          std::to_string(t.grads.size()) + " given");
  for (const auto& g : t.grads) v.push_back(&g);
  return v;
}

// ---- row losses -----------------------------------------------------------------------------------
const char* const kRowLossNames[5] = {"cosine_embedding_loss", "multi_margin_loss", "multilabel_margin_loss",
                                      "multilabel_soft_margin_loss", "triplet_margin_loss"};

bool is_row_loss(const std::string& base) {
  for (const char* n : kRowLossNames)
    if (base == n) return true;
  return false;
}

namespace {
bool is_float(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
bool is_index(DType t) { return t == DType::Int64 || t == DType::Int32; }
Reduction reduction_of(const std::string& op, const std::string& r) {
  if (r == "none") return Reduction::None;
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  throw InvalidArgument(op + ": reduction '" + r + "' is not one of none, mean, sum");
}
RowKind kind_of(const std::string& base) {
  if (base == "cosine_embedding_loss") return RowKind::CosineEmbedding;
  if (base == "multi_margin_loss") return RowKind::MultiMargin;
  if (base == "multilabel_margin_loss") return RowKind::MultilabelMargin;
  if (base == "multilabel_soft_margin_loss") return RowKind::MultilabelSoftMargin;
  return RowKind::TripletMargin;
}
// (row stride, column stride) of a [N, D] or [D] spec.
std::pair<int64_t, int64_t> row_strides(const TensorSpec& s) {
  const auto st = s.effective_strides();
  if (s.shape.size() == 1) return {0, st[0]};
  return {st[0], st[1]};
}
// The loss's shape for reduction none.
std::vector<int64_t> none_shape(const LossSpec& d, RowKind k, int64_t n) {
  if (k == RowKind::MultiMargin) return d.target.shape.empty() ? std::vector<int64_t>{} : std::vector<int64_t>{n};
  return d.input.shape.size() == 2 ? std::vector<int64_t>{n} : std::vector<int64_t>{};
}
}  // namespace

void select_row_loss(const LossSpec& desc, const std::string& base, RowLaunch& L,
                     std::vector<GradRequest>& grads, KernelSku& sku, int64_t& workspace) {
  const std::string& op = desc.op;
  const bool bwd = base != op;
  L = RowLaunch{};
  grads.clear();
  L.kind = kind_of(base);
  L.backward = bwd;
  const TensorSpec& x = desc.input;
  const bool triplet = L.kind == RowKind::TripletMargin, cosine = L.kind == RowKind::CosineEmbedding;
  const std::string xname = cosine ? "input1" : triplet ? "anchor" : "input";
  if (!is_float(x.dtype))
    throw InvalidDType(op + ": " + xname + " is " + std::string(dtype_name(x.dtype)) + "; supported: f16, bf16, f32, f64");
  if (x.shape.size() != 1 && x.shape.size() != 2)
    throw InvalidArgument(op + ": " + xname + " must have shape [N, " + (cosine || triplet ? "D" : "C") + "] or [" +
                          (cosine || triplet ? "D" : "C") + "], got " + shape_str(x.shape) +
                          "; flatten the leading dims first");
  if (!x.strides.empty() && x.strides.size() != x.shape.size())
    throw InvalidArgument(op + ": " + xname + " has " + std::to_string(x.strides.size()) + " strides for rank " +
                          std::to_string(x.shape.size()));
  for (int64_t v : x.shape)
    if (v < 0) throw InvalidArgument(op + ": " + xname + " has a negative dimension in " + shape_str(x.shape));
  const bool batched = x.shape.size() == 2;
  const int64_t N = batched ? x.shape[0] : 1, D = x.shape.back();
  if (D == 0)
    throw InvalidArgument(op + ": " + xname + " has 0 " + (cosine || triplet ? "features" : "classes") + " (shape " +
                          shape_str(x.shape) + "); expected at least 1");
  if (N > (int64_t(1) << 31) - 1) throw Unsupported(op + ": more than 2^31 - 1 rows");
  L.dtype = x.dtype;
  L.n = N;
  L.d = D;
  L.reduction = reduction_of(op, desc.reduction);
  if (!std::isfinite(desc.param)) throw InvalidArgument(op + ": margin " + std::to_string(desc.param) + " is not finite");
  L.margin = desc.param;

  // Float operands: slot 0 input, 1 input2 / positive / target (soft margin), 2 negative.
  const TensorSpec* ops[3] = {&x, nullptr, nullptr};
  std::string names[3] = {xname, "", ""};
  const size_t want_extra = cosine ? 1 : triplet ? 1 : 0;
  if (desc.extra.size() != want_extra)
    throw InvalidArgument(op + ": takes " + std::to_string(want_extra) + " extra operand(s)" +
                          (cosine ? " (input2)" : triplet ? " (negative)" : "") + ", got " +
                          std::to_string(desc.extra.size()));
  if (cosine) {
    ops[1] = &desc.extra[0];
    names[1] = "input2";
  } else if (triplet) {
    ops[1] = &desc.target;
    names[1] = "positive";
    ops[2] = &desc.extra[0];
    names[2] = "negative";
  } else if (L.kind == RowKind::MultilabelSoftMargin) {
    ops[1] = &desc.target;
    names[1] = "target";
  }
  for (int k = 1; k < 3; ++k) {
    if (!ops[k]) continue;
    if (ops[k]->dtype != x.dtype)
      throw InvalidDType(op + ": " + names[k] + " is " + std::string(dtype_name(ops[k]->dtype)) + " but " + xname +
                         " is " + dtype_name(x.dtype) + "; expected " + xname + "'s dtype");
    if (ops[k]->shape != x.shape)
      throw InvalidArgument(op + ": " + names[k] + " must have the shape of " + xname + " " + shape_str(x.shape) +
                            ", got " + shape_str(ops[k]->shape) + " (broadcasting is not supported; expand it first)");
    if (!ops[k]->strides.empty() && ops[k]->strides.size() != ops[k]->shape.size())
      throw InvalidArgument(op + ": " + names[k] + " has " + std::to_string(ops[k]->strides.size()) +
                            " strides for rank " + std::to_string(ops[k]->shape.size()));
  }
  for (int k = 0; k < 3; ++k)
    if (ops[k]) std::tie(L.rs[k], L.cs[k]) = row_strides(*ops[k]);

  // The class / sign target.
  const TensorSpec& t = desc.target;
  L.target_dtype = t.dtype;
  if (cosine || L.kind == RowKind::MultiMargin) {
    if (cosine) {
      if (!is_index(t.dtype) && t.dtype != x.dtype)
        throw InvalidDType(op + ": target is " + std::string(dtype_name(t.dtype)) +
                           "; expected int64, int32 or input1's dtype (values +1 / -1)");
      const std::vector<int64_t> want = batched ? std::vector<int64_t>{N} : std::vector<int64_t>{};
      if (t.shape != want)
        throw InvalidArgument(op + ": target must have shape " + shape_str(want) + " (one +1 / -1 per " +
                              (batched ? "row" : "sample") + "), got " + shape_str(t.shape));
    } else {
      if (!is_index(t.dtype))
        throw InvalidDType(op + ": target is " + std::string(dtype_name(t.dtype)) +
                           "; expected int64 or int32 class indices");
      int64_t numel = 1;
      for (int64_t v : t.shape) numel *= v;
      if (t.shape.size() > 1 || numel != N)
        throw InvalidArgument(op + ": target must have shape [" + std::to_string(N) + "] (one class per row of input)" +
                              (batched ? "" : " or []") + ", got " + shape_str(t.shape));
    }
    const auto ts = t.effective_strides();
    L.t_rs = ts.empty() ? 0 : ts[0];
  } else if (L.kind == RowKind::MultilabelMargin) {
    if (!is_index(t.dtype))
      throw InvalidDType(op + ": target is " + std::string(dtype_name(t.dtype)) +
                         "; expected int64 or int32 class indices (-1 ends each row's list)");
    if (t.shape != x.shape)
      throw InvalidArgument(op + ": target must have the shape of input " + shape_str(x.shape) +
                            " (class indices, the first negative ends the list), got " + shape_str(t.shape));
    std::tie(L.t_rs, L.t_cs) = row_strides(t);
    const int64_t cap = x.dtype == DType::Float64 ? loss::kMultilabelMaxClassesF64 : loss::kMultilabelMaxClasses;
    if (D > cap)
      throw Unsupported(op + ": " + std::to_string(D) + " classes; at most " + std::to_string(cap) + " are supported for " +
                        dtype_name(x.dtype) + " (each row's target list lives in shared memory)");
  }

  // Class weights.
  const bool weighted_kind = L.kind == RowKind::MultiMargin || L.kind == RowKind::MultilabelSoftMargin;
  if (desc.has_weight) {
    if (!weighted_kind)
      throw InvalidArgument(op + ": takes no weight; class weights are for multi_margin_loss and "
                                 "multilabel_soft_margin_loss");
    if (desc.weight.shape != std::vector<int64_t>{D})
      throw InvalidArgument(op + ": weight must have shape [" + std::to_string(D) + "] (one per class), got " +
                            shape_str(desc.weight.shape));
    if (desc.weight.dtype != x.dtype)
      throw InvalidDType(op + ": weight is " + std::string(dtype_name(desc.weight.dtype)) + " but input is " +
                         dtype_name(x.dtype) + "; expected the input's dtype");
    L.w_cs = desc.weight.effective_strides()[0];
  }

  // Scalars.
  if (L.kind == RowKind::MultiMargin && desc.p != 1.0 && desc.p != 2.0)
    throw InvalidArgument(op + ": p " + std::to_string(desc.p) + " is not supported; expected 1 or 2 (as torch)");
  if (triplet) {
    if (!(desc.p > 0.0))
      throw InvalidArgument(op + ": p " + std::to_string(desc.p) + " is not a norm degree; expected p > 0");
    if (!std::isfinite(desc.p)) throw Unsupported(op + ": p = inf is not supported; expected a finite p > 0");
    if (!std::isfinite(desc.eps)) throw InvalidArgument(op + ": eps " + std::to_string(desc.eps) + " is not finite");
    L.eps = desc.eps;
    L.swap = desc.swap;
  } else if (desc.swap) {
    throw InvalidArgument(op + ": swap is for triplet_margin_loss only");
  }
  L.p = desc.p;
  if (cosine) L.eps = 1e-12;  // torch's EPSILON on the squared norms

  // Outputs.
  const std::vector<int64_t> loss_shape = none_shape(desc, L.kind, N);
  if (bwd) {
    if (!desc.has_grad_loss) throw InvalidArgument(op + ": grad_loss is required (the gradient of the loss)");
    const std::vector<int64_t> want = L.reduction == Reduction::None ? loss_shape : std::vector<int64_t>{};
    if (desc.grad_loss.shape != want)
      throw InvalidArgument(op + ": grad_loss must have shape " + shape_str(want) + " (reduction " + desc.reduction +
                            "), got " + shape_str(desc.grad_loss.shape));
    if (desc.grad_loss.dtype != x.dtype)
      throw InvalidDType(op + ": grad_loss must be " + std::string(dtype_name(x.dtype)) + ", got " +
                         dtype_name(desc.grad_loss.dtype));
    const auto gls = desc.grad_loss.effective_strides();
    L.gl_stride = gls.empty() ? 0 : gls[0];
    std::vector<std::vector<std::string>> slot_names;
    std::vector<const TensorSpec*> slot_specs;
    if (cosine) {
      slot_names = {{"input", "input1"}, {"input2"}};
      slot_specs = {ops[0], ops[1]};
    } else if (triplet) {
      slot_names = {{"input", "anchor"}, {"positive", "target"}, {"negative"}};
      slot_specs = {ops[0], ops[1], ops[2]};
    } else if (L.kind == RowKind::MultilabelSoftMargin) {
      slot_names = {{"input"}, {"target"}};
      slot_specs = {ops[0], ops[1]};
    } else {
      slot_names = {{"input"}};
      slot_specs = {ops[0]};
    }
    grads = resolve_wrt(desc, slot_names, slot_specs);
    for (const GradRequest& r : grads) {
      L.want[r.slot] = true;
      std::tie(L.grs[r.slot], L.gcs[r.slot]) = row_strides(r.spec);
    }
  }

  // Geometry: a warp per row up to 1024 elements (up to kRowWarpMaxD with many rows), a block
  // above; 16-byte vectors when every operand the kernel touches has unit column stride and
  // 16-byte row strides.
  const int64_t VEC = 16 / int64_t(dtype_size(x.dtype));
  // (Triplet's backward, register-heavy, measured slower still with a block per row: H100,
  // [65536, 2048] bf16 forward + backward 4093 us against 2873 us with a warp per row.)
  const bool warp_rows = D <= 1024 || (D <= loss::kRowWarpMaxD && N >= loss::kRowWarpMinRows);
  L.group = warp_rows ? 32 : loss::kRowThreads;
  bool vec = L.kind != RowKind::MultilabelMargin && D >= VEC;
  auto fits = [&](int64_t rs, int64_t cs) { return (cs == 1 || D == 1) && (N == 1 || rs % VEC == 0); };
  for (int k = 0; k < 3; ++k) {
    if (ops[k] && !fits(L.rs[k], L.cs[k])) vec = false;
    if (L.want[k] && !fits(L.grs[k], L.gcs[k])) vec = false;
  }
  L.vec = vec ? int(VEC) : 1;
  if (L.kind == RowKind::MultilabelMargin) L.group = D <= loss::kMultilabelWarpMaxClasses ? 32 : loss::kRowThreads;
  workspace = loss::row_workspace_bytes(L);

  sku.category = "loss";
  sku.op = op;
  const bool mlm = L.kind == RowKind::MultilabelMargin;
  sku.layout = mlm && L.group != 32 ? "rows_shared" : L.group == 32 ? "rows_warp" : "rows_block";
  sku.name = "loss." + op + "." + sku.layout;
  sku.dtypes = {x.dtype, x.dtype, t.dtype};
  sku.arch = compiled_archs();
  sku.backend = Backend::Bespoke;
  auto& pg = sku.precision;
  const DType acc = x.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  std::ostringstream m;
  m << (acc == DType::Float64 ? "f64 math" : "f32 math") << ", rounded once; ";
  if (mlm && L.group == 32)
    m << "one warp per row, the row and its target list in registers (lane l: classes l, l + 32, ..), the "
         "loss terms in target-list order per lane then a fixed shuffle tree, counts in integers (exact)";
  else if (mlm)
    m << "one 256-thread block per row, the row's target list and a class bitmap in shared memory, per-target "
         "counts by integer shared atomics (exact)";
  else
    m << (L.group == 32 ? "one warp per row" : "one 256-thread block per row") << ", the row's sums in a fixed order ("
      << (L.vec > 1 ? std::to_string(L.vec) + "-element 16-byte vector loads when pointers are 16-byte aligned"
                    : std::string("one element per load"))
      << ")";
  m << (bwd ? "; gradients per element from the row's sums"
            : L.reduction == Reduction::None ? "; loss per row"
                                             : "; mean / sum of the per-row losses by one block in a fixed order (no atomics)");
  pg.math = m.str();
  pg.compute_dtype = acc;
  pg.accumulator_dtype = acc;
  pg.deterministic = true;
  pg.bit_stable = true;
}

void run_row_loss(const LossSpec& d, const RowLaunch& L0, const std::vector<GradRequest>& grads, int64_t need,
                  const LossTensors& T, void* ws, int64_t wsn, StreamHandle stream) {
  const std::string& op = d.op;
  const int device = T.input.device;
  RowLaunch L = L0;
  const bool cosine = L.kind == RowKind::CosineEmbedding, triplet = L.kind == RowKind::TripletMargin;
  const std::string xname = cosine ? "input1" : triplet ? "anchor" : "input";
  check_view(op, xname, T.input, d.input, device, xname.c_str());
  check_view(op, triplet ? "positive" : "target", T.target, d.target, device, xname.c_str());
  if (T.extra.size() != d.extra.size())
    throw InvalidArgument(op + ": " + std::to_string(d.extra.size()) + " extra operand(s) in the descriptor, " +
                          std::to_string(T.extra.size()) + " given");
  check_unselected(op, T, d.has_weight, L.backward && d.wrt.empty(), L.backward);
  std::vector<NamedView> inputs = {{xname, &T.input}, {triplet ? "positive" : "target", &T.target}};
  L.x[0] = T.input.data;
  L.target = T.target.data;
  if (cosine || triplet) {
    check_view(op, cosine ? "input2" : "negative", T.extra[0], d.extra[0], device, xname.c_str());
    inputs.push_back({cosine ? "input2" : "negative", &T.extra[0]});
    if (cosine) L.x[1] = T.extra[0].data;
    else {
      L.x[1] = T.target.data;
      L.x[2] = T.extra[0].data;
    }
  }
  if (L.kind == RowKind::MultilabelSoftMargin) L.x[1] = T.target.data;
  if (d.has_weight) {
    check_view(op, "weight", T.weight, d.weight, device, xname.c_str());
    L.weight = T.weight.data;
    inputs.push_back({"weight", &T.weight});
  }
  std::vector<int64_t> loss_shape = none_shape(d, L.kind, L.n);
  if (L.reduction != Reduction::None) loss_shape.clear();
  if (L.backward) {
    check_view(op, "grad_loss", T.grad_loss, d.grad_loss, device, xname.c_str());
    L.grad_loss = T.grad_loss.data;
    const std::vector<const TensorView*> gv = grad_views(d, T);
    std::vector<NamedView> outs;
    for (size_t r = 0; r < gv.size(); ++r) {
      const GradRequest& q = grads[r];
      const std::string nm = "gradient w.r.t. " + q.name;
      check_view(op, nm, *gv[r], q.spec, device, xname.c_str());
      L.grad[q.slot] = gv[r]->data;
      outs.push_back({nm, gv[r]});
    }
    // The kernels read the inputs again after writing gradients (and grad_loss once per row):
    // no overlap between the two.
    inputs.push_back({"grad_loss", &T.grad_loss});
    check_aliasing(op, outs, inputs);
  } else {
    const TensorView& o = T.out;
    if (o.dtype != d.input.dtype)
      throw InvalidDType(op + ": out must be " + std::string(dtype_name(d.input.dtype)) + ", got " + dtype_name(o.dtype));
    bool ok = size_t(o.ndim) == loss_shape.size();
    for (int i = 0; ok && i < o.ndim; ++i) ok = o.shape[i] == loss_shape[size_t(i)];
    if (!ok)
      throw InvalidArgument(op + ": out must have shape " + shape_str(loss_shape) + " (reduction " + d.reduction +
                            "), got " + shape_str(o.shape, o.ndim));
    if (o.data == nullptr && o.numel() > 0) throw InvalidArgument(op + ": out has a null data pointer");
    if (o.device != device)
      throw InvalidArgument(op + ": out is on cuda:" + std::to_string(o.device) + " but " + xname + " is on cuda:" +
                            std::to_string(device));
    check_aliasing(op, {{"out", &o}}, inputs);
    L.out = o.data;
    L.out_stride = o.ndim == 1 ? o.strides[0] : 0;
    check_workspace(op, ws, wsn, L.reduction == Reduction::None ? 0 : need, inputs, {{"out", &o}});
    L.workspace = ws;
  }
  if (L.vec > 1) {  // 16-byte vectors need 16-byte aligned rows
    for (int k = 0; k < 3; ++k) {
      if (L.x[k] && reinterpret_cast<uintptr_t>(L.x[k]) % 16) L.vec = 1;
      if (L.want[k] && L.grad[k] && reinterpret_cast<uintptr_t>(L.grad[k]) % 16) L.vec = 1;
    }
  }
  if (L.n == 0 && (L.backward || L.reduction == Reduction::None)) return;
  DeviceGuard guard(device);
  loss::row_launch(L, stream);
}

void add_row_loss_ops(FamilyInfo& f) {
  const std::vector<DType> fp = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
  f.ops.push_back(OpCoverage{"cosine_embedding_loss", "embedding", fp, {"rows_warp", "rows_block"}, Backend::Bespoke, true});
  f.ops.push_back(OpCoverage{"multi_margin_loss", "classification", fp, {"rows_warp", "rows_block"}, Backend::Bespoke, true});
  f.ops.push_back(OpCoverage{"multilabel_margin_loss", "classification", fp, {"rows_shared"}, Backend::Bespoke, true});
  f.ops.push_back(OpCoverage{"multilabel_soft_margin_loss", "classification", fp, {"rows_warp", "rows_block"},
                             Backend::Bespoke, true});
  f.ops.push_back(OpCoverage{"triplet_margin_loss", "embedding", fp, {"rows_warp", "rows_block"}, Backend::Bespoke, true});
}

}  // namespace baracuda
