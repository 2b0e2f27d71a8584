// The contract between the plan layer (cpp/src/norm.cpp) and the norm kernels: plain C++, no
// CUDA types. select() picks the configurations (register-resident and looped) from the shape
// alone; run() picks between them by pointer alignment, adds the pointers and calls launch().
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "baracuda/dtype.h"
#include "common/knobs.h"

namespace baracuda::norm {

// Resident threads the grids of the backward kernels are sized for (132 SMs x 2048 threads, an
// H100 / H200 SXM). A constant, not a device query: the per-block partial sums of dweight /
// dbias, hence the bits, depend only on the shape, on every device.
constexpr int64_t kResidentThreads = 132 * 2048;
constexpr int64_t kMaxGrid = int64_t(1) << 20;  // forward grids; rows beyond loop (grid-stride)
constexpr int kColredThreads = 256;             // threads of the column-reduction kernel

// Cluster: sm_90; a row split over a thread-block cluster of `cluster` blocks, each holding
// 1/cluster of it (fwd_cluster.cuh; forward: one cluster per row, backward: a persistent grid of
// clusters). The launcher falls back to cluster_fallback_config() on devices without clusters.
enum class Path : int { Registers = 0, Looped = 1, Cluster = 2 };

struct Config {
  Path path = Path::Looped;
  int tpr = 32;       // threads per row: 8 / 16 / 32 (rows share a 128-thread block) or 128..1024
  int items = 1;      // register path: 16-byte vectors per thread per row
  int rows = 1;       // register path, forward: rows a thread group holds at once (loads batched)
  int cluster = 1;    // cluster path: blocks per row (2 / 4 / 8); tpr = threads per block, items per thread
  bool prefetch = false;  // register path, one row per block: the block's next row is copied into
                          // shared memory while this one is reduced and written
  bool specialize = true;  // register path: the operand-specialized kernel where one exists (launch_spec)
  bool regacc = false;    // register path, backward, 16-bit: dweight / dbias accumulated (and a 16-bit
                          // weight held) in registers instead of shared memory
  int param_smem = 0;  // register path, forward, one row per block, operand-specialized (fwd_reg's PM):
                       // 1 = the last parameter (bias, or RMSNorm's weight) held in shared memory on a
                       // persistent grid; 2 = weight / bias copied into a shared-memory ring ahead of use.
                       // Backward cluster path, operand-specialized: 1 = the weight of a block's columns
                       // held in shared memory (bwd_cluster's WS)
  bool xs = false;    // register path, backward: x's row in shared memory (grad_out in registers),
                      // dweight / dbias from the column-reduction kernel
  int vec = 1;        // elements per vector (looped path: 1, or 16 / sizeof(T) when aligned)
  int threads = 128;  // block size
  int64_t grid = 0;   // blocks of the row kernel
  int64_t partials = 0;        // backward: rows of the [partials, H] dweight / dbias workspace
  int64_t rows_per_chunk = 0;  // backward, column-reduction kernel: rows per block
  int colred_vec = 1;          // backward, column-reduction kernel: columns per thread
  // backward, the finish of dweight / dbias: slices of the partial rows per block (0: finish_params'
  // rule); its programmatic (PDL) launch: 0 off, 1 on, 2 on with the row kernel before it
  // triggering the launch as it starts (pdl_trigger). H100 LayerNorm bf16 spans, 1 / 2 / 0:
  // 32768 x 4096 294.1 / 284.4 / 286.6 us, 262144 x 128 80.1 / 78.6 / 81.5, 2048 x 65536 and
  // 4096 x 16384 within 1 us (2 / 1 ahead of 0 by 1-2 us)
  int finish_ty = 0, finish_pdl = 2;
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int vec_width(DType t) { return int(16 / dtype_size(t)); }
inline int compute_size(DType t) { return t == DType::Float64 ? 8 : 4; }

// The register kernels that are instantiated (the launcher's switch uses the same tests).
// Forward: a thread holds rows x items packed 16-byte vectors of x's dtype (at most 8 = 32
// registers; 1024-thread blocks hold one row of up to 8 vectors per thread).
constexpr bool fwd_supported(int tpr, int items, int rows) {
  if (tpr == 8 || tpr == 16) return items == 1 && (rows == 1 || rows == 2 || rows == 4);
  if (tpr == 32 || tpr == 128 || tpr == 256 || tpr == 512)
    return items >= 1 && items <= 4 && (rows == 1 || rows == 2) && items * rows <= 8;
  if (tpr == 1024) return items >= 1 && items <= 8 && rows == 1;
  return false;
}
// The forward kernels with a prefetched next row (one row per block, no residual; fwd_reg's PF):
// the long-row shapes (16-bit H = 8192 .. 65536, f32 up to 32768).
constexpr bool fwd_prefetch_supported(int tpr, int items) {
  return (tpr == 256 && items == 4) || (tpr == 512 && (items == 2 || items == 4)) ||
         (tpr == 1024 && (items == 4 || items == 8));
}
// The forward kernels with parameters through shared memory (fwd_reg's PM; 16-bit, operand-
// specialized, one row per block): the 1024 x 8 shape of H = 65536 (PM 1 or 2), and 512 x 4 /
// 256 x 4 (H = 16384 / 8192; the ring, PM 2, only).
constexpr bool fwd_param_smem_supported(int tpr, int items, int rows, bool prefetch) {
  return ((tpr == 1024 && items == 8) || (tpr == 512 && items == 4) || (tpr == 256 && items == 4)) && rows == 1 &&
         !prefetch;
}
// The ring of PM = 2: slots of output vectors, each a weight and a bias vector per thread.
constexpr int kParamRing = 4;
constexpr int64_t fwd_param_ring_smem(int tpr) { return int64_t(kParamRing) * 2 * tpr * 16; }
// Its dynamic shared memory: the block's next row, tpr x items 16-byte vectors.
constexpr int64_t fwd_prefetch_smem(int tpr, int items) { return int64_t(tpr) * items * 16; }
// Where the prefetching kernels are the default (measured, docs/benchmarks.md; bench_norm.py --sweep):
// the 16-bit backward at 1024 vectors (H = 8192, 512 x 2: H200 RMSNorm 139 vs 143 us, LayerNorm
// 158 vs 160 us at 8192 rows; H100 151 vs 158, 168 vs 172) and, operand-specialized, at 2048
// (H = 16384, 512 x 4: RMSNorm 124 vs 126 us, LayerNorm 143 vs 149 us at 4096 rows). Elsewhere
// they measured no faster (backward at 512 vectors) or slower (the forward at 8192..65536).
// The small groups of 16 x 1 (9..16 vectors: bf16 H = 72..128) prefetch into registers: H200
// bf16 262144 x 128, LayerNorm 61.8 vs 65.3 us (78% vs 74% of copy), RMSNorm 56.5 vs 59.0 us;
// at 32 x 2 (H = 512) it lost (65.6 vs 62.4, 60.7 vs 58.5 us: spills at the 72-register budget).
inline bool prefetch_default(bool backward, DType t, bool layer, int64_t vectors) {
  // (LayerNorm at 2048 vectors: 127 vs 129 us without it, H200, session 14, once the weight sat
  // in registers; its two accumulator rows leave one 512 x 4 block per SM either way.)
  return backward && dtype_size(t) == 2 &&
         (vectors == 1024 || (vectors == 2048 && !layer) || (vectors > 8 && vectors <= 16));
}
// Where the register-accumulator backward is the default (measured, bench_norm.py --sweep): the
// 16-bit LayerNorm at 512 vectors (H = 4096, 128 x 4: H200 254 vs 286 us for the shared-memory
// 256 x 2, 320 us for the shared-memory 128 x 4; its two accumulator rows were what kept 128 x 4
// off). RMSNorm there gains nothing (246 vs 242 us), and at 1024 vectors 512 x 2 loses (one
// 512-thread block per SM at 113 registers: 154 / 176 vs 139 / 158 us).
inline bool regacc_default(DType t, bool layer, int64_t vectors) {
  return layer && dtype_size(t) == 2 && vectors == 512;
}
// Blocks per SM of the prefetching kernel on an H100 / H200 (228 KB of shared memory per SM, 1 KB
// reserved per block), for its persistent grid.
inline int64_t fwd_prefetch_resident_blocks(int tpr, int items) {
  const int64_t by_threads = 2048 / tpr;
  const int64_t regs = 48 + 4 * items;  // fwd_min_blocks' budget for 256..1024-thread blocks
  const int64_t by_regs = std::max<int64_t>(1, 65536 / (regs * tpr));
  const int64_t by_smem = (228 * 1024) / (fwd_prefetch_smem(tpr, items) + 1024 + 512);
  return std::max<int64_t>(1, std::min({by_threads, by_regs, by_smem}));
}

// Backward: grad_out and x packed in registers (2 x items vectors), the dweight / dbias
// accumulators in shared memory: items <= 4 (1 for 1024-thread blocks); with xs (x's row in
// shared memory, dweight / dbias from the column-reduction kernel), 1024-thread blocks hold up to
// 8 vectors of grad_out per thread.
constexpr bool bwd_supported(int tpr, int items, bool xs) {
  if (xs) return tpr == 1024 && items >= 2 && items <= 8;
  if (tpr == 8 || tpr == 16 || tpr == 1024) return items == 1;
  if (tpr == 32 || tpr == 128 || tpr == 256 || tpr == 512) return items >= 1 && items <= 4;
  return false;
}
inline int rows_per_block(int tpr) { return tpr > 32 ? 1 : 128 / tpr; }
// The backward kernels with a prefetched next row (bwd_reg's PF, without xs): block groups
// through shared memory, the small groups of H = 128 and 512 (16 x 1, 32 x 2) in registers.
constexpr bool bwd_prefetch_supported(int tpr, int items) {
  return (tpr == 128 && items == 4) || (tpr == 256 && (items == 2 || items == 4)) ||
         (tpr == 512 && items >= 1 && items <= 4) || (tpr == 16 && items == 1) || (tpr == 32 && items == 2);
}
// The backward kernels with register accumulators (bwd_reg's RA: 16-bit T without xs, at most
// 4 x 8 accumulated columns per thread): block groups (a subset of the prefetching shapes) and
// the small groups of H = 128 and 512 (16 x 1, 32 x 2), whose shared accumulators were a
// read-modify-write per row and gradient.
constexpr bool bwd_regacc_supported(int tpr, int items) {
  return (tpr == 128 && items == 4) || (tpr == 256 && items == 2) || (tpr == 512 && items == 2) ||
         (tpr == 16 && items == 1) || (tpr == 32 && items == 2);
}
// Its launch bounds' blocks per SM: the accumulators (up to 2 x items x 8) and the packed weight
// (items x 4) on top of the plain kernel's budget (block groups); small groups (128-thread
// blocks) get 56 + 12 per item (the plain kernel: 56 + 8).
constexpr int bwd_regacc_min_blocks(int tpr, int items) {
  const int b = tpr > 32 ? 65536 / ((48 + 28 * items) * tpr) : 65536 / ((56 + 12 * items) * 128);
  return b < 1 ? 1 : (b > 16 ? 16 : b);
}
// Its extra dynamic shared memory: the next row of grad_out and x (none for small groups: registers).
constexpr int64_t bwd_prefetch_smem(int tpr, int items) { return tpr > 32 ? int64_t(2) * tpr * items * 16 : 0; }

// The cluster forward kernels that are instantiated (blocks per row, threads per block, 16-byte
// vectors per thread), in the order of preference among equally padded candidates. A row of up
// to cs x tpr x items vectors; block rank r holds vectors [r, r + 1) x tpr x items.
struct ClusterShape { int cs, tpr, items; };
constexpr ClusterShape kClusterShapes[] = {
    {2, 256, 4}, {4, 256, 2}, {2, 512, 2},  // 2048 vectors (H = 16384 for 16-bit types)
    {4, 256, 4}, {8, 256, 2},               // 4096 (f32 16384, 16-bit 32768)
    {4, 512, 4}, {8, 256, 4}, {8, 512, 2},  // 8192 (16-bit 65536, f32 32768, f64 16384)
    {8, 512, 4},                            // 16384 (f32 65536)
};
// Whether (cs, tpr, items) is one of `shapes` (the instantiated forward or backward kernels).
template <size_t N> constexpr bool shape_listed(const ClusterShape (&shapes)[N], int cs, int tpr, int items) {
  for (const ClusterShape& c : shapes)
    if (c.cs == cs && c.tpr == tpr && c.items == items) return true;
  return false;
}
constexpr bool cluster_supported(int cs, int tpr, int items) { return shape_listed(kClusterShapes, cs, tpr, items); }
// Rows of at least this many elements take the cluster path by default (forward, sm_90,
// 16-byte aligned): below it a block-resident row already overlaps with other blocks' rows.
constexpr int64_t kClusterMinH = 16384;

// Backward cluster kernels (fwd_cluster.cuh, bwd_cluster): rows of more than 2048 vectors, whose
// dweight / dbias accumulators no longer fit one block's shared memory. A row is split over a
// cluster of cs blocks of 256 threads (items vectors per thread); a persistent grid of clusters
// loops over rows, each block accumulating dweight / dbias of its column share in registers, so
// grad_out and x are read once (the xs path re-reads both in the column-reduction kernel).
constexpr ClusterShape kBwdClusterShapes[] = {
    {4, 256, 3}, {4, 256, 4},  // 3072 / 4096 vectors (16-bit H <= 32768, f32 <= 16384)
    {8, 256, 3}, {8, 256, 4},  // 6144 / 8192 vectors (16-bit H <= 65536, f32 <= 32768)
};
constexpr bool bwd_cluster_supported(int cs, int tpr, int items) {
  return shape_listed(kBwdClusterShapes, cs, tpr, items);
}
// Blocks of the persistent backward cluster grid by default (clusters = this / cs): below the
// 2 x 132 blocks an H100 / H200 holds (2 per SM: 64 KB of shared memory, <= 128 registers), with
// room for GPCs whose SM count is not a multiple of the cluster size, so every cluster is
// resident at once (a second wave would double the time). A constant, not a device query: the
// [clusters, H] partial sums, hence the bits, depend only on the shape.
constexpr int64_t kBwdClusterBlocks = 192;
// The backward cluster path starts above the rows the register kernel with shared-memory
// accumulators holds (512 threads x 4 vectors).
constexpr int64_t kBwdClusterMinVectors = 2048;

// The column-reduction partition (dweight / dbias partials of the looped and xs paths):
// blocks of kColredThreads x vec columns, rows cut into chunks so that ~2112 blocks run.
inline void colred_partition(Config& c, int64_t H, int64_t rows, int vec) {
  c.colred_vec = vec;
  const int64_t col_blocks = std::max<int64_t>(1, ceil_div(H, int64_t(kColredThreads) * vec));
  const int64_t chunks = std::min(rows, std::max<int64_t>(1, ceil_div(2112, col_blocks)));
  c.rows_per_chunk = chunks > 0 ? ceil_div(rows, chunks) : 0;
  c.partials = chunks > 0 ? ceil_div(rows, c.rows_per_chunk) : 0;
}

// Blocks per SM the register backward kernel (without xs) is compiled for (its
// __launch_bounds__): a register budget plus 8 per item (grad_out and x packed); 48 for 256 /
// 512-thread blocks (2 items: 64 registers, 2 x 512 / 4 x 256 threads per SM instead of 1 x 512 /
// 3 x 256 at 73), 56 for smaller ones.
constexpr int bwd_min_blocks(int tpr, int items) {
  const int threads = tpr > 32 ? tpr : 128;
  const int b = 65536 / (((threads >= 256 ? 48 : 56) + 8 * items) * threads);
  return b < 1 ? 1 : (b > 16 ? 16 : b);
}

// Blocks of the register backward kernel (without xs) that are resident per SM on an H100 /
// H200 (a constant of the configuration, not a device query, so that the partial sums depend
// only on the shape): the least of the thread limit, the register budget of its launch bounds
// and the shared memory of its dweight / dbias accumulators (both for LayerNorm, 228 KB per SM,
// 1 KB reserved per block, plus the static reduction slots).
inline int64_t bwd_resident_blocks(const Config& c, DType t, bool layer) {
  const int64_t threads = c.tpr > 32 ? c.tpr : 128;
  const int64_t by_threads = 2048 / threads;
  const int64_t by_regs = c.regacc ? bwd_regacc_min_blocks(c.tpr, c.items) : bwd_min_blocks(c.tpr, c.items);
  const int64_t acc =
      (c.regacc && rows_per_block(c.tpr) == 1 ? 0 : int64_t(rows_per_block(c.tpr)) * c.tpr * c.items * c.vec * compute_size(t) * (layer ? 2 : 1)) +
      (c.prefetch ? bwd_prefetch_smem(c.tpr, c.items) : 0);
  const int64_t by_smem = (228 * 1024) / (acc + 1024 + 2 * 64 * compute_size(t));
  return std::max<int64_t>(1, std::min({by_threads, by_regs, by_smem}));
}

// Forward: one block per (rows_per_block x rows) rows, up to kMaxGrid (grid-stride beyond).
// Backward (persistent; every block writes one row of partial sums): at most one wave of
// resident blocks on a 132-SM device, so that no block runs in a partly filled second wave and
// the [partials, H] workspace stays small.
inline void finish_grid(Config& c, bool backward, int64_t rows, DType t = DType::Float32, bool layer = false) {
  c.threads = c.tpr > 32 ? c.tpr : 128;
  const int64_t rpb = int64_t(rows_per_block(c.tpr)) * c.rows;
  const int64_t need = ceil_div(rows, rpb);
  if (!backward) { c.grid = std::min(need, kMaxGrid); return; }
  const int64_t per_sm = c.path == Path::Registers && !c.xs ? bwd_resident_blocks(c, t, layer) : kResidentThreads / 132 / c.threads;
  c.grid = std::min(need, std::max<int64_t>(1, 132 * per_sm));
}

// A tuning override for the register path, from an environment variable such as
// BARACUDA_NORM_CFG="tpr=256,items=2,rows=2" (forward) or BARACUDA_NORM_BWD_CFG="tpr=1024,items=8,xs=1".
// Zero fields are "not given". Invalid / non-fitting overrides are ignored by register_config.
struct Override {
  int tpr = 0, items = 0, rows = 0, xs = -1;
  int cluster = 0;   // > 1 asks for the cluster path (with tpr, items); 1 forbids it
  int clusters = 0;  // backward cluster path: clusters of the persistent grid (0: the default)
  int prefetch = -1; // register path: 1 / 0 asks for / forbids the prefetching kernel
  int regacc = -1;   // register path, backward: 1 / 0 asks for / forbids register accumulators
  int spec = -1;     // register path: 0 forbids the operand-specialized kernels
  int pshared = -1;  // parameters through shared memory (Config::param_smem): forward 1 = the last one
                     // resident, 2 = the ring; backward cluster 0 forbids the weight in shared memory
  int fty = 0, fpdl = -1;  // backward: the dweight / dbias finish (Config::finish_*)
  bool any() const {
    return tpr || items || rows || xs >= 0 || cluster || clusters || prefetch >= 0 || regacc >= 0 || spec >= 0 ||
           pshared >= 0 || fty || fpdl >= 0;
  }
  // The finish knobs onto a backward configuration (whichever path it is).
  void apply_finish(Config& c) const {
    if (fty) c.finish_ty = fty;
    if (fpdl >= 0) c.finish_pdl = fpdl;
  }
};
inline Override parse_override(const std::vector<Knob>& knobs) {
  Override o;
  for (const Knob& k : knobs) {
    const int v = int(k.num());
    if (k.key == "tpr" || k.key == "threads") o.tpr = v;
    else if (k.key == "items") o.items = v;
    else if (k.key == "rows") o.rows = v;
    else if (k.key == "xs") o.xs = v;
    else if (k.key == "cluster") o.cluster = v;
    else if (k.key == "clusters") o.clusters = v;
    else if (k.key == "prefetch") o.prefetch = v;
    else if (k.key == "regacc") o.regacc = v;
    else if (k.key == "spec") o.spec = v;
    else if (k.key == "pshared") o.pshared = v;
    else if (k.key == "fty") o.fty = v;
    else if (k.key == "fpdl") o.fpdl = v;
  }
  return o;
}

// The start of both cluster configurations: the cluster path with no shape yet (cluster = 1) and
// nv, the row's 16-byte vectors; false when the row is not whole vectors or there are no rows.
inline bool cluster_config_start(Config& c, DType t, int64_t H, int64_t rows, int64_t& nv) {
  c.path = Path::Cluster;
  c.vec = vec_width(t);
  c.cluster = 1;
  if (H <= 0 || H % c.vec != 0 || rows <= 0) return false;
  nv = H / c.vec;
  return true;
}

// The cluster configuration (forward): the given (cs, tpr, items) when it is instantiated and
// fits the row, else (cs = 0) the least padded instantiated shape, ties to the earlier in
// kClusterShapes. A shape fits when it holds the row and pads less than one block's share (at
// most the last block is partly idle). cluster = 1 in the result: no shape fits.
inline Config cluster_config(DType t, int64_t H, int64_t rows, int cs = 0, int tpr = 0, int items = 0) {
  Config c;
  int64_t nv = 0;
  if (!cluster_config_start(c, t, H, rows, nv)) return c;
  auto fits = [&](const ClusterShape& s) {
    const int64_t share = int64_t(s.tpr) * s.items, cap = share * s.cs;
    return cap >= nv && cap - nv < share;
  };
  int64_t best = -1;
  for (const ClusterShape& s : kClusterShapes) {
    if (cs && !(s.cs == cs && s.tpr == tpr && s.items == items)) continue;
    if (!fits(s)) continue;
    const int64_t waste = int64_t(s.cs) * s.tpr * s.items - nv;
    if (best < 0 || waste < best) {
      best = waste;
      c.cluster = s.cs; c.tpr = s.tpr; c.items = s.items;
    }
  }
  // One cluster per row (the hardware overlaps one cluster's reductions with another's loads),
  // the grid within the 2^31 - 1 blocks of a launch (a bound no real tensor of such rows reaches).
  if (best < 0 || rows > ((int64_t(1) << 31) - 1) / c.cluster) {
    c.cluster = 1;
    return c;
  }
  c.threads = c.tpr;
  c.grid = rows * c.cluster;
  return c;
}

// The persistent grid of a backward cluster configuration: `clusters` clusters (at most one per
// row), partials = clusters (one [H] row of dweight / dbias partial sums per cluster). The plan
// sets it to the clusters resident at once on its device (bwd_cluster_resident) unless a
// `clusters` knob asks otherwise.
inline void set_bwd_clusters(Config& c, int64_t clusters, int64_t rows) {
  const int64_t g = std::max<int64_t>(1, std::min<int64_t>({clusters, rows, int64_t(65535)}));
  c.grid = g * c.cluster;
  c.partials = g;
}

// The backward cluster configuration: the given (cs, tpr, items) when it is instantiated and holds
// the row, else (cs = 0) the instantiated shape of least capacity that holds it, ties to the
// smaller cluster. cluster = 1 in the result: none holds the row. The grid: `clusters` clusters
// (default kBwdClusterBlocks / cs, the grid of a plan made without a device), each looping over
// rows c, c + clusters, ... (set_bwd_clusters).
inline Config bwd_cluster_config(DType t, int64_t H, int64_t rows, int cs = 0, int tpr = 0, int items = 0,
                                 int clusters = 0) {
  Config c;
  int64_t nv = 0;
  if (!cluster_config_start(c, t, H, rows, nv)) return c;
  int64_t best = -1;
  for (const ClusterShape& s : kBwdClusterShapes) {
    if (cs && !(s.cs == cs && s.tpr == tpr && s.items == items)) continue;
    const int64_t cap = int64_t(s.cs) * s.tpr * s.items;
    if (cap < nv) continue;
    if (best < 0 || cap < best) {
      best = cap;
      c.cluster = s.cs; c.tpr = s.tpr; c.items = s.items;
    }
  }
  if (best < 0) return c;
  c.threads = c.tpr;
  set_bwd_clusters(c, clusters > 0 ? clusters : kBwdClusterBlocks / c.cluster, rows);
  return c;
}

// The register-resident configuration: the whole row in registers (x's row in shared memory
// for the xs backward), one read of each input and one write of each output. `ok` is false
// when the row does not fit (or H is not a multiple of the vector width); the looped path
// takes it then.
inline Config register_config(DType t, bool layer, bool backward, int64_t H, int64_t rows, bool* ok,
                              const Override& ov = Override{}, bool allow_cluster = true, bool residual = false) {
  Config c;
  c.path = Path::Registers;
  c.vec = vec_width(t);
  *ok = false;
  if (H <= 0 || H % c.vec != 0) return c;
  const int64_t nv = H / c.vec;
  if (!backward && allow_cluster && ov.cluster != 1) {
    // An explicit tpr / items without `cluster` keeps meaning the one-block register kernel.
    // An override that does not exist or does not fit gives the default, as for the other knobs.
    const bool asked = ov.cluster > 1 && ov.tpr && ov.items;
    Config cc;
    if (asked) cc = cluster_config(t, H, rows, ov.cluster, ov.tpr, ov.items);
    // Measured (H200 bf16 sweep, docs/benchmarks.md): without a residual the one-block kernel wins
    // at H = 16384 (2048 vectors, 512 x 4 at 64 registers: RMSNorm 75 vs 93 us, LayerNorm 84 vs
    // 109 us at 4096 rows) and at 65536 (RMSNorm 160 vs 204 us, LayerNorm 218 vs 246 us); the
    // cluster wins with a residual (LayerNorm 341 vs 441 us at 65536) and takes rows a single
    // block cannot hold (> 1024 x 8 vectors) always.
    const bool prefer = residual || (nv > 2048 && nv <= 4096) || nv > 8192;
    if (cc.cluster <= 1 && (asked || (!ov.tpr && !ov.items && prefer)) && H >= kClusterMinH)
      cc = cluster_config(t, H, rows);
    if (cc.cluster > 1) {
      cc.specialize = ov.spec != 0;
      *ok = true;
      return cc;
    }
  }
  if (backward && allow_cluster && ov.cluster != 1) {
    // Rows beyond what one block holds with its dweight / dbias accumulators (> 512 x 4 vectors):
    // the cluster kernel (sm_90). An explicit tpr / items without `cluster` keeps meaning the
    // one-block register kernel; an override that does not exist or does not hold the row gives
    // the default.
    const bool asked = ov.cluster > 1 && ov.tpr && ov.items;
    Config cc;
    if (asked) cc = bwd_cluster_config(t, H, rows, ov.cluster, ov.tpr, ov.items, ov.clusters);
    if (cc.cluster <= 1 && (asked || (!ov.tpr && !ov.items)) && nv > kBwdClusterMinVectors)
      cc = bwd_cluster_config(t, H, rows, 0, 0, 0, ov.clusters);
    if (cc.cluster > 1) {
      cc.specialize = ov.spec != 0;
      // The weight of a block's columns in shared memory (the specialized kernels; pshared=0
      // forbids it).
      cc.param_smem = cc.specialize && dtype_size(t) == 2 && ov.pshared != 0 ? 1 : 0;
      *ok = true;
      return cc;
    }
  }
  auto fits = [&](int tpr, int items) { return int64_t(tpr) * items >= nv && (tpr <= 32 || int64_t(tpr) * items - nv < tpr); };
  bool chosen = false;
  if (ov.any() && ov.tpr && ov.items && ov.cluster <= 1) {
    const int r = backward ? 1 : (ov.rows ? ov.rows : 1);
    const bool xs = backward && ov.xs > 0;
    const bool sup = backward ? bwd_supported(ov.tpr, ov.items, xs) : fwd_supported(ov.tpr, ov.items, r);
    if (sup && fits(ov.tpr, ov.items)) {
      c.tpr = ov.tpr; c.items = ov.items; c.rows = r; c.xs = xs;
      chosen = true;
    }
  }
  if (!chosen) {
    if (nv <= 8) { c.tpr = 8; c.items = 1; }
    else if (nv <= 16) { c.tpr = 16; c.items = 1; }
    else if (nv <= 32 * (backward ? 2 : 4)) { c.tpr = 32; c.items = int(ceil_div(nv, 32)); }
    else {
      // Least padding, then items closest to 2, then fewer threads.
      int64_t best = -1, best_d = 0;
      for (int tpr : {128, 256, 512, 1024})
        for (int items = 1; items <= 8; ++items) {
          const bool xs = backward && tpr == 1024 && items >= 2;
          if (backward ? !bwd_supported(tpr, items, xs) : !fwd_supported(tpr, items, 1)) continue;
          if (int64_t(tpr) * items < nv) continue;
          const int64_t waste = int64_t(tpr) * items - nv;
          const int64_t d = std::abs(items - 2);
          if (best < 0 || waste < best || (waste == best && d < best_d)) {
            best = waste; best_d = d; c.tpr = tpr; c.items = items; c.xs = xs;
          }
        }
      if (best < 0 || best >= int64_t(c.tpr)) return c;  // a whole idle vector column: loop instead
      // Measured exceptions (H200 sweep with the 64-register budget of 256 / 512-thread blocks,
      // bf16; f16 has the same vectors and registers; bench_norm.py --sweep):
      //   512 vectors (H = 4096, 32768 rows): forward 256 x 2 with two rows (LayerNorm 153 vs
      //     158 us for 128 x 4); backward 128 x 4 (RMSNorm 240 vs 257 us for 256 x 2; LayerNorm
      //     with register accumulators, regacc_default: 254 vs 286 us).
      //   1024 vectors (H = 8192, 8192 rows): forward 256 x 4 (RMSNorm 72 vs 79 us, LayerNorm 79 vs
      //     85 us for 512 x 2 with two rows); backward 512 x 2 with the next row prefetched
      //     (prefetch_default; H200 RMSNorm 139 vs 152 us, LayerNorm 158 vs 174 us for 256 x 4).
      //   2048 vectors (H = 16384, 4096 rows): 512 x 4 (forward without a residual: RMSNorm 75 vs
      //     112 us for 1024 x 2; backward without xs: RMSNorm 155 vs 243 us for 1024 x 2 xs,
      //     LayerNorm 174 vs 256 us).
      if (dtype_size(t) == 2) {
        if (nv == 512 && backward) { c.tpr = 128; c.items = 4; c.xs = false; }
        if (nv == 1024 && !backward) { c.tpr = 256; c.items = 4; c.xs = false; }
        if (nv == 2048) { c.tpr = 512; c.items = 4; c.xs = false; }
      }
    }
    // Forward: two rows per thread group (loads of both issued before either reduction) when
    // there are rows for at least ~4 waves of groups; not for a warp per row, where one row per
    // warp measured faster (H100, [65536, 512] bf16 LayerNorm: 51 vs 58 us).
    if (!backward) {
      const int64_t groups = kResidentThreads / c.tpr;
      if (fwd_supported(c.tpr, c.items, 2) && c.items <= 2 && c.tpr > 32 && rows >= 4 * groups) c.rows = 2;
      // Groups of 8 / 16 threads hold four rows at once without a residual (H200 bf16 262144 x
      // 128: RMSNorm 39 vs 47 us, LayerNorm 42 vs 53 us; with a residual 73 vs 69 us, slower).
      else if (c.tpr < 32 && !residual && fwd_supported(c.tpr, c.items, 4) && rows >= 4 * groups) c.rows = 4;
    }
    if (ov.rows && !backward && fwd_supported(c.tpr, c.items, ov.rows)) c.rows = ov.rows;
  }
  // The kernels that prefetch the block's next row into shared memory (forward: one row per block,
  // no residual, a persistent grid; backward: without xs) where they measured faster, or as asked.
  if (!backward && !residual && c.rows == 1 && fwd_prefetch_supported(c.tpr, c.items))
    c.prefetch = ov.prefetch >= 0 ? ov.prefetch > 0 : prefetch_default(false, t, layer, nv);
  if (backward && !c.xs && bwd_prefetch_supported(c.tpr, c.items))
    c.prefetch = ov.prefetch >= 0 ? ov.prefetch > 0 : prefetch_default(true, t, layer, nv);
  if (backward && !c.xs && dtype_size(t) == 2 && bwd_regacc_supported(c.tpr, c.items))
    c.regacc = ov.regacc >= 0 ? ov.regacc > 0 : regacc_default(t, layer, nv);
  if (ov.spec == 0) c.specialize = false;
  // Parameters through shared memory (16-bit forward, no residual, the operand-specialized 1024 x 8
  // / 512 x 4 / 256 x 4 kernels; select drops it for other operands): the ring (2) by default.
  // H100 bf16, LayerNorm / RMSNorm: 2048 x 65536 189.1 / 185.2 us vs 196.5 / 185.6 (95.5% vs 91.4%
  // of copy for LayerNorm); 4096 x 16384 93.2 / 93.1 vs 95.3 / 94.3; 8192 x 8192 93.2 / 93.2 vs
  // 94.9 / 93.6. The resident last parameter (1; 1024 x 8 only) measured 198.1 / 197.1 us.
  if (!backward && !residual && dtype_size(t) == 2 && c.specialize &&
      fwd_param_smem_supported(c.tpr, c.items, c.rows, c.prefetch)) {
    if (ov.pshared == 0 || ov.pshared == 2 || (ov.pshared == 1 && c.tpr == 1024)) c.param_smem = ov.pshared;
    else c.param_smem = 2;
  }
  *ok = true;
  finish_grid(c, backward, rows, t, layer);
  if (c.prefetch && !backward) c.grid = std::min(rows, 132 * fwd_prefetch_resident_blocks(c.tpr, c.items));
  if (c.param_smem == 1) c.grid = std::min(rows, int64_t(132));  // one 1024-thread block per SM
  if (backward) {
    if (c.xs) {
      c.grid = std::min(rows, int64_t(132 * 2));
      colred_partition(c, H, rows, c.vec);
    } else {
      c.partials = c.grid;
    }
  }
  return c;
}

// The looped configuration: any H, any alignment. Forward reads the row two (RMSNorm) or three
// (LayerNorm) times, the re-reads mostly from L2; backward reads grad_out and x twice for
// grad_x, and once more in the column-reduction kernel for dweight / dbias.
inline Config looped_config(DType t, bool backward, int64_t H, int64_t rows, bool vectorized) {
  Config c;
  c.path = Path::Looped;
  c.vec = vectorized ? vec_width(t) : 1;
  c.tpr = H <= 1024 ? 32 : 512;
  c.items = 1;
  finish_grid(c, false, rows);
  if (backward) colred_partition(c, H, rows, c.vec);
  return c;
}

// What a cluster configuration runs on a device without thread-block clusters (before sm_90): the
// register kernel when the row fits one block, else the vectorized loop (the cluster path was
// chosen for 16-byte aligned operands only). Backward: the xs register kernel or the loop, whose
// partials (the column-reduction partition) are those of looped_config, which the plan's
// workspace covers.
inline Config cluster_fallback_config(DType t, bool layer, int64_t H, int64_t rows, bool backward = false) {
  bool ok = false;
  const Config c = register_config(t, layer, backward, H, rows, &ok, Override{}, false);
  return ok ? c : looped_config(t, backward, H, rows, true);
}

// Dynamic shared memory of the xs backward kernel: x's row, TPR x items 16-byte vectors.
inline int64_t xs_smem_bytes(const Config& c) { return int64_t(c.tpr) * c.items * 16; }

// One launch (forward) or launch sequence (backward). Row tensors are [rows, H] with unit column
// stride and a row stride in elements; a null pointer means absent.
struct NormLaunch {
  bool layer = false;      // LayerNorm (else RMSNorm)
  bool backward = false;
  DType dtype = DType::Float32;  // x, y, residual, residual_out, grad_out, grad_x, grad_residual
  bool w_f32 = false, b_f32 = false;  // weight / bias (and their gradients) in f32, else in dtype
  bool save_stats = false;
  double eps = 0;
  int64_t rows = 0, H = 0;
  Config cfg;
  // forward
  const void* x = nullptr; int64_t x_rs = 0;
  const void* res = nullptr; int64_t res_rs = 0;
  void* y = nullptr; int64_t y_rs = 0;
  void* res_out = nullptr; int64_t res_out_rs = 0;
  const void* w = nullptr;
  const void* b = nullptr;
  void* mean = nullptr;  // stats: f32 (f64 for f64), contiguous [rows]
  void* rstd = nullptr;
  // backward (x, w, mean, rstd as above; mean / rstd are inputs there)
  const void* gy = nullptr; int64_t gy_rs = 0;
  void* gx = nullptr; int64_t gx_rs = 0;
  const void* gres = nullptr; int64_t gres_rs = 0;  // gradient of residual_out, added to grad_x
  void* gw = nullptr;   // grad_weight [H] (computed when non-null)
  void* gb = nullptr;   // grad_bias [H]
  void* workspace = nullptr;  // [partials, H] for gw, then (256-byte aligned) for gb
  int64_t bias_partial_offset = 0;  // bytes from workspace to gb's partials
};

// Operand specializations of the register kernels: what a launch passes is fixed at compile
// time, so the per-element code carries no presence / dtype branches (the kernels are
// issue-bound). kSpecGeneric reads everything from the NormLaunch at run time. Forward: no
// residual; backward: grad_weight (and for LayerNorm grad_bias) asked, no grad_residual.
// (The cluster forward with a residual measured slower specialized: H200 bf16 16384 / 65536
// fused rows 180 / 362 us against 149 / 315 us generic; it stays generic.)
enum : int {
  kSpecGeneric = 0,
  kSpecRmsWeight = 1,       // RMSNorm with a weight of x's dtype, no bias
  kSpecLayerWeightBias = 2  // LayerNorm with a weight and a bias of x's dtype
};
// The rule on the operands alone (16-bit x, specialization allowed): w_same = a weight of x's
// dtype (backward: and grad_weight asked), bias / b_same = a bias (backward: grad_bias asked) and
// of x's dtype, residual = a residual (backward: grad_residual). launch_spec applies it to a
// launch; select applies it to a descriptor (the kernels that exist only specialized).
inline int operand_spec(bool layer, bool w_same, bool bias, bool b_same, bool residual) {
  if (!w_same || residual) return kSpecGeneric;
  if (layer) return bias && b_same ? kSpecLayerWeightBias : kSpecGeneric;
  return bias ? kSpecGeneric : kSpecRmsWeight;
}
inline int launch_spec(const NormLaunch& L) {
  if (!L.cfg.specialize || dtype_size(L.dtype) != 2) return kSpecGeneric;
  const bool w_same = L.w && !L.w_f32;
  if (!L.backward) return operand_spec(L.layer, w_same, L.b != nullptr, !L.b_f32, L.res != nullptr);
  return operand_spec(L.layer, w_same && L.gw, L.gb != nullptr, true, L.gres != nullptr);
}
// The shapes with specialized kernels (16-bit T; the measured defaults at the benchmarked and
// common LLM widths: H = 128, 512, 2048, 4096, 8192, 16384, 65536).
constexpr bool fwd_spec_shape(int tpr, int items, int rows, bool prefetch) {
  return !prefetch && ((tpr == 16 && items == 1 && rows == 4) || (tpr == 32 && items == 2 && rows == 1) ||
                       (tpr == 128 && items == 2 && rows == 2) || (tpr == 256 && items == 2 && rows == 2) ||
                       (tpr == 256 && items == 4 && rows == 1) || (tpr == 512 && items == 4 && rows == 1) ||
                       (tpr == 1024 && items == 8 && rows == 1));
}
// The backward cluster shape with specialized kernels: the persistent grid of 8 x 256 x 4 (the
// 16-bit default at H = 65536; H200 bf16 2048 rows: RMSNorm 410 vs 495 us, LayerNorm 439 vs 513).
constexpr bool bwd_cluster_spec_shape(int cs, int tpr, int items) { return cs == 8 && tpr == 256 && items == 4; }
constexpr bool bwd_spec_shape(int tpr, int items, bool prefetch, bool regacc) {
  return (!prefetch && !regacc &&
          ((tpr == 16 && items == 1) || (tpr == 32 && items == 2) || (tpr == 128 && items == 2) ||
           (tpr == 128 && items == 4) || (tpr == 512 && items == 4))) ||
         (regacc && !prefetch && ((tpr == 128 && items == 4) || (tpr == 16 && items == 1) || (tpr == 32 && items == 2))) ||
         (prefetch && !regacc && tpr == 512 && items == 2) ||
         (prefetch && !regacc && tpr == 512 && items == 4) ||
         (prefetch && ((tpr == 16 && items == 1) || (tpr == 32 && items == 2)));
}

// Bytes of one [partials, H] block of partial sums, 256-byte aligned.
inline int64_t partial_bytes(DType t, int64_t partials, int64_t H) {
  return (partials * H * compute_size(t) + 255) / 256 * 256;
}

void launch(const NormLaunch& L, void* stream);
// Clusters of the backward cluster kernel of c's shape resident at once on the current device;
// 0 when unknown (no device, no clusters). The plan sizes the persistent grid with it.
int bwd_cluster_resident(DType t, const Config& c);
// Peak DRAM bytes per SM cycle of the current device (2 x memory clock x bus width over SMs x SM
// clock; H100 SXM 12.8, H200 above 16: 3201 MHz HBM3e), 0 without a device. Where a kernel's best shape differs
// between the two (measured), this is what tells them apart.
double device_bytes_per_sm_cycle();
// Devices at or above this many bytes per SM cycle (the H200 class) get the defaults measured there.
constexpr double kHighBandwidthPerSmCycle = 16.0;

}  // namespace baracuda::norm
