// The norm family's tuning (see norm_tuning.h): the shape rules select() runs, measured with
// bench_norm.py --sweep; the measurements are in docs/benchmark-notes.md ("Norm: the measurements
// behind select's defaults", cited below as "notes: <topic>").
#include "norm_tuning.h"

#include <algorithm>
#include <cstdlib>

namespace baracuda::norm {

// Where the prefetching kernels are the default: the 16-bit backward at 1024 vectors, at 2048
// (RMSNorm), and the small groups of 9..16 vectors, where they measured faster (notes: prefetch).
static bool prefetch_default(bool backward, DType t, bool layer, int64_t vectors) {
  return backward && dtype_size(t) == 2 &&
         (vectors == 1024 || (vectors == 2048 && !layer) || (vectors > 8 && vectors <= 16));
}
// Where the register-accumulator backward is the default: the 16-bit LayerNorm at 512 vectors
// (notes: regacc).
static bool regacc_default(DType t, bool layer, int64_t vectors) {
  return layer && dtype_size(t) == 2 && vectors == 512;
}
// Blocks per SM of the prefetching kernel on an H100 / H200 (228 KB of shared memory per SM, 1 KB
// reserved per block), for its persistent grid.
static int64_t fwd_prefetch_resident_blocks(int tpr, int items) {
  const int64_t by_threads = 2048 / tpr;
  const int64_t regs = 48 + 4 * items;  // fwd_min_blocks' budget for 256..1024-thread blocks
  const int64_t by_regs = std::max<int64_t>(1, 65536 / (regs * tpr));
  const int64_t by_smem = (228 * 1024) / (fwd_prefetch_smem(tpr, items) + 1024 + 512);
  return std::max<int64_t>(1, std::min({by_threads, by_regs, by_smem}));
}

// Rows of at least this many elements take the cluster path by default (forward, sm_90,
// 16-byte aligned): below it a block-resident row already overlaps with other blocks' rows.
constexpr int64_t kClusterMinH = 16384;

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
static void colred_partition(Config& c, int64_t H, int64_t rows, int vec) {
  c.colred_vec = vec;
  const int64_t col_blocks = std::max<int64_t>(1, ceil_div(H, int64_t(kColredThreads) * vec));
  const int64_t chunks = std::min(rows, std::max<int64_t>(1, ceil_div(2112, col_blocks)));
  c.rows_per_chunk = chunks > 0 ? ceil_div(rows, chunks) : 0;
  c.partials = chunks > 0 ? ceil_div(rows, c.rows_per_chunk) : 0;
}


// Blocks of the register backward kernel (without xs) that are resident per SM on an H100 /
// H200 (a constant of the configuration, not a device query, so that the partial sums depend
// only on the shape): the least of the thread limit, the register budget of its launch bounds
// and the shared memory of its dweight / dbias accumulators (both for LayerNorm, 228 KB per SM,
// 1 KB reserved per block, plus the static reduction slots).
static int64_t bwd_resident_blocks(const Config& c, DType t, bool layer) {
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
void finish_grid(Config& c, bool backward, int64_t rows, DType t, bool layer) {
  c.threads = c.tpr > 32 ? c.tpr : 128;
  const int64_t rpb = int64_t(rows_per_block(c.tpr)) * c.rows;
  const int64_t need = ceil_div(rows, rpb);
  if (!backward) { c.grid = std::min(need, kMaxGrid); return; }
  const int64_t per_sm = c.path == Path::Registers && !c.xs ? bwd_resident_blocks(c, t, layer) : kResidentThreads / 132 / c.threads;
  c.grid = std::min(need, std::max<int64_t>(1, 132 * per_sm));
}

Override parse_override(const std::vector<Knob>& knobs) {
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
static bool cluster_config_start(Config& c, DType t, int64_t H, int64_t rows, int64_t& nv) {
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
static Config cluster_config(DType t, int64_t H, int64_t rows, int cs = 0, int tpr = 0, int items = 0) {
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
void set_bwd_clusters(Config& c, int64_t clusters, int64_t rows) {
  const int64_t g = std::max<int64_t>(1, std::min<int64_t>({clusters, rows, int64_t(65535)}));
  c.grid = g * c.cluster;
  c.partials = g;
}

// The backward cluster configuration: the given (cs, tpr, items) when it is instantiated and holds
// the row, else (cs = 0) the instantiated shape of least capacity that holds it, ties to the
// smaller cluster. cluster = 1 in the result: none holds the row. The grid: `clusters` clusters
// (default kBwdClusterBlocks / cs, the grid of a plan made without a device), each looping over
// rows c, c + clusters, ... (set_bwd_clusters).
static Config bwd_cluster_config(DType t, int64_t H, int64_t rows, int cs = 0, int tpr = 0, int items = 0,
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
Config register_config(DType t, bool layer, bool backward, int64_t H, int64_t rows, bool* ok, const Override& ov,
                       bool allow_cluster, bool residual) {
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
    // The cluster with a residual, for rows one block cannot hold, and between 2048 and 4096
    // vectors; the one-block kernel elsewhere (notes: cluster forward).
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
      // Measured exceptions for 16-bit rows of 512, 1024 and 2048 vectors (notes: block shapes).
      if (dtype_size(t) == 2) {
        if (nv == 512 && backward) { c.tpr = 128; c.items = 4; c.xs = false; }
        if (nv == 1024 && !backward) { c.tpr = 256; c.items = 4; c.xs = false; }
        if (nv == 2048) { c.tpr = 512; c.items = 4; c.xs = false; }
      }
    }
    // Forward: two rows per thread group (loads of both issued before either reduction) when
    // there are rows for at least ~4 waves of groups; not for a warp per row (notes: rows per group).
    if (!backward) {
      const int64_t groups = kResidentThreads / c.tpr;
      if (fwd_supported(c.tpr, c.items, 2) && c.items <= 2 && c.tpr > 32 && rows >= 4 * groups) c.rows = 2;
      // Groups of 8 / 16 threads hold four rows at once without a residual (notes: rows per group).
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
  // / 512 x 4 / 256 x 4 kernels; select drops it for other operands): the ring (2) by default
  // (notes: parameters in shared memory).
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
Config looped_config(DType t, bool backward, int64_t H, int64_t rows, bool vectorized) {
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
Config cluster_fallback_config(DType t, bool layer, int64_t H, int64_t rows, bool backward) {
  bool ok = false;
  const Config c = register_config(t, layer, backward, H, rows, &ok, Override{}, false);
  return ok ? c : looped_config(t, backward, H, rows, true);
}

}  // namespace baracuda::norm
