// The flash forward on Hopper's warpgroup MMA (sm_90a): the FlashAttention-2 kernel of flash_fwd.cuh
// with its two products on wgmma. WG warpgroups (four warps each) take 64 WG query rows of one
// (sequence, head), sharing each K / V tile; S = Q K^T reads Q and K from shared memory (both K-major, 128-byte swizzle), O += P V takes
// P from registers (the accumulator fragment of S, rounded to 16 bits, is the A fragment of the
// second product: the same per-warp layout as mma.sync's) and V from shared memory as an MN-major
// operand. Tiles arrive by cp.async (K of the next tile in flight while this tile's P V runs), as in
// the mma.sync kernel; the score rule, the online softmax and the epilogue are that kernel's.
// A first Hopper kernel: no overlap of softmax with the products within a warpgroup; the w128n128
// tile is warp-specialized (a producer warpgroup, two consumers: below), its tiles by TMA on dense
// batches.
//
// The kernels, for the per-dtype translation units flash_fwd_{bf16,f16}_sm90.cu (parallel compiles);
// flash_sm90.cu holds the entry points. Built only with CUTLASS's CuTe for a 90 architecture.
#pragma once
#include "fa2/flash_sm90_common.cuh"

namespace baracuda::attention::flash {
namespace {

using namespace cute;

template <class T, int D_, int BN_, int WG_> struct Sm90Config {
  static constexpr int D = D_, BN = BN_, WG = WG_, BM = 64 * WG_, kThreads = 128 * WG_;
  using E = typename CuteType<T>::type;
  // Q [BM, D] and K [BN, D]: K-major (D contiguous); V seen as the B operand of O = P V, (N = D,
  // K = BN) with D contiguous: MN-major. 128-byte swizzle: 1024-byte aligned tiles.
  using LayoutQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<E>{}, Shape<Int<BM>, Int<D>>{}));
  using LayoutK = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<E>{}, Shape<Int<BN>, Int<D>>{}));
  using LayoutVt = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<E>{}, Shape<Int<D>, Int<BN>>{}));
  // One 64-row atom per warpgroup, the warpgroups stacked along M (warp w holds rows 16 w..).
  using MmaS = decltype(make_tiled_mma(
      SM90::GMMA::ss_op_selector<E, E, float, Shape<_64, Int<BN>, Int<D>>, GMMA::Major::K, GMMA::Major::K>(),
      Layout<Shape<Int<WG>, _1, _1>>{}));
  using MmaO = decltype(make_tiled_mma(
      SM90::GMMA::rs_op_selector<E, E, float, Shape<_64, Int<D>, Int<BN>>, GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<Int<WG>, _1, _1>>{}));
  // Blocks per SM the registers are capped for: one warpgroup at d128 took 252 registers (2 blocks);
  // at 3 (168, 152 bytes of spills) it is 8% faster (tools/probe attention, docs/benchmark-notes.md).
  static constexpr int min_blocks = WG == 1 ? 3 : 1;
  static constexpr int q_elems = BM * D, k_elems = BN * D;
  static constexpr int smem_bytes = (q_elems + 2 * k_elems) * int(sizeof(T)) + 1024;  // + alignment slack
};

