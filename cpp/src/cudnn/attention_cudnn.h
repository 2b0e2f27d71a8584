// The attention family's cuDNN backend: cuDNN's fused flash attention (SDPA) graphs through
// cudnn-frontend, built when a plan is selected and cached in it. cudnn/attention_cudnn.cpp
// implements it where BARACUDA_ENABLE_CUDNN found the headers, cudnn_off/attention_cudnn.cpp (which
// refuses every case) elsewhere; this header needs no cuDNN include.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "attention/attention_launch.h"
#include "baracuda/attention.h"

namespace baracuda::attention_cudnn {

struct Graphs;  // the case's graphs, one per device and output-stride pattern

// "" when cuDNN may take the case by our rules (16-bit, no softcap / ALiBi; dense operands
// with every query row seeing a key, or per-sequence lengths: packed sequences or seqused_k), else
// why not.
std::string rule_out(const AttentionDescriptor& desc, const attention::Geometry& g);
// Loads cuDNN and builds the case's graph on the current device (what cuDNN supports is only known
// by asking it); a backward when desc.op is "attention_backward". Null, with `why`, when cuDNN is
// not available or refuses the case.
std::shared_ptr<const Graphs> build(const AttentionDescriptor& desc, const attention::Geometry& g, std::string& why);
int64_t workspace_bytes(const Graphs& graphs);
std::string library_version();  // e.g. "9.19.0"
// Runs on `stream`; the operands are checked by the plan (`p`: the same operands as the kernels
// see them). A new device or output-stride pattern builds (and caches) its graph first.
void run(const Graphs& graphs, const AttentionTensors& t, const attention::Pointers& p, void* workspace,
         int64_t workspace_size, StreamHandle stream, int device);

}  // namespace baracuda::attention_cudnn
