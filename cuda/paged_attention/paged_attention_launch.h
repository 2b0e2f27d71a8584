// The launch contract of decode attention over a paged KV cache (cpp/src/paged_attention.cpp fills
// it; paged_decode.cu runs it).
//
// Request b has seq_len = clamp(seq_lens[b], 0, max_pages * page_size) keys: key j lives in page
// block_table[b, j / page_size] at slot j % page_size. Its `sq` queries are the last sq positions:
// query i sits at pos = seq_len - sq + i and sees key j when pos - window_left <= j <= pos +
// window_right (-1: unbounded) and j < seq_len. A block-table entry outside [0, pages) hides its
// keys (never read). Scores as attention_launch.h: scale, softcap, ALiBi (slope[h] * |pos - j|),
// sinks (a per-head logit in the denominator).
//
// Work: a block of four warps takes rows_per_block rows (query token i, q head h of one kv head: row = i *
// group + h % group; 16, or 64 for many rows) and one split of the keys ([split * split_keys, +split_keys), the last split to seq_len). With one
// split it writes out and lse; with more, each writes its normalised partial output and log2-domain
// lse to the workspace, and a merge kernel combines them (and adds the sink).
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"

namespace baracuda::paged_attention {

constexpr int kRowsPerBlock = 16;  // one mma m-tile of query rows per block
constexpr int kWideRowsPerBlock = 64;  // prefill blocks: four warps of 16 rows, each over the whole tile
constexpr int kKeysPerTile = 64;   // keys per tile: four warps of 16

struct Geometry {
  DType dtype = DType::BFloat16;
  DType cache_dtype = DType::BFloat16;              // dtype, or fp8 (e4m3 / e5m2, with scales)
  int d = 0;                                        // head dim of q, k and v
  int64_t batch = 0, sq = 0, hq = 0, hkv = 0, group = 0;
  int rows_per_block = kRowsPerBlock;               // 16 (decode), or kWideRowsPerBlock (prefill)
  int64_t row_groups = 0;                           // ceil(group * sq / rows_per_block)
  int64_t pages = 0, page_size = 0, max_pages = 0;
  float scale = 1.f, softcap = 0.f;
  int64_t window_left = -1, window_right = -1;
  bool alibi = false, sinks = false;
  int splits = 1;
  int64_t split_keys = 0;                           // a multiple of tile_keys
  int tile_keys = kKeysPerTile;                     // keys per shared-memory tile: 64, or 128 (fp8 caches)
  // Strides in elements.
  int64_t q_batch = 0, q_token = 0, q_head = 0;
  int64_t out_batch = 0, out_token = 0, out_head = 0;
  int64_t k_page = 0, k_slot = 0, k_head = 0;
  int64_t v_page = 0, v_slot = 0, v_head = 0;
  int64_t table_row = 0, table_col = 0, seq_lens_stride = 0;
};

struct Pointers {
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const int32_t* block_table = nullptr;
  const int32_t* seq_lens = nullptr;
  const float* alibi_slopes = nullptr;  // [hq]
  const float* sinks = nullptr;         // [hq]
  void* out = nullptr;
  float* lse = nullptr;                 // [batch, hq, sq] contiguous, natural log; may be null
  float* partial_out = nullptr;         // [splits, batch, sq, hq, d] (splits > 1)
  float* partial_lse = nullptr;         // [splits, batch, sq, hq], log2 domain
  // fp8 caches: k = k_cache * k_scale[kv head * stride] (stride 0: one scale), v likewise; null: 1.
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  int64_t scale_stride = 0;
};

// The head dims the tensor-core kernel (bf16 / f16) is compiled for; the rowwise kernel takes f32
// and any head dim up to kMaxRowwiseHeadDim.
constexpr bool head_dim_supported(int d) { return d == 64 || d == 96 || d == 128 || d == 256; }
constexpr int kMaxRowwiseHeadDim = 256;
// The workspace with several splits: partial_out at 0, partial_lse at this byte offset (256-aligned).
inline int64_t partial_rows(const Geometry& g) { return int64_t(g.splits) * g.batch * g.sq * g.hq; }
inline int64_t partial_lse_offset(const Geometry& g) { return (partial_rows(g) * g.d * 4 + 255) / 256 * 256; }
// Bytes of workspace a geometry needs (0 with one split).
inline int64_t workspace_bytes(const Geometry& g) {
  return g.splits > 1 ? partial_lse_offset(g) + partial_rows(g) * 4 : 0;
}
// Blocks of the tensor-core kernel (16- or 64-row blocks) for head dim d that fit one SM of the
// current device (0: no device).
int resident_blocks_per_sm(DType dtype, int d, int rows_per_block);
void decode(const Geometry& g, const Pointers& p, void* stream);
// CUDA cores, one block per (request, query token, q head), one split (paged_rowwise.cu).
void decode_rowwise(const Geometry& g, const Pointers& p, void* stream);

// Around the cuDNN prefill graph (cpp/src/cudnn/paged_attention_cudnn.cpp), cudnn_paged.cu: what cuDNN
// reads per request, written on the device into the plan's workspace (nothing reaches the host, so a
// captured run replays for new tables), and the rows our contract defines that cuDNN assumes away.
struct CudnnPaged {
  int32_t* seq_len_q = nullptr;   // [batch]: sq
  int32_t* seq_len_kv = nullptr;  // [batch]: seq_lens clamped to [0, max_pages * page_size]
  int32_t* table = nullptr;       // [batch, max_pages] contiguous: block_table, an entry outside [0, pages) as 0
  // fp8 caches: the pages the table names, dequantized into q's dtype (bf16), page b * max_pages + j
  // of request b's column j ([batch * max_pages + 1, page_size, hkv, d] contiguous), and `table`
  // onto them: a column past the request's keys onto the last page, all zeros. Slots past a
  // request's length and pages outside [0, pages) hold zeros.
  void* k_pool = nullptr;
  void* v_pool = nullptr;
};
// The lengths and the table; with pools, the dequantized pages too.
void cudnn_paged_prepare(const Geometry& g, const Pointers& p, const CudnnPaged& m, void* stream);
// A query row that sees no key (its request shorter than the queries reach back, or a window past its
// keys): out 0 and lse -inf (the sink's logit with sinks), as the decode kernels write it. 16-bit out.
void cudnn_paged_finish(const Geometry& g, const Pointers& p, void* stream);

// Merge of two attention states over disjoint key sets (cascades: a shared prefix and each request's
// suffix; split-KV partials), per row r = (leading index, head): with m = max(lse_a, lse_b),
// w_x = exp(lse_x - m): out = (w_a out_a + w_b out_b) / (w_a + w_b), lse = m + log(w_a + w_b); a row
// whose lse are both -inf (no key on either side) gets out = 0, lse = -inf. f32 math, one rounding.
// Up to kMergeMaxLead leading dims (their extents in `lead`, 1-padded), then the head; strides in
// elements per operand (the last dim of the outputs is contiguous).
constexpr int kMergeMaxLead = 3;
struct MergeArgs {
  DType dtype = DType::BFloat16;  // out_a, out_b and out; the lse are float32
  int d = 0;
  int64_t heads = 0, rows = 0;    // rows = heads * prod(lead)
  int64_t lead[kMergeMaxLead] = {1, 1, 1};
  // [operand][dim]: dims 0..2 the leading ones, 3 the head. Operands: out_a, out_b, out, lse_a, lse_b, lse.
  int64_t stride[6][kMergeMaxLead + 1] = {};
  const void* out_a = nullptr;
  const void* out_b = nullptr;
  void* out = nullptr;
  const float* lse_a = nullptr;
  const float* lse_b = nullptr;
  float* lse = nullptr;  // may be null
};
void merge_states(const MergeArgs& a, void* stream);

}  // namespace baracuda::paged_attention