template <class T, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::min_blocks) flash_fwd_sm90_kernel(Geometry g, Pointers p) {
  constexpr int D = Cfg::D, BN = Cfg::BN, BM = Cfg::BM, TH = Cfg::kThreads;
  constexpr int NT = BN / 8, DT = D / 8;
  using E = typename Cfg::E;
  extern __shared__ unsigned char smem_raw[];
  T* Qs = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  T* Ks = Qs + Cfg::q_elems;
  T* Vs = Ks + Cfg::k_elems;
  const typename Cfg::LayoutQ lq{};
  const typename Cfg::LayoutK lk{};
  const typename Cfg::LayoutVt lv{};
  Tensor sQ = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Qs)), lq);
  Tensor sK = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Ks)), lk);
  Tensor sVt = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Vs)), lv);

  const int w = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const Seq s = sequence(g, p, b);
  int64_t i0, i_last, nb_lo, nb_hi;
  if (!query_tile<BM, BN>(g, s, i0, i_last, nb_lo, nb_hi)) return;
  const int64_t hk = h / (g.hq / g.hkv);

  const T* qb = row_ptr<T>(p.q, b, s.q_begin, h);
  const T* kb = row_ptr<T>(p.k, b, s.k_begin, hk);
  const T* vb = row_ptr<T>(p.v, b, s.k_begin, hk);

  const Score score(g, p, b, h);
  const bool plain = score.plain();

  typename Cfg::MmaS mma_s;
  typename Cfg::MmaO mma_o;
  auto thr_s = mma_s.get_thread_slice(threadIdx.x);
  auto thr_o = mma_o.get_thread_slice(threadIdx.x);
  Tensor tSrQ = thr_s.partition_fragment_A(sQ);   // descriptors
  Tensor tSrK = thr_s.partition_fragment_B(sK);
  Tensor tOrV = thr_o.partition_fragment_B(sVt);
  Tensor tSrS = partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{});
  Tensor tOrO = partition_fragment_C(mma_o, Shape<Int<BM>, Int<D>>{});
  Tensor tOrP = a_fragment<E, BN>();  // P as the A operand of O = P V
  static_assert(decltype(size(tSrS))::value == NT * 4, "S fragment: 4 per n-tile");
  static_assert(decltype(size(tOrO))::value == DT * 4, "O fragment: 4 per n-tile");

  float m[2], l[2];
#pragma unroll
  for (int i = 0; i < DT * 4; ++i) tOrO(i) = 0.f;  // element 4 nt + e: the C fragment order of flash_common.cuh
  m[0] = m[1] = -INFINITY;
  l[0] = l[1] = 0.f;

  if (nb_lo < nb_hi) {
    load_swizzled<BM, D, false, TH>(sQ, qb, p.q.row, i0, s.sq);
    load_swizzled<BN, D, false, TH>(sK, kb, p.k.row, nb_lo * BN, s.sk);
    kernels::cp_async_commit();
  }
  for (int64_t nb = nb_lo; nb < nb_hi; ++nb) {
    const int64_t j0 = nb * BN;
    load_swizzled<BN, D, true, TH>(sVt, vb, p.v.row, j0, s.sk);
    kernels::cp_async_commit();
    kernels::cp_async_wait<1>();
    cutlass::arch::fence_view_async_shared();  // cp.async's writes, before wgmma reads them
    __syncthreads();                           // Q and this K tile are in

    issue_qk(mma_s, tSrQ, tSrK, tSrS);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tSrS);
    __syncthreads();  // every warp is done with this K tile
    if (nb + 1 < nb_hi) load_swizzled<BN, D, false, TH>(sK, kb, p.k.row, j0 + BN, s.sk);
    kernels::cp_async_commit();

    // Scores in the log2 domain, x = f * s (flash_fwd.cuh's rule).
    auto sc = [&](int i) -> float& { return tSrS(i); };
    auto oc = [&](int i) -> float& { return tOrO(i); };
    const float f = score_tile<NT>(sc, g, s, score, plain, i0, i_last, i0 + w * 16, j0, j0 + BN - 1);
    online_softmax<NT, DT>(sc, oc, m, l, f);
#pragma unroll
    for (int i = 0; i < NT * 4; ++i) tOrP(i) = E(tSrS(i));  // the C fragments' order (flash_common.cuh)

    kernels::cp_async_wait<1>();
    cutlass::arch::fence_view_async_shared();
    __syncthreads();  // this V tile is in
    issue_pv(mma_o, tOrP, tOrV, tOrO);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);
    __syncthreads();  // every warp is done with this V tile
  }
  kernels::cp_async_wait<0>();

  const float sink_log2 = g.sinks ? static_cast<const float*>(p.sinks)[h] * kLog2e : -INFINITY;
  store_rows<T, DT>([&](int i) -> float& { return tOrO(i); }, m, l, g, p, s, b, h, i0 + w * 16, sink_log2);
}

