// The backward plans' broadcast maps: grad_x[i] = f(g[r(i)], x[i], y[r(i)], stat[r(i)]), where
// r(i) drops the reduced axes (stride 0 along them). One thread per element, offsets by one
// division per coalesced dim (32-bit when the element count allows), math in f32 (f64 for f64).
#include <cmath>

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

template <class IndexT>
__device__ __forceinline__ void map_offsets(const MapGeo& g, IndexT i, int64_t (&off)[kBwdArgs]) {
#pragma unroll
  for (int a = 0; a < kBwdArgs; ++a) off[a] = 0;
  for (int d = 0; d < g.rank; ++d) {
    const IndexT q = i / IndexT(g.size[d]);
    const int64_t r = int64_t(i - q * IndexT(g.size[d]));
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

template <BwdKind K, class T, class IndexT>
__global__ void __launch_bounds__(256)
bwd_map_kernel(MapGeo geo, IndexT numel, facc_t<T> n, facc_t<T> corr, T* gx, const T* x, const T* g, const T* y,
               const Stat2<facc_t<T>>* stat) {
  using A = facc_t<T>;
  constexpr int kIlp = 4;
  const IndexT base = IndexT(blockIdx.x) * 256 * kIlp + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kIlp; ++u) {
    const IndexT i = base + IndexT(u) * 256;
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
  MapGeo geo;
  geo.rank = L.rank;
  for (int d = 0; d < L.rank; ++d) {
    geo.size[d] = L.shape[d];
    for (int a = 0; a < kBwdArgs; ++a) geo.stride[d][a] = L.stride[d][a];
  }
  const unsigned blocks = unsigned((L.numel + 1023) / 1024);
  auto args = [&](auto numel) {
    using IndexT = decltype(numel);
    bwd_map_kernel<K, T, IndexT><<<blocks, 256, 0, st>>>(
        geo, numel, A(L.n), A(L.correction), static_cast<T*>(L.gx), static_cast<const T*>(L.x),
        static_cast<const T*>(L.g), static_cast<const T*>(L.y), static_cast<const Stat2<A>*>(L.stat));
  };
  if (L.numel < (int64_t(1) << 31) - 4096) args(uint32_t(L.numel));
  else args(uint64_t(L.numel));
  check_launch("reduction backward map");
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
