// ElementwisePlan: validation, iteration-space geometry, SKU, and the thin run().
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "baracuda/elementwise.h"
#include "baracuda/errors.h"
#include "device_guard.h"
#include "common/index32_pieces.h"
#include "elementwise/elementwise_launch.h"
#include "elementwise/ops.h"
#include "plan_util.h"

namespace baracuda {

namespace {

using elementwise::EwLaunch;

// One kernel launch of a plan: its geometry and where its pointers come from at run().
struct Step {
  EwLaunch L;
  int64_t out_offset = 0;                   // bytes, from the output pointer
  int in_src[elementwise::kMaxInputs] = {0, 1, 2, 3};  // which run() input feeds kernel input i
  int64_t in_offset[elementwise::kMaxInputs] = {};   // bytes
};

// An operand as the geometry sees it: shape right-aligned to the iteration space.
struct Operand {
  std::vector<int64_t> shape, strides;
};

std::string join_names(const std::vector<DType>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::string(dtype_name(v[i]));
  return s;
}

std::vector<int64_t> broadcast_shapes(const std::string& op, const std::vector<TensorSpec>& specs,
                                      const std::vector<std::string>& names) {
  size_t rank = 0;
  for (const auto& s : specs) rank = std::max(rank, s.shape.size());
  std::vector<int64_t> out(rank, 1);
  for (size_t k = 0; k < specs.size(); ++k) {
    const auto& sh = specs[k].shape;
    for (size_t i = 0; i < sh.size(); ++i) {
      int64_t& o = out[rank - sh.size() + i];
      if (sh[i] == o || sh[i] == 1) continue;
      if (o == 1) { o = sh[i]; continue; }
      throw InvalidArgument(op + ": " + names[k] + " of shape " + shape_str(sh) +
                            " does not broadcast with the other inputs (dimension " + std::to_string(i) +
                            ": " + std::to_string(sh[i]) + " vs " + std::to_string(o) + ")");
    }
  }
  return out;
}

// The launch's kernel family from its coalesced geometry (rank, shape, strides, numel).
void classify_layout(EwLaunch& L, int nargs) {
  // Contiguous: at most one dim left, unit stride for the output and every input, except
  // inputs that are one broadcast element.
  L.contiguous = L.rank <= 1;
  L.scalar_mask = 0;
  if (L.rank == 1) {
    L.contiguous = L.stride[0][0] == 1;
    for (int a = 1; a < nargs && L.contiguous; ++a) {
      if (L.stride[a][0] == 0) L.scalar_mask |= 1u << (a - 1);
      else L.contiguous = L.stride[a][0] == 1;
    }
  }
  if (!L.contiguous) L.scalar_mask = 0;
  L.inner_contiguous = false;
  const int inner = L.rank - 1;
  if (!L.contiguous && L.rank >= 2 && L.stride[0][inner] == 1) {
    L.inner_contiguous = true;
    for (int a = 1; a < nargs; ++a)
      L.inner_contiguous = L.inner_contiguous && (L.stride[a][inner] == 0 || L.stride[a][inner] == 1);
  }
  // One input read across its unit-stride dim while the output is written along its own:
  // the tiled transpose kernel.
  L.transpose_dim = -1;
  if (nargs == 2 && !L.contiguous && !L.inner_contiguous && L.rank >= 2 && L.stride[0][inner] == 1)
    for (int d = 0; d < L.rank - 1; ++d)
      if (L.stride[1][d] == 1 && L.shape[d] > 1) L.transpose_dim = d;
}

// Coalesce the iteration space: drop size-1 dims, order dims by operand `lead`'s strides
// (innermost = smallest; the output by default), merge dims contiguous for every operand.
void build_geometry(EwLaunch& L, const std::vector<int64_t>& iter, const std::vector<Operand>& ops, int lead = 0) {
  const int nargs = int(ops.size());
  const int r = int(iter.size());
  std::vector<int> dims;
  for (int d = 0; d < r; ++d)
    if (iter[d] != 1) dims.push_back(d);
  auto stride_of = [&](int a, int d) -> int64_t {
    const auto& o = ops[a];
    const int off = r - int(o.shape.size());
    if (d < off) return 0;
    return o.shape[d - off] == 1 ? 0 : o.strides[d - off];
  };
  std::stable_sort(dims.begin(), dims.end(), [&](int x, int y) {
    for (int k = 0; k < nargs; ++k) {
      const int a = k == 0 ? lead : (k == lead ? 0 : k);
      int64_t sx = std::llabs(stride_of(a, x)), sy = std::llabs(stride_of(a, y));
      if (sx != sy) return sx > sy;
    }
    return false;
  });
  MergedDims<elementwise::kMaxArgs> m;  // operands past nargs: stride 0, never in the way
  for (int d : dims) {
    std::array<int64_t, elementwise::kMaxArgs> s{};
    for (int a = 0; a < nargs; ++a) s[a] = stride_of(a, d);
    m.push(iter[d], s);
  }
  L.rank = m.rank();
  L.numel = 1;
  for (int64_t n : iter) L.numel *= n;
  for (int d = 0; d < L.rank; ++d) {
    L.shape[d] = m.size[d];
    for (int a = 0; a < nargs; ++a) L.stride[a][d] = m.stride[d][a];
  }
  classify_layout(L, nargs);
}

// A non-contiguous launch of kIndex32Limit elements or more, as launches under it, each from
// its byte offsets: so the strided, inner and transposed kernels index in 32 bits only.
void split_to_index32(std::vector<Step>& steps) {
  std::vector<Step> pieces;
  for (const Step& s : steps) {
    const EwLaunch& L = s.L;
    if (L.contiguous || L.map_reduce || L.numel < kernels::kIndex32Limit) {
      pieces.push_back(s);
      continue;
    }
    const int nargs = L.nin + 1;
    int64_t esize[elementwise::kMaxArgs] = {int64_t(dtype_size(L.out_dtype))};
    for (int i = 0; i < L.nin; ++i) esize[i + 1] = int64_t(dtype_size(L.in_dtype[i]));
    auto stride_of = [&](int a, int d) { return L.stride[a][d]; };
    auto add_piece = [&](int first, int64_t count, const int64_t* off) {
      Step p = s;
      p.L.rank = L.rank - first;
      p.L.numel = 1;
      for (int d = 0; d < p.L.rank; ++d) {
        p.L.shape[d] = d == 0 ? count : L.shape[first + d];
        p.L.numel *= p.L.shape[d];
        for (int a = 0; a < nargs; ++a) p.L.stride[a][d] = L.stride[a][first + d];
      }
      p.out_offset += off[0] * esize[0];
      for (int i = 0; i < L.nin; ++i) p.in_offset[i] += off[i + 1] * esize[i + 1];
      classify_layout(p.L, nargs);
      pieces.push_back(p);
    };
    kernels::for_each_index32_piece(L.rank, L.shape, nargs, stride_of, add_piece);
  }
  steps = std::move(pieces);
}

std::string math_of(EwCategory c, int kind, DType t) {
  if (c == EwCategory::Cast) return "exact where representable, else one round-to-nearest-even; fp8 saturating by default";
  if (c == EwCategory::Fill) return "value rounded once to the output dtype";
  if (t == DType::Float64) return "f64 math (CUDA libm)";
  if (t == DType::Float32) return "f32 math (CUDA libm, <= 2 ulp transcendentals)";
  if (t == DType::Float16 || t == DType::BFloat16) {
    const bool fast = (c == EwCategory::Unary && (kind == int(elementwise::UnaryKind::Silu) ||
                                                  kind == int(elementwise::UnaryKind::Sigmoid) || kind == int(elementwise::UnaryKind::Exp))) ||
                      (c == EwCategory::UnaryBackward && kind == int(elementwise::UnaryKind::Silu));
    return std::string(fast ? "f32 math with hardware exp (a few f32 ulp)" : "f32 math") + ", one rounding to " +
           dtype_name(t);
  }
  if (t == DType::Bool) return "exact boolean logic";
  return "exact integer arithmetic (two's-complement wrap)";
}

}  // namespace

struct ElementwisePlan::Impl {
  ElementwiseDescriptor desc;
  const EwOpInfo* info = nullptr;
  KernelSku sku;
  std::vector<Step> steps;
  int64_t workspace = 0;
  std::vector<std::string> names;      // operand names for messages ("x", "a", "grad_out", ...)
  DType accumulator = DType::Float32;  // map-reduce plans: the type partial sums are held in
  bool reduces() const { return !steps.empty() && steps[0].L.map_reduce; }
};

std::string ElementwiseDescriptor::str() const {
  std::ostringstream os;
  os << "ElementwiseDescriptor(" << op << ", inputs=[";
  for (size_t i = 0; i < inputs.size(); ++i) os << (i ? ", " : "") << inputs[i].str();
  os << "], out=" << out.str();
  for (const auto& [k, v] : params) os << ", " << k << "=" << v;
  os << ")";
  return os.str();
}

ElementwisePlan ElementwisePlan::select(const ElementwiseDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  impl->desc = desc;
  const EwOpInfo* info = find_elementwise_op(desc.op);
  if (!info) throw InvalidArgument("elementwise: unknown op '" + desc.op + "' (see baracuda.elementwise_ops())");
  impl->info = info;
  const std::string& op = info->name;
  const EwCategory cat = info->category;

  if (int(desc.inputs.size()) != info->arity)
    throw InvalidArgument(op + ": takes " + std::to_string(info->arity) + " input tensor(s), got " +
                          std::to_string(desc.inputs.size()));
  // Parameters: known names only; missing ones take their defaults.
  double p[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < info->params.size(); ++i) p[i] = info->defaults[i];
  for (const auto& [k, v] : desc.params) {
    auto it = std::find(info->params.begin(), info->params.end(), k);
    if (it == info->params.end()) {
      std::string known;
      for (const auto& n : info->params) known += (known.empty() ? "" : ", ") + n;
      throw InvalidArgument(op + ": unknown parameter '" + k + "' (takes: " + (known.empty() ? "none" : known) + ")");
    }
    p[it - info->params.begin()] = v;
  }
  auto param = [&](const char* name) {
    auto it = std::find(info->params.begin(), info->params.end(), std::string(name));
    return p[it - info->params.begin()];
  };
  // Index-like parameters (axis, wrt) must be whole numbers: 0.5 is not axis 0.
  auto index_param = [&](const char* name) {
    const double v = param(name);
    if (!(v == std::floor(v)) || std::fabs(v) > 1e9)
      throw InvalidArgument(op + ": " + name + " must be a whole number, got " + std::to_string(v));
    return int(v);
  };
  if (!pref.allows(Backend::Bespoke))
    throw Unsupported(op + ": the only backend for elementwise ops is 'bespoke', and the preference forbids it");

  // Names of the operands, for messages.
  std::vector<std::string> names;
  static const char* kUnaryNames[] = {"x"};
  static const char* kBinaryNames[] = {"a", "b"};
  static const char* kTernaryNames[] = {"x0", "x1", "x2"};
  static const char* kWhereNames[] = {"cond", "a", "b"};
  static const char* kBackNames[] = {"grad_out", "x0", "x1", "x2"};
  static const char* kWhereBackNames[] = {"grad_out", "cond", "a", "b"};
  const char** nm = kUnaryNames;
  if (info->arity == 2 && cat != EwCategory::UnaryBackward && cat != EwCategory::GatedBackward) nm = kBinaryNames;
  if (cat == EwCategory::Ternary) nm = info->kind == int(elementwise::TernaryKind::Where) ? kWhereNames : kTernaryNames;
  if (cat == EwCategory::UnaryBackward || cat == EwCategory::BinaryBackward || cat == EwCategory::GatedBackward ||
      cat == EwCategory::TernaryBackward)
    nm = kBackNames;
  if (cat == EwCategory::TernaryBackward && info->kind == int(elementwise::TernaryKind::Where)) nm = kWhereBackNames;
  for (int i = 0; i < info->arity; ++i) names.push_back(nm[i]);
  if (cat == EwCategory::UnaryBackward || cat == EwCategory::GatedBackward) names = {"grad_out", "x"};
  impl->names = names;

  // Ranks, shapes, strides.
  auto check_spec = [&](const TensorSpec& s, const std::string& name) { baracuda::check_spec(op, s, name, false); };
  for (int i = 0; i < info->arity; ++i) check_spec(desc.inputs[i], names[i]);
  check_spec(desc.out, "out");
  checked_numel(op, "out", desc.out.shape);
  const auto out_strides = desc.out.effective_strides();
  if (!non_overlapping(desc.out.shape, out_strides))
    throw InvalidArgument(op + ": out has overlapping elements (strides " + shape_str(out_strides) + " for shape " +
                          shape_str(desc.out.shape) + "); outputs need one element per index");

  // Dtypes.
  auto dtype_in_list = [&](DType t, const std::string& name) {
    if (std::find(info->dtypes.begin(), info->dtypes.end(), t) == info->dtypes.end())
      throw InvalidDType(op + ": " + name + " is " + dtype_name(t) + "; supported: " + join_names(info->dtypes));
  };
  auto same_dtype = [&](int i, int j) {
    if (desc.inputs[i].dtype != desc.inputs[j].dtype)
      throw InvalidDType(op + ": " + names[j] + " is " + dtype_name(desc.inputs[j].dtype) + " but " + names[i] + " is " +
                         dtype_name(desc.inputs[i].dtype) + "; cast one first (baracuda.cast)");
  };
  auto out_dtype_is = [&](DType t) {
    if (desc.out.dtype != t)
      throw InvalidDType(op + ": out must be " + std::string(dtype_name(t)) + ", got " + dtype_name(desc.out.dtype));
  };
  const bool is_where = (cat == EwCategory::Ternary || cat == EwCategory::TernaryBackward) &&
                        info->kind == int(elementwise::TernaryKind::Where);
  const int data = (cat == EwCategory::Ternary && is_where) ? 1 : 0;  // operand carrying the dtype
  DType dt = cat == EwCategory::Fill ? desc.out.dtype : desc.inputs[data].dtype;
  switch (cat) {
    case EwCategory::Fill: dtype_in_list(dt, "out"); break;
    case EwCategory::Cast: dtype_in_list(dt, "x"); dtype_in_list(desc.out.dtype, "out"); break;
    case EwCategory::Predicate: case EwCategory::Compare:
      dtype_in_list(dt, names[0]);
      for (int i = 1; i < info->arity; ++i) same_dtype(0, i);
      out_dtype_is(DType::Bool);
      break;
    case EwCategory::Ternary:
      dtype_in_list(dt, names[data]);
      if (is_where) {
        if (desc.inputs[0].dtype != DType::Bool)
          throw InvalidDType(op + ": cond must be bool, got " + std::string(dtype_name(desc.inputs[0].dtype)));
        same_dtype(1, 2);
      } else {
        same_dtype(0, 1); same_dtype(0, 2);
      }
      out_dtype_is(dt);
      break;
    case EwCategory::TernaryBackward:
      dtype_in_list(dt, "grad_out");
      if (is_where) {
        if (desc.inputs[1].dtype != DType::Bool)
          throw InvalidDType(op + ": cond must be bool, got " + std::string(dtype_name(desc.inputs[1].dtype)));
        same_dtype(0, 2); same_dtype(0, 3);
      } else {
        for (int i = 1; i < 4; ++i) same_dtype(0, i);
      }
      out_dtype_is(dt);
      break;
    default:
      dtype_in_list(dt, names[0]);
      for (int i = 1; i < info->arity; ++i) same_dtype(0, i);
      out_dtype_is(dt);
  }
  if (!elementwise::has_kernel(cat, dt, desc.out.dtype))
    throw Unsupported(op + ": this build has no " + category_name(cat) + " kernel for " + dtype_name(dt));
  // Scalars that meet integer data are converted to the integer type by the kernels: refuse what
  // would not survive that (a fill of 2.5 or 300 into int8, alpha = 0.5 on int32), as torch does.
  if (is_integer(desc.out.dtype) && (cat == EwCategory::Fill || is_integer(dt))) {
    for (const char* name : {"value", "alpha"}) {
      if (std::find(info->params.begin(), info->params.end(), name) == info->params.end()) continue;
      const double v = param(name);
      double lo = 0, hi = 0;
      switch (desc.out.dtype) {
        case DType::Int8: lo = -128, hi = 127; break;
        case DType::UInt8: lo = 0, hi = 255; break;
        case DType::Int16: lo = -32768, hi = 32767; break;
        case DType::Int32: lo = -2147483648.0, hi = 2147483647.0; break;
        case DType::UInt32: lo = 0, hi = 4294967295.0; break;
        default: lo = -9223372036854775808.0, hi = 9223372036854775807.0;  // int64: < 2^63 as a double
      }
      if (!(v == std::floor(v)) || !(v >= lo && v < hi + 1))
        throw InvalidArgument(op + ": " + name + " = " + std::to_string(v) + " is not a whole number in the range of " +
                              dtype_name(desc.out.dtype) + " (the dtype it is converted to)");
    }
  }

  // The launches.
  auto make_step = [&]() {
    Step s;
    s.L.category = cat;
    s.L.kind = info->kind;
    std::copy(p, p + 4, s.L.p);
    s.L.out_dtype = desc.out.dtype;
    return s;
  };
  auto operand = [&](const TensorSpec& s) { return Operand{s.shape, s.effective_strides()}; };
  auto shape_must_be = [&](const std::vector<int64_t>& expected, const std::vector<int64_t>& got, const std::string& nm2) {
    if (expected != got)
      throw InvalidArgument(op + ": " + nm2 + " must have shape " + shape_str(expected) + ", got " + shape_str(got));
  };
  const size_t elem_out = dtype_size(desc.out.dtype);

  if (cat == EwCategory::Gated || cat == EwCategory::GatedBackward) {
    const TensorSpec& x = cat == EwCategory::Gated ? desc.inputs[0] : desc.inputs[1];
    const int r = int(x.shape.size());
    int axis = index_param("axis");
    if (axis < -r || axis >= r || r == 0)
      throw InvalidArgument(op + ": axis " + std::to_string(axis) + " is out of range for x of rank " + std::to_string(r));
    if (axis < 0) axis += r;
    if (x.shape[axis] % 2)
      throw InvalidArgument(op + ": x has odd size " + std::to_string(x.shape[axis]) + " along axis " +
                            std::to_string(axis) + "; gated activations split it in two halves");
    auto half = x.shape;
    half[axis] /= 2;
    const auto xs = x.effective_strides();
    const int64_t second = half[axis] * xs[axis] * int64_t(dtype_size(x.dtype));  // bytes to the second half
    if (cat == EwCategory::Gated) {
      shape_must_be(half, desc.out.shape, "out");
      Step s = make_step();
      s.L.nin = 2;
      s.L.in_dtype[0] = s.L.in_dtype[1] = dt;
      s.in_src[0] = s.in_src[1] = 0;
      s.in_offset[1] = second;
      build_geometry(s.L, half, {operand(desc.out), {half, xs}, {half, xs}});
      impl->steps.push_back(s);
    } else {
      shape_must_be(half, desc.inputs[0].shape, "grad_out");
      shape_must_be(x.shape, desc.out.shape, "out");
      for (int wrt = 0; wrt < 2; ++wrt) {
        Step s = make_step();
        s.L.nin = 3;
        s.L.wrt = wrt;
        s.L.in_dtype[0] = s.L.in_dtype[1] = s.L.in_dtype[2] = dt;
        s.in_src[0] = 0; s.in_src[1] = 1; s.in_src[2] = 1;
        s.in_offset[2] = second;
        s.out_offset = wrt * half[axis] * out_strides[axis] * int64_t(elem_out);
        build_geometry(s.L, half, {{half, out_strides}, operand(desc.inputs[0]), {half, xs}, {half, xs}});
        impl->steps.push_back(s);
      }
    }
  } else if (cat == EwCategory::BinaryBackward || cat == EwCategory::TernaryBackward) {
    const int wrt = index_param("wrt");
    const int lo = is_where ? 1 : 0, hi = is_where ? 2 : info->arity - 2;
    if (wrt < lo || wrt > hi)
      throw InvalidArgument(op + ": wrt must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                            std::to_string(wrt));
    const int target = wrt + 1;  // index in inputs of the operand whose gradient is wanted
    std::vector<TensorSpec> data_inputs(desc.inputs.begin() + 1, desc.inputs.end());
    std::vector<std::string> data_names(names.begin() + 1, names.end());
    auto full = broadcast_shapes(op, data_inputs, data_names);
    shape_must_be(full, desc.inputs[0].shape, "grad_out");
    shape_must_be(desc.inputs[target].shape, desc.out.shape, "out (the gradient of " + names[target] + ")");
    Step s = make_step();
    s.L.wrt = wrt;
    std::vector<Operand> ops;
    if (is_where) {  // the kernel needs only (grad_out, cond)
      s.L.nin = 2;
      s.L.in_dtype[0] = dt; s.L.in_dtype[1] = DType::Bool;
      s.in_src[0] = 0; s.in_src[1] = 1;
      ops = {operand(desc.inputs[0]), operand(desc.inputs[1])};
    } else {
      s.L.nin = info->arity;
      for (int i = 0; i < info->arity; ++i) { s.L.in_dtype[i] = desc.inputs[i].dtype; ops.push_back(operand(desc.inputs[i])); }
    }
    // A broadcast gradient (stride-0 grad_out) may describe more terms than memory holds.
    const int64_t full_numel = checked_numel(op, "the broadcast shape", full);
    if (desc.out.shape == full) {
      ops.insert(ops.begin(), operand(desc.out));
      build_geometry(s.L, full, ops);
    } else if (full_numel == 0) {
      // Nothing to sum: the gradient of a broadcast operand of an empty product is zeros.
      s.L.category = EwCategory::Fill;
      s.L.nin = 0;
      s.L.p[0] = 0.0;
      build_geometry(s.L, desc.out.shape, {operand(desc.out)});
    } else {
      // Gradient of a broadcast operand: the per-element gradient is summed (in f32 / f64)
      // over the dims where out's stride is 0, in one pass over the inputs. Dims are ordered
      // by grad_out's strides (out has stride 0 on the summed dims), so reads coalesce.
      ops.insert(ops.begin(), operand(desc.out));
      build_geometry(s.L, full, ops, 1);
      s.L.map_reduce = true;
      s.L.contiguous = s.L.inner_contiguous = false;
      s.L.transpose_dim = -1;
      int64_t K = 1;
      for (int d = 0; d < s.L.rank; ++d)
        if (s.L.stride[0][d] != 0) K *= s.L.shape[d];
      const int64_t R = s.L.numel / std::max<int64_t>(K, 1);
      // Columns when out's innermost dim is kept and the gradient reads along it.
      s.L.reduce_columns = s.L.rank > 0 && s.L.stride[0][s.L.rank - 1] != 0 && s.L.stride[1][s.L.rank - 1] == 1;
      if (s.L.reduce_columns) {
        // Enough blocks to fill the GPU: split the rows when the outputs alone are few. A
        // block covers 32 x V outputs (V: the kernel's vector width along the kept dim).
        size_t min_size = 16;
        for (int i = 0; i < s.L.nin; ++i) min_size = std::min(min_size, dtype_size(s.L.in_dtype[i]));
        const int64_t V = std::min<int64_t>(8, 16 / int64_t(min_size));
        const int64_t per_block = s.L.shape[s.L.rank - 1] % V == 0 ? 32 * V : 32;
        const int64_t col_blocks = (K + per_block - 1) / per_block;
        s.L.splits = int(std::clamp<int64_t>(std::min<int64_t>(1024 / std::max<int64_t>(col_blocks, 1), R / 64), 1, 64));
      }
      // The reduce kernels give each output a slot in the grid (no loop over outputs): columns
      // take 32 per block, rows 1 (R >= 4096) or 8 per block.
      const int64_t blocks = s.L.reduce_columns ? (K + 31) / 32 : (R >= 4096 ? K : (K + 7) / 8);
      if (blocks > INT32_MAX)
        throw Unsupported(op + ": the gradient sums into " + std::to_string(K) + " outputs, more than one launch of "
                          "the " + (s.L.reduce_columns ? "reduce_columns" : "reduce_rows") + " kernel covers (" +
                          std::to_string(blocks) + " blocks)");
      const DType acc = dt == DType::Float64 ? DType::Float64 : DType::Float32;
      // Each split keeps K partial sums in the workspace; a workspace limit lowers the split
      // count (one split needs no workspace at all).
      const int64_t per_split = K * int64_t(dtype_size(acc));
      auto bytes = [&](int splits) { return splits > 1 ? (splits * per_split + 255) / 256 * 256 : int64_t(0); };
      while (pref.workspace_limit >= 0 && s.L.splits > 1 && bytes(s.L.splits) > pref.workspace_limit) --s.L.splits;
      impl->workspace = bytes(s.L.splits);
      impl->accumulator = acc;
    }
    impl->steps.push_back(s);
  } else {
    if (cat == EwCategory::UnaryBackward) {  // no broadcasting: grad_out, x and out share one shape
      shape_must_be(desc.out.shape, desc.inputs[0].shape, "grad_out");
      shape_must_be(desc.out.shape, desc.inputs[1].shape, "x");
    }
    Step s = make_step();
    s.L.nin = info->arity;
    std::vector<Operand> ops = {operand(desc.out)};
    for (int i = 0; i < info->arity; ++i) { s.L.in_dtype[i] = desc.inputs[i].dtype; ops.push_back(operand(desc.inputs[i])); }
    if (cat != EwCategory::Fill) {
      auto full = broadcast_shapes(op, desc.inputs, names);
      if (full != desc.out.shape)
        throw InvalidArgument(op + ": out must have the broadcast shape " + shape_str(full) + ", got " +
                              shape_str(desc.out.shape));
    }
    build_geometry(s.L, desc.out.shape, ops);
    impl->steps.push_back(s);
  }

  split_to_index32(impl->steps);

  // The SKU, derived from the steps just built.
  KernelSku& k = impl->sku;
  bool contiguous = true, inner = true, transposed = false;
  for (const auto& s : impl->steps) {
    contiguous = contiguous && s.L.contiguous;
    inner = inner && (s.L.contiguous || s.L.inner_contiguous);
    transposed = transposed || s.L.transpose_dim >= 0;
  }
  k.category = "elementwise";
  k.op = op;
  k.layout = contiguous ? "contiguous" : (inner ? "inner_contiguous" : (transposed ? "transposed_tiled" : "strided"));
  if (impl->reduces()) k.layout = impl->steps[0].L.reduce_columns ? "reduce_columns" : "reduce_rows";
  k.name = std::string("ew.") + category_name(cat) + "." + k.layout;
  k.dtypes.push_back(desc.out.dtype);
  for (const auto& in : desc.inputs) k.dtypes.push_back(in.dtype);
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  pg.math = math_of(cat, info->kind, dt);
  if (contiguous || inner) pg.math += "; 16-byte vectors when pointers and strides are 16-byte aligned";
  const bool fp = dt == DType::Float16 || dt == DType::BFloat16 || dt == DType::Float32 || is_fp8(dt);
  pg.compute_dtype = dt == DType::Float64 ? DType::Float64 : (fp ? DType::Float32 : dt);
  pg.accumulator_dtype = impl->reduces() ? impl->accumulator : pg.compute_dtype;
  if (impl->reduces())
    pg.math += "; broadcast gradient summed in " + std::string(dtype_name(pg.accumulator_dtype)) + " in a fixed order";
  pg.deterministic = true;
  pg.bit_stable = true;
  return ElementwisePlan(impl);
}

const KernelSku& ElementwisePlan::sku() const { return impl_->sku; }
const ElementwiseDescriptor& ElementwisePlan::descriptor() const { return impl_->desc; }
int64_t ElementwisePlan::workspace_bytes() const { return impl_->workspace; }

void ElementwisePlan::run(const TensorView& out, const TensorView* inputs, int num_inputs, void* workspace,
                          int64_t workspace_size, StreamHandle stream) const {
  const Impl& I = *impl_;
  const std::string& op = I.info->name;
  if (num_inputs != I.info->arity)
    throw InvalidArgument(op + ": run() got " + std::to_string(num_inputs) + " inputs, the plan takes " +
                          std::to_string(I.info->arity));
  auto check = [&](const TensorView& v, const TensorSpec& s, const std::string& name) {
    check_view(op, name, v, s, out.device);
  };
  check(out, I.desc.out, "out");
  const auto& kIn = I.names;
  for (int i = 0; i < num_inputs; ++i) check(inputs[i], I.desc.inputs[i], kIn[i]);
  // Aliasing: an input may be the output itself (in place), never a partial overlap. Gated
  // ops read two halves of their input, so for them any overlap is refused.
  const bool gated = I.info->category == EwCategory::Gated || I.info->category == EwCategory::GatedBackward;
  const auto orange = byte_range(out);
  for (int i = 0; i < num_inputs; ++i) {
    const auto r = byte_range(inputs[i]);
    const bool overlap = r.first < orange.second && orange.first < r.second;
    if (overlap && (gated || I.reduces() || !same_view(out, inputs[i])))
      throw InvalidArgument(op + ": out overlaps " + kIn[i] +
                            " without being the same view; in-place needs identical shape and strides");
  }
  if (I.workspace > 0) {
    std::vector<NamedView> operands{{"out", &out}};
    for (int i = 0; i < num_inputs; ++i) operands.push_back({kIn[i], &inputs[i]});
    check_workspace(op, workspace, workspace_size, I.workspace, operands);
  }
  if (out.numel() == 0) return;

  DeviceGuard guard(out.device);
  for (const Step& s : I.steps) {
    EwLaunch L = s.L;
    L.out = static_cast<char*>(out.data) + s.out_offset;
    L.workspace = workspace;
    for (int i = 0; i < L.nin; ++i)
      L.in[i] = static_cast<const char*>(inputs[s.in_src[i]].data) + s.in_offset[i];
    elementwise::launch(L, stream);
  }
}

}  // namespace baracuda
