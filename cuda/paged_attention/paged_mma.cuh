// The tensor-core kernel of attention over a paged KV cache (the contract:
// paged_attention_launch.h), included by paged_decode.cu (16-row blocks) and
// paged_prefill_{bf16,f16}.cu (64-row blocks). A block of four warps takes the query rows of one kv
// head (the group's q heads times the request's query tokens) and one split of its keys. Tiles of
// 64 keys stream through two shared-memory stages (cp.async, the next tile in flight while this one
// computes; each key's page looked up in the block table).
// Decode (16 rows): each warp takes 16 keys of a tile, and the four warps' states are combined at
// the end. Prefill (64 rows, WIDE): each warp takes 16 rows over the whole tile, so a key is read
// once per 64 rows. S = Q K^T and O += P V with mma.sync m16n8k16, an online softmax per warp in the
// log2 domain. Several splits write normalised partials that the merge kernel combines.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "baracuda/errors.h"
#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "common/fast_exp.cuh"
#include "common/packed_vec.cuh"
#include "common/smem_opt_in.h"
#include "fa2/flash_common.cuh"
#include "paged_attention/paged_attention_launch.h"

namespace baracuda::paged_attention {

namespace {  // one copy per including file (each instantiates its own kernels)

using attention::flash::kLn2;
using attention::flash::kLog2e;
using kernels::ex2_ftz;
constexpr int kStages = 2;
// A key row of zeros (the longest: d 256 of 16 bits) that an absent row's copies read from a 16-bit
// cache of head dim 128 or more, so their copy loop needs no predicate: a row of L2 hits. fp8 caches
// keep the predicate (their d128 128-key kernel would spill), and so do 16-bit d64 ones (faster with it).
__device__ const uint4 kZeroRow[256 * 2 / 16] = {};

// Four warps of 16 keys each, S shared-memory stages of one 64-key tile (S - 1 tiles in flight
// while one computes; kStages is what is built).
// fp8 caches (FP8): the stages hold the tile's raw bytes (rows of D + 16 bytes: the fragment reads
// below hit distinct banks), converted to 16 bits in registers after 32-bit shared-memory reads
// (exact; the scales are folded into the score and the output).
template <int D, int S, bool FP8 = false, bool WIDE = false, int TILE = kKeysPerTile> struct Cfg {
  static constexpr int kWarps = 4, kThreads = 32 * kWarps, BN = TILE;
  static constexpr int kRows = WIDE ? kWideRowsPerBlock : kRowsPerBlock;  // query rows per block
  static constexpr int kStates = WIDE ? 1 : kWarps;  // online-softmax states per row to combine
  static constexpr int kWarpKeys = WIDE ? BN : BN / kWarps;  // keys of a tile each warp takes
  static constexpr int LD = D + 8;  // padded q rows: ldmatrix's eight row addresses hit distinct banks
  static constexpr int q_bytes = kRows * LD * 2;  // a multiple of 128: the stages start 128-byte aligned
  // 16-bit stages: unpadded swizzled rows (flash::swizzled_offset) where D allows, padded ones (D 96) otherwise.
  static constexpr bool kSwizzle = !FP8 && D % 64 == 0;
  static constexpr int SLD = kSwizzle ? D : LD;  // a stage row's elements
  static constexpr int stage_elems = 2 * BN * SLD;  // K then V of one tile
  static constexpr int LDR = D + 16;                  // FP8: bytes per raw row
  static constexpr int raw_stage_bytes = 2 * BN * LDR;  // FP8: K then V of one tile, one byte each
  static constexpr int stages_bytes = FP8 ? S * raw_stage_bytes : S * stage_elems * 2;
  static constexpr int combine_bytes = (kStates * kRows * D + 2 * kStates * kRows) * 4;
  static_assert(!kSwizzle || q_bytes % 128 == 0, "swizzled stages start 128-byte aligned");
  static_assert(combine_bytes <= stages_bytes, "the warps' partial states reuse the stages");
  static_assert(BN % kKeysPerTile == 0 && BN <= kThreads && kWarpKeys % 16 == 0,
                "whole 64-key tiles (splits are whole tiles), a key's page per thread, 16-key mma steps");
  static constexpr int smem_bytes = q_bytes + stages_bytes;
  // Blocks per SM the registers are capped for (about what shared memory allows); the q
  // fragments stay in registers across tiles except for 256-dim heads (re-read from shared memory).
  // fp8 at d64 takes 3 (4 spilled its conversions: 4.5% slower, docs/benchmark-notes.md).
  static constexpr int min_blocks = WIDE     ? (D <= 128 ? 2 : 1)
                                    : S == 2 ? (D <= 64 ? (FP8 ? 3 : 4) : D <= 128 ? 3 : 1)
                                             : (D <= 64 ? 3 : D <= 128 ? 2 : 1);
  static constexpr bool q_in_registers = D <= 128;
};

// The rows a thread owns in the mma C layout (gq and gq + 8) and what the score needs of each.
struct RowInfo {
  bool valid;
  int64_t pos, h;
  float slope_log2;
};

// T: q and out; KV: the caches' element type (T, or fp8 e4m3 / e5m2 with p.k_scale / p.v_scale).
template <class T, class KV, int D, int S, bool WIDE, int TILE>
__global__ void __launch_bounds__(Cfg<D, S, !std::is_same_v<T, KV>, WIDE, TILE>::kThreads,
                                  Cfg<D, S, !std::is_same_v<T, KV>, WIDE, TILE>::min_blocks)
    paged_mma_kernel(const Geometry g, const Pointers p) {
  constexpr bool FP8 = !std::is_same_v<T, KV>;
  using C = Cfg<D, S, FP8, WIDE, TILE>;
  constexpr int LD = C::LD, SLD = C::SLD, DT = D / 8, KT = D / 16, BN = C::BN, kThreads = C::kThreads;
  constexpr int RB = C::kRows, NT = C::kWarpKeys / 8;  // block rows; n8 key tiles per warp
  constexpr int R = S + 1;  // the page ring: the tile computing, S - 1 in flight, one looked up ahead
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* Qs = reinterpret_cast<T*>(smem_raw);
  T* stages = Qs + RB * LD;
  __shared__ int32_t ring_page[R][BN];
  __shared__ longlong2 ring_offset[R][BN];  // each key row's K and V byte offsets in the caches

  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, gq = lane >> 2, tq = lane & 3;
  const int kb = WIDE ? 0 : w * C::kWarpKeys, rb = WIDE ? w * 16 : 0;  // the warp's first key of a tile, first row
  const int64_t b = blockIdx.z, hk = blockIdx.y / g.row_groups, r0 = (blockIdx.y % g.row_groups) * RB;
  const int split = blockIdx.x;
  const int64_t rows = g.group * g.sq;
  const int64_t seq_len =
      min(max(int64_t(p.seq_lens[b * g.seq_lens_stride]), int64_t(0)), g.max_pages * g.page_size);
  const int64_t first_pos = seq_len - g.sq;  // position of query 0

  // The keys any row of this block sees, cut to this split.
  const int64_t r_last = min(r0 + RB, rows) - 1;
  const int64_t pos_first = first_pos + r0 / g.group, pos_last = first_pos + r_last / g.group;
  int64_t jlo = g.window_left >= 0 ? max(int64_t(0), first_pos + r0 / g.group - g.window_left) : 0;
  int64_t jhi = g.window_right >= 0 ? min(seq_len, first_pos + r_last / g.group + g.window_right + 1) : seq_len;
  jlo = max(jlo, int64_t(split) * g.split_keys);
  if (split + 1 < g.splits) jhi = min(jhi, int64_t(split + 1) * g.split_keys);
  const int ntiles = jhi > jlo ? int((jhi - jlo + BN - 1) / BN) : 0;

  const T* q = static_cast<const T*>(p.q);
  const KV* kc = static_cast<const KV*>(p.k_cache);
  const KV* vc = static_cast<const KV*>(p.v_cache);

  // Q rows (zero past the block's rows), then the first key / value tile.
  auto q_chunk = [&](int c, bool& in) {  // chunk c of the block's Q rows: 8 elements of row c / DT
    const int r = c / DT, cc = c % DT;
    const int64_t row = r0 + r;
    in = row < rows;
    const int64_t i = in ? row / g.group : 0, h = hk * g.group + (in ? row % g.group : 0);
    return q + b * g.q_batch + i * g.q_token + h * g.q_head + cc * 8;
  };
  // bf16 queries over an fp8 cache: S = Q K^T runs in f16, where K's bytes convert exactly in one cvt
  // a pair (bf16 takes four, through f32). The block's Q rows are scaled by the power of two 2^e that
  // puts their largest finite |q| in [2^14, 2^15): exact in f16 but for elements under 2^-28 of that
  // largest one, which round as f16 subnormals; the score's scale takes 2^-e back. One e per block
  // (not per row) keeps the hot loop's registers as they were. At d64 the extra pass over Q costs more
  // than the cvts save (docs/benchmark-notes.md, session 53): both products stay in bf16 there.
  constexpr bool kQF16 = FP8 && std::is_same_v<T, __nv_bfloat16> && D >= 128;
  using QK = std::conditional_t<kQF16, __half, T>;
  __shared__ unsigned q_absmax;  // the bf16 bits of the largest finite |q| (bits order as the values)
  float q_unscale = 1.f;         // 2^-e
  if constexpr (kQF16) {
    if (tid == 0) q_absmax = 0;
    __syncthreads();
    unsigned mx = 0;
    for (int c = tid; c < RB * DT; c += kThreads) {
      bool in;
      const T* src = q_chunk(c, in);
      if (!in) continue;
      const uint4 v = *reinterpret_cast<const uint4*>(src);
      for (unsigned w : {v.x, v.y, v.z, v.w})
        for (unsigned a : {w & 0x7fffu, (w >> 16) & 0x7fffu}) mx = a < 0x7f80u ? max(mx, a) : mx;
    }
    atomicMax(&q_absmax, mx);
    __syncthreads();
    const int e = q_absmax == 0 ? 0 : max(-126, min(126, 141 - int(q_absmax >> 7)));
    const float sc = __int_as_float((e + 127) << 23);
    q_unscale = __int_as_float((127 - e) << 23);
    for (int c = tid; c < RB * DT; c += kThreads) {
      bool in;
      const T* src = q_chunk(c, in);
      const uint4 v = in ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
      uint4 h;
      unsigned* hw = &h.x;
      const unsigned vw[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&vw[k]));
        const __half2 hv = __floats2half2_rn(f.x * sc, f.y * sc);
        hw[k] = *reinterpret_cast<const unsigned*>(&hv);
      }
      *reinterpret_cast<uint4*>(Qs + (c / DT) * LD + (c % DT) * 8) = h;
    }
  } else {
    for (int c = tid; c < RB * DT; c += kThreads) {
      bool in;
      const T* src = q_chunk(c, in);
      kernels::cp_async16_zfill(Qs + (c / DT) * LD + (c % DT) * 8, src, in);
    }
  }
  // Each key's page, looked up once per tile by threads 0..BN - 1 into a ring of S + 1 tiles (-1: past
  // the range or a hidden page), with its row's K and V byte offsets (an absent row's: zero_offset
  // below), so the copies only add them. The table read for a tile is issued an iteration before its
  // result is stored, and stored an iteration before its copies are issued, so nothing waits on it.
  // A key's page and slot: a shift and a mask for the usual power-of-two page size.
  const uint32_t page_size = uint32_t(g.page_size);
  const int page_shift = (page_size & (page_size - 1)) == 0 ? __ffs(int(page_size)) - 1 : -1;
  auto page_of = [&](uint32_t j) { return page_shift >= 0 ? j >> page_shift : j / page_size; };
  auto slot_of = [&](uint32_t j) { return page_shift >= 0 ? j & (page_size - 1) : j % page_size; };
  auto fetch_page = [&](int m) -> int32_t {
    const int64_t j = jlo + int64_t(m) * BN + tid;
    if (tid >= BN || m >= ntiles || j >= jhi) return -1;
    return p.block_table[b * g.table_row + int64_t(page_of(uint32_t(j))) * g.table_col];
  };
  // Page and slot strides fit 32 bits (select checks), so each row offset is two 32 x 32 -> 64-bit
  // multiply-adds.
  const int32_t k_page = int32_t(g.k_page), k_slot = int32_t(g.k_slot), v_page = int32_t(g.v_page),
                v_slot = int32_t(g.v_slot);
  const KV* kh = kc + hk * g.k_head;
  const KV* vh = vc + hk * g.v_head;
  // An absent row's offsets: 0 where its copies zero-fill, else into kZeroRow (every copying thread's
  // column chunk added).
  constexpr bool kZeroFill = FP8 || D < 128;
  auto zero_offset = [](const KV* base) {
    return int64_t(reinterpret_cast<uintptr_t>(kZeroRow) - reinterpret_cast<uintptr_t>(base));
  };
  auto store_page = [&](int m, int32_t page) {
    if (tid >= BN) return;
    const uint32_t j = uint32_t(jlo + int64_t(m) * BN + tid);
    const bool in = page >= 0 && page < g.pages;
    const int64_t pg = page, sl = int32_t(slot_of(j));
    ring_page[m % R][tid] = in ? page : -1;
    ring_offset[m % R][tid] = in ? make_longlong2((pg * k_page + sl * k_slot) * int64_t(sizeof(KV)),
                                                  (pg * v_page + sl * v_slot) * int64_t(sizeof(KV)))
                                 : kZeroFill ? make_longlong2(0, 0) : make_longlong2(zero_offset(kh), zero_offset(vh));
  };
  // 16-byte chunks per key row: D / 8 of a 16-bit cache, D / 16 of an fp8 one.
  constexpr int EC = 16 / int(sizeof(KV)), DC = D / EC;
  unsigned char* raw = reinterpret_cast<unsigned char*>(stages);  // FP8: the S raw stages
  auto load_tile = [&](int m) {
    KV* Kd;
    KV* Vd;
    if constexpr (FP8) {
      Kd = reinterpret_cast<KV*>(raw + (m % S) * C::raw_stage_bytes);
      Vd = Kd + BN * C::LDR;
    } else {
      Kd = reinterpret_cast<KV*>(stages + (m % S) * C::stage_elems);
      Vd = Kd + BN * SLD;
    }
    const longlong2* offsets = ring_offset[m % R];
    const int32_t* pages = ring_page[m % R];  // kZeroFill: whether a row is present
    // Chunk c = tid + it * kThreads of the tile is row c / DC, column chunk c % DC: where DC divides
    // the block, a thread keeps one column (its source pointers and swizzle set once) and steps rows.
    constexpr bool kFixedColumn = kThreads % DC == 0;
#pragma unroll 4
    for (int it = 0; it < BN * DC / kThreads; ++it) {
      const int c = tid + it * kThreads;
      const int r = kFixedColumn ? int(unsigned(tid) / DC) + it * (kThreads / DC) : c / DC;
      const int cc = kFixedColumn ? int(unsigned(tid) % DC) : c % DC;
      const longlong2 off = offsets[r];
      const int dst = FP8            ? r * C::LDR + cc * EC
                      : C::kSwizzle ? attention::flash::swizzled_offset<D>(r, cc * EC)
                                    : r * LD + cc * EC;
      const char* ks = reinterpret_cast<const char*>(kh + cc * EC) + off.x;
      const char* vs = reinterpret_cast<const char*>(vh + cc * EC) + off.y;
      if constexpr (kZeroFill) {
        const bool in = pages[r] >= 0;
        kernels::cp_async16_zfill(Kd + dst, ks, in);
        kernels::cp_async16_zfill(Vd + dst, vs, in);
      } else {
        kernels::cp_async16(Kd + dst, ks);
        kernels::cp_async16(Vd + dst, vs);
      }
    }
  };
  // FP8 fragments. The reduction over D in S = Q K^T may run in any order both operands share: a
  // thread's four k slots of a 16-wide step (2tq, 2tq + 1, 2tq + 8, 2tq + 9) take the four adjacent
  // bytes at 4tq, so one 32-bit read gives a key's B fragment, and Q's A fragment is read to match.
  auto load_q = [&](unsigned (&a)[4], int kk) {  // the warp's A fragment of q for k-step kk
    if constexpr (FP8) {
      const T* q0 = Qs + (rb + gq) * LD + kk * 16 + tq * 4;
      a[0] = *reinterpret_cast<const unsigned*>(q0);
      a[1] = *reinterpret_cast<const unsigned*>(q0 + 8 * LD);
      a[2] = *reinterpret_cast<const unsigned*>(q0 + 2);
      a[3] = *reinterpret_cast<const unsigned*>(q0 + 8 * LD + 2);
    } else {
      attention::flash::load_a<LD>(a, Qs, rb, kk * 16);
    }
  };
  // O += P V needs pairs of keys at one column: a thread reads its four keys' rows (2tq, 2tq + 1,
  // 2tq + 8, 2tq + 9) at bytes 4gq..4gq + 3 of a 32-column chunk and byte-permutes them into four n8
  // tiles, tile c holding column 4n + c at its column n (o_col maps it back).
  auto o_col = [](int dt, int n) { return FP8 ? (dt / 4) * 32 + 4 * n + dt % 4 : dt * 8 + n; };
#pragma unroll
  for (int m = 0; m < S; ++m) store_page(m, fetch_page(m));
  __syncthreads();
#pragma unroll
  for (int m = 0; m + 1 < S; ++m) {
    if (m < ntiles) load_tile(m);
    kernels::cp_async_commit();  // the first group also holds Q
  }
  int32_t ahead = fetch_page(S);

