// AttentionPlan: validation, the backend choice (cuDNN, our flash kernels or our rowwise ones), the
// SKU, and run().
#include "baracuda/attention.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "attention/attention_launch.h"
#include "baracuda/errors.h"
#include "cudnn/attention_cudnn.h"
#include "device_guard.h"
#include "plan_util.h"

namespace baracuda {

namespace {

const DType kDTypes[] = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
DType stats_dtype(DType t) { return t == DType::Float64 ? DType::Float64 : DType::Float32; }

bool flash_compiled() {
#ifdef BARACUDA_ENABLE_FA2
  return true;
#else
  return false;
#endif
}

}  // namespace

std::string AttentionDescriptor::str() const {
  std::ostringstream os;
  os << "AttentionDescriptor(op=" << op << ", q=" << q.str() << ", k=" << k.str() << ", v=" << v.str()
     << ", out=" << out.str();
  if (scale) os << ", scale=" << *scale;
  if (causal) os << ", causal=True, causal_alignment=" << causal_alignment;
  if (window_left >= 0 || window_right >= 0) os << ", window=(" << window_left << ", " << window_right << ")";
  if (softcap > 0) os << ", softcap=" << softcap;
  if (alibi) os << ", alibi=" << alibi;
  if (sinks) os << ", sinks=True";
  if (varlen)
    os << ", varlen: batch=" << batch << ", max_seqlen_q=" << max_seqlen_q << ", max_seqlen_k=" << max_seqlen_k
       << (seqused_k ? ", seqused_k" : "");
  else if (seqused_k)
    os << ", seqused_k";
  if (lse) os << ", lse=True";
  if (deterministic) os << ", deterministic=True";
  if (kernel != "auto") os << ", kernel=" << kernel;
  if (tile != "auto") os << ", tile=" << tile;
  os << ")";
  return os.str();
}

struct AttentionPlan::Impl {
  AttentionDescriptor desc;
  KernelSku sku;
  bool backward = false;
  bool flash = false;
  std::shared_ptr<const attention_cudnn::Graphs> cudnn;  // set when cuDNN runs the case
  attention::Geometry geo;
  int64_t lse_rows = 0;  // elements of lse (and delta)
  int64_t workspace = 0;
};

AttentionPlan AttentionPlan::select(const AttentionDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  Impl& I = *impl;
  I.desc = desc;
  const std::string& op = desc.op;
  if (op != "attention" && op != "attention_backward")
    throw InvalidArgument("attention: unknown op '" + op + "'; expected 'attention' or 'attention_backward'");
  I.backward = op == "attention_backward";

  // dtypes: q, k, v, out alike, a float type.
  const DType dt = desc.q.dtype;
  bool ok = false;
  for (DType t : kDTypes) ok = ok || t == dt;
  if (!ok)
    throw InvalidDType(op + ": q is " + std::string(dtype_name(dt)) + "; expected float16, bfloat16, float32 or float64");
  auto same_dtype = [&](const TensorSpec& s, const char* name) {
    if (s.dtype != dt)
      throw InvalidDType(op + ": " + name + " is " + std::string(dtype_name(s.dtype)) + "; expected " + dtype_name(dt) +
                         " (q's dtype)");
  };
  same_dtype(desc.k, "k");
  same_dtype(desc.v, "v");
  same_dtype(desc.out, "out");

  // Shapes.
  const size_t rank = desc.varlen ? 3 : 4;
  const char* layout = desc.varlen ? "[total, heads, head_dim] (varlen)" : "[batch, seq, heads, head_dim]";
  auto rank_is = [&](const TensorSpec& s, const char* name) {
    if (s.shape.size() != rank)
      throw InvalidArgument(op + ": " + name + " has shape " + shape_str(s.shape) + "; expected " + layout);
    for (int64_t e : s.shape)
      if (e < 0) throw InvalidArgument(op + ": " + name + " has a negative dimension");
    const auto st = s.effective_strides();
    if (s.shape.back() > 1 && st.back() != 1)
      throw Unsupported(op + ": " + name + " has stride " + std::to_string(st.back()) +
                        " along head_dim; the last dimension must be contiguous");
    for (size_t d = 0; d + 1 < rank; ++d)
      if (st[d] < 0)
        throw Unsupported(op + ": " + name + " has a negative stride " + std::to_string(st[d]) +
                          " (pass a contiguous tensor)");
  };
  rank_is(desc.q, "q");
  rank_is(desc.k, "k");
  rank_is(desc.v, "v");
  rank_is(desc.out, "out");
  const auto& qs = desc.q.shape;
  const auto& ks = desc.k.shape;
  const auto& vs = desc.v.shape;
  const int o = desc.varlen ? 0 : 1;  // index of the sequence dim (varlen: the token dim)
  attention::Geometry& g = I.geo;
  g.dtype = dt;
  g.varlen = desc.varlen;
  g.hq = qs[o + 1];
  g.hkv = ks[o + 1];
  g.d = qs[o + 2];
  g.dv = vs[o + 2];
  if (ks[o + 2] != g.d)
    throw InvalidArgument(op + ": k has head_dim " + std::to_string(ks[o + 2]) + " but q has " + std::to_string(g.d));
  if (vs[o + 1] != g.hkv || vs[o] != ks[o] || (!desc.varlen && vs[0] != ks[0]))
    throw InvalidArgument(op + ": v has shape " + shape_str(vs) + "; expected k's shape " + shape_str(ks) +
                          " up to the last dimension");
  if (g.hkv == 0 ? g.hq != 0 : g.hq % g.hkv != 0)
    throw InvalidArgument(op + ": q has " + std::to_string(g.hq) + " heads, not a multiple of k's " +
                          std::to_string(g.hkv) + " (GQA / MQA need Hq % Hkv == 0)");
  if (desc.varlen) {
    if (desc.batch < 0 || desc.max_seqlen_q < 0 || desc.max_seqlen_k < 0)
      throw InvalidArgument(op + ": batch, max_seqlen_q and max_seqlen_k must be >= 0");
    g.batch = desc.batch;
    g.sq = desc.max_seqlen_q;
    g.sk = desc.max_seqlen_k;
    g.total_q = qs[0];
    g.total_k = ks[0];
  } else {
    if (ks[0] != qs[0])
      throw InvalidArgument(op + ": k has batch " + std::to_string(ks[0]) + " but q has " + std::to_string(qs[0]));
    g.batch = qs[0];
    g.sq = qs[1];
    g.sk = ks[1];
  }
  const std::vector<int64_t> want_out = desc.varlen ? std::vector<int64_t>{qs[0], g.hq, g.dv}
                                                    : std::vector<int64_t>{qs[0], qs[1], g.hq, g.dv};
  if (desc.out.shape != want_out)
    throw InvalidArgument(op + ": out has shape " + shape_str(desc.out.shape) + "; expected " + shape_str(want_out) +
                          " (q's shape with v's head_dim)");
  if (g.batch > 65535 || g.hq > 65535)
    throw Unsupported(op + ": at most 65535 sequences and 65535 query heads per call");

  // Score rules.
  if (desc.scale && !std::isfinite(*desc.scale))
    throw InvalidArgument(op + ": scale must be finite, got " + num_str(*desc.scale));
  g.scale = desc.scale ? *desc.scale : (g.d > 0 ? 1.0 / std::sqrt(double(g.d)) : 1.0);
  if (!(desc.softcap >= 0) || !std::isfinite(desc.softcap))
    throw InvalidArgument(op + ": softcap must be a finite number >= 0 (0: none), got " + num_str(desc.softcap));
  g.softcap = desc.softcap;
  if (desc.causal_alignment != "bottom_right" && desc.causal_alignment != "top_left")
    throw InvalidArgument(op + ": causal_alignment must be 'bottom_right' or 'top_left', got '" +
                          desc.causal_alignment + "'");
  g.top_left = desc.causal_alignment == "top_left";
  if (desc.window_left < -1 || desc.window_right < -1)
    throw InvalidArgument(op + ": window sizes must be >= 0, or -1 for unbounded; got (" +
                          std::to_string(desc.window_left) + ", " + std::to_string(desc.window_right) + ")");
  g.window_left = desc.window_left;
  g.window_right = desc.causal ? 0 : desc.window_right;
  if (desc.alibi < 0 || desc.alibi > 2) throw InvalidArgument(op + ": alibi must be 0, 1 ([Hq]) or 2 ([B, Hq])");
  g.alibi = desc.alibi != 0;
  g.alibi_batch_stride = desc.alibi == 2 ? g.hq : 0;
  g.sinks = desc.sinks;
  g.has_seqused_k = desc.seqused_k;
  if (desc.varlen) {
    g.lse_batch = 0;
    g.lse_head = g.total_q;
    I.lse_rows = g.hq * g.total_q;
  } else {
    g.lse_batch = g.hq * g.sq;
    g.lse_head = g.sq;
    I.lse_rows = g.batch * g.hq * g.sq;
  }

  // The kernel: flash where it covers the case, else rowwise.
  // The warp-specialized tile first where its TMA loads apply (dense batches) unless a mask leaves
  // each query 512 keys or fewer: 128-key tiles then waste more of their work on masked keys
  // (docs/benchmark-notes.md, attention, session 42: s512 causal, window 128); nor for 64 queries or
  // fewer, where its second consumer would have no rows (w64n64 does the same work at three blocks per SM).
  const int64_t key_span = std::min(g.sk, g.window_left >= 0 ? g.window_left : g.sk);
  const bool masked = g.window_left >= 0 || g.window_right >= 0;
  // The same short spans put the mma.sync forward's m64n64 first at d 64 (docs/benchmark-notes.md,
  // attention, session 47).
  attention::ForwardTileRule rule;
  rule.short_masked_span = masked && key_span <= 512;
  rule.warp_specialized_first = !g.varlen && !g.has_seqused_k && g.sq > 64 && !rule.short_masked_span;
  rule.plain_score = g.plain_score();
  rule.smem_per_sm = current_device_smem_per_sm();
  const std::vector<attention::FlashTile> tiles =
      !flash_compiled() ? std::vector<attention::FlashTile>{}
      : I.backward      ? attention::flash_backward_tiles(dt, g.d, g.dv)
                        : attention::flash_forward_tiles(dt, g.d, g.dv, rule);
  auto tile_name = [](const attention::FlashTile& t) {
    return (t.wgmma ? "w" : "m") + std::to_string(t.bm) + "n" + std::to_string(t.bn);
  };
  attention::FlashTile tile;
  if (!tiles.empty()) tile = tiles[0];
  if (desc.tile != "auto") {
    std::string names;
    bool found = false;
    for (const auto& t : tiles) {
      names += (names.empty() ? "" : ", ") + tile_name(t);
      if (tile_name(t) == desc.tile) tile = t, found = true;
    }
    if (!found)
      throw InvalidArgument(op + ": tile '" + desc.tile + "' is not compiled for this case; the flash " +
                            (I.backward ? "backward" : "forward") + " has " +
                            (names.empty() ? std::string("none") : names) + " (or 'auto')");
  }
  auto aligned = [](const TensorSpec& s) {
    for (int64_t st : s.effective_strides())
      if (st % 8 != 0 && st != 1) return false;
    return true;
  };
  const bool strides_ok = aligned(desc.q) && aligned(desc.k) && aligned(desc.v) && aligned(desc.out);
  const bool flash_ok = strides_ok && !tiles.empty();
  if (desc.kernel != "auto" && desc.kernel != "cudnn" && desc.kernel != "flash" && desc.kernel != "rowwise")
    throw InvalidArgument(op + ": kernel must be 'auto', 'cudnn', 'flash' or 'rowwise', got '" + desc.kernel + "'");
  // cuDNN first where it takes the case (its fused kernels outrun ours: docs/benchmarks.md), unless
  // a kernel or a flash tile is named or the preference forbids it.
  const bool deterministic = desc.deterministic || pref.require_deterministic;
  if (desc.kernel == "cudnn" || (desc.kernel == "auto" && desc.tile == "auto" && pref.allows(Backend::Cudnn))) {
    std::string why;
    if (desc.kernel == "cudnn" && !pref.allows(Backend::Cudnn)) {
      why = "the preference forbids cuDNN";
    } else {
      AttentionDescriptor built = desc;
      built.deterministic = deterministic;
      I.cudnn = attention_cudnn::build(built, g, why);
    }
    if (!I.cudnn && desc.kernel == "cudnn") throw Unsupported(op + ": kernel='cudnn' is not available: " + why);
  }
  if (!I.cudnn && !pref.allows(Backend::Bespoke))
    throw Unsupported(op + ": the preference forbids the bespoke backend, and cuDNN does not take this case");
  if (desc.kernel == "flash" && !flash_ok) {
    std::string why = !flash_compiled() ? "this build has no flash kernels (BARACUDA_ENABLE_FA2=OFF)"
                      : !strides_ok       ? "the flash kernels need every stride a multiple of 8 elements"
                      : I.backward        ? "the flash backward takes float16 / bfloat16 with head_dim 64, 96 or 128 "
                                            "(equal for q and v, and in BARACUDA_ATTENTION_HEAD_DIMS at build time)"
                                          : "the flash forward takes float16 / bfloat16 with head_dim 64, 96, 128 or 256 "
                                            "(equal for q and v, and in BARACUDA_ATTENTION_HEAD_DIMS at build time)";
    throw Unsupported(op + ": kernel='flash' is not available: " + why);
  }
  I.flash = !I.cudnn && flash_ok && desc.kernel != "rowwise";
  g.tile_bm = tile.bm;
  g.tile_bn = tile.bn;
  g.tile_wgmma = tile.wgmma;
  if (!I.cudnn && !I.flash && (g.d > attention::kRowwiseMaxHeadDim || g.dv > attention::kRowwiseMaxHeadDim))
    throw Unsupported(op + ": head_dim " + std::to_string(std::max(g.d, g.dv)) + " is above " +
                      std::to_string(attention::kRowwiseMaxHeadDim) + ", the rowwise kernels' limit");
  if (I.backward || I.cudnn) {
    const int64_t bytes = I.cudnn ? attention_cudnn::workspace_bytes(*I.cudnn)
                                  : I.lse_rows * int64_t(dtype_size(stats_dtype(dt)));
    I.workspace = bytes;
    if (pref.workspace_limit >= 0 && bytes > pref.workspace_limit)
      throw Unsupported(op + ": needs " + std::to_string(bytes) + " bytes of workspace; the preference allows " +
                        std::to_string(pref.workspace_limit));
  }

  KernelSku& k = I.sku;
  k.category = "attention";
  k.op = op;
  k.layout = desc.varlen ? "varlen" : "bshd";
  k.name = !I.flash     ? "attention.rowwise." + std::string(I.backward ? "backward" : "forward")
           : I.backward ? "attention.flash_backward." + tile_name(tile) + ".d" + std::to_string(g.d)
                        : "attention.flash." + tile_name(tile) + ".d" + std::to_string(g.d);
  k.dtypes = {dt, dt, dt, dt};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  pg.compute_dtype = stats_dtype(dt);
  pg.accumulator_dtype = pg.compute_dtype;
  pg.math = I.flash ? "q k^T and p v on tensor cores (16-bit inputs, f32 accumulate; p rounded to " +
                          std::string(dtype_name(dt)) + " for p v), online softmax in f32 (exp2 in the log2 domain), "
                          "one rounding of out"
                    : std::string(dtype_name(pg.compute_dtype)) +
                          " math on CUDA cores, libm exp / log / tanh, online softmax over 32-key chunks; every sum in "
                          "a fixed order";
  if (I.backward)
    pg.math += I.flash ? "; gradients from the saved lse on tensor cores (p and dS rounded to " +
                             std::string(dtype_name(dt)) + " for the products), no atomics: one block sums each grad_q "
                             "tile over its keys and each grad_k / grad_v tile over the queries of every head of its "
                             "group, in order"
                       : "; gradients from the saved lse: one warp sums each grad_q row over its keys and each grad_k / "
                         "grad_v row over the queries of every head of its group, in order";
  pg.deterministic = true;
  pg.bit_stable = true;
  if (I.cudnn) {
    k.name = "attention.cudnn." + std::string(I.backward ? "backward" : "forward") + ".d" + std::to_string(g.d);
    k.backend = Backend::Cudnn;
    pg.math = "cuDNN " + attention_cudnn::library_version() +
              " fused flash attention: tensor-core products of 16-bit inputs with f32 accumulation, softmax in f32";
    if (I.backward) {
      pg.math += deterministic ? "; its deterministic backward" : "; its backward (grad_q accumulated with atomics)";
      pg.deterministic = pg.bit_stable = deterministic;
    }
  }
  return AttentionPlan(impl);
}

const KernelSku& AttentionPlan::sku() const { return impl_->sku; }
const AttentionDescriptor& AttentionPlan::descriptor() const { return impl_->desc; }
int64_t AttentionPlan::workspace_bytes() const { return impl_->workspace; }

void AttentionPlan::run(const AttentionTensors& t, void* workspace, int64_t workspace_size,
                        StreamHandle stream) const {
  const Impl& I = *impl_;
  const AttentionDescriptor& D = I.desc;
  const std::string& op = D.op;
  const attention::Geometry& g = I.geo;
  const int device = t.q.device;
  const DType sd = stats_dtype(g.dtype);

  check_view(op, "q", t.q, D.q, device, "q");
  check_view(op, "k", t.k, D.k, device, "q");
  check_view(op, "v", t.v, D.v, device, "q");
  // A tensor shaped like `like` (its dtype and shape), last dim contiguous, its own strides.
  auto like_tensor = [&](const TensorView& v, const TensorSpec& like, const std::string& name, const char* of) {
    check_like(op, v, like, name, of, device, "q");
    if (I.flash)
      for (int d = 0; d + 1 < v.ndim; ++d)
        if (v.shape[d] > 1 && v.strides[d] % 8 != 0)
          throw InvalidArgument(op + ": " + name + " has stride " + std::to_string(v.strides[d]) +
                                "; the flash kernel this plan selected needs strides that are multiples of 8");
  };
  like_tensor(t.out, D.out, "out", "the descriptor's out");
  auto small = [&](const TensorView& v, bool needed, const std::string& name, DType want,
                   const std::vector<int64_t>& shape, const std::string& why) {
    check_side_operand(op, v, needed, name, want, shape, why, true, device, "q");
  };
  const std::vector<int64_t> lse_shape =
      D.varlen ? std::vector<int64_t>{g.hq, g.total_q} : std::vector<int64_t>{g.batch, g.hq, g.sq};
  small(t.lse, I.backward || D.lse, "lse", sd, lse_shape,
        I.backward ? "the backward reads the forward's lse" : "the descriptor has lse=True");
  small(t.cu_seqlens_q, D.varlen, "cu_seqlens_q", DType::Int32, {g.batch + 1}, "varlen plans read the offsets");
  small(t.cu_seqlens_k, D.varlen, "cu_seqlens_k", DType::Int32, {g.batch + 1}, "varlen plans read the offsets");
  small(t.seqused_k, D.seqused_k, "seqused_k", DType::Int32, {g.batch}, "the descriptor has seqused_k");
  small(t.alibi_slopes, D.alibi != 0, "alibi_slopes", DType::Float32,
        D.alibi == 2 ? std::vector<int64_t>{g.batch, g.hq} : std::vector<int64_t>{g.hq}, "the descriptor has alibi");
  small(t.sinks, D.sinks, "sinks", sd, {g.hq}, "the descriptor has sinks");

  attention::Pointers p;
  auto operand = [&](const TensorView& v) {
    attention::Operand o;
    o.data = v.data;
    const int r = v.ndim;
    o.batch = D.varlen ? 0 : v.strides[0];
    o.row = v.strides[r - 3];
    o.head = v.strides[r - 2];
    return o;
  };
  p.q = operand(t.q);
  p.k = operand(t.k);
  p.v = operand(t.v);
  p.out = operand(t.out);
  p.lse = t.lse.data;
  p.cu_seqlens_q = static_cast<const int32_t*>(t.cu_seqlens_q.data);
  p.cu_seqlens_k = static_cast<const int32_t*>(t.cu_seqlens_k.data);
  p.seqused_k = static_cast<const int32_t*>(t.seqused_k.data);
  p.alibi_slopes = t.alibi_slopes.data;
  p.sinks = t.sinks.data;

  std::vector<NamedView> reads = {{"q", &t.q}, {"k", &t.k}, {"v", &t.v}, {"cu_seqlens_q", &t.cu_seqlens_q},
                                  {"cu_seqlens_k", &t.cu_seqlens_k}, {"seqused_k", &t.seqused_k},
                                  {"alibi_slopes", &t.alibi_slopes}, {"sinks", &t.sinks}};
  std::vector<NamedView> writes;
  if (I.backward) {
    like_tensor(t.grad_out, D.out, "grad_out", "out");
    like_tensor(t.grad_q, D.q, "grad_q", "q");
    like_tensor(t.grad_k, D.k, "grad_k", "k");
    like_tensor(t.grad_v, D.v, "grad_v", "v");
    check_presence(op, t.grad_sinks, D.sinks, "grad_sinks", "the descriptor has sinks");
    if (D.sinks) small(t.grad_sinks, true, "grad_sinks", sd, {g.hq}, "");
    reads.push_back({"out", &t.out});
    reads.push_back({"lse", &t.lse});
    reads.push_back({"grad_out", &t.grad_out});
    writes = {{"grad_q", &t.grad_q}, {"grad_k", &t.grad_k}, {"grad_v", &t.grad_v}, {"grad_sinks", &t.grad_sinks}};
    p.grad_out = operand(t.grad_out);
    p.grad_q = operand(t.grad_q);
    p.grad_k = operand(t.grad_k);
    p.grad_v = operand(t.grad_v);
    p.grad_sinks = t.grad_sinks.data;
    p.delta = workspace;
  } else {
    writes = {{"out", &t.out}, {"lse", &t.lse}};
  }
  if (I.flash || I.cudnn) {
    for (const TensorView* v : {&t.q, &t.k, &t.v, &t.out, &t.grad_out, &t.grad_q, &t.grad_k, &t.grad_v})
      if (reinterpret_cast<uintptr_t>(v->data) % 16 != 0)
        throw InvalidArgument(op + ": a data pointer of q / k / v / out (or a gradient) is not 16-byte aligned, which "
                                   "the kernel this plan selected needs (select with kernel='rowwise' for such views)");
  }
  check_aliasing(op, writes, reads);
  check_workspace(op, workspace, workspace_size, I.workspace, reads, writes);

  DeviceGuard guard(device);
  if (I.cudnn) return attention_cudnn::run(*I.cudnn, t, p, workspace, workspace_size, stream, device);
  if (I.backward) (I.flash ? attention::flash_backward : attention::rowwise_backward)(g, p, stream);
  else if (I.flash) attention::flash_forward(g, p, stream);
  else attention::rowwise_forward(g, p, stream);
}

FamilyInfo attention_family_info() {
  const std::vector<DType> fp(std::begin(kDTypes), std::end(kDTypes));
  FamilyInfo f{"attention", "AttentionPlan",
               "scaled dot-product attention over [B, S, H, D] or packed variable-length sequences: GQA, causal "
               "(either alignment), sliding window, softcap, ALiBi, sinks; cuDNN's fused attention where built and it "
               "takes the case, our flash kernels for 16-bit heads of 64, 96, 128, 256, rowwise kernels for the rest; "
               "with backward",
               {}};
  f.ops.push_back(OpCoverage{"attention", "forward", fp, {"bshd", "varlen"}, Backend::Bespoke, true});
  // What the cuDNN backend covers where built (features()["cudnn"] says whether this build has it).
  f.ops.push_back(OpCoverage{"attention", "forward", {DType::Float16, DType::BFloat16}, {"bshd", "varlen"},
                             Backend::Cudnn, true});
  return f;
}

}  // namespace baracuda
