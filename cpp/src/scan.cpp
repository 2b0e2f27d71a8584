// ScanPlan: the op table, validation, geometry (axis + the other dims coalesced), kernel
// choice (rows / columns, group size, vector width, split), SKU, and the thin run().
#include "baracuda/scan.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "common/knobs.h"
#include "plan_util.h"
#include "scan/scan_launch.h"

namespace baracuda {

namespace {

using scan::Path;
using scan::ScanKind;
using scan::ScanLaunch;

const std::vector<DType> kFloats = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
const std::vector<DType> kAll = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64, DType::Bool,
                                 DType::Int8, DType::UInt8, DType::Int16, DType::Int32, DType::Int64};
const std::vector<DType> kExt = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64,
                                 DType::Int8, DType::UInt8, DType::Int16, DType::Int32, DType::Int64};

std::vector<ScanOpInfo> build_ops() {
  const std::vector<std::string> x{"x"}, g{"grad_out"}, gxy{"grad_out", "x", "y"};
  const std::vector<std::string> o{"out"}, vi{"values", "indices"}, gx{"grad_x"};
  return {
      {"cumsum", int(ScanKind::Cumsum), false, x, o, kAll,
       "same for floats (f32 also for f16 / bf16); int64 for integers and bool", "cumsum_backward",
       "Inclusive prefix sum along an axis"},
      {"cumprod", int(ScanKind::Cumprod), false, x, o, kAll, "same for floats; int64 for integers and bool",
       "cumprod_backward", "Inclusive prefix product along an axis"},
      {"cummax", int(ScanKind::Cummax), false, x, vi, kExt, "values: same; indices: int64", "",
       "Running maximum and the index of the last occurrence (NaN propagates, as torch)"},
      {"cummin", int(ScanKind::Cummin), false, x, vi, kExt, "values: same; indices: int64", "",
       "Running minimum and the index of the last occurrence (NaN propagates, as torch)"},
      {"logcumsumexp", int(ScanKind::Logcumsumexp), false, x, o, kFloats, "same", "logcumsumexp_backward",
       "log(cumsum(exp(x))) along an axis, without overflow"},
      {"cumsum_backward", int(ScanKind::CumsumBackward), true, g, gx, kFloats, "same",
       "", "Gradient of cumsum: the reverse prefix sum of grad_out"},
      {"cumprod_backward", int(ScanKind::CumprodBackward), true, gxy, gx, kFloats, "same", "",
       "Gradient of cumprod (y = cumprod(x)); exact at zeros of x, as torch"},
      {"logcumsumexp_backward", int(ScanKind::LogcumsumexpBackward), true, gxy, gx, kFloats, "same", "",
       "Gradient of logcumsumexp (y = logcumsumexp(x))"},
  };
}

std::string join_names(const std::vector<DType>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::string(dtype_name(v[i]));
  return s;
}

// Tuning knobs: BARACUDA_SCAN_CFG="threads=256,group=0,vec=1,pf=1,cvec=1,split=-1,min_seg=4096,
// target=8448,col_min_seg=16,col_target=270336" (read at select()).
struct Knobs {
  int threads = 256;          // threads per block (64..256)
  int group = 0;              // rows: lanes per row, 0 = by row length (4, 16, 32); 4, 8, 16, 32
  bool vec = true;            // rows: 16-byte loads when aligned
  bool pf = true;             // rows, group 32: the next tiles loaded while these are scanned
  bool cvec = true;           // columns: 16-byte loads (adjacent rows per thread) when contiguous
  int64_t split = -1;         // -1 auto, 0 never, N > 0: force N segments (clamped)
  int64_t min_seg = 4096;     // rows: the shortest segment of a split row (elements)
  int64_t target = 8448;      // rows: groups of 32 lanes that fill the GPU (132 SMs x 64 warps)
  int64_t col_min_seg = 16;   // columns: the shortest segment (axis steps)
  int64_t col_target = 270336;  // columns: threads that fill the GPU (132 x 2048)
};

