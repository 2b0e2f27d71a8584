// RMSNorm / LayerNorm kernels, forward and backward. Included only by the per-dtype translation
// units (norm_<dtype>.cu), which instantiate launch_forward<T> / launch_backward<T>.
//
// Rows are [rows, H] with unit column stride and a per-tensor row stride. A row is handled by
// a group of TPR threads: 8 / 16 / 32 (several rows per 128-thread block) or a whole block
// (128..1024). Half types compute in f32, f64 in f64; one rounding to the output. Every sum has
// a fixed order (butterfly shuffles, then across warps in a fixed order), so results are
// deterministic.
//
// The kernels live in kernel_common.cuh (shared pieces), fwd_kernels.cuh and bwd_kernels.cuh; this
// header holds the launchers that pick them.
#pragma once
#include "common/smem_opt_in.h"
#include "norm/fwd_kernels.cuh"
#include "norm/bwd_kernels.cuh"

namespace baracuda::norm::kern {
using namespace baracuda::kernels;

// ---- launchers ------------------------------------------------------------------------------------
// Dynamic shared memory above the default 48 KB needs an opt-in per kernel (and device).
template <class K> void allow_smem(K kernel, int64_t bytes) {
  opt_in_dynamic_smem(kernel, size_t(bytes), "cudaFuncSetAttribute(norm, max dynamic shared memory)");
}

template <class T, int TPR, int I, int R, bool PF> void fwd_kernel_go(const NormLaunch& L, cudaStream_t s) {
  with_operand_spec<sizeof(T) == 2 && fwd_spec_shape(TPR, I, R, PF)>(L, [&](auto spec) {
    constexpr int S = decltype(spec)::value;
    if constexpr (S != kSpecGeneric && fwd_param_smem_supported(TPR, I, R, PF)) {
      auto go = [&](auto kernel, int64_t smem) {
        allow_smem(kernel, smem);
        kernel<<<unsigned(L.cfg.grid), block_threads(TPR), size_t(smem), s>>>(L);
      };
      // (select sets param_smem only where these kernels exist)
      if constexpr (TPR == 1024)  // (the resident parameter: the one-block-per-SM shape only)
        if (L.cfg.param_smem == 1) return go(fwd_reg<T, TPR, I, R, PF, S, 1>, fwd_prefetch_smem(TPR, I));
      if (L.cfg.param_smem == 2) return go(fwd_reg<T, TPR, I, R, PF, S, 2>, fwd_param_ring_smem(TPR));
    }
    const auto kernel = fwd_reg<T, TPR, I, R, PF, S>;
    const int64_t smem = PF ? fwd_prefetch_smem(TPR, I) : 0;
    if (PF) allow_smem(kernel, smem);
    kernel<<<unsigned(L.cfg.grid), block_threads(TPR), size_t(smem), s>>>(L);
  });
}
template <class T, int TPR, int I, int R> void fwd_kernel(const NormLaunch& L, cudaStream_t s) {
  if constexpr (R == 1 && fwd_prefetch_supported(TPR, I)) {
    if (L.cfg.prefetch && !L.res) return fwd_kernel_go<T, TPR, I, 1, true>(L, s);  // select never asks for it with a residual
  }
  fwd_kernel_go<T, TPR, I, R, false>(L, s);
}
template <class T, int TPR, int I, bool XS, bool PF, bool RA = false>
void bwd_kernel_go(const NormLaunch& L, cudaStream_t s) {
  with_operand_spec<!XS && sizeof(T) == 2 && bwd_spec_shape(TPR, I, PF, RA)>(L, [&](auto spec) {
    const auto kernel = bwd_reg<T, TPR, I, XS, PF, RA, decltype(spec)::value>;
    const int64_t smem = bwd_reg_smem(L, int(sizeof(compute_t<T>)));
    allow_smem(kernel, smem);
    kernel<<<unsigned(L.cfg.grid), block_threads(TPR), size_t(smem), s>>>(L);
  });
}
template <class T, int TPR, int I, bool XS> void bwd_kernel(const NormLaunch& L, cudaStream_t s) {
  if constexpr (!XS && sizeof(T) == 2 && bwd_regacc_supported(TPR, I)) {
    if (L.cfg.regacc) {
      if constexpr (bwd_prefetch_supported(TPR, I)) {
        if (L.cfg.prefetch) return bwd_kernel_go<T, TPR, I, false, true, true>(L, s);
      }
      return bwd_kernel_go<T, TPR, I, false, false, true>(L, s);
    }
  }
  if constexpr (!XS && bwd_prefetch_supported(TPR, I)) {
    if (L.cfg.prefetch) return bwd_kernel_go<T, TPR, I, false, true>(L, s);
  }
  bwd_kernel_go<T, TPR, I, XS, false>(L, s);
}

template <class T, int TPR, int I> bool fwd_rows(const NormLaunch& L, cudaStream_t s) {
  switch (L.cfg.rows) {
    case 1: if constexpr (fwd_supported(TPR, I, 1)) { fwd_kernel<T, TPR, I, 1>(L, s); return true; } break;
    case 2: if constexpr (fwd_supported(TPR, I, 2)) { fwd_kernel<T, TPR, I, 2>(L, s); return true; } break;
    case 4: if constexpr (fwd_supported(TPR, I, 4)) { fwd_kernel<T, TPR, I, 4>(L, s); return true; } break;
  }
  return false;
}
template <class T, int TPR, int I> bool bwd_xs(const NormLaunch& L, cudaStream_t s) {
  if (L.cfg.xs) {
    if constexpr (bwd_supported(TPR, I, true)) { bwd_kernel<T, TPR, I, true>(L, s); return true; }
  } else {
    if constexpr (bwd_supported(TPR, I, false)) { bwd_kernel<T, TPR, I, false>(L, s); return true; }
  }
  return false;
}
template <bool BWD, class T, int TPR, int I> bool reg_one(const NormLaunch& L, cudaStream_t s) {
  if constexpr (BWD) return bwd_xs<T, TPR, I>(L, s);
  else return fwd_rows<T, TPR, I>(L, s);
}

template <bool BWD, class T, int TPR> bool reg_items(const NormLaunch& L, cudaStream_t s) {
  switch (L.cfg.items) {
    case 1: return reg_one<BWD, T, TPR, 1>(L, s);
    case 2: return reg_one<BWD, T, TPR, 2>(L, s);
    case 3: return reg_one<BWD, T, TPR, 3>(L, s);
    case 4: return reg_one<BWD, T, TPR, 4>(L, s);
    case 5: return reg_one<BWD, T, TPR, 5>(L, s);
    case 6: return reg_one<BWD, T, TPR, 6>(L, s);
    case 7: return reg_one<BWD, T, TPR, 7>(L, s);
    case 8: return reg_one<BWD, T, TPR, 8>(L, s);
  }
  return false;
}

template <bool BWD, class T> bool reg_launch(const NormLaunch& L, cudaStream_t s) {
  switch (L.cfg.tpr) {
    case 8: return reg_items<BWD, T, 8>(L, s);
    case 16: return reg_items<BWD, T, 16>(L, s);
    case 32: return reg_items<BWD, T, 32>(L, s);
    case 128: return reg_items<BWD, T, 128>(L, s);
    case 256: return reg_items<BWD, T, 256>(L, s);
    case 512: return reg_items<BWD, T, 512>(L, s);
    case 1024: return reg_items<BWD, T, 1024>(L, s);
  }
  return false;
}

template <bool BWD, class T> bool loop_launch(const NormLaunch& L, cudaStream_t s) {
  constexpr int VV = int(16 / sizeof(T));
  const unsigned g = unsigned(L.cfg.grid);
  const bool vec = L.cfg.vec > 1;
  if (L.cfg.tpr == 32) {
    if constexpr (BWD) { if (vec) bwd_loop<T, 32, VV><<<g, 128, 0, s>>>(L); else bwd_loop<T, 32, 1><<<g, 128, 0, s>>>(L); }
    else { if (vec) fwd_loop<T, 32, VV><<<g, 128, 0, s>>>(L); else fwd_loop<T, 32, 1><<<g, 128, 0, s>>>(L); }
    return true;
  }
  if (L.cfg.tpr == 512) {
    if constexpr (BWD) { if (vec) bwd_loop<T, 512, VV><<<g, 512, 0, s>>>(L); else bwd_loop<T, 512, 1><<<g, 512, 0, s>>>(L); }
    else { if (vec) fwd_loop<T, 512, VV><<<g, 512, 0, s>>>(L); else fwd_loop<T, 512, 1><<<g, 512, 0, s>>>(L); }
    return true;
  }
  return false;
}

// dweight and / or dbias from the partials at pw / pb (P rows of H), into L.gw / L.gb: blocks of 32
// column groups (16 bytes when H allows) x TY slices (8, up to 32 for many partials, fewer for
// P < 32; L.cfg.finish_ty overrides). On sm_90 the launch is programmatic (PDL, L.cfg.finish_pdl):
// it overlaps the end of the row kernel before (which triggers it as it starts), whose writes the
// blocks wait for (pdl_wait).
template <class T, class C> void finish_params(const NormLaunch& L, const C* pw, const C* pb, int64_t P, cudaStream_t s) {
  FinishArgs<C> a;
  int n = 0;
  if (L.gw) { a.part[n] = pw; a.out[n] = L.gw; a.f32[n] = L.w_f32; ++n; }
  if (L.gb) { a.part[n] = pb; a.out[n] = L.gb; a.f32[n] = L.b_f32; ++n; }
  if (n == 0 || L.H == 0) return;
  a.P = P;
  a.H = L.H;
  constexpr int VV = int(16 / sizeof(C));
  const bool vec = L.H % VV == 0;
  // 8 slices, more while a thread would add over 32 partial rows (few columns, many partials:
  // 262144 x 128 had 95 us with 8 slices, 79 with 32), fewer where 4 rows a thread cover P
  int ty = 8;
  while (ty < 32 && P > int64_t(32) * ty) ty *= 2;
  while (ty > 1 && int64_t(ty / 2) * 4 >= P) ty /= 2;
  const int fty = L.cfg.finish_ty;
  if (fty >= 1 && fty <= 32 && (fty & (fty - 1)) == 0) ty = fty;
  // griddepcontrol.wait exists only in the kernel's sm_90 code (which also means an sm_90+ device):
  // no PDL where the device runs older PTX
  const bool pdl = L.cfg.finish_pdl != 0 && runs_sm90_code(finish<T, 1>);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(ceil_div(ceil_div(L.H, int64_t(vec ? VV : 1)), int64_t(32))), unsigned(n));
  cfg.blockDim = dim3(32, unsigned(ty));
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  if (pdl) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  const char* what = "norm finish (grad_weight / grad_bias)";
  if (vec) cuda_check(cudaLaunchKernelEx(&cfg, finish<T, VV>, a), what);
  else cuda_check(cudaLaunchKernelEx(&cfg, finish<T, 1>, a), what);
}

