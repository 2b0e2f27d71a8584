// Grouped (mixture-of-experts) GEMM for Hopper on CUTLASS 3.x's pointer-array grouped kernel (TMA +
// wgmma, warp-specialized cooperative, persistent). Same contract as grouped_gemv (gemm_launch.h) for
// bf16 / f16, alpha 1, beta 0, no bias: out[r, n] = sum_k x[r, k] w[e, n, k] for the rows an expert
// owns. Why: prefill MoE with device offsets, where the mma.sync tiled kernel (grouped_tiled.cu)
// reaches about a third of cuBLASLt.
//
// The group boundaries stay on the device: a small prep kernel of ours turns the offsets into
// CUTLASS's per-group arrays (problem shape, A / B / D pointers, strides) in the caller's workspace,
// then the CUTLASS kernel runs with no host copy of the shapes. No host sync, no allocation, no
// device-to-host copy: capturable in a CUDA graph. An expert of M rows gets a TMA descriptor of M
// rows at x + lo * ldx (rewritten on the device), so its tiles never read or write another expert's
// rows: TMA zero-fills the loads past M and clips the stores.
//
// Configuration: CUTLASS M = the expert's rows, N = N, K = K; A = x (row-major), B = w[e] ([N, K],
// K contiguous: CUTLASS column-major B), D = out (row-major), f32 accumulation, D = acc through the
// pointer-array TMA epilogue with no C operand. Tile 128 x 256 x 64, cluster 1 x 2 x 1,
// KernelPtrArrayTmaWarpSpecializedCooperative.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "baracuda/errors.h"
#include "common/cuda_check.h"
#include "gemm/gemm_launch.h"
#include "gemm/grouped_offsets.cuh"

#if defined(BARACUDA_HAVE_CUTLASS)
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/kernel_hardware_info.h"
#endif

namespace baracuda::gemm {

#if defined(BARACUDA_HAVE_CUTLASS)
namespace {

// The CUTLASS grouped GEMM for one element type (cutlass::bfloat16_t or cutlass::half_t).
template <class Element> struct Sm90Grouped {
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;  // per group <M, N, K>
  using Shape3 = typename ProblemShape::UnderlyingProblemShape;
  // 128 rows: a ragged expert wastes at most 127 rows of a tile (256 would double that); 256
  // columns: each A tile feeds twice the output. Cluster 1 x 2: the two CTAs of a cluster share
  // (multicast) the A tile along N; N tiles are many, so rounding N up to the cluster costs nothing
  // (a 2 x 1 cluster would round every small expert's M tiles up to two).
  using TileShape = cute::Shape<cute::_128, cute::_256, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_2, cute::_1>;
  static constexpr int kAlign = 8;  // elements: the 16 bytes TMA needs

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      // void C: the epilogue has no source operand at all, so beta 0 can never read out.
      void, cutlass::layout::RowMajor*, kAlign, Element, cutlass::layout::RowMajor*, kAlign,
      cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
      cutlass::epilogue::fusion::LinearCombination<Element, float, void, float>>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor*, kAlign, Element,
      cutlass::layout::ColumnMajor*, kAlign, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  using StrideA = typename Kernel::InternalStrideA;  // (M, K, L): (ldx, _1, _0)
  using StrideB = typename Kernel::InternalStrideB;  // (N, K, L): (ldw, _1, _0)
  using StrideD = typename Kernel::InternalStrideD;  // (M, N, L): (ldo, _1, _0)
  static_assert(cute::is_same_v<cute::remove_cvref_t<decltype(cute::get<1>(StrideA{}))>, cute::_1>, "A: K contiguous");
  static_assert(cute::is_same_v<cute::remove_cvref_t<decltype(cute::get<1>(StrideB{}))>, cute::_1>, "B: K contiguous");
  static_assert(cute::is_same_v<cute::remove_cvref_t<decltype(cute::get<1>(StrideD{}))>, cute::_1>, "D: N contiguous");
};

using Bf16 = Sm90Grouped<cutlass::bfloat16_t>;
using F16 = Sm90Grouped<cutlass::half_t>;

constexpr size_t kArrayAlign = 16;
// The CUTLASS part holds TMA descriptors (64-byte aligned in global memory); 128 to be safe.
constexpr size_t kCutlassAlign = 128;

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Byte offsets of the per-group arrays and of CUTLASS's workspace from the (aligned) base.
struct WsLayout {
  size_t shapes = 0, ptr_a = 0, ptr_b = 0, ptr_d = 0, stride_a = 0, stride_b = 0, stride_d = 0;
  size_t cutlass = 0, cutlass_bytes = 0, total = 0;
};

// Persistent grid = SMs of the current device (CUTLASS sizes the per-SM TMA descriptor workspace
// from it too, so workspace_bytes and the launch must agree). The runtime answers from its own cache.
int device_sm_count(int* dev_out) {
  cuda_check(cudaGetDevice(dev_out), "cudaGetDevice");
  int sms = 0;
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, *dev_out),
             "cudaDeviceGetAttribute(MultiProcessorCount)");
  return sms;
}

