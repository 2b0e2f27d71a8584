// The paged_attention family's cuDNN backend: cuDNN's fused attention reading the paged caches
// through page tables (a prefill of new tokens against cached pages). cudnn/paged_attention_cudnn.cpp
// implements it where BARACUDA_ENABLE_CUDNN found the headers, cudnn_off/paged_attention_cudnn.cpp
// (which refuses every case) elsewhere; this header needs no cuDNN include.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "baracuda/paged_attention.h"
#include "paged_attention/paged_attention_launch.h"
#include "plan_util.h"

namespace baracuda::paged_attention_cudnn {

struct Graphs;  // the case's graph, one per device and out-stride pattern

// "" when cuDNN may take the case by our rules (16-bit q and caches of its dtype, or bf16 q over fp8
// caches through a dequantized pool; head dim a multiple of 8 up to 256, no softcap or ALiBi: cuDNN
// takes per-request lengths only without a score modifier), else why not.
std::string rule_out(const PagedAttentionDescriptor& desc, const paged_attention::Geometry& g);
// Loads cuDNN and builds the case's graph on the current device; null with `why` when cuDNN is not
// available or refuses it. `g` holds the descriptor's geometry; the strides come from the specs.
std::shared_ptr<const Graphs> build(const PagedAttentionDescriptor& desc, const paged_attention::Geometry& g,
                                    std::string& why);
int64_t workspace_bytes(const Graphs& graphs);
// Over fp8 caches: the pages of the bf16 pool cuDNN reads (every column of the table, plus the zero
// page for columns past a request's keys), and the workspace bytes of one of its two pools (K, V).
inline int64_t fp8_pool_pages(const paged_attention::Geometry& g) { return g.batch * g.max_pages + 1; }
inline int64_t fp8_pool_bytes(const paged_attention::Geometry& g) {
  return align256(fp8_pool_pages(g) * g.page_size * g.hkv * g.d * 2);
}
// Runs on `stream`: `g` with the run's strides, `p` the checked operands. The workspace starts with
// the per-request lengths and a sanitised copy of the block table (entries outside [0, pages) read
// page 0, never out of bounds), written on the device: a captured run replays for new tables. Over
// fp8 caches it then holds the bf16 pool of the table's pages (paged_attention_launch.h, CudnnPaged).
void run(const Graphs& graphs, const paged_attention::Geometry& g, const paged_attention::Pointers& p,
         void* workspace, int64_t workspace_size, StreamHandle stream, int device);

}  // namespace baracuda::paged_attention_cudnn
