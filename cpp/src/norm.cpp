// NormPlan: validation, kernel configuration, SKU, and the thin run().
#include "baracuda/norm.h"
#include "plan_util.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "norm/norm_launch.h"
#include "norm_tuning.h"

namespace baracuda {

namespace {

const DType kFloatDTypes[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};

bool is_norm_dtype(DType t) {
  for (DType d : kFloatDTypes)
    if (d == t) return true;
  return false;
}

DType stats_dtype(DType x) { return x == DType::Float64 ? DType::Float64 : DType::Float32; }

// The row stride of a [..., H] view whose leading dims address rows with one stride (of either
// sign), or nullopt. Size-1 dims are ignored; with no leading dim of size > 1 any stride works
// (returns H).
std::optional<int64_t> collapse_rows(const int64_t* shape, const int64_t* strides, int ndim) {
  const int64_t H = ndim ? shape[ndim - 1] : 1;
  bool found = false;
  int64_t rs = H, expect = 0;
  for (int d = ndim - 2; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (!found) {
      found = true;
      rs = strides[d];
    } else if (strides[d] != expect) {
      return std::nullopt;
    }
    expect = strides[d] * shape[d];
  }
  return rs;
}

bool overlaps(const TensorView& a, const TensorView& b) {
  if (!a.data || !b.data) return false;
  const auto ra = byte_range(a), rb = byte_range(b);
  return ra.first < rb.second && rb.first < ra.second;
}

}  // namespace

struct NormPlan::Impl {
  NormDescriptor desc;
  std::string op;
  bool layer = false, backward = false;
  int64_t rows = 0, H = 0;
  bool reg_ok = false;
  norm::Config reg, loop_vec, loop_scalar;
  norm::Config reg_fallback;  // reg on the cluster path: what runs on a device without clusters
  int64_t workspace = 0;
  KernelSku sku;
};

std::string NormDescriptor::str() const {
  std::ostringstream os;
  os << "NormDescriptor(" << op << ", x=" << x.str();
  os << ", weight=" << (weight ? dtype_name(*weight) : "none");
  os << ", bias=" << (bias ? dtype_name(*bias) : "none");
  os << ", residual=" << (residual ? "true" : "false") << ", eps=" << num_str(eps)
     << ", save_stats=" << (save_stats ? "true" : "false") << ")";
  return os.str();
}

NormPlan NormPlan::select(const NormDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  Impl& I = *impl;
  I.desc = desc;
  const std::string& op = desc.op;
  if (op == "rms_norm") { I.layer = false; I.backward = false; }
  else if (op == "layer_norm") { I.layer = true; I.backward = false; }
  else if (op == "rms_norm_backward") { I.layer = false; I.backward = true; }
  else if (op == "layer_norm_backward") { I.layer = true; I.backward = true; }
  else
    throw InvalidArgument("norm: unknown op '" + op +
                          "'; expected rms_norm, layer_norm, rms_norm_backward or layer_norm_backward");
  I.op = op;
  if (!pref.allows(Backend::Bespoke))
    throw Unsupported(op + ": the only backend for norm ops is 'bespoke', and the preference forbids it");

  // x: rank, shape, dtype, layout.
  const TensorSpec& x = desc.x;
  const int r = int(x.shape.size());
  if (r == 0) throw InvalidArgument(op + ": x is 0-d; expected at least one dimension (the normalized one)");
  if (r > kMaxRank)
    throw Unsupported(op + ": x has rank " + std::to_string(r) + "; at most " + std::to_string(kMaxRank) + " is supported");
  for (int64_t d : x.shape)
    if (d < 0) throw InvalidArgument(op + ": x has a negative dimension in shape " + shape_str(x.shape));
  if (!x.strides.empty() && x.strides.size() != x.shape.size())
    throw InvalidArgument(op + ": x has " + std::to_string(x.strides.size()) + " strides for rank " + std::to_string(r));
  if (!is_norm_dtype(x.dtype))
    throw InvalidDType(op + ": x is " + dtype_name(x.dtype) + "; supported: float32, float16, bfloat16, float64");
  auto param_dtype = [&](const std::optional<DType>& p, const char* name) {
    if (p && *p != x.dtype && *p != DType::Float32)
      throw InvalidDType(op + ": " + name + " is " + dtype_name(*p) + " but x is " + dtype_name(x.dtype) + "; " + name +
                         " must be " + dtype_name(x.dtype) + " or float32");
  };
  param_dtype(desc.weight, "weight");
  param_dtype(desc.bias, "bias");
  if (desc.bias && !I.layer)
    throw InvalidArgument(op + ": bias is given; RMSNorm takes no bias (use layer_norm for a bias)");
  if (!std::isfinite(desc.eps) || desc.eps < 0)
    throw InvalidArgument(op + ": eps must be a finite number >= 0, got " + num_str(desc.eps));
  if (I.backward && desc.save_stats)
    throw InvalidArgument(op + ": save_stats applies to the forward ops; the backward ops read the saved stats");

  I.H = x.shape[r - 1];
  I.rows = 1;
  for (int i = 0; i < r - 1; ++i) I.rows *= x.shape[i];
  if (I.H == 0 && desc.save_stats)
    throw InvalidArgument(op + ": x has an empty last dimension (shape " + shape_str(x.shape) +
                          "); statistics of empty rows are undefined, so save_stats needs H >= 1");
  const auto st = x.effective_strides();
  if (I.H > 1 && st[r - 1] != 1)
    throw Unsupported(op + ": x has stride " + std::to_string(st[r - 1]) +
                      " along its last (normalized) dimension; unit stride is required (pass a contiguous x)");
  const std::optional<int64_t> x_rs = collapse_rows(x.shape.data(), st.data(), r);
  if (!x_rs)
    throw Unsupported(op + ": x of shape " + shape_str(x.shape) + " and strides " + shape_str(st) +
                      " does not address its rows with one row stride; supported: contiguous rows or a slice of the "
                      "last dimension (pass a contiguous x)");
  if (*x_rs < 0)
    throw Unsupported(op + ": x of shape " + shape_str(x.shape) + " has strides " + shape_str(st) +
                      ": its rows run backwards (a negative row stride), which the row kernels do not take (pass a "
                      "contiguous x)");

  // Kernel configurations: register-resident (when the row fits and the run's pointers are
  // 16-byte aligned), looped with vectors (aligned, row too long), looped scalar (otherwise).
  // Tuning override (benchmark sweeps): BARACUDA_NORM_CFG / BARACUDA_NORM_BWD_CFG =
  // "tpr=256,items=2,rows=2[,xs=1]", forward "cluster=4,tpr=512,items=4" (the cluster path; cluster=1
  // forbids it); backward "cluster=8,tpr=256,items=4[,clusters=N]" (the cluster path with N clusters in
  // its persistent grid; cluster=1 forbids it); on the register path prefetch=1 / 0, regacc=1 / 0 (backward,
  // 16-bit) ask for / forbid the prefetching and register-accumulator kernels, pshared=1 / 2 (forward,
  // 16-bit, 1024 x 8) the last parameter in shared memory / weight and bias through a ring (backward cluster:
  // pshared=0 keeps the weight out of shared memory), spec=0 forbids the operand-specialized
  // ones; ignored when the kernel does not exist or the row does not fit. Backward, the dweight /
  // dbias finish: fty=N slices per block (1..32, a power of two), fpdl=0 / 1 / 2 without / with the
  // programmatic launch / with it triggered as the row kernel starts.
  norm::Override ov = norm::parse_override(
      tuning_knobs(op, pref.tuning, I.backward ? "BARACUDA_NORM_BWD_CFG" : "BARACUDA_NORM_CFG",
                   {"tpr", "threads", "items", "rows", "xs", "cluster", "clusters", "prefetch", "regacc", "spec",
                    "pshared", "fty", "fpdl"}));
  // The 16-bit LayerNorm forward at 1024 x 8 (H = 65536) keeps its last parameter resident in
  // shared memory (pshared=1) on devices of many bytes per SM cycle, the ring elsewhere (the same
  // bits either way; docs/benchmark-notes.md, norm: parameters in shared memory).
  if (!I.backward && I.layer && ov.pshared < 0 && norm::device_bytes_per_sm_cycle() >= norm::kHighBandwidthPerSmCycle)
    ov.pshared = 1;
  I.reg = norm::register_config(x.dtype, I.layer, I.backward, I.H, I.rows, &I.reg_ok, ov, true, desc.residual);
  if (I.backward && I.reg_ok && I.reg.path == norm::Path::Cluster && ov.clusters <= 0) {
    // The persistent cluster grid: clusters resident at once on this device; of 8-block clusters
    // two fewer than fit on devices of fewer bytes per SM cycle (the H100), all of them elsewhere
    // (docs/benchmark-notes.md, norm: backward cluster grid).
    const int fit = norm::bwd_cluster_resident(x.dtype, I.reg);
    const bool high_bw = norm::device_bytes_per_sm_cycle() >= norm::kHighBandwidthPerSmCycle;
    const int use = (I.reg.cluster == 8 && fit > 8 && !high_bw) ? fit - 2 : fit;
    if (use > 0) norm::set_bwd_clusters(I.reg, use, I.rows);
  }
  if (I.reg_ok && I.reg.param_smem) {  // only with the operands of the specialized kernels (launch_spec's rule)
    const bool w_same = desc.weight && *desc.weight == x.dtype;
    const bool b_same = I.backward || (desc.bias && *desc.bias == x.dtype);  // (the backward reads no bias)
    if (norm::operand_spec(I.layer, w_same, bool(desc.bias), b_same, desc.residual) == norm::kSpecGeneric) {
      I.reg.param_smem = 0;
      if (!I.backward) norm::finish_grid(I.reg, false, I.rows, x.dtype, I.layer);
    }
  }
  if (I.reg_ok && I.reg.path == norm::Path::Cluster)
    I.reg_fallback = norm::cluster_fallback_config(x.dtype, I.layer, I.H, I.rows, I.backward);
  I.loop_vec = norm::looped_config(x.dtype, I.backward, I.H, I.rows, true);
  I.loop_scalar = norm::looped_config(x.dtype, I.backward, I.H, I.rows, false);
  if (I.backward)
    for (norm::Config* c : {&I.reg, &I.loop_vec, &I.loop_scalar}) ov.apply_finish(*c);
  if (I.backward && (desc.weight || desc.bias)) {
    int64_t P = std::max(I.loop_vec.partials, I.loop_scalar.partials);
    if (I.reg_ok) P = std::max(P, I.reg.partials);
    const int64_t one = norm::partial_bytes(x.dtype, P, I.H);
    I.workspace = one * ((desc.weight ? 1 : 0) + (desc.bias ? 1 : 0));
  }
  if (pref.workspace_limit >= 0 && I.workspace > pref.workspace_limit)
    throw Unsupported(op + ": needs " + std::to_string(I.workspace) + " bytes of workspace for the grad_weight / "
                      "grad_bias partial sums; the preference allows " + std::to_string(pref.workspace_limit));

  // The SKU, from the configuration the aligned case runs.
  KernelSku& k = I.sku;
  k.category = "norm";
  k.op = op;
  const bool cluster = I.reg_ok && I.reg.path == norm::Path::Cluster;
  k.layout = cluster ? "row_cluster" : I.reg_ok ? "row_registers" : "row_looped";
  const norm::Config& c = I.reg_ok ? I.reg : I.loop_vec;
  k.name = "norm." + op + "." + k.layout + "." + (cluster ? "c" + std::to_string(c.cluster) : std::string()) + "t" +
           std::to_string(c.tpr);
  if (I.reg_ok) {
    k.name += "x" + std::to_string(c.items);
    if (c.rows > 1) k.name += "r" + std::to_string(c.rows);
    if (c.xs) k.name += "xs";
    if (c.regacc) k.name += "a";
    if (c.prefetch) k.name += "p";
    if (c.param_smem && !I.backward) k.name += c.param_smem == 1 ? "s" : "q";  // (backward cluster: no suffix)
  }
  k.dtypes.push_back(x.dtype);
  k.dtypes.push_back(x.dtype);
  if (desc.weight) k.dtypes.push_back(*desc.weight);
  if (desc.bias) k.dtypes.push_back(*desc.bias);
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  const bool half = x.dtype == DType::Float16 || x.dtype == DType::BFloat16;
  pg.compute_dtype = x.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  pg.accumulator_dtype = pg.compute_dtype;
  pg.math = std::string(dtype_name(pg.compute_dtype)) + " math" +
            (half ? std::string(", one rounding to ") + dtype_name(x.dtype) : std::string("")) +
            (I.layer ? "; mean, then the sum of squared deviations (two passes, not E[x^2] - E[x]^2)" : "") +
            "; row sums in a fixed order; correctly rounded 1/sqrt";
  if (!I.backward && desc.residual)
    pg.math += "; x + residual rounded once to " + std::string(dtype_name(x.dtype)) + " (= residual_out) is normalized";
  if (I.backward && (desc.weight || desc.bias))
    pg.math += "; grad_weight / grad_bias: per-block partial sums in " + std::string(dtype_name(pg.accumulator_dtype)) +
               ", added in a fixed order";
  if (I.reg_ok && I.reg.xs)
    pg.math += "; grad_x from the row held on chip (x in shared memory), grad_weight / grad_bias from a "
               "column-reduction pass over grad_out and x";
  if (cluster)
    pg.math += "; the row split over a thread-block cluster of " + std::to_string(c.cluster) +
               " blocks (sm_90), their partial sums combined in block-rank order (every block the same bits); "
               "before sm_90 the one-block register kernel or the looped kernel (same math, another summation order)";
  if (cluster && I.backward)
    pg.math += "; a persistent grid of " + std::to_string(c.partials) + " clusters, cluster c taking rows c, c + " +
               std::to_string(c.partials) + ", ...; grad_weight / grad_bias: each block adds its columns over its "
               "cluster's rows in order (one pass over grad_out and x), then the clusters' partial rows in order";
  if (I.reg_ok)
    pg.math += "; row in registers with 16-byte vectors when pointers and row strides are 16-byte aligned, else the "
               "looped kernel (same math, another summation order)";
  pg.deterministic = true;
  pg.bit_stable = true;
  return NormPlan(impl);
}

const KernelSku& NormPlan::sku() const { return impl_->sku; }
const NormDescriptor& NormPlan::descriptor() const { return impl_->desc; }
int64_t NormPlan::workspace_bytes() const { return impl_->workspace; }

void NormPlan::run(const NormTensors& t, void* workspace, int64_t workspace_size, StreamHandle stream) const {
  const Impl& I = *impl_;
  const NormDescriptor& D = I.desc;
  const std::string& op = I.op;
  const DType dt = D.x.dtype;
  const int r = int(D.x.shape.size());
  const int device = t.x.device;

  // Presence must match the plan (an empty tensor may have a null pointer: then it counts as present).
  auto require = [&](const TensorView& v, bool needed, const std::string& name, const std::string& why) {
    check_presence(op, v, needed, name, why);
  };
  auto same_device = [&](const TensorView& v, const std::string& name) { check_same_device(op, v, device, name); };
  check_view(op, "x", t.x, D.x, device, "x");  // x: exactly the descriptor's spec
  const int64_t x_rs = *collapse_rows(t.x.shape, t.x.strides, t.x.ndim);  // x matches the selected spec
  // Another [..., H] row tensor: x's shape and dtype, unit column stride, one row stride.
  auto row_tensor = [&](const TensorView& v, const std::string& name) -> int64_t {
    if (v.dtype != dt)
      throw InvalidDType(op + ": " + name + " is " + std::string(dtype_name(v.dtype)) + "; expected " + dtype_name(dt) +
                         " (x's dtype)");
    if (!shape_is(v, D.x.shape))
      throw InvalidArgument(op + ": " + name + " has shape " + shape_str(v.shape, v.ndim) + "; expected x's shape " +
                            shape_str(D.x.shape));
    same_device(v, name);
    if (I.H > 1 && v.strides[r - 1] != 1)
      throw Unsupported(op + ": " + name + " has stride " + std::to_string(v.strides[r - 1]) +
                        " along its last dimension; unit stride is required");
    const std::optional<int64_t> rs = collapse_rows(v.shape, v.strides, v.ndim);
    if (!rs)
      throw Unsupported(op + ": " + name + " with strides " + shape_str(v.strides, v.ndim) +
                        " does not address its rows with one row stride (pass a contiguous tensor)");
    if (*rs < 0)
      throw Unsupported(op + ": " + name + " with strides " + shape_str(v.strides, v.ndim) +
                        " runs its rows backwards (a negative row stride), which the row kernels do not take (pass a "
                        "contiguous tensor)");
    return *rs;
  };
  auto param = [&](const TensorView& v, const std::optional<DType>& want, const std::string& name) {
    check_feature_vector(op, v, *want, name, I.H, "x's last dimension", "the dtype the plan was selected for", device);
  };
  auto stats = [&](const TensorView& v, const std::string& name) {
    const DType sd = stats_dtype(dt);
    if (v.dtype != sd)
      throw InvalidDType(op + ": " + name + " is " + std::string(dtype_name(v.dtype)) + "; expected " + dtype_name(sd) +
                         " (stats are float32, float64 for float64 x)");
    if (v.numel() != I.rows)
      throw InvalidArgument(op + ": " + name + " has shape " + shape_str(v.shape, v.ndim) + " (" +
                            std::to_string(v.numel()) + " elements); expected one per row, " + std::to_string(I.rows) +
                            " (x's shape without the last dimension)");
    if (!v.is_contiguous()) throw InvalidArgument(op + ": " + name + " must be contiguous");
    same_device(v, name);
  };

  norm::NormLaunch L;
  L.layer = I.layer;
  L.backward = I.backward;
  L.dtype = dt;
  L.w_f32 = D.weight && *D.weight == DType::Float32 && dt != DType::Float32;
  L.b_f32 = D.bias && *D.bias == DType::Float32 && dt != DType::Float32;
  L.save_stats = D.save_stats;
  L.eps = D.eps;
  L.rows = I.rows;
  L.H = I.H;
  L.x = t.x.data;
  L.x_rs = x_rs;

  // (view, name) of every input and output, for the aliasing checks.
  std::vector<NamedView> ins, outs;
  ins.push_back({"x", &t.x});
  std::vector<std::pair<const TensorView*, const TensorView*>> in_place;  // (output, input) allowed as one view
  std::vector<int64_t> strides_to_align;

  if (!I.backward) {
    require(t.y, true, "y", "the forward ops write y");
    L.y = t.y.data;
    L.y_rs = row_tensor(t.y, "y");
    outs.push_back({"y", &t.y});
    in_place.push_back({&t.y, &t.x});
    require(t.weight, bool(D.weight), "weight", D.weight ? "the plan was selected with a weight" : "the plan was selected without a weight");
    if (D.weight) { param(t.weight, D.weight, "weight"); L.w = t.weight.data; ins.push_back({"weight", &t.weight}); }
    require(t.bias, bool(D.bias), "bias", D.bias ? "the plan was selected with a bias" : "the plan was selected without a bias");
    if (D.bias) { param(t.bias, D.bias, "bias"); L.b = t.bias.data; ins.push_back({"bias", &t.bias}); }
    const char* why_res = D.residual ? "the plan was selected with a residual (residual and residual_out go together)"
                                     : "the plan was selected without a residual";
    require(t.residual, D.residual, "residual", why_res);
    require(t.residual_out, D.residual, "residual_out", why_res);
    if (D.residual) {
      L.res = t.residual.data;
      L.res_rs = row_tensor(t.residual, "residual");
      L.res_out = t.residual_out.data;
      L.res_out_rs = row_tensor(t.residual_out, "residual_out");
      ins.push_back({"residual", &t.residual});
      outs.push_back({"residual_out", &t.residual_out});
      in_place.push_back({&t.residual_out, &t.residual});
      strides_to_align.insert(strides_to_align.end(), {L.res_rs, L.res_out_rs});
    }
    require(t.rstd, D.save_stats, "rstd", D.save_stats ? "the plan saves stats" : "the plan was selected without save_stats");
    require(t.mean, D.save_stats && I.layer, "mean",
            I.layer ? (D.save_stats ? "the plan saves stats" : "the plan was selected without save_stats")
                    : "RMSNorm saves no mean");
    if (D.save_stats) {
      stats(t.rstd, "rstd");
      L.rstd = t.rstd.data;
      outs.push_back({"rstd", &t.rstd});
      if (I.layer) { stats(t.mean, "mean"); L.mean = t.mean.data; outs.push_back({"mean", &t.mean}); }
    }
    strides_to_align.insert(strides_to_align.end(), {L.x_rs, L.y_rs});
  } else {
    require(t.grad_out, true, "grad_out", "the backward ops read grad_out");
    require(t.grad_x, true, "grad_x", "the backward ops write grad_x");
    L.gy = t.grad_out.data;
    L.gy_rs = row_tensor(t.grad_out, "grad_out");
    L.gx = t.grad_x.data;
    L.gx_rs = row_tensor(t.grad_x, "grad_x");
    ins.push_back({"grad_out", &t.grad_out});
    outs.push_back({"grad_x", &t.grad_x});
    require(t.rstd, true, "rstd", "the backward ops read the saved rstd");
    stats(t.rstd, "rstd");
    L.rstd = t.rstd.data;
    ins.push_back({"rstd", &t.rstd});
    require(t.mean, I.layer, "mean", I.layer ? "layer_norm_backward reads the saved mean" : "RMSNorm has no mean");
    if (I.layer) { stats(t.mean, "mean"); L.mean = t.mean.data; ins.push_back({"mean", &t.mean}); }
    require(t.weight, bool(D.weight), "weight", D.weight ? "the plan was selected with a weight" : "the plan was selected without a weight");
    require(t.grad_weight, bool(D.weight), "grad_weight",
            D.weight ? "the plan was selected with a weight" : "the plan was selected without a weight");
    if (D.weight) {
      param(t.weight, D.weight, "weight");
      param(t.grad_weight, D.weight, "grad_weight");
      L.w = t.weight.data;
      L.gw = t.grad_weight.data;
      ins.push_back({"weight", &t.weight});
      outs.push_back({"grad_weight", &t.grad_weight});
    }
    require(t.grad_bias, bool(D.bias), "grad_bias", D.bias ? "the plan was selected with a bias" : "the plan was selected without a bias");
    if (D.bias) {
      param(t.grad_bias, D.bias, "grad_bias");
      L.gb = t.grad_bias.data;
      outs.push_back({"grad_bias", &t.grad_bias});
    }
    require(t.grad_residual, D.residual, "grad_residual",
            D.residual ? "the plan was selected with a residual" : "the plan was selected without a residual");
    if (D.residual) {
      L.gres = t.grad_residual.data;
      L.gres_rs = row_tensor(t.grad_residual, "grad_residual");
      ins.push_back({"grad_residual", &t.grad_residual});
      in_place.push_back({&t.grad_x, &t.grad_residual});
      strides_to_align.push_back(L.gres_rs);
    }
    strides_to_align.insert(strides_to_align.end(), {L.x_rs, L.gy_rs, L.gx_rs});
  }

  // Aliasing: an output may be one named input itself (in place); any other overlap is refused.
  check_aliasing(op, outs, ins, in_place);
  check_workspace(op, workspace, workspace_size, I.workspace, ins, outs);

  // Path: the register kernel (or vectorized loop) needs 16-byte aligned pointers and row strides.
  const int V = norm::vec_width(dt);
  bool aligned = I.H % V == 0;
  const size_t es = dtype_size(dt);
  for (const auto& lst : {ins, outs})
    for (const auto& [name, v] : lst) {
      if (v == &t.rstd || v == &t.mean || v == &t.grad_weight || v == &t.grad_bias) continue;  // scalar accesses
      if (v->data && reinterpret_cast<uintptr_t>(v->data) % 16) aligned = false;
    }
  for (int64_t s : strides_to_align)
    if ((std::llabs(s) * int64_t(es)) % 16) aligned = false;
  L.cfg = (I.reg_ok && aligned) ? I.reg : (aligned ? I.loop_vec : I.loop_scalar);
  L.fallback = I.reg_fallback;
  L.workspace = workspace;
  L.bias_partial_offset = L.gw ? norm::partial_bytes(dt, L.cfg.partials, I.H) : 0;

  if (I.H == 0 || (I.rows == 0 && !I.backward)) return;
  DeviceGuard guard(device);
  norm::launch(L, stream);
}

void add_channel_norm_ops(FamilyInfo& f);

FamilyInfo norm_family_info() {
  const std::vector<DType> fp(std::begin(kFloatDTypes), std::end(kFloatDTypes));
  const std::vector<std::string> layouts = {"row_registers", "row_cluster", "row_looped"};
  FamilyInfo f{"norm", "NormPlan",
               "RMSNorm and LayerNorm over the last dimension (fused residual add, saved stats); GroupNorm, "
               "InstanceNorm and BatchNorm over [N, C, *spatial] (running stats); with backward",
               {}};
  f.ops.push_back(OpCoverage{"rms_norm", "forward", fp, layouts, Backend::Bespoke, true});
  f.ops.push_back(OpCoverage{"layer_norm", "forward", fp, layouts, Backend::Bespoke, true});
  add_channel_norm_ops(f);  // group_norm, instance_norm, batch_norm (norm_channel.cpp)
  return f;
}

}  // namespace baracuda
