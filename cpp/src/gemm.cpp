// GemmPlan: validation, the cuBLASLt problem (layouts, epilogue, algorithm per device and
// pointer alignment) and the decode-regime kernel of ours; run() is in gemm_run.cpp.
#include "baracuda/gemm.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "baracuda/elementwise.h"
#include "baracuda/errors.h"
#include "common/knobs.h"
#include "cublaslt_api.h"
#include "device_guard.h"
#include "gemm/gemm_launch.h"
#include "gemm_impl.h"
#include "plan_util.h"

namespace baracuda {
using namespace gemm_detail;

const char* epilogue_name(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::None: return "none";
    case GemmEpilogue::Relu: return "relu";
    case GemmEpilogue::Gelu: return "gelu";
    case GemmEpilogue::GeluTanh: return "gelu_tanh";
    case GemmEpilogue::Silu: return "silu";
    case GemmEpilogue::DGeluTanh: return "dgelu_tanh";
    case GemmEpilogue::BiasGrad: return "bias_grad";
  }
  return "?";
}

GemmEpilogue epilogue_from_name(const std::string& name) {
  for (auto e : {GemmEpilogue::None, GemmEpilogue::Relu, GemmEpilogue::Gelu, GemmEpilogue::GeluTanh,
                 GemmEpilogue::Silu, GemmEpilogue::DGeluTanh, GemmEpilogue::BiasGrad})
    if (name == epilogue_name(e)) return e;
  throw InvalidArgument("gemm: epilogue '" + name +
                        "' is unknown; expected none, relu, gelu, gelu_tanh, silu, dgelu_tanh or bias_grad");
}

namespace {
const char* scale_name(GemmScale s) {
  return s == GemmScale::None ? "none" : (s == GemmScale::Tensor ? "tensor" : "vector");
}
}  // namespace

bool GemmDescriptor::operator==(const GemmDescriptor& o) const {
  return a == o.a && b == o.b && out == o.out && alpha == o.alpha && beta == o.beta && epilogue == o.epilogue &&
         bias == o.bias && (!bias || bias_dtype == o.bias_dtype) && aux == o.aux && bias_grad == o.bias_grad &&
         a_scale == o.a_scale && b_scale == o.b_scale && amax == o.amax;
}

std::string GemmDescriptor::str() const {
  std::ostringstream s;
  s << "GemmDescriptor(a=" << a.str() << ", b=" << b.str() << ", out=" << out.str() << ", alpha=" << alpha
    << ", beta=" << beta << ", epilogue=" << epilogue_name(epilogue);
  if (bias) s << ", bias=" << dtype_name(bias_dtype);
  if (aux) s << ", aux";
  if (bias_grad) s << ", bias_grad=" << dtype_name(bias_dtype);
  if (a_scale != GemmScale::None) s << ", a_scale=" << scale_name(a_scale);
  if (b_scale != GemmScale::None) s << ", b_scale=" << scale_name(b_scale);
  if (amax) s << ", amax";
  s << ")";
  return s.str();
}

namespace {


bool is_float(DType d) {
  return d == DType::Float16 || d == DType::BFloat16 || d == DType::Float32 || d == DType::Float64;
}

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    case DType::Float64: return CUDA_R_64F;
    case DType::Float8E4M3: return CUDA_R_8F_E4M3;
    case DType::Float8E5M2: return CUDA_R_8F_E5M2;
    case DType::Int8: return CUDA_R_8I;
    case DType::Int32: return CUDA_R_32I;
    default: throw Unsupported(std::string("gemm: no cuBLASLt type for ") + dtype_name(d));
  }
}

// The last two dims of an operand: logical rows x cols with their strides (size-1 dims get
// the stride that makes them "contiguous", so either storage order fits).
struct Mat {
  int64_t rows = 0, cols = 0, rs = 0, cs = 0;
  bool row_major() const { return cs == 1 || cols == 1; }  // cols contiguous
  bool col_major() const { return rs == 1 || rows == 1; }  // rows contiguous
};

Mat mat_of(const TensorSpec& s) {
  const auto st = s.effective_strides();
  const size_t r = s.shape.size();
  Mat m{s.shape[r - 2], s.shape[r - 1], st[r - 2], st[r - 1]};
  if (m.cols == 1) m.cs = 1;
  if (m.rows == 1) m.rs = 1;
  return m;
}

// How one operand is handed to cuBLASLt (column-major): op and the stored matrix.
struct LtMat {
  bool trans = false;
  int64_t rows = 0, cols = 0, ld = 0;
};

