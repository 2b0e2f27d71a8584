// Bindings of the KV-cache family: descriptor, plan, and the functional entry (operands by name).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "baracuda/errors.h"
#include "baracuda/kv_cache.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

constexpr int kNumSlots = 7;
const NamedOperand<KvCacheTensors> kRoles[kNumSlots] = {
    {"key", &KvCacheTensors::key},
    {"value", &KvCacheTensors::value},
    {"key_cache", &KvCacheTensors::key_cache},
    {"value_cache", &KvCacheTensors::value_cache},
    {"slot_mapping", &KvCacheTensors::slot_mapping},
    {"k_scale", &KvCacheTensors::k_scale},
    {"v_scale", &KvCacheTensors::v_scale}};
enum { KEY, VALUE, KEY_CACHE, VALUE_CACHE, SLOTS, K_SCALE, V_SCALE };

struct Operands {
  Imported held[kNumSlots];
  KvCacheTensors views;
};
void import_operands(nb::handle tensors, Operands& ops) {
  import_named("kv_cache_append", tensors, kRoles, ops.held, ops.views,
               [](int i) { return i == KEY_CACHE || i == VALUE_CACHE; });
  if (!ops.held[KEY].imported) throw InvalidArgument("kv_cache_append: key is missing");
}

}  // namespace

void init_kv_cache(nb::module_& m) {
  bind_descriptor<KvCacheDescriptor>(
      m, "KvCacheDescriptor",
      "Append keys [tokens, kv_heads, D] (and values) to a paged cache [pages, page_size, kv_heads, D] (any strides: "
      "a heads-first cache as its permuted view) at int32 / int64 slots. Pure data; hashable.")
      .def("__init__",
           [](KvCacheDescriptor* d, TensorSpec key, TensorSpec key_cache, std::optional<TensorSpec> value,
              std::optional<TensorSpec> value_cache, DType slot_dtype, bool scales, bool scale_per_head) {
             new (d) KvCacheDescriptor{};
             if (value.has_value() != value_cache.has_value())
               throw InvalidArgument("KvCacheDescriptor: value and value_cache go together");
             d->key = std::move(key);
             d->key_cache = std::move(key_cache);
             d->has_value = value.has_value();
             if (value) {
               d->value = std::move(*value);
               d->value_cache = std::move(*value_cache);
             }
             d->slot_dtype = slot_dtype;
             d->scales = scales;
             d->scale_per_head = scale_per_head;
           },
           "key"_a, "key_cache"_a, "value"_a = nb::none(), "value_cache"_a = nb::none(), nb::kw_only(),
           "slot_dtype"_a = DType::Int64, "scales"_a = false, "scale_per_head"_a = false)
      .def_ro("key", &KvCacheDescriptor::key)
      .def_ro("key_cache", &KvCacheDescriptor::key_cache)
      .def_ro("has_value", &KvCacheDescriptor::has_value)
      .def_ro("slot_dtype", &KvCacheDescriptor::slot_dtype);

  bind_plan<KvCachePlan>(m, "KvCachePlan", "A validated KV-cache append: select once, run every decode step.")
      .def("workspace_bytes", &KvCachePlan::workspace_bytes, "Always 0.")
      .def("run",
           [](const KvCachePlan& plan, nb::kwargs kwargs) {
             const RunKwargs a = split_run_kwargs(kwargs);
             if (present(a.workspace)) throw InvalidArgument("kv_cache_append: run() takes no workspace");
             Operands ops;
             import_operands(a.tensors, ops);
             run_imported(plan, ops.views, ops.held[KEY], nb::none(), nb::none(), a.stream);
           },
           "kwargs"_a,
           "run(key=, key_cache=, slot_mapping=, [value=, value_cache=], stream=): check the tensors and write the "
           "caches in place on `stream` (default: key's framework's current stream). No host work beyond the "
           "checks, no allocation: a decode step that calls it can be captured in a CUDA graph.");

  m.def("kv_cache_append_call",
        [](nb::dict tensors, nb::handle stream) {
          Operands ops;
          import_operands(tensors, ops);
          std::string key;
          for (int i = 0; i < kNumSlots; ++i) {
            key.push_back(char(ops.held[i].imported));
            if (ops.held[i].imported && i != SLOTS && i != K_SCALE && i != V_SCALE) append_key(key, ops.held[i].view);
          }
          key.push_back(char(ops.held[SLOTS].imported ? int(ops.views.slot_mapping.dtype) : -1));
          for (int i : {K_SCALE, V_SCALE}) {
            key.push_back(char(ops.held[i].imported));
            if (ops.held[i].imported) append_key(key, ops.held[i].view);
          }
          const KvCachePlan plan = plan_cache<KvCachePlan>().get(key, [&] {
            if (!ops.held[KEY_CACHE].imported) throw InvalidArgument("kv_cache_append: key_cache is missing");
            if (!ops.held[SLOTS].imported) throw InvalidArgument("kv_cache_append: slot_mapping is missing");
            KvCacheDescriptor d;
            d.key = spec_of(ops.views.key);
            d.key_cache = spec_of(ops.views.key_cache);
            d.has_value = ops.held[VALUE].imported || ops.held[VALUE_CACHE].imported;
            if (d.has_value) {
              if (!ops.held[VALUE].imported || !ops.held[VALUE_CACHE].imported)
                throw InvalidArgument("kv_cache_append: value and value_cache go together");
              d.value = spec_of(ops.views.value);
              d.value_cache = spec_of(ops.views.value_cache);
            }
            d.slot_dtype = ops.views.slot_mapping.dtype;
            d.scales = ops.held[K_SCALE].imported;
            d.scale_per_head = d.scales && ops.views.k_scale.ndim == 1 && ops.views.k_scale.shape[0] > 1;
            return KvCachePlan::select(d);
          });
          run_imported(plan, ops.views, ops.held[KEY], nb::none(), nb::none(), stream);
          return plan.sku().name;
        },
        "tensors"_a, "stream"_a = nb::none(),
        "Functional entry: tensors by name (key, value, key_cache, value_cache, slot_mapping, k_scale, v_scale; None = "
        "absent), "
        "select (cached on the operands' metadata) and run. Returns the SKU name.");

  def_xla_plan<KvCachePlan>(m, "kv_cache_append", kRoles);
}

}  // namespace baracuda::py
