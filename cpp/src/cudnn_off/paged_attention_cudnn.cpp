// The paged_attention family's cuDNN backend in a build without the cuDNN headers: the same interface
// (cudnn/paged_attention_cudnn.h), refusing every case with the reason.
#include "cudnn/paged_attention_cudnn.h"

#include "baracuda/errors.h"

namespace baracuda::paged_attention_cudnn {

std::string rule_out(const PagedAttentionDescriptor&, const paged_attention::Geometry&) {
  return "this build has no cuDNN backend (BARACUDA_ENABLE_CUDNN off: its headers were not found at build time)";
}

std::shared_ptr<const Graphs> build(const PagedAttentionDescriptor& desc, const paged_attention::Geometry& g,
                                    std::string& why) {
  why = rule_out(desc, g);
  return nullptr;
}

// Unreachable: no plan holds Graphs in this build.
int64_t workspace_bytes(const Graphs&) { return 0; }
void run(const Graphs&, const paged_attention::Geometry&, const paged_attention::Pointers&, void*, int64_t,
         StreamHandle, int) {
  throw Unsupported("paged_attention: this build has no cuDNN backend");
}

}  // namespace baracuda::paged_attention_cudnn
