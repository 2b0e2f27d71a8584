// The backward plans' broadcast maps: grad_x[i] = f(g[r(i)], x[i], y[r(i)], stat[r(i)]), where
// r(i) drops the reduced axes (stride 0 along them). One thread per element, offsets by one
// 32-bit division per coalesced dim (larger maps run as pieces), math in f32 (f64 for f64).
#include <cmath>

#include "common/index32_pieces.h"
#include "reduction/tu_common.cuh"

namespace baracuda::reduction {
using namespace kernels;
using namespace kern;

namespace {

struct MapGeo {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[kMaxRank][kBwdArgs] = {};
};

__device__ __forceinline__ void map_offsets(const MapGeo& g, uint32_t i, int64_t (&off)[kBwdArgs]) {
#pragma unroll
  for (int a = 0; a < kBwdArgs; ++a) off[a] = 0;
  for (int d = 0; d < g.rank; ++d) {
    const uint32_t q = i / uint32_t(g.size[d]);
    const int64_t r = int64_t(i - q * uint32_t(g.size[d]));
#pragma unroll
    for (int a = 0; a < kBwdArgs; ++a) off[a] += r * g.stride[d][a];
    i = q;
  }
}

template <BwdKind K, class A>
__device__ __forceinline__ A grad_of(A g, A x, A y, const Stat2<A>& st, A n, A corr) {
  A dof = n - corr;
  if (dof < A(0)) dof = A(0);
  switch (K) {
    case BwdKind::Sum: return g;
    case BwdKind::Mean: return g / n;
    case BwdKind::Amax: case BwdKind::Amin:
      if (st.a != st.a) return g * st.a;  // NaN extreme: NaN gradient for the whole slice, as torch
      return x == st.a ? g / st.b : A(0);
    case BwdKind::Prod:
      if (st.b == A(0)) return g * (st.a / x);
      if (st.b == A(1)) return x == A(0) ? g * st.a : A(0);
      return A(0);
    case BwdKind::Norm2: return y == A(0) ? A(0) : g * x / y;
    case BwdKind::Logsumexp: return g * exp(x - y);
    case BwdKind::Var: return g * A(2) * (x - st.a) / dof;
    case BwdKind::Std: return g * (x - st.a) / (dof * y);
  }
  return A(0);
}

template <BwdKind K, class T>
__global__ void __launch_bounds__(256)
bwd_map_kernel(MapGeo geo, uint32_t numel, facc_t<T> n, facc_t<T> corr, T* gx, const T* x, const T* g, const T* y,
               const Stat2<facc_t<T>>* stat) {
  using A = facc_t<T>;
  constexpr int kIlp = 4;
  const uint32_t base = blockIdx.x * 256 * kIlp + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kIlp; ++u) {
    const uint32_t i = base + uint32_t(u) * 256;
    if (i >= numel) break;
    int64_t off[kBwdArgs];
    map_offsets(geo, i, off);
    const A gv = to_acc<A>(g[off[2]]);
    const A xv = to_acc<A>(x[off[1]]);
    const A yv = y ? to_acc<A>(y[off[3]]) : A(0);
    Stat2<A> s{A(0), A(0)};
    if (stat) s = stat[off[4]];
    gx[off[0]] = from_compute<T>(grad_of<K, A>(gv, xv, yv, s, n, corr));
  }
}

template <BwdKind K, class T> void go(const BwdLaunch& L, cudaStream_t st) {
  using A = facc_t<T>;
  using S = Stat2<A>;
  int64_t outer_first[kMaxRank];  // L's dims are innermost first; the pieces' walk takes them outermost first
  for (int d = 0; d < L.rank; ++d) outer_first[d] = L.shape[L.rank - 1 - d];
  auto stride_of = [&](int a, int d) { return L.stride[L.rank - 1 - d][a]; };
  auto piece = [&](int first, int64_t count, const int64_t* off) {
    MapGeo geo;
    geo.rank = L.rank - first;
    int64_t numel = 1;
    for (int d = 0; d < geo.rank; ++d) {
      geo.size[d] = d == geo.rank - 1 ? count : L.shape[d];
      for (int a = 0; a < kBwdArgs; ++a) geo.stride[d][a] = L.stride[d][a];
      numel *= geo.size[d];
    }
    const T* y = L.y ? static_cast<const T*>(L.y) + off[3] : nullptr;
    const S* stat = L.stat ? static_cast<const S*>(L.stat) + off[4] : nullptr;
    bwd_map_kernel<K, T><<<unsigned((numel + 1023) / 1024), 256, 0, st>>>(
        geo, uint32_t(numel), A(L.n), A(L.correction), static_cast<T*>(L.gx) + off[0],
        static_cast<const T*>(L.x) + off[1], static_cast<const T*>(L.g) + off[2], y, stat);
    check_launch("reduction backward map");
  };
  for_each_index32_piece(L.rank, outer_first, kBwdArgs, stride_of, piece);
}

template <class T> void by_kind(const BwdLaunch& L, cudaStream_t st) {
  switch (L.kind) {
    case BwdKind::Sum: return go<BwdKind::Sum, T>(L, st);
    case BwdKind::Mean: return go<BwdKind::Mean, T>(L, st);
    case BwdKind::Amax: return go<BwdKind::Amax, T>(L, st);
    case BwdKind::Amin: return go<BwdKind::Amin, T>(L, st);
    case BwdKind::Prod: return go<BwdKind::Prod, T>(L, st);
    case BwdKind::Norm2: return go<BwdKind::Norm2, T>(L, st);
    case BwdKind::Logsumexp: return go<BwdKind::Logsumexp, T>(L, st);
    case BwdKind::Var: return go<BwdKind::Var, T>(L, st);
    case BwdKind::Std: return go<BwdKind::Std, T>(L, st);
  }
}

}  // namespace

void launch_bwd_map(const BwdLaunch& L, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (L.numel == 0) return;
  dispatch_dtype(L.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_fp_v<T>) return by_kind<T>(L, st);
    throw Unsupported(std::string("reduction backward: no kernel for ") + dtype_name(L.dtype));
  });
}

}  // namespace baracuda::reduction
