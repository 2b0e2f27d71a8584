// ReductionPlan: validation, coalescing of the iteration space into kept and reduced dims,
// kernel choice (rows / columns / strided, split passes), SKU, and the thin run().
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sstream>

#include "baracuda/errors.h"
#include "baracuda/reduction.h"
#include "common/knobs.h"
#include "plan_util.h"
#include "device_guard.h"
#include "reduction/reduction_launch.h"

namespace baracuda {

namespace {

using reduction::BwdKind;
using reduction::Path;
using reduction::RedKind;
using reduction::RedLaunch;

// Tuning of the kernel choice. Defaults are the configuration believed fastest on H100 / H200
// (132 SMs, 2-3 resident blocks of 256 per SM for the streaming kernels); every field can be
// overridden at select time through BARACUDA_REDUCTION_CFG="key=value,..." (read by each
// select(), so one process can time several variants; bench/bench_reduction.py --sweep does).
struct RedTuning {
  int64_t short_max = 64;      // rows of at most this many 16-byte vectors (aligned) take the
                               // short-rows kernel (8 lanes per row, several rows per group); 0: off
  int64_t warp_max = 512;      // longer rows: a warp per row up to this many vectors, else a block
  int64_t warp_max_heavy = 4096;  // the same limit for the compute-heavy ops (logsumexp, var, std,
                               // argmax, argmin): a warp per row beat a block up to 4096 vectors
                               // (docs/benchmark-notes.md, reductions: warp or block per row)
  int64_t split_blocks = 4096; // row splits: aim for this many blocks (few, long rows)
  int64_t split_min = 16384;   // row splits: at least this many elements per split (block of 256)
  int64_t col_blocks = 2048;   // columns: split the rows until about this many blocks
  int64_t col_rows = 64;       // columns: at least this many rows per thread and split
  int64_t col_wy = 8;          // columns: row slices per block (1, 2, 4, 8; docs/benchmark-notes.md,
                               // reductions: column slices)
};

// Ops whose per-element work (exp/log, a second moment, an index) makes a warp per row pay off
// for longer rows than the plain streaming ops.
bool heavy_rows(RedKind k) {
  return k == RedKind::Logsumexp || k == RedKind::Var || k == RedKind::Std || k == RedKind::Argmax ||
         k == RedKind::Argmin;
}

RedTuning tuning(const PlanPreference& pref) {
  RedTuning t;
  bool heavy_set = false, warp_set = false;
  for (const Knob& kn : tuning_knobs("reduction", pref.tuning, "BARACUDA_REDUCTION_CFG",
                                     {"short_max", "warp_max", "warp_max_heavy", "split_blocks", "split_min",
                                      "col_blocks", "col_rows", "col_wy"})) {
    const std::string& key = kn.key;
    const int64_t v = kn.num();
    if (key == "short_max") t.short_max = std::max<int64_t>(0, std::min<int64_t>(v, 64));
    else if (key == "warp_max") { t.warp_max = std::max<int64_t>(8, v); warp_set = true; }
    else if (key == "warp_max_heavy") { t.warp_max_heavy = std::max<int64_t>(8, v); heavy_set = true; }
    else if (key == "split_blocks") t.split_blocks = std::max<int64_t>(1, v);
    else if (key == "split_min") t.split_min = std::max<int64_t>(1024, v);
    else if (key == "col_blocks") t.col_blocks = std::max<int64_t>(1, v);
    else if (key == "col_rows") t.col_rows = std::max<int64_t>(8, v);
    else if (key == "col_wy") t.col_wy = (v == 1 || v == 2 || v == 4 || v == 8) ? v : 8;
  }
  // warp_max alone sets the limit for every op (as before the split); warp_max_heavy, if given,
  // then overrides it for the compute-heavy ops.
  if (warp_set && !heavy_set) t.warp_max_heavy = t.warp_max;
  return t;
}

std::string join_names(const std::vector<DType>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::string(dtype_name(v[i]));
  return s;
}

std::string axes_str(const std::vector<int64_t>& a) {
  std::string s = "[";
  for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + std::to_string(a[i]);
  return s + "]";
}

// The forward geometry: x's dims, which are reduced, and out's stride for each kept x dim.
// Dims are ordered by x's strides (innermost = smallest) and merged where contiguous for x
// and for out (kept) or for the logical index (reduced), size-1 dims dropped: strides {x, out,
// reduction index}, out's 0 on a reduced dim and the index's 0 on a kept one (so a kept dim never
// merges with a reduced one: a reduced dim's index stride is 1 or more).
struct DimInfo {
  int64_t size;
  std::array<int64_t, 3> st;  // x, out, reduction index
};

constexpr int64_t kMaxGridX = 2147483647;  // gridDim.x
// Blocks along x of a forward launch (the columns kernel at its scalar fallback, the rows and
// strided kernels at L.group threads per output: the short-rows kernel needs fewer).
int64_t grid_x(const RedLaunch& L) {
  const int64_t per_block = L.path == Path::Columns ? 256 / L.wy : 256 / L.group;
  return (L.g.K + per_block - 1) / per_block;
}

void build_geometry(RedLaunch& L, const std::vector<int64_t>& shape, const std::vector<int64_t>& xstrides,
                    const std::vector<bool>& reduced, const std::vector<int64_t>& out_stride_of, const RedTuning& T) {
  const int r = int(shape.size());
  std::vector<int64_t> lidx(r, 0);
  int64_t acc = 1;
  for (int d = r - 1; d >= 0; --d)
    if (reduced[d]) { lidx[d] = acc; acc *= shape[d]; }
  std::vector<DimInfo> dims;
  for (int d = 0; d < r; ++d)
    if (shape[d] != 1) dims.push_back({shape[d], {xstrides[d], reduced[d] ? 0 : out_stride_of[d], lidx[d]}});
  std::stable_sort(dims.begin(), dims.end(),
                   [](const DimInfo& a, const DimInfo& b) { return std::llabs(a.st[0]) > std::llabs(b.st[0]); });
  MergedDims<3> merged;
  for (const auto& d : dims) merged.push(d.size, d.st);
  reduction::Geometry& g = L.g;
  g = reduction::Geometry{};
  for (int i = merged.rank() - 1; i >= 0; --i) {
    const int64_t size = merged.size[i], xs = merged.stride[i][0];
    if (merged.stride[i][2] != 0) {  // reduced
      g.red_size[g.nred] = size; g.red_in[g.nred] = xs; g.red_idx[g.nred] = merged.stride[i][2];
      g.R *= size;
      ++g.nred;
    } else {
      g.kept_size[g.nkept] = size; g.kept_in[g.nkept] = xs; g.kept_out[g.nkept] = merged.stride[i][1];
      g.K *= size;
      ++g.nkept;
    }
  }
  const size_t es = dtype_size(L.in_dtype);
  const int V = int(std::max<size_t>(1, std::min<size_t>(8, 16 / es)));
  const bool inner_reduced = merged.rank() > 0 && merged.stride.back()[2] != 0;
  const bool inner_kept = merged.rank() > 0 && merged.stride.back()[2] == 0;
  if (g.nred == 0) {
    L.path = Path::Strided;
    L.group = 1;
  } else if (inner_reduced && g.nred == 1 && g.red_in[0] == 1) {
    L.path = Path::Rows;
    const int64_t nvec = (g.R + V - 1) / V;
    // A few lanes for tiny rows, a warp up to warp_max vectors (4096 bf16: no shared-memory
    // merge, 8 loads in flight per lane; warp_max_heavy for logsumexp / var / std / arg*), a
    // block of 256 for longer rows.
    const int64_t warp_max = heavy_rows(L.kind) ? T.warp_max_heavy : T.warp_max;
    L.group = nvec <= 8 ? 4 : (nvec <= warp_max ? 32 : 256);
    // Short rows of 8, 16, 32 or 64 vectors (one kept dim, every start 16-byte aligned given an
    // aligned base): 8 lanes per row, P = nvec / 8 vectors per lane, 8 / P rows per group, so 8
    // loads in flight per lane.
    const bool aligned = g.R % V == 0 && g.nkept == 1 && g.kept_in[0] % V == 0;
    if (aligned && nvec <= T.short_max && (nvec == 8 || nvec == 16 || nvec == 32 || nvec == 64))
      L.short_p = int(nvec / 8);
  } else if (inner_kept && g.kept_in[0] == 1) {
    L.path = Path::Columns;
    bool vec = V > 1 && g.kept_size[0] % V == 0;
    for (int d = 1; d < g.nkept && vec; ++d) vec = g.kept_in[d] % V == 0;
    for (int d = 0; d < g.nred && vec; ++d) vec = g.red_in[d] % V == 0;
    L.vec = vec ? V : 1;
    L.wy = int(T.col_wy);
  } else {
    L.path = Path::Strided;
    L.group = g.R <= 16 ? 1 : (g.R <= 1024 ? 32 : 256);
  }
  // The kernels give every output a slot in the grid (no loop over outputs), and a broadcast x
  // (stride 0 along kept dims) can ask for more outputs than one grid holds: fewer threads per
  // output keep the grid in range (select refuses what still does not fit).
  if (L.path != Path::Columns)
    while (grid_x(L) > kMaxGridX && L.group > (L.path == Path::Rows ? 4 : 1)) {
      L.group = L.group == 256 ? 32 : (L.group == 32 ? 4 : 1);
      L.short_p = 0;
    }
  L.splits = 1;
  L.seg = 0;
  if (g.K == 0 || g.R == 0) return;
  if (L.path == Path::Columns) {
    // Columns: 256 / wy threads of V outputs per block; split the rows so that about
    // col_blocks blocks run, each thread folding at least col_rows rows per split.
    const int64_t width = int64_t(256 / L.wy) * L.vec;
    const int64_t col_blocks = (g.K + width - 1) / width;
    const int64_t min_rows = T.col_rows * L.wy;
    if (col_blocks < T.col_blocks && g.R >= 2 * min_rows) {
      int64_t s = std::min<int64_t>((T.col_blocks + col_blocks - 1) / col_blocks, g.R / min_rows);
      s = std::clamp<int64_t>(s, 1, 4096);
      L.seg = (g.R + s - 1) / s;
      L.splits = int((g.R + L.seg - 1) / L.seg);
    }
  } else if (L.group >= 32 && L.short_p == 0) {
    const int64_t blocks = (g.K + (256 / L.group) - 1) / (256 / L.group);
    const int64_t min_seg = L.group == 256 ? T.split_min : std::max<int64_t>(1024, T.split_min / 8);
    if (blocks < T.split_blocks / 4 && g.R >= 2 * min_seg) {
      int64_t s = std::min<int64_t>((T.split_blocks + blocks - 1) / blocks, g.R / min_seg);
      s = std::clamp<int64_t>(s, 1, 4096);
      L.seg = (g.R + s - 1) / s;
      L.splits = int((g.R + L.seg - 1) / L.seg);
    }
  }
  // Finish: a block per output for many splits (a full reduction), else a warp.
  L.fgroup = L.splits >= 512 ? 256 : 32;
  if (L.splits <= 1) { L.splits = 1; L.seg = 0; }
}

int64_t partial_bytes(const RedLaunch& L) {
  if (L.splits <= 1) return 0;
  return align256(L.g.K * int64_t(L.splits) * reduction::state_bytes(L.kind, L.in_dtype));
}

// Lower the split count until the partials fit `limit` (one split needs none).
void fit_workspace(RedLaunch& L, int64_t limit) {
  if (limit < 0) return;
  while (L.splits > 1 && partial_bytes(L) > limit) {
    const int s = std::max(1, L.splits / 2);
    L.seg = (L.g.R + s - 1) / s;
    L.splits = int((L.g.R + L.seg - 1) / L.seg);
    if (s == 1) { L.splits = 1; L.seg = 0; }
  }
}

std::string path_name(const RedLaunch& L) {
  switch (L.path) {
    case Path::Rows: return "rows";
    case Path::Columns: return "columns";
    default: return "strided";
  }
}

void refuse_oversized_grid(const std::string& op, const TensorSpec& x, const RedLaunch& L) {
  if (grid_x(L) > kMaxGridX)
    throw Unsupported(op + ": x of shape " + shape_str(x.shape) + " and strides " + shape_str(x.effective_strides()) +
                      " asks for " + std::to_string(L.g.K) + " outputs, more than one launch of the " +
                      path_name(L) + " kernel covers (" + std::to_string(kMaxGridX) + " blocks)");
}

}  // namespace

struct ReductionPlan::Impl {
  ReductionDescriptor desc;
  const RedOpInfo* info = nullptr;
  KernelSku sku;
  bool backward = false;
  RedLaunch fwd;           // forward ops
  reduction::BwdLaunch bwd;      // backward ops
  int64_t stats_bytes = 0; // backward: the statistics region at the start of the workspace
  int64_t workspace = 0;
  int ninputs = 1;
};

std::string ReductionDescriptor::str() const {
  std::ostringstream os;
  os << "ReductionDescriptor(" << op << ", input=" << input.str() << ", axes=" << axes_str(axes)
     << ", keepdim=" << (keepdim ? "True" : "False") << ", out=" << out.str();
  for (const auto& [k, v] : params) os << ", " << k << "=" << v;
  if (!grad_out.shape.empty() || grad_out.dtype != DType::Float32) os << ", grad_out=" << grad_out.str();
  if (!y.shape.empty() || y.dtype != DType::Float32) os << ", y=" << y.str();
  os << ")";
  return os.str();
}

ReductionPlan ReductionPlan::select(const ReductionDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  impl->desc = desc;
  const RedOpInfo* info = find_reduction_op(desc.op);
  if (!info) throw InvalidArgument("reduction: unknown op '" + desc.op + "' (see baracuda.reduction_ops())");
  impl->info = info;
  const std::string& op = info->name;
  const RedCategory cat = info->category;
  impl->backward = cat == RedCategory::Backward;
  impl->ninputs = impl->backward ? info->backward_inputs : 1;

  // Parameters: known names only; missing ones take their defaults.
  std::vector<double> p(info->defaults);
  for (const auto& [k, v] : desc.params) {
    auto it = std::find(info->params.begin(), info->params.end(), k);
    if (it == info->params.end()) {
      std::string known;
      for (const auto& n : info->params) known += (known.empty() ? "" : ", ") + n;
      throw InvalidArgument(op + ": unknown parameter '" + k + "' (takes: " + (known.empty() ? "none" : known) + ")");
    }
    p[it - info->params.begin()] = v;
  }
  const double correction = info->params.empty() ? 1.0 : p[0];
  if (!pref.allows(Backend::Bespoke))
    throw Unsupported(op + ": the only backend for reductions is 'bespoke', and the preference forbids it");

  auto check_spec = [&](const TensorSpec& s, const std::string& name) { baracuda::check_spec(op, s, name, false); };
  const TensorSpec& x = desc.input;
  check_spec(x, "x");
  check_spec(desc.out, "out");
  if (impl->backward) {
    check_spec(desc.grad_out, "grad_out");
    if (impl->ninputs == 3) check_spec(desc.y, "y");
  }
  const auto out_strides = desc.out.effective_strides();
  if (!non_overlapping(desc.out.shape, out_strides))
    throw InvalidArgument(op + ": out has overlapping elements (strides " + shape_str(out_strides) + " for shape " +
                          shape_str(desc.out.shape) + "); outputs need one element per index");

  // Dtypes.
  const DType dt = x.dtype;
  if (std::find(info->dtypes.begin(), info->dtypes.end(), dt) == info->dtypes.end())
    throw InvalidDType(op + ": x is " + std::string(dtype_name(dt)) + "; supported: " + join_names(info->dtypes));
  auto out_must_be = [&](std::vector<DType> ok) {
    if (std::find(ok.begin(), ok.end(), desc.out.dtype) == ok.end())
      throw InvalidDType(op + ": out is " + std::string(dtype_name(desc.out.dtype)) + "; expected " + join_names(ok) +
                         " for x of " + dtype_name(dt));
  };
  const bool fp = is_floating(dt);
  const bool half = dt == DType::Float16 || dt == DType::BFloat16;
  const RedKind kind = RedKind(info->kind);
  if (impl->backward) {
    out_must_be({dt});
    auto same = [&](const TensorSpec& s, const char* name) {
      if (s.dtype != dt)
        throw InvalidDType(op + ": " + std::string(name) + " is " + dtype_name(s.dtype) + " but x is " + dtype_name(dt) +
                           "; cast one first (baracuda.cast)");
    };
    same(desc.grad_out, "grad_out");
    if (impl->ninputs == 3) same(desc.y, "y");
  } else if (cat == RedCategory::ToShape) {
    out_must_be({dt});
  } else {
    switch (kind) {
      case RedKind::Sum: case RedKind::Prod:
        if (!fp) out_must_be({DType::Int64});
        else if (half && kind == RedKind::Sum) out_must_be({dt, DType::Float32});
        else out_must_be({dt});
        break;
      case RedKind::Mean: out_must_be(half ? std::vector<DType>{dt, DType::Float32} : std::vector<DType>{dt}); break;
      case RedKind::Argmax: case RedKind::Argmin: out_must_be({DType::Int64, DType::Int32}); break;
      case RedKind::Any: case RedKind::All: out_must_be({DType::Bool}); break;
      case RedKind::CountNonzero: out_must_be({DType::Int64}); break;
      default: out_must_be({dt});
    }
  }

  // Axes -> the reduced dims of x.
  const int r = int(x.shape.size());
  std::vector<bool> reduced(r, false);
  std::vector<int64_t> out_stride_of(r, 0);
  auto shape_must_be = [&](const std::vector<int64_t>& expected, const std::vector<int64_t>& got, const std::string& nm) {
    if (expected != got)
      throw InvalidArgument(op + ": " + nm + " must have shape " + shape_str(expected) + ", got " + shape_str(got));
  };
  std::vector<int64_t> reduced_shape;   // the forward output's shape (keepdim or not)
  std::vector<int> reduced_index(r, -1);  // x dim -> index in reduced_shape (-1: dropped)
  if (cat == RedCategory::ToShape) {
    if (!desc.axes.empty())
      throw InvalidArgument(op + ": axes must be empty, got " + axes_str(desc.axes) +
                            "; the target shape is out's shape");
    const auto& t = desc.out.shape;
    const int orank = int(t.size());
    if (orank > r)
      throw InvalidArgument(op + ": out of shape " + shape_str(t) + " has more dims than x of shape " +
                            shape_str(x.shape) + "; out must be broadcast-compatible with x");
    for (int d = 0; d < r; ++d) {
      const int od = d - (r - orank);
      if (od < 0) { reduced[d] = true; continue; }
      if (t[od] == x.shape[d]) { out_stride_of[d] = out_strides[od]; continue; }
      if (t[od] == 1) { reduced[d] = true; continue; }
      throw InvalidArgument(op + ": out of shape " + shape_str(t) + " is not broadcast-compatible with x of shape " +
                            shape_str(x.shape) + " (dimension " + std::to_string(od) + ": " + std::to_string(t[od]) +
                            " vs " + std::to_string(x.shape[d]) + "); each dim of out must equal x's or be 1");
    }
  } else {
    if (desc.axes.empty()) {
      std::fill(reduced.begin(), reduced.end(), true);
    } else {
      const int lim = std::max(r, 1);
      for (int64_t a : desc.axes) {
        if (a < -lim || a >= lim)
          throw InvalidArgument(op + ": axes " + axes_str(desc.axes) + " has " + std::to_string(a) +
                                ", out of range for x of rank " + std::to_string(r) + "; expected values in [" +
                                std::to_string(-lim) + ", " + std::to_string(lim - 1) + "]");
        if (r == 0) continue;
        const int d = int(a < 0 ? a + r : a);
        if (reduced[d])
          throw InvalidArgument(op + ": axes " + axes_str(desc.axes) + " names dimension " + std::to_string(d) +
                                " twice; expected distinct axes");
        reduced[d] = true;
      }
    }
    if ((kind == RedKind::Argmax || kind == RedKind::Argmin) && desc.axes.size() > 1)
      throw InvalidArgument(op + ": axes " + axes_str(desc.axes) +
                            " names several dims; expected one axis, or none for the flattened index");
    for (int d = 0; d < r; ++d) {
      if (!reduced[d] || desc.keepdim) {
        reduced_index[d] = int(reduced_shape.size());
        reduced_shape.push_back(reduced[d] ? 1 : x.shape[d]);
      }
    }
    if (impl->backward) {
      shape_must_be(x.shape, desc.out.shape, "out (grad_x)");
      shape_must_be(reduced_shape, desc.grad_out.shape, "grad_out");
      if (impl->ninputs == 3) shape_must_be(reduced_shape, desc.y.shape, "y");
    } else {
      shape_must_be(reduced_shape, desc.out.shape, "out");
      for (int d = 0; d < r; ++d)
        if (!reduced[d]) out_stride_of[d] = out_strides[reduced_index[d]];
    }
  }
  // Logical sizes (a broadcast x may be far larger than its memory): they must fit int64.
  int64_t R = 1, K = 1, total = 1;
  for (int d = 0; d < r; ++d) {
    int64_t& part = reduced[d] ? R : K;
    if (__builtin_mul_overflow(part, x.shape[d], &part) || __builtin_mul_overflow(total, x.shape[d], &total))
      throw Unsupported(op + ": x of shape " + shape_str(x.shape) + " has more than 2^63 - 1 elements");
  }
  if ((kind == RedKind::Argmax || kind == RedKind::Argmin) && desc.out.dtype == DType::Int32 && R - 1 > INT32_MAX)
    throw InvalidArgument(op + ": out is int32 but x has " + std::to_string(R) +
                          " elements along the reduced axis: indices past 2^31 - 1 do not fit int32; use an int64 out");
  const bool no_identity = kind == RedKind::Amax || kind == RedKind::Amin || kind == RedKind::Argmax ||
                           kind == RedKind::Argmin;
  if (!impl->backward && no_identity && R == 0)
    throw InvalidArgument(op + ": x of shape " + shape_str(x.shape) + " has no elements along the reduced axes " +
                          (desc.axes.empty() ? std::string("(all)") : axes_str(desc.axes)) + "; " + op +
                          " of an empty set is undefined (it has no identity)");

  KernelSku& k = impl->sku;
  k.category = "reduction";
  k.op = op;
  k.dtypes = {desc.out.dtype, dt};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  const DType facc = dt == DType::Float64 ? DType::Float64 : DType::Float32;
  pg.compute_dtype = fp ? facc : dt;
  pg.deterministic = true;
  pg.bit_stable = true;

  if (!impl->backward) {
    RedLaunch& L = impl->fwd;
    L.kind = kind;
    L.in_dtype = dt;
    L.out_dtype = desc.out.dtype;
    L.p0 = correction;
    build_geometry(L, x.shape, x.effective_strides(), reduced, out_stride_of, tuning(pref));
    refuse_oversized_grid(op, x, L);
    fit_workspace(L, pref.workspace_limit);
    impl->workspace = partial_bytes(L);
    k.layout = path_name(L);
    std::string shape_part;
    if (L.path == Path::Columns) shape_part = ".v" + std::to_string(L.vec) + ".y" + std::to_string(L.wy);
    else if (L.short_p > 0) shape_part = ".g8.r" + std::to_string(8 / L.short_p);  // 8 lanes, 8/P rows per group
    else shape_part = ".g" + std::to_string(L.group);
    k.name = "red." + k.layout + shape_part + (L.splits > 1 ? ".split" : "");
    switch (kind) {
      case RedKind::Sum: case RedKind::Mean: case RedKind::Prod:
        pg.accumulator_dtype = fp ? facc : DType::Int64;
        pg.math = fp ? std::string("sum in ") + dtype_name(facc) + " in a fixed order, one rounding to " +
                           dtype_name(desc.out.dtype)
                     : "exact int64 arithmetic (two's-complement wrap)";
        if (kind == RedKind::Prod && fp) pg.math = std::string("product in ") + dtype_name(facc) + ", one rounding";
        break;
      case RedKind::Amax: case RedKind::Amin:
        pg.accumulator_dtype = pg.compute_dtype;
        pg.math = "exact (comparisons only); NaN propagates";
        break;
      case RedKind::Argmax: case RedKind::Argmin:
        pg.accumulator_dtype = pg.compute_dtype;
        pg.math = "exact (comparisons only); first index of the extreme; NaN is the extreme";
        break;
      case RedKind::Any: case RedKind::All: case RedKind::CountNonzero:
        pg.accumulator_dtype = DType::Int64;
        pg.math = "exact";
        break;
      case RedKind::Var: case RedKind::Std:
        pg.accumulator_dtype = facc;
        pg.math = std::string("Welford in ") + dtype_name(facc) + ", Chan's merge in a fixed order, one rounding";
        break;
      default:
        pg.accumulator_dtype = facc;
        pg.math = std::string(dtype_name(facc)) + " math in a fixed order, one rounding to " + dtype_name(desc.out.dtype);
    }
    if (L.path == Path::Rows || (L.path == Path::Columns && L.vec > 1)) pg.math += "; vector loads (up to 16 bytes)";
    if (L.splits > 1) pg.math += "; " + std::to_string(L.splits) + " splits merged in order by a second pass";
    return ReductionPlan(impl);
  }

  // ---- backward: an optional statistics pass, then the broadcast map --------------------------
  reduction::BwdLaunch& B = impl->bwd;
  B.kind = BwdKind(info->kind);
  B.dtype = dt;
  B.n = double(R);
  B.correction = correction;
  RedKind pre = RedKind::Sum;
  switch (B.kind) {
    case BwdKind::Amax: pre = RedKind::MaxCountStat; B.has_pre = true; break;
    case BwdKind::Amin: pre = RedKind::MinCountStat; B.has_pre = true; break;
    case BwdKind::Prod: pre = RedKind::ProdZeroStat; B.has_pre = true; break;
    case BwdKind::Var: case BwdKind::Std: pre = RedKind::MeanStat; B.has_pre = true; break;
    default: break;
  }
  // Statistics layout: contiguous over x's kept dims in x's order, in Stat2 units.
  std::vector<int64_t> stat_stride(r, 0);
  {
    int64_t acc = 1;
    for (int d = r - 1; d >= 0; --d)
      if (!reduced[d]) { stat_stride[d] = acc; acc *= x.shape[d]; }
  }
  if (B.has_pre) {
    RedLaunch& P = B.pre;
    P.kind = pre;
    P.in_dtype = dt;
    P.out_dtype = dt;
    build_geometry(P, x.shape, x.effective_strides(), reduced, stat_stride, tuning(pref));
    refuse_oversized_grid(op, x, P);
    fit_workspace(P, pref.workspace_limit < 0 ? -1 : std::max<int64_t>(0, pref.workspace_limit - align256(K * reduction::stat_bytes(dt))));
    impl->stats_bytes = align256(K * reduction::stat_bytes(dt));
    impl->workspace = impl->stats_bytes + partial_bytes(P);
  }
  // The map: every operand's stride per x dim, grad_out / y mapped through the reduced shape.
  const auto xs = x.effective_strides();
  const auto gs = desc.grad_out.effective_strides();
  const auto ys = impl->ninputs == 3 ? desc.y.effective_strides() : std::vector<int64_t>(reduced_shape.size(), 0);
  MergedDims<reduction::kBwdArgs> m;
  for (int d = 0; d < r; ++d) {
    if (x.shape[d] == 1) continue;
    std::array<int64_t, reduction::kBwdArgs> s{out_strides[d], xs[d], 0, 0, 0};
    if (!reduced[d]) {
      s[2] = gs[reduced_index[d]];
      s[3] = ys[reduced_index[d]];
      s[4] = stat_stride[d];
    }
    m.push(x.shape[d], s);
  }
  B.rank = m.rank();
  B.numel = K * R;
  for (int i = 0; i < B.rank; ++i) {
    const int j = B.rank - 1 - i;  // innermost first
    B.shape[i] = m.size[j];
    for (int a = 0; a < reduction::kBwdArgs; ++a) B.stride[i][a] = m.stride[j][a];
  }
  k.layout = "broadcast_map";
  k.name = std::string("red.backward.map") + (B.has_pre ? "+stats." + path_name(B.pre) : "");
  pg.accumulator_dtype = facc;
  pg.math = std::string(dtype_name(facc)) + " math, one rounding to " + dtype_name(dt);
  if (B.has_pre) pg.math += std::string("; statistics reduced in ") + dtype_name(facc) + " in a fixed order";
  return ReductionPlan(impl);
}

const KernelSku& ReductionPlan::sku() const { return impl_->sku; }
const ReductionDescriptor& ReductionPlan::descriptor() const { return impl_->desc; }
int64_t ReductionPlan::workspace_bytes() const { return impl_->workspace; }
int ReductionPlan::num_inputs() const { return impl_->ninputs; }

void ReductionPlan::run(const TensorView& out, const TensorView* inputs, int num_inputs, void* workspace,
                        int64_t workspace_size, StreamHandle stream) const {
  const Impl& I = *impl_;
  const std::string& op = I.info->name;
  if (num_inputs != I.ninputs)
    throw InvalidArgument(op + ": run() got " + std::to_string(num_inputs) + " inputs, the plan takes " +
                          std::to_string(I.ninputs) + (I.backward ? " (grad_out, x[, y])" : " (x)"));
  auto check = [&](const TensorView& v, const TensorSpec& s, const std::string& name) {
    check_view(op, name, v, s, out.device);
  };
  static const char* kFwdNames[] = {"x"};
  static const char* kBwdNames[] = {"grad_out", "x", "y"};
  const char** names = I.backward ? kBwdNames : kFwdNames;
  check(out, I.desc.out, "out");
  if (I.backward) {
    check(inputs[0], I.desc.grad_out, "grad_out");
    check(inputs[1], I.desc.input, "x");
    if (num_inputs == 3) check(inputs[2], I.desc.y, "y");
  } else {
    check(inputs[0], I.desc.input, "x");
  }
  const auto orange = byte_range(out);
  for (int i = 0; i < num_inputs; ++i) {
    const auto rg = byte_range(inputs[i]);
    if (rg.first < orange.second && orange.first < rg.second)
      throw InvalidArgument(op + ": out overlaps " + names[i] + "; reductions cannot run in place");
  }
  if (I.workspace > 0) {
    std::vector<NamedView> operands{{"out", &out}};
    for (int i = 0; i < num_inputs; ++i) operands.push_back({names[i], &inputs[i]});
    check_workspace(op, workspace, workspace_size, I.workspace, operands);
  }
  if (out.numel() == 0) return;

  DeviceGuard guard(out.device);
  if (!I.backward) {
    RedLaunch L = I.fwd;
    L.in = inputs[0].data;
    L.out = out.data;
    L.workspace = workspace;
    reduction::launch(L, stream);
    return;
  }
  reduction::BwdLaunch B = I.bwd;
  B.gx = out.data;
  B.g = inputs[0].data;
  B.x = inputs[1].data;
  B.y = num_inputs == 3 ? inputs[2].data : nullptr;
  if (B.has_pre) {
    B.pre.in = inputs[1].data;
    B.pre.out = workspace;
    B.pre.workspace = static_cast<char*>(workspace) + I.stats_bytes;
    B.stat = workspace;
  }
  reduction::launch_backward(B, stream);
}

}  // namespace baracuda
