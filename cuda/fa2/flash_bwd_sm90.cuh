// The flash backward on Hopper's warpgroup MMA (sm_90a): flash_bwd.cuh's two kernels, no atomics
// (every gradient summed in a fixed order: bitwise reproducible), with their products on wgmma.
//   grad_q:         WG warpgroups of 64 query rows of one head; over the visible key tiles of BN,
//                   S = Q K^T and dP = dO V^T (Q, dO, K, V from shared memory, K-major), dS in
//                   registers, dQ += dS K (dS as the register A operand, K read as the MN-major B).
//   grad_k, grad_v: WG warpgroups of 64 key rows of one kv head; over every query head of the group
//                   and the query tiles of BMQ that see the keys, S^T = K Q^T and dP^T = V dO^T, then
//                   dV += P^T dO and dK += dS^T Q (P^T, dS^T from registers; dO, Q MN-major).
// One shared-memory tile serves both forms of an operand: the 128-byte swizzle of a K-major [rows, D]
// tile, read through a transposed layout, is the canonical MN-major one. Tiles arrive by cp.async,
// the next one in flight while this one's products run (two stages); the score rule and the
// elementwise steps are flash_bwd.cuh's. Built only with CUTLASS's CuTe for a 90 architecture.
#pragma once
#include "fa2/flash_bwd.cuh"
#include "fa2/flash_sm90_common.cuh"

namespace baracuda::attention::flash {
namespace {

using namespace cute;

// A [ROWS, D] tile (D contiguous, 128-byte swizzle) and its (D, ROWS) view: the MN-major B operand
// of a product that sums over the tile's rows.
template <class E, int ROWS, int D> struct SwizzledRows {
  using Layout = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<E>{}, Shape<Int<ROWS>, Int<D>>{}));
  using Transposed =
      decltype(composition(Layout{}, make_layout(make_shape(Int<D>{}, Int<ROWS>{}), make_stride(Int<ROWS>{}, _1{}))));
};

// The two products of each kernel: one 64-row atom per warpgroup, the warpgroups stacked along M
// (warp w holds rows 16 w..); the first from shared memory (N = the tile's other side, summing over
// D), the second from registers (N = D, summing over the N of the first).
template <class E, int WG, int N, int D> struct BwdMmas {
  using First = decltype(make_tiled_mma(
      SM90::GMMA::ss_op_selector<E, E, float, Shape<_64, Int<N>, Int<D>>, GMMA::Major::K, GMMA::Major::K>(),
      Layout<Shape<Int<WG>, _1, _1>>{}));
  using Second = decltype(make_tiled_mma(
      SM90::GMMA::rs_op_selector<E, E, float, Shape<_64, Int<D>, Int<N>>, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<Int<WG>, _1, _1>>{}));
};

template <class T, int D_, int BN_, int WG_> struct Sm90DqConfig {
  static constexpr int D = D_, BN = BN_, WG = WG_, BM = 64 * WG_, kThreads = 128 * WG_;
  using E = typename CuteType<T>::type;
  using LayoutQ = typename SwizzledRows<E, BM, D>::Layout;  // Q and dO
  using LayoutK = typename SwizzledRows<E, BN, D>::Layout;  // K and V
  using LayoutKt = typename SwizzledRows<E, BN, D>::Transposed;
  using Mmas = BwdMmas<E, WG, BN, D>;
  static constexpr int q_elems = BM * D, k_elems = BN * D;
  // Q, dO, then two stages of K and of V; + 1024 for the alignment.
  static constexpr int smem_bytes = (2 * q_elems + 4 * k_elems) * int(sizeof(T)) + 1024;
  // Three blocks per SM at D 64 (153 registers), two above.
  static constexpr int min_blocks = D_ > 64 ? 2 : 3;
  // The exps of P run while dP's product is still in flight (two passes over the tile); off: both
  // products waited for first (at D 64, as fast under three blocks' register cap).
  static constexpr bool kOverlap = D_ > 64;
};