// Make op(stored) equal X (want_t = false) or X^T (want_t = true) for a logical matrix X.
// need_trans = 0 / 1 forces cuBLASLt's op for this operand (fp8 and int8 take only "TN").
LtMat lt_operand(const Mat& x, bool want_t, const std::string& name, int need_trans = -1) {
  LtMat L;
  // Stored as column-major: X itself when its rows are contiguous, X^T when its cols are.
  const bool can_x = x.col_major(), can_xt = x.row_major();
  if (!can_x && !can_xt)
    throw InvalidArgument(std::string(kOp) + ": " + name + " has strides (" + std::to_string(x.rs) + ", " +
                          std::to_string(x.cs) + ") in its last two dims; one of them must be 1 (a row- or "
                          "column-major matrix with a leading dimension); make it contiguous first");
  // Prefer the storage that needs no transpose; either is free for cuBLASLt.
  bool store_x = need_trans >= 0 ? (want_t == bool(need_trans)) : (want_t ? !can_xt : can_x);
  if (store_x ? !can_x : !can_xt)
    throw InvalidArgument(std::string(kOp) + ": fp8 and int8 need a and b contiguous along K (a row-major "
                          "[M, K]; b column-major [K, N], e.g. w.t() of a row-major weight w [N, K]); " + name +
                          " has strides (" + std::to_string(x.rs) + ", " + std::to_string(x.cs) + ")");
  if (store_x) {  // stored = X (rows x cols, ld = column stride)
    L.rows = x.rows; L.cols = x.cols; L.ld = x.cs; L.trans = want_t;
  } else {        // stored = X^T (cols x rows, ld = row stride)
    L.rows = x.cols; L.cols = x.rows; L.ld = x.rs; L.trans = !want_t;
  }
  if (L.cols <= 1) L.ld = std::max<int64_t>(L.ld, std::max<int64_t>(1, L.rows));
  if (L.ld < std::max<int64_t>(1, L.rows))
    throw InvalidArgument(std::string(kOp) + ": " + name + " has a leading dimension of " + std::to_string(L.ld) +
                          " for " + std::to_string(L.rows) + " contiguous elements: its rows overlap "
                          "(e.g. a stride-0 expand); make it contiguous first");
  return L;
}

Batch batch_of(const GemmDescriptor& d) {
  const size_t ro = d.out.shape.size();
  const size_t nb = ro - 2;
  std::vector<const TensorSpec*> specs = {&d.out, &d.a, &d.b};
  const char* names[] = {"out", "a", "b"};
  std::vector<std::vector<int64_t>> strides(3, std::vector<int64_t>(nb, 0));
  for (int k = 0; k < 3; ++k) {
    const auto& s = *specs[k];
    const auto st = s.effective_strides();
    const size_t r = s.shape.size();
    if (r - 2 > nb)
      throw InvalidArgument(std::string(kOp) + ": " + names[k] + " has " + std::to_string(r - 2) +
                            " batch dims but out has " + std::to_string(nb));
    for (size_t i = 0; i < r - 2; ++i) {
      const size_t j = nb - (r - 2) + i;
      if (s.shape[i] == d.out.shape[j]) {
        strides[k][j] = s.shape[i] == 1 ? 0 : st[i];
      } else if (s.shape[i] == 1) {
        strides[k][j] = 0;
      } else {
        throw InvalidArgument(std::string(kOp) + ": " + names[k] + " of shape " + shape_str(s.shape) +
                              " does not broadcast to out's batch dims " +
                              shape_str(std::vector<int64_t>(d.out.shape.begin(), d.out.shape.end() - 2)));
      }
    }
  }
  Batch B;
  // Merge batch dims from the inside out; every operand must stay one (count, stride).
  std::vector<int64_t> sz, st[3];
  for (size_t j = 0; j < nb; ++j) {
    if (d.out.shape[j] == 1) continue;
    sz.push_back(d.out.shape[j]);
    for (int k = 0; k < 3; ++k) st[k].push_back(strides[k][j]);
  }
  while (sz.size() > 1) {
    const size_t i = sz.size() - 2;
    for (int k = 0; k < 3; ++k)
      if (st[k][i] != st[k][i + 1] * sz[i + 1])
        throw Unsupported(std::string(kOp) + ": the batch dims of " + names[k] +
                          " do not flatten into one stride (cuBLASLt takes one batch stride per operand); "
                          "make " + names[k] + " contiguous or reshape the batch to one dim");
    sz[i] *= sz[i + 1];
    sz.pop_back();
    for (int k = 0; k < 3; ++k) {
      st[k][i] = st[k][i + 1];  // the merged dim steps by the inner dim's stride
      st[k].pop_back();
    }
  }
  if (!sz.empty()) {
    B.count = sz[0];
    B.stride_out = st[0][0];
    B.stride_a = st[1][0];
    B.stride_b = st[2][0];
  }
  for (int64_t s : d.out.shape)
    if (s == 0) B.count = 0;
  return B;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

}  // namespace

