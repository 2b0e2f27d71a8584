// Register / shared-memory resident rows (the rows_block and rows_cluster paths).
//
// A row (or, with clusters, a 1/CS slice of it) is held by W warps, each lane K raw 16-byte
// vectors, kept as the *storage* bits (uint4) and converted to the compute type on every use:
// a 64 KB bf16 row costs 64 KB of registers, not the 128 KB its f32 values would. The input is
// read from memory once, every load of a thread is issued before any reduction, and the
// output is written once.
//
//   ST = 1 stages the last operand (x forward, y backward) in shared memory through cp.async
//        instead of registers: loads stay in flight without holding registers, so more rows
//        are resident per SM. Thread t's chunk k lives at stage[k * THREADS + t]: each thread
//        reads back only what it copied (no barrier needed after cp.async.wait_all).
//   ST = 2 (forward, clusters) prefetches: the grid is persistent (as many clusters as fit at
//        once, each looping over rows), the current row's slice is in registers and the next
//        row's slice is copied into shared memory (cp.async) while the current one is reduced,
//        exchanged through the cluster and written. Without it every block loads, reduces, waits
//        at the cluster barrier and writes in turn, and since all resident blocks start together
//        the whole GPU alternates between a read phase, an exp / barrier phase with DRAM idle,
//        and a write phase (68% of the copy rate for [512, 262144] bf16 on an H100).
//        `bulk` (stage = 3 on the host): where the block's slice lies wholly inside the row, the
//        next slice comes in as one phase of bulk copies (TMA, issued by one thread, counted on an
//        mbarrier) instead of a cp.async per vector and thread; the slots k * THREADS + t are
//        then the slice's vectors in order (R = 1), so the slice is one contiguous span.
//   R  rows per block (W < 4: 4 / W rows, so blocks have 128 threads); W = 1 needs no barrier.
//   CS > 1: a thread-block cluster per row (sm_90), each block a slice; the per-block (max, sum)
//        or dot partials are combined through distributed shared memory in rank order (every
//        block computes the same bits), so a row spread over CS SMs is still read once.
//
// Forward does one (max, sum) reduction: each thread takes its local max, sums exp(x - max)
// against it, and the (max, sum) pairs are combined (warp shuffles, then shared memory, then
// the cluster). Softmax evaluates exp twice per element (sum, then write); log-softmax once.
#pragma once

#include <cstring>

#include "common/async_copy.cuh"
#include "common/cluster_device.cuh"
#include "common/cluster_exchange.cuh"
#include "common/cluster_launch.h"
#include "common/mbarrier.cuh"
#include "common/per_arch.cuh"
#include "common/smem_opt_in.h"
#include "softmax/softmax_kernels.cuh"