template <class Cfg>
typename Cfg::Gemm::Arguments make_arguments(int groups, const WsLayout* l, char* base, int dev, int sms) {
  using Gemm = typename Cfg::Gemm;
  using ElementA = typename Gemm::ElementA;
  using ElementB = typename Gemm::ElementB;
  using ElementD = typename Gemm::ElementD;
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  // Host problem shapes = nullptr: the shapes exist only on the device (no host sync).
  args.problem_shape = {groups, l ? reinterpret_cast<typename Cfg::Shape3*>(base + l->shapes) : nullptr, nullptr};
  args.mainloop.ptr_A = l ? reinterpret_cast<const ElementA**>(base + l->ptr_a) : nullptr;
  args.mainloop.dA = l ? reinterpret_cast<typename Cfg::StrideA*>(base + l->stride_a) : nullptr;
  args.mainloop.ptr_B = l ? reinterpret_cast<const ElementB**>(base + l->ptr_b) : nullptr;
  args.mainloop.dB = l ? reinterpret_cast<typename Cfg::StrideB*>(base + l->stride_b) : nullptr;
  args.epilogue.thread.alpha = 1.0f;  // one scalar for all groups; no alpha / beta pointers
  args.epilogue.thread.beta = 0.0f;
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = nullptr;
  args.epilogue.ptr_D = l ? reinterpret_cast<ElementD**>(base + l->ptr_d) : nullptr;
  args.epilogue.dD = l ? reinterpret_cast<typename Cfg::StrideD*>(base + l->stride_d) : nullptr;
  args.hw_info.device_id = dev;
  args.hw_info.sm_count = sms;
  // Consecutive tiles walk an expert's M tiles first: the CTAs running at once share w's N tiles
  // (the big operand) through L2 rather than streaming all of w once per M tile.
  args.scheduler.raster_order = cutlass::gemm::kernel::detail::RasterOrderOptions::AlongM;
  return args;
}

template <class Cfg> WsLayout layout_for(int64_t E, int dev, int sms) {
  WsLayout l;
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t at = off;
    off = round_up(off + bytes, kArrayAlign);
    return at;
  };
  const size_t e = static_cast<size_t>(E);
  l.shapes = take(e * sizeof(typename Cfg::Shape3));
  l.ptr_a = take(e * sizeof(void*));
  l.ptr_b = take(e * sizeof(void*));
  l.ptr_d = take(e * sizeof(void*));
  l.stride_a = take(e * sizeof(typename Cfg::StrideA));
  l.stride_b = take(e * sizeof(typename Cfg::StrideB));
  l.stride_d = take(e * sizeof(typename Cfg::StrideD));
  l.cutlass = round_up(off, kCutlassAlign);
  // CUTLASS's workspace (per-SM TMA descriptors) depends on the group count and the SM count only.
  l.cutlass_bytes = Cfg::Gemm::get_workspace_size(make_arguments<Cfg>(static_cast<int>(E), nullptr, nullptr, dev, sms));
  l.total = l.cutlass + l.cutlass_bytes;
  return l;
}

// Workspace bytes the caller provides: the layout plus slack to align an arbitrary base pointer.
size_t workspace_for(const WsLayout& l) { return l.total + kCutlassAlign; }

struct PrepArgs {
  const void* offsets;
  bool off64;
  bool host;                               // boundaries from `bounds` (the group-sizes path)
  int64_t bounds[kMaxHostGroups + 1];
  int64_t E, N, K, T;
  const char* x;
  const char* w;
  char* out;
  int64_t ldx, ldw, sw, ldo;  // elements
  char* base;
  WsLayout l;
};