template <class T, int D_, int BMQ_, int WG_> struct Sm90DkvConfig {
  static constexpr int D = D_, BMQ = BMQ_, WG = WG_, BN = 64 * WG_, kThreads = 128 * WG_;
  using E = typename CuteType<T>::type;
  using LayoutK = typename SwizzledRows<E, BN, D>::Layout;    // K and V
  using LayoutQ = typename SwizzledRows<E, BMQ, D>::Layout;   // Q and dO
  using LayoutQt = typename SwizzledRows<E, BMQ, D>::Transposed;
  using Mmas = BwdMmas<E, WG, BMQ, D>;
  static constexpr int q_elems = BMQ * D, k_elems = BN * D;
  // As Sm90DqConfig's: P^T's exps while dP^T's product runs, dS^T while dV's does. Off at D 64,
  // where its live registers would cost blocks per SM (docs/benchmark-notes.md, attention backward).
  static constexpr bool kOverlap = D_ > 64;
  // Q / dO tiles by TMA on dense batches (one thread issues them; an mbarrier per stage counts their
  // bytes), which spares every thread the cp.async address math; packed sequences and seqused_k keep
  // cp.async. 0-2% faster than cp.async alone, the same bits (docs/benchmark-notes.md, attention backward).
  static constexpr bool kTma = true;
  // K, V, two stages of Q and of dO, two of the stats, two mbarriers; + 1024 for the alignment.
  static constexpr int smem_bytes = (2 * k_elems + 4 * q_elems) * int(sizeof(T)) + 4 * BMQ * 4 + 2 * 8 + 1024;
  // dK and dV stay in registers: one block's worth of cap at D 128 (two fit, 251 registers), four
  // blocks per SM at D 64 (128 registers, 12 bytes of spills; faster than three unspilled).
  static constexpr int min_blocks = D_ > 64 ? 1 : 4;
  static_assert(kThreads >= 2 * BMQ, "one thread per staged lse / delta");
};

template <class E, class Layout, class T> __device__ __forceinline__ auto smem_tile(T* ptr) {
  return make_tensor(make_smem_ptr(reinterpret_cast<E*>(ptr)), Layout{});
}
template <class T> __device__ __forceinline__ T* aligned_1024(unsigned char* raw) {
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
}

// The grad_k / grad_v kernel's TMA copies of Q and dO tiles (Cfg::kTma; `on` where the batch and
// operands allow), or nothing.
template <class T, class Cfg> struct DkvTma {
  using E = typename Cfg::E;
  using Copy = decltype(make_tma_copy(SM90_TMA_LOAD{}, tma_rows_major<E, Cfg::D>((const T*)nullptr, 1, 1, 1, Operand{}),
                                      typename Cfg::LayoutQ{}));
  Copy q, dout;
  bool on = false;
};
struct NoTma {
  bool on = false;
};
template <class T, class Cfg> using DkvTmaOf = std::conditional_t<Cfg::kTma, DkvTma<T, Cfg>, NoTma>;

