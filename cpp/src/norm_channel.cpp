// ChannelNormPlan (GroupNorm / InstanceNorm / BatchNorm): validation, partition, SKU, thin run().
#include <cmath>
#include <cstring>
#include <sstream>

#include <cuda_runtime.h>

#include "baracuda/errors.h"
#include "baracuda/norm.h"
#include "baracuda/registry.h"
#include "device_guard.h"
#include "norm/channel_norm_launch.h"
#include "plan_util.h"

namespace baracuda {

namespace {

bool is_float_dtype(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16 || t == DType::Float64;
}
DType stats_dtype_of(DType x) { return x == DType::Float64 ? DType::Float64 : DType::Float32; }

// [N, C, *spatial] -> element strides of (n, c, s), of either sign; false when the spatial dims do
// not collapse to one stride. Size-1 dims take any stride; S <= 1 gives s-stride 1.
bool collapse_ncs(const int64_t* shape, const int64_t* strides, int r, int64_t out[3]) {
  out[0] = shape[0] == 1 ? 0 : strides[0];
  out[1] = shape[1] == 1 ? 0 : strides[1];
  bool found = false;
  int64_t ss = 1, expect = 0;
  for (int d = r - 1; d >= 2; --d) {
    if (shape[d] == 1) continue;
    if (!found) {
      found = true;
      ss = strides[d];
    } else if (strides[d] != expect) {
      return false;
    }
    expect = strides[d] * shape[d];
  }
  out[2] = ss;
  return true;
}

bool overlap(const TensorView& a, const TensorView& b) {
  if (!a.data || !b.data) return false;
  return ranges_overlap(byte_range(a), byte_range(b));
}

}  // namespace

struct ChannelNormPlan::Impl {
  ChannelNormDescriptor desc;
  std::string op;
  norm::ChanMode mode = norm::ChanMode::Forward;
  bool backward = false, per_channel = false;
  bool merge_n = false;  // per-channel stats of [N, C]: run as [1, C, N]
  // Per-channel stats of channels-last [N, C, S] (S > 1): the N x S rows run as one range
  // [1, C, N * S], so that the column partition is not cut at every sample (N x 49 rows of
  // 7 x 7 maps would be N short tasks per column tile).
  bool flat_rows = false;
  // Per-channel stats of NC* x with small planes (S < kFoldPlaneMax): run as channels-last columns
  // [1, C * S, N] (norm::ChanNormLaunch::fold) when every operand allows it at run time (spatial
  // stride 1, channel stride S, 16-byte vectors); fold_part is that view's partition (the
  // workspace covers both it and `part`, the per-plane fallback).
  bool fold = false;
  norm::ChanPartition fold_part;
  int64_t N = 0, C = 0, S = 0, G = 1, units = 0;
  norm::ChanPartition part;
  int64_t workspace = 0;
  KernelSku sku;
};

std::string ChannelNormDescriptor::str() const {
  std::ostringstream os;
  os << "ChannelNormDescriptor(" << op << ", x=" << x.str() << ", num_groups=" << num_groups;
  os << ", weight=" << (weight ? dtype_name(*weight) : "none");
  os << ", bias=" << (bias ? dtype_name(*bias) : "none");
  os << ", running=" << (running ? dtype_name(*running) : "none");
  os << ", training=" << (training ? "true" : "false") << ", momentum=" << num_str(momentum)
     << ", eps=" << num_str(eps) << ", save_stats=" << (save_stats ? "true" : "false") << ")";
  return os.str();
}

ChannelNormPlan ChannelNormPlan::select(const ChannelNormDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  Impl& I = *impl;
  I.desc = desc;
  const std::string& op = desc.op;
  std::string base = op;
  I.backward = op.size() > 9 && op.compare(op.size() - 9, 9, "_backward") == 0;
  if (I.backward) base = op.substr(0, op.size() - 9);
  if (base != "group_norm" && base != "instance_norm" && base != "batch_norm")
    throw InvalidArgument("norm: unknown op '" + op +
                          "'; expected group_norm, instance_norm, batch_norm or one of them with _backward");
  I.op = op;
  if (!pref.allows(Backend::Bespoke))
    throw Unsupported(op + ": the only backend for norm ops is 'bespoke', and the preference forbids it");

  const TensorSpec& x = desc.x;
  const int r = int(x.shape.size());
  if (r < 2)
    throw InvalidArgument(op + ": x has shape " + shape_str(x.shape) +
                          "; expected [N, C, *spatial] (at least 2 dimensions)");
  if (r > kMaxRank)
    throw Unsupported(op + ": x has rank " + std::to_string(r) + "; at most " + std::to_string(kMaxRank) + " is supported");
  for (int64_t d : x.shape)
    if (d < 0) throw InvalidArgument(op + ": x has a negative dimension in shape " + shape_str(x.shape));
  if (!x.strides.empty() && x.strides.size() != x.shape.size())
    throw InvalidArgument(op + ": x has " + std::to_string(x.strides.size()) + " strides for rank " + std::to_string(r));
  if (!is_float_dtype(x.dtype))
    throw InvalidDType(op + ": x is " + dtype_name(x.dtype) + "; supported: float32, float16, bfloat16, float64");
  auto param_dtype = [&](const std::optional<DType>& p, const std::string& name) {
    if (p && *p != x.dtype && *p != DType::Float32)
      throw InvalidDType(op + ": " + name + " is " + dtype_name(*p) + " but x is " + dtype_name(x.dtype) + "; " + name +
                         " must be " + dtype_name(x.dtype) + " or float32");
  };
  param_dtype(desc.weight, "weight");
  param_dtype(desc.bias, "bias");
  param_dtype(desc.running, "running_mean / running_var");
  if (!std::isfinite(desc.eps) || desc.eps < 0)
    throw InvalidArgument(op + ": eps must be a finite number >= 0, got " + num_str(desc.eps));
  if (!std::isfinite(desc.momentum))
    throw InvalidArgument(op + ": momentum must be a finite number, got " + num_str(desc.momentum) +
                          " (momentum=None, the cumulative average, is not supported)");

  I.N = x.shape[0];
  I.C = x.shape[1];
  I.S = 1;
  for (int d = 2; d < r; ++d) I.S *= x.shape[d];
  const bool empty = I.N == 0 || I.C == 0 || I.S == 0;

  // Mode and statistic units.
  if (base == "group_norm") {
    if (desc.num_groups < 1)
      throw InvalidArgument(op + ": num_groups is " + std::to_string(desc.num_groups) + "; expected >= 1");
    if (I.C % desc.num_groups != 0)
      throw InvalidArgument(op + ": num_groups " + std::to_string(desc.num_groups) + " does not divide the " +
                            std::to_string(I.C) + " channels of x (shape " + shape_str(x.shape) + ")");
    if (desc.running)
      throw InvalidArgument(op + ": running stats are given; group_norm keeps none (use instance_norm or batch_norm)");
    if (!desc.training)
      throw InvalidArgument(op + ": training=false; group_norm always normalizes with the input's statistics");
    I.G = desc.num_groups;
  } else {
    if (desc.num_groups != 0)
      throw InvalidArgument(op + ": num_groups is " + std::to_string(desc.num_groups) + "; only group_norm takes "
                            "num_groups (pass 0)");
    I.G = std::max<int64_t>(I.C, 1);
  }
  const bool instance = base == "instance_norm";
  const bool batch = base == "batch_norm";
  const bool running_stats = (batch || instance) && !desc.training;  // normalize with running stats
  if (running_stats && !desc.running)
    throw InvalidArgument(op + ": " + (instance ? "use_input_stats=False (training=false)" : "training=false") +
                          " needs running_mean and running_var (the statistics it normalizes with)");
  if (I.backward && instance && !desc.training)
    throw InvalidArgument(op + ": training=false (use_input_stats=False) normalizes with running stats; its backward "
                          "is batch_norm_backward with training=false");
  if (I.backward && desc.save_stats)
    throw InvalidArgument(op + ": save_stats applies to the forward ops; the backward ops read the saved stats");
  if (running_stats && desc.save_stats)
    throw InvalidArgument(op + ": save_stats with training=false; there are no batch statistics to save (the "
                          "backward of inference reads running_mean / running_var)");
  if (I.backward && desc.training && desc.running)
    throw InvalidArgument(op + ": running stats are given to a training backward; it reads the saved mean / rstd");
  if (!I.backward && desc.training && batch && !empty && I.N * I.S == 1)
    throw InvalidArgument(op + ": expected more than 1 value per channel when training, got x of shape " +
                          shape_str(x.shape) + " (one value per channel: the batch variance is undefined)");
  if (!I.backward && desc.training && instance && !empty && I.S == 1)
    throw InvalidArgument(op + ": expected more than 1 spatial element when training (use_input_stats), got x of "
                          "shape " + shape_str(x.shape));
  I.per_channel = batch || running_stats;
  I.units = I.per_channel ? I.C : I.N * I.G;
  if (!I.backward) I.mode = running_stats ? norm::ChanMode::ForwardRunning : norm::ChanMode::Forward;
  else I.mode = running_stats ? norm::ChanMode::BackwardRunning : norm::ChanMode::Backward;

  // Layout of x: unit spatial stride (planes) or unit channel stride (columns).
  const auto st = x.effective_strides();
  int64_t ncs[3];
  if (!collapse_ncs(x.shape.data(), st.data(), r, ncs))
    throw Unsupported(op + ": x of shape " + shape_str(x.shape) + " and strides " + shape_str(st) +
                      " has spatial dims that do not collapse to one stride; supported layouts: contiguous [N, C, "
                      "*spatial] or channels-last (pass x.contiguous() or a channels_last tensor)");
  if (ncs[2] < 0)
    throw Unsupported(op + ": x of shape " + shape_str(x.shape) + " has strides " + shape_str(st) +
                      ": its spatial dims run backwards (a negative stride), which the kernels do not take; pass "
                      "x.contiguous()");
  const bool s_unit = I.S <= 1 || ncs[2] == 1, c_unit = I.C <= 1 || ncs[1] == 1;
  if (!s_unit && !c_unit)
    throw Unsupported(op + ": x of shape " + shape_str(x.shape) + " has strides " + shape_str(st) +
                      "; supported layouts: contiguous [N, C, *spatial] (spatial stride 1) or channels-last (channel "
                      "stride 1)");
  // Per-channel statistics of x [N, C] (S == 1): samples become the spatial dim ([1, C, N]), so
  // that the stats pass has N rows to split instead of N blocks of one row.
  I.merge_n = I.per_channel && I.S == 1 && I.N > 1;
  const bool columns = I.merge_n ? (I.C <= 1 || ncs[1] == 1 || ncs[0] != 1) : (I.S <= 1 || !s_unit);
  I.flat_rows = I.per_channel && !I.merge_n && columns && I.N > 1 && I.S > 1;
  const int64_t kn = I.merge_n || I.flat_rows ? 1 : I.N;
  const int64_t ks = I.merge_n ? I.N : (I.flat_rows ? I.N * I.S : I.S);
  const int64_t V = 16 / int64_t(dtype_size(x.dtype));
  constexpr int64_t kFoldPlaneMax = 256;  // below the plane kernels' smallest chunk
  I.fold = I.per_channel && !columns && !I.merge_n && I.N > 1 && I.C > 0 && I.S > 1 && I.S < kFoldPlaneMax &&
           (I.C * I.S) % V == 0 && ncs[2] == 1 && ncs[1] == I.S && ncs[0] % V == 0;
  if (!empty) {
    I.part = norm::chan_partition(columns, kn, I.C, ks, int(V));
    I.workspace = norm::chan_workspace(x.dtype, I.part, kn, I.C, I.per_channel).total;
    if (I.fold) {
      I.fold_part = norm::chan_partition(true, 1, I.C * I.S, I.N, int(V));
      I.workspace = std::max(I.workspace, norm::chan_workspace(x.dtype, I.fold_part, 1, I.C * I.S, true).total);
    }
  } else {
    I.part.columns = columns;
  }
  if (pref.workspace_limit >= 0 && I.workspace > pref.workspace_limit)
    throw Unsupported(op + ": needs " + std::to_string(I.workspace) + " bytes of workspace (partial sums and the "
                      "coefficient table); the preference allows " + std::to_string(pref.workspace_limit));

  KernelSku& k = I.sku;
  k.category = "norm";
  k.op = op;
  k.layout = columns ? "channels_last_columns" : "nc_planes";
  const char* mode_name = I.mode == norm::ChanMode::ForwardRunning || I.mode == norm::ChanMode::BackwardRunning
                              ? "running"
                              : (I.per_channel ? "per_channel" : "per_group");
  k.name = "norm." + op + "." + k.layout + "." + mode_name;
  k.dtypes.push_back(x.dtype);
  k.dtypes.push_back(x.dtype);
  if (desc.weight) k.dtypes.push_back(*desc.weight);
  if (desc.bias) k.dtypes.push_back(*desc.bias);
  if (desc.running) k.dtypes.push_back(*desc.running);
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  const bool half = x.dtype == DType::Float16 || x.dtype == DType::BFloat16;
  pg.compute_dtype = stats_dtype_of(x.dtype);
  pg.accumulator_dtype = pg.compute_dtype;
  pg.math = std::string(dtype_name(pg.compute_dtype)) + " math" +
            (half ? std::string(", one rounding to ") + dtype_name(x.dtype) : std::string(""));
  if (I.mode == norm::ChanMode::Forward)
    pg.math += "; per-chunk sums shifted by the chunk's first value, merged with Chan's formula in a fixed order "
               "(not E[x^2] - E[x]^2); correctly rounded 1/sqrt";
  if (I.mode == norm::ChanMode::Backward || I.mode == norm::ChanMode::BackwardRunning)
    pg.math += "; sum(dy) and sum(dy * (x - mean)) per chunk, added in a fixed order";
  if (I.mode == norm::ChanMode::ForwardRunning) pg.math += "; running stats, no reduction";
  if (I.fold)
    pg.math += "; planes of " + std::to_string(I.S) + " values run as folded columns [1, C * S, N] when every operand "
               "has contiguous, 16-byte aligned planes (else per plane, summing in another order)";
  pg.deterministic = true;
  pg.bit_stable = true;
  return ChannelNormPlan(impl);
}

const KernelSku& ChannelNormPlan::sku() const { return impl_->sku; }
const ChannelNormDescriptor& ChannelNormPlan::descriptor() const { return impl_->desc; }
int64_t ChannelNormPlan::workspace_bytes() const { return impl_->workspace; }

void ChannelNormPlan::run(const ChannelNormTensors& t, void* workspace, int64_t workspace_size,
                          StreamHandle stream) const {
  const Impl& I = *impl_;
  const ChannelNormDescriptor& D = I.desc;
  const std::string& op = I.op;
  const DType dt = D.x.dtype;
  const int r = int(D.x.shape.size());
  const int device = t.x.device;
  const bool bwd = I.backward;
  const bool running_mode = I.mode == norm::ChanMode::ForwardRunning || I.mode == norm::ChanMode::BackwardRunning;

  auto require = [&](const TensorView& v, bool needed, const std::string& name, const std::string& why) {
    check_presence(op, v, needed, name, why);
  };
  auto same_device = [&](const TensorView& v, const std::string& name) { check_same_device(op, v, device, name); };

  check_view(op, "x", t.x, D.x, device, "x");  // x: exactly the descriptor's spec

  norm::ChanNormLaunch L;
  L.mode = I.mode;
  L.dtype = dt;
  L.w_f32 = D.weight && *D.weight == DType::Float32 && dt != DType::Float32;
  L.b_f32 = D.bias && *D.bias == DType::Float32 && dt != DType::Float32;
  L.r_f32 = D.running && *D.running == DType::Float32 && dt != DType::Float32;
  L.N = I.merge_n || I.flat_rows ? 1 : I.N;
  L.C = I.C;
  L.S = I.merge_n ? I.N : (I.flat_rows ? I.N * I.S : I.S);
  L.per_channel = I.per_channel;
  L.G = I.G;
  L.eps = D.eps;
  L.momentum = D.momentum;
  L.part = I.part;
  L.x = t.x.data;
  // [N, C, 1] -> [1, C, N]: the sample stride becomes the spatial stride.
  auto remap = [&](int64_t st[3]) {
    if (I.merge_n) { st[2] = st[0]; st[0] = 0; }
  };
  collapse_ncs(t.x.shape, t.x.strides, r, L.xs);
  remap(L.xs);

  // Another [N, C, *spatial] tensor: x's shape and dtype, spatial dims collapsing to one stride.
  auto ncs_tensor = [&](const TensorView& v, const std::string& name, bool output, int64_t out[3]) {
    if (v.dtype != dt)
      throw InvalidDType(op + ": " + name + " is " + std::string(dtype_name(v.dtype)) + "; expected " + dtype_name(dt) +
                         " (x's dtype)");
    if (!shape_is(v, D.x.shape))
      throw InvalidArgument(op + ": " + name + " has shape " + shape_str(v.shape, v.ndim) + "; expected x's shape " +
                            shape_str(D.x.shape));
    same_device(v, name);
    if (!collapse_ncs(v.shape, v.strides, v.ndim, out))
      throw Unsupported(op + ": " + name + " with strides " + shape_str(v.strides, v.ndim) +
                        " has spatial dims that do not collapse to one stride; supported: contiguous [N, C, *spatial] "
                        "or channels-last");
    if (out[2] < 0)
      throw Unsupported(op + ": " + name + " with strides " + shape_str(v.strides, v.ndim) +
                        ": its spatial dims run backwards (a negative stride), which the kernels do not take; pass "
                        "a contiguous tensor");
    remap(out);
    if (output && !non_overlapping(std::vector<int64_t>(v.shape, v.shape + v.ndim),
                                   std::vector<int64_t>(v.strides, v.strides + v.ndim)))
      throw InvalidArgument(op + ": " + name + " has overlapping elements (strides " + shape_str(v.strides, v.ndim) + ")");
  };
  auto vec_c = [&](const TensorView& v, DType want, const std::string& name, const std::string& what) {
    check_feature_vector(op, v, want, name, I.C, "x's channels", what, device);
  };
  auto stats = [&](const TensorView& v, const std::string& name) {
    const DType sd = stats_dtype_of(dt);
    if (v.dtype != sd)
      throw InvalidDType(op + ": " + name + " is " + std::string(dtype_name(v.dtype)) + "; expected " + dtype_name(sd) +
                         " (stats are float32, float64 for float64 x)");
    if (v.numel() != I.units) {
      const std::string want = I.per_channel ? "(C,) = (" + std::to_string(I.C) + ",)"
                                             : "(N, G) = (" + std::to_string(I.N) + ", " + std::to_string(I.G) + ")";
      throw InvalidArgument(op + ": " + name + " has shape " + shape_str(v.shape, v.ndim) + " (" +
                            std::to_string(v.numel()) + " elements); expected " + want);
    }
    if (!v.is_contiguous()) throw InvalidArgument(op + ": " + name + " must be contiguous");
    same_device(v, name);
  };
  const std::string with_w = D.weight ? "the plan was selected with a weight" : "the plan was selected without a weight";
  const std::string with_b = D.bias ? "the plan was selected with a bias" : "the plan was selected without a bias";
  const std::string with_r = D.running ? "the plan was selected with running stats"
                                       : "the plan was selected without running stats";

  std::vector<std::pair<const TensorView*, std::string>> ins, outs;
  std::vector<std::pair<const TensorView*, const TensorView*>> in_place;
  ins.push_back({&t.x, "x"});
  require(t.weight, bool(D.weight), "weight", with_w);
  if (D.weight) { vec_c(t.weight, *D.weight, "weight", "the plan's weight dtype"); L.w = t.weight.data; ins.push_back({&t.weight, "weight"}); }
  const bool needs_running = bool(D.running) && (!bwd || running_mode);
  require(t.running_var, needs_running, "running_var", with_r);
  require(t.running_mean, needs_running && !bwd, "running_mean",
          bwd ? "the backward of inference reads running_mean as mean" : with_r);
  if (needs_running) {
    vec_c(t.running_var, *D.running, "running_var", "the plan's running-stat dtype");
    L.rvar = t.running_var.data;
    if (!bwd) {
      vec_c(t.running_mean, *D.running, "running_mean", "the plan's running-stat dtype");
      L.rmean = t.running_mean.data;
    }
  }

  if (!bwd) {
    require(t.y, true, "y", "the forward ops write y");
    ncs_tensor(t.y, "y", true, L.ys);
    L.y = t.y.data;
    outs.push_back({&t.y, "y"});
    in_place.push_back({&t.y, &t.x});
    require(t.bias, bool(D.bias), "bias", with_b);
    if (D.bias) { vec_c(t.bias, *D.bias, "bias", "the plan's bias dtype"); L.b = t.bias.data; ins.push_back({&t.bias, "bias"}); }
    L.update_running = D.running && !running_mode;
    if (D.running) {
      // Updated in place (training) or read (inference): an output either way for the overlap checks.
      auto& lst = running_mode ? ins : outs;
      lst.push_back({&t.running_mean, "running_mean"});
      lst.push_back({&t.running_var, "running_var"});
    }
    require(t.mean, D.save_stats, "mean", D.save_stats ? "the plan saves stats" : "the plan was selected without save_stats");
    require(t.rstd, D.save_stats, "rstd", D.save_stats ? "the plan saves stats" : "the plan was selected without save_stats");
    if (D.save_stats) {
      stats(t.mean, "mean");
      stats(t.rstd, "rstd");
      L.mean = t.mean.data;
      L.rstd = t.rstd.data;
      outs.push_back({&t.mean, "mean"});
      outs.push_back({&t.rstd, "rstd"});
    }
  } else {
    require(t.grad_out, true, "grad_out", "the backward ops read grad_out");
    require(t.grad_x, true, "grad_x", "the backward ops write grad_x");
    ncs_tensor(t.grad_out, "grad_out", false, L.gys);
    ncs_tensor(t.grad_x, "grad_x", true, L.gxs);
    L.gy = t.grad_out.data;
    L.gx = t.grad_x.data;
    ins.push_back({&t.grad_out, "grad_out"});
    outs.push_back({&t.grad_x, "grad_x"});
    in_place.push_back({&t.grad_x, &t.grad_out});
    require(t.mean, true, "mean", running_mode ? "the backward of inference reads running_mean as mean"
                                                : "the backward reads the saved mean");
    if (running_mode) {
      vec_c(t.mean, *D.running, "mean", "running_mean, in the plan's running-stat dtype");
      L.rmean = t.mean.data;
      ins.push_back({&t.running_var, "running_var"});
      require(t.rstd, false, "rstd", "the backward of inference computes rstd from running_var");
    } else {
      require(t.rstd, true, "rstd", "the backward reads the saved rstd");
      stats(t.mean, "mean");
      stats(t.rstd, "rstd");
      L.mean = t.mean.data;
      L.rstd = t.rstd.data;
      ins.push_back({&t.rstd, "rstd"});
    }
    ins.push_back({&t.mean, "mean"});
    require(t.grad_weight, bool(D.weight), "grad_weight", with_w);
    require(t.grad_bias, bool(D.bias), "grad_bias", with_b);
    if (D.weight) { vec_c(t.grad_weight, *D.weight, "grad_weight", "weight's dtype"); L.gw = t.grad_weight.data; outs.push_back({&t.grad_weight, "grad_weight"}); }
    if (D.bias) { vec_c(t.grad_bias, *D.bias, "grad_bias", "the plan's bias dtype"); L.gb = t.grad_bias.data; outs.push_back({&t.grad_bias, "grad_bias"}); }
  }

  // Aliasing: an output may be one named input itself (in place); any other overlap is refused.
  for (size_t o = 0; o < outs.size(); ++o) {
    for (const auto& [v, name] : ins) {
      if (!overlap(*outs[o].first, *v)) continue;
      bool allowed = false;
      for (const auto& [po, pi] : in_place) allowed = allowed || (po == outs[o].first && pi == v && same_view(*po, *pi));
      if (!allowed)
        throw InvalidArgument(op + ": " + outs[o].second + " overlaps " + name +
                              "; in place is allowed only for y = x and grad_x = grad_out (the same view)");
    }
    for (size_t p = o + 1; p < outs.size(); ++p)
      if (overlap(*outs[o].first, *outs[p].first))
        throw InvalidArgument(op + ": " + outs[o].second + " overlaps " + outs[p].second + "; outputs must not overlap");
  }
  if (I.workspace > 0) {
    std::vector<NamedView> operands;
    for (const auto& lst : {ins, outs})
      for (const auto& [v, name] : lst) operands.push_back({name, v});
    check_workspace(op, workspace, workspace_size, I.workspace, operands);
  }
  L.workspace = workspace;

  // The [N, C, S] operands the kernels walk: x and y (forward) or x, grad_out and grad_x
  // (backward). all_operands: a predicate holds for each (pointer, strides).
  auto each_operand = [&](auto&& f) {
    f(L.x, L.xs);
    if (bwd) { f(L.gy, L.gys); f(L.gx, L.gxs); }
    else f(L.y, L.ys);
  };
  auto all_operands = [&](auto&& pred) {
    bool ok = true;
    each_operand([&](const void* p, int64_t* st) { ok = ok && pred(p, st); });
    return ok;
  };

  // Flat rows: one row range when every operand's n stride is S x its s stride, else the
  // column kernels split row indices into (n, s) (L.flat_S).
  if (I.flat_rows) {
    if (all_operands([&](const void*, const int64_t* st) { return st[0] == I.S * st[2]; }))
      each_operand([](const void*, int64_t* st) { st[0] = 0; });
    else
      L.flat_S = I.S;
  }

  // The plane kernels' 16-byte vector path: spatial stride 1, aligned planes and chunks.
  {
    const int64_t V = 16 / int64_t(dtype_size(dt));
    auto vec_ok = [&](const void* p, const int64_t st[3]) {
      return st[2] == 1 && st[0] % V == 0 && st[1] % V == 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0;
    };
    L.vec = !I.part.columns && I.part.gw == 32 && L.S % V == 0 && I.part.chunk % V == 0 && all_operands(vec_ok);
    // The column kernels' vector path: channel stride 1 (C is a multiple of V by the partition).
    auto cvec_ok = [&](const void* p, const int64_t st[3]) {
      return st[1] == 1 && (L.N <= 1 || st[0] % V == 0) && (L.S <= 1 || st[2] % V == 0) &&
             reinterpret_cast<uintptr_t>(p) % 16 == 0;
    };
    // Flat rows that need row_offset's (n, s) split take the scalar column kernels.
    L.cvec = I.part.columns && I.part.vtile > 0 && L.C % V == 0 && L.flat_S == 0 && all_operands(cvec_ok);
    // Folded columns: every operand's plane rows are contiguous (channel stride S, spatial stride
    // 1), its sample stride a multiple of V and its pointer 16-byte aligned: the stats and apply
    // passes run the vector column kernels over [1, C * S, N]. Otherwise the per-plane kernels.
    auto fold_ok = [&](const void* p, const int64_t st[3]) {
      return st[2] == 1 && st[1] == I.S && st[0] % V == 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0;
    };
    if (I.fold && all_operands(fold_ok)) {
      each_operand([](const void*, int64_t* st) { st[2] = st[0]; st[0] = 0; st[1] = 1; });
      L.N = 1;
      L.C = I.C * I.S;
      L.S = I.N;
      L.fold = I.S;
      L.part = I.fold_part;
      L.vec = false;
      L.cvec = true;
    }
  }

  const bool empty = I.N == 0 || I.C == 0 || I.S == 0;
  if (empty) {
    // Nothing to normalize. Statistics of empty sets are NaN (all-ones bytes); grad_weight /
    // grad_bias of an empty batch are 0; running stats are left as they are (as torch does).
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    DeviceGuard guard(device);
    auto fill = [&](const TensorView& v, int byte) { fill_dense_bytes(v, byte, s); };  // contiguous (checked)
    if (!bwd && D.save_stats) { fill(t.mean, 0xff); fill(t.rstd, 0xff); }
    if (bwd) { fill(t.grad_weight, 0); fill(t.grad_bias, 0); }
    return;
  }
  DeviceGuard guard(device);
  norm::chan_launch(L, stream);
}

void add_channel_norm_ops(FamilyInfo& f) {
  const std::vector<DType> fp = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};
  const std::vector<std::string> layouts = {"nc_planes", "channels_last_columns"};
  for (const char* op : {"group_norm", "instance_norm", "batch_norm"})
    f.ops.push_back(OpCoverage{op, "forward", fp, layouts, Backend::Bespoke, true});
}

}  // namespace baracuda