  // Rows 8..15 of the warp's m-tile hold no query row (decode with 8 or fewer q heads per kv head):
  // their softmax and output rescale are skipped (warp-uniform), their probabilities zero (2% on
  // fp8 decode, tools/probe: paged).
  const bool upper_rows = r0 + rb + 8 < rows;
  RowInfo ri[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int64_t row = r0 + rb + gq + hf * 8;
    ri[hf].valid = row < rows;
    const int64_t rr = ri[hf].valid ? row : 0;
    ri[hf].pos = first_pos + rr / g.group;
    ri[hf].h = hk * g.group + rr % g.group;
    ri[hf].slope_log2 = g.alibi ? p.alibi_slopes[ri[hf].h] * kLog2e : 0.f;
  }
  // fp8 caches: k = k_cache * k_scale, v = v_cache * v_scale (one per kv head, or one): k_scale goes
  // into the score's scale, v_scale onto the output.
  const float k_scale = FP8 && p.k_scale ? p.k_scale[hk * p.scale_stride] : 1.f;
  const float v_scale = FP8 && p.v_scale ? p.v_scale[hk * p.scale_stride] : 1.f;
  const float scale_log2 = g.scale * k_scale * kLog2e * q_unscale;  // f16 Q: its 2^-e too
  const bool softcap = g.softcap > 0.f;
  const float cap_scale = softcap ? g.scale * k_scale * q_unscale / g.softcap : 0.f, cap_log2 = g.softcap * kLog2e;