template <class T, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::min_blocks) flash_bwd_dq_sm90_kernel(Geometry g, Pointers p) {
  constexpr int D = Cfg::D, BN = Cfg::BN, BM = Cfg::BM, TH = Cfg::kThreads, NT = BN / 8, DT = D / 8;
  using E = typename Cfg::E;
  using LQ = typename Cfg::LayoutQ;
  using LK = typename Cfg::LayoutK;
  extern __shared__ unsigned char smem_raw[];
  T* Qs = aligned_1024<T>(smem_raw);
  T* dOs = Qs + Cfg::q_elems;
  T* Ks = dOs + Cfg::q_elems;  // two stages
  T* Vs = Ks + 2 * Cfg::k_elems;
  Tensor sQ = smem_tile<E, LQ>(Qs);
  Tensor sdO = smem_tile<E, LQ>(dOs);

  const int w = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const Seq s = sequence(g, p, b);
  int64_t i0, i_last, nb_lo, nb_hi;
  if (!query_tile<BM, BN>(g, s, i0, i_last, nb_lo, nb_hi)) return;
  const int64_t hk = h / (g.hq / g.hkv), row0 = i0 + w * 16;
  const Score score(g, p, b, h);
  const bool plain = score.plain();
  float lse2[2], delta[2];
  query_row_stats(lse2, delta, g, p, s, b, h, row0);

  typename Cfg::Mmas::First mma_s;
  typename Cfg::Mmas::Second mma_dq;
  auto thr_s = mma_s.get_thread_slice(threadIdx.x);
  auto thr_dq = mma_dq.get_thread_slice(threadIdx.x);
  Tensor tSrQ = thr_s.partition_fragment_A(sQ);  // descriptors
  Tensor tSrdO = thr_s.partition_fragment_A(sdO);
  Tensor tSrS = partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{});
  Tensor tSrdP = partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{});
  Tensor tQrdQ = partition_fragment_C(mma_dq, Shape<Int<BM>, Int<D>>{});
  Tensor tQrdS = a_fragment<E, BN>();
  static_assert(decltype(size(tSrS))::value == NT * 4 && decltype(size(tQrdQ))::value == DT * 4, "4 per n-tile");
#pragma unroll
  for (int i = 0; i < DT * 4; ++i) tQrdQ(i) = 0.f;

  const T* kb = row_ptr<T>(p.k, b, s.k_begin, hk);
  const T* vb = row_ptr<T>(p.v, b, s.k_begin, hk);
  auto load_kv = [&](int64_t t, int stage) {
    Tensor sK = smem_tile<E, LK>(Ks + stage * Cfg::k_elems);
    Tensor sV = smem_tile<E, LK>(Vs + stage * Cfg::k_elems);
    load_swizzled<BN, D, false, TH>(sK, kb, p.k.row, (nb_lo + t) * BN, s.sk);
    load_swizzled<BN, D, false, TH>(sV, vb, p.v.row, (nb_lo + t) * BN, s.sk);
  };
  auto first = [&] {
    load_swizzled<BM, D, false, TH>(sQ, row_ptr<T>(p.q, b, s.q_begin, h), p.q.row, i0, s.sq);
    load_swizzled<BM, D, false, TH>(sdO, row_ptr<T>(p.grad_out, b, s.q_begin, h), p.grad_out.row, i0, s.sq);
    load_kv(0, 0);
  };
  // cp.async's writes, then a proxy fence before wgmma reads them
  auto landed = [](int64_t, int) { cutlass::arch::fence_view_async_shared(); };
  pipelined_steps(nb_hi - nb_lo, first, load_kv, landed, [&](int64_t t, int stage) {
    Tensor tSrK = thr_s.partition_fragment_B(smem_tile<E, LK>(Ks + stage * Cfg::k_elems));
    Tensor tSrV = thr_s.partition_fragment_B(smem_tile<E, LK>(Vs + stage * Cfg::k_elems));
    Tensor tQrKt = thr_dq.partition_fragment_B(smem_tile<E, typename Cfg::LayoutKt>(Ks + stage * Cfg::k_elems));

    issue_qk(mma_s, tSrQ, tSrK, tSrS);
    issue_qk(mma_s, tSrdO, tSrV, tSrdP);
    const int64_t j0 = (nb_lo + t) * BN;
    const bool full = tile_inside(g, s, i0, i_last, j0, j0 + BN - 1);
    auto sc = [&](int i) -> float& { return tSrS(i); };
    warpgroup_wait<Cfg::kOverlap ? 1 : 0>();  // S is in; with kOverlap dP may still run
    warpgroup_fence_operand(tSrS);
    scaled_probs<NT>(sc, g, s, score, full, plain, lse2, row0, j0);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tSrdP);
    grad_scores<NT>(sc, [&](int i) -> float& { return tSrdP(i); }, delta, [&](int i, float ds) { tQrdS(i) = E(ds); });
    issue_pv(mma_dq, tQrdS, tQrKt, tQrdQ);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tQrdQ);
  });
  store_grad_rows<T, DT>([&](int i) -> float& { return tQrdQ(i); }, p.grad_q, b, s.q_begin, h, row0, s.sq);
}

