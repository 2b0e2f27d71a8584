// What every binding file shares: tensors in through DLPack, streams, dtype conversion.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>  // def_xla_plan's roles: every TU that uses it needs the casters
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <map>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "baracuda/dtype.h"
#include "baracuda/errors.h"
#include "baracuda/plan.h"
#include "baracuda/tensor.h"

namespace nb = nanobind;

namespace baracuda::py {

namespace dlpack_exchange { struct Api; }

// A tensor argument imported zero-copy through DLPack. `name` goes into every error.
// Keeps the nanobind array alive for as long as the view is used. torch tensors are read through
// torch's DLPack C exchange API (no capsule; the caller's reference keeps them alive).
struct Imported {
  nb::ndarray<nb::ro> array;     // inputs
  nb::ndarray<> writable_array;  // outputs
  nb::object owner;              // a tensor made for the import (torch's resolved neg / conj view)
  const dlpack_exchange::Api* exchange = nullptr;  // the framework's exchange API, when it was used
  TensorView view;
  int framework = 0;  // 0 unknown, 1 torch, 2 cupy, 3 jax
  bool imported = false;  // set by import_tensor (a default-constructed one holds nothing)
};
Imported import_tensor(nb::handle h, const char* name, bool writable);
// An optional tensor argument was given (set and not None).
inline bool present(nb::handle h) { return h.is_valid() && !h.is_none(); }

// The stream to launch on: explicit (int, .cuda_stream, .ptr) or, for None, the current
// stream of the framework that `like` comes from (torch, CuPy), else the legacy default.
StreamHandle resolve_stream(nb::handle stream, const Imported& like);
// JAX cannot be told about our stream: after launching on JAX arrays, wait for the work.
void finish_for_framework(const Imported& like, StreamHandle stream);

// The spec a view matches (size-1 dims' strides zeroed, contiguous strides dropped): what a
// functional entry puts in the descriptor it selects a plan for.
TensorSpec spec_of(const TensorView& v);
// Appends a view's dtype, shape and strides to a plan-cache key.
void append_key(std::string& key, const TensorView& v);

// Appends scalar params (name and value bits, in name order) to a plan-cache key.
void append_params(std::string& key, const std::map<std::string, double>& params);

// One family's functional plan cache: plans keyed by op, params and operand metadata
// (append_key). Bounded and least-recently-used: a hit moves the plan to the front, an insert past
// the capacity drops the plan used longest ago. A mutex guards it (the GIL does today; a
// free-threaded Python would not). get() returns a copy (plans share their state), so an eviction
// by another caller cannot pull the plan from under a run; select() runs outside the lock.
template <class Plan> class PlanCache {
 public:
  explicit PlanCache(size_t capacity = 4096) : capacity_(capacity) {}
  template <class Make> Plan get(const std::string& key, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = index_.find(key);
      if (it != index_.end()) {
        order_.splice(order_.begin(), order_, it->second);
        return it->second->second;
      }
    }
    Plan plan = make();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) return it->second->second;  // another thread selected it meanwhile
    order_.emplace_front(key, plan);
    index_.emplace(key, order_.begin());
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return plan;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_.size();
  }

 private:
  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<std::pair<std::string, Plan>> order_;  // most recently used first
  std::unordered_map<std::string, typename std::list<std::pair<std::string, Plan>>::iterator> index_;
};

// The functional entry's plan cache of a family: one per plan class, living until exit.
template <class Plan, size_t Capacity = 4096> PlanCache<Plan>& plan_cache() {
  static auto* c = new PlanCache<Plan>(Capacity);
  return *c;
}

