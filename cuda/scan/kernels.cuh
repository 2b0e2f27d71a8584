// The scan engine: every op of ops.cuh runs through these kernels over the geometry of
// scan_launch.h.
//   rows:     the axis has unit stride. A group of G lanes (4, 8, 16 or 32) per (row, segment)
//             walks it in tiles of G x V elements (V = 16 bytes / element for the vector ops,
//             else 1), U tiles loaded ahead: each lane scans its V elements sequentially, the
//             group scans the lane totals with shuffles, a carry chains the tiles.
//   columns:  any other layout: a thread owns CV adjacent rows (16-byte loads when they are
//             contiguous) and walks the axis; adjacent threads read adjacent memory when the
//             innermost row dim has unit stride.
// Split (nseg > 1): pass 1 reduces each segment to a state in the workspace, pass 2 turns the
// states of each row into exclusive prefixes (in order), pass 3 rescans every segment from its
// prefix. No atomics: results depend only on the plan's launch configuration.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common/cuda_check.h"
#include "common/dtype_traits.cuh"
#include "scan/ops.cuh"
#include "scan/scan_launch.h"

namespace baracuda::scan::kern {

using namespace baracuda::kernels;  // the shared vocabulary (cuda/common)

using baracuda::scan::Path;
using baracuda::scan::ScanLaunch;

constexpr int kUnroll = 4;  // tiles (rows) / steps (columns) loaded ahead

struct Args {
  const char* in[3];
  char* out[2];
  int64_t L;
  int64_t as[kOps];
  int nrd;
  int64_t rsize[kMaxRank];
  int64_t rstride[kMaxRank][kOps];
  int64_t rows;
  int64_t seg, nseg;
  bool reverse;
  void* part;
};

__device__ __forceinline__ Row make_row(const Args& a, int64_t r, const int (&esz)[kOps]) {
  int64_t off[kOps] = {0, 0, 0, 0, 0};
  for (int d = 0; d < a.nrd; ++d) {
    const int64_t q = a.nrd == 1 ? 0 : r / a.rsize[d];
    const int64_t i = r - q * a.rsize[d];
#pragma unroll
    for (int k = 0; k < kOps; ++k) off[k] += i * a.rstride[d][k];
    r = q;
  }
  Row row;
#pragma unroll
  for (int k = 0; k < 3; ++k) row.in[k] = a.in[k] ? a.in[k] + off[k] * esz[k] : nullptr;
#pragma unroll
  for (int k = 0; k < 2; ++k) row.out[k] = a.out[k] ? a.out[k] + off[3 + k] * esz[3 + k] : nullptr;
#pragma unroll
  for (int k = 0; k < kOps; ++k) row.as[k] = a.as[k];
  return row;
}

// A state of any trivially copyable type through 32-bit shuffles: `shfl` moves each word.
template <class S, class F> __device__ __forceinline__ S shfl_words(const S& s, F shfl) {
  constexpr int W = int((sizeof(S) + 3) / 4);
  int w[W];
  memset(w, 0, sizeof w);
  memcpy(w, &s, sizeof(S));
#pragma unroll
  for (int i = 0; i < W; ++i) w[i] = shfl(w[i]);
  S r;
  memcpy(&r, w, sizeof(S));
  return r;
}
template <class S> __device__ __forceinline__ S shfl_up_state(unsigned mask, const S& s, int d, int width) {
  return shfl_words(s, [&](int v) { return __shfl_up_sync(mask, v, d, width); });
}
template <class S> __device__ __forceinline__ S shfl_state(unsigned mask, const S& s, int src, int width) {
  return shfl_words(s, [&](int v) { return __shfl_sync(mask, v, src, width); });
}

// Element sizes of the operand slots for an op (unused slots: 1).
template <class Op, class T, class O> struct Sizes {
  __host__ __device__ static void fill(int (&e)[kOps]) {
    e[0] = sizeof(T);
    e[1] = sizeof(T);
    e[2] = sizeof(T);
    e[3] = sizeof(O);
    e[4] = sizeof(int64_t);
  }
};

// ---- rows ----------------------------------------------------------------------------------------
// Op: the operator; T, O: in0 / out0 element types; V: elements per lane per tile (> 1 only for
// kVec / kVecIdx ops, 16 bytes of T; kVecIdx ops also store V int64 indices per lane); G: lanes
// per (row, segment); STORE: false = pass 1 of a split; PF: the next U tiles loaded while the
// current ones are scanned (rows of several steps: G = 32).
template <class Op, class T, class O, int V, int G, bool STORE, bool PF = false>
__global__ void __launch_bounds__(256, 3) rows_kernel(Args a) {
  using State = typename Op::State;
  using Elem = typename Op::Elem;
  constexpr int TILE = G * V;
  int esz[kOps];
  Sizes<Op, T, O>::fill(esz);
  const int lane = threadIdx.x % G;
  const unsigned gmask = G == 32 ? 0xffffffffu : (((1u << G) - 1u) << ((threadIdx.x % 32) / G * G));
  const int64_t unit = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  if (unit >= a.rows * a.nseg) return;  // whole groups leave together
  const int64_t row = unit / a.nseg, s = unit - row * a.nseg;
  const Row r = make_row(a, row, esz);
  const int64_t q_lo = s * a.seg, q_hi = min(a.L, q_lo + a.seg);
  State* part = static_cast<State*>(a.part);
  State carry = (STORE && a.nseg > 1) ? part[row * a.nseg + s] : Op::identity();
  const bool rev = a.reverse;
  const int64_t L = a.L;
  // Values + indices ops with 8-wide vectors load 2 tiles ahead (4 spills: 16-byte states).
  constexpr int U = (vec_idx<Op>::value && V >= 8) ? 2 : kUnroll;
  // A tile's V elements per lane. 16-byte vectors (V > 1, where Elem is T) stay packed in memory
  // order until they are scanned: 16-bit types then take half the registers, which is what lets
  // the next U tiles be in flight (PF) without spilling.
  constexpr bool PACK = V > 1;
  using Tile = std::conditional_t<PACK, uint4, Elem[V]>;
  auto load_tiles = [&](Tile (&tl)[U], int64_t q0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t qb = q0 + int64_t(u) * TILE + int64_t(lane) * V;
      if constexpr (PACK) {
        if (qb + V <= q_hi) {
          const int64_t ib = rev ? L - qb - V : qb;
          tl[u] = *reinterpret_cast<const uint4*>(reinterpret_cast<const T*>(r.in[0]) + ib);
        } else {
          T t[V];  // memory order, as the vector load gives it (constant indices: registers)
          if (rev) {
#pragma unroll
            for (int v = 0; v < V; ++v)
              if (qb + v < q_hi) t[V - 1 - v] = Op::load(r, L - 1 - qb - v);
          } else {
#pragma unroll
            for (int v = 0; v < V; ++v)
              if (qb + v < q_hi) t[v] = Op::load(r, qb + v);
          }
          memcpy(&tl[u], t, sizeof t);
        }
      } else {
        if (qb < q_hi) tl[u][0] = Op::load(r, rev ? L - 1 - qb : qb);
      }
    }
  };
  constexpr int64_t STEP = int64_t(TILE) * U;
  // Scans and stores the U tiles at q0, then moves the carry past them.
  auto scan_tiles = [&](const Tile (&tiles)[U], int64_t q0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t qt = q0 + int64_t(u) * TILE;
      if (qt >= q_hi) break;  // uniform across the group
      const int64_t qb = qt + int64_t(lane) * V;
      Elem ev[V];  // in scan order
      if constexpr (PACK) {
        T t[V];
        memcpy(t, &tiles[u], sizeof t);
        if (rev) {
#pragma unroll
          for (int v = 0; v < V; ++v) ev[v] = t[V - 1 - v];
        } else {
#pragma unroll
          for (int v = 0; v < V; ++v) ev[v] = t[v];
        }
      } else {
        ev[0] = tiles[u][0];
      }
      // Values + indices ops (exact, so any association gives the same bits) rescan their V
      // elements from the prefix at store time instead of keeping V 16-byte states live.
      constexpr bool RESCAN = vec_idx<Op>::value && V > 1;
      State st[RESCAN ? 1 : V];
      State acc = Op::identity();
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const int64_t q = qb + v;
        if (q < q_hi) acc = Op::combine(acc, Op::lift(ev[v], rev ? L - 1 - q : q));
        if constexpr (!RESCAN) st[v] = acc;
      }
      State inc = acc;
#pragma unroll
      for (int d = 1; d < G; d <<= 1) {
        const State o = shfl_up_state(gmask, inc, d, G);
        if (lane >= d) inc = Op::combine(o, inc);
      }
      State excl = shfl_up_state(gmask, inc, 1, G);
      if (lane == 0) excl = Op::identity();
      const State tot = shfl_state(gmask, inc, G - 1, G);
      if constexpr (STORE) {
        const State pre = Op::combine(carry, excl);
        bool done = false;
        if constexpr (RESCAN) {
          State run = pre;
          if (qb + V <= q_hi) {
            O o[V];
            int64_t ix[V];
#pragma unroll
            for (int v = 0; v < V; ++v) {
              const int64_t q = qb + v;
              run = Op::combine(run, Op::lift(ev[v], rev ? L - 1 - q : q));
              o[v] = Op::finish(run);
              ix[v] = Op::index(run);
            }
            if (rev) {  // to memory order, with constant indices (a runtime one puts o / ix in local memory)
#pragma unroll
              for (int v = 0; v < V / 2; ++v) {
                const O to = o[v];
                o[v] = o[V - 1 - v];
                o[V - 1 - v] = to;
                const int64_t ti = ix[v];
                ix[v] = ix[V - 1 - v];
                ix[V - 1 - v] = ti;
              }
            }
            const int64_t ib = rev ? L - qb - V : qb;
            constexpr int NW = int(sizeof(O) * V / 16);
            uint4 w[NW];
            memcpy(w, o, sizeof o);
            uint4* dst = reinterpret_cast<uint4*>(reinterpret_cast<O*>(r.out[0]) + ib);
#pragma unroll
            for (int k = 0; k < NW; ++k) dst[k] = w[k];
            constexpr int NI = V / 2;  // int64 indices: two per 16-byte store
            uint4 wi[NI];
            memcpy(wi, ix, sizeof ix);
            uint4* di = reinterpret_cast<uint4*>(reinterpret_cast<int64_t*>(r.out[1]) + ib);
#pragma unroll
            for (int k = 0; k < NI; ++k) di[k] = wi[k];
          } else {
#pragma unroll
            for (int v = 0; v < V; ++v) {
              const int64_t q = qb + v;
              if (q < q_hi) {
                run = Op::combine(run, Op::lift(ev[v], rev ? L - 1 - q : q));
                Op::store(r, rev ? L - 1 - q : q, ev[v], run);
              }
            }
          }
          (void)done;
        } else if constexpr (V > 1) {
          if (qb + V <= q_hi) {
            O o[V];
            if (rev) {
#pragma unroll
              for (int v = 0; v < V; ++v) o[V - 1 - v] = Op::finish(Op::combine(pre, st[v]));
            } else {
#pragma unroll
              for (int v = 0; v < V; ++v) o[v] = Op::finish(Op::combine(pre, st[v]));
            }
            const int64_t ib = rev ? L - qb - V : qb;
            constexpr int NW = int(sizeof(O) * V / 16);
            uint4 w[NW];
            memcpy(w, o, sizeof o);
            uint4* dst = reinterpret_cast<uint4*>(reinterpret_cast<O*>(r.out[0]) + ib);
#pragma unroll
            for (int k = 0; k < NW; ++k) dst[k] = w[k];
            done = true;
          }
        }
        if constexpr (!RESCAN) {
          if (!done) {
#pragma unroll
            for (int v = 0; v < V; ++v) {
              const int64_t q = qb + v;
              if (q < q_hi) Op::store(r, rev ? L - 1 - q : q, ev[v], Op::combine(pre, st[v]));
            }
          }
        }
      }
      carry = Op::combine(carry, tot);
    }
  };
  if constexpr (PF) {  // the next U tiles in flight while these are scanned and stored
    Tile cur[U];
    load_tiles(cur, q_lo);
    for (int64_t q0 = q_lo; q0 < q_hi; q0 += STEP) {
      Tile nx[U];
      if (q0 + STEP < q_hi) load_tiles(nx, q0 + STEP);
      scan_tiles(cur, q0);
#pragma unroll
      for (int u = 0; u < U; ++u) memcpy(&cur[u], &nx[u], sizeof(Tile));
    }
  } else {
    for (int64_t q0 = q_lo; q0 < q_hi; q0 += STEP) {
      Tile cur[U];
      load_tiles(cur, q0);
      scan_tiles(cur, q0);
    }
  }
  if constexpr (!STORE)
    if (lane == 0) part[row * a.nseg + s] = carry;
}