// The warp-specialized forward (tile w128n128): warpgroup 0 is the producer, copying Q once and then
// each K / V tile into a ring of S shared-memory stages (by TMA on dense batches, one thread issuing a
// tile, the barrier counting its bytes; else cp.async, whose arrival on the stage's mbarrier marks it
// full once the copies land); warpgroups 1 and 2 are consumers of 64 query rows each,
// running S = Q K^T, the score rule, the online softmax and O += P V on every full stage, then marking
// it empty for the producer's next tile. Registers move from the producer to the consumers
// (setmaxnreg); no block-wide barrier inside the loop, so one consumer's softmax overlaps the
// other's products and the next tile's copies.
template <class T, int D_, int BN_, int S_> struct Sm90WsConfig {
  static constexpr int D = D_, BN = BN_, S = S_, BM = 128, kThreads = 384;
  // 128 x 40 + 256 x 232 <= 384 x 168 (what the launch holds: setmaxnreg.inc hangs past it). kOverlap
  // wants 240 for the consumers (104 bytes of spills at d128 even so), which leaves the producer 24.
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static constexpr int kProducerUnroll = 4;                        // copies per loop step: fits 40 registers
  // The consumers take turns issuing S = Q K^T (named barriers 1 and 2), so that one's softmax runs
  // while the other's product does (FlashAttention-3's ping-pong); off: whenever each is ready.
  static constexpr bool kPingPong = false;
  // The producer's copies mark a stage full by cp.async.mbarrier.arrive (the barrier completes when
  // they land; the producer moves on: S tiles in flight); off: it waits for its copies, then arrives.
  static constexpr bool kAsyncArrive = true;
  // Each consumer issues tile j's S = Q K^T and tile j - 1's O += P V back to back, and runs tile j's
  // softmax while the second product does (FlashAttention-3's intra-warpgroup overlap); O's rescale
  // waits for that product. Off: each product waited for before the softmax.
  static constexpr bool kOverlap = false;
  static_assert(!(kOverlap && kPingPong), "one schedule of the consumers' products at a time");
  // Tiles by TMA: one producer thread issues a tile's copy (the TMA unit swizzles it into the layout
  // the products read) on dense batches whose addresses and strides allow; else cp.async as above.
  static constexpr bool kTma = true;
  using E = typename CuteType<T>::type;
  using LayoutQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<E>{}, Shape<_64, Int<D>>{}));  // a consumer's
  using LayoutK = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<E>{}, Shape<Int<BN>, Int<D>>{}));
  using LayoutVt = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<E>{}, Shape<Int<D>, Int<BN>>{}));
  using MmaS = decltype(make_tiled_mma(
      SM90::GMMA::ss_op_selector<E, E, float, Shape<_64, Int<BN>, Int<D>>, GMMA::Major::K, GMMA::Major::K>()));
  using MmaO = decltype(make_tiled_mma(
      SM90::GMMA::rs_op_selector<E, E, float, Shape<_64, Int<D>, Int<BN>>, GMMA::Major::K, GMMA::Major::MN>()));
  static constexpr int q_elems = 64 * D, k_elems = BN * D;
  // Q (two 64-row tiles), S stages of K and of V, then the barriers; + 1024 for the alignment.
  static constexpr int tiles_bytes = (2 * q_elems + 2 * S * k_elems) * int(sizeof(T));
  static constexpr int smem_bytes = tiles_bytes + (2 * S + 1) * 8 + 1024;
  static_assert(smem_bytes <= 227 * 1024, "past the shared memory an sm_90 block may have");
};

