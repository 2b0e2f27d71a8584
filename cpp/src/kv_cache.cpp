// KvCachePlan: validation of the sources, caches and slots, the copy width, run().
#include "baracuda/kv_cache.h"

#include <sstream>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "kv_cache/kv_cache_launch.h"
#include "plan_util.h"

namespace baracuda {

namespace {

void need(bool ok, const std::string& what) {
  if (!ok) throw InvalidArgument("kv_cache_append: " + what);
}

// A source [tokens, heads, dim] and its cache [pages, page_size, heads, dim].
void check_pair(const TensorSpec& src, const TensorSpec& cache, const char* sname, const char* cname) {
  need(src.shape.size() == 3, std::string(sname) + " has shape " + shape_str(src.shape) +
                                  "; expected [tokens, kv_heads, head_dim]");
  const auto st = src.effective_strides();
  if (src.shape.back() > 1 && st.back() != 1)
    throw Unsupported("kv_cache_append: " + std::string(sname) + " must be contiguous along head_dim");
  for (int64_t v : st)
    if (v < 0) throw Unsupported("kv_cache_append: " + std::string(sname) + " has a negative stride");
  check_paged_cache("kv_cache_append", cache, src.shape[1], src.shape[2], src.dtype, cname, sname, true);
}

}  // namespace

std::string KvCacheDescriptor::str() const {
  std::ostringstream os;
  os << "KvCacheDescriptor(key=" << key.str() << ", key_cache=" << key_cache.str();
  if (has_value) os << ", value=" << value.str() << ", value_cache=" << value_cache.str();
  os << ", slot_mapping=" << dtype_name(slot_dtype);
  if (scales) os << ", scales=" << (scale_per_head ? "per_head" : "per_tensor");
  os << ")";
  return os.str();
}

struct KvCachePlan::Impl {
  KvCacheDescriptor desc;
  KernelSku sku;
};

KvCachePlan KvCachePlan::select(const KvCacheDescriptor& desc, const PlanPreference& pref) {
  check_pair(desc.key, desc.key_cache, "key", "key_cache");
  if (desc.has_value) {
    check_pair(desc.value, desc.value_cache, "value", "value_cache");
    need(desc.value.shape[0] == desc.key.shape[0] && desc.value.shape[1] == desc.key.shape[1],
         "value has shape " + shape_str(desc.value.shape) + "; expected key's tokens and kv_heads " +
             shape_str(desc.key.shape));
    need(desc.value_cache.shape[0] == desc.key_cache.shape[0] && desc.value_cache.shape[1] == desc.key_cache.shape[1],
         "value_cache has shape " + shape_str(desc.value_cache.shape) + "; expected key_cache's pages and page_size");
  }
  const bool quantize = desc.key_cache.dtype != desc.key.dtype;
  if (desc.has_value && (desc.value_cache.dtype != desc.value.dtype) != quantize)
    throw InvalidDType("kv_cache_append: key_cache and value_cache must both be copies or both fp8 quantizations of "
                       "their sources");
  need(!desc.scales || quantize, "k_scale / v_scale quantize into an fp8 cache; these caches are copies");
  if (desc.slot_dtype != DType::Int32 && desc.slot_dtype != DType::Int64)
    throw InvalidDType("kv_cache_append: slot_mapping is " + std::string(dtype_name(desc.slot_dtype)) +
                       "; expected int32 or int64");
  for (Backend b : pref.forbid)
    if (b == Backend::Bespoke) throw Unsupported("kv_cache_append: the preference forbids the only backend (bespoke)");
  auto impl = std::make_shared<Impl>();
  impl->desc = desc;
  KernelSku& k = impl->sku;
  k.category = "kv_cache";
  k.op = "append";
  k.name = quantize ? "kv_cache.append.paged_fp8" : "kv_cache.append.paged";
  k.layout = "strided";
  k.dtypes = {desc.key_cache.dtype, desc.key.dtype, desc.slot_dtype};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  k.precision.compute_dtype = desc.key.dtype;
  k.precision.accumulator_dtype = desc.key.dtype;
  k.precision.math = quantize ? "fp8(src / scale) per element, saturated to the finite range"
                              : "a bitwise copy of each head row into its slot (16-byte accesses where the rows allow)";
  return KvCachePlan(impl);
}

const KernelSku& KvCachePlan::sku() const { return impl_->sku; }
const KvCacheDescriptor& KvCachePlan::descriptor() const { return impl_->desc; }

void KvCachePlan::run(const KvCacheTensors& t, void*, int64_t, StreamHandle stream) const {
  const KvCacheDescriptor& D = impl_->desc;
  const std::string op = "kv_cache_append";
  const int device = t.key.device;
  check_view(op, "key", t.key, D.key, device, "key");
  check_view(op, "key_cache", t.key_cache, D.key_cache, device, "key");
  check_presence(op, t.value, D.has_value, "value", D.has_value ? "the descriptor has value" : "the descriptor has none");
  check_presence(op, t.value_cache, D.has_value, "value_cache",
                 D.has_value ? "the descriptor has value" : "the descriptor has none");
  if (D.has_value) {
    check_view(op, "value", t.value, D.value, device, "key");
    check_view(op, "value_cache", t.value_cache, D.value_cache, device, "key");
  }
  check_presence(op, t.slot_mapping, true, "slot_mapping", "it says where each token goes");
  if (t.slot_mapping.dtype != D.slot_dtype)
    throw InvalidDType(op + ": slot_mapping is " + std::string(dtype_name(t.slot_mapping.dtype)) + "; expected " +
                       dtype_name(D.slot_dtype));
  if (!shape_is(t.slot_mapping, {D.key.shape[0]}))
    throw InvalidArgument(op + ": slot_mapping has shape " + shape_str(t.slot_mapping.shape, t.slot_mapping.ndim) +
                          "; expected [tokens] = " + shape_str({D.key.shape[0]}));
  check_same_device(op, t.slot_mapping, device, "slot_mapping", "key");
  const int64_t scale_len = D.scale_per_head ? D.key.shape[1] : 1;
  check_side_operand(op, t.k_scale, D.scales, "k_scale", DType::Float32, {scale_len},
                     D.scales ? "the plan was selected with scales" : "the plan was selected without scales", true,
                     device, "key");
  check_side_operand(op, t.v_scale, D.scales && D.has_value, "v_scale", DType::Float32, {scale_len},
                     D.scales && D.has_value ? "the plan was selected with scales and values"
                                             : "the plan has no value scale",
                     true, device, "key");
  check_aliasing(op, {{"key_cache", &t.key_cache}, {"value_cache", &t.value_cache}},
                 {{"key", &t.key}, {"value", &t.value}, {"slot_mapping", &t.slot_mapping}, {"k_scale", &t.k_scale},
                  {"v_scale", &t.v_scale}});

  kv_cache::Geometry g;
  g.tokens = D.key.shape[0];
  g.heads = D.key.shape[1];
  g.pages = D.key_cache.shape[0];
  g.page_size = D.key_cache.shape[1];
  g.slots_int32 = D.slot_dtype == DType::Int32;
  g.slots = t.slot_mapping.data;
  g.slot_stride = t.slot_mapping.ndim ? t.slot_mapping.strides[0] : 1;
  const int64_t es = int64_t(dtype_size(D.key.dtype)), ces = int64_t(dtype_size(D.key_cache.dtype));
  AccessWidth w;
  auto stream_of = [&](const TensorView& src, const TensorView& cache) {
    kv_cache::Stream s;
    s.src = src.data;
    s.cache = cache.data;
    s.src_token = src.strides[0] * es;
    s.src_head = src.strides[1] * es;
    s.cache_page = cache.strides[0] * ces;
    s.cache_slot = cache.strides[1] * ces;
    s.cache_head = cache.strides[2] * ces;
    s.row_bytes = src.shape[2] * es;
    for (int64_t v : {s.src_token, s.src_head, s.cache_page, s.cache_slot, s.cache_head, s.row_bytes}) w.fit(v);
    w.fit(src.data);
    w.fit(cache.data);
    return s;
  };
  g.s[0] = stream_of(t.key, t.key_cache);
  g.count = 1;
  if (D.has_value) {
    g.s[1] = stream_of(t.value, t.value_cache);
    g.count = 2;
  }
  g.vec = int(w.bytes);
  g.quantize = D.key_cache.dtype != D.key.dtype;
  if (g.quantize) {
    g.q.src = D.key.dtype;
    g.q.cache = D.key_cache.dtype;
    g.q.dim[0] = D.key.shape[2];
    g.q.dim[1] = D.has_value ? D.value.shape[2] : 0;
    g.q.scale[0] = D.scales ? static_cast<const float*>(t.k_scale.data) : nullptr;
    g.q.scale[1] = D.scales && D.has_value ? static_cast<const float*>(t.v_scale.data) : nullptr;
    g.q.scale_stride[0] = g.q.scale_stride[1] = D.scale_per_head ? 1 : 0;
  }
  if (g.tokens == 0 || g.heads == 0 || D.key.shape[2] == 0) return;
  DeviceGuard guard(device);
  kv_cache::append(g, stream);
}

FamilyInfo kv_cache_family_info() {
  FamilyInfo f{"kv_cache", "KvCachePlan",
               "append new keys and values to a paged KV cache ([pages, page_size, kv_heads, head_dim], or the "
               "heads-first layout as a permuted view) at int32 / int64 slots; padding slots skipped",
               {}};
  f.ops.push_back(OpCoverage{"kv_cache_append", "cache",
                             {DType::Float16, DType::BFloat16, DType::Float32, DType::Float8E4M3, DType::Float8E5M2},
                             {"paged", "paged_heads_first"}, Backend::Bespoke, false});
  return f;
}

}  // namespace baracuda