// ---- columns -------------------------------------------------------------------------------------
// A thread owns CV adjacent rows (CV > 1: contiguous in every operand, kVec ops) and one segment.
template <class Op, class T, class O, int CV, bool STORE>
__global__ void __launch_bounds__(256) cols_kernel(Args a) {
  using State = typename Op::State;
  using Elem = typename Op::Elem;
  int esz[kOps];
  Sizes<Op, T, O>::fill(esz);
  const int64_t ngroups = a.rows / CV;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tid >= ngroups * a.nseg) return;
  const int64_t g = tid % ngroups, s = tid / ngroups;
  const int64_t row0 = g * CV;
  const Row r = make_row(a, row0, esz);
  const int64_t q_lo = s * a.seg, q_hi = min(a.L, q_lo + a.seg);
  State* part = static_cast<State*>(a.part);
  State st[CV];
#pragma unroll
  for (int c = 0; c < CV; ++c) st[c] = (STORE && a.nseg > 1) ? part[s * a.rows + row0 + c] : Op::identity();
  const bool rev = a.reverse;
  const int64_t L = a.L;
  for (int64_t q0 = q_lo; q0 < q_hi; q0 += kUnroll) {
    Elem e[kUnroll][CV];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t q = q0 + u;
      if (q >= q_hi) break;
      const int64_t i = rev ? L - 1 - q : q;
      if constexpr (CV > 1) {
        const uint4 raw = *reinterpret_cast<const uint4*>(reinterpret_cast<const T*>(r.in[0]) + i * r.as[0]);
        memcpy(e[u], &raw, sizeof raw);
      } else {
        e[u][0] = Op::load(r, i);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t q = q0 + u;
      if (q >= q_hi) break;
      const int64_t i = rev ? L - 1 - q : q;
#pragma unroll
      for (int c = 0; c < CV; ++c) st[c] = Op::combine(st[c], Op::lift(e[u][c], i));
      if constexpr (STORE) {
        if constexpr (CV > 1) {
          O o[CV];
#pragma unroll
          for (int c = 0; c < CV; ++c) o[c] = Op::finish(st[c]);
          constexpr int NW = int(sizeof(O) * CV / 16);
          uint4 w[NW];
          memcpy(w, o, sizeof o);
          uint4* dst = reinterpret_cast<uint4*>(reinterpret_cast<O*>(r.out[0]) + i * r.as[3]);
#pragma unroll
          for (int k = 0; k < NW; ++k) dst[k] = w[k];
        } else {
          Op::store(r, i, e[u][0], st[0]);
        }
      }
    }
  }
  if constexpr (!STORE) {
#pragma unroll
    for (int c = 0; c < CV; ++c) part[s * a.rows + row0 + c] = st[c];
  }
}