// The TMA copies of the warp-specialized tile: q / k as (rows, D, heads, batch) and v as
// (D, rows, heads, batch) (the MN-major operand), element strides of the operand, D contiguous.
// Rows past the tensor come in as zeros: dense batches only (a packed sequence's neighbours, or keys
// past seqused_k, would come in as they are, where the cp.async path zero-fills).
template <class T, class Cfg> struct WsTma {
  using E = typename Cfg::E;
  static constexpr int D = Cfg::D;
  static auto rows_major(const T* ptr, int64_t rows, int64_t heads, int64_t batch, const Operand& o) {
    return tma_rows_major<E, D>(ptr, rows, heads, batch, o);
  }
  static auto d_major(const T* ptr, int64_t rows, int64_t heads, int64_t batch, const Operand& o) {
    return make_tensor(make_gmem_ptr(reinterpret_cast<const E*>(ptr)),
                       make_layout(make_shape(Int<D>{}, int32_t(rows), int32_t(heads), int32_t(batch)),
                                   make_stride(_1{}, o.row, o.head, o.batch)));
  }
  using Q = decltype(make_tma_copy(SM90_TMA_LOAD{}, rows_major(nullptr, 1, 1, 1, Operand{}), typename Cfg::LayoutQ{}));
  using K = decltype(make_tma_copy(SM90_TMA_LOAD{}, rows_major(nullptr, 1, 1, 1, Operand{}), typename Cfg::LayoutK{}));
  using V = decltype(make_tma_copy(SM90_TMA_LOAD{}, d_major(nullptr, 1, 1, 1, Operand{}), typename Cfg::LayoutVt{}));
  Q q;
  K k;
  V v;
  bool on = false;
};
template <class T, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    flash_fwd_sm90_ws_kernel(Geometry g, Pointers p, const __grid_constant__ WsTma<T, Cfg> tma) {
  constexpr int D = Cfg::D, BN = Cfg::BN, S = Cfg::S, NT = BN / 8, DT = D / 8;
  using E = typename Cfg::E;
  extern __shared__ unsigned char smem_raw[];
  T* Qs = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  T* Ks = Qs + 2 * Cfg::q_elems;  // S stages
  T* Vs = Ks + S * Cfg::k_elems;  // S stages
  uint64_t* full = reinterpret_cast<uint64_t*>(Vs + S * Cfg::k_elems);
  uint64_t* empty = full + S;
  uint64_t* q_full = empty + S;
  const typename Cfg::LayoutQ lq{};
  const typename Cfg::LayoutK lk{};
  const typename Cfg::LayoutVt lv{};

  const int64_t b = blockIdx.z, h = blockIdx.y;
  const Seq s = sequence(g, p, b);
  int64_t i0, i_last, nb_lo, nb_hi;
  if (!query_tile<Cfg::BM, BN>(g, s, i0, i_last, nb_lo, nb_hi)) return;
  const int64_t hk = h / (g.hq / g.hkv);
  // warp-uniform for the compiler (setmaxnreg applies per warpgroup)
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0), tid = int(threadIdx.x) % 128;
  const bool by_tma = Cfg::kTma && tma.on;
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; ++i) {
      kernels::mbar_init(&full[i], by_tma ? 1 : 128);  // the producer's issuing thread, or all its threads
      kernels::mbar_init(&empty[i], 256);              // the consumers' threads
    }
    kernels::mbar_init(q_full, by_tma ? 1 : 128);
  }
  __syncthreads();

  if (wg == 0) {  // the producer (its threads are threadIdx.x 0..127, what load_swizzled indexes by)
    cutlass::arch::warpgroup_reg_dealloc<Cfg::kProducerRegs>();
    if (nb_lo >= nb_hi) return;
    if constexpr (Cfg::kTma) {
      if (by_tma) {
        if (tid != 0) return;
        // Q's two 64-row tiles, then each K / V tile once the consumers have released its stage.
        Tensor mQ = tma.q.get_tma_tensor(make_shape(int32_t(g.sq), Int<D>{}, int32_t(g.hq), int32_t(g.batch)));
        Tensor mK = tma.k.get_tma_tensor(make_shape(int32_t(g.sk), Int<D>{}, int32_t(g.hkv), int32_t(g.batch)));
        Tensor mV = tma.v.get_tma_tensor(make_shape(Int<D>{}, int32_t(g.sk), int32_t(g.hkv), int32_t(g.batch)));
        Tensor gQ = local_tile(mQ(_, _, h, b), Shape<_64, Int<D>>{}, make_coord(_, _0{}));     // (64, D, q tiles)
        Tensor gK = local_tile(mK(_, _, hk, b), Shape<Int<BN>, Int<D>>{}, make_coord(_, _0{}));  // (BN, D, tiles)
        Tensor gV = local_tile(mV(_, _, hk, b), Shape<Int<D>, Int<BN>>{}, make_coord(_0{}, _));  // (D, BN, tiles)
        auto cq = tma.q.get_slice(_0{});
        auto ck = tma.k.get_slice(_0{});
        auto cv = tma.v.get_slice(_0{});
        Tensor tQg = group_modes<0, 3>(cq.partition_S(gQ));
        Tensor tKg = group_modes<0, 3>(ck.partition_S(gK));
        Tensor tVg = group_modes<0, 3>(cv.partition_S(gV));
        kernels::mbar_arrive_expect_tx(q_full, unsigned(2 * Cfg::q_elems * sizeof(T)));
        for (int c = 0; c < 2; ++c) {
          Tensor sQ = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Qs + c * Cfg::q_elems)), lq);
          copy(tma.q.with(*q_full), tQg(_, int(i0 / 64) + c), group_modes<0, 3>(cq.partition_D(sQ)));
        }
        for (int64_t nb = nb_lo; nb < nb_hi; ++nb) {
          const int64_t k = nb - nb_lo;
          const int st = int(k % S);
          if (k >= S) kernels::mbar_wait(&empty[st], unsigned(k / S - 1));
          Tensor sK = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Ks + st * Cfg::k_elems)), lk);
          Tensor sVt = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Vs + st * Cfg::k_elems)), lv);
          kernels::mbar_arrive_expect_tx(&full[st], unsigned(2 * Cfg::k_elems * sizeof(T)));
          copy(tma.k.with(full[st]), tKg(_, int(nb)), group_modes<0, 3>(ck.partition_D(sK)));
          copy(tma.v.with(full[st]), tVg(_, int(nb)), group_modes<0, 3>(cv.partition_D(sVt)));
        }
        return;
      }
    }
    const T* qb = row_ptr<T>(p.q, b, s.q_begin, h);
    const T* kb = row_ptr<T>(p.k, b, s.k_begin, hk);
    const T* vb = row_ptr<T>(p.v, b, s.k_begin, hk);
    auto publish = [](uint64_t* bar) {  // the stage is full once this thread's copies have landed
      if constexpr (Cfg::kAsyncArrive) {
        cutlass::arch::cpasync_barrier_arrive_noinc(bar);  // counts as this thread's arrival when they land
      } else {
        kernels::cp_async_commit();
        kernels::cp_async_wait<0>();
        cutlass::arch::fence_view_async_shared();
        kernels::mbar_arrive(bar);
      }
    };
    for (int c = 0; c < 2; ++c) {
      Tensor sQ = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Qs + c * Cfg::q_elems)), lq);
      load_swizzled<64, D, false, 128, Cfg::kProducerUnroll>(sQ, qb, p.q.row, i0 + 64 * c, s.sq);
    }
    publish(q_full);
    for (int64_t nb = nb_lo; nb < nb_hi; ++nb) {
      const int64_t k = nb - nb_lo;
      const int st = int(k % S);
      if (k >= S) kernels::mbar_wait(&empty[st], unsigned(k / S - 1));  // the consumers are done with it
      Tensor sK = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Ks + st * Cfg::k_elems)), lk);
      Tensor sVt = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Vs + st * Cfg::k_elems)), lv);
      load_swizzled<BN, D, false, 128, Cfg::kProducerUnroll>(sK, kb, p.k.row, nb * BN, s.sk);
      load_swizzled<BN, D, true, 128, Cfg::kProducerUnroll>(sVt, vb, p.v.row, nb * BN, s.sk);
      publish(&full[st]);
    }
    kernels::cp_async_wait<0>();  // no copy of an exited thread left in flight
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<Cfg::kConsumerRegs>();
  const int c = wg - 1, w = tid >> 5;
  const int64_t row0 = i0 + 64 * c + 16 * w;  // this warp's first query row
  Tensor sQ = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Qs + c * Cfg::q_elems)), lq);
  const Score score(g, p, b, h);
  const bool plain = score.plain();
  typename Cfg::MmaS mma_s;
  typename Cfg::MmaO mma_o;
  auto thr_s = mma_s.get_thread_slice(tid);
  auto thr_o = mma_o.get_thread_slice(tid);
  Tensor tSrQ = thr_s.partition_fragment_A(sQ);
  Tensor tSrS = partition_fragment_C(mma_s, Shape<_64, Int<BN>>{});
  Tensor tOrO = partition_fragment_C(mma_o, Shape<_64, Int<D>>{});
  Tensor tOrP = a_fragment<E, BN>();
  static_assert(decltype(size(tSrS))::value == NT * 4, "S fragment: 4 per n-tile");
  static_assert(decltype(size(tOrO))::value == DT * 4, "O fragment: 4 per n-tile");

  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < DT * 4; ++i) tOrO(i) = 0.f;
  // Ping-pong: consumer c syncs on barrier 1 + c before its S product and then lets the other go
  // (arrives on the other's); consumer 1 opens consumer 0's first turn and skips its last arrival, so
  // every barrier's arrivals match its syncs.
  // (Literal barrier ids: a register id makes ptxas reserve all 16.)
  auto turn_sync = [&] {
    if constexpr (Cfg::kPingPong) {
      if (c == 0) asm volatile("bar.sync 1, 256;" ::: "memory");
      else asm volatile("bar.sync 2, 256;" ::: "memory");
    }
  };
  auto turn_pass = [&](bool last) {
    if constexpr (Cfg::kPingPong) {
      if (c == 0) asm volatile("bar.arrive 2, 256;" ::: "memory");
      else if (!last) asm volatile("bar.arrive 1, 256;" ::: "memory");
    }
  };
  // The overlapped schedule (kOverlap): S_j and the previous tile's P V in flight together; tile j's
  // softmax runs while P V does, then O is rescaled and P_j takes the registers P V has read.
  auto consume_overlapped = [&] {
    if (nb_lo >= nb_hi) return;
    kernels::mbar_wait(q_full, 0);
    int prev = 0;  // the stage whose V the pending P V reads
    for (int64_t nb = nb_lo; nb < nb_hi; ++nb) {
      const int64_t k = nb - nb_lo, j0 = nb * BN;
      const int st = int(k % S);
      kernels::mbar_wait(&full[st], unsigned(k / S));
      cutlass::arch::fence_view_async_shared();
      Tensor sK = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Ks + st * Cfg::k_elems)), lk);
      Tensor tSrK = thr_s.partition_fragment_B(sK);
      Tensor tOrV = thr_o.partition_fragment_B(  // the previous tile's V
          make_tensor(make_smem_ptr(reinterpret_cast<E*>(Vs + prev * Cfg::k_elems)), lv));
      issue_qk(mma_s, tSrQ, tSrK, tSrS);
      if (k > 0) {
        issue_pv(mma_o, tOrP, tOrV, tOrO);
        warpgroup_wait<1>();  // S_j is in; P V may still run
      } else {
        warpgroup_wait<0>();
      }
      warpgroup_fence_operand(tSrS);

      auto sc = [&](int i) -> float& { return tSrS(i); };
      auto oc = [&](int i) -> float& { return tOrO(i); };
      const float f = score_tile<NT>(sc, g, s, score, plain, i0, i_last, row0, j0, j0 + BN - 1);
      const float m_old[2] = {m[0], m[1]};
      online_softmax<NT, 0>(sc, oc, m, l, f);  // O's rescale below, once P V has written it
      // Unconditional (nothing is in flight on the first tile): ptxas sees P V retired on every path
      // into P's conversion below, else it serializes the products.
      warpgroup_wait<0>();
      warpgroup_fence_operand(tOrO);
      {
        Tensor tOrPu = recast<uint32_t>(tOrP);  // P's next values written only after this wait
        warpgroup_fence_operand(tOrPu);
      }
      if (k > 0) kernels::mbar_arrive(&empty[prev]);  // this thread's products have read that stage
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {  // online_softmax's correction, from the maxima before and after
        const float corr = kernels::ex2_ftz(m_old[hf] - (m[hf] == -INFINITY ? 0.f : m[hf]));
#pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
          tOrO(dt * 4 + hf * 2) *= corr;
          tOrO(dt * 4 + hf * 2 + 1) *= corr;
        }
      }
