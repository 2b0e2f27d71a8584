// Bindings of the RoPE family: descriptor, plan, the functional entry, and the frequencies helper.
// Operands are named by the one table below (run()'s keywords, the functional dict, the JAX roles).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "baracuda/errors.h"
#include "baracuda/rope.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

constexpr int kNumSlots = 13;
const NamedOperand<RopeTensors> kRoles[kNumSlots] = {
    {"q", &RopeTensors::q},         {"k", &RopeTensors::k},         {"q_out", &RopeTensors::q_out},
    {"k_out", &RopeTensors::k_out}, {"cos", &RopeTensors::cos},     {"sin", &RopeTensors::sin},
    {"positions", &RopeTensors::positions}, {"v", &RopeTensors::v}, {"k_cache", &RopeTensors::k_cache},
    {"v_cache", &RopeTensors::v_cache},     {"slot_mapping", &RopeTensors::slot_mapping},
    {"k_scale", &RopeTensors::k_scale},     {"v_scale", &RopeTensors::v_scale}};
enum { Q, K, Q_OUT, K_OUT, COS, SIN, POSITIONS, V, K_CACHE, V_CACHE, SLOTS, K_SCALE, V_SCALE };

struct Operands {
  Imported held[kNumSlots];
  RopeTensors views;
};
void import_operands(nb::handle tensors, Operands& ops) {
  import_named("rope", tensors, kRoles, ops.held, ops.views,
               [](int i) { return i == Q_OUT || i == K_OUT || i == K_CACHE || i == V_CACHE; });
  if (!ops.held[Q].imported) throw InvalidArgument("rope: q is missing");
}

RopeFrequencies frequencies(double theta, const std::string& scaling, double factor, double low_freq_factor,
                            double high_freq_factor, int64_t original_max_positions, double beta_fast, double beta_slow,
                            double attention_factor) {
  return RopeFrequencies{theta, scaling, factor, low_freq_factor, high_freq_factor, original_max_positions,
                         beta_fast, beta_slow, attention_factor};
}
#define BARACUDA_ROPE_FREQ_ARGS                                                                           \
  "theta"_a = 10000.0, "scaling"_a = "none", "factor"_a = 1.0, "low_freq_factor"_a = 1.0,                 \
      "high_freq_factor"_a = 4.0, "original_max_positions"_a = 0, "beta_fast"_a = 32.0, "beta_slow"_a = 1.0, \
      "attention_factor"_a = 0.0

}  // namespace

