// baracuda._C: the module file only calls each area's init.
#include "common.h"

NB_MODULE(_C, m) {
  m.doc() = "baracuda core bindings (use the baracuda package, not this module directly)";
  baracuda::py::init_core(m);
  baracuda::py::init_elementwise(m);
}