namespace baracuda::softmax::detail {

// Converts a copy of the raw bits, laundered through an empty asm so that the compiler cannot
// keep the converted values of one pass alive for the next (that would hold the row as f32 in
// registers, twice the bytes, which is what this kernel avoids).
template <class T, int V, class C>
__device__ __forceinline__ void unpack(uint4 u, C (&v)[V]) {
  if constexpr (sizeof(T) < 4) asm volatile("" : "+r"(u.x), "+r"(u.y), "+r"(u.z), "+r"(u.w));
  if constexpr (std::is_same_v<T, bf16>) {  // bf16 is the top half of an f32: two bit operations
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = __uint_as_float(w[i] << 16);
      v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
    Pack<T, V> pk;
    memcpy(&pk, &u, 16);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = to_compute(pk.v[j]);
  }
}

// An empty volatile asm on a running value: volatile asms keep their order, and the next
// chunk's unpack (also one) must wait for this chunk's result, so ptxas cannot hoist the
// conversions and exps of every chunk at once (forward went from ~120 to ~60 registers).
template <class C> __device__ __forceinline__ void fence_value(C& v) {
  if constexpr (sizeof(C) == 8) asm volatile("" : "+d"(v));
  else asm volatile("" : "+f"(v));
}

// The max of K chunks of 16-bit storage bits (chunk(k) -> uint4) on packed pairs: one
// HMNMX2 per two elements and no conversion, against a conversion and an FMNMX per element.
// Like fmaxf, a NaN loses to a number (NaN reaches the output through the sum).
template <class T, int K, int UF, class Chunk> __device__ __forceinline__ float packed_max(Chunk&& chunk) {
  using H2 = std::conditional_t<std::is_same_v<T, bf16>, __nv_bfloat162, __half2>;
  const unsigned ninf2 = std::is_same_v<T, bf16> ? 0xff80ff80u : 0xfc00fc00u;
  H2 acc;
  memcpy(&acc, &ninf2, 4);
#pragma unroll UF
  for (int k = 0; k < K; ++k) {
    const uint4 u = chunk(k);
    H2 h[4];
    memcpy(h, &u, 16);
#pragma unroll
    for (int i = 0; i < 4; ++i) acc = __hmax2(acc, h[i]);
  }
  return fmaxf(__low2float(acc), __high2float(acc));
}

// 16 bytes of p[idx..idx+V) as storage bits; slots at or past len hold `fill`.
template <class T, int V, class C>
__device__ __forceinline__ uint4 load_raw(const T* __restrict__ p, int64_t idx, int64_t len, C fill) {
  if (idx + V <= len) return *reinterpret_cast<const uint4*>(p + idx);
  Pack<T, V> pk;
#pragma unroll
  for (int j = 0; j < V; ++j) pk.v[j] = idx + j < len ? p[idx + j] : from_compute<T>(fill);
  uint4 u;
  memcpy(&u, &pk, 16);
  return u;
}

// A shared-memory store kept in order with the volatile asms around it (lds128, cp.async).
__device__ __forceinline__ void sts128(uint4* p, uint4 u) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(u.x), "r"(u.y), "r"(u.z), "r"(u.w)
               : "memory");
}
// A shared-memory read the compiler must repeat in every pass (not keep in registers).
__device__ __forceinline__ uint4 lds128(const uint4* p) {
  uint4 u;
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "r"(a));
  return u;
}
__device__ __forceinline__ void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

template <class T, int W, int K, int ST, int CS, bool BWD>
struct RegCfg {
  static constexpr int V = int(16 / sizeof(T));
  static constexpr int R = W >= 4 ? 1 : 4 / W;   // rows per block
  static constexpr int N = 32 * W;               // threads per row (slice)
  static constexpr int THREADS = N * R;
  static constexpr bool PF = ST == 2;             // prefetch (forward only)
  static_assert(!PF || !BWD, "the prefetching variant is forward only");
  static constexpr int NREG = (BWD ? 2 : 1) - (ST == 1 ? 1 : 0);  // operands held in registers
  static constexpr int RAW = 4 * K * NREG;         // their registers per thread
  static constexpr size_t SMEM = size_t(ST ? 1 : 0) * THREADS * K * 16;
  // Minimum resident blocks asked of ptxas: registers capped near the data's own plus 32 (the
  // kernel needs about that much besides the row; uncapped, ptxas takes twice as many and the
  // SM holds half the rows), and no more blocks than the shared memory and thread limits allow.
  static constexpr int TARGET = RAW + 32 < 40 ? 40 : RAW + 32;
  static constexpr int BY_REGS = 65536 / (TARGET * THREADS);
  static constexpr int BY_THREADS = 2048 / THREADS;
  static constexpr int BY_SMEM = SMEM ? int((220u * 1024u) / (SMEM ? SMEM : 1)) : 64;
  static constexpr int MINB0 = BY_REGS < BY_THREADS ? (BY_REGS < BY_SMEM ? BY_REGS : BY_SMEM)
                                                    : (BY_THREADS < BY_SMEM ? BY_THREADS : BY_SMEM);
  static constexpr int MINB = MINB0 < 1 ? 1 : MINB0;
  static constexpr int64_t PACKS = int64_t(N) * K * CS;  // 16-byte vectors a row may have
};