// ---- pass 2: segment states -> exclusive prefixes, in order --------------------------------------
// Sequence r (one per row) has nseg states at P[r * pr + s * ps]. Block (X, Y): X sequences, Y
// contiguous blocks of segments per sequence, merged in order through shared memory.
template <class Op>
__global__ void partials_kernel(typename Op::State* P, int64_t nseq, int64_t nseg, int64_t pr, int64_t ps) {
  using State = typename Op::State;
  extern __shared__ __align__(16) unsigned char smem[];
  State* sh = reinterpret_cast<State*>(smem);
  const int X = blockDim.x, Y = blockDim.y, x = threadIdx.x, y = threadIdx.y;
  const int64_t r = int64_t(blockIdx.x) * X + x;
  const int64_t per = (nseg + Y - 1) / Y;
  const int64_t s0 = min(nseg, y * per), s1 = min(nseg, s0 + per);
  State tot = Op::identity();
  if (r < nseq)
    for (int64_t s = s0; s < s1; ++s) tot = Op::combine(tot, P[r * pr + s * ps]);
  sh[y * X + x] = tot;
  __syncthreads();
  for (int d = 1; d < Y; d <<= 1) {
    const State o = y >= d ? sh[(y - d) * X + x] : Op::identity();
    __syncthreads();
    if (y >= d) sh[y * X + x] = Op::combine(o, sh[y * X + x]);
    __syncthreads();
  }
  State run = y > 0 ? sh[(y - 1) * X + x] : Op::identity();
  if (r < nseq)
    for (int64_t s = s0; s < s1; ++s) {
      const State v = P[r * pr + s * ps];
      P[r * pr + s * ps] = run;
      run = Op::combine(run, v);
    }
}