Knobs read_knobs(const PlanPreference& pref) {
  Knobs k;
  for (const Knob& kn : tuning_knobs("scan", pref.tuning, "BARACUDA_SCAN_CFG",
                                     {"threads", "group", "vec", "pf", "cvec", "split", "min_seg", "target",
                                      "col_min_seg", "col_target"})) {
    const std::string& key = kn.key;
    const int64_t v = kn.num();
    if (key == "threads") k.threads = int(std::clamp<int64_t>(v / 32 * 32, 64, 256));
    else if (key == "group") {
      if (v != 0 && v != 4 && v != 8 && v != 16 && v != 32)
        throw InvalidArgument("scan: tuning group=" + kn.value + ": expected 0 (by row length), 4, 8, 16 or 32");
      if (v != 0 && !scan::rows_group_built(int(v)))
        throw InvalidArgument("scan: tuning group=" + kn.value + " names a kernel this build leaves out (never "
                              "select's pick); build with -DBARACUDA_SWEEP_KERNELS=ON for every tuning variant");
      k.group = int(v);
    }
    else if (key == "vec") k.vec = v != 0;
    else if (key == "pf") k.pf = v != 0;
    else if (key == "cvec") k.cvec = v != 0;
    else if (key == "split") k.split = v;
    else if (key == "min_seg") k.min_seg = std::max<int64_t>(1, v);
    else if (key == "target") k.target = std::max<int64_t>(1, v);
    else if (key == "col_min_seg") k.col_min_seg = std::max<int64_t>(1, v);
    else if (key == "col_target") k.col_target = std::max<int64_t>(1, v);
  }
  return k;
}

}  // namespace

const std::vector<ScanOpInfo>& scan_ops() {
  static const std::vector<ScanOpInfo> ops = build_ops();
  return ops;
}

const ScanOpInfo* find_scan_op(const std::string& name) {
  for (const auto& r : scan_ops())
    if (r.name == name) return &r;
  return nullptr;
}

FamilyInfo scan_family_info() {
  FamilyInfo f{"scan", "ScanPlan",
               "cumsum, cumprod, cummax / cummin (values and indices), logcumsumexp along any axis; with backward",
               {}};
  for (const auto& r : scan_ops()) {
    if (r.is_backward) continue;  // listed through has_backward on the forward row
    f.ops.push_back(OpCoverage{r.name, "scan", r.dtypes, {"rows", "columns"}, Backend::Bespoke, !r.backward.empty()});
  }
  return f;
}

struct ScanPlan::Impl {
  ScanDescriptor desc;
  const ScanOpInfo* info = nullptr;
  KernelSku sku;
  ScanLaunch L;
  int64_t workspace = 0;
  int64_t numel = 0;
};

std::string ScanDescriptor::str() const {
  std::ostringstream os;
  os << "ScanDescriptor(" << op << ", inputs=[";
  for (size_t i = 0; i < inputs.size(); ++i) os << (i ? ", " : "") << inputs[i].str();
  os << "], axis=" << axis << ", outputs=[";
  for (size_t i = 0; i < outputs.size(); ++i) os << (i ? ", " : "") << outputs[i].str();
  os << "])";
  return os.str();
}

