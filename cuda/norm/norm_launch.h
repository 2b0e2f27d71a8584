// The contract between the plan layer (cpp/src/norm.cpp) and the norm kernels: plain C++, no
// CUDA types. select() picks the configurations (register-resident and looped) from the shape
// alone; run() picks between them by pointer alignment, adds the pointers and calls launch().
#pragma once
#include <algorithm>
#include <cstdint>

#include "baracuda/dtype.h"

namespace baracuda::norm {

// Resident threads the grids of the backward kernels are sized for (132 SMs x 2048 threads, an
// H100 / H200 SXM). A constant, not a device query: the per-block partial sums of dweight /
// dbias, hence the bits, depend only on the shape, on every device.
constexpr int64_t kResidentThreads = 132 * 2048;
constexpr int64_t kMaxGrid = int64_t(1) << 20;  // forward grids; rows beyond loop (grid-stride)
constexpr int kColredThreads = 256;             // columns per block of the column-reduction kernel

enum class Path : int { Registers = 0, Looped = 1 };

struct Config {
  Path path = Path::Looped;
  int tpr = 32;       // threads per row: 8 / 16 / 32 (rows share a 128-thread block) or 128..1024
  int items = 1;      // register path: 16-byte vectors per thread per row
  int vec = 1;        // elements per vector (looped path: 1, or 16 / sizeof(T) when aligned)
  int threads = 128;  // block size
  int64_t grid = 0;   // blocks of the row kernel
  int64_t partials = 0;        // backward: rows of the [partials, H] dweight / dbias workspace
  int64_t rows_per_chunk = 0;  // backward, looped path: rows per column-reduction block
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int vec_width(DType t) { return int(16 / dtype_size(t)); }
inline int compute_size(DType t) { return t == DType::Float64 ? 8 : 4; }

// Vectors a thread may hold per row in registers: 64 bytes of compute values forward (x, or
// x + residual), 32 backward (x and grad_out, plus dweight / dbias accumulators), at most 4.
inline int max_items(DType t, bool backward) {
  const int budget = backward ? 32 : 64;
  return std::max(1, std::min(4, budget / (vec_width(t) * compute_size(t))));
}

inline void finish_grid(Config& c, bool backward, int64_t rows) {
  c.threads = c.tpr > 32 ? c.tpr : 128;
  const int64_t rpb = c.tpr > 32 ? 1 : 128 / c.tpr;
  const int64_t need = ceil_div(rows, rpb);
  c.grid = backward ? std::min(need, std::max<int64_t>(1, kResidentThreads / c.threads)) : std::min(need, kMaxGrid);
}

// The register-resident configuration: the whole row in registers, one read of each input and
// one write of each output. `ok` is false when the row does not fit (or H is not a multiple of
// the vector width); the looped path takes it then.
inline Config register_config(DType t, bool backward, int64_t H, int64_t rows, bool* ok) {
  Config c;
  c.path = Path::Registers;
  c.vec = vec_width(t);
  *ok = false;
  if (H <= 0 || H % c.vec != 0) return c;
  const int64_t nv = H / c.vec;
  const int imax = max_items(t, backward);
  if (nv <= 8) { c.tpr = 8; c.items = 1; }
  else if (nv <= 16) { c.tpr = 16; c.items = 1; }
  else if (nv <= 32 * imax) { c.tpr = 32; c.items = int(ceil_div(nv, 32)); }
  else {
    int64_t best = -1;
    for (int tpr : {128, 256, 512, 1024}) {
      const int64_t items = ceil_div(nv, tpr);
      if (items > imax) continue;
      const int64_t waste = tpr * items - nv;
      if (best < 0 || waste < best) { best = waste; c.tpr = tpr; c.items = int(items); }
    }
    if (best < 0) return c;
  }
  *ok = true;
  finish_grid(c, backward, rows);
  if (backward) c.partials = c.grid;
  return c;
}

// The looped configuration: any H, any alignment. Forward reads the row two (RMSNorm) or three
// (LayerNorm) times, the re-reads mostly from L2; backward reads grad_out and x twice for
// grad_x, and once more in a column-reduction kernel for dweight / dbias.
inline Config looped_config(DType t, bool backward, int64_t H, int64_t rows, bool vectorized) {
  Config c;
  c.path = Path::Looped;
  c.vec = vectorized ? vec_width(t) : 1;
  c.tpr = H <= 1024 ? 32 : 512;
  c.items = 1;
  finish_grid(c, false, rows);
  if (backward) {
    const int64_t col_blocks = std::max<int64_t>(1, ceil_div(H, kColredThreads));
    int64_t chunks = std::min(rows, std::max<int64_t>(1, ceil_div(2112, col_blocks)));
    c.rows_per_chunk = chunks > 0 ? ceil_div(rows, chunks) : 0;
    c.partials = chunks > 0 ? ceil_div(rows, c.rows_per_chunk) : 0;
  }
  return c;
}

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

// Bytes of one [partials, H] block of partial sums, 256-byte aligned.
inline int64_t partial_bytes(DType t, int64_t partials, int64_t H) {
  return (partials * H * compute_size(t) + 255) / 256 * 256;
}

void launch(const NormLaunch& L, void* stream);

}  // namespace baracuda::norm
