// SoftmaxPlan: validation, geometry (rows of the reduced axis), path choice, SKU, thin run().
#include "baracuda/softmax.h"
#include "common/knobs.h"
#include "plan_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "softmax/rowops_launch.h"
#include "softmax/softmax_launch.h"

namespace baracuda {

namespace {

using softmax::SmLaunch;
using softmax::SmOp;
using softmax::SmPath;

const char* kOps[] = {"softmax", "log_softmax", "softmax_backward", "log_softmax_backward"};

// The row geometry both launch contracts share, for N operands with strides st[a]: the axis' length
// and per-operand stride (1 when it has one element), and the other dims, size-1 dropped and
// neighbours merged where every operand's strides allow, outermost first; rows is their product.
template <class Launch, size_t N>
void collapse_rows(Launch& L, const std::vector<int64_t>& shape, int axis, const std::vector<int64_t> (&st)[N]) {
  L.len = axis >= 0 ? shape[axis] : 1;
  for (size_t a = 0; a < N; ++a) L.axis_stride[a] = (axis >= 0 && L.len > 1) ? st[a][axis] : 1;
  L.rows = 1;
  MergedDims<int(N)> m;
  for (int d = 0; d < int(shape.size()); ++d) {
    if (d == axis || shape[d] == 1) continue;
    L.rows *= shape[d];
    std::array<int64_t, N> s;
    for (size_t a = 0; a < N; ++a) s[a] = st[a][d];
    m.push(shape[d], s);
  }
  L.nd = m.rank();
  for (int i = 0; i < L.nd; ++i) {
    L.dims[i] = m.size[i];
    for (size_t a = 0; a < N; ++a) L.stride[a][i] = m.stride[i][a];
  }
}

// The ops of cuda/softmax/gumbel.cuh and sparsemax.cuh, in RowOp order.
const char* kRowOps[] = {"gumbel_softmax", "gumbel_softmax_backward", "gumbel_noise", "sparsemax",
                         "sparsemax_backward"};


int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// Tuning knobs for timing variants in one process (bench_softmax.py --sweep):
//   BARACUDA_SOFTMAX_CFG="w=16,k=8,stage=1,cs=8"   rows_block / rows_cluster geometry
//   BARACUDA_SOFTMAX_CFG="path=online"             force the two-pass rows_online kernel
//   BARACUDA_SOFTMAX_CFG="path=warp"               rows_warp wherever it applies (rows <= 128 vectors)
// Keys left out keep the default; a geometry that does not cover the row (or is outside the
// compiled set: w in 1..32, k in 4/8/16, cs in 1/2/4/8 with w 8 or 16 and k 8) is ignored.
// stage: 0 = the row in registers, 1 = the last operand staged in shared memory, 2 = forward
// with clusters only: persistent clusters, the next row prefetched into shared memory while the
// current one (in registers) is reduced and written; 3 = the same with the next row's slice
// copied by bulk copies (TMA, one phase of an mbarrier) where the slice is whole (the forward
// cluster default).
//   BARACUDA_SOFTMAX_CFG="rpg=2"   rows_warp: rows per lane group, 1, 2 or 4 (4 only at one chunk
//                                  per lane, 2 at up to two; others ignored)
//   BARACUDA_SOFTMAX_CFG="exact=1"   16-bit forward rows_warp / rows_block / rows_cluster: exp(x - max)
//                                    in the exact form everywhere, not folded to one FFMA (the A/B)
struct Knobs {
  int w = 0, k = 0, stage = -1, cs = 0, rpg = 0;
  bool exact = false;
  std::string path;
};
Knobs read_knobs(const PlanPreference& pref) {
  Knobs kn;
  for (const Knob& k : tuning_knobs("softmax", pref.tuning, "BARACUDA_SOFTMAX_CFG",
                                    {"path", "w", "k", "stage", "cs", "exact", "rpg"})) {
    const int v = int(k.num());
    if (k.key == "path") kn.path = k.value;
    else if (k.key == "w") kn.w = v;
    else if (k.key == "k") kn.k = v;
    else if (k.key == "stage") kn.stage = v;
    else if (k.key == "cs") kn.cs = v;
    else if (k.key == "exact") kn.exact = v != 0;
    else if (k.key == "rpg") kn.rpg = v;
  }
  return kn;
}

bool clusters_compiled() { return compiled_for(90); }  // a build arch of sm_90 or later

// The rules both plans' operands share, with the descriptor's role names (names[i] for input i).
// Inputs of one dtype the kernels take (f16 / bf16 / f32 / f64), out the same; returns it.
DType same_dtype(const std::string& op, const SoftmaxDescriptor& desc, const std::vector<std::string>& names, int nin) {
  const DType dt = desc.inputs[0].dtype;
  if (!softmax::has_kernel(dt))
    throw InvalidDType(op + ": " + names[0] + " is " + dtype_name(dt) + "; supported: f16, bf16, f32, f64");
  for (int i = 1; i < nin; ++i)
    if (desc.inputs[i].dtype != dt)
      throw InvalidDType(op + ": " + names[i] + " is " + dtype_name(desc.inputs[i].dtype) + " but " + names[0] +
                         " is " + dtype_name(dt) + "; cast one first (baracuda.cast)");
  if (desc.out.dtype != dt)
    throw InvalidDType(op + ": out must be " + std::string(dtype_name(dt)) + ", got " + dtype_name(desc.out.dtype));
  return dt;
}
// Every input and out of `shape`.
void same_shape(const std::string& op, const SoftmaxDescriptor& desc, const std::vector<std::string>& names, int nin,
                const std::vector<int64_t>& shape) {
  for (int i = 1; i < nin; ++i)
    if (desc.inputs[i].shape != shape)
      throw InvalidArgument(op + ": " + names[i] + " must have the shape of " + names[0] + " " + shape_str(shape) +
                            ", got " + shape_str(desc.inputs[i].shape));
  if (desc.out.shape != shape)
    throw InvalidArgument(op + ": out must have shape " + shape_str(shape) + ", got " + shape_str(desc.out.shape));
}
// The axis in range for a rank-r operand (a scalar has one axis).
void axis_in_range(const std::string& op, int64_t axis, int r, const std::string& name) {
  const int rr = std::max(r, 1);
  if (axis < -rr || axis >= rr)
    throw InvalidArgument(op + ": axis " + std::to_string(axis) + " is out of range for " + name + " of rank " +
                          std::to_string(r) + "; expected [" + std::to_string(-rr) + ", " + std::to_string(rr - 1) +
                          "]");
}

}  // namespace

struct SoftmaxPlan::Impl {
  SoftmaxDescriptor desc;
  SmLaunch L;
  KernelSku sku;
  std::vector<std::string> names;
  int64_t numel = 0;
  bool vector_path = false;
  // gumbel_softmax / sparsemax / gumbel_noise (rowops_launch.h)
  bool rowop = false;
  softmax::RowOpLaunch R;
};

namespace {

using softmax::RowOp;
using softmax::RowOpLaunch;
using softmax::RowPath;

// select() of the row ops: validation, geometry (4 stride slots: out, x / grad_out, y / y_soft,
// row-major logical index), path, SKU.
SoftmaxPlan select_rowop(const SoftmaxDescriptor& desc, const PlanPreference& pref, int opi) {
  auto impl = std::make_shared<SoftmaxPlan::Impl>();
  impl->desc = desc;
  impl->rowop = true;
  const std::string& op = desc.op;
  const RowOp rop = RowOp(opi);
  const bool noise = rop == RowOp::GumbelNoise;
  const bool bwd = rop == RowOp::GumbelSoftmaxBackward || rop == RowOp::SparsemaxBackward;
  const bool gumbel = rop == RowOp::GumbelSoftmax || rop == RowOp::GumbelSoftmaxBackward;
  const int nin = noise ? 0 : bwd ? 2 : 1;
  if (int(desc.inputs.size()) != nin)
    throw InvalidArgument(op + ": takes " + std::to_string(nin) + " input tensor(s) (" +
                          (noise ? std::string("none: the noise has out's shape") :
                           bwd ? std::string(gumbel ? "grad_out, y_soft" : "grad_out, y") : std::string("x")) +
                          "), got " + std::to_string(desc.inputs.size()));
  if (!pref.allows(Backend::Bespoke))
    throw Unsupported(op + ": the only backend for " + op + " is 'bespoke', and the preference forbids it");
  if (bwd) impl->names = {"grad_out", gumbel ? "y_soft" : "y"};
  else if (!noise) impl->names = {"x"};
  const auto& names = impl->names;

  if (!desc.soft_out.empty() && rop != RowOp::GumbelSoftmax)
    throw InvalidArgument(op + ": soft_out is only an output of gumbel_softmax");
  if (desc.soft_out.size() > 1)
    throw InvalidArgument(op + ": soft_out takes at most one spec, got " + std::to_string(desc.soft_out.size()));
  if (desc.hard && rop != RowOp::GumbelSoftmax) throw InvalidArgument(op + ": hard is only a flag of gumbel_softmax");
  if (gumbel) {
    if (!(desc.tau > 0.0) || !std::isfinite(desc.tau))
      throw InvalidArgument(op + ": tau must be finite and > 0, got " + std::to_string(desc.tau));
  } else if (desc.tau != 1.0) {
    throw InvalidArgument(op + ": tau is only a parameter of gumbel_softmax and gumbel_softmax_backward");
  }

  auto check_spec = [&](const TensorSpec& s, const std::string& name) { baracuda::check_spec(op, s, name); };
  for (int i = 0; i < nin; ++i) check_spec(desc.inputs[i], names[i]);
  check_spec(desc.out, "out");
  for (const auto& so : desc.soft_out) check_spec(so, "soft_out");

  // Dtypes.
  const DType dt = noise ? desc.out.dtype : desc.inputs[0].dtype;
  if (noise) {
    if (dt != DType::Float32 && dt != DType::Float64)
      throw InvalidDType(op + ": out is " + std::string(dtype_name(dt)) +
                         "; supported: f32 (the noise of f16 / bf16 / f32 logits), f64 (of f64 logits)");
  } else {
    same_dtype(op, desc, names, nin);
    for (const auto& so : desc.soft_out)
      if (so.dtype != dt)
        throw InvalidDType(op + ": soft_out must be " + std::string(dtype_name(dt)) + ", got " + dtype_name(so.dtype));
  }

  // Shapes.
  const auto& shape = noise ? desc.out.shape : desc.inputs[0].shape;
  same_shape(op, desc, names, nin, shape);
  for (const auto& so : desc.soft_out)
    if (so.shape != shape)
      throw InvalidArgument(op + ": soft_out must have shape " + shape_str(shape) + ", got " + shape_str(so.shape));
  const int r = int(shape.size());
  if (!noise) axis_in_range(op, desc.axis, r, names[0]);
  const auto out_st = desc.out.effective_strides();
  if (!non_overlapping(desc.out.shape, out_st))
    throw InvalidArgument(op + ": out has overlapping elements (strides " + shape_str(out_st) + " for shape " +
                          shape_str(desc.out.shape) + "); outputs need one element per index");
  for (const auto& so : desc.soft_out)
    if (!non_overlapping(so.shape, so.effective_strides()))
      throw InvalidArgument(op + ": soft_out has overlapping elements (strides " + shape_str(so.effective_strides()) +
                            " for shape " + shape_str(so.shape) + "); outputs need one element per index");

  RowOpLaunch& R = impl->R;
  R.op = rop;
  R.dtype = dt;
  R.inv_tau = 1.0 / desc.tau;
  R.hard = desc.hard;
  R.has_out2 = !desc.soft_out.empty();
  impl->numel = checked_numel(op, noise ? "out" : names[0], shape);
  R.numel = impl->numel;

  if (noise) {  // every dim of out, in order: the kernel walks the row-major index
    R.path = RowPath::Elementwise;
    R.nd = r;
    for (int d = 0; d < r; ++d) {
      R.dims[d] = shape[d];
      R.stride[0][d] = out_st[d];
    }
    R.rows = impl->numel;
    R.len = 1;
    R.threads = 256;
  } else {
    const int axis = r == 0 ? -1 : int(desc.axis < 0 ? desc.axis + r : desc.axis);
    const std::vector<int64_t> st[4] = {
        out_st, desc.inputs[0].effective_strides(),
        bwd ? desc.inputs[1].effective_strides()
            : (R.has_out2 ? desc.soft_out[0].effective_strides() : desc.inputs[0].effective_strides()),
        contiguous_strides(shape)};
    collapse_rows(R, shape, axis, st);
    if (impl->numel == 0) R.rows = 0;
    // Path: the row in registers as 4-element chunks, k chunks per lane; a warp per row up to
    // 512 elements, a block of up to 1024 up to 32768 elements (16384 for the backward ops, which
    // hold two operands, and 8192 for f64: what a 1024-thread block keeps in its 64 registers
    // without spilling much), beyond that the row is re-read (from L2) per pass.
    const int64_t nch = (R.len + 3) / 4;
    const int kmax = dt == DType::Float64 ? 2 : bwd ? 4 : 8;
    if (nch <= 128) {
      R.path = RowPath::Warp;
      R.threads = 256;
      R.k = nch <= 32 ? 1 : nch <= 64 ? 2 : 4;
    } else if (nch <= int64_t(1024) * kmax) {
      R.path = RowPath::Block;
      R.threads = int(std::clamp<int64_t>(next_pow2((nch + 3) / 4), 64, 1024));
      R.k = int(next_pow2((nch + R.threads - 1) / R.threads));
    } else {
      R.path = RowPath::Global;
      R.threads = 1024;
      R.k = 1;
    }
    // f64 block rows have register kernels for k = 1 / 2 only (rowops_common.cuh); a larger k
    // runs the re-read kernel with these threads: say so in the SKU. (Choosing threads for
    // k <= 2 instead would put such rows in registers: a change to measure on a GPU first.)
    if (dt == DType::Float64 && R.path == RowPath::Block && R.k > 2) {
      R.path = RowPath::Global;
      R.k = 1;
    }
  }

  KernelSku& k = impl->sku;
  k.category = "softmax";
  k.op = op;
  k.layout = softmax::rowop_path_name(R.path);
  k.name = "softmax." + op + "." + k.layout;
  k.dtypes.push_back(dt);
  if (R.has_out2) k.dtypes.push_back(dt);
  for (int i = 0; i < nin; ++i) k.dtypes.push_back(dt);
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  const bool f64 = dt == DType::Float64;
  pg.compute_dtype = f64 ? DType::Float64 : DType::Float32;
  pg.accumulator_dtype = pg.compute_dtype;
  pg.deterministic = true;
  pg.bit_stable = true;
  const std::string math = f64 ? "f64 math" : "f32 math";
  const std::string rounding = (dt == DType::Float16 || dt == DType::BFloat16)
                                   ? std::string(", one rounding to ") + dtype_name(dt) : std::string();
  const std::string noise_doc = std::string("Gumbel noise -log(-log(u)) with libm log, u strictly in (0, 1) from ") +
                                (f64 ? "32" : "23") +
                                " bits of Philox-4x32-10 keyed by (seed, offset, row-major element index)";
  switch (rop) {
    case RowOp::GumbelSoftmax:
      pg.math = math + " (libm exp)" + rounding + "; " + noise_doc + "; row max and sum reduced in a fixed order" +
                (desc.hard ? "; hard: exact one-hot at the first maximum of the rounded y_soft" : "");
      break;
    case RowOp::GumbelSoftmaxBackward:
      pg.math = math + rounding + "; sum(grad_out * y_soft) reduced in a fixed order";
      break;
    case RowOp::GumbelNoise:
      pg.math = noise_doc;
      break;
    case RowOp::Sparsemax:
      pg.math = math + rounding +
                "; threshold by safeguarded Newton on the support (row shifted by its max), taken from the final "
                "support (exact to the compute precision); sums in a fixed order";
      break;
    case RowOp::SparsemaxBackward:
      pg.math = math + rounding + "; mean of grad_out over the support reduced in a fixed order";
      break;
  }
  return SoftmaxPlan(impl);
}

void run_rowop(const SoftmaxPlan::Impl& I, const TensorView& out, const TensorView* inputs, int num_inputs,
               const SoftmaxRunArgs& args, StreamHandle stream) {
  const std::string& op = I.desc.op;
  const int nin = int(I.desc.inputs.size());
  if (num_inputs != nin)
    throw InvalidArgument(op + ": run() got " + std::to_string(num_inputs) + " inputs, the plan takes " +
                          std::to_string(nin));
  const bool random = I.R.op == RowOp::GumbelSoftmax || I.R.op == RowOp::GumbelNoise;
  if (random && !args.has_seed)
    throw InvalidArgument(op + ": needs a seed (and an offset, default 0): run(out, inputs, SoftmaxRunArgs{true, "
                          "seed, offset}, stream); from Python plan.run(..., seed=, offset=)");
  if (I.R.has_out2 && args.soft_out == nullptr)
    throw InvalidArgument(op + ": the plan writes soft_out (y_soft) too; pass it to run()");
  if (!I.R.has_out2 && args.soft_out != nullptr)
    throw InvalidArgument(op + ": got soft_out, but the descriptor has no soft_out spec");
  check_view(op, "out", out, I.desc.out, out.device);
  for (int i = 0; i < nin; ++i) check_view(op, I.names[i], inputs[i], I.desc.inputs[i], out.device);
  if (args.soft_out) check_view(op, "soft_out", *args.soft_out, I.desc.soft_out[0], out.device);
  const auto orange = byte_range(out);
  for (int i = 0; i < nin; ++i) {
    const auto rg = byte_range(inputs[i]);
    if (ranges_overlap(rg, orange) && !same_view(out, inputs[i]))
      throw InvalidArgument(op + ": out overlaps " + I.names[i] +
                            " without being the same view; in-place needs identical shape and strides");
  }
  if (args.soft_out) {
    const auto srange = byte_range(*args.soft_out);
    if (ranges_overlap(srange, orange)) throw InvalidArgument(op + ": soft_out overlaps out");
    for (int i = 0; i < nin; ++i)
      if (ranges_overlap(srange, byte_range(inputs[i]))) throw InvalidArgument(op + ": soft_out overlaps " + I.names[i]);
  }
  if (I.numel == 0) return;
  RowOpLaunch R = I.R;
  R.out = out.data;
  R.in0 = nin > 0 ? inputs[0].data : nullptr;
  R.in1 = nin > 1 ? inputs[1].data : R.in0;
  R.out2 = args.soft_out ? args.soft_out->data : nullptr;
  R.seed = args.seed;
  R.offset = args.offset;
  DeviceGuard guard(out.device);
  softmax::launch_rowop(R, stream);
}

}  // namespace

std::string SoftmaxDescriptor::str() const {
  std::ostringstream os;
  os << "SoftmaxDescriptor(" << op << ", inputs=[";
  for (size_t i = 0; i < inputs.size(); ++i) os << (i ? ", " : "") << inputs[i].str();
  os << "], axis=" << axis << ", out=" << out.str();
  if (tau != 1.0) {
    std::ostringstream t;
    t.precision(17);
    t << tau;
    os << ", tau=" << t.str();
  }
  if (hard) os << ", hard=true";
  for (const auto& so : soft_out) os << ", soft_out=" << so.str();
  os << ")";
  return os.str();
}

SoftmaxPlan SoftmaxPlan::select(const SoftmaxDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  impl->desc = desc;
  const std::string& op = desc.op;
  int opi = -1;
  for (int i = 0; i < 4; ++i)
    if (op == kOps[i]) opi = i;
  for (int i = 0; i < 5 && opi < 0; ++i)
    if (op == kRowOps[i]) return select_rowop(desc, pref, i);
  if (opi < 0)
    throw InvalidArgument("softmax: unknown op '" + op +
                          "'; expected softmax, log_softmax, softmax_backward, log_softmax_backward, gumbel_softmax, "
                          "gumbel_softmax_backward, gumbel_noise, sparsemax or sparsemax_backward");
  if (desc.tau != 1.0 || desc.hard || !desc.soft_out.empty())
    throw InvalidArgument(op + ": tau, hard and soft_out are parameters of gumbel_softmax only");
  const SmOp sop = SmOp(opi);
  const bool bwd = softmax::is_backward(sop);
  const int nin = bwd ? 2 : 1;
  if (int(desc.inputs.size()) != nin)
    throw InvalidArgument(op + ": takes " + std::to_string(nin) + " input tensor(s) (" +
                          (bwd ? "grad_out, y" : "x") + "), got " + std::to_string(desc.inputs.size()));
  if (!pref.allows(Backend::Bespoke))
    throw Unsupported(op + ": the only backend for softmax is 'bespoke', and the preference forbids it");
  impl->names = bwd ? std::vector<std::string>{"grad_out", "y"} : std::vector<std::string>{"x"};
  const auto& names = impl->names;

  auto check_spec = [&](const TensorSpec& s, const std::string& name) { baracuda::check_spec(op, s, name); };
  for (int i = 0; i < nin; ++i) check_spec(desc.inputs[i], names[i]);
  check_spec(desc.out, "out");

  // Dtypes: f16, bf16, f32, f64; every operand the same.
  const DType dt = same_dtype(op, desc, names, nin);

  // Shapes.
  const auto& shape = desc.inputs[0].shape;
  same_shape(op, desc, names, nin, shape);
  const int r = int(shape.size());
  axis_in_range(op, desc.axis, r, names[0]);
  const int axis = r == 0 ? -1 : int(desc.axis < 0 ? desc.axis + r : desc.axis);
  const auto out_st = desc.out.effective_strides();
  if (!non_overlapping(desc.out.shape, out_st))
    throw InvalidArgument(op + ": out has overlapping elements (strides " + shape_str(out_st) + " for shape " +
                          shape_str(desc.out.shape) + "); outputs need one element per index");

  // Geometry: the reduced axis, and the other dims (size-1 dropped, neighbours merged).
  SmLaunch& L = impl->L;
  L.op = sop;
  L.dtype = dt;
  std::vector<int64_t> st[3] = {out_st, desc.inputs[0].effective_strides(),
                                (bwd ? desc.inputs[1] : desc.inputs[0]).effective_strides()};
  impl->numel = checked_numel(op, names[0], shape);
  collapse_rows(L, shape, axis, st);
  if (impl->numel == 0) L.rows = 0;

  // Path.
  const int64_t esize = int64_t(dtype_size(dt));
  const int64_t V = 16 / esize;
  bool unit_axis = true;
  for (int a = 0; a < 3; ++a) unit_axis = unit_axis && L.axis_stride[a] == 1;
  if (unit_axis && L.nd <= 2) {
    bool aligned = true;
    for (int a = 0; a < 3; ++a)
      for (int d = 0; d < L.nd; ++d) aligned = aligned && L.stride[a][d] % V == 0;
    const int64_t nch = (L.len + V - 1) / V;  // 16-byte vectors per row
    L.vec = int(V);
    const Knobs kn = read_knobs(pref);
    L.fold_exp = !kn.exact;
    // rows_block: W warps per row, K vectors per lane per operand (softmax_reg.cuh); one read,
    // one write. Defaults: K = 8 (the data then takes 32 registers per
    // operand), W = the warps that cover the row; a 32768-element bf16 row (4096 vectors) is 16
    // warps. The last operand is staged in shared memory (cp.async) when the row is that long,
    // so 3 blocks of 512 (forward) or 2 (backward: grad_out in registers) fit per SM.
    // Longer rows: a cluster of up to 8 such blocks per row (sm_90), still one read.
    // Measured overrides (docs/benchmark-notes.md, softmax: block shapes): the backward of
    // 2049..4096 vectors takes W = 32, K = 4 unstaged; the 16-bit backward of 33..64 vectors takes
    // rows_block W = 1, K = 4; the cluster forward prefetches the next row (stage = 2) by bulk copies.
    const int64_t kRegPacks = 4096;  // longest row one block holds (K = 8, 16 warps)
    auto warps_for = [](int64_t packs, int k) { return int(std::clamp<int64_t>(next_pow2((packs + 32 * k - 1) / (32 * k)), 1, 32)); };
    auto valid = [&](int w, int k, int stage, int cs) {
      const bool wk = (w == 1 || w == 2 || w == 4 || w == 8 || w == 16 || w == 32) && (k == 4 || k == 8 || k == 16) &&
                      (stage == 0 || stage == 1 || ((stage == 2 || stage == 3) && !bwd && cs > 1));
      const bool csok = cs == 1 || ((cs == 2 || cs == 4 || cs == 8) && (w == 8 || w == 16) && k == 8);
      const int64_t threads = w >= 4 ? 32 * w : 128;
      const bool smem_ok = int64_t(stage ? 1 : 0) * threads * k * 16 <= 160 * 1024;
      const bool covers = int64_t(32) * w * k * cs >= nch;
      const bool grid_ok = cs == 1 || L.rows * cs <= (int64_t(1) << 30);
      const bool cl_ok = cs == 1 || clusters_compiled();
      return wk && csok && smem_ok && covers && grid_ok && cl_ok;
    };
    int w = 0, kk = 8, stage = 0, cs = 1;
    bool short_block = false;  // rows_block rather than rows_warp for a short row
    if (nch <= kRegPacks) {
      w = warps_for(nch, 8);
      stage = (bwd && nch > 1024) ? 1 : 0;
      if (!bwd && nch > 2048) stage = 1;
      if (bwd && nch > 2048) {
        w = 32;
        kk = 4;
        stage = 0;
      }
      if (bwd && esize == 2 && nch > 32 && nch <= 64) {
        w = 1;
        kk = 4;
        short_block = true;
      }
    } else if (nch <= 8 * 4096 && clusters_compiled() && L.rows * 8 <= (int64_t(1) << 30)) {
      w = 16;
      stage = bwd ? 1 : 3;
      cs = int(next_pow2((nch + 4095) / 4096));
    }
    auto built = [&](int w2, int k2, int s2, int c2) {
      return softmax::reg_variant_built(bwd, int(esize), w2, k2, s2, c2);
    };
    if (kn.w || kn.k || kn.stage >= 0 || kn.cs) {  // a knob: take it when it is valid for this row
      const int w2 = kn.w ? kn.w : (w ? w : 16), k2 = kn.k ? kn.k : kk, c2 = kn.cs ? kn.cs : cs;
      int s2 = kn.stage >= 0 ? kn.stage : stage;
      if (s2 >= 2 && c2 == 1) s2 = 0;  // the prefetching variants need a cluster
      if (valid(w2, k2, s2, c2)) {
        if (!built(w2, k2, s2, c2))
          throw InvalidArgument("softmax: tuning w=" + std::to_string(w2) + ",k=" + std::to_string(k2) +
                                ",stage=" + std::to_string(s2) + ",cs=" + std::to_string(c2) + " (" +
                                (bwd ? "backward" : "forward") + ") names a kernel this build leaves out: it holds "
                                "the ones select picks by default; build with -DBARACUDA_SWEEP_KERNELS=ON for every "
                                "tuning variant");
        w = w2;
        kk = k2;
        stage = s2;
        cs = c2;
      }
    }
    if (w && !(valid(w, kk, stage, cs) && built(w, kk, stage, cs))) w = 0;
    if (!aligned) {
      L.path = SmPath::RowsLoop;
      L.vec = 1;
    } else if (nch <= 128 && kn.path != "block" && kn.path != "online" && (!short_block || kn.path == "warp")) {
      L.path = SmPath::RowsWarp;
      if (nch <= 32) {
        L.k = 1;
        L.group = int(next_pow2(nch));
      } else {
        L.k = nch <= 64 ? 2 : 4;
        L.group = 32;
      }
      // Rows per lane group, forward: 4 at one chunk per lane (K = 1: the per-row setup is then
      // shared by 4 rows), else 1; backward 1 (more registers, fewer resident warps); 1 also where
      // the one-row grid is small (<= 2048 blocks of 256 threads). docs/benchmark-notes.md,
      // softmax: rows per lane group.
      const int64_t rpb = 8 * (32 / L.group);
      const int64_t blocks1 = (L.rows + rpb - 1) / rpb;
      L.rows_per_group = (bwd || blocks1 <= 2048 || L.k != 1) ? 1 : 4;
      if (kn.rpg == 1 || (kn.rpg == 2 && L.k <= 2) || (kn.rpg == 4 && L.k == 1)) L.rows_per_group = kn.rpg;
      if (blocks1 > (int64_t(1) << 30)) L.path = SmPath::RowsLoop;  // the warp grid does not loop
      L.threads = 256;
    } else if (w && kn.path != "online") {
      L.path = cs > 1 ? SmPath::RowsCluster : SmPath::RowsBlock;
      L.warps = w;
      L.k = kk;
      L.stage = stage;
      L.cluster = cs;
      L.threads = w >= 4 ? 32 * w : 128;
    } else {
      L.path = SmPath::RowsOnline;
      L.threads = 512;
    }
  } else {
    L.path = L.nd <= 2 ? SmPath::Columns : SmPath::Strided;
    L.vec = 1;
  }
  impl->vector_path = L.path == SmPath::RowsWarp || L.path == SmPath::RowsBlock || L.path == SmPath::RowsOnline ||
                      L.path == SmPath::RowsCluster;

  // SKU.
  KernelSku& k = impl->sku;
  k.category = "softmax";
  k.op = op;
  k.layout = softmax::path_name(L.path);
  k.name = "softmax." + op + "." + k.layout;
  k.dtypes.push_back(dt);
  for (int i = 0; i < nin; ++i) k.dtypes.push_back(dt);
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  if (dt == DType::Float64) pg.math = "f64 math (CUDA libm exp / log)";
  else if (dt == DType::Float32) pg.math = "f32 math (CUDA libm expf / logf)";
  else pg.math = std::string("f32 math with hardware exp, one rounding to ") + dtype_name(dt);
  pg.math += "; row max and sum reduced in a fixed order";
  if (impl->vector_path)
    pg.math += "; 16-byte vectors when the pointers are 16-byte aligned, else the rows_loop kernel (other bits)";
  if (L.path == SmPath::RowsCluster)
    pg.math += "; thread-block clusters on sm_90+, else the two-pass rows_online kernel (same math)";
  pg.compute_dtype = dt == DType::Float64 ? DType::Float64 : DType::Float32;
  pg.accumulator_dtype = pg.compute_dtype;
  pg.deterministic = true;
  pg.bit_stable = true;
  return SoftmaxPlan(impl);
}

const KernelSku& SoftmaxPlan::sku() const { return impl_->sku; }
const SoftmaxDescriptor& SoftmaxPlan::descriptor() const { return impl_->desc; }

void SoftmaxPlan::run(const TensorView& out, const TensorView* inputs, int num_inputs, StreamHandle stream) const {
  run(out, inputs, num_inputs, SoftmaxRunArgs{}, stream);
}

void SoftmaxPlan::run(const TensorView& out, const TensorView* inputs, int num_inputs, const SoftmaxRunArgs& args,
                      StreamHandle stream) const {
  const Impl& I = *impl_;
  if (I.rowop) return run_rowop(I, out, inputs, num_inputs, args, stream);
  if (args.soft_out) throw InvalidArgument(I.desc.op + ": soft_out is only an output of gumbel_softmax");
  const std::string& op = I.desc.op;
  const int nin = int(I.desc.inputs.size());
  if (num_inputs != nin)
    throw InvalidArgument(op + ": run() got " + std::to_string(num_inputs) + " inputs, the plan takes " +
                          std::to_string(nin));
  auto check = [&](const TensorView& v, const TensorSpec& s, const std::string& name) {
    check_view(op, name, v, s, out.device);
  };
  check(out, I.desc.out, "out");
  for (int i = 0; i < nin; ++i) check(inputs[i], I.desc.inputs[i], I.names[i]);
  const auto orange = byte_range(out);
  for (int i = 0; i < nin; ++i) {
    const auto rg = byte_range(inputs[i]);
    if (rg.first < orange.second && orange.first < rg.second && !same_view(out, inputs[i]))
      throw InvalidArgument(op + ": out overlaps " + I.names[i] +
                            " without being the same view; in-place needs identical shape and strides");
  }
  if (I.numel == 0) return;

  SmLaunch L = I.L;
  L.out = out.data;
  L.in0 = inputs[0].data;
  L.in1 = nin > 1 ? inputs[1].data : inputs[0].data;
  if (I.vector_path) {
    const bool aligned = reinterpret_cast<uintptr_t>(L.out) % 16 == 0 && reinterpret_cast<uintptr_t>(L.in0) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(L.in1) % 16 == 0;
    if (!aligned) L.path = SmPath::RowsLoop;
  }
  DeviceGuard guard(out.device);
  softmax::launch(L, stream);
}

FamilyInfo softmax_family_info() {
  FamilyInfo f{"softmax", "SoftmaxPlan",
               "softmax, log-softmax, gumbel-softmax (seeded) and sparsemax along any axis, with backward", {}};
  const std::vector<DType> fp = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
  const std::vector<std::string> layouts = {"rows_warp",  "rows_block", "rows_cluster", "rows_online",
                                            "rows_loop", "columns",    "strided"};
  f.ops.push_back(OpCoverage{"softmax", "forward", fp, layouts, Backend::Bespoke, true});
  f.ops.push_back(OpCoverage{"log_softmax", "forward", fp, layouts, Backend::Bespoke, true});
  const std::vector<std::string> row_layouts = {"rows_warp", "rows_block", "rows_global"};
  f.ops.push_back(OpCoverage{"gumbel_softmax", "forward", fp, row_layouts, Backend::Bespoke, true});
  f.ops.push_back(OpCoverage{"gumbel_noise", "random", {DType::Float32, DType::Float64}, {"elementwise"},
                             Backend::Bespoke, false});
  f.ops.push_back(OpCoverage{"sparsemax", "forward", fp, row_layouts, Backend::Bespoke, true});
  return f;
}

}  // namespace baracuda