template <class T, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::min_blocks)
    flash_bwd_dkv_sm90_kernel(Geometry g, Pointers p, const __grid_constant__ DkvTmaOf<T, Cfg> tma) {
  constexpr int D = Cfg::D, BMQ = Cfg::BMQ, BN = Cfg::BN, TH = Cfg::kThreads, NQ = BMQ / 8, DT = D / 8;
  using E = typename Cfg::E;
  using LK = typename Cfg::LayoutK;
  using LQ = typename Cfg::LayoutQ;
  using LQt = typename Cfg::LayoutQt;
  extern __shared__ unsigned char smem_raw[];
  T* Ks = aligned_1024<T>(smem_raw);
  T* Vs = Ks + Cfg::k_elems;
  T* Qs = Vs + Cfg::k_elems;  // two stages
  T* dOs = Qs + 2 * Cfg::q_elems;
  float* sLse = reinterpret_cast<float*>(dOs + 2 * Cfg::q_elems);  // two stages of BMQ
  float* sDelta = sLse + 2 * BMQ;
  const StagedQueryStats<BMQ> staged{sLse, sDelta};
  uint64_t* full = reinterpret_cast<uint64_t*>(sDelta + 2 * BMQ);  // per stage, the TMA path's
  Tensor sK = smem_tile<E, LK>(Ks);
  Tensor sV = smem_tile<E, LK>(Vs);

  const int w = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, hk = blockIdx.y;
  const Seq s = sequence(g, p, b);
  const int64_t rows_k = s.rows_k;
  const int64_t j0 = int64_t(blockIdx.x) * BN, krow0 = j0 + w * 16;
  if (j0 >= rows_k) return;
  const int64_t group = g.hq / g.hkv;

  typename Cfg::Mmas::First mma_s;
  typename Cfg::Mmas::Second mma_kv;
  auto thr_s = mma_s.get_thread_slice(threadIdx.x);
  auto thr_kv = mma_kv.get_thread_slice(threadIdx.x);
  Tensor tSrK = thr_s.partition_fragment_A(sK);  // descriptors
  Tensor tSrV = thr_s.partition_fragment_A(sV);
  Tensor tSrSt = partition_fragment_C(mma_s, Shape<Int<BN>, Int<BMQ>>{});
  Tensor tSrdPt = partition_fragment_C(mma_s, Shape<Int<BN>, Int<BMQ>>{});
  Tensor tKVrdK = partition_fragment_C(mma_kv, Shape<Int<BN>, Int<D>>{});
  Tensor tKVrdV = partition_fragment_C(mma_kv, Shape<Int<BN>, Int<D>>{});
  Tensor tKVrPt = a_fragment<E, BMQ>();
  Tensor tKVrdSt = a_fragment<E, BMQ>();
  static_assert(decltype(size(tSrSt))::value == NQ * 4 && decltype(size(tKVrdK))::value == DT * 4, "4 per n-tile");
#pragma unroll
  for (int i = 0; i < DT * 4; ++i) tKVrdK(i) = tKVrdV(i) = 0.f;

  const QueryTiles<BMQ> walk(g, s, j0, BN, hk, group);
  const bool by_tma = tma.on;
  if constexpr (Cfg::kTma) {
    if (by_tma && threadIdx.x == 0) {
      kernels::mbar_init(&full[0], 1);
      kernels::mbar_init(&full[1], 1);
    }
    __syncthreads();
  }
  auto load_q = [&](int64_t it, int stage) {
    const int64_t h = walk.head(it), i0 = walk.row0(it);
    Tensor sQ = smem_tile<E, LQ>(Qs + stage * Cfg::q_elems);
    Tensor sdO = smem_tile<E, LQ>(dOs + stage * Cfg::q_elems);
    auto load_by_threads = [&] {  // cp.async: packed sequences, seqused_k, or TMA compiled out
      load_swizzled<BMQ, D, false, TH>(sQ, row_ptr<T>(p.q, b, s.q_begin, h), p.q.row, i0, s.sq);
      load_swizzled<BMQ, D, false, TH>(sdO, row_ptr<T>(p.grad_out, b, s.q_begin, h), p.grad_out.row, i0, s.sq);
    };
    if constexpr (Cfg::kTma) {
      if (by_tma) {
        if (threadIdx.x == 0) {  // rows past the tensor come in as zeros
          kernels::mbar_arrive_expect_tx(&full[stage], unsigned(2 * Cfg::q_elems * sizeof(T)));
          const auto shape = make_shape(int32_t(g.sq), Int<D>{}, int32_t(g.hq), int32_t(g.batch));
          Tensor gQ =
              local_tile(tma.q.get_tma_tensor(shape)(_, _, h, b), Shape<Int<BMQ>, Int<D>>{}, make_coord(_, _0{}));
          Tensor gdO =
              local_tile(tma.dout.get_tma_tensor(shape)(_, _, h, b), Shape<Int<BMQ>, Int<D>>{}, make_coord(_, _0{}));
          auto cq = tma.q.get_slice(_0{});
          auto co = tma.dout.get_slice(_0{});
          copy(tma.q.with(full[stage]), group_modes<0, 3>(cq.partition_S(gQ))(_, int(i0 / BMQ)),
               group_modes<0, 3>(cq.partition_D(sQ)));
          copy(tma.dout.with(full[stage]), group_modes<0, 3>(co.partition_S(gdO))(_, int(i0 / BMQ)),
               group_modes<0, 3>(co.partition_D(sdO)));
        }
      } else {
        load_by_threads();
      }
    } else {
      load_by_threads();
    }
    staged.load(stage, g, p, s, b, h, i0);  // the tile's lse and delta beside it
  };
  auto first = [&] {
    load_swizzled<BN, D, false, TH>(sK, row_ptr<T>(p.k, b, s.k_begin, hk), p.k.row, j0, s.sk);
    load_swizzled<BN, D, false, TH>(sV, row_ptr<T>(p.v, b, s.k_begin, hk), p.v.row, j0, s.sk);
    load_q(0, 0);
  };
  auto landed = [&](int64_t it, int stage) {
    cutlass::arch::fence_view_async_shared();
    if constexpr (Cfg::kTma)
      if (by_tma) kernels::mbar_wait(&full[stage], unsigned((it >> 1) & 1));  // the stage's (it / 2)-th use
  };
  pipelined_steps(walk.total, first, load_q, landed, [&](int64_t it, int stage) {
    T* Q = Qs + stage * Cfg::q_elems;
    T* dO = dOs + stage * Cfg::q_elems;
    const int64_t h = walk.head(it), i0 = walk.row0(it);
    const Score score(g, p, b, h);

    // The query column c's stats, staged.
    const auto stats_now = staged.at(stage);
    auto lse2_of = [&](int c, bool in) { return stats_now.lse2(c, in); };
    auto delta_of = [&](int c, bool in) { return stats_now.delta_of(c, in); };
    auto st = [&](int i) -> float& { return tSrSt(i); };
    auto dpt = [&](int i) -> float& { return tSrdPt(i); };

    issue_qk(mma_s, tSrK, thr_s.partition_fragment_B(smem_tile<E, LQ>(Q)), tSrSt);
    issue_qk(mma_s, tSrV, thr_s.partition_fragment_B(smem_tile<E, LQ>(dO)), tSrdPt);
    const bool full = i0 + BMQ <= s.sq && tile_inside(g, s, i0, i0 + BMQ - 1, j0, j0 + BN - 1);
    if constexpr (Cfg::kOverlap) {
      warpgroup_wait<1>();  // S^T is in; dP^T may still run
      warpgroup_fence_operand(tSrSt);
      probs_transposed<NQ>(st, [&](int i, float pr) { tKVrPt(i) = E(pr); }, lse2_of, g, s, score, full, i0, krow0);
      issue_pv(mma_kv, tKVrPt, thr_kv.partition_fragment_B(smem_tile<E, LQt>(dO)), tKVrdV);
      warpgroup_wait<1>();  // dP^T is in; dV may still run
      warpgroup_fence_operand(tSrdPt);
      grad_scores_from_probs<NQ>(st, dpt, delta_of, s, i0, [&](int i, float ds) { tKVrdSt(i) = E(ds); });
    } else {
      warpgroup_wait<0>();
      warpgroup_fence_operand(tSrSt);
      warpgroup_fence_operand(tSrdPt);
      grad_scores_transposed<NQ>(st, dpt, lse2_of, delta_of, g, s, score, full, i0, krow0);
#pragma unroll
      for (int i = 0; i < NQ * 4; ++i) tKVrPt(i) = E(tSrSt(i));
      issue_pv(mma_kv, tKVrPt, thr_kv.partition_fragment_B(smem_tile<E, LQt>(dO)), tKVrdV);
#pragma unroll
      for (int i = 0; i < NQ * 4; ++i) tKVrdSt(i) = E(tSrdPt(i));
    }
    issue_pv(mma_kv, tKVrdSt, thr_kv.partition_fragment_B(smem_tile<E, LQt>(Q)), tKVrdK);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tKVrdV);
    warpgroup_fence_operand(tKVrdK);
  });
  store_grad_rows<T, DT>([&](int i) -> float& { return tKVrdK(i); }, p.grad_k, b, s.k_begin, hk, krow0, rows_k);
  store_grad_rows<T, DT>([&](int i) -> float& { return tKVrdV(i); }, p.grad_v, b, s.k_begin, hk, krow0, rows_k);
}