// One thread per expert: its rows [lo, hi) from the clamped offsets, then CUTLASS's per-group
// problem shape (M may be 0: the group scheduler gives such a group no tiles), pointers, strides.
template <class Cfg> __global__ void grouped_sm90_prep_kernel(PrepArgs p) {
  using Element = typename Cfg::Gemm::ElementA;
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // Device code not built for sm_90a (a PTX-only build): CUTLASS compiles the GEMM body to a stub
  // that writes nothing, so fail loudly here rather than leave out unwritten.
  __trap();
#endif
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= p.E) return;
  const int64_t lo = p.host ? p.bounds[e] : clamped_group_offset(p.offsets, p.off64, e, p.T);
  const int64_t hi = p.host ? p.bounds[e + 1] : clamped_group_offset(p.offsets, p.off64, e + 1, p.T);
  const int64_t rows = hi > lo ? hi - lo : 0;
  reinterpret_cast<typename Cfg::Shape3*>(p.base + p.l.shapes)[e] =
      typename Cfg::Shape3{static_cast<int>(rows), static_cast<int>(p.N), static_cast<int>(p.K)};
  const Element* x = reinterpret_cast<const Element*>(p.x);
  const Element* w = reinterpret_cast<const Element*>(p.w);
  Element* out = reinterpret_cast<Element*>(p.out);
  // lo <= T, so even an empty group's pointers stay within (one past) the buffers; never dereferenced.
  reinterpret_cast<const Element**>(p.base + p.l.ptr_a)[e] = x + lo * p.ldx;
  reinterpret_cast<const Element**>(p.base + p.l.ptr_b)[e] = w + e * p.sw;
  reinterpret_cast<Element**>(p.base + p.l.ptr_d)[e] = out + lo * p.ldo;
  // The strides set from the real leading dimensions (not a packed [M, K] layout).
  typename Cfg::StrideA sa{};
  cute::get<0>(sa) = p.ldx;
  typename Cfg::StrideB sb{};
  cute::get<0>(sb) = p.ldw;
  typename Cfg::StrideD sd{};
  cute::get<0>(sd) = p.ldo;
  reinterpret_cast<typename Cfg::StrideA*>(p.base + p.l.stride_a)[e] = sa;
  reinterpret_cast<typename Cfg::StrideB*>(p.base + p.l.stride_b)[e] = sb;
  reinterpret_cast<typename Cfg::StrideD*>(p.base + p.l.stride_d)[e] = sd;
}

[[noreturn]] void throw_cutlass(cutlass::Status s, const char* call) {
  // A failed launch leaves its CUDA status as the last error: report that one when there is one.
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(e, call);
  throw CudaError(std::string(call) + " failed: " + cutlass::cutlassGetStatusString(s));
}

// CUTLASS's can_implement + initialize() depend only on (device, groups, workspace base, SMs) and are
// host work on the launch path (initialize encodes placeholder TMA descriptors, the kernel rewrites
// them per group, and sets the kernel's dynamic smem attribute; no memset, no stream work): done once
// per key, the Params kept (bounded), so a run is the prep kernel and the GEMM launch.
template <class Cfg>
typename Cfg::Gemm::Params initialized_params(const WsLayout& l, char* base, int64_t E, int dev, int sms,
                                              cudaStream_t s) {
  using Params = typename Cfg::Gemm::Params;
  using Key = std::tuple<int, int64_t, uintptr_t, int>;
  static std::mutex mu;
  static std::map<Key, Params> cache;
  const Key key{dev, E, reinterpret_cast<uintptr_t>(base), sms};
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const auto args = make_arguments<Cfg>(static_cast<int>(E), &l, base, dev, sms);
  typename Cfg::Gemm gemm;
  // With device-only shapes can_implement reads no device data (mode, rank, beta == 0 with void C).
  cutlass::Status st = Cfg::Gemm::can_implement(args);
  if (st != cutlass::Status::kSuccess) throw_cutlass(st, "cutlass grouped_sm90 can_implement");
  st = gemm.initialize(args, base + l.cutlass, s);
  if (st != cutlass::Status::kSuccess) throw_cutlass(st, "cutlass grouped_sm90 initialize");
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 64) cache.erase(cache.begin());
  return cache.insert_or_assign(key, gemm.params()).first->second;
}

