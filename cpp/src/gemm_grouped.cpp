// GroupedGemmPlan: mixture-of-experts GEMMs, one kernel launch of ours (offsets on the device)
// or, with the group sizes on the host, CUTLASS's grouped kernel (the boundaries passed by value)
// or one cuBLASLt GEMM per non-empty expert.
#include <algorithm>
#include <map>
#include <sstream>

#include "baracuda/errors.h"
#include "common/knobs.h"
#include "baracuda/gemm.h"
#include "device_guard.h"
#include "gemm/gemm_launch.h"
#include "plan_util.h"

namespace baracuda {

bool GroupedGemmDescriptor::operator==(const GroupedGemmDescriptor& o) const {
  return x == o.x && w == o.w && out == o.out && group_sizes == o.group_sizes &&
         (!group_sizes.empty() || offsets_dtype == o.offsets_dtype) && bias == o.bias &&
         max_rows_per_group == o.max_rows_per_group;
}

std::string GroupedGemmDescriptor::str() const {
  std::ostringstream s;
  s << "GroupedGemmDescriptor(x=" << x.str() << ", w=" << w.str() << ", out=" << out.str();
  if (group_sizes.empty()) s << ", offsets=" << dtype_name(offsets_dtype);
  else s << ", group_sizes=" << shape_str(group_sizes);
  if (bias) s << ", bias";
  if (max_rows_per_group >= 0) s << ", max_rows_per_group=" << max_rows_per_group;
  s << ")";
  return s.str();
}

namespace {
constexpr const char* kOp = "grouped_gemm";
}

struct GroupedGemmPlan::Impl {
  GroupedGemmDescriptor desc;
  KernelSku sku;
  int64_t E = 0, N = 0, K = 0, T = 0;
  int64_t ldx = 0, ldw = 0, sw = 0, ldo = 0;
  bool kernel = false;                  // the grouped kernel of ours; else the cuBLASLt loop
  bool tiled = false;                   // with kernel: the tiled (prefill) kernel, when run's pointers allow
  bool sm90 = false;                    // with kernel: the CUTLASS sm_90a kernel, when run's pointers allow
  gemm::GroupedGemvArgs args{};
  std::vector<int64_t> starts;          // loop path: first row of each expert
  bool host_sm90 = false;               // group sizes on the host through grouped_sm90 (an sm_90 device)
  std::vector<int64_t> bounds;          // host_sm90: starts and the end, E + 1
  std::map<int64_t, GemmPlan> per_rows;  // loop path: one plan per distinct group size
  int64_t workspace = 0;
};

GroupedGemmPlan GroupedGemmPlan::select(const GroupedGemmDescriptor& d, const PlanPreference& pref) {
  auto I = std::make_shared<Impl>();
  I->desc = d;
  const std::string op = kOp;
  if (d.x.shape.size() != 2) throw InvalidArgument(op + ": x must be [T, K], got " + shape_str(d.x.shape));
  if (d.w.shape.size() != 3) throw InvalidArgument(op + ": w must be [E, N, K], got " + shape_str(d.w.shape));
  if (d.out.shape.size() != 2) throw InvalidArgument(op + ": out must be [T, N], got " + shape_str(d.out.shape));
  const int64_t T = d.x.shape[0], K = d.x.shape[1], E = d.w.shape[0], N = d.w.shape[1];
  for (const auto* s : {&d.x, &d.w, &d.out})
    for (int64_t v : s->shape)
      if (v < 0) throw InvalidArgument(op + ": negative dim in " + s->str());
  if (d.w.shape[2] != K)
    throw InvalidArgument(op + ": w is [E, N, K] with K = " + std::to_string(d.w.shape[2]) + " but x has K = " +
                          std::to_string(K));
  if (d.out.shape[0] != T || d.out.shape[1] != N)
    throw InvalidArgument(op + ": out must be [T, N] = " + shape_str(std::vector<int64_t>{T, N}) + ", got " +
                          shape_str(d.out.shape));
  const DType dt = d.x.dtype;
  if (d.w.dtype != dt || d.out.dtype != dt)
    throw InvalidDType(op + ": x, w and out must share one dtype; got x " + dtype_name(dt) + ", w " +
                       dtype_name(d.w.dtype) + ", out " + dtype_name(d.out.dtype));
  if (dt != DType::BFloat16 && dt != DType::Float16 && dt != DType::Float32)
    throw InvalidDType(op + ": x is " + std::string(dtype_name(dt)) + "; expected bfloat16, float16 or float32");
  const auto sx = d.x.effective_strides(), swt = d.w.effective_strides(), so = d.out.effective_strides();
  if (K > 1 && sx[1] != 1) throw InvalidArgument(op + ": x must be contiguous along K (unit last stride)");
  if (K > 1 && swt[2] != 1) throw InvalidArgument(op + ": w must be contiguous along K (unit last stride)");
  if (N > 1 && so[1] != 1) throw InvalidArgument(op + ": out must be contiguous along N (unit last stride)");
  I->E = E, I->N = N, I->K = K, I->T = T;
  I->ldx = T > 1 ? sx[0] : K;
  I->ldw = N > 1 ? swt[1] : K;
  I->sw = E > 1 ? swt[0] : N * I->ldw;
  I->ldo = T > 1 ? so[0] : N;
  if (I->ldx < K || I->ldw < K || I->ldo < N || (E > 1 && I->sw < N * I->ldw))
    throw InvalidArgument(op + ": rows of x, w or out overlap (a leading dimension below the row length)");

  KernelSku& k = I->sku;
  k.category = "gemm";
  k.op = d.bias ? "grouped+bias" : "grouped";
  k.dtypes = {dt, dt, dt};
  k.arch = compiled_archs();
  k.precision.math = std::string(dtype_name(dt)) + " inputs, f32 accumulate, one rounding";
  k.precision.compute_dtype = k.precision.accumulator_dtype = DType::Float32;
  k.precision.deterministic = true;

  gemm::GroupedGemvArgs& g = I->args;  // the grouped kernels' arguments, either path
  g.dtype = dt;
  g.E = E, g.N = N, g.K = K, g.T = T;
  g.ldx = I->ldx, g.ldw = I->ldw, g.sw = I->sw, g.ldo = I->ldo;
  if (d.group_sizes.empty()) {
    if (d.offsets_dtype != DType::Int32 && d.offsets_dtype != DType::Int64)
      throw InvalidDType(op + ": offsets are " + std::string(dtype_name(d.offsets_dtype)) + "; expected int32 or int64");
    if (!pref.allows(Backend::Bespoke))
      throw Unsupported(op + ": offsets on the device need the grouped kernel of ours, which the preference forbids; "
                        "pass group_sizes on the host for the cuBLASLt path");
    g.max_rows = d.max_rows_per_group >= 0 ? std::min(d.max_rows_per_group, T) : T;
    g.offsets_dtype = d.offsets_dtype;
    g.sbias = N;
    g.alpha = 1.0f, g.beta = 0.0f;
    // The kernel: the decode kernel (gemv) reads w once per expert and its cost grows with the rows;
    // the tile kernels pay for their 128-row tiles. By the average rows per expert (docs/benchmarks.md,
    // MoE): CUTLASS's sm_90a kernel from 16 on (an sm_90 device, no bias), else our mma.sync tiled
    // kernel from 64 on. Tuning (or the debug variable BARACUDA_GROUPED_GEMV_CFG) can name the
    // kernel, and the decode kernel's split, rows per block and grid cap.
    auto rows_at_least = [&](int64_t r) { return T >= r * std::max<int64_t>(E, 1) && g.max_rows >= r; };
    const bool sm90_fits = !d.bias && current_device_cc() == 90 && gemm::grouped_sm90_supported(g);
    I->sm90 = sm90_fits && rows_at_least(16);
    I->tiled = !I->sm90 && rows_at_least(64) && gemm::grouped_tiled_supported(g);
    for (const Knob& kn : tuning_knobs(op, pref.tuning, "BARACUDA_GROUPED_GEMV_CFG", {"kernel", "kw", "rn", "waves"})) {
      if (kn.key == "kernel") {
        if (kn.value != "gemv" && kn.value != "tiled" && kn.value != "sm90")
          throw InvalidArgument(op + ": tuning kernel='" + kn.value + "'; expected gemv, tiled or sm90");
        I->tiled = kn.value == "tiled";
        I->sm90 = kn.value == "sm90";
        if (I->sm90 && !sm90_fits)
          throw Unsupported(op + ": the sm90 grouped kernel (CUTLASS, " +
                            (gemm::grouped_sm90_built() ? std::string("built")
                                                         : std::string("not in this build: no CUTLASS headers or no 90 arch")) +
                            ") takes bfloat16 / float16 without bias, K and the row strides multiples of 8, on an "
                            "sm_90 device (this one: " + std::to_string(current_device_cc()) + "); got " + d.str());
        continue;
      }
      const int v = int(kn.num());
      if (kn.key == "kw") g.kw = v;
      else if (kn.key == "rn") g.rn = v;
      else g.waves = v;
    }
    if (!gemm::grouped_gemv_supported(g)) throw Unsupported(op + ": no grouped kernel for " + d.str());
    if (I->tiled && !gemm::grouped_tiled_supported(g))
      throw Unsupported(op + ": the tiled grouped kernel takes bfloat16 / float16 with K and the row strides "
                        "multiples of 8; got " + d.str());
    I->kernel = true;
    if (I->sm90) I->workspace = int64_t(gemm::grouped_sm90_workspace_bytes(g));
    k.name = I->sm90    ? std::string("gemm.grouped_sm90.cutlass.") + gemm::grouped_sm90_variant()
             : I->tiled ? std::string("gemm.grouped_tiled.m128n128k32")
                        : std::string("gemm.") + gemm::grouped_gemv_variant(g);
    k.layout = "x:row,w:[E,N,K],out:row,offsets on device";
    k.backend = I->sm90 ? Backend::Cutlass : Backend::Bespoke;
    k.precision.bit_stable = true;
    return GroupedGemmPlan(I);
  }

  if (int64_t(d.group_sizes.size()) != E)
    throw InvalidArgument(op + ": group_sizes has " + std::to_string(d.group_sizes.size()) + " entries for E = " +
                          std::to_string(E) + " experts");
  int64_t row = 0;
  for (int64_t m : d.group_sizes) {
    if (m < 0) throw InvalidArgument(op + ": group_sizes has a negative entry");
    if (m > T - row)  // checked before the sum, which could otherwise wrap
      throw InvalidArgument(op + ": group_sizes add up to more than the T = " + std::to_string(T) + " rows of x");
    I->starts.push_back(row);
    row += m;
  }
  for (int64_t m : d.group_sizes) {
    if (m == 0 || I->per_rows.count(m)) continue;
    GemmDescriptor one;
    one.a = TensorSpec{{m, K}, dt, {I->ldx, 1}};
    one.b = TensorSpec{{K, N}, dt, {1, I->ldw}};
    one.out = TensorSpec{{m, N}, dt, {I->ldo, 1}};
    one.bias = d.bias;
    one.bias_dtype = dt;
    GemmPlan p = GemmPlan::select(one, pref);  // the loop's GEMMs take the tuning of a GEMM (algo)
    I->workspace = std::max(I->workspace, p.workspace_bytes());
    I->per_rows.emplace(m, p);
  }
  k.name = "gemm.grouped_loop(" + std::to_string(I->per_rows.size()) + " plans)";
  if (!I->per_rows.empty()) k.name += ": " + I->per_rows.begin()->second.sku().name;
  k.layout = "x:row,w:[E,N,K],out:row,group sizes on host";
  k.backend = I->per_rows.empty() ? Backend::Bespoke : I->per_rows.begin()->second.sku().backend;
  // CUTLASS's grouped kernel takes the whole layer in one launch where the loop pays for its launches:
  // many experts, or few rows each (docs/benchmarks.md, MoE: at 8 experts the loop of cuBLASLt GEMMs
  // is 7% ahead at 1024 rows per expert, level at 512; at 128 experts the grouped kernel is 3x ahead).
  // The loop stays the fallback when run's device or pointers do not allow it.
  g.offsets_dtype = DType::Int64;
  I->bounds = I->starts;
  I->bounds.push_back(row);
  g.host_offsets = I->bounds.data();
  const int64_t avg_rows = row / std::max<int64_t>(E, 1);
  I->host_sm90 = !d.bias && current_device_cc() == 90 && gemm::grouped_sm90_supported(g) && pref.allows(Backend::Cutlass) &&
                 row > 0 && (E >= 16 || avg_rows < 768);
  if (I->host_sm90) {
    I->workspace = std::max(I->workspace, int64_t(gemm::grouped_sm90_workspace_bytes(g)));
    k.name = std::string("gemm.grouped_sm90.cutlass.") + gemm::grouped_sm90_variant();
    k.backend = Backend::Cutlass;
  }
  return GroupedGemmPlan(I);
}

const KernelSku& GroupedGemmPlan::sku() const { return impl_->sku; }
const GroupedGemmDescriptor& GroupedGemmPlan::descriptor() const { return impl_->desc; }
int64_t GroupedGemmPlan::workspace_bytes() const { return impl_->workspace; }

void GroupedGemmPlan::run(const GroupedGemmTensors& t, void* workspace, int64_t workspace_size,
                          StreamHandle stream) const {
  const Impl& I = *impl_;
  const auto& d = I.desc;
  const std::string op = kOp;
  const int dev = t.out.device;
  check_view(op, "out", t.out, d.out, dev);
  check_view(op, "x", t.x, d.x, dev);
  check_view(op, "w", t.w, d.w, dev);
  if (d.bias) {
    check_view(op, "bias", t.bias, TensorSpec{{I.E, I.N}, d.out.dtype, {}}, dev);
  } else if (t.bias.data) {
    throw InvalidArgument(op + ": bias was given but the plan was selected without it");
  }
  if (I.kernel) {
    check_view(op, "offsets", t.offsets, TensorSpec{{I.E + 1}, d.offsets_dtype, {}}, dev);
  } else if (t.offsets.data) {
    throw InvalidArgument(op + ": the plan takes group_sizes on the host; offsets were given too");
  }
  const auto o = byte_range(t.out);
  for (auto [v, name] : {std::pair<const TensorView*, const char*>{&t.x, "x"}, {&t.w, "w"}, {&t.bias, "bias"},
                         {&t.offsets, "offsets"}})
    if (v->data && ranges_overlap(o, byte_range(*v))) throw InvalidArgument(op + ": out overlaps " + name);
  // Each expert's plan checks the workspace against its own slices only: check it against the
  // whole tensors here (an expert's scratch must not land on another expert's rows).
  if (I.workspace > 0 || (workspace && workspace_size > 0))
    check_workspace(op, workspace, workspace_size, std::max(I.workspace, workspace_size),
                    {{"out", &t.out}, {"x", &t.x}, {"w", &t.w}, {"bias", &t.bias}, {"offsets", &t.offsets}});
  if (t.out.numel() == 0) return;
  DeviceGuard guard(dev);
  if (I.kernel) {
    gemm::GroupedGemvArgs g = I.args;
    g.x = t.x.data, g.w = t.w.data, g.out = t.out.data, g.offsets = t.offsets.data, g.bias = t.bias.data;
    // (the tile kernels' 16-byte loads need aligned x, w and out: else the decode kernel runs; a plan
    // selected on an sm_90 device and run on another takes the tiled kernel: sm_90a code runs on 9.0 only)
    if (I.sm90 && gemm::grouped_sm90_supported(g) && current_device_cc() == 90)
      gemm::grouped_sm90(g, workspace, size_t(workspace_size), stream);
    else if ((I.tiled || I.sm90) && gemm::grouped_tiled_supported(g)) gemm::grouped_tiled(g, stream);
    else gemm::grouped_gemv(g, stream);
    return;
  }
  if (I.host_sm90) {
    gemm::GroupedGemvArgs g = I.args;
    g.x = t.x.data, g.w = t.w.data, g.out = t.out.data;  // host_offsets: I.bounds, set at select
    if (gemm::grouped_sm90_supported(g) && current_device_cc() == 90)
      return gemm::grouped_sm90(g, workspace, size_t(workspace_size), stream);
  }
  const int64_t es = int64_t(dtype_size(d.x.dtype));
  for (int64_t e = 0; e < I.E; ++e) {
    const int64_t m = d.group_sizes[e];
    if (m == 0) continue;
    const GemmPlan& p = I.per_rows.at(m);
    GemmTensors g;
    g.a = make_view(static_cast<char*>(t.x.data) + I.starts[e] * I.ldx * es, d.x.dtype, {m, I.K}, {I.ldx, 1}, dev);
    g.b = make_view(static_cast<char*>(t.w.data) + e * I.sw * es, d.w.dtype, {I.K, I.N}, {1, I.ldw}, dev);
    g.out = make_view(static_cast<char*>(t.out.data) + I.starts[e] * I.ldo * es, d.out.dtype, {m, I.N}, {I.ldo, 1},
                      dev);
    if (d.bias) g.bias = make_view(static_cast<char*>(t.bias.data) + e * I.N * es, d.out.dtype, {I.N}, {1}, dev);
    p.run(g, workspace, workspace_size, stream);
  }
}

}  // namespace baracuda