Algo& GemmPlan::Impl::algo_for(int device, int align, int64_t ws_cap) {
  ws_cap = std::max<int64_t>(0, std::min(ws_cap, workspace_limit));
  const auto key = std::make_tuple(device, align, ws_cap);
  auto it = algos.find(key);
  if (it != algos.end()) return it->second;
  const auto& api = cublaslt::require(kOp);
  cublasLtMatmulPreference_t p = nullptr;
  cublaslt::check(api.MatmulPreferenceCreate(&p), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = uint64_t(ws_cap);
  const uint32_t al = uint32_t(align);
  api.MatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    api.MatmulPreferenceSetAttribute(p, attr, &al, sizeof al);
  std::vector<cublasLtMatmulHeuristicResult_t> res(size_t(std::clamp(algo_index + 1, 8, 64)));
  int n = 0;
  const cublasStatus_t st = api.MatmulAlgoGetHeuristic(cublaslt::handle(device), lt->op, lt->a, lt->b, lt->c, lt->c, p,
                                                       int(res.size()), res.data(), &n);
  api.MatmulPreferenceDestroy(p);
  if (st != CUBLAS_STATUS_SUCCESS || n == 0) {
    std::string why = st == CUBLAS_STATUS_SUCCESS || st == CUBLAS_STATUS_NOT_SUPPORTED
                          ? "no algorithm"
                          : std::string(api.GetStatusName(st));
    throw Unsupported(std::string(kOp) + ": cuBLASLt has " + why + " for " + desc.str() + " with " +
                      std::to_string(align) + "-byte aligned pointers and a workspace of " + std::to_string(ws) +
                      " bytes. Leading dimensions (and K for fp8 / int8) usually need to be multiples of 16 "
                      "bytes; fp8 needs K % 16 == 0");
  }
  // The heuristic's first answer, unless the tuning asks for another of its candidates
  // (bench/bench_gemm.py --sweep-algos times them).
  const int pick = std::max(0, std::min(n - 1, algo_index));
  Algo A{res[pick].algo, int64_t(res[pick].workspaceSize), ""};
  auto cfg = [&](cublasLtMatmulAlgoConfigAttributes_t attr) {  // these four are 32-bit attributes
    uint32_t v = 0;
    size_t written = 0;
    api.MatmulAlgoConfigGetAttribute(&A.algo, attr, &v, sizeof v, &written);
    return v;
  };
  A.name = "algo=" + std::to_string(cfg(CUBLASLT_ALGO_CONFIG_ID)) + ",tile=" +
           std::to_string(cfg(CUBLASLT_ALGO_CONFIG_TILE_ID)) + ",stages=" +
           std::to_string(cfg(CUBLASLT_ALGO_CONFIG_STAGES_ID)) + ",splitk=" +
           std::to_string(cfg(CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) + (pick ? ",candidate=" + std::to_string(pick) : "");
  return algos[key] = A;
}

namespace {

std::string math_of(const GemmDescriptor& d, bool tf32) {
  const DType ta = d.a.dtype, to = d.out.dtype;
  if (ta == DType::Float64) return "f64 inputs, f64 accumulate";
  if (ta == DType::Float32)
    return tf32 ? "f32 inputs rounded to tf32 (10-bit mantissa) on tensor cores, f32 accumulate"
                : "f32 inputs, f32 accumulate (IEEE, no tf32)";
  if (ta == DType::Int8)
    return to == DType::Int32 ? "int8 inputs, exact int32 accumulate (wraps on overflow)"
                              : "int8 inputs, exact int32 accumulate, then f32 row/column scales, one rounding to " +
                                    std::string(dtype_name(to));
  if (is_fp8(ta))
    return "fp8 inputs times per-tensor f32 scales, tensor-core accumulation (reduced precision inside each MMA, f32 "
           "across them), one rounding to " + std::string(dtype_name(to));
  return std::string(dtype_name(ta)) + " inputs, f32 accumulate, one rounding to " + dtype_name(to);
}

}  // namespace

void GemmPlan::Impl::fill_sku(const Algo* algo) {
  KernelSku& k = sku;
  k.category = "gemm";
  k.op = epilogue_name(desc.epilogue);
  if (desc.bias) k.op = std::string("bias") + (desc.epilogue == GemmEpilogue::None ? "" : "+" + k.op);
  k.dtypes = {desc.out.dtype, desc.a.dtype, desc.b.dtype};
  const Mat ma = mat_of(desc.a), mb = mat_of(desc.b);
  k.layout = std::string("a:") + (ma.row_major() ? "row" : "col") + ",b:" + (mb.row_major() ? "row" : "col") +
             ",out:" + (out_row_major ? "row" : "col") + (batch.count > 1 ? ",batched" : "");
  k.arch = compiled_archs();
  const bool tf32 = pref.allow_tf32 && desc.a.dtype == DType::Float32;
  k.precision.math = math_of(desc, tf32);
  k.precision.compute_dtype = desc.a.dtype == DType::Float64 ? DType::Float64
                              : desc.a.dtype == DType::Int8  ? DType::Int32
                                                             : DType::Float32;
  k.precision.accumulator_dtype = k.precision.compute_dtype;
  k.precision.deterministic = true;
  switch (path) {
    case Path::Empty:
      k.name = "gemm.empty";
      k.backend = Backend::Bespoke;
      break;
    case Path::KZero:
      k.name = "gemm.k_zero";
      k.backend = Backend::Bespoke;
      k.precision.math = "K = 0: out = beta * out";
      break;
    case Path::GemvLowM:
      k.name = std::string("gemm.") + gemm::gemv_lowm_variant(gemv);
      k.backend = Backend::Bespoke;
      k.precision.math += "; K split across warps, partial sums added in a fixed order";
      k.precision.bit_stable = true;
      break;
    case Path::Cublas:
      k.name = std::string("gemm.cublas.tf32") + (bias_add ? "+ew.bias" : "") +
               (activation ? "+ew." + std::string(epilogue_name(desc.epilogue)) : "");
      k.precision.math += bias_add ? "; bias added in a pass of ours" : "";
      k.precision.math += activation ? "; activation in a pass of ours" : "";
      k.backend = Backend::Cublas;
      k.precision.bit_stable = false;  // cuBLAS picks its kernel per call
      break;
    case Path::Lt:
      k.name = "gemm.cublaslt." + std::string(algo ? algo->name : "algorithm chosen at first run (no GPU at select)");
      if (activation) k.name += "+ew." + std::string(epilogue_name(desc.epilogue));
      if (desc.amax) k.name += "+absmax";
      if (acc_bytes) k.name += "+dequant";
      k.backend = Backend::CublasLt;
      k.precision.math += activation ? "; activation in a pass of ours" : "";
      k.precision.bit_stable = false;  // the algorithm may differ with pointer alignment or device
      break;
  }
}

GemmPlan GemmPlan::select(const GemmDescriptor& d, const PlanPreference& pref) {
  auto I = std::make_shared<Impl>();
  I->desc = d;
  I->pref = pref;
  const std::string op = kOp;
  // Tuning: "algo" (cuBLASLt's candidate), "kw" / "rn" (the decode kernel's split and rows per
  // block); without a preference, the debug variable BARACUDA_GEMM_CFG ("algo=..,kw=..,rn=..").
  int tune_kw = 0, tune_rn = 0;
  {
    const std::vector<Knob> knobs = tuning_knobs(op, pref.tuning, "BARACUDA_GEMM_CFG", {"algo", "kw", "rn"});
    for (const Knob& k : knobs) {
      if (k.key == "algo") I->algo_index = int(std::max(0LL, k.num()));
      else if (k.key == "kw") tune_kw = int(k.num());
      else if (k.key == "rn") tune_rn = int(k.num());
    }
  }
  // ---- shapes
  const std::pair<const TensorSpec*, const char*> ops[] = {{&d.a, "a"}, {&d.b, "b"}, {&d.out, "out"}};
  for (auto [s, name] : ops) {
    if (s->shape.size() < 2)
      throw InvalidArgument(op + ": " + name + " must have at least 2 dims ([..., rows, cols]), got shape " +
                            shape_str(s->shape));
    if (s->shape.size() > size_t(kMaxRank))
      throw Unsupported(op + ": " + name + " has rank " + std::to_string(s->shape.size()) + "; at most " +
                        std::to_string(kMaxRank));
    for (int64_t x : s->shape)
      if (x < 0) throw InvalidArgument(op + ": " + name + " has a negative dim: " + shape_str(s->shape));
    if (!s->strides.empty() && s->strides.size() != s->shape.size())
      throw InvalidArgument(op + ": " + name + " has " + std::to_string(s->strides.size()) + " strides for rank " +
                            std::to_string(s->shape.size()));
  }
  const auto& so = d.out.shape;
  const int64_t M = so[so.size() - 2], N = so.back();
  const int64_t K = d.a.shape.back();
  if (d.a.shape[d.a.shape.size() - 2] != M)
    throw InvalidArgument(op + ": a has " + std::to_string(d.a.shape[d.a.shape.size() - 2]) + " rows but out has " +
                          std::to_string(M) + " (a is [..., M, K], out [..., M, N])");
  if (d.b.shape[d.b.shape.size() - 2] != K)
    throw InvalidArgument(op + ": inner dimensions disagree: a is [..., M, K] with K = " + std::to_string(K) +
                          " but b is [..., K, N] with K = " + std::to_string(d.b.shape[d.b.shape.size() - 2]));
  if (d.b.shape.back() != N)
    throw InvalidArgument(op + ": b has " + std::to_string(d.b.shape.back()) + " columns but out has " +
                          std::to_string(N) + " (b is [..., K, N], out [..., M, N])");
  I->M = M, I->N = N, I->K = K;
  I->batch = batch_of(d);
  if (!non_overlapping(d.out.shape, d.out.effective_strides()))
    throw InvalidArgument(op + ": out has overlapping elements (strides " + shape_str(d.out.effective_strides()) +
                          "); it must be writable element by element");

  // ---- dtypes
  const DType ta = d.a.dtype, tb = d.b.dtype, to = d.out.dtype;
  const bool fp8 = is_fp8(ta) || is_fp8(tb), int8 = ta == DType::Int8 || tb == DType::Int8;
  if (fp8) {
    if (!is_fp8(ta) || !is_fp8(tb))
      throw InvalidDType(op + ": a is " + dtype_name(ta) + " and b is " + dtype_name(tb) +
                         "; fp8 GEMM takes fp8 for both (e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3)");
    if (ta == DType::Float8E5M2 && tb == DType::Float8E5M2)
      throw InvalidDType(op + ": e5m2 x e5m2 has no kernel; one of a, b must be float8_e4m3fn");
    if (to != DType::Float32 && to != DType::Float16 && to != DType::BFloat16)
      throw InvalidDType(op + ": out is " + dtype_name(to) + "; fp8 GEMM writes float32, float16 or bfloat16");
    if (d.a_scale != GemmScale::Tensor || d.b_scale != GemmScale::Tensor)
      throw InvalidArgument(op + ": fp8 GEMM needs a_scale and b_scale (per-tensor f32 device scalars; pass ones "
                            "for unscaled data)");
  } else if (int8) {
    if (ta != DType::Int8 || tb != DType::Int8)
      throw InvalidDType(op + ": a is " + dtype_name(ta) + " and b is " + dtype_name(tb) +
                         "; int8 GEMM takes int8 for both");
    if (to == DType::Int32) {
      if (d.a_scale != GemmScale::None || d.b_scale != GemmScale::None)
        throw InvalidArgument(op + ": int8 -> int32 takes no scales; scales need a float out (float16, bfloat16, "
                              "float32)");
    } else if (to == DType::Float16 || to == DType::BFloat16 || to == DType::Float32) {
      if (d.a_scale == GemmScale::Tensor || d.b_scale == GemmScale::Tensor)
        throw InvalidArgument(op + ": int8 takes vector scales (a_scale per row [M], b_scale per column [N])");
      if (d.beta != 0) throw Unsupported(op + ": int8 with a dequantizing epilogue takes beta = 0");
      if (I->batch.count > 1) throw Unsupported(op + ": int8 with a dequantizing epilogue takes no batch");
      if (!mat_of(d.out).row_major())  // the dequantizing pass walks out and the int32 result by rows
        throw Unsupported(op + ": int8 with a dequantizing epilogue takes a row-major out (N contiguous)");
    } else {
      throw InvalidDType(op + ": out is " + dtype_name(to) + "; int8 GEMM writes int32, or float16 / bfloat16 / "
                         "float32 through row / column scales");
    }
    if (d.alpha != double(int32_t(d.alpha)) || d.beta != double(int32_t(d.beta)))
      throw InvalidArgument(op + ": int8 GEMM takes integer alpha and beta");
  } else {
    if (ta != tb)
      throw InvalidDType(op + ": a is " + dtype_name(ta) + " but b is " + dtype_name(tb) +
                         "; mixed dtypes need fp8 or int8 inputs, or a cast first");
    if (!is_float(ta))
      throw InvalidDType(op + ": a and b are " + dtype_name(ta) +
                         "; expected float16, bfloat16, float32, float64, fp8 (e4m3 / e5m2) or int8");
    const bool ok_out = to == ta || (to == DType::Float32 && (ta == DType::Float16 || ta == DType::BFloat16));
    if (!ok_out)
      throw InvalidDType(op + ": out is " + dtype_name(to) + " for " + dtype_name(ta) + " inputs; expected " +
                         dtype_name(ta) + (ta == DType::Float16 || ta == DType::BFloat16 ? " or float32" : ""));
    if (d.a_scale != GemmScale::None || d.b_scale != GemmScale::None)
      throw InvalidArgument(op + ": scales are for fp8 and int8 inputs; a and b are " + dtype_name(ta));
  }
  if (d.amax && !fp8) throw InvalidArgument(op + ": amax is for fp8 GEMM");
  if (d.amax && (I->batch.count > 1 || !mat_of(d.out).row_major()))
    throw Unsupported(op + ": amax takes one row-major out (no batch)");

  // ---- epilogue
  const GemmEpilogue e = d.epilogue;
  const bool quant = fp8 || int8;
  if (quant && !(e == GemmEpilogue::None || (fp8 && (e == GemmEpilogue::Relu || e == GemmEpilogue::GeluTanh))))
    throw Unsupported(op + ": epilogue " + epilogue_name(e) + " is not available for fp8 / int8 inputs");
  if (d.bias && int8) throw Unsupported(op + ": int8 GEMM takes no bias");
  if (d.bias && (e == GemmEpilogue::DGeluTanh || e == GemmEpilogue::BiasGrad))
    throw InvalidArgument(op + ": bias is an input of forward epilogues; " + epilogue_name(e) + " writes bias_grad");
  // cuBLASLt takes the bias in the output's dtype (fp8 GEMMs: bf16 or f16), not f32 for half outputs.
  if (d.bias || d.bias_grad) {
    const bool ok = d.bias_dtype == to || (fp8 && (d.bias_dtype == DType::BFloat16 || d.bias_dtype == DType::Float16));
    if (!ok)
      throw InvalidDType(op + ": " + (d.bias ? "bias" : "bias_grad") + " is " + dtype_name(d.bias_dtype) +
                         "; expected " + dtype_name(to) + " (out's dtype)" +
                         (fp8 ? std::string(", bfloat16 or float16") : std::string("")));
  }
  if (d.aux && !(e == GemmEpilogue::Gelu || e == GemmEpilogue::GeluTanh || e == GemmEpilogue::Silu ||
                 e == GemmEpilogue::DGeluTanh))
    throw InvalidArgument(op + ": aux (the pre-activation) is for gelu, gelu_tanh, silu and dgelu_tanh" +
                          (e == GemmEpilogue::Relu ? std::string("; relu's backward needs only out (out > 0)") : ""));
  if (e == GemmEpilogue::DGeluTanh && !d.aux)
    throw InvalidArgument(op + ": dgelu_tanh reads the forward pre-activation from aux; set aux");
  if (e == GemmEpilogue::BiasGrad && !d.bias_grad)
    throw InvalidArgument(op + ": the bias_grad epilogue writes bias_grad; set bias_grad");
  if (d.bias_grad && !(e == GemmEpilogue::BiasGrad || e == GemmEpilogue::DGeluTanh))
    throw InvalidArgument(op + ": bias_grad is written by the bias_grad and dgelu_tanh epilogues");
  if (d.bias_grad && I->batch.count > 1) throw Unsupported(op + ": bias_grad takes no batch");
  // gelu / silu are a pass of ours after cuBLASLt wrote the pre-activation to aux: cuBLASLt's C
  // would then be aux, not out, so beta * out cannot be added.
  if (d.aux && d.beta != 0 && (e == GemmEpilogue::Gelu || e == GemmEpilogue::Silu))
    throw Unsupported(op + ": beta != 0 with the " + epilogue_name(e) + " epilogue and aux is not covered (use "
                      "beta = 0, or gelu_tanh, whose epilogue is cuBLASLt's)");

  // ---- the path
  const Mat ma = mat_of(d.a), mb = mat_of(d.b), mo = mat_of(d.out);
  for (const auto& [m, name] : {std::pair<const Mat&, const char*>{ma, "a"}, {mb, "b"}, {mo, "out"}})
    if (m.rs < 0 || m.cs < 0)  // leading dimensions are unsigned to cuBLASLt and our kernels
      throw Unsupported(op + ": " + name + " has a negative stride in its last two dims (" + std::to_string(m.rs) +
                        ", " + std::to_string(m.cs) + "); make it contiguous first");
  if (!mo.row_major() && !mo.col_major())
    throw InvalidArgument(op + ": out has strides (" + std::to_string(mo.rs) + ", " + std::to_string(mo.cs) +
                          ") in its last two dims; one of them must be 1");
  I->out_row_major = mo.row_major();
  const bool fancy = d.bias || d.aux || d.bias_grad || (e != GemmEpilogue::None);
  if (!I->out_row_major && fancy)
    throw Unsupported(op + ": epilogues, bias and aux need a row-major out (N contiguous)");
  I->ld_out = I->out_row_major ? std::max<int64_t>(mo.rs, std::max<int64_t>(1, N))
                               : std::max<int64_t>(mo.cs, std::max<int64_t>(1, M));
  if (I->out_row_major && M > 1 && mo.rs < N) I->ld_out = mo.rs;  // non_overlapping already refused this
  const bool batch_empty = std::find(d.out.shape.begin(), d.out.shape.end() - 2, 0) != d.out.shape.end() - 2;
  if (!batch_empty && M > 0 && N == 0 && K > 0 && e == GemmEpilogue::BiasGrad)
    throw Unsupported(op + ": the bias_grad epilogue with N = 0 (sums of a with no GEMM to fuse them into) is not "
                      "covered; sum a over K directly");
  if (I->batch.count == 0 || M == 0 || N == 0) {
    I->path = Path::Empty;
    I->fill_sku(nullptr);
    return GemmPlan(I);
  }
  if (K == 0) {
    if (fancy || quant)
      throw Unsupported(op + ": K = 0 with an epilogue, bias or quantized inputs; only out = beta * out is defined");
    ElementwiseDescriptor z{d.beta == 0 ? "fill" : "affine", {}, d.out, {}};
    if (d.beta == 0) z.params["value"] = 0;
    else z.inputs = {d.out}, z.params = {{"a", d.beta}, {"b", 0}};
    I->k_zero = std::make_unique<ElementwisePlan>(ElementwisePlan::select(z));
    I->path = Path::KZero;
    I->fill_sku(nullptr);
    return GemmPlan(I);
  }

  // Decode regime: a kernel of ours streams b (the weight) once for up to 16 rows of a.
  const bool bespoke_first = pref.allows(Backend::Bespoke) &&
                             !(pref.prefer.size() && pref.prefer[0] == Backend::CublasLt);
  if (bespoke_first && !quant && M <= 16 && I->batch.count == 1 && ta == to && e == GemmEpilogue::None &&
      !d.aux && ma.row_major() && mb.col_major() && I->out_row_major && (M <= 1 || ma.rs >= K) &&
      (N <= 1 || mb.cs >= K)) {  // rows that overlap (a stride-0 expand) go to cuBLASLt's checks
    gemm::GemvLowMArgs g{};
    g.dtype = ta;
    g.bias_dtype = d.bias ? d.bias_dtype : ta;
    g.M = M, g.N = N, g.K = K;
    g.ldx = std::max<int64_t>(ma.rs, K);
    g.ldw = std::max<int64_t>(mb.cs, K);
    g.ldo = I->ld_out;
    g.alpha = float(d.alpha), g.beta = float(d.beta);
    g.bias = d.bias ? reinterpret_cast<const void*>(uintptr_t(256)) : nullptr;  // presence only
    g.kw = tune_kw;
    g.rn = tune_rn;
    if (gemm::gemv_lowm_supported(g)) {
      I->gemv = g;
      I->path = Path::GemvLowM;
      I->fill_sku(nullptr);
      return GemmPlan(I);
    }
  }
  // ---- cuBLAS(Lt): out^T = b^T a^T (row-major out) or out = a b (column-major out); quantized
  // inputs take op(A) = T, op(B) = N
  LtMat A, B;
  if (I->out_row_major) {
    A = lt_operand(mb, true, "b", quant ? 1 : -1);
    B = lt_operand(ma, true, "a", quant ? 0 : -1);
  } else {
    A = lt_operand(ma, false, "a", quant ? 1 : -1);
    B = lt_operand(mb, false, "b", quant ? 0 : -1);
  }
  if (pref.workspace_limit >= 0) I->workspace_limit = pref.workspace_limit;

  // tf32 goes to cuBLAS, not cuBLASLt: Lt's heuristic offers Hopper's tf32 kernels only when both of
  // its operands are transposed (K-major), cuBLAS's own selection in every layout (docs/benchmarks.md,
  // GEMM). A bias and an activation are then passes of ours: the GEMM writes the pre-activation (to
  // aux when given, else to out), the bias is added in place, the activation writes out. Not for the
  // backward epilogues, nor aux with beta != 0 (cuBLAS's C would be aux). prefer=[cublaslt] keeps it
  // on cuBLASLt (its candidates, tuning "algo").
  const bool lt_first = pref.prefer.size() && pref.prefer[0] == Backend::CublasLt;
  const bool forward_epilogue = e == GemmEpilogue::None || e == GemmEpilogue::Relu || e == GemmEpilogue::Gelu ||
                                e == GemmEpilogue::GeluTanh || e == GemmEpilogue::Silu;
  const bool composable = forward_epilogue && !d.bias_grad && !(d.aux && d.beta != 0);
  if (ta == DType::Float32 && pref.allow_tf32 && composable && !d.amax && !(A.trans && B.trans) && !lt_first &&
      pref.allows(Backend::Cublas) && cublas::api()) {
    cublas::StridedGemm& c = I->cublas_gemm;
    c.opa = A.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    c.opb = B.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    c.m = I->out_row_major ? N : M;
    c.n = I->out_row_major ? M : N;
    c.k = K;
    // The pre-activation's home: aux (out's shape, contiguous) when given, else out itself.
    const TensorSpec pre = d.aux ? TensorSpec{d.out.shape, to, {}} : d.out;
    c.lda = A.ld, c.ldb = B.ld, c.ldc = d.aux ? N : I->ld_out;
    c.stride_a = I->out_row_major ? I->batch.stride_b : I->batch.stride_a;
    c.stride_b = I->out_row_major ? I->batch.stride_a : I->batch.stride_b;
    c.stride_c = d.aux ? M * N : I->batch.stride_out;
    c.batch = I->batch.count;
    c.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    if (d.bias) {
      ElementwiseDescriptor add{"add", {pre, TensorSpec{{N}, d.bias_dtype, {}}}, pre, {}};
      I->bias_add = std::make_unique<ElementwisePlan>(ElementwisePlan::select(add));
    }
    if (e != GemmEpilogue::None) {
      ElementwiseDescriptor act{epilogue_name(e), {pre}, d.out, {}};
      I->activation = std::make_unique<ElementwisePlan>(ElementwisePlan::select(act));
    }
    if (const int dev = current_device(); dev >= 0) cublas::prepare(op, dev);
    I->workspace = I->workspace_limit;
    I->path = Path::Cublas;
    I->fill_sku(nullptr);
    return GemmPlan(I);
  }
  if (!pref.allows(Backend::CublasLt))
    throw Unsupported(op + ": the preference forbids cuBLASLt and no kernel of ours covers " + d.str());
  const auto& api = cublaslt::require(op);
  I->lt = std::make_unique<LtDescs>();
  LtDescs& L = *I->lt;
  L.api = &api;
  const bool dequant = int8 && to != DType::Int32;
  const bool ours_act = e == GemmEpilogue::Gelu || e == GemmEpilogue::Silu;
  // Where cuBLASLt writes: out, or aux (then our activation reads it), or int32 accumulators.
  DType target_dtype = dequant ? DType::Int32 : to;
  int64_t ld_target = I->ld_out, batch_target = I->batch.stride_out;
  if (dequant || (ours_act && d.aux)) ld_target = N, batch_target = M * N;
  if (dequant) I->acc_bytes = ((M * N * 4 + 255) / 256) * 256;
  I->ld_aux = N;

  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale_type = CUDA_R_32F;
  if (ta == DType::Float64) compute = CUBLAS_COMPUTE_64F, scale_type = CUDA_R_64F;
  else if (int8) compute = CUBLAS_COMPUTE_32I, scale_type = CUDA_R_32I;
  else if (ta == DType::Float32 && pref.allow_tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  cublaslt::check(api.MatmulDescCreate(&L.op, compute, scale_type), "cublasLtMatmulDescCreate");
  const cublasOperation_t opa = A.trans ? CUBLAS_OP_T : CUBLAS_OP_N, opb = B.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attr(api, L.op, CUBLASLT_MATMUL_DESC_TRANSA, opa, "cublasLtMatmulDescSetAttribute(TRANSA)");
  set_attr(api, L.op, CUBLASLT_MATMUL_DESC_TRANSB, opb, "cublasLtMatmulDescSetAttribute(TRANSB)");
  const DType a_lt = I->out_row_major ? tb : ta, b_lt = I->out_row_major ? ta : tb;
  auto layout = [&](cublasLtMatrixLayout_t* l, DType t, int64_t rows, int64_t cols, int64_t ld, int64_t bstride) {
    cublaslt::check(api.MatrixLayoutCreate(l, cuda_type(t), uint64_t(rows), uint64_t(cols), ld),
                    "cublasLtMatrixLayoutCreate");
    if (I->batch.count > 1) {
      const int32_t count = int32_t(I->batch.count);
      set_layout(api, *l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count);
      set_layout(api, *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, bstride);
    }
  };
  if (I->batch.count > INT32_MAX) throw Unsupported(op + ": more than 2^31 batch entries");
  layout(&L.a, a_lt, A.rows, A.cols, A.ld, I->out_row_major ? I->batch.stride_b : I->batch.stride_a);
  layout(&L.b, b_lt, B.rows, B.cols, B.ld, I->out_row_major ? I->batch.stride_a : I->batch.stride_b);
  layout(&L.c, target_dtype, I->out_row_major ? N : M, I->out_row_major ? M : N, ld_target, batch_target);

  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  switch (e) {
    case GemmEpilogue::None:
    case GemmEpilogue::Gelu:
    case GemmEpilogue::Silu: epi = d.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
    case GemmEpilogue::Relu: epi = d.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
    case GemmEpilogue::GeluTanh:
      epi = d.aux ? (d.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                  : (d.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU);
      break;
    case GemmEpilogue::DGeluTanh: epi = d.bias_grad ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU; break;
    case GemmEpilogue::BiasGrad: epi = CUBLASLT_EPILOGUE_BGRADB; break;
  }
  I->lt_epilogue = epi;
  set_attr(api, L.op, CUBLASLT_MATMUL_DESC_EPILOGUE, epi, "cublasLtMatmulDescSetAttribute(EPILOGUE)");
  // Pointers are set at run(); a placeholder now tells the heuristic which ones exist.
  void* const present = reinterpret_cast<void*>(uintptr_t(256));
  if (d.bias || d.bias_grad) {
    const cudaDataType_t bt = cuda_type(d.bias_dtype);
    set_attr(api, L.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bt, "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)");
    set_attr(api, L.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, present, "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  if (d.aux && !ours_act) {
    set_attr(api, L.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, present,
             "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)");
    set_attr(api, L.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, I->ld_aux,
             "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)");
    if (I->batch.count > 1) {
      const int64_t s = M * N;
      set_attr(api, L.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, s,
               "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_BATCH_STRIDE)");
    }
  }
  if (fp8) {
    set_attr(api, L.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, present, "cublasLtMatmulDescSetAttribute(A_SCALE)");
    set_attr(api, L.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, present, "cublasLtMatmulDescSetAttribute(B_SCALE)");
  }
  if (ours_act) {
    TensorSpec src = d.out;
    if (d.aux) src = TensorSpec{d.out.shape, to, {}};
    ElementwiseDescriptor ad{e == GemmEpilogue::Gelu ? "gelu" : "silu", {src}, d.out, {}};
    I->activation = std::make_unique<ElementwisePlan>(ElementwisePlan::select(ad));
  }

  // The algorithm, now if a GPU is here (else at the first run).
  const Algo* algo = nullptr;
  if (const int dev = current_device(); dev >= 0) {
    std::lock_guard<std::mutex> g(I->mu);
    algo = &I->algo_for(dev, 16, I->workspace_limit);
    I->workspace = algo->workspace;
  } else {
    I->workspace = I->workspace_limit;
  }
  if (I->acc_bytes) I->workspace = ((I->workspace + 255) / 256) * 256 + I->acc_bytes;
  I->fill_sku(algo);
  return GemmPlan(I);
}

const KernelSku& GemmPlan::sku() const { return impl_->sku; }
const GemmDescriptor& GemmPlan::descriptor() const { return impl_->desc; }
int64_t GemmPlan::workspace_bytes() const { return impl_->workspace; }

FamilyInfo gemm_family_info() {
  const std::vector<DType> fl = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
  const std::vector<DType> half = {DType::Float16, DType::BFloat16, DType::Float32};
  const std::vector<std::string> lay = {"row/col-major a, b, out", "leading dims", "strided batch (stride 0 broadcasts)"};
  FamilyInfo f{"gemm", "GemmPlan",
               "dense and strided-batched GEMM (cuBLASLt; tf32 on cuBLAS), fused epilogues, fp8 "
               "and int8, a decode-regime kernel for M <= 16; linear backward through the same plans",
               {}};
  f.ops.push_back({"gemm", "dense", fl, lay, Backend::CublasLt, true});
  f.ops.push_back({"gemm tf32 (f32 inputs, allow_tf32)", "dense", {DType::Float32}, lay, Backend::Cublas, true});
  f.ops.push_back({"gemm+bias", "epilogue", fl, {"out row-major"}, Backend::CublasLt, true});
  f.ops.push_back({"gemm+relu", "epilogue", half, {"out row-major"}, Backend::CublasLt, false});
  f.ops.push_back({"gemm+gelu_tanh (aux)", "epilogue", half, {"out row-major"}, Backend::CublasLt, true});
  f.ops.push_back({"gemm+gelu / silu (aux)", "epilogue", half, {"out row-major"}, Backend::CublasLt, false});
  f.ops.push_back({"gemm dgelu_tanh (+bias_grad)", "backward epilogue", half, {"out row-major"}, Backend::CublasLt, false});
  f.ops.push_back({"gemm bias_grad", "backward epilogue", half, {"out row-major"}, Backend::CublasLt, false});
  f.ops.push_back({"fp8 gemm", "quantized", {DType::Float8E4M3, DType::Float8E5M2}, {"a row-major, b column-major"},
                   Backend::CublasLt, false});
  f.ops.push_back({"int8 gemm (+dequant)", "quantized", {DType::Int8}, {"a row-major, b column-major"},
                   Backend::CublasLt, false});
  f.ops.push_back({"gemv_lowm (M <= 16)", "decode", half, {"a row-major, b column-major (w.t())"}, Backend::Bespoke,
                   false});
  return f;
}

}  // namespace baracuda