ScanPlan ScanPlan::select(const ScanDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  impl->desc = desc;
  const ScanOpInfo* info = find_scan_op(desc.op);
  if (!info) throw InvalidArgument("scan: unknown op '" + desc.op + "' (see baracuda.scan_ops())");
  impl->info = info;
  const std::string& op = info->name;
  const ScanKind kind = ScanKind(info->kind);
  if (!pref.allows(Backend::Bespoke))
    throw Unsupported(op + ": the only backend for scans is 'bespoke', and the preference forbids it");

  auto names = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s;
  };
  if (desc.inputs.size() != info->inputs.size())
    throw InvalidArgument(op + ": inputs has " + std::to_string(desc.inputs.size()) + " specs; expected " +
                          std::to_string(info->inputs.size()) + " (" + names(info->inputs) + ")");
  if (desc.outputs.size() != info->outputs.size())
    throw InvalidArgument(op + ": outputs has " + std::to_string(desc.outputs.size()) + " specs; expected " +
                          std::to_string(info->outputs.size()) + " (" + names(info->outputs) + ")");

  auto check_spec = [&](const TensorSpec& s, const std::string& name) { baracuda::check_spec(op, s, name); };
  for (size_t i = 0; i < desc.inputs.size(); ++i) check_spec(desc.inputs[i], info->inputs[i]);
  for (size_t i = 0; i < desc.outputs.size(); ++i) check_spec(desc.outputs[i], info->outputs[i]);

  // Dtypes.
  const TensorSpec& x = desc.inputs[0];
  const std::string& xname = info->inputs[0];
  const DType dt = x.dtype;
  if (std::find(info->dtypes.begin(), info->dtypes.end(), dt) == info->dtypes.end())
    throw InvalidDType(op + ": " + xname + " is " + std::string(dtype_name(dt)) + "; supported: " +
                       join_names(info->dtypes));
  const bool fp = is_floating(dt);
  const bool half = dt == DType::Float16 || dt == DType::BFloat16;
  for (size_t i = 1; i < desc.inputs.size(); ++i)
    if (desc.inputs[i].dtype != dt)
      throw InvalidDType(op + ": " + info->inputs[i] + " is " + dtype_name(desc.inputs[i].dtype) + " but " + xname +
                         " is " + dtype_name(dt) + "; cast one first (baracuda.cast)");
  const DType odt = desc.outputs[0].dtype;
  auto out_must_be = [&](std::vector<DType> ok) {
    if (std::find(ok.begin(), ok.end(), odt) == ok.end())
      throw InvalidDType(op + ": " + info->outputs[0] + " is " + std::string(dtype_name(odt)) + "; expected " +
                         join_names(ok) + " for " + xname + " of " + dtype_name(dt));
  };
  if (kind == ScanKind::Cumsum) {
    out_must_be(!fp ? std::vector<DType>{DType::Int64} : half ? std::vector<DType>{dt, DType::Float32} : std::vector<DType>{dt});
  } else if (kind == ScanKind::Cumprod) {
    out_must_be(!fp ? std::vector<DType>{DType::Int64} : std::vector<DType>{dt});
  } else {
    out_must_be({dt});
  }
  if (kind == ScanKind::Cummax || kind == ScanKind::Cummin) {
    if (desc.outputs[1].dtype != DType::Int64)
      throw InvalidDType(op + ": indices is " + std::string(dtype_name(desc.outputs[1].dtype)) + "; expected int64");
  }

  // Shapes: every operand has x's shape.
  for (size_t i = 1; i < desc.inputs.size(); ++i)
    if (desc.inputs[i].shape != x.shape)
      throw InvalidArgument(op + ": " + info->inputs[i] + " must have shape " + shape_str(x.shape) + " (" + xname +
                            "'s), got " + shape_str(desc.inputs[i].shape));
  for (size_t i = 0; i < desc.outputs.size(); ++i)
    if (desc.outputs[i].shape != x.shape)
      throw InvalidArgument(op + ": " + info->outputs[i] + " must have shape " + shape_str(x.shape) + " (" + xname +
                            "'s), got " + shape_str(desc.outputs[i].shape));
  for (size_t i = 0; i < desc.outputs.size(); ++i) {
    const auto st = desc.outputs[i].effective_strides();
    if (!non_overlapping(desc.outputs[i].shape, st))
      throw InvalidArgument(op + ": " + info->outputs[i] + " has overlapping elements (strides " + shape_str(st) +
                            " for shape " + shape_str(desc.outputs[i].shape) + "); outputs need one element per index");
  }

  // Axis.
  const int r = int(x.shape.size());
  const int lim = std::max(r, 1);
  if (desc.axis < -lim || desc.axis >= lim)
    throw InvalidArgument(op + ": axis " + std::to_string(desc.axis) + " is out of range for " + xname + " of rank " +
                          std::to_string(r) + "; expected a value in [" + std::to_string(-lim) + ", " +
                          std::to_string(lim - 1) + "]");
  const int ax = r == 0 ? -1 : int(desc.axis < 0 ? desc.axis + r : desc.axis);

  // Geometry: operand slots in0..in2, out0..out1.
  ScanLaunch& L = impl->L;
  L.kind = kind;
  L.in_dtype = dt;
  L.out_dtype = odt;
  L.reverse = info->is_backward;
  std::vector<std::vector<int64_t>> strides(scan::kOps, std::vector<int64_t>(r, 0));
  for (size_t i = 0; i < desc.inputs.size(); ++i) strides[i] = desc.inputs[i].effective_strides();
  for (size_t i = 0; i < desc.outputs.size(); ++i) strides[3 + i] = desc.outputs[i].effective_strides();
  L.L = ax < 0 ? 1 : x.shape[ax];
  for (int k = 0; k < scan::kOps; ++k) L.axis_stride[k] = ax < 0 ? 0 : strides[k][ax];
  struct Dim {
    int64_t size;
    std::array<int64_t, scan::kOps> st;
  };
  std::vector<Dim> dims;
  const int64_t numel = checked_numel(op, "x", x.shape);
  impl->numel = numel;
  for (int d = 0; d < r; ++d) {
    if (d == ax || x.shape[d] == 1) continue;
    Dim D{x.shape[d], {}};
    for (int k = 0; k < scan::kOps; ++k) D.st[k] = strides[k][d];
    dims.push_back(D);
  }
  // Innermost first: by |stride| of the first input, then merge dims that are contiguous for all
  // (pushed outermost first).
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dim& a, const Dim& b) { return std::llabs(a.st[0]) < std::llabs(b.st[0]); });
  MergedDims<scan::kOps> merged;
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) merged.push(d->size, d->st);
  L.nrd = merged.rank();
  L.rows = 1;
  for (int i = 0; i < L.nrd; ++i) {
    const int j = L.nrd - 1 - i;  // innermost first
    L.rsize[i] = merged.size[j];
    for (int k = 0; k < scan::kOps; ++k) L.rstride[i][k] = merged.stride[j][k];
    L.rows *= merged.size[j];
  }
  if (numel == 0) L.rows = 0;

  // Which slots the op uses, and the vector width of the 16-byte paths.
  const bool vec_op = kind == ScanKind::Cumsum || kind == ScanKind::Cumprod || kind == ScanKind::Logcumsumexp ||
                      kind == ScanKind::CumsumBackward;
  std::vector<int> used;
  for (size_t i = 0; i < desc.inputs.size(); ++i) used.push_back(int(i));
  for (size_t i = 0; i < desc.outputs.size(); ++i) used.push_back(3 + int(i));
  const int V = int(16 / dtype_size(dt));
  const Knobs kn = read_knobs(pref);
  L.threads = kn.threads;

  bool unit_axis = L.L > 1;
  for (int k : used) unit_axis = unit_axis && L.axis_stride[k] == 1;
  L.path = unit_axis ? Path::Rows : Path::Columns;
  L.nseg = 1;
  L.seg = 0;
  if (L.path == Path::Rows) {
    // cummax / cummin: rows only, 2-byte and wider types (ExtOp::kVecIdx in cuda/scan/ops.cuh).
    const bool ext_vec = (kind == ScanKind::Cummax || kind == ScanKind::Cummin) && dtype_size(dt) >= 2;
    bool vec = (vec_op || ext_vec) && kn.vec && V > 1 && (!L.reverse || L.L % V == 0);
    for (int i = 0; i < L.nrd && vec; ++i)
      for (int k : used) vec = vec && L.rstride[i][k] % V == 0;
    L.vec = vec ? V : 1;
    const int64_t nv = (L.L + L.vec - 1) / L.vec;
    // 4 lanes up to 8 vectors (a bf16 row of 64: on H200 g4 ran at 38.5% of copy vs 21.7% for
    // g8, cumsum [1M, 64]), then 16, then a warp.
    L.group = kn.group ? kn.group : (nv <= 8 ? 4 : nv <= 16 ? 16 : 32);
    L.prefetch = kn.pf && L.group == 32 &&
                 scan::prefetch_fits(scan::state_bytes(kind, dt, odt), L.vec, ext_vec);
    // Split a few long rows over many warps (segments are whole unrolled tiles of 32 lanes).
    const int64_t tile = int64_t(32) * L.vec * 4;
    if (L.group == 32 && L.rows > 0 && kn.split != 0) {
      int64_t want = kn.split > 0 ? kn.split
                                  : (L.rows < kn.target / 2 ? (kn.target + L.rows - 1) / L.rows : int64_t(1));
      want = std::min<int64_t>(want, std::max<int64_t>(1, L.L / std::max(kn.min_seg, tile)));
      want = std::clamp<int64_t>(want, 1, 65536);
      if (want > 1) {
        L.seg = (L.L + want - 1) / want;
        L.seg = (L.seg + tile - 1) / tile * tile;
        L.nseg = (L.L + L.seg - 1) / L.seg;
      }
    }
  } else {
    bool cv = vec_op && kn.cvec && V > 1 && L.nrd >= 1 && L.rsize[0] % V == 0;
    for (int k : used) {
      if (!cv) break;
      cv = L.rstride[0][k] == 1 && L.axis_stride[k] % V == 0;
      for (int i = 1; i < L.nrd && cv; ++i) cv = L.rstride[i][k] % V == 0;
    }
    L.cvec = cv ? V : 1;
    const int64_t groups = L.rows / L.cvec;
    if (groups > 0 && L.L > 1 && kn.split != 0) {
      int64_t want = kn.split > 0 ? kn.split
                                  : (groups < kn.col_target / 2 ? (kn.col_target + groups - 1) / groups : int64_t(1));
      want = std::min<int64_t>(want, std::max<int64_t>(1, L.L / kn.col_min_seg));
      want = std::clamp<int64_t>(want, 1, 65536);
      if (want > 1) {
        L.seg = (L.L + want - 1) / want;
        L.nseg = (L.L + L.seg - 1) / L.seg;
      }
    }
  }
  if (L.nseg <= 1) { L.nseg = 1; L.seg = 0; }
  auto ws_of = [&](const ScanLaunch& l) {
    return l.nseg > 1 ? align256(l.rows * l.nseg * scan::state_bytes(kind, dt, odt)) : int64_t(0);
  };
  // Fit the workspace limit by halving the segments.
  while (L.nseg > 1 && pref.workspace_limit >= 0 && ws_of(L) > pref.workspace_limit) {
    const int64_t s = L.nseg / 2;
    if (s <= 1) { L.nseg = 1; L.seg = 0; break; }
    const int64_t tile = L.path == Path::Rows ? int64_t(32) * L.vec * 4 : 1;
    L.seg = ((L.L + s - 1) / s + tile - 1) / tile * tile;
    L.nseg = (L.L + L.seg - 1) / L.seg;
  }
  if (L.nseg <= 1) { L.nseg = 1; L.seg = 0; }
  impl->workspace = ws_of(L);

  // SKU.
  KernelSku& k = impl->sku;
  k.category = "scan";
  k.op = op;
  k.dtypes.clear();
  for (const auto& s : desc.outputs) k.dtypes.push_back(s.dtype);
  for (const auto& s : desc.inputs) k.dtypes.push_back(s.dtype);
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  k.layout = L.path == Path::Rows ? "rows" : "columns";
  k.name = "scan." + k.layout +
           (L.path == Path::Rows ? ".g" + std::to_string(L.group) + ".v" + std::to_string(L.vec)
                                 : ".v" + std::to_string(L.cvec)) +
           (L.path == Path::Rows && L.prefetch ? ".p" : "") + (L.nseg > 1 ? ".split" : "");
  auto& pg = k.precision;
  const DType facc = (dt == DType::Float64 || odt == DType::Float64) ? DType::Float64 : DType::Float32;
  pg.compute_dtype = fp ? facc : DType::Int64;
  pg.accumulator_dtype = pg.compute_dtype;
  pg.deterministic = true;
  pg.bit_stable = true;
  const std::string order =
      L.path == Path::Rows ? "parallel scan (lane-sequential runs, shuffle tree across lanes, chained carry over tiles"
                           : "sequential along the axis per column (";
  const std::string split = L.nseg > 1 ? "; " + std::to_string(L.nseg) + " segments joined by a scan of their totals)"
                                       : ")";
  switch (kind) {
    case ScanKind::Cumsum: case ScanKind::CumsumBackward: case ScanKind::Cumprod:
      if (!fp) {
        pg.math = "exact int64 arithmetic (two's-complement wrap)";
      } else {
        pg.math = std::string(kind == ScanKind::Cumprod ? "products" : "sums") + " in " + dtype_name(facc) + ", " +
                  order + split + ", one rounding per output to " + dtype_name(odt) +
                  "; the order differs from a sequential scan: error ~ log2(n) eps_" + dtype_name(facc) + " x " +
                  (kind == ScanKind::Cumprod ? "|prefix product|" : "the prefix sum of |x|");
      }
      break;
    case ScanKind::Cummax: case ScanKind::Cummin:
      pg.math = "exact (comparisons only); ties take the later index; NaN propagates and its index is the last NaN's";
      break;
    case ScanKind::Logcumsumexp:
      pg.math = std::string("log-sum-exp held as (max, sum of exp(x - max)) in ") + dtype_name(facc) + ", " + order +
                split + (dt == DType::Float16 || dt == DType::BFloat16 ? ", MUFU exp / log" : "") +
                ", one log and one rounding per output; error ~ log2(n) eps_" + dtype_name(facc) + " x (|y| + 1)";
      break;
    case ScanKind::CumprodBackward:
      pg.math = std::string(dtype_name(facc)) + " math, reverse " + order + split +
                "; torch's formula (division by x before the first zero, the zero's own term by products)";
      break;
    case ScanKind::LogcumsumexpBackward:
      pg.math = std::string(dtype_name(facc)) + " math, reverse " + order + split +
                "; torch's formula (log-space sums of the positive and negative parts of grad_out)";
      break;
  }
  if ((L.path == Path::Rows && L.vec > 1) || (L.path == Path::Columns && L.cvec > 1)) pg.math += "; 16-byte vector loads";
  if (L.path == Path::Rows && L.prefetch)
    pg.math += "; the next tiles loaded while a warp scans the current ones";
  return ScanPlan(impl);
}

