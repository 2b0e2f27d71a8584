// The attention family's cuDNN backend in a build without the cuDNN headers (BARACUDA_ENABLE_CUDNN
// off): the same interface (cudnn/attention_cudnn.h), refusing every case with the reason, so the
// plan has one code path.
#include "cudnn/attention_cudnn.h"

#include "baracuda/errors.h"

namespace baracuda::attention_cudnn {

std::string rule_out(const AttentionDescriptor&, const attention::Geometry&) {
  return "this build has no cuDNN backend (BARACUDA_ENABLE_CUDNN off: its headers were not found at build time)";
}

std::shared_ptr<const Graphs> build(const AttentionDescriptor& desc, const attention::Geometry& g, std::string& why) {
  why = rule_out(desc, g);
  return nullptr;
}

// Unreachable: no plan holds Graphs in this build.
int64_t workspace_bytes(const Graphs&) { return 0; }
std::string library_version() { return ""; }
void run(const Graphs&, const AttentionTensors&, const attention::Pointers&, void*, int64_t, StreamHandle, int) {
  throw Unsupported("attention: this build has no cuDNN backend");
}

}  // namespace baracuda::attention_cudnn
