// Bindings of the GEMM family: descriptor, plan, backend info, and a cached functional entry.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <unordered_map>

#include "baracuda/errors.h"
#include "baracuda/gemm.h"
#include "common.h"

using namespace nb::literals;

namespace baracuda::py {

namespace {

GemmScale scale_from_name(const std::string& s, const char* arg) {
  if (s == "none") return GemmScale::None;
  if (s == "tensor") return GemmScale::Tensor;
  if (s == "vector") return GemmScale::Vector;
  throw InvalidArgument(std::string("gemm: ") + arg + " must be 'none', 'tensor' or 'vector', got '" + s + "'");
}
const char* scale_str(GemmScale s) {
  return s == GemmScale::None ? "none" : (s == GemmScale::Tensor ? "tensor" : "vector");
}

GemmDescriptor make_desc(TensorSpec a, TensorSpec b, TensorSpec out, double alpha, double beta,
                         const std::string& epilogue, std::optional<DType> bias, bool aux,
                         std::optional<DType> bias_grad, const std::string& a_scale, const std::string& b_scale,
                         bool amax) {
  GemmDescriptor d;
  d.a = std::move(a), d.b = std::move(b), d.out = std::move(out);
  d.alpha = alpha, d.beta = beta;
  d.epilogue = epilogue_from_name(epilogue);
  if (bias && bias_grad) throw InvalidArgument("gemm: bias and bias_grad exclude each other");
  d.bias = bias.has_value();
  d.bias_grad = bias_grad.has_value();
  d.bias_dtype = bias ? *bias : (bias_grad ? *bias_grad : DType::Float32);
  d.aux = aux;
  d.a_scale = scale_from_name(a_scale, "a_scale");
  d.b_scale = scale_from_name(b_scale, "b_scale");
  d.amax = amax;
  return d;
}

// Every tensor a run may take; None = absent.
struct RunArgs {
  nb::handle out, a, b, bias, aux, bias_grad, a_scale, b_scale, amax;
};

// The operands of a GEMM run, in import order: inputs before out, so a CPU input is named, not the
// output allocated from it.
enum GemmSlot { kA, kB, kOut, kBias, kAux, kBiasGrad, kAScale, kBScale, kAmax, kGemmSlots };
const NamedOperand<GemmTensors> kGemmOperands[kGemmSlots] = {
    {"a", &GemmTensors::a},
    {"b", &GemmTensors::b},
    {"out", &GemmTensors::out},
    {"bias", &GemmTensors::bias},
    {"aux", &GemmTensors::aux},
    {"bias_grad", &GemmTensors::bias_grad},
    {"a_scale", &GemmTensors::a_scale},
    {"b_scale", &GemmTensors::b_scale},
    {"amax", &GemmTensors::amax}};
bool gemm_writes(int slot) { return slot == kOut || slot == kAux || slot == kBiasGrad || slot == kAmax; }

// Imports the given operands that `im` does not already hold (`im` keeps them alive).
GemmTensors import_gemm(const RunArgs& r, Imported* im) {
  const nb::handle hs[kGemmSlots] = {r.a, r.b, r.out, r.bias, r.aux, r.bias_grad, r.a_scale, r.b_scale, r.amax};
  GemmTensors t;
  for (int i = 0; i < kGemmSlots; ++i) {
    const bool required = i == kA || i == kB || i == kOut;
    if (!required && !present(hs[i])) continue;
    if (!im[i].imported) im[i] = import_tensor(hs[i], kGemmOperands[i].name, gemm_writes(i));
    t.*kGemmOperands[i].member = im[i].view;
  }
  return t;
}

// Launches with the GIL released on `s`, offering `workspace_size` bytes of `w`; hands results to JAX.
void launch_gemm(const GemmPlan& plan, const GemmTensors& t, const Imported& a, const Workspace& w,
                 int64_t workspace_size, StreamHandle s) {
  {
    nb::gil_scoped_release release;
    plan.run(t, w.data, w.data ? workspace_size : 0, s);
  }
  finish_for_framework(a, s);
}

}  // namespace

void init_gemm(nb::module_& m) {
  bind_descriptor<GemmDescriptor>(m, "GemmDescriptor",
                             "out = alpha * a @ b + beta * out, then the epilogue. a [..., M, K], b [..., K, N], "
                             "out [..., M, N]; each row- or column-major with a leading dimension; batch dims "
                             "broadcast. Pure data; hashable; the plan-cache key.")
      .def(nb::init<>())
      .def("__init__",
           [](GemmDescriptor* d, TensorSpec a, TensorSpec b, TensorSpec out, double alpha, double beta,
              const std::string& epilogue, std::optional<DType> bias, bool aux, std::optional<DType> bias_grad,
              const std::string& a_scale, const std::string& b_scale, bool amax) {
             new (d) GemmDescriptor(make_desc(std::move(a), std::move(b), std::move(out), alpha, beta, epilogue, bias,
                                              aux, bias_grad, a_scale, b_scale, amax));
           },
           "a"_a, "b"_a, "out"_a, "alpha"_a = 1.0, "beta"_a = 0.0, "epilogue"_a = "none", "bias"_a = nb::none(),
           "aux"_a = false, "bias_grad"_a = nb::none(), "a_scale"_a = "none", "b_scale"_a = "none", "amax"_a = false,
           "epilogue: none | relu | gelu | gelu_tanh | silu | dgelu_tanh | bias_grad. bias / bias_grad: the dtype of "
           "the [N] bias (added before the activation) / of the bias gradient written by the bias_grad ([M]: sum of a "
           "over K) or dgelu_tanh ([N]: sum of out over M) epilogues. aux: gelu / gelu_tanh / silu also store the "
           "pre-activation; dgelu_tanh reads it. a_scale / b_scale: 'tensor' (fp8: f32 scalars) or 'vector' (int8: "
           "f32 [M] / [N]). amax: fp8 also stores max |out|.")
      .def_ro("a", &GemmDescriptor::a)
      .def_ro("b", &GemmDescriptor::b)
      .def_ro("out", &GemmDescriptor::out)
      .def_ro("alpha", &GemmDescriptor::alpha)
      .def_ro("beta", &GemmDescriptor::beta)
      .def_prop_ro("epilogue", [](const GemmDescriptor& d) { return std::string(epilogue_name(d.epilogue)); })
      .def_prop_ro("bias", [](const GemmDescriptor& d) { return d.bias ? std::optional<DType>(d.bias_dtype) : std::nullopt; })
      .def_ro("aux", &GemmDescriptor::aux)
      .def_prop_ro("bias_grad",
                   [](const GemmDescriptor& d) { return d.bias_grad ? std::optional<DType>(d.bias_dtype) : std::nullopt; })
      .def_prop_ro("a_scale", [](const GemmDescriptor& d) { return std::string(scale_str(d.a_scale)); })
      .def_prop_ro("b_scale", [](const GemmDescriptor& d) { return std::string(scale_str(d.b_scale)); })
      .def_ro("amax", &GemmDescriptor::amax);

  bind_plan<GemmPlan>(m, "GemmPlan", "A validated GEMM: backend and algorithm chosen once, run many times.")
      .def("workspace_bytes", &GemmPlan::workspace_bytes,
           "Scratch bytes run() should get (less narrows cuBLASLt's choice; int8 dequant needs all of it).")
      .def("run",
           [](const GemmPlan& p, nb::handle out, nb::handle a, nb::handle b, nb::handle bias, nb::handle aux,
              nb::handle bias_grad, nb::handle a_scale, nb::handle b_scale, nb::handle amax, nb::handle workspace,
              nb::handle stream) {
             Imported im[kGemmSlots];
             const GemmTensors t = import_gemm(RunArgs{out, a, b, bias, aux, bias_grad, a_scale, b_scale, amax}, im);
             const Workspace w = import_workspace(workspace, im[kA].view.device);
             launch_gemm(p, t, im[kA], w, w.size, resolve_stream(stream, im[kA]));
           },
           "out"_a, "a"_a, "b"_a, nb::kw_only(), "bias"_a = nb::none(), "aux"_a = nb::none(),
           "bias_grad"_a = nb::none(), "a_scale"_a = nb::none(), "b_scale"_a = nb::none(), "amax"_a = nb::none(),
           "workspace"_a = nb::none(), "stream"_a = nb::none(),
           "Check the tensors against the descriptor and launch on `stream` (default: the current stream of a's "
           "framework). Never allocates, never synchronizes (except to hand results to JAX).");

  def_xla_plan<GemmPlan>(m, "gemm", kGemmOperands);

  m.def("gemm_call",
        [](nb::handle out, nb::handle a, nb::handle b, double alpha, double beta, const std::string& epilogue,
           nb::handle bias, nb::handle aux, nb::handle bias_grad, nb::handle a_scale, nb::handle b_scale,
           nb::handle amax, bool allow_tf32, nb::handle stream, nb::handle workspace_alloc) {
          // Inputs first: a CPU operand is named, not the output allocated from it. Each operand is
          // imported once, for the plan key, and handed to the launch.
          Imported im[kGemmSlots];
          const Imported& ia = im[kA] = import_tensor(a, "a", false);
          const Imported& ib = im[kB] = import_tensor(b, "b", false);
          const Imported& o = im[kOut] = import_tensor(out, "out", true);
          std::optional<DType> bias_dt, grad_dt;
          if (present(bias)) bias_dt = (im[kBias] = import_tensor(bias, "bias", false)).view.dtype;
          if (present(bias_grad)) grad_dt = (im[kBiasGrad] = import_tensor(bias_grad, "bias_grad", true)).view.dtype;
          auto scale_kind = [&](nb::handle h, int slot, const char* name) -> std::string {
            if (!present(h)) return "none";
            im[slot] = import_tensor(h, name, false);
            return im[slot].view.numel() == 1 && is_fp8(ia.view.dtype) ? "tensor" : "vector";
          };
          const std::string sa = scale_kind(a_scale, kAScale, "a_scale"), sb = scale_kind(b_scale, kBScale, "b_scale");
          std::string key = epilogue;
          key.push_back('\0');
          for (double v : {alpha, beta}) key.append(reinterpret_cast<const char*>(&v), sizeof v);
          key += char(bias_dt ? int(*bias_dt) + 1 : 0);
          key += char(grad_dt ? int(*grad_dt) + 1 : 0);
          key += present(aux) ? 'x' : '-';
          key += sa[0];
          key += sb[0];
          key += present(amax) ? 'm' : '-';
          key += allow_tf32 ? 't' : '-';
          append_key(key, o.view);
          append_key(key, ia.view);
          append_key(key, ib.view);
          const GemmPlan plan = plan_cache<GemmPlan, 1024>().get(key, [&] {
            GemmDescriptor d = make_desc(spec_of(ia.view), spec_of(ib.view), spec_of(o.view), alpha, beta, epilogue,
                                         bias_dt, present(aux), grad_dt, sa, sb, present(amax));
            PlanPreference pref;
            pref.allow_tf32 = allow_tf32;
            return GemmPlan::select(d, pref);
          });
          StreamHandle s = resolve_stream(stream, ia);
          const int64_t need = plan.workspace_bytes();
          const Workspace ws = allocate_workspace("gemm", need, workspace_alloc, ia.view.device, s);
          const GemmTensors t = import_gemm(RunArgs{out, a, b, bias, aux, bias_grad, a_scale, b_scale, amax}, im);
          launch_gemm(plan, t, ia, ws, need, s);
        },
        "out"_a, "a"_a, "b"_a, "alpha"_a, "beta"_a, "epilogue"_a, "bias"_a.none(), "aux"_a.none(),
        "bias_grad"_a.none(), "a_scale"_a.none(), "b_scale"_a.none(), "amax"_a.none(), "allow_tf32"_a,
        "stream"_a = nb::none(), "workspace_alloc"_a = nb::none(),
        "Functional entry: select (cached on the arguments' metadata) and run.");
  m.def("gemm_cache_size", [] { return plan_cache<GemmPlan, 1024>().size(); }, "Plans in the functional GEMM cache.");

  bind_descriptor<GroupedGemmDescriptor>(m, "GroupedGemmDescriptor",
                                    "Mixture-of-experts GEMM: x [T, K] sorted by expert, w [E, N, K], out [T, N]. "
                                    "group_sizes (host, rows per expert) selects one cuBLASLt GEMM per expert; "
                                    "without it the rows come from a device offsets array [E + 1] at run time and "
                                    "one kernel of ours covers every expert.")
      .def("__init__",
           [](GroupedGemmDescriptor* d, TensorSpec x, TensorSpec w, TensorSpec out, std::vector<int64_t> group_sizes,
              DType offsets_dtype, bool bias, int64_t max_rows_per_group) {
             new (d) GroupedGemmDescriptor{std::move(x), std::move(w), std::move(out), std::move(group_sizes),
                                           offsets_dtype, bias, max_rows_per_group};
           },
           "x"_a, "w"_a, "out"_a, "group_sizes"_a = std::vector<int64_t>{}, "offsets_dtype"_a = DType::Int32,
           "bias"_a = false, "max_rows_per_group"_a = -1)
      .def_ro("x", &GroupedGemmDescriptor::x)
      .def_ro("w", &GroupedGemmDescriptor::w)
      .def_ro("out", &GroupedGemmDescriptor::out)
      .def_ro("group_sizes", &GroupedGemmDescriptor::group_sizes)
      .def_ro("offsets_dtype", &GroupedGemmDescriptor::offsets_dtype)
      .def_ro("bias", &GroupedGemmDescriptor::bias)
      .def_ro("max_rows_per_group", &GroupedGemmDescriptor::max_rows_per_group);

  bind_plan<GroupedGemmPlan>(m, "GroupedGemmPlan", "A validated grouped (mixture-of-experts) GEMM.")
      .def("workspace_bytes", &GroupedGemmPlan::workspace_bytes)
      .def("run",
           [](const GroupedGemmPlan& p, nb::handle out, nb::handle x, nb::handle w, nb::handle offsets,
              nb::handle bias, nb::handle workspace, nb::handle stream) {
             Imported o = import_tensor(out, "out", true), ix = import_tensor(x, "x", false),
                      iw = import_tensor(w, "w", false), io, ib;
             GroupedGemmTensors t;
             t.out = o.view, t.x = ix.view, t.w = iw.view;
             if (!offsets.is_none()) io = import_tensor(offsets, "offsets", false), t.offsets = io.view;
             if (!bias.is_none()) ib = import_tensor(bias, "bias", false), t.bias = ib.view;
             const Workspace ws = import_workspace(workspace, ix.view.device);
             StreamHandle s = resolve_stream(stream, ix);
             {
               nb::gil_scoped_release release;
               p.run(t, ws.data, ws.size, s);
             }
             finish_for_framework(ix, s);
           },
           "out"_a, "x"_a, "w"_a, nb::kw_only(), "offsets"_a = nb::none(), "bias"_a = nb::none(),
           "workspace"_a = nb::none(), "stream"_a = nb::none(),
           "Launch on `stream` (default: x's framework's current stream). offsets: the device array [E + 1] "
           "when the plan was selected without group_sizes.");

  m.def("gemm_backend_info",
        [] {
          GemmBackendInfo b = gemm_backend_info();
          nb::dict d;
          d["cublaslt_available"] = b.cublaslt_available;
          d["cublaslt_path"] = b.cublaslt_path;
          d["cublaslt_version"] = b.cublaslt_version;
          d["error"] = b.error;
          d["cublas_available"] = b.cublas_available;
          d["cublas_path"] = b.cublas_path;
          d["cublas_error"] = b.cublas_error;
          return d;
        },
        "Whether cuBLASLt (and cuBLAS, for tf32) loaded, from where, cuBLASLt's version (loads them on first "
        "call).");
}

}  // namespace baracuda::py
