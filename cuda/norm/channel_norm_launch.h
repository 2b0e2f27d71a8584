// The contract between the channel-norm plan layer (cpp/src/norm_channel.cpp) and its kernels
// (GroupNorm / InstanceNorm / BatchNorm over x viewed as [N, C, S], S = the spatial dims
// collapsed): plain C++, no CUDA types.
//
// Passes (every sum in a fixed order, no atomics; the partition depends only on the shape):
//   stats   one read of x (forward) or of grad_out and x (backward): per (n, c, chunk) partials,
//           (count, mean, M2) from shifted sums (forward), (sum dy, sum dy * (x - mean)) (backward)
//   finalize one block per statistic unit ((n, group) or channel): merges its partials (Chan's
//           formula forward), writes mean / rstd / running stats / grad_weight / grad_bias and
//           a per-(n, c) (or per-c) coefficient table
//   apply   one read of x (and grad_out) and one write of y (grad_x) from the table
// x's layout picks the kernels: "planes" (spatial stride 1, NC* memory: a warp walks a chunk of a
// plane) or "columns" (channel stride 1, channels-last memory: a block walks a chunk of rows of a
// tile of channels). The other tensors may have either layout (their own strides).
#pragma once
#include <algorithm>
#include <cstdint>

#include "baracuda/dtype.h"

