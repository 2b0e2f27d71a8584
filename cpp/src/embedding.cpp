// EmbeddingPlan: validation of the table, indices and rows, the row map, the workspace, and run().
#include "baracuda/embedding.h"

#include <sstream>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "embedding/embedding_launch.h"
#include "plan_util.h"

namespace baracuda {

namespace {

void need(bool ok, const std::string& op, const std::string& what) {
  if (!ok) throw InvalidArgument(op + ": " + what);
}

bool is_table_dtype(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16 || t == DType::Float64;
}

// indices' dims (size-1 ones dropped, neighbours merged where both layouts allow).
embedding::RowMap row_map(const TensorSpec& indices, const TensorSpec& rows) {
  const auto is = indices.effective_strides(), rs = rows.effective_strides();
  embedding::RowMap m;
  std::vector<int64_t> shape, istr, rstr;
  for (size_t d = 0; d < indices.shape.size(); ++d) {
    if (indices.shape[d] == 1) continue;
    if (!shape.empty() && istr.back() == is[d] * indices.shape[d] && rstr.back() == rs[d] * indices.shape[d]) {
      shape.back() *= indices.shape[d];
      istr.back() = is[d];
      rstr.back() = rs[d];
      continue;
    }
    shape.push_back(indices.shape[d]);
    istr.push_back(is[d]);
    rstr.push_back(rs[d]);
  }
  if (shape.empty()) {
    shape = {1};
    istr = rstr = {0};
  }
  m.rank = int(shape.size());
  for (int d = 0; d < m.rank; ++d) {
    m.shape[d] = shape[d];
    m.index_stride[d] = istr[d];
    m.row_stride[d] = rstr[d];
  }
  return m;
}

}  // namespace

std::string EmbeddingDescriptor::str() const {
  std::ostringstream os;
  os << "EmbeddingDescriptor(" << (backward ? "backward" : "forward") << ", weight=" << weight.str()
     << ", indices=" << indices.str() << ", " << (backward ? "grad_out=" : "out=") << rows.str();
  if (padding_idx >= 0) os << ", padding_idx=" << padding_idx;
  if (backward) {
    if (scale_grad_by_freq) os << ", scale_grad_by_freq";
    os << (deterministic ? ", deterministic" : ", atomic");
  }
  os << ")";
  return os.str();
}

struct EmbeddingPlan::Impl {
  EmbeddingDescriptor desc;
  KernelSku sku;
  embedding::Params base;  // the pointers and vector width are filled at run
  int64_t workspace = 0;
};

EmbeddingPlan EmbeddingPlan::select(const EmbeddingDescriptor& desc, const PlanPreference& pref) {
  const std::string op = desc.backward ? "embedding_backward" : "embedding";
  const char* table = desc.backward ? "grad_weight" : "weight";
  const char* rows = desc.backward ? "grad_out" : "out";
  const TensorSpec &W = desc.weight, &I = desc.indices, &R = desc.rows;
  need(W.shape.size() == 2, op, std::string(table) + " has shape " + shape_str(W.shape) +
                                    "; expected [num_embeddings, embedding_dim]");
  if (!is_table_dtype(W.dtype))
    throw InvalidDType(op + ": " + table + " is " + dtype_name(W.dtype) +
                       "; expected float32, float16, bfloat16 or float64");
  if (I.dtype != DType::Int32 && I.dtype != DType::Int64)
    throw InvalidDType(op + ": indices is " + std::string(dtype_name(I.dtype)) + "; expected int32 or int64");
  if (I.shape.size() > size_t(embedding::kMaxRank))
    throw Unsupported(op + ": indices has " + std::to_string(I.shape.size()) + " dims; at most " +
                      std::to_string(embedding::kMaxRank));
  std::vector<int64_t> want = I.shape;
  want.push_back(W.shape[1]);
  need(R.shape == want, op, std::string(rows) + " has shape " + shape_str(R.shape) + "; expected indices.shape + [" +
                                std::to_string(W.shape[1]) + "] = " + shape_str(want));
  if (R.dtype != W.dtype)
    throw InvalidDType(op + ": " + rows + " is " + dtype_name(R.dtype) + " but " + table + " is " +
                       dtype_name(W.dtype));
  const int64_t V = W.shape[0], D = W.shape[1];
  for (const TensorSpec* s : {&W, &R}) {
    const auto st = s->effective_strides();
    const char* name = s == &W ? table : rows;
    if (D > 1 && st.back() != 1) throw Unsupported(op + ": " + name + " must be contiguous along embedding_dim");
    for (int64_t v : st)
      if (v < 0) throw Unsupported(op + ": " + name + " has a negative stride");
  }
  const TensorSpec& written = desc.backward ? W : R;
  need(non_overlapping(written.shape, written.effective_strides()), op,
       std::string(desc.backward ? table : rows) + "'s strides make two of its elements share memory");
  need(desc.padding_idx == -1 || (desc.padding_idx >= 0 && desc.padding_idx < V), op,
       "padding_idx=" + std::to_string(desc.padding_idx) + "; expected -1 (none) or in [0, " + std::to_string(V) + ")");
  const int64_t n = checked_numel(op, "indices", I.shape);
  const bool deterministic = desc.deterministic || pref.require_deterministic;
  if (desc.backward) {
    if (V >= (int64_t(1) << 31))
      throw Unsupported(op + ": " + std::to_string(V) + " embeddings; at most 2^31 - 1");
    if (deterministic && n >= (int64_t(1) << 31))
      throw Unsupported(op + ": " + std::to_string(n) + " indices; the deterministic backward sorts at most 2^31 - 1");
    if (desc.scale_grad_by_freq && !deterministic)
      throw Unsupported(op + ": scale_grad_by_freq needs each index's count: use deterministic=True");
  }
  for (Backend b : pref.forbid)
    if (b == Backend::Bespoke) throw Unsupported(op + ": the preference forbids the only backend (bespoke)");

  auto impl = std::make_shared<Impl>();
  impl->desc = desc;
  impl->desc.deterministic = deterministic;
  embedding::Params& p = impl->base;
  p.dtype = W.dtype;
  p.elem_bytes = int(dtype_size(W.dtype));
  p.num_embeddings = V;
  p.dim = D;
  p.indices_int32 = I.dtype == DType::Int32;
  p.n = n;
  p.map = row_map(I, R);
  p.padding_idx = desc.padding_idx;
  p.scale_grad_by_freq = desc.scale_grad_by_freq;
  p.deterministic = deterministic;

  KernelSku& k = impl->sku;
  k.category = "embedding";
  k.op = desc.backward ? "embedding_backward" : "embedding";
  k.layout = "rows";
  k.dtypes = {W.dtype, I.dtype};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  k.precision.compute_dtype = W.dtype;
  if (!desc.backward) {
    k.name = "embedding.gather";
    k.precision.accumulator_dtype = W.dtype;
    k.precision.math = "a bitwise copy of each indexed row (up to 16-byte accesses); NaN rows for indices outside "
                       "[0, num_embeddings)";
  } else if (deterministic) {
    const embedding::Workspace ws = embedding::backward_workspace(p);
    impl->workspace = ws.bytes;
    k.name = "embedding.backward.sorted_c" + std::to_string(ws.chunk ? ws.chunk : 64);
    k.precision.accumulator_dtype = W.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
    k.precision.math = "indices stably radix-sorted (CUB); each row's gradient summed in index order over fixed "
                       "chunks of the sorted list (the chunk in the name), then rounded once: the same bits every run";
    k.precision.deterministic = true;
  } else {
    k.name = "embedding.backward.atomic";
    k.precision.accumulator_dtype = W.dtype;
    k.precision.math = "a scatter-add with atomics in grad_weight's dtype (16-bit pairs where aligned): the order "
                       "of the additions, and the rounding, vary from run to run";
    k.precision.deterministic = false;
    k.precision.bit_stable = false;
  }
  return EmbeddingPlan(impl);
}

const KernelSku& EmbeddingPlan::sku() const { return impl_->sku; }
const EmbeddingDescriptor& EmbeddingPlan::descriptor() const { return impl_->desc; }
int64_t EmbeddingPlan::workspace_bytes() const { return impl_->workspace; }

void EmbeddingPlan::run(const EmbeddingTensors& t, void* workspace, int64_t workspace_size, StreamHandle stream) const {
  const EmbeddingDescriptor& D = impl_->desc;
  const std::string op = D.backward ? "embedding_backward" : "embedding";
  const TensorView& table = D.backward ? t.grad_weight : t.weight;
  const TensorView& rows = D.backward ? t.grad_out : t.out;
  const char* table_name = D.backward ? "grad_weight" : "weight";
  const char* rows_name = D.backward ? "grad_out" : "out";
  const int device = t.indices.device;
  check_view(op, "indices", t.indices, D.indices, device, "indices");
  check_view(op, table_name, table, D.weight, device, "indices");
  check_view(op, rows_name, rows, D.rows, device, "indices");
  check_presence(op, D.backward ? t.weight : t.grad_out, false, D.backward ? "weight" : "grad_out",
                 D.backward ? "the backward reads grad_out, not the table" : "the forward reads the table");
  check_presence(op, D.backward ? t.out : t.grad_weight, false, D.backward ? "out" : "grad_weight",
                 D.backward ? "the backward writes grad_weight" : "the forward writes out");
  if (D.backward) {
    check_aliasing(op, {{"grad_weight", &t.grad_weight}}, {{"indices", &t.indices}, {"grad_out", &t.grad_out}});
    check_workspace(op, workspace, workspace_size, impl_->workspace,
                    {{"indices", &t.indices}, {"grad_out", &t.grad_out}}, {{"grad_weight", &t.grad_weight}});
  } else {
    check_aliasing(op, {{"out", &t.out}}, {{"indices", &t.indices}, {"weight", &t.weight}});
  }

  embedding::Params p = impl_->base;
  p.indices = t.indices.data;
  p.table_row_stride = table.strides[0];
  if (D.backward) {
    p.table_out = table.data;
    p.rows_in = rows.data;
  } else {
    p.table_in = table.data;
    p.rows_out = rows.data;
  }
  AccessWidth w;
  w.fit(p.dim * p.elem_bytes);
  w.fit(p.table_row_stride * p.elem_bytes);
  for (int d = 0; d < p.map.rank; ++d) w.fit(p.map.row_stride[d] * p.elem_bytes);
  w.fit(table.data);
  w.fit(rows.data);
  p.vec_bytes = int(w.bytes);
  if (D.backward ? (p.num_embeddings == 0 || p.dim == 0) : (p.n == 0 || p.dim == 0)) return;
  DeviceGuard guard(device);
  if (D.backward) embedding::backward(p, workspace, workspace_size, stream);
  else embedding::forward(p, stream);
}

FamilyInfo embedding_family_info() {
  FamilyInfo f{"embedding", "EmbeddingPlan",
               "rows of a table gathered by int32 / int64 indices of any shape (NaN rows for indices out of range), "
               "and the table's gradient: deterministic (sorted, fixed-order sums) or atomic; padding_idx, "
               "scale_grad_by_freq",
               {}};
  const std::vector<DType> dt = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};
  f.ops.push_back(OpCoverage{"embedding", "gather", dt, {"rows"}, Backend::Bespoke, true});
  f.ops.push_back(OpCoverage{"embedding_backward", "scatter", dt, {"rows"}, Backend::Bespoke, false});
  return f;
}

}  // namespace baracuda