// Scratch memory of one run. `owner` keeps the allocation alive during the run.
struct Workspace {
  nb::object owner;
  Imported imported;
  void* data = nullptr;
  int64_t size = 0;
};
// A functional entry's scratch memory (empty when bytes == 0): one buffer of the core's per
// (device, stream), grown on demand and kept, as torch keeps cuBLAS's, so a warm call allocates
// nothing. Work on one stream runs in order, so consecutive calls share it safely. While the stream
// captures a CUDA graph the buffer comes from `workspace_alloc` (a callable bytes -> tensor of the
// caller's framework) for the call alone: the graph's memory pool owns it.
Workspace allocate_workspace(const std::string& op, int64_t bytes, nb::handle workspace_alloc, int device,
                             StreamHandle stream);
// Frees the kept buffers (baracuda.clear_workspaces()); returns how many there were.
size_t clear_workspaces();
// A caller's workspace tensor (None or unset: none): a writable, contiguous CUDA tensor on
// `device` (the operands'); run() is offered its whole size in bytes.
Workspace import_workspace(nb::handle workspace, int device);
// The workspace of a plan's run: the caller's `workspace` tensor when given (its whole size),
// else `bytes` through allocate_workspace when there is an allocator and bytes > 0, else none
// (run() then says what it needed).
Workspace given_or_allocated_workspace(nb::handle workspace, int64_t bytes, nb::handle workspace_alloc, int device,
                                       StreamHandle stream);

// ---- JAX: plans that XLA's FFI handler runs (xla.cpp) ----------------------------------------
// A plan selected at trace time (baracuda.jax), run later by the handler on views of XLA's buffers,
// given in registration order: the inputs, then the outputs.
using ViewRun = std::function<void(const TensorView* views, void* workspace, int64_t workspace_size, StreamHandle)>;
struct XlaPlan {
  ViewRun run;
  std::vector<TensorSpec> specs;  // each operand as the plan sees it (a transposed view has its strides)
  int num_inputs = 0;
};
// Returns the id the handler's `plan` attribute names. Plans live until exit: a compiled
// executable may run them at any time.
int64_t register_xla_plan(XlaPlan plan);
inline constexpr const char* kXlaPlanDoc =
    "Registers a selected plan for the XLA FFI handler (baracuda.jax): its operands' roles (run()'s names) and "
    "specs, inputs first; returns the id the custom call's `plan` attribute carries.";

// A field of a family's tensors struct, by the name its run() gives the operand.
template <class Tensors> struct NamedOperand {
  const char* name;
  TensorView Tensors::*member;
};

// A descriptor class (pure data): compared by value, hashed and printed through its str().
template <class Desc> nb::class_<Desc> bind_descriptor(nb::module_& m, const char* name, const char* doc) {
  nb::class_<Desc> c(m, name, doc);
  c.def("__eq__", [](const Desc& a, const Desc& b) { return a == b; })
      .def("__eq__", [](const Desc&, nb::handle) { return false; })  // another type: unequal, not a TypeError
      .def("__hash__", [](const Desc& d) { return std::hash<std::string>{}(d.str()); })
      .def("__repr__", &Desc::str);
  return c;
}

// A plan class with the members every family's plan binds: select(desc, preference=None), sku and
// descriptor (the family chains workspace_bytes and run, whose conventions and docs differ).
template <class Plan> nb::class_<Plan> bind_plan(nb::module_& m, const char* name, const char* doc) {
  using Desc = std::decay_t<decltype(std::declval<const Plan&>().descriptor())>;
  nb::class_<Plan> c(m, name, doc);
  c.def_static("select",
               [](const Desc& d, std::optional<PlanPreference> pref) {
                 return Plan::select(d, pref.value_or(PlanPreference{}));
               },
               nb::arg("desc"), nb::arg("preference") = nb::none(),
               "Validate the descriptor and pick a kernel; raises a baracuda.errors exception naming the reason.")
      .def_prop_ro("sku", &Plan::sku, "The kernel (backend, algorithm) this plan runs, and its precision guarantee.")
      .def_prop_ro("descriptor", &Plan::descriptor);
  return c;
}

