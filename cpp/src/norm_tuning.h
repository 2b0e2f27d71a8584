// The norm family's tuning: the configurations select() picks from the shape (cpp/src/norm.cpp),
// apart from the launch contract (cuda/norm/norm_launch.h: what kernels exist and what a launch
// carries). Every rule here was chosen by a sweep (bench_norm.py --sweep); the numbers are in
// docs/benchmark-notes.md.
#pragma once
#include <cstdint>
#include <vector>

#include "common/knobs.h"
#include "norm/norm_launch.h"

namespace baracuda::norm {

// A tuning override for the register path, from an environment variable such as
// BARACUDA_NORM_CFG="tpr=256,items=2,rows=2" (forward) or BARACUDA_NORM_BWD_CFG="tpr=1024,items=8,xs=1".
// Zero fields are "not given". Invalid / non-fitting overrides are ignored by register_config.
struct Override {
  int tpr = 0, items = 0, rows = 0, xs = -1;
  int cluster = 0;   // > 1 asks for the cluster path (with tpr, items); 1 forbids it
  int clusters = 0;  // backward cluster path: clusters of the persistent grid (0: the default)
  int prefetch = -1; // register path: 1 / 0 asks for / forbids the prefetching kernel
  int regacc = -1;   // register path, backward: 1 / 0 asks for / forbids register accumulators
  int spec = -1;     // register path: 0 forbids the operand-specialized kernels
  int pshared = -1;  // parameters through shared memory (Config::param_smem): forward 1 = the last one
                     // resident, 2 = the ring; backward cluster 0 forbids the weight in shared memory
  int fty = 0, fpdl = -1;  // backward: the dweight / dbias finish (Config::finish_*)
  bool any() const {
    return tpr || items || rows || xs >= 0 || cluster || clusters || prefetch >= 0 || regacc >= 0 || spec >= 0 ||
           pshared >= 0 || fty || fpdl >= 0;
  }
  // The finish knobs onto a backward configuration (whichever path it is).
  void apply_finish(Config& c) const {
    if (fty) c.finish_ty = fty;
    if (fpdl >= 0) c.finish_pdl = fpdl;
  }
};
Override parse_override(const std::vector<Knob>& knobs);

// The register-resident configuration: the whole row in registers (x's row in shared memory for
// the xs backward), one read of each input and one write of each output; the cluster path (sm_90)
// for rows past one block. `ok` is false when the row does not fit (or H is not a multiple of the
// vector width); the looped path takes it then.
Config register_config(DType t, bool layer, bool backward, int64_t H, int64_t rows, bool* ok,
                       const Override& ov = Override{}, bool allow_cluster = true, bool residual = false);

// The looped configuration: any H, any alignment.
Config looped_config(DType t, bool backward, int64_t H, int64_t rows, bool vectorized);

// What a cluster configuration runs on a device without thread-block clusters (before sm_90); the
// plan stores it in NormLaunch::fallback.
Config cluster_fallback_config(DType t, bool layer, int64_t H, int64_t rows, bool backward = false);

// The persistent grid of a backward cluster configuration: `clusters` clusters (at most one per
// row), one [H] row of dweight / dbias partial sums each.
void set_bwd_clusters(Config& c, int64_t clusters, int64_t rows);

// The grid of a register / looped configuration (forward: one block per group of rows, up to
// kMaxGrid; backward: at most one wave of resident blocks on a 132-SM device).
void finish_grid(Config& c, bool backward, int64_t rows, DType t = DType::Float32, bool layer = false);

}  // namespace baracuda::norm