  unsigned qa[C::q_in_registers ? KT : 1][4];
  float o[DT][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;

  for (int n = 0; n < ntiles; ++n) {  // 32-bit tile counters: the ring's modulo 3 a multiply-high
    const int st = int(n % S);
    if (n + S - 1 < ntiles) load_tile(n + S - 1);
    kernels::cp_async_commit();
    kernels::cp_async_wait<S - 1>();
    __syncthreads();  // Q (first pass) and this tile are in
    if constexpr (C::q_in_registers) {
      if (n == 0) {
#pragma unroll
        for (int kk = 0; kk < KT; ++kk) load_q(qa[kk], kk);
      }
    }
    const T* Ks = stages + st * C::stage_elems;
    const T* Vs = Ks + BN * SLD;
    const unsigned char* Kr = raw + st * C::raw_stage_bytes;  // FP8
    const unsigned char* Vr = Kr + BN * C::LDR;

    float sc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KT; ++kk) {
      if constexpr (!C::q_in_registers) load_q(qa[0], kk);
      const int qi = C::q_in_registers ? kk : 0;
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {  // 16 keys: two n8 tiles
        unsigned bf[4];
        if constexpr (FP8) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const unsigned kw =
                *reinterpret_cast<const unsigned*>(Kr + (kb + np * 16 + h * 8 + gq) * C::LDR + kk * 16 + tq * 4);
            bf[2 * h] = kernels::fp8x2_to_pair<QK, KV>(kw);
            bf[2 * h + 1] = kernels::fp8x2_to_pair<QK, KV>(kw >> 16);
          }
        } else {
          if constexpr (C::kSwizzle)
            attention::flash::load_b_swizzled<D>(bf, Ks, kb + np * 16, kk * 16);
          else
            attention::flash::load_b<LD>(bf, Ks, kb + np * 16, kk * 16);
        }
        kernels::mma16816<QK>(sc[2 * np], qa[qi], bf[0], bf[1]);
        kernels::mma16816<QK>(sc[2 * np + 1], qa[qi], bf[2], bf[3]);
      }
    }
    // Scores in the log2 domain; keys a row does not see (or in a hidden page) are -inf. A tile inside
    // every row's window (the usual case) checks the page alone.
    const int64_t j0 = jlo + int64_t(n) * BN;
    const int32_t* present = ring_page[n % R];
    const bool inside = (g.window_left < 0 || j0 >= pos_last - g.window_left) &&
                        (g.window_right < 0 || j0 + BN - 1 <= pos_first + g.window_right);
    if (inside && !softcap && !g.alibi) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          sc[nt][e] = present[kb + nt * 8 + 2 * tq + (e & 1)] >= 0 ? sc[nt][e] * scale_log2 : -INFINITY;
    } else {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const RowInfo& r = ri[e >> 1];
          const int jj = kb + nt * 8 + 2 * tq + (e & 1);
          const int64_t j = j0 + jj;
          const bool vis = present[jj] >= 0 && (g.window_left < 0 || j >= r.pos - g.window_left) &&
                           (g.window_right < 0 || j <= r.pos + g.window_right);
          float x = softcap ? cap_log2 * tanhf(sc[nt][e] * cap_scale) : sc[nt][e] * scale_log2;
          if (g.alibi) x -= r.slope_log2 * float(r.pos > j ? r.pos - j : j - r.pos);
          sc[nt][e] = vis ? x : -INFINITY;
        }
    }
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      if (hf == 1 && !upper_rows) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) sc[nt][2] = sc[nt][3] = 0.f;
        continue;
      }
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(sc[nt][hf * 2], sc[nt][hf * 2 + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mn = fmaxf(m[hf], mx);
      const float mu = mn == -INFINITY ? 0.f : mn;
      const float corr = ex2_ftz(m[hf] - mu);
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pe = ex2_ftz(sc[nt][hf * 2 + e] - mu);
          sc[nt][hf * 2 + e] = pe;
          sum += pe;
        }
      l[hf] = l[hf] * corr + sum;
      m[hf] = mn;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        o[dt][hf * 2] *= corr;
        o[dt][hf * 2 + 1] *= corr;
      }
    }
    // fp8 caches: O += P V in f16 (with f16 queries, or bf16 ones at D >= 128). V's bytes convert
    // exactly in one cvt a pair (bf16 takes four, through f32); P in [0, 1] keeps bf16's precision.
    using PV = QK;
