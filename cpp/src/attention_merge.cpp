// AttentionMergePlan: the merge of two attention states (cascades, split results) as a plan of the
// paged-attention family.
#include <sstream>

#include "baracuda/errors.h"
#include "baracuda/paged_attention.h"
#include "device_guard.h"
#include "paged_attention/paged_attention_launch.h"
#include "plan_util.h"

namespace baracuda {

namespace {
const std::string kOp = "merge_attention_states";
}

std::string AttentionMergeDescriptor::str() const {
  std::ostringstream os;
  os << "AttentionMergeDescriptor(out_a=" << out_a.str() << ", lse_a=" << lse_a.str() << ", out_b=" << out_b.str()
     << ", lse_b=" << lse_b.str() << ", out=" << out.str();
  if (lse) os << ", lse=" << lse_out.str();
  os << ")";
  return os.str();
}

struct AttentionMergePlan::Impl {
  AttentionMergeDescriptor desc;
  KernelSku sku;
  paged_attention::MergeArgs args;  // shape part; strides and pointers filled by run
};

AttentionMergePlan AttentionMergePlan::select(const AttentionMergeDescriptor& d, const PlanPreference&) {
  auto I = std::make_shared<Impl>();
  I->desc = d;
  const auto& os = d.out_a.shape;
  const int rank = int(os.size());
  if (rank < 2 || rank > 2 + paged_attention::kMergeMaxLead)
    throw InvalidArgument(kOp + ": out_a has shape " + shape_str(os) + "; expected [..., heads, head_dim] with at most " +
                          std::to_string(paged_attention::kMergeMaxLead) + " leading dims");
  const DType dt = d.out_a.dtype;
  if (dt != DType::BFloat16 && dt != DType::Float16 && dt != DType::Float32)
    throw InvalidDType(kOp + ": out_a is " + std::string(dtype_name(dt)) + "; expected bfloat16, float16 or float32");
  const std::vector<int64_t> lse_shape(os.begin(), os.end() - 1);
  auto same = [&](const TensorSpec& s, const char* name, DType want, const std::vector<int64_t>& shape,
                  const char* like) {
    if (s.dtype != want)
      throw InvalidDType(kOp + ": " + name + " is " + std::string(dtype_name(s.dtype)) + "; expected " +
                         dtype_name(want) + " (" + like + ")");
    if (s.shape != shape)
      throw InvalidArgument(kOp + ": " + name + " has shape " + shape_str(s.shape) + "; expected " + shape_str(shape) +
                            " (" + like + ")");
    for (int64_t v : s.effective_strides())
      if (v < 0) throw Unsupported(kOp + ": " + name + " has a negative stride");
  };
  same(d.out_b, "out_b", dt, os, "out_a's dtype and shape");
  same(d.out, "out", dt, os, "out_a's dtype and shape");
  same(d.lse_a, "lse_a", DType::Float32, lse_shape, "float32, out_a's shape without head_dim");
  same(d.lse_b, "lse_b", DType::Float32, lse_shape, "float32, out_a's shape without head_dim");
  if (d.lse) same(d.lse_out, "lse", DType::Float32, lse_shape, "float32, out_a's shape without head_dim");
  for (const auto* s : {&d.out_a, &d.out_b, &d.out}) {
    const auto st = s->effective_strides();
    if (os.back() > 1 && st.back() != 1)
      throw Unsupported(kOp + ": " + (s == &d.out_a ? "out_a" : s == &d.out_b ? "out_b" : "out") +
                        " must be contiguous along head_dim");
  }
  paged_attention::MergeArgs& a = I->args;
  a.dtype = dt;
  a.d = int(os.back());
  a.heads = os[rank - 2];
  const int lead = rank - 2;
  a.rows = a.heads;
  for (int i = 0; i < lead; ++i) {
    a.lead[paged_attention::kMergeMaxLead - lead + i] = os[i];
    a.rows *= os[i];
  }
  if (os.back() > (int64_t(1) << 30) || a.rows > (int64_t(1) << 32))
    throw Unsupported(kOp + ": " + shape_str(os) + " is too large for one launch");

  KernelSku& k = I->sku;
  k.category = "attention";
  k.op = "merge_attention_states";
  k.name = "paged_attention.merge_states";
  k.layout = "[..., heads, head_dim], any strides";
  k.dtypes = {dt, DType::Float32, dt, DType::Float32};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  k.precision.math = "f32: weights exp(lse - max), one rounding of the weighted sum";
  k.precision.compute_dtype = k.precision.accumulator_dtype = DType::Float32;
  k.precision.deterministic = true;
  k.precision.bit_stable = true;
  return AttentionMergePlan(I);
}

const KernelSku& AttentionMergePlan::sku() const { return impl_->sku; }
const AttentionMergeDescriptor& AttentionMergePlan::descriptor() const { return impl_->desc; }

void AttentionMergePlan::run(const AttentionMergeTensors& t, void*, int64_t, StreamHandle stream) const {
  const Impl& I = *impl_;
  const AttentionMergeDescriptor& D = I.desc;
  const int device = t.out.device;
  check_view(kOp, "out", t.out, D.out, device, "out");
  check_view(kOp, "out_a", t.out_a, D.out_a, device, "out");
  check_view(kOp, "out_b", t.out_b, D.out_b, device, "out");
  check_view(kOp, "lse_a", t.lse_a, D.lse_a, device, "out");
  check_view(kOp, "lse_b", t.lse_b, D.lse_b, device, "out");
  check_presence(kOp, t.lse, D.lse, "lse", "the plan was selected with lse=" + std::string(D.lse ? "True" : "False"));
  if (D.lse) check_view(kOp, "lse", t.lse, D.lse_out, device, "out");
  // out may be out_a or out_b itself (each element is read, then written, by one thread); lse likewise.
  check_aliasing(kOp, {{"out", &t.out}, {"lse", &t.lse}},
                 {{"out_a", &t.out_a}, {"out_b", &t.out_b}, {"lse_a", &t.lse_a}, {"lse_b", &t.lse_b}},
                 {{&t.out, &t.out_a}, {&t.out, &t.out_b}, {&t.lse, &t.lse_a}, {&t.lse, &t.lse_b}});
  paged_attention::MergeArgs a = I.args;
  const TensorView* ops[6] = {&t.out_a, &t.out_b, &t.out, &t.lse_a, &t.lse_b, &t.lse};
  const int lead = t.out.ndim - 2;
  for (int k = 0; k < 6; ++k) {
    const TensorView& v = *ops[k];
    if (!v.data) continue;
    for (int i = 0; i < lead; ++i) a.stride[k][paged_attention::kMergeMaxLead - lead + i] = v.strides[i];
    a.stride[k][paged_attention::kMergeMaxLead] = v.strides[lead];
  }
  a.out_a = t.out_a.data;
  a.out_b = t.out_b.data;
  a.out = t.out.data;
  a.lse_a = static_cast<const float*>(t.lse_a.data);
  a.lse_b = static_cast<const float*>(t.lse_b.data);
  a.lse = static_cast<float*>(t.lse.data);
  if (a.rows == 0) return;  // (head_dim 0 still writes lse)
  DeviceGuard guard(device);
  paged_attention::merge_states(a, stream);
}

}  // namespace baracuda