template <int CS> __device__ __forceinline__ unsigned cluster_rank() {
  if constexpr (CS > 1) return cluster_block_rank();
  return 0;
}
// The kernel's body (rows_reg below): a function of its own so that the cluster variants, which need
// sm_90, compile no body for older architectures.
template <class T, int W, int K, int ST, int CS, bool BWD>
__device__ __forceinline__ void rows_reg_body(RowGeo g, T* __restrict__ out, const T* __restrict__ in0,
                                              const T* __restrict__ in1, bool log, bool bulk_ok, bool fold_ok) {
  using Cfg = RegCfg<T, W, K, ST, CS, BWD>;
  using C = compute_t<T>;
  constexpr int V = Cfg::V, R = Cfg::R, N = Cfg::N, TH = Cfg::THREADS;
  // Passes that read only the stage (forward, ST = 1) stay rolled: nothing to keep in registers.
  constexpr int UF = (ST == 1 && !BWD) ? 1 : K;
  constexpr bool PF = Cfg::PF;
  extern __shared__ __align__(16) unsigned char sm_dyn[];
  uint4* stage = reinterpret_cast<uint4*>(sm_dyn);
  __shared__ C shm[32], shs[32];
  // CS > 1: the blocks' (max, sum) / dot partials. Persistent (PF): an st.async exchange; one row
  // per cluster: this block's pair, read by the others through distributed shared memory.
  __shared__ ClusterExchange<C, PF ? CS : 1> xch;
  __shared__ C clm, cls;
  __shared__ uint64_t pf_bar;  // PF with bulk copies: one phase per prefetched row
  const int tid = threadIdx.x, wid = tid >> 5, lane = tid & 31;
  const int rb = tid / N, t = tid - rb * N;
  const unsigned rank = cluster_rank<CS>();
  const int64_t groups = (g.rows + R - 1) / R;
  const int64_t gstride = CS > 1 ? gridDim.x / CS : gridDim.x;
  const C fill = BWD ? C(0) : ninf<C>();
  // This thread's first element; chunk k is KS elements further (a compile-time offset).
  // `rem` = elements of the row from there on (<= 0: all padding; inactive rows are padding).
  constexpr int KS = N * V;
  const int64_t slice0 = int64_t(rank) * K * N * V;  // the block's slice's first element in the row
  const int64_t first = slice0 + int64_t(t) * V;
  auto rem_of = [&](bool act) -> int {
    const int64_t r64 = act ? g.len - first : 0;
    return int(r64 < 0 ? 0 : (r64 > (int64_t(1) << 30) ? (int64_t(1) << 30) : r64));
  };
  const int64_t grp0 = CS > 1 ? blockIdx.x / CS : blockIdx.x;
  // PF: where this thread's part of row group `gp` starts, and its `rem`.
  auto slice_of = [&](int64_t gp, int& rm) -> const T* {
    const int64_t rw = gp * R + rb;
    const bool act = gp < groups && rw < g.rows;
    rm = rem_of(act);
    return in0 + (act ? row_off(g, rw, 1) + first : 0);
  };
  // PF: copies that part into this thread's stage slots: cp.async from one base (immediate
  // offsets, few registers) when it is all inside the row; else chunk by chunk, the partial
  // vector and the padding by plain loads, stored in order with the asms.
  auto prefetch = [&](const T* qp, int rm) {
    uint4* mp = stage + tid;
    if ((K - 1) * KS + V <= rm) {
#pragma unroll
      for (int k = 0; k < K; ++k) cp_async16(mp + k * TH, qp + k * KS);
    } else {
#pragma unroll 1
      for (int k = 0; k < K; ++k) {
        if (k * KS + V <= rm) cp_async16(mp + k * TH, qp + k * KS);
        else sts128(mp + k * TH, load_raw<T, V>(qp + k * KS, 0, rm - k * KS, fill));
      }
    }
  };
  // PF with bulk copies: this block's slice is whole (the same for every row) and one thread copies
  // it, K * N vectors from the slice's first element (one row per block: the slots are the slice).
  static_assert(!PF || R == 1, "softmax rows_reg: the prefetching clusters hold one row per block");
  constexpr unsigned kSliceBytes = unsigned(K * N * 16);
  const bool bulk = PF && bulk_ok && slice0 + K * N * V <= g.len;
  auto bulk_prefetch = [&](int64_t gp) {
    const T* src = in0 + row_off(g, gp, 1) + slice0;
    mbar_arrive_expect_tx(&pf_bar, kSliceBytes);
    bulk_copy_span(stage, src, kSliceBytes, &pf_bar);
  };
  if constexpr (CS > 1 && PF) {  // the exchange's mbarriers, initialized before any block sends (the
    if (tid == 0) {               // wait is before the first send: the first row's loads go out now)
      xch.init();
      mbar_init(&pf_bar, 1);
    }
    cluster_arrive_release();
    __syncthreads();  // pf_bar initialized before any thread waits on it
  }
  unsigned iter = 0;  // rows this block has done (the exchange's slot set and phase)
  if constexpr (PF) {
    if (grp0 < groups) {
      if (bulk) {
        if (tid == 0) bulk_prefetch(grp0);
      } else {
        int rm0;
        const T* q = slice_of(grp0, rm0);
        prefetch(q, rm0);
      }
    }
  }

  for (int64_t grp = grp0; grp < groups; grp += gstride) {
    const int64_t row = grp * R + rb;
    const bool active = row < g.rows;
    const int rem = rem_of(active);
    const T* q0 = in0 + (active ? row_off(g, row, 1) + first : 0);
    const T* q1 = BWD ? in1 + (active ? row_off(g, row, 2) + first : 0) : q0;
    const T* qs = BWD ? q1 : q0;  // the staged operand

    uint4 r0[Cfg::NREG >= 1 ? K : 1];  // forward x (ST = 0) / backward grad_out
    uint4 r1[Cfg::NREG >= 2 ? K : 1];  // backward y (ST = 0)
    uint4* my = stage + tid;           // this thread's stage slots: my[k * TH]
    if constexpr (ST == 1) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (k * KS + V <= rem) cp_async16(my + k * TH, qs + k * KS);
        else my[k * TH] = load_raw<T, V>(qs + k * KS, 0, rem - k * KS, fill);
      }
    }
    // PF: the next row's part (computed before this row's registers fill up).
    int rem_n = 0;
    const T* q_n = PF ? slice_of(grp + gstride, rem_n) : nullptr;
    if constexpr (PF) {  // this row was prefetched (before the loop, or during the previous row)
      if (bulk) mbar_wait(&pf_bar, iter);
      else cp_async_wait_all();
#pragma unroll
      for (int k = 0; k < K; ++k) r0[k] = lds128(my + k * TH);
    } else if constexpr (Cfg::NREG >= 1) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        r0[k] = load_raw<T, V>(q0 + k * KS, 0, rem - k * KS, fill);
        if constexpr (Cfg::NREG >= 2) r1[k] = load_raw<T, V>(q1 + k * KS, 0, rem - k * KS, fill);
      }
    }
    if constexpr (ST == 1) cp_async_wait_all();
    // The staged operand's chunk k (x forward, y backward) and the register-held ones.
    auto last = [&](int k) -> uint4 {
      if constexpr (ST == 1) return lds128(my + k * TH);
      else if constexpr (BWD) return r1[k];
      else return r0[k];
    };

    C m = 0, s = 0;  // forward: (max, sum exp(x - max)); backward: s = the dot
    if constexpr (!BWD) {
      m = ninf<C>();
      if constexpr (sizeof(T) == 2) {
        m = packed_max<T, K, UF>(last);
      } else {
#pragma unroll UF
        for (int k = 0; k < K; ++k) {
          C v[V];
          unpack<T, V>(last(k), v);
#pragma unroll
          for (int j = 0; j < V; ++j) m = cmax(m, v[j]);
          fence_value(m);  // one chunk at a time (see fence_value)
        }
      }
      // PF: the slots' values are in registers and consumed (m depends on all of them), so the
      // next row can land there while this one is reduced, exchanged and written.
      if constexpr (PF) {
        if (!bulk && grp + gstride < groups) prefetch(q_n, rem_n);
      }
      // A thread whose values are all -inf (or NaN, or padding) sums against 0: -inf adds 0,
      // NaN adds NaN.
      const C ms = m == ninf<C>() ? C(0) : m;
      auto sum_exp = [&](auto&& e) {
#pragma unroll UF
        for (int k = 0; k < K; ++k) {
          C v[V];
          unpack<T, V>(last(k), v);
#pragma unroll
          for (int j = 0; j < V; ++j) s += e(v[j]);
          fence_value(s);
        }
      };
      with_exp_from<T>(ms, fold_ok, sum_exp);  // (this thread's max: nearly always one branch per warp)
      group_combine<32, T>(m, s);
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        C a[V], b[V];
        unpack<T, V>(r0[k], a);
        if (!log) unpack<T, V>(last(k), b);
#pragma unroll
        for (int j = 0; j < V; ++j) s += log ? a[j] : a[j] * b[j];
      }
      s = group_sum<32>(s);
    }

    if constexpr (W > 1) {  // the row's warps, through shared memory
      __syncthreads();      // the slots are free (previous row group)
      // PF, bulk: every thread's vectors of the stage are in its registers and consumed.
      if (PF && bulk && tid == 0 && grp + gstride < groups) bulk_prefetch(grp + gstride);
      if (lane == 0) {
        shm[wid] = m;
        shs[wid] = s;
      }
      __syncthreads();
      if constexpr (!BWD) {
        m = lane < W ? shm[rb * W + lane] : ninf<C>();
        s = lane < W ? shs[rb * W + lane] : C(0);
        group_combine<W, T>(m, s);
        m = __shfl_sync(0xffffffffu, m, 0);
      } else {
        s = lane < W ? shs[rb * W + lane] : C(0);
        s = group_sum<W>(s);
      }
      s = __shfl_sync(0xffffffffu, s, 0);
    }

    if constexpr (CS > 1 && !PF) {  // the cluster's blocks, in rank order (the same bits in every block)
      // One row per cluster: two cluster barriers. (Their release compiles to a GPU-scope memory
      // barrier that waits for this thread's earlier stores; here there are none yet.)
      if (tid == 0) {
        clm = m;
        cls = s;
      }
      cluster_arrive_release();
      cluster_wait_acquire();
      C M = BWD ? C(0) : ninf<C>(), S = 0;
#pragma unroll
      for (unsigned r = 0; r < unsigned(CS); ++r) {
        const C s2 = cluster_read(&cls, r);
        if constexpr (BWD) S += s2;
        else combine<T>(M, S, cluster_read(&clm, r), s2);
      }
      m = M;
      s = S;
      cluster_arrive_release();  // done reading the others' slots; waited for before they exit
    }
    if constexpr (CS > 1 && PF) {  // persistent: the exchange, no barrier per row (the release above
      // would wait for the previous row's output stores). common/cluster_exchange.cuh: every
      // thread reads this row's set before the barrier of the next row's block reduction above,
      // and the next row's partials are sent after it.
      const int set = int(iter & 1u);
      if (iter == 0) cluster_wait_acquire();  // every block of the cluster runs
      if (tid < CS) xch.send(set, rank, unsigned(tid), m, s);
      xch.wait(set, iter >> 1);
      C M = BWD ? C(0) : ninf<C>(), S = 0;
#pragma unroll
      for (int r = 0; r < CS; ++r) {
        const C s2 = xch.slot[set][r][1];
        if constexpr (BWD) S += s2;
        else combine<T>(M, S, xch.slot[set][r][0], s2);
      }
      m = M;
      s = S;
      if (tid == 0) xch.rearm(set);
    }
    ++iter;

    if (active) {
      T* orow = out + row_off(g, row, 0) + first;
      if constexpr (!BWD) {
        poison_inf(m, s);
        if (m == ninf<C>()) s = std::numeric_limits<C>::quiet_NaN();  // only -inf (or NaN): NaN, as torch
        // One loop per formula under a uniform branch (a select inside the loop issues both).
        auto write = [&](auto&& f) {
#pragma unroll UF
          for (int k = 0; k < K; ++k) {
            if (k * KS < rem) {
              C v[V];
              unpack<T, V>(last(k), v);
#pragma unroll
              for (int j = 0; j < V; ++j) {
                v[j] = f(v[j]);
                fence_value(v[j]);
              }
              store_chunk<T, V>(orow + k * KS, 0, rem - k * KS, v);
            }
          }
        };
        const SoftmaxScale<T, C> sc(s);
        if (log) {
          const C ls = xlog(s);
          write([&](C v) { return (v - m) - ls; });
        } else if (fold_ok && can_fold<T>(m)) {
          if constexpr (is_half_v<T>) {
            const float c = -fmaf(m, kLog2e, sc.lg);
            write([&](float v) { return exp_folded(v, c); });
          }
        } else {
          write([&](C v) { return softmax_value(v, m, sc); });
        }
      } else {
#pragma unroll
        for (int k = 0; k < K; ++k) {
          if (k * KS < rem) {
            C a[V], b[V];
            unpack<T, V>(r0[k], a);
            unpack<T, V>(last(k), b);
#pragma unroll
            for (int j = 0; j < V; ++j) a[j] = log ? a[j] - xexp<T>(b[j]) * s : b[j] * (a[j] - s);
            store_chunk<T, V>(orow + k * KS, 0, rem - k * KS, a);
          }
        }
      }
    }
    if constexpr (CS > 1 && !PF) cluster_wait_acquire();
    // (No barrier for the stage: each thread reads back only the slots it filled itself.)
    (void)q1;
    (void)qs;
  }
}