#pragma unroll
    for (int kc = 0; kc < NT / 2; ++kc) {  // 16 keys at a time
      unsigned a[4];
      attention::flash::c_to_a<PV>(a, sc, kc);
      const int k0 = kb + kc * 16;
      if constexpr (FP8) {
#pragma unroll
        for (int ch = 0; ch < D / 32; ++ch) {
          const unsigned char* v0 = Vr + (k0 + 2 * tq) * C::LDR + ch * 32 + gq * 4;
          const unsigned r0 = *reinterpret_cast<const unsigned*>(v0), r1 = *reinterpret_cast<const unsigned*>(v0 + C::LDR),
                         r8 = *reinterpret_cast<const unsigned*>(v0 + 8 * C::LDR),
                         r9 = *reinterpret_cast<const unsigned*>(v0 + 9 * C::LDR);
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const unsigned sel = unsigned(c) | unsigned(c + 4) << 4;  // byte c of the first row, then of the second
            kernels::mma16816<PV>(o[4 * ch + c], a, kernels::fp8x2_to_pair<PV, KV>(__byte_perm(r0, r1, sel)),
                                  kernels::fp8x2_to_pair<PV, KV>(__byte_perm(r8, r9, sel)));
          }
        }
      } else {
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          unsigned bf[4];
          if constexpr (C::kSwizzle)
            attention::flash::load_b_trans_swizzled<D>(bf, Vs, k0, dp * 16);
          else
            attention::flash::load_b_trans<LD>(bf, Vs, k0, dp * 16);
          kernels::mma16816<T>(o[2 * dp], a, bf[0], bf[1]);
          kernels::mma16816<T>(o[2 * dp + 1], a, bf[2], bf[3]);
        }
      }
    }
    // Tile n + S's pages into the ring slot tile n - 1 used (every read of it was before this
    // iteration's first barrier); the barrier below publishes them to the copies of iteration n + 1.
    store_page(n + S, ahead);
    ahead = fetch_page(n + S + 1);
    __syncthreads();  // every warp is done with this stage before it is refilled
  }
  kernels::cp_async_wait<0>();
  __syncthreads();

  // The states through shared memory (the stages are free now): O [state][row][D], m, l; decode has
  // one state per warp for every row, prefill one per row (its warp's).
  constexpr int kStates = C::kStates;
  const int st0 = WIDE ? 0 : w;
  float* Os = reinterpret_cast<float*>(stages);
  float* Ms = Os + kStates * RB * D;
  float* Ls = Ms + kStates * RB;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float lv = l[hf];
    lv += __shfl_xor_sync(0xffffffffu, lv, 1);
    lv += __shfl_xor_sync(0xffffffffu, lv, 2);
    const int r = st0 * RB + rb + gq + hf * 8;
    if (tq == 0) {
      Ms[r] = m[hf];
      Ls[r] = lv;
    }
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
      Os[r * D + o_col(dt, 2 * tq)] = o[dt][hf * 2];
      Os[r * D + o_col(dt, 2 * tq + 1)] = o[dt][hf * 2 + 1];
    }
  }
  __syncthreads();

  for (int c = tid; c < RB * D; c += kThreads) {
    const int r = c / D, d = c % D;
    const int64_t row = r0 + r;
    if (row >= rows) continue;
    const int64_t i = row / g.group, h = hk * g.group + row % g.group;
    float M = -INFINITY;
#pragma unroll
    for (int v = 0; v < kStates; ++v) M = fmaxf(M, Ms[v * RB + r]);
    float L = 0.f, acc = 0.f;
    if (M != -INFINITY) {
#pragma unroll
      for (int v = 0; v < kStates; ++v) {
        const float wgt = exp2f(Ms[v * RB + r] - M);
        L += Ls[v * RB + r] * wgt;
        acc += Os[(v * RB + r) * D + d] * wgt;
      }
    }
    if constexpr (FP8) acc *= v_scale;
    if (g.splits == 1) {
      if (g.sinks) {
        const float s2 = p.sinks[h] * kLog2e, mn = fmaxf(M, s2);
        const float corr = M == -INFINITY ? 0.f : exp2f(M - mn);
        L = L * corr + exp2f(s2 - mn);
        acc *= corr;
        M = mn;
      }
      T* orow = static_cast<T*>(p.out) + b * g.out_batch + i * g.out_token + h * g.out_head;
      orow[d] = kernels::from_compute<T>(L > 0.f ? acc / L : 0.f);
      if (d == 0 && p.lse != nullptr) p.lse[(b * g.hq + h) * g.sq + i] = L > 0.f ? (M + log2f(L)) * kLn2 : -INFINITY;
    } else {
      const int64_t prow = (int64_t(split) * g.batch + b) * g.sq * g.hq + i * g.hq + h;
      p.partial_out[prow * D + d] = L > 0.f ? acc / L : 0.f;
      if (d == 0) p.partial_lse[prow] = L > 0.f ? M + log2f(L) : -INFINITY;
    }
  }
}

