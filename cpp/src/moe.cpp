// MoeGatePlan and MoePermutePlan: validation of the routing operands, the workspace, and run().
#include "baracuda/moe.h"

#include <cmath>
#include <sstream>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "moe/moe_launch.h"
#include "plan_util.h"

namespace baracuda {

namespace {

void need(bool ok, const std::string& op, const std::string& what) {
  if (!ok) throw InvalidArgument(op + ": " + what);
}

// A [rows, cols] operand (last dim contiguous, no negative stride) as a spec of that shape and dtype.
TensorSpec matrix(int64_t rows, int64_t cols, DType dt) { return TensorSpec{{rows, cols}, dt, {}}; }

void check_rows_spec(const std::string& op, const TensorSpec& s, const char* name, const char* what) {
  need(s.shape.size() == 2, op, std::string(name) + " has shape " + shape_str(s.shape) + "; expected " + what);
  if (s.dtype != DType::Float32 && s.dtype != DType::Float16 && s.dtype != DType::BFloat16 && s.dtype != DType::Float64)
    throw InvalidDType(op + ": " + name + " is " + dtype_name(s.dtype) +
                       "; expected float32, float16, bfloat16 or float64");
  const auto st = s.effective_strides();
  if (s.shape[1] > 1 && st[1] != 1) throw Unsupported(op + ": " + name + " must be contiguous along its last dim");
  if (st[0] < 0) throw Unsupported(op + ": " + name + " has a negative stride");
}

int64_t row_stride(const TensorView& v) { return v.ndim == 2 ? v.strides[0] : 0; }

// The widest access (16 bytes down to the element) that every row start and the row length allow.
int vec_bytes(int64_t row_bytes, std::initializer_list<const TensorView*> views, int64_t es) {
  AccessWidth w;
  w.fit(row_bytes);
  for (const TensorView* v : views) {
    if (v->data == nullptr) continue;
    w.fit(v->data);
    w.fit(row_stride(*v) * es);
  }
  return int(w.bytes);
}

}  // namespace

// ---- gate ---------------------------------------------------------------------------------------

std::string MoeGateDescriptor::str() const {
  std::ostringstream os;
  os << "MoeGateDescriptor(" << (backward ? "backward, " : "") << "logits=" << logits.str() << ", top_k=" << top_k
     << ", scoring=" << scoring << (renormalize ? ", renormalize" : "");
  if (n_group > 1) os << ", n_group=" << n_group << ", topk_group=" << topk_group << ", group_score=" << group_score;
  if (correction_bias) os << ", correction_bias";
  if (routed_scaling_factor != 1.0) os << ", routed_scaling_factor=" << num_str(routed_scaling_factor);
  os << ", ids=" << dtype_name(ids_dtype) << ")";
  return os.str();
}

struct MoeGatePlan::Impl {
  MoeGateDescriptor desc;
  KernelSku sku;
};

MoeGatePlan MoeGatePlan::select(const MoeGateDescriptor& d, const PlanPreference& pref) {
  const std::string op = d.backward ? "moe_gate_backward" : "moe_gate";
  const TensorSpec& L = d.logits;
  need(L.shape.size() == 2, op, "logits has shape " + shape_str(L.shape) + "; expected [tokens, experts]");
  if (L.dtype != DType::Float32 && L.dtype != DType::Float16 && L.dtype != DType::BFloat16)
    throw InvalidDType(op + ": logits is " + dtype_name(L.dtype) + "; expected float32, float16 or bfloat16");
  const auto st = L.effective_strides();
  if (L.shape[1] > 1 && st[1] != 1) throw Unsupported(op + ": logits must be contiguous along the experts");
  if (st[0] < 0) throw Unsupported(op + ": logits has a negative stride");
  const int64_t E = L.shape[1];
  if (E < 1 || E > moe::kMaxExperts)
    throw Unsupported(op + ": " + std::to_string(E) + " experts; supported 1 to " + std::to_string(moe::kMaxExperts));
  need(d.top_k >= 1 && d.top_k <= std::min<int64_t>(E, moe::kMaxTopK), op,
       "top_k=" + std::to_string(d.top_k) + "; expected 1 <= top_k <= min(experts, " +
           std::to_string(moe::kMaxTopK) + ") = " + std::to_string(std::min<int64_t>(E, moe::kMaxTopK)));
  need(d.scoring == "softmax" || d.scoring == "sigmoid", op,
       "scoring='" + d.scoring + "'; expected 'softmax' or 'sigmoid'");
  need(d.group_score == "max" || d.group_score == "top2_sum", op,
       "group_score='" + d.group_score + "'; expected 'max' or 'top2_sum'");
  need(d.n_group >= 1 && d.n_group <= moe::kMaxGroups && E % d.n_group == 0, op,
       "n_group=" + std::to_string(d.n_group) + "; expected a divisor of experts (" + std::to_string(E) + ") <= " +
           std::to_string(moe::kMaxGroups));
  if (d.n_group > 1) {
    need(d.topk_group >= 1 && d.topk_group <= d.n_group, op,
         "topk_group=" + std::to_string(d.topk_group) + "; expected 1 <= topk_group <= n_group = " +
             std::to_string(d.n_group));
    need(d.top_k <= d.topk_group * (E / d.n_group), op,
         "top_k=" + std::to_string(d.top_k) + " exceeds the experts of topk_group groups (" +
             std::to_string(d.topk_group * (E / d.n_group)) + ")");
    need(d.group_score != "top2_sum" || E / d.n_group >= 2, op,
         "group_score='top2_sum' needs at least 2 experts per group");
  }
  need(std::isfinite(d.routed_scaling_factor), op,
       "routed_scaling_factor=" + num_str(d.routed_scaling_factor) + "; expected a finite number");
  if (d.ids_dtype != DType::Int32 && d.ids_dtype != DType::Int64)
    throw InvalidDType(op + ": ids must be int32 or int64, not " + std::string(dtype_name(d.ids_dtype)));
  for (Backend b : pref.forbid)
    if (b == Backend::Bespoke) throw Unsupported(op + ": the preference forbids the only backend (bespoke)");

  auto impl = std::make_shared<Impl>();
  impl->desc = d;
  KernelSku& k = impl->sku;
  k.category = "moe";
  k.op = op;
  int epl = 1;
  while (epl * 32 < E) epl *= 2;
  k.name = "moe." + op.substr(4) + ".warp_e" + std::to_string(epl * 32);
  k.layout = "rows";
  k.dtypes = {DType::Float32, L.dtype};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  k.precision.compute_dtype = DType::Float32;
  k.precision.accumulator_dtype = DType::Float32;
  k.precision.math = "one warp per token, scores in float32; top-k as k warp argmax rounds (ties: the lower expert "
                     "id); group scores one per lane";
  return MoeGatePlan(impl);
}

const KernelSku& MoeGatePlan::sku() const { return impl_->sku; }
const MoeGateDescriptor& MoeGatePlan::descriptor() const { return impl_->desc; }

void MoeGatePlan::run(const MoeGateTensors& t, void*, int64_t, StreamHandle stream) const {
  const MoeGateDescriptor& D = impl_->desc;
  const std::string op = D.backward ? "moe_gate_backward" : "moe_gate";
  const int device = t.logits.device;
  const int64_t T = D.logits.shape[0], E = D.logits.shape[1], K = D.top_k;
  check_view(op, "logits", t.logits, D.logits, device, "logits");
  const TensorSpec picks = matrix(T, K, DType::Float32), ids = matrix(T, K, D.ids_dtype);
  moe::GateParams p;
  p.backward = D.backward;
  p.logits = t.logits.data;
  p.dtype = D.logits.dtype;
  p.tokens = T;
  p.experts = E;
  p.logit_stride = row_stride(t.logits);
  p.top_k = int(K);
  p.n_group = int(D.n_group);
  p.topk_group = int(D.topk_group);
  p.sigmoid = D.scoring == "sigmoid";
  p.renormalize = D.renormalize;
  p.top2_sum = D.group_score == "top2_sum";
  p.scale = float(D.routed_scaling_factor);
  p.ids_int32 = D.ids_dtype == DType::Int32;
  if (D.backward) {
    check_like(op, t.ids, ids, "ids", "[tokens, top_k]", device, "logits");
    check_like(op, t.grad_weights, picks, "grad_weights", "[tokens, top_k]", device, "logits");
    check_like(op, t.grad_logits, D.logits, "grad_logits", "logits", device, "logits");
    check_presence(op, t.weights, false, "weights", "the backward takes grad_weights");
    check_aliasing(op, {{"grad_logits", &t.grad_logits}},
                   {{"logits", &t.logits}, {"ids", &t.ids}, {"grad_weights", &t.grad_weights}});
    p.ids = t.ids.data;
    p.id_stride = row_stride(t.ids);
    p.grad_weights = static_cast<const float*>(t.grad_weights.data);
    p.grad_weight_stride = row_stride(t.grad_weights);
    p.grad_logits = t.grad_logits.data;
    p.grad_logit_stride = row_stride(t.grad_logits);
  } else {
    check_side_operand(op, t.correction_bias, D.correction_bias, "correction_bias", DType::Float32, {E},
                       D.correction_bias ? "the plan was selected with one" : "the plan was selected without one",
                       true, device, "logits");
    check_like(op, t.weights, picks, "weights", "[tokens, top_k]", device, "logits");
    check_like(op, t.ids, ids, "ids", "[tokens, top_k]", device, "logits");
    check_aliasing(op, {{"weights", &t.weights}, {"ids", &t.ids}},
                   {{"logits", &t.logits}, {"correction_bias", &t.correction_bias}});
    p.bias = D.correction_bias ? static_cast<const float*>(t.correction_bias.data) : nullptr;
    p.weights = static_cast<float*>(t.weights.data);
    p.weight_stride = row_stride(t.weights);
    p.ids = t.ids.data;
    p.id_stride = row_stride(t.ids);
  }
  if (T == 0) return;
  DeviceGuard guard(device);
  moe::gate(p, static_cast<cudaStream_t>(stream));
}

// ---- permute / unpermute ------------------------------------------------------------------------

std::string MoePermuteDescriptor::str() const {
  std::ostringstream os;
  os << "MoePermuteDescriptor(" << op;
  if (op == "permute") os << ", num_experts=" << num_experts << ", x=" << rows.str() << ", ids=" << routing.str();
  else os << ", " << (op == "unpermute" ? "y_sorted=" : "grad_out=") << rows.str() << ", pos=" << routing.str();
  if (weights) os << ", weights";
  if (op == "unpermute_backward") os << ", sorted_rows=" << sorted_rows;
  if (op == "permute") os << ", offsets=" << dtype_name(offsets_dtype);
  os << ")";
  return os.str();
}

struct MoePermutePlan::Impl {
  MoePermuteDescriptor desc;
  KernelSku sku;
  int64_t tokens = 0, top_k = 0, sorted_rows = 0, workspace = 0;
};

MoePermutePlan MoePermutePlan::select(const MoePermuteDescriptor& d, const PlanPreference& pref) {
  const std::string op = "moe_" + d.op;
  need(d.op == "permute" || d.op == "unpermute" || d.op == "unpermute_backward", "moe_permute",
       "op='" + d.op + "'; expected 'permute', 'unpermute' or 'unpermute_backward'");
  const bool permute = d.op == "permute";
  const char* rows_name = permute ? "x" : d.op == "unpermute" ? "y_sorted" : "grad_out";
  check_rows_spec(op, d.rows, rows_name, permute || d.op == "unpermute_backward" ? "[tokens, hidden]" : "[rows, hidden]");
  const char* routing_name = permute ? "ids" : "pos";
  need(d.routing.shape.size() == 2, op, std::string(routing_name) + " has shape " + shape_str(d.routing.shape) +
                                            "; expected [tokens, top_k]");
  if (permute ? (d.routing.dtype != DType::Int32 && d.routing.dtype != DType::Int64) : d.routing.dtype != DType::Int32)
    throw InvalidDType(op + ": " + routing_name + " is " + dtype_name(d.routing.dtype) + "; expected " +
                       (permute ? "int32 or int64" : "int32 (moe_permute's pos)"));
  const auto rst = d.routing.effective_strides();
  if (d.routing.shape[1] > 1 && rst[1] != 1) throw Unsupported(op + ": " + routing_name + " must be contiguous along top_k");
  if (rst[0] < 0) throw Unsupported(op + ": " + routing_name + " has a negative stride");
  const int64_t T = d.routing.shape[0], K = d.routing.shape[1];
  if (permute || d.op == "unpermute_backward")
    need(d.rows.shape[0] == T, op, std::string(rows_name) + " has " + std::to_string(d.rows.shape[0]) + " rows but " +
                                       routing_name + " has " + std::to_string(T) + " tokens");
  const int64_t n = checked_numel(op, routing_name, d.routing.shape);
  if (n >= (int64_t(1) << 31)) throw Unsupported(op + ": " + std::to_string(n) + " (token, pick) pairs; at most 2^31 - 1");
  int64_t sorted_rows = permute ? n : d.op == "unpermute" ? d.rows.shape[0] : (d.sorted_rows < 0 ? n : d.sorted_rows);
  if (permute) {
    need(d.num_experts >= 1 && d.num_experts < (int64_t(1) << 31) - 1, op,
         "num_experts=" + std::to_string(d.num_experts) + "; expected 1 to 2^31 - 2");
    need(!d.weights, op, "permute takes no weights (the combine applies them)");
    if (d.offsets_dtype != DType::Int32 && d.offsets_dtype != DType::Int64)
      throw InvalidDType(op + ": offsets must be int32 or int64, not " + std::string(dtype_name(d.offsets_dtype)));
  }
  for (Backend b : pref.forbid)
    if (b == Backend::Bespoke) throw Unsupported(op + ": the preference forbids the only backend (bespoke)");

  auto impl = std::make_shared<Impl>();
  impl->desc = d;
  impl->tokens = T;
  impl->top_k = K;
  impl->sorted_rows = sorted_rows;
  if (permute) {
    moe::PermuteParams p;
    p.tokens = T;
    p.top_k = K;
    p.experts = d.num_experts;
    bool known = true;
    impl->workspace = moe::permute_workspace_bytes(p, known);
  }
  KernelSku& k = impl->sku;
  k.category = "moe";
  k.op = op;
  k.name = permute ? "moe.permute.radix_sort" : "moe." + d.op + ".rows";
  k.layout = "rows";
  k.dtypes = {d.rows.dtype, d.routing.dtype};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  k.precision.compute_dtype = d.rows.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  k.precision.accumulator_dtype = k.precision.compute_dtype;
  k.precision.math = permute ? "pairs stably radix-sorted (CUB) by expert; rows copied bitwise"
                             : "each token's k rows summed in pick order (weighted), one rounding at the end";
  return MoePermutePlan(impl);
}

const KernelSku& MoePermutePlan::sku() const { return impl_->sku; }
const MoePermuteDescriptor& MoePermutePlan::descriptor() const { return impl_->desc; }
int64_t MoePermutePlan::workspace_bytes() const { return impl_->workspace; }

void MoePermutePlan::run(const MoePermuteTensors& t, void* workspace, int64_t workspace_size,
                         StreamHandle stream) const {
  const MoePermuteDescriptor& D = impl_->desc;
  const std::string op = "moe_" + D.op;
  const int64_t T = impl_->tokens, K = impl_->top_k, N = impl_->sorted_rows, H = D.rows.shape[1];
  const int64_t es = int64_t(dtype_size(D.rows.dtype));
  const TensorSpec picks = matrix(T, K, DType::Float32), pos = matrix(T, K, DType::Int32);
  auto st = static_cast<cudaStream_t>(stream);
  if (D.op == "permute") {
    const int device = t.x.device;
    check_view(op, "x", t.x, D.rows, device, "x");
    check_view(op, "ids", t.ids, D.routing, device, "x");
    check_like(op, t.x_sorted, matrix(N, H, D.rows.dtype), "x_sorted", "[tokens * top_k, hidden]", device, "x");
    check_side_operand(op, t.offsets, true, "offsets", D.offsets_dtype, {D.num_experts + 1}, "the plan writes them",
                       true, device, "x");
    check_like(op, t.pos, pos, "pos", "[tokens, top_k]", device, "x");
    check_aliasing(op, {{"x_sorted", &t.x_sorted}, {"offsets", &t.offsets}, {"pos", &t.pos}},
                   {{"x", &t.x}, {"ids", &t.ids}});
    check_workspace(op, workspace, workspace_size, impl_->workspace, {{"x", &t.x}, {"ids", &t.ids}},
                    {{"x_sorted", &t.x_sorted}, {"offsets", &t.offsets}, {"pos", &t.pos}});
    moe::PermuteParams p;
    p.tokens = T;
    p.top_k = K;
    p.experts = D.num_experts;
    p.hidden = H;
    p.dtype = D.rows.dtype;
    p.elem_bytes = int(es);
    p.vec_bytes = vec_bytes(H * es, {&t.x, &t.x_sorted}, es);
    p.x = t.x.data;
    p.x_stride = row_stride(t.x);
    p.ids = t.ids.data;
    p.ids_int32 = D.routing.dtype == DType::Int32;
    p.id_stride = row_stride(t.ids);
    p.x_sorted = t.x_sorted.data;
    p.x_sorted_stride = row_stride(t.x_sorted);
    p.offsets = t.offsets.data;
    p.offsets_int32 = D.offsets_dtype == DType::Int32;
    p.pos = static_cast<int32_t*>(t.pos.data);
    p.pos_stride = row_stride(t.pos);
    DeviceGuard guard(device);
    moe::permute(p, workspace, workspace_size, st);
    return;
  }
  const bool backward = D.op == "unpermute_backward";
  const TensorView& lead = backward ? t.grad_out : t.y_sorted;
  const int device = lead.device;
  const char* lead_name = backward ? "grad_out" : "y_sorted";
  check_view(op, lead_name, lead, D.rows, device, lead_name);
  check_view(op, "pos", t.pos, D.routing, device, lead_name);
  check_side_operand(op, t.weights, D.weights, "weights", DType::Float32, {T, K},
                     D.weights ? "the plan was selected with weights" : "the plan was selected without weights", true,
                     device, lead_name);
  moe::UnpermuteParams p;
  p.backward = backward;
  p.tokens = T;
  p.top_k = K;
  p.sorted_rows = N;
  p.hidden = H;
  p.dtype = D.rows.dtype;
  p.pos = static_cast<const int32_t*>(t.pos.data);
  p.pos_stride = row_stride(t.pos);
  p.weights = D.weights ? static_cast<const float*>(t.weights.data) : nullptr;
  p.weight_stride = row_stride(t.weights);
  if (!backward) {
    check_like(op, t.out, matrix(T, H, D.rows.dtype), "out", "[tokens, hidden]", device, lead_name);
    check_aliasing(op, {{"out", &t.out}}, {{"y_sorted", &t.y_sorted}, {"pos", &t.pos}, {"weights", &t.weights}});
    p.y_sorted = t.y_sorted.data;
    p.y_sorted_stride = row_stride(t.y_sorted);
    p.out = t.out.data;
    p.out_stride = row_stride(t.out);
    p.vec_bytes = vec_bytes(H * es, {&t.y_sorted, &t.out}, es);
  } else {
    check_like(op, t.grad_y_sorted, matrix(N, H, D.rows.dtype), "grad_y_sorted", "[sorted_rows, hidden]", device,
               lead_name);
    check_presence(op, t.y_sorted, D.weights, "y_sorted",
                   D.weights ? "the weights' gradient reads it" : "without weights there is no weight gradient");
    check_side_operand(op, t.grad_weights, D.weights, "grad_weights", DType::Float32, {T, K},
                       D.weights ? "the plan writes the weights' gradient" : "the plan has no weights", true, device,
                       lead_name);
    if (D.weights) check_like(op, t.y_sorted, matrix(N, H, D.rows.dtype), "y_sorted", "[sorted_rows, hidden]", device,
                              lead_name);
    check_aliasing(op, {{"grad_y_sorted", &t.grad_y_sorted}, {"grad_weights", &t.grad_weights}},
                   {{"grad_out", &t.grad_out}, {"pos", &t.pos}, {"weights", &t.weights}, {"y_sorted", &t.y_sorted}});
    p.grad_out = t.grad_out.data;
    p.grad_out_stride = row_stride(t.grad_out);
    p.grad_y_sorted = t.grad_y_sorted.data;
    p.grad_y_sorted_stride = row_stride(t.grad_y_sorted);
    p.y_sorted = t.y_sorted.data;
    p.y_sorted_stride = row_stride(t.y_sorted);
    p.grad_weights = D.weights ? static_cast<float*>(t.grad_weights.data) : nullptr;
    p.grad_weight_stride = row_stride(t.grad_weights);
    p.vec_bytes = vec_bytes(H * es, {&t.grad_out, &t.grad_y_sorted, &t.y_sorted}, es);
  }
  DeviceGuard guard(device);
  moe::unpermute(p, st);
}

FamilyInfo moe_family_info() {
  FamilyInfo f{"moe", "MoeGatePlan, MoePermutePlan",
               "mixture-of-experts routing: gating (softmax / sigmoid scores, top-k, renormalised, DeepSeek grouped "
               "top-k with a correction bias, scaling) with backward; token permutation into expert order with the "
               "offsets grouped_linear takes; the weighted combine back, with backward",
               {}};
  const std::vector<DType> logits = {DType::Float32, DType::Float16, DType::BFloat16};
  const std::vector<DType> rows = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};
  f.ops.push_back(OpCoverage{"moe_gate", "routing", logits, {"rows"}, Backend::Bespoke, true});
  f.ops.push_back(OpCoverage{"moe_permute", "routing", rows, {"rows"}, Backend::Bespoke, true});
  f.ops.push_back(OpCoverage{"moe_unpermute", "routing", rows, {"rows"}, Backend::Bespoke, true});
  return f;
}

}  // namespace baracuda