// ---- host side -----------------------------------------------------------------------------------
inline Args make_args(const ScanLaunch& L) {
  Args a{};
  for (int k = 0; k < 3; ++k) a.in[k] = static_cast<const char*>(L.in[k]);
  for (int k = 0; k < 2; ++k) a.out[k] = static_cast<char*>(L.out[k]);
  a.L = L.L;
  for (int k = 0; k < kOps; ++k) a.as[k] = L.axis_stride[k];
  a.nrd = L.nrd;
  for (int d = 0; d < kMaxRank; ++d) {
    a.rsize[d] = L.rsize[d];
    for (int k = 0; k < kOps; ++k) a.rstride[d][k] = L.rstride[d][k];
  }
  a.rows = L.rows;
  a.seg = L.nseg > 1 ? L.seg : L.L;
  a.nseg = L.nseg > 1 ? L.nseg : 1;
  a.reverse = L.reverse;
  a.part = L.workspace;
  return a;
}

inline bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

inline unsigned grid_of(int64_t threads, int block) {
  return unsigned((threads + block - 1) / block);
}

template <class Op, class T, class O, int V, bool STORE>
void launch_rows_g(const ScanLaunch& L, const Args& a, int block, cudaStream_t st) {
  const int64_t units = a.rows * a.nseg;
  // A warp per (row, segment): pass 1 of a split always (its rows are long), else group 32.
  if (!STORE || L.group == 32) {
    const unsigned grid = grid_of(units * 32, block);
    constexpr bool pf_fits = baracuda::scan::prefetch_fits(sizeof(typename Op::State), V, vec_idx<Op>::value);
    if (pf_fits && L.prefetch) rows_kernel<Op, T, O, V, 32, STORE, pf_fits><<<grid, block, 0, st>>>(a);
    else rows_kernel<Op, T, O, V, 32, STORE, false><<<grid, block, 0, st>>>(a);
  } else if constexpr (STORE) {
    switch (L.group) {
      case 4: rows_kernel<Op, T, O, V, 4, true><<<grid_of(units * 4, block), block, 0, st>>>(a); break;
      case 8:  // select() refuses 8 where it is not built
        if constexpr (baracuda::scan::rows_group_built(8)) {
          rows_kernel<Op, T, O, V, 8, true><<<grid_of(units * 8, block), block, 0, st>>>(a);
          break;
        }
        [[fallthrough]];
      default: rows_kernel<Op, T, O, V, 16, true><<<grid_of(units * 16, block), block, 0, st>>>(a); break;
    }
  }
  check_launch(STORE ? "scan rows_kernel" : "scan rows_kernel (segment totals)");
}

