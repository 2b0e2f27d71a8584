// JAX through XLA's FFI: one handler runs every family's plans. baracuda.jax selects a plan at
// trace time (typed errors then, not at run time), registers it here with its operand specs, and
// names it by id in the custom call; the handler builds views over XLA's buffers and runs the plan
// on XLA's stream. No host sync, no allocation: the workspace is one more XLA output.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <deque>
#include <mutex>

#include "baracuda/errors.h"
#include "common.h"

#ifdef BARACUDA_XLA_FFI
#include <cuda_runtime_api.h>

#include "xla/ffi/api/ffi.h"
#endif

namespace baracuda::py {

namespace {

// Registered plans with their view templates (data filled per call) and byte sizes.
struct Entry {
  XlaPlan plan;
  std::vector<TensorView> views;
  std::vector<size_t> bytes;
};

struct Registry {
  std::mutex mutex;
  std::deque<Entry> entries;  // a deque: entries never move, so a handler may hold one unlocked
};
Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

const Entry* find_entry(int64_t id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return id >= 0 && id < int64_t(r.entries.size()) ? &r.entries[size_t(id)] : nullptr;
}

#ifdef BARACUDA_XLA_FFI
namespace ffi = xla::ffi;

// The workspace output is over-allocated by this much so its start can be aligned up.
constexpr int64_t kWorkspaceAlign = 256;

ffi::Error run_plan(cudaStream_t stream, int32_t device, ffi::RemainingArgs args, ffi::RemainingRets rets,
                    int64_t id) {
  const Entry* e = find_entry(id);
  if (!e) return ffi::Error(ffi::ErrorCode::kInvalidArgument, "baracuda: unknown plan id " + std::to_string(id));
  const size_t n = e->views.size(), n_in = size_t(e->plan.num_inputs), n_out = n - n_in;
  if (args.size() != n_in || (rets.size() != n_out && rets.size() != n_out + 1))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                      "baracuda: plan " + std::to_string(id) + " takes " + std::to_string(n_in) + " inputs and " +
                          std::to_string(n_out) + " outputs; the call has " + std::to_string(args.size()) + " and " +
                          std::to_string(rets.size()));
  TensorView views[32];
  if (n > 32) return ffi::Error(ffi::ErrorCode::kUnimplemented, "baracuda: more than 32 operands");
  for (size_t i = 0; i < n; ++i) {
    void* data;
    size_t bytes;
    if (i < n_in) {
      auto b = args.get<ffi::AnyBuffer>(i);
      if (!b) return b.error();
      data = b->untyped_data(), bytes = b->size_bytes();
    } else {
      auto b = rets.get<ffi::AnyBuffer>(i - n_in);
      if (!b) return b.error();
      data = (*b)->untyped_data(), bytes = (*b)->size_bytes();
    }
    // The plan was selected for these shapes; a batched (vmap) or otherwise changed call is refused.
    if (bytes != e->bytes[i])
      return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                        "baracuda: operand " + std::to_string(i) + " of plan " + std::to_string(id) + " has " +
                            std::to_string(bytes) + " bytes; the plan was selected for " +
                            std::to_string(e->bytes[i]));
    views[i] = e->views[i];
    views[i].data = data;
    views[i].device = device;
  }
  void* ws = nullptr;
  int64_t ws_size = 0;
  if (rets.size() == n_out + 1) {
    auto b = rets.get<ffi::AnyBuffer>(n_out);
    if (!b) return b.error();
    const auto base = reinterpret_cast<uintptr_t>((*b)->untyped_data());
    const uintptr_t aligned = (base + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
    ws = reinterpret_cast<void*>(aligned);
    ws_size = int64_t((*b)->size_bytes()) - int64_t(aligned - base);
  }
  try {
    e->plan.run(views, ws, ws_size, stream);
  } catch (const std::exception& ex) {
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, ex.what());
  }
  return ffi::Error::Success();
}
#endif

}  // namespace

#ifdef BARACUDA_XLA_FFI
XLA_FFI_DEFINE_HANDLER_SYMBOL(baracuda_xla_plan, run_plan,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Ctx<ffi::DeviceOrdinal>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<int64_t>("plan"));
#endif

int64_t register_xla_plan(XlaPlan plan) {
  if (plan.num_inputs < 0 || size_t(plan.num_inputs) > plan.specs.size())
    throw InvalidArgument("xla_plan: num_inputs must be in [0, number of operands]");
  Entry e{std::move(plan), {}, {}};
  for (const TensorSpec& s : e.plan.specs) {
    e.views.push_back(make_view(nullptr, s.dtype, s.shape, s.effective_strides()));
    int64_t numel = 1;
    for (int64_t d : s.shape) numel *= d;
    e.bytes.push_back(size_t(numel) * dtype_size(s.dtype));
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.entries.push_back(std::move(e));
  return int64_t(r.entries.size()) - 1;
}

void init_xla(nb::module_& m) {
#ifdef BARACUDA_XLA_FFI
  auto handler = []() -> nb::object { return nb::capsule(reinterpret_cast<void*>(&baracuda_xla_plan)); };
#else
  auto handler = []() -> nb::object { return nb::none(); };
#endif
  m.def("xla_handler", handler,
        "The XLA FFI handler that runs registered plans (a capsule for jax.ffi.register_ffi_target), or None "
        "when this build found no XLA FFI headers (jaxlib's, at build time).");
  m.def("xla_plan_count", [] {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    return r.entries.size();
  }, "Plans registered for XLA (they live until exit).");
}

}  // namespace baracuda::py