// The cluster forward (sm_90; fwd_cluster.cuh, instantiated in norm_fwd_<dtype>.cu): false, with
// nothing launched, on a device without clusters (or a build without sm_90 code).
template <class T> bool fwd_cluster_launch(const NormLaunch& L, cudaStream_t s);

template <class T> void launch_forward_impl(const NormLaunch& L, cudaStream_t s) {
  if (L.rows == 0 || L.H == 0) return;
  if (L.cfg.path == Path::Cluster) {
    if (fwd_cluster_launch<T>(L, s)) return;
    NormLaunch L2 = L;  // before sm_90: the one-block register kernel or the loop
    L2.cfg = L.fallback;
    return launch_forward_impl<T>(L2, s);
  }
  const bool ok = L.cfg.path == Path::Registers ? reg_launch<false, T>(L, s) : loop_launch<false, T>(L, s);
  if (!ok) throw Unsupported("norm: no forward kernel for this configuration (internal)");
  check_launch(L.cfg.path == Path::Registers ? "norm forward (registers)" : "norm forward (looped)");
}

// The cluster backward (sm_90; fwd_cluster.cuh, instantiated in norm_bwd_<dtype>.cu): false, with
// nothing launched, on a device without clusters (or a build without sm_90 code).
template <class T> bool bwd_cluster_launch(const NormLaunch& L, cudaStream_t s);

