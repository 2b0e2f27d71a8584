// RopePlan: validation, the frequencies (theta and its scaling rule, on the host), the SKU, run().
#include "baracuda/rope.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <sstream>

#include "baracuda/errors.h"
#include "device_guard.h"
#include "plan_util.h"
#include "common/knobs.h"
#include "rope/rope_launch.h"

namespace baracuda {

namespace {

const DType kDTypes[] = {DType::Float16, DType::BFloat16, DType::Float32};
constexpr double kPi = 3.14159265358979323846;

void need(bool ok, const std::string& what) {
  if (!ok) throw InvalidArgument("rope: " + what);
}

}  // namespace

std::vector<double> rope_inv_freq(const RopeFrequencies& f, int64_t rotary_dim, double* attention_factor) {
  need(f.theta > 0 && std::isfinite(f.theta), "theta is " + std::to_string(f.theta) + "; expected a positive number");
  need(rotary_dim > 0 && rotary_dim % 2 == 0,
       "rotary_dim is " + std::to_string(rotary_dim) + "; expected a positive even number");
  const std::string& s = f.scaling;
  need(s == "none" || s == "linear" || s == "llama3" || s == "yarn",
       "scaling is '" + s + "'; expected 'none', 'linear', 'llama3' or 'yarn'");
  if (s != "none") need(f.factor > 0, "scaling factor is " + std::to_string(f.factor) + "; expected > 0");
  if (s == "llama3" || s == "yarn")
    need(f.original_max_positions > 0, s + " scaling needs original_max_positions (the pretraining context), got " +
                                            std::to_string(f.original_max_positions));
  if (s == "llama3")
    need(f.high_freq_factor > f.low_freq_factor && f.low_freq_factor > 0,
         "llama3 scaling needs 0 < low_freq_factor < high_freq_factor, got " + std::to_string(f.low_freq_factor) +
             " and " + std::to_string(f.high_freq_factor));
  const int64_t pairs = rotary_dim / 2;
  const double dim = double(rotary_dim), orig = double(f.original_max_positions);
  std::vector<double> inv(pairs);
  for (int64_t i = 0; i < pairs; ++i) inv[i] = std::pow(f.theta, -2.0 * double(i) / dim);
  double af = 1.0;
  if (s == "linear") {
    for (double& v : inv) v /= f.factor;
  } else if (s == "llama3") {
    const double long_wave = orig / f.low_freq_factor, short_wave = orig / f.high_freq_factor;
    for (double& v : inv) {
      const double wavelength = 2 * kPi / v;
      if (wavelength > long_wave) v /= f.factor;
      else if (wavelength >= short_wave) {  // between: blend the scaled and the original frequency
        const double t = (orig / wavelength - f.low_freq_factor) / (f.high_freq_factor - f.low_freq_factor);
        v = (1 - t) * v / f.factor + t * v;
      }
    }
  } else if (s == "yarn") {
    // The dims that turn `rotations` times over the original context bound the blend.
    auto correction_dim = [&](double rotations) {
      return dim * std::log(orig / (rotations * 2 * kPi)) / (2 * std::log(f.theta));
    };
    const double lo = std::max(std::floor(correction_dim(f.beta_fast)), 0.0);
    double hi = std::min(std::ceil(correction_dim(f.beta_slow)), dim - 1);
    if (hi == lo) hi += 0.001;
    for (int64_t i = 0; i < pairs; ++i) {
      const double ramp = std::min(std::max((double(i) - lo) / (hi - lo), 0.0), 1.0);
      inv[i] = inv[i] / f.factor * ramp + inv[i] * (1 - ramp);  // extrapolate below lo, interpolate above hi
    }
    af = f.attention_factor > 0 ? f.attention_factor : f.factor <= 1 ? 1.0 : 0.1 * std::log(f.factor) + 1.0;
  }
  if (attention_factor) *attention_factor = af;
  return inv;
}

std::string RopeDescriptor::str() const {
  std::ostringstream os;
  os << "RopeDescriptor(q=" << q.str();
  if (has_k) os << ", k=" << k.str();
  os << ", style=" << style << ", rotary_dim=" << rotary_dim;
  if (inverse) os << ", inverse=True";
  if (cache) os << ", cache=" << dtype_name(cache_dtype) << "[" << cache_positions << "]";
  else {
    os << ", theta=" << freqs.theta;
    if (freqs.scaling != "none")
      os << ", scaling=" << freqs.scaling << "(factor=" << freqs.factor << ", low_freq_factor=" << freqs.low_freq_factor
         << ", high_freq_factor=" << freqs.high_freq_factor << ", original_max_positions="
         << freqs.original_max_positions << ", beta_fast=" << freqs.beta_fast << ", beta_slow=" << freqs.beta_slow
         << ", attention_factor=" << freqs.attention_factor << ")";
  }
  if (positions) os << ", positions=" << dtype_name(positions_dtype);
  if (kv_cache) {
    os << ", k_cache=" << k_cache.str();
    if (has_v) os << ", v=" << v.str() << ", v_cache=" << v_cache.str();
    os << ", slot_mapping=" << dtype_name(slot_dtype);
    if (kv_scales) os << ", kv_scales=" << (scale_per_head ? "per_head" : "per_tensor");
  }
  os << ")";
  return os.str();
}

struct RopePlan::Impl {
  RopeDescriptor desc;
  KernelSku sku;
  rope::Geometry geo;
  std::vector<int64_t> lead;  // q's leading dims (positions' shape)
};

RopePlan RopePlan::select(const RopeDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  Impl& I = *impl;
  I.desc = desc;
  const DType dt = desc.q.dtype;
  bool ok = false;
  for (DType t : kDTypes) ok = ok || t == dt;
  if (!ok) throw InvalidDType("rope: q is " + std::string(dtype_name(dt)) + "; expected float16, bfloat16 or float32");
  if (desc.has_k && desc.k.dtype != dt)
    throw InvalidDType("rope: k is " + std::string(dtype_name(desc.k.dtype)) + "; expected " + dtype_name(dt) +
                       " (q's dtype)");
  const auto& qs = desc.q.shape;
  need(qs.size() == 3 || qs.size() == 4,
       "q has shape " + shape_str(qs) + "; expected [tokens, heads, head_dim] or [batch, seq, heads, head_dim]");
  auto layout_ok = [&](const TensorSpec& s, const char* name) {
    for (int64_t e : s.shape) need(e >= 0, std::string(name) + " has a negative dimension");
    const auto st = s.effective_strides();
    if (s.shape.back() > 1 && st.back() != 1)
      throw Unsupported("rope: " + std::string(name) + " has stride " + std::to_string(st.back()) +
                        " along head_dim; the last dimension must be contiguous");
    for (size_t d = 0; d + 1 < st.size(); ++d)
      if (st[d] < 0) throw Unsupported("rope: " + std::string(name) + " has a negative stride (pass a contiguous tensor)");
  };
  layout_ok(desc.q, "q");
  const int r = int(qs.size());
  I.lead.assign(qs.begin(), qs.end() - 2);
  if (desc.has_k) {
    const auto& ks = desc.k.shape;
    need(ks.size() == qs.size() && std::equal(I.lead.begin(), I.lead.end(), ks.begin()) && ks.back() == qs.back(),
         "k has shape " + shape_str(ks) + "; expected q's leading dims and head_dim " + shape_str(I.lead) + " + [heads, " +
             std::to_string(qs.back()) + "]");
    layout_ok(desc.k, "k");
  }
  const int64_t d = qs.back();
  const int64_t rd = desc.rotary_dim == 0 ? d : desc.rotary_dim;
  need(rd > 0 && rd % 2 == 0 && rd <= d,
       "rotary_dim is " + std::to_string(desc.rotary_dim) + "; expected an even number in [2, head_dim = " +
           std::to_string(d) + "] (0: head_dim)");
  if (rd > 2 * rope::kMaxPairs)
    throw Unsupported("rope: rotary_dim " + std::to_string(rd) + " is over " + std::to_string(2 * rope::kMaxPairs));
  need(desc.style == "neox" || desc.style == "gptj",
       "style is '" + desc.style + "'; expected 'neox' (rotate-half) or 'gptj' (interleaved)");
  if (desc.positions && desc.positions_dtype != DType::Int32 && desc.positions_dtype != DType::Int64)
    throw InvalidDType("rope: positions is " + std::string(dtype_name(desc.positions_dtype)) + "; expected int32 or int64");

  if (desc.kv_cache) {
    need(desc.has_k && !desc.inverse, "the cache append needs k and the forward rotation");
    const std::vector<int64_t>& ks = desc.k.shape;
    check_paged_cache("rope", desc.k_cache, ks[ks.size() - 2], ks.back(), dt, "k_cache", "k", true);
    const bool fp8 = desc.k_cache.dtype != dt;
    need(!desc.kv_scales || fp8, "k_scale / v_scale quantize into an fp8 cache; this k_cache is " +
                                     std::string(dtype_name(desc.k_cache.dtype)));
    if (desc.has_v) {
      const auto& vs = desc.v.shape;
      need(vs.size() == qs.size() && std::equal(I.lead.begin(), I.lead.end(), vs.begin()) &&
               vs[vs.size() - 2] == ks[ks.size() - 2],
           "v has shape " + shape_str(vs) + "; expected k's leading dims and kv_heads " +
               shape_str(std::vector<int64_t>(ks.begin(), ks.end() - 1)) + " + [v_dim]");
      if (desc.v.dtype != dt)
        throw InvalidDType("rope: v is " + std::string(dtype_name(desc.v.dtype)) + "; expected " + dtype_name(dt));
      layout_ok(desc.v, "v");
      check_paged_cache("rope", desc.v_cache, vs[vs.size() - 2], vs.back(), dt, "v_cache", "v", true);
      if (desc.v_cache.dtype != desc.k_cache.dtype)
        throw InvalidDType("rope: v_cache is " + std::string(dtype_name(desc.v_cache.dtype)) + "; expected k_cache's " +
                           dtype_name(desc.k_cache.dtype));
      need(desc.v_cache.shape[0] == desc.k_cache.shape[0] && desc.v_cache.shape[1] == desc.k_cache.shape[1],
           "v_cache has shape " + shape_str(desc.v_cache.shape) + "; expected k_cache's pages and page_size");
    }
    if (desc.slot_dtype != DType::Int32 && desc.slot_dtype != DType::Int64)
      throw InvalidDType("rope: slot_mapping is " + std::string(dtype_name(desc.slot_dtype)) +
                         "; expected int32 or int64");
  }

  rope::Geometry& g = I.geo;
  g.dtype = dt;
  g.batch = r == 4 ? qs[0] : 1;
  g.seq = qs[r - 3];
  g.head_dim = int(d);
  g.rotary_dim = int(rd);
  g.gptj = desc.style == "gptj";
  g.inverse = desc.inverse;
  g.cache = desc.cache;
  g.positions = desc.positions;
  g.positions_dtype = desc.positions_dtype;
  if (desc.cache) {
    if (desc.cache_dtype != DType::Float32 && desc.cache_dtype != dt)
      throw InvalidDType("rope: cos / sin are " + std::string(dtype_name(desc.cache_dtype)) + "; expected float32 or " +
                         dtype_name(dt) + " (q's dtype)");
    need(desc.cache_positions > 0 || g.batch * g.seq == 0, "the cos / sin cache has no rows");
    g.cache_dtype = desc.cache_dtype;
    g.cache_positions = desc.cache_positions;
  } else {
    double af = 1.0;
    const auto inv = rope_inv_freq(desc.freqs, rd, &af);
    for (size_t i = 0; i < inv.size(); ++i) g.inv_freq[i] = float(inv[i]);
    g.attention_factor = float(af);
  }
  g.kv_dtype = desc.kv_cache ? desc.k_cache.dtype : dt;
  g.scale_per_head = desc.kv_cache && desc.kv_scales && desc.scale_per_head;
  if (!pref.forbid.empty())
    for (Backend b : pref.forbid)
      if (b == Backend::Bespoke) throw Unsupported("rope: the preference forbids the only backend (bespoke)");
  std::string tuned;  // the knobs given, as the SKU reports them
  if (!pref.tuning.empty())
    for (const Knob& kn : tuning_knobs("rope", pref.tuning, "", {"tpb", "persistent"})) {
      const int64_t v = kn.num();
      if (kn.key == "tpb") {
        if (v < 1 || v > 16) throw InvalidArgument("rope: tuning tpb must be 1..16 tokens per block, got " + kn.value);
        g.tokens_per_block = int(v);
        tuned += ".tpb" + std::to_string(v);
      } else {
        if (v != 0 && v != 1) throw InvalidArgument("rope: tuning persistent must be 0 or 1, got " + kn.value);
        g.persistent = v == 1;
        if (v) tuned += ".persistent";
      }
    }

  KernelSku& k = I.sku;
  k.category = "rope";
  k.op = desc.inverse ? "rope_backward" : "rope";
  const bool quantize = desc.kv_cache && desc.k_cache.dtype != dt;
  k.name = "rope." + desc.style + (desc.cache ? ".cache" : ".theta") + (desc.kv_cache ? ".append" : "") +
           (quantize ? std::string(".") + dtype_name(desc.k_cache.dtype) + "_cache" : "") + tuned;
  k.layout = "strided";
  k.dtypes = {dt, dt};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  k.precision.compute_dtype = DType::Float32;
  k.precision.accumulator_dtype = DType::Float32;
  k.precision.math = desc.cache ? "f32 rotation by the cache's cos / sin, one rounding per output"
                                : "f32 angle position * inv_freq (inv_freq from double), sincosf, f32 rotation, one "
                                  "rounding per output";
  if (quantize)
    k.precision.math += "; the caches fp8(x / scale) with x as stored in q's dtype, saturated to the finite range "
                        "(kv_cache_append's rounding)";
  return RopePlan(impl);
}

const KernelSku& RopePlan::sku() const { return impl_->sku; }
const RopeDescriptor& RopePlan::descriptor() const { return impl_->desc; }

void RopePlan::run(const RopeTensors& t, void*, int64_t, StreamHandle stream) const {
  const Impl& I = *impl_;
  const RopeDescriptor& D = I.desc;
  const std::string op = D.inverse ? "rope_backward" : "rope";
  rope::Geometry g = I.geo;
  const int device = t.q.device;
  check_view(op, "q", t.q, D.q, device, "q");
  check_presence(op, t.k, D.has_k, "k", D.has_k ? "the descriptor has k" : "the descriptor has no k");
  if (D.has_k) check_view(op, "k", t.k, D.k, device, "q");
  check_like(op, t.q_out, D.q, "q_out", "q", device, "q");
  if (D.has_k) check_like(op, t.k_out, D.k, "k_out", "k", device, "q");
  else check_presence(op, t.k_out, false, "k_out", "the descriptor has no k");
  const int64_t half = g.rotary_dim / 2;
  for (auto [v, name] : {std::pair{&t.cos, "cos"}, std::pair{&t.sin, "sin"}}) {
    check_presence(op, *v, D.cache, name, D.cache ? "the descriptor reads a cos / sin cache" : "the descriptor computes "
                                                                                                "the angles from theta");
    if (!D.cache) continue;
    if (v->dtype != D.cache_dtype)
      throw InvalidDType(op + ": " + name + " is " + std::string(dtype_name(v->dtype)) + "; expected " +
                         dtype_name(D.cache_dtype));
    if (!shape_is(*v, {D.cache_positions, half}))
      throw InvalidArgument(op + ": " + name + " has shape " + shape_str(v->shape, v->ndim) + "; expected " +
                            shape_str({D.cache_positions, half}) + " [positions, rotary_dim / 2]");
    if (v->numel() > 0 && !v->is_contiguous()) throw InvalidArgument(op + ": " + name + " must be contiguous");
    check_same_device(op, *v, device, name, "q");
  }
  check_presence(op, t.positions, D.positions, "positions",
                 D.positions ? "the descriptor has positions" : "the descriptor has none");
  // A per-token integer tensor of q's leading dims (positions, slot_mapping): its batch and seq strides.
  auto token_index = [&](const TensorView& v, const char* name, DType want, int64_t& batch, int64_t& seq) {
    if (v.dtype != want)
      throw InvalidDType(op + ": " + name + " is " + std::string(dtype_name(v.dtype)) + "; expected " +
                         dtype_name(want));
    if (!shape_is(v, I.lead))
      throw InvalidArgument(op + ": " + name + " has shape " + shape_str(v.shape, v.ndim) + "; expected q's leading dims " +
                            shape_str(I.lead));
    check_same_device(op, v, device, name, "q");
    seq = I.lead.empty() ? 0 : v.strides[v.ndim - 1];
    batch = v.ndim == 2 ? v.strides[0] : 0;
  };
  if (D.positions) token_index(t.positions, "positions", D.positions_dtype, g.pos_batch, g.pos_seq);
  for (auto [v, name] : {std::pair{&t.v, "v"}, std::pair{&t.v_cache, "v_cache"}})
    check_presence(op, *v, D.kv_cache && D.has_v, name,
                   D.kv_cache && D.has_v ? "the descriptor appends v" : "the descriptor appends no v");
  for (auto [v, name] : {std::pair{&t.k_cache, "k_cache"}, std::pair{&t.slot_mapping, "slot_mapping"}})
    check_presence(op, *v, D.kv_cache, name, D.kv_cache ? "the descriptor appends to a cache" : "no cache append");
  if (D.kv_cache) {
    check_view(op, "k_cache", t.k_cache, D.k_cache, device, "q");
    if (D.has_v) {
      check_view(op, "v", t.v, D.v, device, "q");
      check_view(op, "v_cache", t.v_cache, D.v_cache, device, "q");
    }
    token_index(t.slot_mapping, "slot_mapping", D.slot_dtype, g.slot_batch, g.slot_seq);
    const int64_t scale_len = D.scale_per_head ? D.k_cache.shape[2] : 1;
    check_side_operand(op, t.k_scale, D.kv_scales, "k_scale", DType::Float32, {scale_len},
                       D.kv_scales ? "the plan was selected with scales" : "the plan was selected without scales", true,
                       device, "q");
    check_side_operand(op, t.v_scale, D.kv_scales && D.has_v, "v_scale", DType::Float32, {scale_len},
                       D.kv_scales && D.has_v ? "the plan was selected with scales and v" : "the plan has no v scale",
                       true, device, "q");
    g.slots_int32 = D.slot_dtype == DType::Int32;
    g.pages = D.k_cache.shape[0];
    g.page_size = D.k_cache.shape[1];
  }
  check_aliasing(op, {{"q_out", &t.q_out}, {"k_out", &t.k_out}, {"k_cache", &t.k_cache}, {"v_cache", &t.v_cache}},
                 {{"q", &t.q}, {"k", &t.k}, {"v", &t.v}, {"cos", &t.cos}, {"sin", &t.sin}, {"positions", &t.positions},
                  {"slot_mapping", &t.slot_mapping}, {"k_scale", &t.k_scale}, {"v_scale", &t.v_scale}},
                 {{&t.q_out, &t.q}, {&t.k_out, &t.k}});

  rope::Pointers p;
  const int64_t esize = dtype_size(g.dtype);
  // 16-byte accesses when every row start and stride allows them and the chunks tile the rotated part:
  // `rot` for q, k, their outputs and the k cache; v's copy to its cache has its own.
  AccessWidth rot;
  rot.fit((g.gptj ? g.rotary_dim : half) * esize);
  auto fit_rows = [&](AccessWidth& w, const void* ptr, std::initializer_list<int64_t> strides) {
    w.fit(ptr);
    for (int64_t s : strides) w.fit(s * esize);
  };
  auto operand = [&](const TensorView& in, const TensorView& out) {
    rope::Operand o;
    o.in = in.data;
    o.out = out.data;
    const int n = in.ndim;
    o.heads = int(in.shape[n - 2]);
    o.in_batch = n == 4 ? in.strides[0] : 0;
    o.in_seq = in.strides[n - 3];
    o.in_head = in.strides[n - 2];
    o.out_batch = n == 4 ? out.strides[0] : 0;
    o.out_seq = out.strides[n - 3];
    o.out_head = out.strides[n - 2];
    return o;
  };
  auto fit_operand = [&](const rope::Operand& o) {
    fit_rows(rot, o.in, {o.in_batch, o.in_seq, o.in_head});
    fit_rows(rot, o.out, {o.out_batch, o.out_seq, o.out_head});
  };
  p.x[0] = operand(t.q, t.q_out);
  fit_operand(p.x[0]);
  p.count = 1;
  if (D.has_k) {
    p.x[1] = operand(t.k, t.k_out);
    fit_operand(p.x[1]);
    p.count = 2;
  }
  auto paged = [](rope::Operand& o, const TensorView& cache) {
    o.paged = cache.data;
    o.paged_page = cache.strides[0];
    o.paged_slot = cache.strides[1];
    o.paged_head = cache.strides[2];
  };
  // An fp8 cache takes a wide access's elements as one store of a quarter / half its bytes, when its
  // rows and strides allow (cache8_wide), else byte by byte.
  const bool fp8 = D.kv_cache && g.kv_dtype != g.dtype;
  const int64_t wide_elems = 16 / esize;
  AccessWidth cache8;
  auto fit_cache8 = [&](const void* ptr, std::initializer_list<int64_t> strides) {
    cache8.fit(ptr);
    for (int64_t st : strides) cache8.fit(st);  // fp8: one byte per element
  };
  if (D.kv_cache) {
    paged(p.x[1], t.k_cache);  // the rotated k's second destination: the vector stores must fit it too
    if (fp8) fit_cache8(t.k_cache.data, {p.x[1].paged_page, p.x[1].paged_slot, p.x[1].paged_head});
    else fit_rows(rot, t.k_cache.data, {p.x[1].paged_page, p.x[1].paged_slot, p.x[1].paged_head});
    if (D.has_v) {  // v: its cache only, copied as it is (its own vector width)
      rope::Operand& o = p.x[2];
      o = operand(t.v, t.v);
      paged(o, t.v_cache);
      o.copy_only = true;
      o.copy_dim = int(t.v.shape[t.v.ndim - 1]);
      AccessWidth vw;
      vw.fit(o.copy_dim * esize);
      fit_rows(vw, o.in, {o.in_batch, o.in_seq, o.in_head});
      if (fp8) {
        fit_cache8(o.paged, {o.paged_page, o.paged_slot, o.paged_head});
      } else {
        fit_rows(vw, o.paged, {o.paged_page, o.paged_slot, o.paged_head});
      }
      g.v_wide = vw.bytes == 16;
      p.count = 3;
    }
    if (fp8) {
      g.cache8_wide = cache8.bytes >= wide_elems;
      p.k_scale = static_cast<const float*>(t.k_scale.data);
      p.v_scale = D.has_v ? static_cast<const float*>(t.v_scale.data) : nullptr;
    }
  }
  p.slots = t.slot_mapping.data;
  g.wide = rot.bytes == 16;
  p.cos = t.cos.data;
  p.sin = t.sin.data;
  p.positions = t.positions.data;
  if (g.batch * g.seq == 0) return;
  DeviceGuard guard(device);
  rope::rope(g, p, stream);
}

FamilyInfo rope_family_info() {
  FamilyInfo f{"rope", "RopePlan",
               "rotary position embedding of q and k in one launch: rotate-half (NeoX) or interleaved (GPT-J), partial "
               "rotary, per-token positions, a cos / sin cache or theta with linear / Llama 3 / YaRN scaling; in place "
               "or out of place; the inverse rotation is the backward",
               {}};
  f.ops.push_back(OpCoverage{"rope", "rotary", {DType::Float16, DType::BFloat16, DType::Float32},
                             {"bshd", "thd"}, Backend::Bespoke, true});
  return f;
}

}  // namespace baracuda