void init_rope(nb::module_& m) {
  nb::class_<RopeFrequencies>(m, "RopeFrequencies",
                              "theta and a scaling rule ('none', 'linear', 'llama3', 'yarn') with its parameters.")
      .def(nb::new_(&frequencies), nb::kw_only(), BARACUDA_ROPE_FREQ_ARGS)
      .def_ro("theta", &RopeFrequencies::theta)
      .def_ro("scaling", &RopeFrequencies::scaling)
      .def_ro("factor", &RopeFrequencies::factor)
      .def_ro("low_freq_factor", &RopeFrequencies::low_freq_factor)
      .def_ro("high_freq_factor", &RopeFrequencies::high_freq_factor)
      .def_ro("original_max_positions", &RopeFrequencies::original_max_positions)
      .def_ro("beta_fast", &RopeFrequencies::beta_fast)
      .def_ro("beta_slow", &RopeFrequencies::beta_slow)
      .def_ro("attention_factor", &RopeFrequencies::attention_factor)
      .def("__eq__", [](const RopeFrequencies& a, const RopeFrequencies& b) { return a == b; });

  bind_descriptor<RopeDescriptor>(
      m, "RopeDescriptor",
      "Rotary position embedding of q (and k) [tokens or batch, seq, heads, head_dim]: the pair style, rotary_dim, "
      "the angles' source (a cos / sin cache, or freqs), positions. Pure data; hashable.")
      .def("__init__",
           [](RopeDescriptor* d, TensorSpec q, std::optional<TensorSpec> k, std::string style, int64_t rotary_dim,
              bool inverse, bool cache, DType cache_dtype, int64_t cache_positions, RopeFrequencies freqs,
              bool positions, DType positions_dtype, std::optional<TensorSpec> k_cache, std::optional<TensorSpec> v,
              std::optional<TensorSpec> v_cache, DType slot_dtype, bool kv_scales, bool scale_per_head) {
             new (d) RopeDescriptor{};
             if (v.has_value() != v_cache.has_value())
               throw InvalidArgument("RopeDescriptor: v and v_cache go together");
             if (v.has_value() && !k_cache.has_value())
               throw InvalidArgument("RopeDescriptor: v_cache without k_cache");
             d->kv_cache = k_cache.has_value();
             if (k_cache) d->k_cache = std::move(*k_cache);
             d->has_v = v.has_value();
             if (v) {
               d->v = std::move(*v);
               d->v_cache = std::move(*v_cache);
             }
             d->slot_dtype = slot_dtype;
             if (kv_scales && !d->kv_cache) throw InvalidArgument("RopeDescriptor: kv_scales without k_cache");
             d->kv_scales = kv_scales;
             d->scale_per_head = kv_scales && scale_per_head;
             d->q = std::move(q);
             d->has_k = k.has_value();
             if (k) d->k = std::move(*k);
             d->style = std::move(style);
             d->rotary_dim = rotary_dim;
             d->inverse = inverse;
             d->cache = cache;
             d->cache_dtype = cache_dtype;
             d->cache_positions = cache_positions;
             d->freqs = std::move(freqs);
             d->positions = positions;
             d->positions_dtype = positions_dtype;
           },
           "q"_a, "k"_a = nb::none(), nb::kw_only(), "style"_a = "neox", "rotary_dim"_a = 0, "inverse"_a = false,
           "cache"_a = false, "cache_dtype"_a = DType::Float32, "cache_positions"_a = 0,
           "freqs"_a = RopeFrequencies{}, "positions"_a = false, "positions_dtype"_a = DType::Int64,
           "k_cache"_a = nb::none(), "v"_a = nb::none(), "v_cache"_a = nb::none(), "slot_dtype"_a = DType::Int64,
           "kv_scales"_a = false, "scale_per_head"_a = false)
      .def_ro("q", &RopeDescriptor::q)
      .def_prop_ro("k", [](const RopeDescriptor& d) { return d.has_k ? std::optional<TensorSpec>(d.k) : std::nullopt; })
      .def_ro("style", &RopeDescriptor::style)
      .def_ro("rotary_dim", &RopeDescriptor::rotary_dim)
      .def_ro("inverse", &RopeDescriptor::inverse)
      .def_ro("cache", &RopeDescriptor::cache)
      .def_ro("cache_dtype", &RopeDescriptor::cache_dtype)
      .def_ro("cache_positions", &RopeDescriptor::cache_positions)
      .def_ro("freqs", &RopeDescriptor::freqs)
      .def_ro("positions", &RopeDescriptor::positions)
      .def_ro("positions_dtype", &RopeDescriptor::positions_dtype)
      .def_ro("kv_cache", &RopeDescriptor::kv_cache)
      .def_ro("kv_scales", &RopeDescriptor::kv_scales)
      .def_ro("scale_per_head", &RopeDescriptor::scale_per_head);

  bind_plan<RopePlan>(m, "RopePlan", "A validated RoPE launch: select once, run many times.")
      .def("workspace_bytes", &RopePlan::workspace_bytes, "Always 0.")
      .def("run",
           [](const RopePlan& plan, nb::kwargs kwargs) {
             const RunKwargs a = split_run_kwargs(kwargs);
             if (present(a.workspace)) throw InvalidArgument("rope: run() takes no workspace");
             Operands ops;
             import_operands(a.tensors, ops);
             run_imported(plan, ops.views, ops.held[Q], nb::none(), nb::none(), a.stream);
           },
           "kwargs"_a,
           "run(q=, q_out=, [k=, k_out=, cos=, sin=, positions=, v=, k_cache=, v_cache=, slot_mapping=, k_scale=, "
           "v_scale=], stream=): check the tensors against the descriptor and launch on `stream` (default: q's "
           "framework's current stream). q_out may be q itself (in place).");

  def_xla_plan<RopePlan>(m, "rope", kRoles);

  m.def("rope_inv_freq",
        [](int64_t rotary_dim, const RopeFrequencies& f) {
          double af = 1.0;
          auto inv = rope_inv_freq(f, rotary_dim, &af);
          return nb::make_tuple(inv, af);
        },
        "rotary_dim"_a, "freqs"_a,
        "(inv_freq, attention_factor): the rotary_dim / 2 scaled inverse frequencies the theta path uses, and the "
        "factor on cos / sin.");

  m.def("rope_call",
        [](nb::dict tensors, const std::string& style, int64_t rotary_dim, bool inverse, const RopeFrequencies& freqs,
           nb::handle stream) {
          Operands ops;
          import_operands(tensors, ops);
          const RopeTensors& t = ops.views;
          std::string key = style;
          key.push_back('\0');
          key.append(reinterpret_cast<const char*>(&rotary_dim), sizeof rotary_dim);
          key.push_back(char(inverse));
          const bool cache_given = ops.held[COS].imported;
          if (!cache_given) {
            key += freqs.scaling;
            key.push_back('\0');
            for (double v : {freqs.theta, freqs.factor, freqs.low_freq_factor, freqs.high_freq_factor,
                             double(freqs.original_max_positions), freqs.beta_fast, freqs.beta_slow,
                             freqs.attention_factor})
              key.append(reinterpret_cast<const char*>(&v), sizeof v);
          }
          for (int i : {Q, K, COS, POSITIONS, V, K_CACHE, V_CACHE, SLOTS, K_SCALE, V_SCALE}) {
            key.push_back(char(ops.held[i].imported));
            if (ops.held[i].imported) append_key(key, ops.held[i].view);
          }
          const RopePlan plan = plan_cache<RopePlan>().get(key, [&] {
            RopeDescriptor d;
            d.q = spec_of(t.q);
            d.has_k = ops.held[K].imported;
            if (d.has_k) d.k = spec_of(t.k);
            d.style = style;
            d.rotary_dim = rotary_dim;
            d.inverse = inverse;
            d.cache = cache_given;
            if (d.cache) {
              d.cache_dtype = t.cos.dtype;
              d.cache_positions = t.cos.ndim > 0 ? t.cos.shape[0] : 0;
            }
            d.freqs = freqs;
            d.positions = ops.held[POSITIONS].imported;
            if (d.positions) d.positions_dtype = t.positions.dtype;
            d.kv_cache = ops.held[K_CACHE].imported;
            if (d.kv_cache) {
              if (!ops.held[SLOTS].imported) throw InvalidArgument("rope: k_cache needs slot_mapping");
              d.k_cache = spec_of(t.k_cache);
              d.slot_dtype = t.slot_mapping.dtype;
              d.has_v = ops.held[V].imported || ops.held[V_CACHE].imported;
              if (d.has_v) {
                if (!ops.held[V].imported || !ops.held[V_CACHE].imported)
                  throw InvalidArgument("rope: v and v_cache go together");
                d.v = spec_of(t.v);
                d.v_cache = spec_of(t.v_cache);
              }
              d.kv_scales = ops.held[K_SCALE].imported;
              if (!d.kv_scales && ops.held[V_SCALE].imported) throw InvalidArgument("rope: v_scale without k_scale");
              d.scale_per_head = d.kv_scales && t.k_scale.ndim == 1 && t.k_scale.shape[0] > 1;
            } else if (ops.held[K_SCALE].imported || ops.held[V_SCALE].imported) {
              throw InvalidArgument("rope: k_scale / v_scale go with a cache append (k_cache)");
            }
            return RopePlan::select(d);
          });
          run_imported(plan, ops.views, ops.held[Q], nb::none(), nb::none(), stream);
          return plan.sku().name;
        },
        "tensors"_a, "style"_a, "rotary_dim"_a, "inverse"_a, "freqs"_a, "stream"_a = nb::none(),
        "Functional entry: tensors by name (q, q_out, k, k_out, cos, sin, positions, and for the fused cache append "
        "v, k_cache, v_cache, slot_mapping, and k_scale / v_scale for fp8 caches; None = absent), select "
        "(cached on the parameters and the operands' metadata) and run. Returns the SKU name.");
  m.def("rope_cache_size", [] { return plan_cache<RopePlan>().size(); }, "Plans in the RoPE functional cache.");
}

}  // namespace baracuda::py
