// GemmPlan::run: the operand checks against the descriptor and the launch of the path select chose
// (cuBLASLt with its per-device algorithm, the decode kernel, the epilogue passes, int8 dequant).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "gemm_impl.h"
#include "plan_util.h"

namespace baracuda {
using namespace gemm_detail;

void GemmPlan::run(const GemmTensors& t, void* workspace, int64_t workspace_size, StreamHandle stream) const {
  Impl& I = *impl_;
  const GemmDescriptor& d = I.desc;
  const std::string op = kOp;
  const int dev = t.out.device;
  check_view(op, "out", t.out, d.out, dev);
  check_view(op, "a", t.a, d.a, dev);
  check_view(op, "b", t.b, d.b, dev);
  // The optional operands: present exactly when the descriptor says so, vectors contiguous.
  auto vec = [&](const TensorView& v, bool want, const char* name, const char* why, DType dt, int64_t len) {
    if (!want) {
      if (v.data) throw InvalidArgument(op + ": " + name + " was given but the plan was selected without it");
      return;
    }
    if (!v.data && len > 0) throw InvalidArgument(op + ": the plan needs " + name + " (" + why + ")");
    TensorSpec s{{len}, dt, {}};
    if (len == 1 && v.ndim == 0) return check_view(op, name, v, TensorSpec{{}, dt, {}}, dev);
    check_view(op, name, v, s, dev);
  };
  const bool fp8 = is_fp8(d.a.dtype);
  vec(t.bias, d.bias, "bias", "[N]", d.bias_dtype, I.N);
  vec(t.bias_grad, d.bias_grad, "bias_grad", d.epilogue == GemmEpilogue::BiasGrad ? "[M]" : "[N]", d.bias_dtype,
      d.epilogue == GemmEpilogue::BiasGrad ? I.M : I.N);
  vec(t.a_scale, d.a_scale != GemmScale::None, "a_scale", fp8 ? "an f32 scalar" : "f32 [M]", DType::Float32,
      d.a_scale == GemmScale::Vector ? I.M : 1);
  vec(t.b_scale, d.b_scale != GemmScale::None, "b_scale", fp8 ? "an f32 scalar" : "f32 [N]", DType::Float32,
      d.b_scale == GemmScale::Vector ? I.N : 1);
  vec(t.amax, d.amax, "amax", "an f32 scalar", DType::Float32, 1);
  if (d.aux) {
    if (!t.aux.data && t.out.numel() > 0) throw InvalidArgument(op + ": the plan needs aux (out's shape, contiguous)");
    check_view(op, "aux", t.aux, TensorSpec{d.out.shape, d.out.dtype, {}}, dev);
  } else if (t.aux.data) {
    throw InvalidArgument(op + ": aux was given but the plan was selected without it");
  }
  // Aliasing: nothing written may overlap anything else (out is C itself when beta != 0).
  const std::pair<const TensorView*, const char*> written[] = {{&t.out, "out"}, {&t.bias_grad, "bias_grad"},
                                                               {&t.amax, "amax"}, {&t.aux, "aux"}};
  const std::pair<const TensorView*, const char*> all[] = {
      {&t.out, "out"}, {&t.a, "a"}, {&t.b, "b"}, {&t.bias, "bias"}, {&t.aux, "aux"}, {&t.bias_grad, "bias_grad"},
      {&t.a_scale, "a_scale"}, {&t.b_scale, "b_scale"}, {&t.amax, "amax"}};
  for (auto [w, wn] : written) {
    if (!w->data || (w == &t.aux && d.epilogue == GemmEpilogue::DGeluTanh)) continue;
    const auto wr = byte_range(*w);
    for (auto [o, on] : all) {
      if (o == w || !o->data) continue;
      if (ranges_overlap(wr, byte_range(*o)))
        throw InvalidArgument(op + ": " + wn + " overlaps " + on + "; outputs must not share memory with other operands");
    }
  }
  // Less workspace than workspace_bytes() only narrows cuBLASLt's choice of algorithm; the
  // int32 accumulators of an int8 dequant are required.
  if (workspace && workspace_size < 0) throw InvalidArgument(op + ": workspace_size is negative");
  if (I.acc_bytes && (!workspace || workspace_size < I.workspace))
    throw InvalidArgument(op + ": workspace: this plan needs " + std::to_string(I.workspace) + " bytes, got " +
                          std::to_string(workspace ? workspace_size : 0));
  if (workspace && (I.path == Path::Lt || I.path == Path::Cublas)) {
    if (reinterpret_cast<uintptr_t>(workspace) % 256) throw InvalidArgument(op + ": workspace must be 256-byte aligned");
    const std::pair<uintptr_t, uintptr_t> wr{reinterpret_cast<uintptr_t>(workspace),
                                             reinterpret_cast<uintptr_t>(workspace) + uintptr_t(workspace_size)};
    for (auto [o, on] : all)
      if (o->data && ranges_overlap(wr, byte_range(*o))) throw InvalidArgument(op + ": workspace overlaps " + on);
  }
  if (I.path == Path::Empty) {
    // No product to compute, but sums over nothing are still written: bias_grad of an empty
    // batch (and of N = 0 with K = 0) and the fp8 amax of an empty out are 0.
    DeviceGuard guard(dev);
    for (const TensorView* v : {&t.bias_grad, &t.amax})
      if (!fill_dense_bytes(*v, 0, stream))
        throw Unsupported(op + ": an empty GEMM zero-fills bias_grad / amax, which needs them contiguous");
    return;
  }

  DeviceGuard guard(dev);
  if (I.path == Path::KZero) {
    if (d.beta == 0) I.k_zero->run(t.out, nullptr, 0, nullptr, 0, stream);
    else I.k_zero->run(t.out, &t.out, 1, nullptr, 0, stream);
    return;
  }
  if (I.path == Path::GemvLowM) {
    gemm::GemvLowMArgs g = I.gemv;
    g.x = t.a.data;
    g.w = t.b.data;
    g.out = t.out.data;
    g.bias = t.bias.data;
    gemm::gemv_lowm(g, stream);
    return;
  }

  if (I.path == Path::Cublas) {
    const size_t ws_size = workspace ? size_t(workspace_size) : 0;
    const TensorView& pre = d.aux ? t.aux : t.out;  // where the GEMM writes (select's choice)
    cublas::gemm_f32(op, dev, stream, workspace, ws_size, I.cublas_gemm, float(d.alpha),
                     I.out_row_major ? t.b.data : t.a.data, I.out_row_major ? t.a.data : t.b.data, float(d.beta),
                     pre.data);
    if (I.bias_add) {  // the bias as [N] (a 0-d bias of N = 1 passed the check above)
      const TensorView in[2] = {pre, make_view(t.bias.data, t.bias.dtype, {I.N}, {1}, t.bias.device)};
      I.bias_add->run(pre, in, 2, nullptr, 0, stream);
    }
    if (I.activation) I.activation->run(t.out, &pre, 1, nullptr, 0, stream);
    return;
  }

  // cuBLASLt
  const auto& api = cublaslt::require(op);
  char* ws = static_cast<char*>(workspace);
  void* acc = nullptr;
  int64_t lt_ws = workspace ? workspace_size : 0;
  if (I.acc_bytes) {
    acc = ws;
    ws += I.acc_bytes;
    lt_ws -= I.acc_bytes;
  }
  const bool ours_act = static_cast<bool>(I.activation);
  void* target = acc ? acc : (ours_act && d.aux ? t.aux.data : t.out.data);
  AccessWidth aw;  // the lowest alignment (<= 16 bytes) among the pointers cuBLASLt reads and writes
  for (const void* p : {(const void*)t.a.data, (const void*)t.b.data, (const void*)target}) aw.fit(p);
  if (d.aux) aw.fit(t.aux.data);
  const int align = int(aw.bytes);
  {
    std::lock_guard<std::mutex> g(I.mu);
    const Algo& algo = I.algo_for(dev, align, lt_ws);
    cublasLtMatmulDesc_t md = I.lt->op;
    if (d.bias) set_attr(api, md, CUBLASLT_MATMUL_DESC_BIAS_POINTER, t.bias.data, "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
    if (d.bias_grad)
      set_attr(api, md, CUBLASLT_MATMUL_DESC_BIAS_POINTER, t.bias_grad.data, "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
    if (d.aux && !ours_act)
      set_attr(api, md, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, t.aux.data,
               "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)");
    if (fp8) {
      // cuBLASLt's A is our b in the row-major formulation.
      const void* sa = I.out_row_major ? t.b_scale.data : t.a_scale.data;
      const void* sb = I.out_row_major ? t.a_scale.data : t.b_scale.data;
      set_attr(api, md, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, sa, "cublasLtMatmulDescSetAttribute(A_SCALE)");
      set_attr(api, md, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, sb, "cublasLtMatmulDescSetAttribute(B_SCALE)");
    }
    const void* pa = I.out_row_major ? t.b.data : t.a.data;
    const void* pb = I.out_row_major ? t.a.data : t.b.data;
    const double alpha64 = d.alpha, beta64 = acc ? 0.0 : d.beta;
    const float alpha32 = float(alpha64), beta32 = float(beta64);
    const int32_t alphai = int32_t(alpha64), betai = int32_t(beta64);
    const void *alpha = &alpha32, *beta = &beta32;
    if (d.a.dtype == DType::Float64) alpha = &alpha64, beta = &beta64;
    if (d.a.dtype == DType::Int8) alpha = &alphai, beta = &betai;
    cublaslt::check(api.Matmul(cublaslt::handle(dev), md, alpha, pa, I.lt->a, pb, I.lt->b, beta, target, I.lt->c,
                               target, I.lt->c, &algo.algo, lt_ws > 0 ? ws : nullptr, size_t(std::max<int64_t>(0, lt_ws)),
                               static_cast<cudaStream_t>(stream)),
                    "cublasLtMatmul");
  }
  if (ours_act) {
    TensorView src = d.aux ? t.aux : t.out;
    I.activation->run(t.out, &src, 1, nullptr, 0, stream);
  }
  if (d.amax) {  // cuBLASLt computes amax only for fp8 outputs; ours reads out once more
    gemm::AbsMaxArgs m{};
    m.x = t.out.data;
    m.dtype = d.out.dtype;
    m.rows = I.batch.count * I.M;
    m.cols = I.N;
    m.ld = I.ld_out;
    m.out = static_cast<float*>(t.amax.data);
    gemm::absmax(m, stream);
  }
  if (acc) {
    gemm::DequantArgs q{};
    q.M = I.M, q.N = I.N;
    q.acc = static_cast<const int32_t*>(acc);
    q.ldacc = I.N;
    q.row_scale = static_cast<const float*>(t.a_scale.data);
    q.col_scale = static_cast<const float*>(t.b_scale.data);
    q.bias = nullptr;
    q.bias_dtype = DType::Float32;
    q.out = t.out.data;
    q.out_dtype = d.out.dtype;
    q.ldo = I.ld_out;
    gemm::dequant_int32(q, stream);
  }
}

GemmBackendInfo gemm_backend_info() {
  GemmBackendInfo b{};
  const cublaslt::Api* a = cublaslt::api();
  b.cublaslt_available = a != nullptr;
  b.cublaslt_path = cublaslt::library_path();
  b.cublaslt_version = a ? int64_t(a->GetVersion()) : 0;
  b.error = cublaslt::load_error();
  b.cublas_available = cublas::api() != nullptr;
  b.cublas_path = cublas::library_path();
  b.cublas_error = cublas::load_error();
  return b;
}

}  // namespace baracuda