template <class Cfg> void launch(const GroupedGemvArgs& a, void* workspace, size_t workspace_bytes, void* stream) {
  int dev = 0;
  const int sms = device_sm_count(&dev);
  const WsLayout l = layout_for<Cfg>(a.E, dev, sms);
  if (workspace == nullptr || workspace_bytes < workspace_for(l))
    throw InvalidArgument("grouped_sm90: workspace of " + std::to_string(workspace_bytes) + " bytes, needs " +
                          std::to_string(workspace_for(l)));
  char* base = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(workspace), kCutlassAlign));
  const cudaStream_t s = static_cast<cudaStream_t>(stream);

  PrepArgs p{a.offsets, a.offsets_dtype == DType::Int64, a.host_offsets != nullptr, {}, a.E, a.N, a.K, a.T,
             static_cast<const char*>(a.x), static_cast<const char*>(a.w), static_cast<char*>(a.out),
             a.ldx, a.ldw, a.sw, a.ldo, base, l};
  if (p.host) std::copy(a.host_offsets, a.host_offsets + a.E + 1, p.bounds);  // checked by select
  constexpr int kPrepThreads = 128;
  const unsigned prep_grid = unsigned((a.E + kPrepThreads - 1) / kPrepThreads);
  grouped_sm90_prep_kernel<Cfg><<<prep_grid, kPrepThreads, 0, s>>>(p);
  check_launch("grouped_sm90_prep_kernel");

  typename Cfg::Gemm::Params params = initialized_params<Cfg>(l, base, a.E, dev, sms, s);  // this call's copy
  const cutlass::Status st = Cfg::Gemm::run(params, s);
  if (st != cutlass::Status::kSuccess) throw_cutlass(st, "cutlass grouped_sm90 run");
  check_launch("grouped_sm90 cutlass kernel");
}

}  // namespace

bool grouped_sm90_supported(const GroupedGemvArgs& a) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();  // CUTLASS's per-group shapes are int
  const bool half = a.dtype == DType::BFloat16 || a.dtype == DType::Float16;
  return half && (a.offsets_dtype == DType::Int32 || a.offsets_dtype == DType::Int64) &&
         (a.host_offsets == nullptr || a.E <= kMaxHostGroups) && a.alpha == 1.0f &&
         a.beta == 0.0f && a.bias == nullptr && a.E >= 1 && a.N >= 1 && a.T >= 1 && a.K > 0 && a.K % 8 == 0 &&
         a.E <= kIntMax && a.N <= kIntMax && a.T <= kIntMax && a.K <= kIntMax && a.ldx % 8 == 0 &&
         a.ldw % 8 == 0 && a.ldo % 8 == 0 && a.sw % 8 == 0 && aligned16(a.x) && aligned16(a.w) && aligned16(a.out);
}

size_t grouped_sm90_workspace_bytes(const GroupedGemvArgs& a) {
  if (a.E <= 0) return 0;
  int dev = 0;
  const int sms = device_sm_count(&dev);
  // Both instantiations have the same layout sizes; ask the one of the dtype anyway.
  return a.dtype == DType::Float16 ? workspace_for(layout_for<F16>(a.E, dev, sms))
                                   : workspace_for(layout_for<Bf16>(a.E, dev, sms));
}

void grouped_sm90(const GroupedGemvArgs& a, void* workspace, size_t workspace_bytes, void* stream) {
  if (a.E <= 0 || a.N <= 0 || a.T <= 0) return;
  if (a.dtype == DType::BFloat16) launch<Bf16>(a, workspace, workspace_bytes, stream);
  else launch<F16>(a, workspace, workspace_bytes, stream);
}

bool grouped_sm90_built() { return true; }

#else  // !BARACUDA_HAVE_CUTLASS

bool grouped_sm90_built() { return false; }
bool grouped_sm90_supported(const GroupedGemvArgs&) { return false; }
size_t grouped_sm90_workspace_bytes(const GroupedGemvArgs&) { return 0; }
void grouped_sm90(const GroupedGemvArgs&, void*, size_t, void*) {
  throw Unsupported("grouped_sm90: built without CUTLASS");
}

#endif  // BARACUDA_HAVE_CUTLASS

const char* grouped_sm90_variant() { return "m128n256k64.c1x2"; }  // Sm90Grouped's tile and cluster

}  // namespace baracuda::gemm