#pragma unroll
      for (int i = 0; i < NT * 4; ++i) tOrP(i) = E(tSrS(i));
      prev = st;
    }
    Tensor sVt = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Vs + prev * Cfg::k_elems)), lv);
    Tensor tOrV = thr_o.partition_fragment_B(sVt);
    issue_pv(mma_o, tOrP, tOrV, tOrO);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);
    kernels::mbar_arrive(&empty[prev]);
  };
  if constexpr (Cfg::kOverlap) {
    consume_overlapped();
  } else {
  if (Cfg::kPingPong && c == 1 && nb_lo < nb_hi) asm volatile("bar.arrive 1, 256;" ::: "memory");
  if (nb_lo < nb_hi) kernels::mbar_wait(q_full, 0);
  for (int64_t nb = nb_lo; nb < nb_hi; ++nb) {
    const int64_t k = nb - nb_lo, j0 = nb * BN;
    const int st = int(k % S);
    kernels::mbar_wait(&full[st], unsigned(k / S));
    turn_sync();
    cutlass::arch::fence_view_async_shared();
    Tensor sK = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Ks + st * Cfg::k_elems)), lk);
    Tensor sVt = make_tensor(make_smem_ptr(reinterpret_cast<E*>(Vs + st * Cfg::k_elems)), lv);
    Tensor tSrK = thr_s.partition_fragment_B(sK);
    Tensor tOrV = thr_o.partition_fragment_B(sVt);

    issue_qk(mma_s, tSrQ, tSrK, tSrS);
    turn_pass(nb + 1 == nb_hi);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tSrS);

    auto sc = [&](int i) -> float& { return tSrS(i); };
    auto oc = [&](int i) -> float& { return tOrO(i); };
    const float f = score_tile<NT>(sc, g, s, score, plain, i0, i_last, row0, j0, j0 + BN - 1);
    online_softmax<NT, DT>(sc, oc, m, l, f);