template <class T, class Dq, class Dkv>
void launch_backward_sm90(const Geometry& g, const Pointers& p, cudaStream_t st) {
  DkvTmaOf<T, Dkv> tma{};
  if constexpr (Dkv::kTma) {
    const int64_t es = int64_t(sizeof(T));
    if (!g.varlen && !g.has_seqused_k && tma_operand_ok(p.q, es, g.sq, g.hq, g.batch) &&
        tma_operand_ok(p.grad_out, es, g.sq, g.hq, g.batch)) {
      auto rows = [&](const Operand& o) {
        return tma_rows_major<typename Dkv::E, Dkv::D>(static_cast<const T*>(o.data), g.sq, g.hq, g.batch, o);
      };
      tma.q = make_tma_copy(SM90_TMA_LOAD{}, rows(p.q), typename Dkv::LayoutQ{});
      tma.dout = make_tma_copy(SM90_TMA_LOAD{}, rows(p.grad_out), typename Dkv::LayoutQ{});
      tma.on = true;
    }
  }
  launch_backward_kernels<flash_bwd_dq_sm90_kernel<T, Dq>, flash_bwd_dkv_sm90_kernel<T, Dkv>, Dq, Dkv>(g, p, st, tma);
}

}  // namespace

// The entry of each dtype's translation unit (explicitly instantiated there): grad_q over key tiles
// of 64, grad_k / grad_v over query tiles of 32 (64 spilled at d128, and ran 1.3x slower; 1.06-1.09x
// slower at d64: docs/benchmark-notes.md), one warpgroup per block.
template <class T> void backward_sm90(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  if constexpr (head_dim_built(64))
    if (g.d == 64)
      return launch_backward_sm90<T, Sm90DqConfig<T, 64, 64, 1>, Sm90DkvConfig<T, 64, 32, 1>>(g, p, stream);
  if constexpr (head_dim_built(128))
    if (g.d == 128)
      return launch_backward_sm90<T, Sm90DqConfig<T, 128, 64, 1>, Sm90DkvConfig<T, 128, 32, 1>>(g, p, stream);
  throw Unsupported("attention: no sm90 flash backward for head dim " + std::to_string(g.d));
}

}  // namespace baracuda::attention::flash