template <class T, int W, int K, int ST, int CS, bool BWD>
__global__ void __launch_bounds__(RegCfg<T, W, K, ST, CS, BWD>::THREADS, RegCfg<T, W, K, ST, CS, BWD>::MINB)
    rows_reg(RowGeo g, T* __restrict__ out, const T* __restrict__ in0, const T* __restrict__ in1, bool log,
             bool bulk_ok, bool fold_ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  if constexpr (CS > 1) {
    __trap();  // clusters need sm_90; the launcher never picks this kernel on older devices
    return;
  } else
#endif
  rows_reg_body<T, W, K, ST, CS, BWD>(g, out, in0, in1, log, bulk_ok, fold_ok);
}

template <class T, int W, int K, int ST, int CS, bool BWD>
void reg_launch(const SmLaunch& L, const RowGeo& g, cudaStream_t st) {
  using Cfg = RegCfg<T, W, K, ST, CS, BWD>;
  auto kern = rows_reg<T, W, K, ST, CS, BWD>;
  const size_t smem = Cfg::SMEM;
  opt_in_dynamic_smem(kern, smem, "cudaFuncSetAttribute(softmax rows_reg shared memory)");
  if constexpr (Cfg::PF)  // two 64 KB blocks per SM: ask for the largest shared-memory carveout
    cuda_check(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    int(cudaSharedmemCarveoutMaxShared)),
               "cudaFuncSetAttribute(softmax rows_cluster carveout)");
  const int64_t groups = (L.rows + Cfg::R - 1) / Cfg::R;
  T* out = static_cast<T*>(L.out);
  const T* in0 = static_cast<const T*>(L.in0);
  const T* in1 = static_cast<const T*>(L.in1);
  const bool log = is_log(L.op);
  if constexpr (CS == 1) {
    kern<<<grid_of(groups), Cfg::THREADS, smem, st>>>(g, out, in0, in1, log, false, L.fold_exp);
    check_launch("softmax rows_block");
  } else {
    ClusterLaunch cl(dim3(unsigned(groups * CS)), dim3(Cfg::THREADS), smem, st, CS);  // rows * CS <= 2^30
    if constexpr (Cfg::PF) {
      // Persistent: no more clusters than are resident at once (a cluster beyond would start
      // only when a whole earlier one ends, and then run alone with nothing to overlap).
      const int64_t fit = resident_clusters<rows_reg<T, W, K, ST, CS, BWD>>(cl.cfg);  // (smem attributes set above)
      if (fit > 0 && groups > fit) cl.cfg.gridDim = dim3(unsigned(fit * CS));
    }
    cl.launch(kern, "launch of softmax rows_cluster", g, out, in0, in1, log, L.stage == 3, L.fold_exp);
  }
}