template <class T, class KV, int D, bool WIDE, int TILE>
void launch_kernel(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  using C = Cfg<D, kStages, !std::is_same_v<T, KV>, WIDE, TILE>;
  constexpr auto kernel = paged_mma_kernel<T, KV, D, kStages, WIDE, TILE>;
  opt_in_dynamic_smem(kernel, C::smem_bytes, "cudaFuncSetAttribute(paged attention)");
  const dim3 grid(unsigned(g.splits), unsigned(g.hkv * g.row_groups), unsigned(g.batch));
  kernel<<<grid, C::kThreads, C::smem_bytes, stream>>>(g, p);
  cuda_check(cudaGetLastError(), WIDE ? "paged attention prefill launch" : "paged attention decode launch");
}

template <class T, class KV, bool WIDE, int TILE>
void launch_dim(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  switch (g.d) {
    case 64: return launch_kernel<T, KV, 64, WIDE, TILE>(g, p, stream);
    case 96: return launch_kernel<T, KV, 96, WIDE, TILE>(g, p, stream);
    case 128: return launch_kernel<T, KV, 128, WIDE, TILE>(g, p, stream);
    case 256: return launch_kernel<T, KV, 256, WIDE, TILE>(g, p, stream);
    default: throw Unsupported("paged_attention: head_dim " + std::to_string(g.d) + " (built: 64, 96, 128, 256)");
  }
}

