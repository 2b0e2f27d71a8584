// baracuda._C: the module file only calls each area's init.
#include "common.h"

NB_MODULE(_C, m) {
  m.doc() = "baracuda core bindings (use the baracuda package, not this module directly)";
  // Plans and cached framework callables live until exit by design; user scripts that hold
  // baracuda objects in globals at shutdown would otherwise see nanobind's leak report.
  nb::set_leak_warnings(false);
  baracuda::py::init_core(m);
  baracuda::py::init_elementwise(m);
  baracuda::py::init_reduction(m);
  baracuda::py::init_norm(m);
  baracuda::py::init_gemm(m);
  baracuda::py::init_softmax(m);
  baracuda::py::init_loss(m);
  baracuda::py::init_scan(m);
  baracuda::py::init_attention(m);
  baracuda::py::init_rope(m);
  baracuda::py::init_kv_cache(m);
  baracuda::py::init_paged_attention(m);
  baracuda::py::init_sampling(m);
  baracuda::py::init_embedding(m);
  baracuda::py::init_moe(m);
  baracuda::py::init_xla(m);
}
