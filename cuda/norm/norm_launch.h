// The contract between the plan layer (cpp/src/norm.cpp) and the norm kernels: plain C++, no
// CUDA types. What kernels exist (the shapes below, which the launchers' switches test) and what a
// launch carries. select() picks the configurations (register-resident and looped) from the shape
// alone (cpp/src/norm_tuning.cpp); run() picks between them by pointer alignment, adds the pointers
// and calls launch().
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "baracuda/dtype.h"

namespace baracuda::norm {

// Resident threads the grids of the backward kernels are sized for (132 SMs x 2048 threads, an
// H100 / H200 SXM). A constant, not a device query: the per-block partial sums of dweight /
// dbias, hence the bits, depend only on the shape, on every device.
constexpr int64_t kResidentThreads = 132 * 2048;
constexpr int64_t kMaxGrid = int64_t(1) << 20;  // forward grids; rows beyond loop (grid-stride)
constexpr int kColredThreads = 256;             // threads of the column-reduction kernel

// Cluster: sm_90; a row split over a thread-block cluster of `cluster` blocks, each holding
// 1/cluster of it (fwd_cluster.cuh; forward: one cluster per row, backward: a persistent grid of
// clusters). The launcher falls back to NormLaunch::fallback on devices without clusters.
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
  // triggering the launch as it starts (pdl_trigger; docs/benchmark-notes.md, norm: finish launch)
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
// Blocks per SM the register backward kernel (without xs) is compiled for (its
// __launch_bounds__): a register budget plus 8 per item (grad_out and x packed); 48 for 256 /
// 512-thread blocks (2 items: 64 registers, 2 x 512 / 4 x 256 threads per SM instead of 1 x 512 /
// 3 x 256 at 73), 56 for smaller ones.
constexpr int bwd_min_blocks(int tpr, int items) {
  const int threads = tpr > 32 ? tpr : 128;
  const int b = 65536 / (((threads >= 256 ? 48 : 56) + 8 * items) * threads);
  return b < 1 ? 1 : (b > 16 ? 16 : b);
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
  Config fallback;  // when cfg is the cluster path: what runs on a device without clusters (the plan's)
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
// (The cluster forward with a residual stays generic: it measured slower specialized;
// docs/benchmark-notes.md, norm: specialization.)
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
// 16-bit default at H = 65536; docs/benchmark-notes.md, norm: specialization).
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