// One cache dtype KV: 128-key tiles where the plan asked for them, which only 16-row blocks over fp8
// caches, or over 16-bit ones at head dim 64, do (a 64-key d128 16-bit tile's bytes per stage); the
// 64-row blocks never do, so they build none.
template <class T, class KV, bool WIDE>
void launch_cache(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  if constexpr (!WIDE) {
    if (g.tile_keys == 2 * kKeysPerTile) {
      if constexpr (!std::is_same_v<T, KV>) return launch_dim<T, KV, WIDE, 2 * kKeysPerTile>(g, p, stream);
      if (g.d == 64) return launch_kernel<T, KV, 64, WIDE, 2 * kKeysPerTile>(g, p, stream);
    }
  }
  launch_dim<T, KV, WIDE, kKeysPerTile>(g, p, stream);
}

// The main kernel for query dtype T and g's cache dtype (the merge of several splits is the caller's).
template <class T, bool WIDE> void launch_main(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  switch (g.cache_dtype) {
    case DType::Float8E4M3: return launch_cache<T, kernels::e4m3, WIDE>(g, p, stream);
    case DType::Float8E5M2: return launch_cache<T, kernels::e5m2, WIDE>(g, p, stream);
    default: return launch_cache<T, T, WIDE>(g, p, stream);
  }
}

template <class T, int D, bool WIDE> int resident() {
  using C = Cfg<D, kStages, false, WIDE>;
  constexpr auto kernel = paged_mma_kernel<T, T, D, kStages, WIDE, kKeysPerTile>;  // (fp8 caches: smaller)
  int blocks = 0;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::smem_bytes) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, C::kThreads, C::smem_bytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return blocks;
}

template <class T, bool WIDE> int resident_blocks(int d) {
  switch (d) {
    case 64: return resident<T, 64, WIDE>();
    case 96: return resident<T, 96, WIDE>();
    case 128: return resident<T, 128, WIDE>();
    case 256: return resident<T, 256, WIDE>();
    default: return 0;
  }
}

}  // namespace

// The 64-row kernels, built per query dtype in paged_prefill_bf16.cu and paged_prefill_f16.cu (files
// of their own, so they compile in parallel with the 16-row ones).
void launch_wide_bf16(const Geometry& g, const Pointers& p, cudaStream_t stream);
void launch_wide_f16(const Geometry& g, const Pointers& p, cudaStream_t stream);
int resident_wide_bf16(int d);
int resident_wide_f16(int d);

}  // namespace baracuda::paged_attention