#pragma unroll
    for (int i = 0; i < NT * 4; ++i) tOrP(i) = E(tSrS(i));

    issue_pv(mma_o, tOrP, tOrV, tOrO);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);
    kernels::mbar_arrive(&empty[st]);  // this thread's products have read the stage
  }

  }
  const float sink_log2 = g.sinks ? static_cast<const float*>(p.sinks)[h] * kLog2e : -INFINITY;
  store_rows<T, DT>([&](int i) -> float& { return tOrO(i); }, m, l, g, p, s, b, h, row0, sink_log2);
}

template <class T, class Cfg> void launch_sm90(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  const dim3 grid(unsigned((g.sq + Cfg::BM - 1) / Cfg::BM), unsigned(g.hq), unsigned(g.batch));
  if constexpr (Cfg::kThreads == 384) {
    constexpr auto kernel = flash_fwd_sm90_ws_kernel<T, Cfg>;
    opt_in_dynamic_smem(kernel, Cfg::smem_bytes, "cudaFuncSetAttribute(flash attention forward, sm90)");
    using Tma = WsTma<T, Cfg>;
    Tma tma{};
    const int64_t es = int64_t(sizeof(T));
    if (Cfg::kTma && !g.varlen && !g.has_seqused_k && tma_operand_ok(p.q, es, g.sq, g.hq, g.batch) &&
        tma_operand_ok(p.k, es, g.sk, g.hkv, g.batch) && tma_operand_ok(p.v, es, g.sk, g.hkv, g.batch)) {
      auto ptr = [](const Operand& o) { return static_cast<const T*>(o.data); };
      tma.q = make_tma_copy(SM90_TMA_LOAD{}, Tma::rows_major(ptr(p.q), g.sq, g.hq, g.batch, p.q),
                            typename Cfg::LayoutQ{});
      tma.k = make_tma_copy(SM90_TMA_LOAD{}, Tma::rows_major(ptr(p.k), g.sk, g.hkv, g.batch, p.k),
                            typename Cfg::LayoutK{});
      tma.v = make_tma_copy(SM90_TMA_LOAD{}, Tma::d_major(ptr(p.v), g.sk, g.hkv, g.batch, p.v),
                            typename Cfg::LayoutVt{});
      tma.on = true;
    }
    kernel<<<grid, Cfg::kThreads, Cfg::smem_bytes, stream>>>(g, p, tma);
  } else {
    constexpr auto kernel = flash_fwd_sm90_kernel<T, Cfg>;
    opt_in_dynamic_smem(kernel, Cfg::smem_bytes, "cudaFuncSetAttribute(flash attention forward, sm90)");
    kernel<<<grid, Cfg::kThreads, Cfg::smem_bytes, stream>>>(g, p);
  }
  cuda_check(cudaGetLastError(), "attention flash forward (sm90) launch");
}