template <class T> void launch_backward_impl(const NormLaunch& L, cudaStream_t s) {
  using C = compute_t<T>;
  if (L.cfg.path == Path::Cluster) {
    if (L.rows > 0 && L.H > 0 && bwd_cluster_launch<T>(L, s)) {
      const int64_t P = L.cfg.partials;
      const C* pw = static_cast<const C*>(L.workspace);
      const C* pb = reinterpret_cast<const C*>(static_cast<const char*>(L.workspace) + L.bias_partial_offset);
      finish_params<T>(L, pw, pb, P, s);
      return;
    }
    // Before sm_90 (or no rows): the one-block xs kernel or the loop, with its own partials (the
    // plan's workspace holds the looped partition's, which equals the xs kernel's).
    NormLaunch L2 = L;
    L2.cfg = L.fallback;
    L2.bias_partial_offset = L.gw ? partial_bytes(L.dtype, L2.cfg.partials, L.H) : 0;
    return launch_backward_impl<T>(L2, s);
  }
  if (L.rows > 0 && L.H > 0) {
    const bool ok = L.cfg.path == Path::Registers ? reg_launch<true, T>(L, s) : loop_launch<true, T>(L, s);
    if (!ok) throw Unsupported("norm: no backward kernel for this configuration (internal)");
    check_launch(L.cfg.path == Path::Registers ? "norm backward (registers)" : "norm backward (looped)");
    if ((L.cfg.path == Path::Looped || L.cfg.xs) && (L.gw || L.gb)) {
      constexpr int VV = int(16 / sizeof(T));
      const int cv = L.cfg.colred_vec;
      const dim3 grid(unsigned(ceil_div(L.H, int64_t(kColredThreads) * cv)), unsigned(L.cfg.partials));
      if (cv > 1) colred<T, VV><<<grid, kColredThreads, 0, s>>>(L);
      else colred<T, 1><<<grid, kColredThreads, 0, s>>>(L);
      check_launch("norm backward column reduction");
    }
  }
  if (L.H == 0) return;
  const int64_t P = L.rows > 0 ? L.cfg.partials : 0;  // no rows: zero gradients
  const C* pw = static_cast<const C*>(L.workspace);
  const C* pb = reinterpret_cast<const C*>(static_cast<const char*>(L.workspace) + L.bias_partial_offset);
  finish_params<T>(L, pw, pb, P, s);
}

}  // namespace baracuda::norm::kern

namespace baracuda::norm {
template <class T> void launch_forward(const NormLaunch& L, void* s) {
  kern::launch_forward_impl<T>(L, static_cast<cudaStream_t>(s));
}
template <class T> void launch_backward(const NormLaunch& L, void* s) {
  kern::launch_backward_impl<T>(L, static_cast<cudaStream_t>(s));
}
}  // namespace baracuda::norm

// Explicit instantiation of one dtype's launchers (norm_fwd_<dtype>.cu, norm_bwd_<dtype>.cu).
#define BARACUDA_NORM_INSTANTIATE_FWD(T) \
  template void baracuda::norm::launch_forward<T>(const baracuda::norm::NormLaunch&, void*);
#define BARACUDA_NORM_INSTANTIATE_BWD(T) \
  template void baracuda::norm::launch_backward<T>(const baracuda::norm::NormLaunch&, void*);