template <class Op, class T, class O, int CV, bool STORE>
void launch_cols(const Args& a, int block, cudaStream_t st) {
  const int64_t threads = a.rows / CV * a.nseg;
  cols_kernel<Op, T, O, CV, STORE><<<grid_of(threads, block), block, 0, st>>>(a);
  check_launch("scan cols_kernel");
}

template <class Op>
void launch_partials(const ScanLaunch& L, const Args& a, cudaStream_t st) {
  using State = typename Op::State;
  const bool rows = L.path == Path::Rows;
  // rows: [row][seg], few rows with many segments; columns: [seg][row], many rows.
  const int64_t pr = rows ? a.nseg : 1, ps = rows ? 1 : a.rows;
  const int X = rows ? 1 : 32;
  const int Y = rows ? 256 : 8;
  const dim3 block(X, Y);
  const size_t sm = size_t(X) * Y * sizeof(State);
  partials_kernel<Op><<<grid_of(a.rows, X), block, sm, st>>>(static_cast<State*>(a.part), a.rows, a.nseg, pr, ps);
  check_launch("scan partials_kernel");
}

// Runs one op: V = the vector width of the rows / columns paths (1 for non-vector ops).
template <class Op, class T, class O>
void launch_op(const ScanLaunch& L, cudaStream_t st) {
  constexpr int VW = Op::kVec ? int(16 / sizeof(T)) : 1;
  // Rows only: the values + indices ops (cummax / cummin) also take 16-byte vectors.
  constexpr int RVW = (Op::kVec || vec_idx<Op>::value) ? int(16 / sizeof(T)) : 1;
  Args a = make_args(L);
  const int block = L.threads;
  const bool split = a.nseg > 1;
  if (L.path == Path::Rows) {
    const bool vec = RVW > 1 && L.vec == RVW && aligned16(a.in[0]) && aligned16(a.out[0]) && aligned16(a.out[1]);
    auto run = [&](auto vtag) {
      constexpr int V = decltype(vtag)::value;
      if (split) {
        launch_rows_g<Op, T, O, V, false>(L, a, block, st);
        launch_partials<Op>(L, a, st);
      }
      launch_rows_g<Op, T, O, V, true>(L, a, block, st);
    };
    if (vec) run(std::integral_constant<int, RVW>{});
    else run(std::integral_constant<int, 1>{});
  } else {
    const bool vec = VW > 1 && L.cvec > 1 && aligned16(a.in[0]) && aligned16(a.out[0]);
    auto run = [&](auto vtag) {
      constexpr int CV = decltype(vtag)::value;
      if (split) {
        launch_cols<Op, T, O, CV, false>(a, block, st);
        launch_partials<Op>(L, a, st);
      }
      launch_cols<Op, T, O, CV, true>(a, block, st);
    };
    if (vec) run(std::integral_constant<int, VW>{});
    else run(std::integral_constant<int, 1>{});
  }
}

}  // namespace baracuda::scan::kern
