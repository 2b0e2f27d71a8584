// PagedAttentionPlan: validation, the split schedule, run().
#include "baracuda/paged_attention.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>

#include "baracuda/errors.h"
#include "common/knobs.h"
#include "cudnn/attention_cudnn.h"
#include "cudnn/paged_attention_cudnn.h"
#include "device_guard.h"
#include "paged_attention/paged_attention_launch.h"
#include "plan_util.h"

namespace baracuda {

namespace {

const std::string kOp = "paged_attention";

void need(bool ok, const std::string& what) {
  if (!ok) throw InvalidArgument(kOp + ": " + what);
}

// Last dim contiguous, no negative stride.
void check_strides(const TensorSpec& s, const char* name) {
  const auto st = s.effective_strides();
  if (!s.shape.empty() && s.shape.back() > 1 && st.back() != 1)
    throw Unsupported(kOp + ": " + name + " must be contiguous along head_dim");
  for (int64_t v : st)
    if (v < 0) throw Unsupported(kOp + ": " + name + " has a negative stride");
}

}  // namespace

std::string PagedAttentionDescriptor::str() const {
  std::ostringstream os;
  os << "PagedAttentionDescriptor(q=" << q.str() << ", k_cache=" << k_cache.str() << ", v_cache=" << v_cache.str()
     << ", out=" << out.str() << ", max_pages=" << max_pages;
  if (scale) os << ", scale=" << *scale;
  os << ", causal=" << (causal ? "True" : "False");
  if (window_left >= 0 || window_right >= 0) os << ", window=(" << window_left << ", " << window_right << ")";
  if (softcap > 0) os << ", softcap=" << softcap;
  if (alibi) os << ", alibi=True";
  if (sinks) os << ", sinks=True";
  if (lse) os << ", lse=True";
  if (max_seqlen_k) os << ", max_seqlen_k=" << max_seqlen_k;
  if (num_splits) os << ", num_splits=" << num_splits;
  if (kernel != "auto") os << ", kernel='" << kernel << "'";
  if (kv_scales) os << ", kv_scales=" << (scale_per_head ? "per_head" : "per_tensor");
  os << ")";
  return os.str();
}

struct PagedAttentionPlan::Impl {
  PagedAttentionDescriptor desc;
  KernelSku sku;
  bool rowwise = false;  // the CUDA-core kernel (f32, other head dims)
  std::shared_ptr<const paged_attention_cudnn::Graphs> cudnn;  // cuDNN's fused attention (auto: prefills)
  paged_attention::Geometry geo;
  int64_t workspace = 0;
};

PagedAttentionPlan PagedAttentionPlan::select(const PagedAttentionDescriptor& desc, const PlanPreference& pref) {
  auto impl = std::make_shared<Impl>();
  Impl& I = *impl;
  I.desc = desc;
  paged_attention::Geometry& g = I.geo;

  const DType dt = desc.q.dtype;
  if (dt != DType::BFloat16 && dt != DType::Float16 && dt != DType::Float32)
    throw InvalidDType(kOp + ": q is " + std::string(dtype_name(dt)) + "; expected bfloat16, float16 or float32");
  if (desc.out.dtype != dt)
    throw InvalidDType(kOp + ": out is " + std::string(dtype_name(desc.out.dtype)) + "; expected " + dtype_name(dt) +
                       " (q's dtype)");
  const bool fp8 = is_fp8_cache_of(desc.k_cache.dtype, dt);
  for (auto [s, name] : {std::pair{&desc.k_cache, "k_cache"}, {&desc.v_cache, "v_cache"}})
    if (s->dtype != (fp8 ? desc.k_cache.dtype : dt))
      throw InvalidDType(kOp + ": " + name + " is " + std::string(dtype_name(s->dtype)) + "; expected " +
                         (fp8 ? dtype_name(desc.k_cache.dtype) + std::string(" (k_cache's fp8)")
                              : dtype_name(dt) + std::string(" (q's dtype), or fp8 e4m3 / e5m2 for both caches")));
  need(!desc.kv_scales || fp8, "k_scale / v_scale dequantize fp8 caches; these caches are " +
                                   std::string(dtype_name(desc.k_cache.dtype)));

  const auto& qs = desc.q.shape;
  need(qs.size() == 3 || qs.size() == 4,
       "q has shape " + shape_str(qs) + "; expected [batch, tokens, q_heads, head_dim] or [batch, q_heads, head_dim]");
  need(desc.out.shape == qs, "out has shape " + shape_str(desc.out.shape) + "; expected q's " + shape_str(qs));
  const bool one_token = qs.size() == 3;
  g.batch = qs[0];
  g.sq = one_token ? 1 : qs[1];
  g.hq = qs[qs.size() - 2];
  g.d = int(qs.back());
  for (auto [s, name] : {std::pair{&desc.k_cache, "k_cache"}, {&desc.v_cache, "v_cache"}}) {
    need(s->shape.size() == 4, std::string(name) + " has shape " + shape_str(s->shape) +
                                   "; expected [pages, page_size, kv_heads, head_dim] (a heads-first cache as its "
                                   "permuted view)");
    check_strides(*s, name);
  }
  need(desc.v_cache.shape == desc.k_cache.shape, "v_cache has shape " + shape_str(desc.v_cache.shape) +
                                                     "; expected k_cache's " + shape_str(desc.k_cache.shape));
  check_strides(desc.q, "q");
  check_strides(desc.out, "out");
  const auto& ks = desc.k_cache.shape;
  g.pages = ks[0];
  g.page_size = ks[1];
  g.hkv = ks[2];
  need(ks[3] == g.d, "k_cache has head_dim " + std::to_string(ks[3]) + " but q has " + std::to_string(g.d));
  if (desc.kernel != "auto" && desc.kernel != "mma" && desc.kernel != "rowwise" && desc.kernel != "cudnn")
    throw InvalidArgument(kOp + ": kernel must be 'auto', 'mma', 'rowwise' or 'cudnn', got '" + desc.kernel + "'");
  // fp8 caches run on the tensor cores too (converted to 16 bits in registers; well over 10x the
  // rowwise kernel, docs/benchmarks.md).
  const bool mma_fits = dt != DType::Float32 && paged_attention::head_dim_supported(g.d);
  if (desc.kernel == "mma" && !mma_fits)
    throw Unsupported(kOp + ": the mma kernel takes bfloat16 / float16 q with head_dim 64, 96, 128 or 256; q is " +
                      std::string(dtype_name(dt)) + " with head_dim " + std::to_string(g.d) + " over " +
                      dtype_name(desc.k_cache.dtype) + " caches (kernel='auto' or 'rowwise' runs it)");
  I.rowwise = desc.kernel == "rowwise" || !mma_fits;
  if (g.d < 1 || g.d > paged_attention::kMaxRowwiseHeadDim)
    throw Unsupported(kOp + ": head_dim " + std::to_string(g.d) + " is not supported (at most " +
                      std::to_string(paged_attention::kMaxRowwiseHeadDim) + ")");
  need(g.hkv > 0 && g.hq % g.hkv == 0, "q has " + std::to_string(g.hq) + " heads, not a multiple of the cache's " +
                                           std::to_string(g.hkv) + " kv heads (GQA / MQA need Hq % Hkv == 0)");
  need(g.page_size > 0, "k_cache has page_size 0");
  need(g.sq >= 1 || g.batch == 0, "q has no query tokens");
  need(desc.max_pages >= 0, "max_pages (block_table's columns) must be >= 0, got " + std::to_string(desc.max_pages));
  g.max_pages = desc.max_pages;
  if (g.max_pages * g.page_size > INT32_MAX)
    throw Unsupported(kOp + ": the block table addresses " + std::to_string(g.max_pages * g.page_size) +
                      " keys per request; at most 2^31 - 1");
  g.group = g.hq / g.hkv;

  if (desc.scale && !std::isfinite(*desc.scale))
    throw InvalidArgument(kOp + ": scale must be finite, got " + num_str(*desc.scale));
  g.scale = float(desc.scale ? *desc.scale : 1.0 / std::sqrt(double(g.d)));
  if (!(desc.softcap >= 0) || !std::isfinite(desc.softcap))
    throw InvalidArgument(kOp + ": softcap must be a finite number >= 0 (0: none), got " + num_str(desc.softcap));
  g.softcap = float(desc.softcap);
  if (desc.window_left < -1 || desc.window_right < -1)
    throw InvalidArgument(kOp + ": window sizes must be >= 0, or -1 for unbounded; got (" +
                          std::to_string(desc.window_left) + ", " + std::to_string(desc.window_right) + ")");
  g.window_left = desc.window_left;
  g.window_right = desc.causal ? 0 : desc.window_right;
  g.alibi = desc.alibi;
  g.sinks = desc.sinks;
  need(desc.max_seqlen_k >= 0, "max_seqlen_k must be >= 0 (0: the block table's capacity)");
  need(desc.num_splits >= 0, "num_splits must be >= 0 (0: chosen by the plan)");
  g.dtype = dt;
  g.cache_dtype = desc.k_cache.dtype;

  // cuDNN's fused attention over the pages, where built and it takes the case, under "auto" for a
  // prefill (many query tokens per request: the decode kernel re-reads every key per 16 query rows).
  // One-token decode stays ours: with the split schedule below it reads the pages faster than cuDNN
  // at every measured batch (docs/benchmarks.md, paged decode). kernel='cudnn' asks for it anywhere.
  constexpr int64_t kCudnnPrefillTokens = 64;
  const int64_t cache_keys = desc.max_seqlen_k > 0 ? std::min(desc.max_seqlen_k, g.max_pages * g.page_size)
                                                   : g.max_pages * g.page_size;
  int64_t splits = desc.num_splits;  // a split count given (descriptor or tuning); 0: the schedule below
  int rows_knob = 0;  // rows per block given by tuning; 0: by the query rows per kv head
  int tile_knob = 0;  // keys per tile given by tuning; 0: by the split length (below)
  // 128-key tiles are built for fp8 caches and for 16-bit ones at head dim 64 (see below).
  const bool tile128_built = g.cache_dtype != dt || g.d == 64;
  for (const Knob& kn : tuning_knobs(kOp, pref.tuning, "BARACUDA_PAGED_ATTENTION_CFG", {"splits", "rows", "tile"})) {
    if (kn.key == "tile") {
      need(kn.value == "64" || (kn.value == "128" && tile128_built),
           "tuning tile must be 64 (or 128 over an fp8 cache or at head dim 64), got '" + kn.value + "'");
      tile_knob = int(kn.num());
      continue;
    }
    if (kn.key == "rows") {
      need(kn.value == "16" || kn.value == "64", "tuning rows must be 16 or 64, got '" + kn.value + "'");
      rows_knob = int(kn.num());
      continue;
    }
    need(kn.num() >= 1, "tuning splits must be >= 1, got '" + kn.value + "'");
    splits = kn.num();
  }
  // Over fp8 caches cuDNN reads a bf16 copy of the table's pages (dequantized in the workspace: 4
  // bytes per cached element, K and V, for every column of the table). "auto" takes it within the
  // preference's workspace limit, else within kFp8PoolBudget: a serving engine's table is often as wide as
  // the longest request allowed, and its prefill should not ask for gigabytes of scratch.
  constexpr int64_t kFp8PoolBudget = int64_t(1) << 30;
  const int64_t pool_bytes = g.cache_dtype != dt ? 2 * paged_attention_cudnn::fp8_pool_bytes(g) : 0;
  const int64_t auto_budget = pref.workspace_limit >= 0 ? pref.workspace_limit : kFp8PoolBudget;
  if (desc.kernel == "cudnn" || (desc.kernel == "auto" && g.sq >= kCudnnPrefillTokens &&
                                 pref.allows(Backend::Cudnn) && pool_bytes <= auto_budget)) {
    std::string why = "the preference forbids cuDNN";
    if (pref.allows(Backend::Cudnn)) I.cudnn = paged_attention_cudnn::build(desc, g, why);
    const int64_t bytes = I.cudnn ? paged_attention_cudnn::workspace_bytes(*I.cudnn) : 0;
    if (pref.workspace_limit >= 0 && bytes > pref.workspace_limit) {
      why = "its workspace (" + std::to_string(bytes) + " bytes) exceeds the preference's workspace_limit (" +
            std::to_string(pref.workspace_limit) + ")";
      I.cudnn = nullptr;
    }
    if (!I.cudnn && desc.kernel == "cudnn") throw Unsupported(kOp + ": kernel='cudnn' is not available: " + why);
  }

  // Rows per block: 16 reads every key once per 16 query rows of a kv head, fine for decode; with
  // many rows (a chunked prefill cuDNN does not take: an fp8 cache, no cuDNN) 64-row blocks read it
  // once per 64 (each warp 16 rows over the whole tile).
  constexpr int64_t kWideFromRows = 128;
  const int64_t head_rows = g.group * g.sq;
  if (!I.rowwise && !I.cudnn)
    g.rows_per_block = rows_knob ? rows_knob
                                 : head_rows >= kWideFromRows ? paged_attention::kWideRowsPerBlock
                                                              : paged_attention::kRowsPerBlock;
  g.row_groups = (head_rows + g.rows_per_block - 1) / g.rows_per_block;
  if (g.batch > 65535 || g.hkv * g.row_groups > 65535)
    throw Unsupported(kOp + ": at most 65535 requests and 65535 (kv head, " + std::to_string(g.rows_per_block) +
                      "-row group) pairs per call");

  // The split schedule (bandwidth-bound: what matters is the blocks in flight and the last wave's
  // tail; the sweep in docs/benchmark-notes.md, paged decode). While the (request, kv head, row
  // group) blocks fit in one wave, split until there are about two blocks per SM (one wave that keeps
  // the memory busy, every block the same length). Past one wave, split for at least four waves (a
  // short tail) while each split keeps 16 or more 64-key tiles (a block's start, the table read and
  // the first keys, costs what a short split saves). The last split runs to the request's end, so a
  // max_seqlen_k below a real length costs balance, never keys.
  const int64_t keys = cache_keys;
  const int64_t tiles = std::max<int64_t>(1, (keys + paged_attention::kKeysPerTile - 1) / paged_attention::kKeysPerTile);
  if (I.rowwise || I.cudnn) {
    splits = 1;  // the rowwise kernel takes a whole request per block; cuDNN schedules its own
  } else if (splits == 0) {
    constexpr int64_t kMinTilesPerSplit = 16, kWavesPastOne = 4;
    const int device_sms = current_device_sms();
    const int64_t sms = device_sms > 0 ? device_sms : 132;  // no device to ask: an H100 / H200
    const int measured = paged_attention::resident_blocks_per_sm(dt, g.d, g.rows_per_block);
    const int resident = measured > 0 ? measured : 2;  // no device to ask (select without a GPU)
    const int64_t slots = sms * resident;
    const int64_t blocks = std::max<int64_t>(1, g.batch * g.hkv * g.row_groups);
    if (blocks <= slots)
      splits = std::max<int64_t>(1, sms * std::min(2, resident) / blocks);
    else
      splits = std::min((kWavesPastOne * slots + blocks - 1) / blocks, std::max<int64_t>(1, tiles / kMinTilesPerSplit));
  }
  splits = std::max<int64_t>(1, std::min<int64_t>({splits, tiles, 1024}));
  // 128-key tiles, in 16-row blocks: for fp8 caches and 16-bit ones at head dim 64 (either way a
  // 64-key d128 16-bit tile's bytes per stage). By default where each split keeps four or more 64-key
  // tiles: rounding splits to 128 keys then costs the schedule little, and the wider tile reads
  // faster (docs/benchmarks.md, fp8 and d64 decode); a short split (one request over many splits)
  // keeps 64 and its parallelism.
  constexpr int64_t kWideTileFromTiles = 4;
  const int64_t split_tiles = (tiles + splits - 1) / splits;  // 64-key tiles per split
  const bool tile128_fits = tile128_built && !I.rowwise && !I.cudnn &&
                            g.rows_per_block == paged_attention::kRowsPerBlock;
  if (tile128_fits && (tile_knob == 128 || (tile_knob == 0 && split_tiles >= kWideTileFromTiles)))
    g.tile_keys = 128;
  // Splits are whole kernel tiles (the schedule counts 64-key tiles).
  const int64_t tile_mult = g.tile_keys / paged_attention::kKeysPerTile;
  const int64_t tiles_per_split = (split_tiles + tile_mult - 1) / tile_mult * tile_mult;
  g.splits = int((tiles + tiles_per_split - 1) / tiles_per_split);
  g.split_keys = tiles_per_split * paged_attention::kKeysPerTile;
  I.workspace = I.cudnn ? paged_attention_cudnn::workspace_bytes(*I.cudnn) : paged_attention::workspace_bytes(g);

  if (!I.cudnn)
    for (Backend b : pref.forbid)
      if (b == Backend::Bespoke)
        throw Unsupported(kOp + ": the preference forbids the bespoke backend, and cuDNN does not take this case");

  KernelSku& k = I.sku;
  k.category = "paged_attention";
  k.op = "paged_attention";
  k.layout = "paged";
  const bool wide = g.rows_per_block == paged_attention::kWideRowsPerBlock;
  k.name = I.rowwise ? "paged_attention.decode.rowwise"
                     : std::string(wide ? "paged_attention.prefill" : "paged_attention.decode") + ".mma_sync.d" +
                           std::to_string(g.d) + ".s" + std::to_string(g.splits);
  if (g.cache_dtype != dt) k.name += std::string(".") + dtype_name(g.cache_dtype) + "_cache";
  if (g.tile_keys != paged_attention::kKeysPerTile) k.name += ".t" + std::to_string(g.tile_keys);
  k.dtypes = {dt, dt, g.cache_dtype, g.cache_dtype};
  k.arch = compiled_archs();
  k.backend = Backend::Bespoke;
  auto& pg = k.precision;
  pg.compute_dtype = DType::Float32;
  pg.accumulator_dtype = DType::Float32;
  pg.math = I.rowwise
                ? std::string("f32 dot products on CUDA cores (a warp per key, fixed-order shuffle sums), online softmax "
                              "in f32 per warp over every fourth key, warps merged by their log-sum-exp; 1 split(s)")
                : "q k^T and p v on tensor cores (16-bit inputs" +
                      std::string(g.cache_dtype != dt ? ", the fp8 caches converted exactly in registers" : "") +
                      ", f32 accumulate; p rounded to " + std::string(dtype_name(dt)) +
                      (wide ? "), online softmax in f32 per warp over 64-key tiles (64-row blocks), splits merged by "
                              "their log-sum-exp in a fixed order; "
                            : "), online softmax in f32 per warp over 16-key slices, warps and splits merged by their "
                              "log-sum-exp in a fixed order; ") +
                      std::to_string(g.splits) + " split(s) of " + std::to_string(g.split_keys) + " keys";
  pg.deterministic = true;
  pg.bit_stable = true;
  if (I.cudnn) {
    k.name = "paged_attention.cudnn.d" + std::to_string(g.d);
    if (g.cache_dtype != dt) k.name += std::string(".") + dtype_name(g.cache_dtype) + "_cache";
    k.backend = Backend::Cudnn;
    pg.math = (g.cache_dtype != dt ? std::string("the table's fp8 pages dequantized into a bf16 pool in the workspace "
                                                 "(times their scales, rounded once), then ")
                                   : std::string()) +
              "cuDNN " + attention_cudnn::library_version() + " fused attention over the pages (16-bit inputs, f32 "
              "softmax and accumulation), the block table and lengths read on the device";
  }
  return PagedAttentionPlan(impl);
}

const KernelSku& PagedAttentionPlan::sku() const { return impl_->sku; }
const PagedAttentionDescriptor& PagedAttentionPlan::descriptor() const { return impl_->desc; }
int64_t PagedAttentionPlan::workspace_bytes() const { return impl_->workspace; }
int PagedAttentionPlan::num_splits() const { return impl_->geo.splits; }

void PagedAttentionPlan::run(const PagedAttentionTensors& t, void* workspace, int64_t workspace_size,
                             StreamHandle stream) const {
  const Impl& I = *impl_;
  const PagedAttentionDescriptor& D = I.desc;
  paged_attention::Geometry g = I.geo;
  const int device = t.q.device;
  check_view(kOp, "q", t.q, D.q, device, "q");
  check_view(kOp, "k_cache", t.k_cache, D.k_cache, device, "q");
  check_view(kOp, "v_cache", t.v_cache, D.v_cache, device, "q");
  check_like(kOp, t.out, D.out, "out", "q", device, "q");
  auto small = [&](const TensorView& v, bool needed, const std::string& name, DType want,
                   const std::vector<int64_t>& shape, const std::string& why, bool contiguous) {
    check_side_operand(kOp, v, needed, name, want, shape, why, contiguous, device, "q");
  };
  small(t.block_table, true, "block_table", DType::Int32, {g.batch, g.max_pages}, "it maps each request's keys to pages",
        false);
  small(t.seq_lens, true, "seq_lens", DType::Int32, {g.batch}, "it holds each request's key count", false);
  small(t.lse, D.lse, "lse", DType::Float32, {g.batch, g.hq, g.sq}, "the descriptor has lse=True", true);
  small(t.alibi_slopes, D.alibi, "alibi_slopes", DType::Float32, {g.hq}, "the descriptor has alibi=True", true);
  small(t.sinks, D.sinks, "sinks", DType::Float32, {g.hq}, "the descriptor has sinks=True", true);
  const int64_t scale_len = D.scale_per_head ? g.hkv : 1;
  small(t.k_scale, D.kv_scales, "k_scale", DType::Float32, {scale_len},
        D.kv_scales ? "the descriptor has kv_scales=True" : "the descriptor has no scales", true);
  small(t.v_scale, D.kv_scales, "v_scale", DType::Float32, {scale_len},
        D.kv_scales ? "the descriptor has kv_scales=True" : "the descriptor has no scales", true);

  // The mma kernel's 16-byte row accesses: every row start of q and the caches; the fp8 pool's
  // 8-byte reads of the caches (cuDNN reads q itself).
  const bool pooled = I.cudnn && g.cache_dtype != g.dtype;
  const int64_t access = pooled ? 8 : 16;  // bytes per read
  if ((!I.rowwise && !I.cudnn) || pooled)
    for (auto [v, name] : {std::pair{&t.q, "q"}, {&t.k_cache, "k_cache"}, {&t.v_cache, "v_cache"}}) {
      if (pooled && v == &t.q) continue;
      AccessWidth w;
      w.fit(v->data);
      for (int d = 0; d + 1 < v->ndim; ++d)
        if (v->shape[d] > 1) w.fit(v->strides[d] * int64_t(dtype_size(v->dtype)));
      if (w.bytes < access) {
        const std::string n = std::to_string(access);
        throw InvalidArgument(kOp + ": " + name + " needs a " + n + "-byte aligned data pointer and strides that are "
                              "multiples of " + n + " bytes (its rows are read " + n + " bytes at a time)");
      }
    }
  const int r = t.q.ndim;
  g.q_batch = t.q.strides[0];
  g.q_token = r == 4 ? t.q.strides[1] : 0;
  g.q_head = t.q.strides[r - 2];
  g.out_batch = t.out.strides[0];
  g.out_token = r == 4 ? t.out.strides[1] : 0;
  g.out_head = t.out.strides[r - 2];
  for (const TensorView* v : {&t.k_cache, &t.v_cache})
    if (v->strides[0] > INT32_MAX || v->strides[1] > INT32_MAX)
      throw Unsupported(kOp + ": a cache's page or slot stride is 2^31 elements or more");
  g.k_page = t.k_cache.strides[0];
  g.k_slot = t.k_cache.strides[1];
  g.k_head = t.k_cache.strides[2];
  g.v_page = t.v_cache.strides[0];
  g.v_slot = t.v_cache.strides[1];
  g.v_head = t.v_cache.strides[2];
  g.table_row = t.block_table.ndim == 2 ? t.block_table.strides[0] : 0;
  g.table_col = t.block_table.ndim == 2 ? t.block_table.strides[1] : 0;
  g.seq_lens_stride = t.seq_lens.ndim == 1 ? t.seq_lens.strides[0] : 0;

  const std::vector<NamedView> reads = {{"q", &t.q}, {"k_cache", &t.k_cache}, {"v_cache", &t.v_cache},
                                        {"block_table", &t.block_table}, {"seq_lens", &t.seq_lens},
                                        {"alibi_slopes", &t.alibi_slopes}, {"sinks", &t.sinks},
                                        {"k_scale", &t.k_scale}, {"v_scale", &t.v_scale}};
  const std::vector<NamedView> writes = {{"out", &t.out}, {"lse", &t.lse}};
  check_aliasing(kOp, writes, reads);
  check_workspace(kOp, workspace, workspace_size, I.workspace, reads, writes);

  paged_attention::Pointers p;
  p.q = t.q.data;
  p.k_cache = t.k_cache.data;
  p.v_cache = t.v_cache.data;
  p.block_table = static_cast<const int32_t*>(t.block_table.data);
  p.seq_lens = static_cast<const int32_t*>(t.seq_lens.data);
  p.alibi_slopes = static_cast<const float*>(t.alibi_slopes.data);
  p.sinks = static_cast<const float*>(t.sinks.data);
  p.k_scale = static_cast<const float*>(t.k_scale.data);
  p.v_scale = static_cast<const float*>(t.v_scale.data);
  p.scale_stride = D.scale_per_head ? 1 : 0;
  p.out = t.out.data;
  p.lse = static_cast<float*>(t.lse.data);
  if (g.splits > 1) {
    p.partial_out = static_cast<float*>(workspace);
    p.partial_lse = reinterpret_cast<float*>(static_cast<char*>(workspace) + paged_attention::partial_lse_offset(g));
  }
  if (g.batch == 0 || g.hq == 0 || g.sq == 0) return;
  DeviceGuard guard(device);
  if (I.cudnn) return paged_attention_cudnn::run(*I.cudnn, g, p, workspace, workspace_size, stream, device);
  if (I.rowwise) paged_attention::decode_rowwise(g, p, stream);
  else paged_attention::decode(g, p, stream);
}

FamilyInfo paged_attention_family_info() {
  FamilyInfo f{"paged_attention", "PagedAttentionPlan, AttentionMergePlan",
               "decode attention of a batch of requests over a paged KV cache (block table and lengths read on the "
               "device; CUDA-graph capturable): 1 or more query tokens per request, GQA / MQA, causal, sliding "
               "window, softcap, ALiBi, sinks; long contexts split and merged; cuDNN's paged attention where built "
               "for chunked prefills; the merge of two attention "
               "states (cascades) as its own plan",
               {}};
  f.ops.push_back(OpCoverage{"paged_attention", "decode", {DType::Float16, DType::BFloat16, DType::Float32},
                             {"paged", "paged_heads_first"}, Backend::Bespoke, false});
  // What the cuDNN backend covers where built (features()["cudnn"] says whether this build has it).
  f.ops.push_back(OpCoverage{"paged_attention", "decode", {DType::Float16, DType::BFloat16},
                             {"paged", "paged_heads_first"}, Backend::Cudnn, false});
  f.ops.push_back(OpCoverage{"merge_attention_states", "merge (AttentionMergePlan)",
                             {DType::Float16, DType::BFloat16, DType::Float32}, {"[..., heads, head_dim], any strides"},
                             Backend::Bespoke, false});
  return f;
}

}  // namespace baracuda