template <class T, int W, int K, int ST, int CS, bool BWD>
void reg_go(const SmLaunch& L, const RowGeo& g, cudaStream_t st) {
  if constexpr (!reg_variant_built(BWD, int(sizeof(T)), W, K, ST, CS)) {  // select() never asks for it
    throw Unsupported("softmax: rows_reg kernel w=" + std::to_string(W) + ",k=" + std::to_string(K) +
                      ",stage=" + std::to_string(ST) + ",cs=" + std::to_string(CS) +
                      " is not in this build (BARACUDA_SWEEP_KERNELS)");
  } else {
    reg_launch<T, W, K, ST, CS, BWD>(L, g, st);
  }
}

// The knob space (select() only produces these; anything else falls back to the default), of which
// the build holds reg_variant_built()'s (every one with BARACUDA_SWEEP_KERNELS):
//   CS = 1: W in {1, 2, 4, 8, 16, 32}, K in {4, 8, 16}, ST in {0, 1}
//   CS in {2, 4, 8}: W in {8, 16}, K = 8, ST in {0, 1}, and ST = 2 forward
template <class T, bool BWD, int W, int K, int ST>
void reg_cs(const SmLaunch& L, const RowGeo& g, cudaStream_t st) {
  if constexpr (K == 8 && (W == 8 || W == 16)) {
    switch (L.cluster) {
      case 2: return reg_go<T, W, K, ST, 2, BWD>(L, g, st);
      case 4: return reg_go<T, W, K, ST, 4, BWD>(L, g, st);
      case 8: return reg_go<T, W, K, ST, 8, BWD>(L, g, st);
      default: break;
    }
  }
  return reg_go<T, W, K, ST, 1, BWD>(L, g, st);
}
template <class T, bool BWD, int W, int K>
void reg_st(const SmLaunch& L, const RowGeo& g, cudaStream_t st) {
  if constexpr (!BWD && K == 8 && (W == 8 || W == 16)) {
    if (L.stage >= 2) {
      switch (L.cluster) {
        case 2: return reg_go<T, W, K, 2, 2, BWD>(L, g, st);
        case 4: return reg_go<T, W, K, 2, 4, BWD>(L, g, st);
        case 8: return reg_go<T, W, K, 2, 8, BWD>(L, g, st);
        default: break;  // no cluster: the plain register kernel below
      }
    }
  }
  if (L.stage == 1) return reg_cs<T, BWD, W, K, 1>(L, g, st);
  return reg_cs<T, BWD, W, K, 0>(L, g, st);
}
template <class T, bool BWD, int W>
void reg_k(const SmLaunch& L, const RowGeo& g, cudaStream_t st) {
  if (L.k <= 4) return reg_st<T, BWD, W, 4>(L, g, st);
  if (L.k <= 8) return reg_st<T, BWD, W, 8>(L, g, st);
  return reg_st<T, BWD, W, 16>(L, g, st);
}

template <class T, bool BWD>
void launch_reg(const SmLaunch& L, const RowGeo& g, cudaStream_t st) {
  switch (L.warps) {
    case 1: return reg_k<T, BWD, 1>(L, g, st);
    case 2: return reg_k<T, BWD, 2>(L, g, st);
    case 4: return reg_k<T, BWD, 4>(L, g, st);
    case 8: return reg_k<T, BWD, 8>(L, g, st);
    case 16: return reg_k<T, BWD, 16>(L, g, st);
    default: return reg_k<T, BWD, 32>(L, g, st);
  }
}

}  // namespace baracuda::softmax::detail