// One run of a plan on imported operands: the stream (explicit, else `like`'s framework's current
// one), the workspace (the caller's tensor, else plan.workspace_bytes() through
// allocate_workspace; none when it needs none), the GIL released around run(), then the
// framework's wait (JAX).
template <class Plan, class Views>
void run_imported(const Plan& plan, const Views& views, const Imported& like, nb::handle workspace,
                  nb::handle workspace_alloc, nb::handle stream) {
  StreamHandle s = resolve_stream(stream, like);
  const Workspace ws =
      given_or_allocated_workspace(workspace, plan.workspace_bytes(), workspace_alloc, like.view.device, s);
  {
    nb::gil_scoped_release release;
    plan.run(views, ws.data, ws.size, s);
  }
  finish_for_framework(like, s);
}

// Appends a plain value's bytes to a plan-cache key.
template <class V> void append_pod(std::string& key, const V& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// run(**kwargs) of a plan with named operands: the tensors (a dict: name -> tensor or None) apart
// from `stream` and `workspace`.
struct RunKwargs {
  nb::dict tensors;
  nb::handle stream = nb::none(), workspace = nb::none();
};
inline RunKwargs split_run_kwargs(nb::kwargs kwargs) {
  RunKwargs r;
  for (auto [key, value] : kwargs) {
    const std::string name = nb::cast<std::string>(key);
    if (name == "stream") r.stream = value;
    else if (name == "workspace") r.workspace = value;
    else r.tensors[key] = value;
  }
  return r;
}

// run() of a plan whose operands have an order (elementwise, reduction, softmax: out, then the inputs)
// takes them by position or, as every plan's run, by name: run(**operands, workspace=, stream=).
// `outs` / `ins` name the slots in order. By position, args fill outs then ins (ins: every remaining
// argument); by name, each slot gets its keyword (none where absent, which the import then names).
// `extras`: keywords the family reads itself (extra[i], none where absent). Anything else raises
// InvalidArgument naming the op and what run() takes. No allocation on the way (plan.run is a hot
// path): names are C strings, slots fixed arrays.
struct Names {
  const char* const* at = nullptr;
  int n = 0;
};
struct OrderedOperands {
  static constexpr int kMax = 4;
  nb::handle outs[2], ins[kMax], extra[3];
  int n_outs = 0, n_ins = 0;
  nb::handle workspace = nb::none(), stream = nb::none();
};
OrderedOperands ordered_operands(const std::string& op, const nb::tuple& args, const nb::kwargs& kwargs, Names outs,
                                 Names ins, Names extras = {});
// The run() of a plan with one output `out` and inputs named by `input_names(plan)`, taken either way
// (ordered_operands), handed to run_plan(plan, out, inputs, n, workspace, stream).
template <class Plan, class InputNames, class RunPlan>
auto out_and_inputs_run(InputNames input_names, RunPlan run_plan) {
  return [input_names, run_plan](const Plan& plan, nb::args args, nb::kwargs kwargs) {
    static const char* kOut[] = {"out"};
    const OrderedOperands o = ordered_operands(plan.sku().op, args, kwargs, {kOut, 1}, input_names(plan));
    run_plan(plan, o.n_outs ? o.outs[0] : nb::none(), o.ins, o.n_ins, o.workspace, o.stream);
  };
}
// Imports each tensor of `tensors` (a dict: operand name -> tensor or None) into its slot of
// `table`: held[i] keeps the import alive, views.*member gets its view; `is_output(i)` marks the
// slots the plan writes. An unknown name raises InvalidArgument naming the family.
template <class Tensors, size_t N, class IsOutput>
void import_named(const char* family, nb::handle tensors, const NamedOperand<Tensors> (&table)[N],
                  Imported (&held)[N], Tensors& views, IsOutput&& is_output) {
  for (auto [key, value] : nb::borrow<nb::dict>(tensors)) {
    if (value.is_none()) continue;
    const std::string name = nb::cast<std::string>(key);
    size_t i = 0;
    while (i < N && name != table[i].name) ++i;
    if (i == N) throw InvalidArgument(std::string(family) + ": unknown operand '" + name + "'");
    held[i] = import_tensor(value, table[i].name, is_output(int(i)));
    views.*table[i].member = held[i].view;
  }
}

// One family's `xla_plan(plan, roles, specs, num_inputs)`: the operands named by the roles of its
// run() (e.g. "x", "rstd"), looked up in the family's operand table (static storage).
template <class Plan, class Tensors, size_t N>
void def_xla_plan(nb::module_& m, const char* family, const NamedOperand<Tensors> (&operands)[N]) {
  const NamedOperand<Tensors>* table = operands;
  m.def("xla_plan", [family, table](const Plan& plan, const std::vector<std::string>& roles,
                                    std::vector<TensorSpec> specs, int num_inputs) {
    std::vector<TensorView Tensors::*> fields;
    for (const std::string& role : roles) {
      size_t i = 0;
      while (i < N && role != table[i].name) ++i;
      if (i == N) throw InvalidArgument(std::string(family) + " xla_plan: unknown operand role '" + role + "'");
      fields.push_back(table[i].member);
    }
    return register_xla_plan(XlaPlan{[plan, fields](const TensorView* views, void* ws, int64_t ws_size, StreamHandle s) {
                                       Tensors t;
                                       for (size_t i = 0; i < fields.size(); ++i) t.*fields[i] = views[i];
                                       plan.run(t, ws, ws_size, s);
                                     },
                                     std::move(specs), num_inputs});
  }, nb::arg("plan"), nb::arg("roles"), nb::arg("specs"), nb::arg("num_inputs"), kXlaPlanDoc);
}
// The same for plans whose run() takes its operands by position: inputs first, then the outputs;
// launch(plan, outputs, num_outputs, inputs, num_inputs, workspace, workspace_size, stream).
template <class Plan, class Launch>
void def_xla_plan_outputs(nb::module_& m, Launch launch) {
  m.def("xla_plan", [launch](const Plan& plan, const std::vector<std::string>&, std::vector<TensorSpec> specs,
                             int num_inputs) {
    const int num_outputs = int(specs.size()) - num_inputs;
    return register_xla_plan(XlaPlan{[plan, launch, num_inputs, num_outputs](const TensorView* views, void* ws,
                                                                             int64_t ws_size, StreamHandle s) {
                                       launch(plan, views + num_inputs, num_outputs, views, num_inputs, ws, ws_size, s);
                                     },
                                     std::move(specs), num_inputs});
  }, nb::arg("plan"), nb::arg("roles"), nb::arg("specs"), nb::arg("num_inputs"), kXlaPlanDoc);
}
// ... and for run(out, inputs...): one output, registered last.
template <class Plan, class Launch>
void def_xla_plan_positional(nb::module_& m, Launch launch) {
  def_xla_plan_outputs<Plan>(m, [launch](const Plan& plan, const TensorView* outs, int, const TensorView* ins, int n,
                                         void* ws, int64_t ws_size, StreamHandle s) {
    launch(plan, outs[0], ins, n, ws, ws_size, s);
  });
}

DType dtype_from_dlpack(nb::dlpack::dtype t, const char* name);
nb::dlpack::dtype dlpack_from_dtype(DType t);

void init_core(nb::module_& m);
void init_elementwise(nb::module_& m);
void init_reduction(nb::module_& m);
void init_norm(nb::module_& m);
void init_gemm(nb::module_& m);
void init_softmax(nb::module_& m);
void init_loss(nb::module_& m);
void init_scan(nb::module_& m);
void init_attention(nb::module_& m);
void init_rope(nb::module_& m);
void init_kv_cache(nb::module_& m);
void init_paged_attention(nb::module_& m);
void init_sampling(nb::module_& m);
void init_embedding(nb::module_& m);
void init_moe(nb::module_& m);
void init_xla(nb::module_& m);

}  // namespace baracuda::py
