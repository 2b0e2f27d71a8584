// The scan family: cumsum, cumprod, cummax / cummin (values and int64 indices), logcumsumexp
// along one axis (negative allowed), and the backward plans of cumsum, cumprod and
// logcumsumexp.
//
// One descriptor names the op, its input specs (in the op table's order), the axis and its
// output specs; select() validates it and picks a kernel (rows: the scanned axis is the
// contiguous one; columns: any other layout, a thread walks the axis for its columns), with a
// three-pass split (reduce / scan of partials / rescan) when a few long scans would leave the
// GPU idle. run() checks the tensors against the descriptor and launches.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "baracuda/plan.h"
#include "baracuda/registry.h"
#include "baracuda/tensor.h"

namespace baracuda {

// One row of the op table. docs/ops.md and the Python functional API are generated from it.
struct ScanOpInfo {
  std::string name;
  int kind;                               // scan::ScanKind value (cuda/scan/scan_launch.h)
  bool is_backward = false;
  std::vector<std::string> inputs;        // operand names, in the order run() takes them
  std::vector<std::string> outputs;       // output names, in order
  std::vector<DType> dtypes;              // supported dtypes of the first input
  std::string out_dtype;                  // rule, for docs
  std::string backward;                   // name of the backward op, "" if none
  std::string doc;                        // one line
};
const std::vector<ScanOpInfo>& scan_ops();
const ScanOpInfo* find_scan_op(const std::string& name);  // nullptr if unknown

struct ScanDescriptor {
  std::string op;
  std::vector<TensorSpec> inputs;         // forward: {x}; cumsum_backward: {grad_out};
                                          // cumprod / logcumsumexp backward: {grad_out, x, y}
  int64_t axis = -1;                      // negative allowed
  std::vector<TensorSpec> outputs;        // {out}; cummax / cummin: {values, indices}; backward: {grad_x}
  bool operator==(const ScanDescriptor& o) const {
    return op == o.op && inputs == o.inputs && axis == o.axis && outputs == o.outputs;
  }
  std::string str() const;
};

class ScanPlan {
 public:
  // Validates everything knowable without data; throws InvalidArgument / InvalidDType /
  // Unsupported naming the argument. Needs no GPU.
  static ScanPlan select(const ScanDescriptor& desc, const PlanPreference& pref = PlanPreference{});
  const KernelSku& sku() const;
  const ScanDescriptor& descriptor() const;
  int64_t workspace_bytes() const;  // > 0 only for the split (three-pass) kernels
  int num_inputs() const;
  int num_outputs() const;
  // Checks the tensors against the descriptor and launches on `stream`. Never allocates,
  // never synchronizes.
  void run(const TensorView* outputs, int num_outputs, const TensorView* inputs, int num_inputs,
           void* workspace = nullptr, int64_t workspace_size = 0, StreamHandle stream = nullptr) const;
  void run(const TensorView& out, const TensorView& x, void* workspace = nullptr, int64_t workspace_size = 0,
           StreamHandle stream = nullptr) const {
    run(&out, 1, &x, 1, workspace, workspace_size, stream);
  }

  struct Impl;
  ScanPlan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
 private:
  std::shared_ptr<const Impl> impl_;
};

FamilyInfo scan_family_info();

}  // namespace baracuda