namespace baracuda::norm {

constexpr int kChanThreads = 256;         // block size of every channel-norm kernel
constexpr int64_t kChanMaxGrid = 1 << 20;  // grid-stride beyond

struct ChanPartition {
  bool columns = false;  // x's channel stride is 1 (channels-last); else x's spatial stride is 1
  int64_t chunk = 0;     // planes: elements of a plane per warp task; columns: rows per block task
  int64_t P = 0;         // chunks per plane (planes) or per sample n (columns)
  int tile = 32;         // columns: channels per block (power of two <= 32); rows lanes = 256 / tile
  int gw = 32;           // planes, scalar kernels: lanes per (plane, chunk) task (8 / 16 for small planes)
  int64_t tasks = 0;     // planes: warp tasks N*C*P; columns: block tasks N*P*ceil(C/tile)
  int64_t grid = 0;      // blocks of the stats / apply kernels
  // Columns with 16-byte vectors along C (C a multiple of vec = 16 / sizeof(T)): vtile vector
  // columns (of vec channels each) per block, 0 when C does not allow it. P and chunk are chosen
  // for this path; the scalar column kernels (tile, tasks, grid) run with the same P and chunk
  // when the operands turn out unaligned at run time (the partials layout depends on P only).
  int vec = 1;
  int vtile = 0;
  int64_t vtasks = 0;    // block tasks N*P*ceil(C/(vec*vtile))
  int64_t vgrid = 0;
};
constexpr int kChanVecTileMax = 8;  // vector columns per block in the vector column kernels
constexpr int64_t kColVecTasks = 1024;  // block tasks the vector column partition aims at

inline int64_t chan_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The partition of an [N, C, S] tensor with N, C, S >= 1; vec = 16 / sizeof(element).
inline ChanPartition chan_partition(bool columns, int64_t N, int64_t C, int64_t S, int vec = 1) {
  ChanPartition p;
  p.columns = columns;
  if (!columns) {
    // ~16K warp tasks (two waves of 64 warps on 132 SMs), chunks of >= 256 elements.
    const int64_t total = N * C * S;
    int64_t cl = std::max<int64_t>(256, chan_ceil_div(total, 16384));
    cl = chan_ceil_div(cl, 128) * 128;
    p.chunk = std::min(cl, S);
    p.P = chan_ceil_div(S, p.chunk);
    p.tasks = N * C * p.P;
    // Small planes share a warp (the scalar kernels; each lane still gets up to 4 values).
    p.gw = p.chunk <= 32 ? 8 : (p.chunk <= 64 ? 16 : 32);
    p.grid = std::min(chan_ceil_div(p.tasks, (kChanThreads / 32) * (32 / p.gw)), kChanMaxGrid);
  } else if (vec > 1 && C % vec == 0) {
    // Vector columns: a thread owns vec adjacent channels; a block covers vtile vector columns
    // (<= 128 contiguous bytes of a row) and 256 / vtile rows at a time. Narrow tiles give many
    // blocks without short chunks (each chunk adds 3 partials per channel to write and merge).
    const int64_t vcols = C / vec;
    int vt = 1;
    while (vt < kChanVecTileMax && vt < vcols) vt *= 2;
    p.vec = vec;
    p.vtile = vt;
    const int64_t vlanes = kChanThreads / vt;
    const int64_t vcol_tiles = chan_ceil_div(vcols, vt);
    // ~1024 block tasks (2-3 waves of the 3 (stats) or 4 (apply) resident blocks per SM on 132
    // SMs), chunks of >= 4 rows per row lane: tasks long enough to amortize their setup (table
    // entries, partial sums).
    int64_t P = std::max<int64_t>(1, chan_ceil_div(kColVecTasks, N * vcol_tiles));
    P = std::min(P, std::max<int64_t>(1, chan_ceil_div(S, 4 * vlanes)));
    p.chunk = chan_ceil_div(S, P);
    p.P = chan_ceil_div(S, p.chunk);
    p.vtasks = N * p.P * vcol_tiles;
    p.vgrid = std::min(p.vtasks, kChanMaxGrid);
    // The scalar fallback (unaligned operands): same P and chunk.
    int tile = 1;
    while (tile < 32 && tile < C) tile *= 2;
    p.tile = tile;
    p.tasks = N * p.P * chan_ceil_div(C, tile);
    p.grid = std::min(p.tasks, kChanMaxGrid);
  } else {
    int tile = 1;
    while (tile < 32 && tile < C) tile *= 2;
    p.tile = tile;
    const int64_t lanes = kChanThreads / tile;
    const int64_t col_tiles = chan_ceil_div(C, tile);
    // ~4096 block tasks, chunks of >= 4 rows per row lane.
    int64_t P = std::max<int64_t>(1, chan_ceil_div(4096, N * col_tiles));
    P = std::min(P, std::max<int64_t>(1, chan_ceil_div(S, 4 * lanes)));
    p.chunk = chan_ceil_div(S, P);
    p.P = chan_ceil_div(S, p.chunk);
    p.tasks = N * p.P * col_tiles;
    p.grid = std::min(p.tasks, kChanMaxGrid);
  }
  return p;
}

// What one run does.
enum class ChanMode : int {
  Forward = 0,        // batch statistics (GroupNorm, InstanceNorm, BatchNorm training)
  ForwardRunning = 1, // BatchNorm inference / InstanceNorm without input stats: running stats
  Backward = 2,       // from saved mean / rstd
  BackwardRunning = 3 // BatchNorm inference backward: from running_mean / running_var
};

struct ChanNormLaunch {
  ChanMode mode = ChanMode::Forward;
  DType dtype = DType::Float32;  // x, y, grad_out, grad_x
  bool w_f32 = false, b_f32 = false, r_f32 = false;  // weight, bias, running stats in f32 (else dtype)
  int64_t N = 0, C = 0, S = 0;
  // Column kernels, flat rows (per-channel statistics of channels-last x, run as [1, C, N * S]):
  // the true S when some operand's n stride is not S x its s stride (row_offset splits row
  // indices into (n, s)); 0 otherwise (the operands' n strides are then unused).
  int64_t flat_S = 0;
  // Folded columns (per-channel statistics of NC* x with small planes): the stats and apply
  // passes see x as columns [1, C * S, N] (column j = c * S + s, rows = samples) and fold = S, so
  // that column j belongs to channel j / fold; the finalize pass sees [fold, C, N] (chan_launch_t).
  int64_t fold = 0;
  // Statistic units: per (n, group) with G groups (GroupNorm, InstanceNorm: G = C), or per
  // channel over (N, S) when per_channel (BatchNorm).
  bool per_channel = false;
  int64_t G = 1;
  double eps = 0, momentum = 0;
  ChanPartition part;
  // Plane kernels with 16-byte vectors: every operand they touch has spatial stride 1, its
  // pointer 16-byte aligned and its n / c strides, S and the chunk multiples of 16 / sizeof(T).
  bool vec = false;
  // Column kernels with 16-byte vectors (part.vtile > 0): every operand has channel stride 1,
  // n / s strides multiples of 16 / sizeof(T) and a 16-byte aligned pointer.
  bool cvec = false;
  // [N, C, S] views: element strides of n, c, s.
  const void* x = nullptr; int64_t xs[3] = {};
  void* y = nullptr; int64_t ys[3] = {};
  const void* gy = nullptr; int64_t gys[3] = {};
  void* gx = nullptr; int64_t gxs[3] = {};
  const void* w = nullptr;  // [C] or null
  const void* b = nullptr;  // [C] or null (forward)
  void* rmean = nullptr;    // [C] running stats, updated in place when update_running (Forward)
  void* rvar = nullptr;     //   or read (the *Running modes)
  bool update_running = false;
  // Saved stats [units] in f32 (f64 for f64): written by Forward when non-null, read by Backward.
  void* mean = nullptr;
  void* rstd = nullptr;
  void* gw = nullptr;  // grad_weight [C] (weight's dtype), computed when non-null
  void* gb = nullptr;  // grad_bias [C] (bias's dtype)
  void* workspace = nullptr;  // chan_workspace(...).total bytes, 256-byte aligned
  void* partials = nullptr;   // set by the launcher from workspace
  void* table = nullptr;
  void* aux = nullptr;
};

// Workspace (bytes, 256-aligned pieces): partials (3 values per (n, c, chunk)), the coefficient
// table (4 values per (n, c), or per c when per_channel), and an auxiliary [N*C, 2] block
// (InstanceNorm running update, GroupNorm grad_weight / grad_bias per (n, c), running-stat
// statistics of the *Running backward).
struct ChanWorkspace {
  int64_t partials = 0, table = 0, aux = 0, total = 0;
};
inline ChanWorkspace chan_workspace(DType t, const ChanPartition& p, int64_t N, int64_t C, bool per_channel) {
  const int64_t cs = t == DType::Float64 ? 8 : 4;
  auto al = [](int64_t b) { return (b + 255) / 256 * 256; };
  ChanWorkspace w;
  w.partials = al(3 * N * C * p.P * cs);
  w.table = al(4 * (per_channel ? C : N * C) * cs);
  w.aux = al(2 * std::max(N * C, C) * cs);
  w.total = w.partials + w.table + w.aux;
  return w;
}

void chan_launch(const ChanNormLaunch& L, void* stream);

}  // namespace baracuda::norm
