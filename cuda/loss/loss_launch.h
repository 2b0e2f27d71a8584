// The contract between the loss plan layer (cpp/src/loss.cpp) and the kernels: plain C++, no
// CUDA types. select() fills the geometry; run() adds the pointers and the workspace.
#pragma once
#include <cstdint>

#include "baracuda/dtype.h"

namespace baracuda::loss {

enum class Reduction { None = 0, Mean = 1, Sum = 2 };

// Cross-entropy over rows of logits [N, V] (unit stride along V).
//   forward:            per-row partial (max, sum exp, sum w*x) over `chunks` column chunks,
//                       then one thread per row (lse, loss), then one block for the reduction.
//   with_grad/backward: grad = scale_i * (a_i * softmax - (1-eps) w_t onehot - eps/V * w).
struct CeLaunch {
  DType dtype = DType::Float32;     // logits (= weight, grad_loss, loss, grad dtype)
  DType target_dtype = DType::Int64;
  int64_t n = 0, v = 0;
  int64_t x_stride = 0;             // logits row stride (elements)
  int64_t gx_stride = 0;            // grad row stride (elements)
  int64_t out_stride = 1;           // reduction none: loss[i] stride
  int64_t target_stride = 1, lse_stride = 1, grad_loss_stride = 0, weight_stride = 1;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::Mean;
  bool forward = true;              // false: backward from a saved lse
  bool with_grad = false;           // forward also writes the gradient
  bool vec = true;                  // 16-byte vectors (strides aligned; run() checks pointers)
  int chunks = 1;                   // column chunks per row
  int64_t chunk_len = 0;            // multiple of the vector width
  // Pointers (run()).
  const void* x = nullptr;
  const void* target = nullptr;
  const void* weight = nullptr;     // nullptr: all ones
  const void* grad_loss = nullptr;  // nullptr: 1
  void* out = nullptr;              // loss (forward)
  void* lse = nullptr;              // f32 [N] (f64 for f64 logits): written forward, read backward
  void* grad = nullptr;             // grad of the logits
  void* workspace = nullptr;
};

// Bytes of workspace a launch needs (partials, per-row losses and weights, two scalars).
int64_t ce_workspace_bytes(const CeLaunch& L);
void ce_launch(const CeLaunch& L, void* stream);
bool ce_has_kernel(DType t);

}  // namespace baracuda::loss