// The tiles (flash_sm90_forward_tiles): 64 or 128 query rows (one or two warpgroups) x 64 keys, or
// the warp-specialized 128 x 128 (two consumer warpgroups, three stages: 224 KB of tiles at d128).
template <class T, int D> void launch_tile(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  if constexpr (D == 256) {
    // d256: the warp-specialized tile alone, on 64-key tiles in two stages (192 KB), named w128n64;
    // one warpgroup (w64n64) would hold O in 128 registers a thread and spill 248 bytes at 255.
    return launch_sm90<T, Sm90WsConfig<T, D, 64, 2>>(g, p, stream);
  } else {
    if (g.tile_bn == 128) return launch_sm90<T, Sm90WsConfig<T, D, 128, 3>>(g, p, stream);
    if (g.tile_bm == 128) return launch_sm90<T, Sm90Config<T, D, 64, 2>>(g, p, stream);
    return launch_sm90<T, Sm90Config<T, D, 64, 1>>(g, p, stream);
  }
}

}  // namespace

// The entry of each dtype's translation unit (explicitly instantiated there).
template <class T> void forward_sm90(const Geometry& g, const Pointers& p, cudaStream_t stream) {
  if constexpr (head_dim_built(64))
    if (g.d == 64) return launch_tile<T, 64>(g, p, stream);
  if constexpr (head_dim_built(128))
    if (g.d == 128) return launch_tile<T, 128>(g, p, stream);
  if constexpr (head_dim_built(256))
    if (g.d == 256) return launch_tile<T, 256>(g, p, stream);
  throw Unsupported("attention: no sm90 flash forward for head dim " + std::to_string(g.d));
}

}  // namespace baracuda::attention::flash