const KernelSku& ScanPlan::sku() const { return impl_->sku; }
const ScanDescriptor& ScanPlan::descriptor() const { return impl_->desc; }
int64_t ScanPlan::workspace_bytes() const { return impl_->workspace; }
int ScanPlan::num_inputs() const { return int(impl_->info->inputs.size()); }
int ScanPlan::num_outputs() const { return int(impl_->info->outputs.size()); }

void ScanPlan::run(const TensorView* outputs, int num_outputs, const TensorView* inputs, int num_inputs,
                   void* workspace, int64_t workspace_size, StreamHandle stream) const {
  const Impl& I = *impl_;
  const ScanOpInfo& info = *I.info;
  const std::string& op = info.name;
  if (num_inputs != int(info.inputs.size()))
    throw InvalidArgument(op + ": run() got " + std::to_string(num_inputs) + " inputs, the plan takes " +
                          std::to_string(info.inputs.size()));
  if (num_outputs != int(info.outputs.size()))
    throw InvalidArgument(op + ": run() got " + std::to_string(num_outputs) + " outputs, the plan takes " +
                          std::to_string(info.outputs.size()));
  const int device = outputs[0].device;
  for (int i = 0; i < num_outputs; ++i)
    check_view(op, info.outputs[i], outputs[i], I.desc.outputs[i], device, info.outputs[0].c_str());
  for (int i = 0; i < num_inputs; ++i)
    check_view(op, info.inputs[i], inputs[i], I.desc.inputs[i], device, info.outputs[0].c_str());
  // Outputs may not overlap inputs (the rows kernel reads ahead) nor each other.
  for (int o = 0; o < num_outputs; ++o) {
    const auto orange = byte_range(outputs[o]);
    for (int i = 0; i < num_inputs; ++i)
      if (ranges_overlap(orange, byte_range(inputs[i])))
        throw InvalidArgument(op + ": " + info.outputs[o] + " overlaps " + info.inputs[i] +
                              "; scans cannot run in place");
    for (int p = o + 1; p < num_outputs; ++p)
      if (ranges_overlap(orange, byte_range(outputs[p])))
        throw InvalidArgument(op + ": " + info.outputs[o] + " overlaps " + info.outputs[p]);
  }
  if (I.workspace > 0) {
    std::vector<NamedView> operands;
    for (int o = 0; o < num_outputs; ++o) operands.push_back({info.outputs[o], &outputs[o]});
    for (int i = 0; i < num_inputs; ++i) operands.push_back({info.inputs[i], &inputs[i]});
    check_workspace(op, workspace, workspace_size, I.workspace, operands);
  }
  if (I.numel == 0) return;

  DeviceGuard guard(device);
  ScanLaunch L = I.L;
  for (int i = 0; i < num_inputs; ++i) L.in[i] = inputs[i].data;
  for (int o = 0; o < num_outputs; ++o) L.out[o] = outputs[o].data;
  L.workspace = workspace;
  scan::launch(L, stream);
}

}  // namespace baracuda
