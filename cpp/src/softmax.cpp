// SoftmaxPlan: validation, geometry (rows of the reduced axis), path choice, SKU, thin run().
#include "baracuda/softmax.h"
#include "plan_util.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "softmax/softmax_launch.h"

namespace baracuda {

namespace {

using softmax::SmLaunch;
using softmax::SmOp;
using softmax::SmPath;

const char* kOps[] = {"softmax", "log_softmax", "softmax_backward", "log_softmax_backward"};


int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}



}  // namespace

struct SoftmaxPlan::Impl {
  SoftmaxDescriptor desc;
  SmLaunch L;
  KernelSku sku;
  std::vector<std::string> names;
  int64_t numel = 0;
  bool vector_path = false;
};

std::string SoftmaxDescriptor::str() const {
  std::ostringstream os;
  os << "SoftmaxDescriptor(" << op << ", inputs=[";
  for (size_t i = 0; i < inputs.size(); ++i) os << (i ? ", " : "") << inputs[i].str();
  os << "], axis=" << axis << ", out=" << out.str() << ")";
  return os.str();
}

SoftmaxPlan SoftmaxPlan::select(const SoftmaxDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  impl->desc = desc;
  const std::string& op = desc.op;
  int opi = -1;
  for (int i = 0; i < 4; ++i)
    if (op == kOps[i]) opi = i;
  if (opi < 0)
    throw InvalidArgument("softmax: unknown op '" + op +
                          "'; expected softmax, log_softmax, softmax_backward or log_softmax_backward");
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

  auto check_spec = [&](const TensorSpec& s, const std::string& name) {
    if (s.shape.size() > size_t(kMaxRank))
      throw Unsupported(op + ": " + name + " has rank " + std::to_string(s.shape.size()) + "; at most " +
                        std::to_string(kMaxRank) + " is supported");
    for (int64_t d : s.shape)
      if (d < 0) throw InvalidArgument(op + ": " + name + " has a negative dimension in shape " + shape_str(s.shape));
    if (!s.strides.empty() && s.strides.size() != s.shape.size())
      throw InvalidArgument(op + ": " + name + " has " + std::to_string(s.strides.size()) + " strides for rank " +
                            std::to_string(s.shape.size()));
  };
  for (int i = 0; i < nin; ++i) check_spec(desc.inputs[i], names[i]);
  check_spec(desc.out, "out");

  // Dtypes: f16, bf16, f32, f64; every operand the same.
  const DType dt = desc.inputs[0].dtype;
  if (!softmax::has_kernel(dt))
    throw InvalidDType(op + ": " + names[0] + " is " + dtype_name(dt) + "; supported: f16, bf16, f32, f64");
  for (int i = 1; i < nin; ++i)
    if (desc.inputs[i].dtype != dt)
      throw InvalidDType(op + ": " + names[i] + " is " + dtype_name(desc.inputs[i].dtype) + " but " + names[0] +
                         " is " + dtype_name(dt) + "; cast one first (baracuda.cast)");
  if (desc.out.dtype != dt)
    throw InvalidDType(op + ": out must be " + std::string(dtype_name(dt)) + ", got " + dtype_name(desc.out.dtype));

  // Shapes.
  const auto& shape = desc.inputs[0].shape;
  for (int i = 1; i < nin; ++i)
    if (desc.inputs[i].shape != shape)
      throw InvalidArgument(op + ": " + names[i] + " must have the shape of " + names[0] + " " + shape_str(shape) +
                            ", got " + shape_str(desc.inputs[i].shape));
  if (desc.out.shape != shape)
    throw InvalidArgument(op + ": out must have shape " + shape_str(shape) + ", got " + shape_str(desc.out.shape));
  const int r = int(shape.size());
  const int rr = std::max(r, 1);
  if (desc.axis < -rr || desc.axis >= rr)
    throw InvalidArgument(op + ": axis " + std::to_string(desc.axis) + " is out of range for " + names[0] +
                          " of rank " + std::to_string(r) + "; expected [" + std::to_string(-rr) + ", " +
                          std::to_string(rr - 1) + "]");
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
  L.len = axis >= 0 ? shape[axis] : 1;
  impl->numel = 1;
  for (int64_t d : shape) impl->numel *= d;
  for (int a = 0; a < 3; ++a) L.axis_stride[a] = (axis >= 0 && L.len > 1) ? st[a][axis] : 1;
  L.nd = 0;
  L.rows = 1;
  for (int d = 0; d < r; ++d) {
    if (d == axis || shape[d] == 1) continue;
    L.rows *= shape[d];
    bool merge = L.nd > 0;
    for (int a = 0; a < 3 && merge; ++a) merge = L.stride[a][L.nd - 1] == st[a][d] * shape[d];
    if (merge) {
      L.dims[L.nd - 1] *= shape[d];
      for (int a = 0; a < 3; ++a) L.stride[a][L.nd - 1] = st[a][d];
    } else {
      L.dims[L.nd] = shape[d];
      for (int a = 0; a < 3; ++a) L.stride[a][L.nd] = st[a][d];
      ++L.nd;
    }
  }
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
    const int64_t nch = (L.len + V - 1) / V;
    const int kmax_block = bwd ? 2 : 4;
    L.vec = int(V);
    if (!aligned) {
      L.path = SmPath::RowsLoop;
      L.vec = 1;
    } else if (nch <= 128) {
      L.path = SmPath::RowsWarp;
      if (nch <= 32) {
        L.k = 1;
        L.group = int(next_pow2(nch));
      } else {
        L.k = nch <= 64 ? 2 : 4;
        L.group = 32;
      }
      const int64_t rpb = 8 * (32 / L.group);
      if ((L.rows + rpb - 1) / rpb > (int64_t(1) << 30)) L.path = SmPath::RowsLoop;  // the warp grid does not loop
      L.threads = 256;
    } else if (nch <= 1024 * kmax_block) {
      L.path = SmPath::RowsBlock;
      L.threads = int(std::clamp<int64_t>(next_pow2((nch + kmax_block - 1) / kmax_block), 32, 1024));
      L.k = int(next_pow2((nch + L.threads - 1) / L.threads));
    } else {
      L.path = SmPath::RowsOnline;
      L.threads = 512;
    }
  } else {
    L.path = L.nd <= 2 ? SmPath::Columns : SmPath::Strided;
    L.vec = 1;
  }
  impl->vector_path = L.path == SmPath::RowsWarp || L.path == SmPath::RowsBlock || L.path == SmPath::RowsOnline;

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
  pg.compute_dtype = dt == DType::Float64 ? DType::Float64 : DType::Float32;
  pg.accumulator_dtype = pg.compute_dtype;
  pg.deterministic = true;
  pg.bit_stable = true;
  return SoftmaxPlan(impl);
}

const KernelSku& SoftmaxPlan::sku() const { return impl_->sku; }
const SoftmaxDescriptor& SoftmaxPlan::descriptor() const { return impl_->desc; }

void SoftmaxPlan::run(const TensorView& out, const TensorView* inputs, int num_inputs, StreamHandle stream) const {
  const Impl& I = *impl_;
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
  FamilyInfo f{"softmax", "SoftmaxPlan", "softmax and log-softmax along any axis, with backward", {}};
  const std::vector<DType> fp = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
  const std::vector<std::string> layouts = {"rows_warp", "rows_block", "rows_online", "rows_loop", "columns", "strided"};
  f.ops.push_back(OpCoverage{"softmax", "forward", fp, layouts, Backend::Bespoke, true});
  f.ops.push_back(OpCoverage{"log_softmax", "forward", fp, layouts, Backend::Bespoke, true});
  return f;
}

}  // namespace baracuda
