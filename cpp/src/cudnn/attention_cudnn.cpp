// cuDNN SDPA graphs for the attention family (see attention_cudnn.h).
#include "cudnn/attention_cudnn.h"

#include <cuda_runtime.h>
#include <cudnn_frontend.h>

#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "baracuda/errors.h"
#include "cudnn/cudnn_runtime.h"

namespace baracuda::attention_cudnn {

namespace fe = cudnn_frontend;

namespace {

// Tensor uids of the variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kGradOut, kGradQ, kGradK, kGradV };

// Per operand, its batch / head / row strides (the last dim is contiguous): the graph's layout.
struct Strides {
  int64_t batch, head, row;
};
using Key = std::vector<int64_t>;  // device, then Strides of q, k, v, out (+ grad_out, grad_q, grad_k, grad_v)

Strides of_spec(const TensorSpec& s) {
  const auto st = s.effective_strides();
  return {st[0], st[2], st[1]};
}
Strides of_view(const TensorView& v) { return {v.strides[0], v.strides[2], v.strides[1]}; }
void append(Key& key, const Strides& s) { key.insert(key.end(), {s.batch, s.head, s.row}); }

template <class Attributes>
void set_band(Attributes& a, const attention::Geometry& g) {
  if (g.window_left < 0 && g.window_right < 0) return;
  // With Sq == Sk the alignments agree; cuDNN's causal backward is faster told top-left
  // (docs/benchmarks.md).
  const bool top_left = g.top_left || g.sq == g.sk;
  a.set_diagonal_alignment(top_left ? fe::DiagonalAlignment_t::TOP_LEFT : fe::DiagonalAlignment_t::BOTTOM_RIGHT);
  if (g.window_right >= 0) a.set_diagonal_band_right_bound(int(g.window_right));
  // cuDNN's left bound counts the diagonal: key j is visible when j > pos - left_bound.
  if (g.window_left >= 0) a.set_diagonal_band_left_bound(int(g.window_left + 1));
}

}  // namespace

struct Graphs {
  AttentionDescriptor desc;
  attention::Geometry geo;
  bool backward = false;
  int64_t workspace = 0;  // of the graph built at select (other stride patterns must fit in it)
  mutable std::mutex mu;
  mutable std::map<Key, std::shared_ptr<fe::graph::Graph>> graphs;

  // Builds the graph for `key`; null with `why` when cuDNN refuses it.
  std::shared_ptr<fe::graph::Graph> make(const Key& key, std::string& why) const {
    const attention::Geometry& g = geo;
    const auto* st = reinterpret_cast<const Strides*>(key.data() + 1);
    auto graph = std::make_shared<fe::graph::Graph>();
    graph->set_io_data_type(g.dtype == DType::BFloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    auto dims = [&](int64_t heads, int64_t seq, int64_t d) { return std::vector<int64_t>{g.batch, heads, seq, d}; };
    auto layout = [](const Strides& s) { return std::vector<int64_t>{s.batch, s.head, s.row, 1}; };
    auto input = [&](const char* name, int64_t uid, std::vector<int64_t> dim, const Strides& s) {
      return graph->tensor(
          fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(std::move(dim)).set_stride(layout(s)));
    };
    auto output = [&](const std::shared_ptr<fe::graph::Tensor_attributes>& t, int64_t uid, std::vector<int64_t> dim,
                      const Strides& s) { t->set_output(true).set_uid(uid).set_dim(std::move(dim)).set_stride(layout(s)); };
    const std::vector<int64_t> stats_dim = {g.batch, g.hq, g.sq, 1}, stats_stride = {g.hq * g.sq, g.sq, 1, 1};
    auto q = input("q", kQ, dims(g.hq, g.sq, g.d), st[0]);
    auto k = input("k", kK, dims(g.hkv, g.sk, g.d), st[1]);
    auto v = input("v", kV, dims(g.hkv, g.sk, g.dv), st[2]);
    if (!backward) {
      auto a = fe::graph::SDPA_attributes().set_name("attention").set_generate_stats(desc.lse).set_attn_scale(
          float(g.scale));
      set_band(a, g);
      auto [o, stats] = graph->sdpa(q, k, v, a);
      output(o, kO, dims(g.hq, g.sq, g.dv), st[3]);
      if (desc.lse)
        stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim(stats_dim).set_stride(
            stats_stride);
    } else {
      auto o = input("out", kO, dims(g.hq, g.sq, g.dv), st[3]);
      auto grad_out = input("grad_out", kGradOut, dims(g.hq, g.sq, g.dv), st[4]);
      auto stats = graph->tensor(fe::graph::Tensor_attributes()
                                     .set_name("lse")
                                     .set_uid(kStats)
                                     .set_dim(stats_dim)
                                     .set_stride(stats_stride)
                                     .set_data_type(fe::DataType_t::FLOAT));
      auto a = fe::graph::SDPA_backward_attributes().set_name("attention_backward").set_attn_scale(float(g.scale));
      if (desc.deterministic) a.set_deterministic_algorithm(true);
      set_band(a, g);
      auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, grad_out, stats, a);
      output(dq, kGradQ, dims(g.hq, g.sq, g.d), st[5]);
      output(dk, kGradK, dims(g.hkv, g.sk, g.d), st[6]);
      output(dv, kGradV, dims(g.hkv, g.sk, g.dv), st[7]);
    }
    try {
      fe::error_t e = graph->build(cudnn::handle(int(key[0])), {fe::HeurMode_t::A});
      if (!e.is_good()) {
        why = "cuDNN " + library_version() + " refuses it: " + e.get_message();
        return nullptr;
      }
    } catch (const std::exception& e) {  // the frontend throws for some refusals
      why = "cuDNN " + library_version() + " refuses it: " + e.what();
      return nullptr;
    }
    return graph;
  }

  std::shared_ptr<fe::graph::Graph> get(const Key& key) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = graphs.find(key);
    if (it != graphs.end()) return it->second;
    std::string why;
    auto graph = make(key, why);
    if (!graph)
      throw Unsupported(desc.op + ": the cuDNN plan cannot take these output strides on cuda:" +
                        std::to_string(key[0]) + " (" + why + "); pass outputs laid out like their inputs");
    graphs.emplace(key, graph);
    return graph;
  }
};

std::string rule_out(const AttentionDescriptor& desc, const attention::Geometry& g) {
  if (g.dtype != DType::Float16 && g.dtype != DType::BFloat16) return "cuDNN takes float16 / bfloat16";
  if (desc.varlen || g.has_seqused_k) return "the cuDNN backend takes dense [B, S, H, D] operands";
  if (g.softcap > 0 || g.alibi || g.sinks) return "the cuDNN backend has no softcap, ALiBi slopes or sinks";
  if (g.batch == 0 || g.hq == 0 || g.sq == 0 || g.sk == 0 || g.d == 0 || g.dv == 0) return "an empty operand";
  if (g.d % 8 != 0 || g.dv % 8 != 0 || g.d > 256 || g.dv > 256)
    return "cuDNN takes head dims that are multiples of 8, up to 256";
  // A query row that sees no key must give out = 0 and lse = -inf; cuDNN's kernels assume none.
  const int64_t off = g.top_left ? 0 : g.sk - g.sq;
  if (g.window_right >= 0 && off + g.window_right < 0) return "some query rows see no key";
  if (g.window_left >= 0 && off + g.sq - 1 - g.window_left > g.sk - 1) return "some query rows see no key";
  return "";
}

std::string library_version() {
  const int64_t v = cudnn::version();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::shared_ptr<const Graphs> build(const AttentionDescriptor& desc, const attention::Geometry& g, std::string& why) {
  why = rule_out(desc, g);
  if (!why.empty()) return nullptr;
  if (!cudnn::available()) {
    why = cudnn::load_error();
    return nullptr;
  }
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    why = "no CUDA device to build the cuDNN graph on";
    return nullptr;
  }
  auto G = std::make_shared<Graphs>();
  G->desc = desc;
  G->geo = g;
  G->backward = desc.op == "attention_backward";
  Key key = {device};
  for (const TensorSpec* s : {&desc.q, &desc.k, &desc.v, &desc.out}) append(key, of_spec(*s));
  if (G->backward)  // grad_out like out, each gradient like its input
    for (const TensorSpec* s : {&desc.out, &desc.q, &desc.k, &desc.v}) append(key, of_spec(*s));
  auto graph = G->make(key, why);
  if (!graph) return nullptr;
  if (!graph->get_workspace_size(G->workspace).is_good()) {
    why = "cuDNN did not report the graph's workspace";
    return nullptr;
  }
  G->graphs.emplace(key, graph);
  return G;
}

int64_t workspace_bytes(const Graphs& graphs) { return graphs.workspace; }

void run(const Graphs& G, const AttentionTensors& t, void* workspace, int64_t workspace_size, StreamHandle stream,
         int device) {
  Key key = {device};
  for (const TensorView* v : {&t.q, &t.k, &t.v, &t.out}) append(key, of_view(*v));
  if (G.backward)
    for (const TensorView* v : {&t.grad_out, &t.grad_q, &t.grad_k, &t.grad_v}) append(key, of_view(*v));
  auto graph = G.get(key);
  int64_t need = 0;
  if (!graph->get_workspace_size(need).is_good() || need > workspace_size)
    throw Unsupported(G.desc.op + ": the cuDNN graph for these output strides needs " + std::to_string(need) +
                      " bytes of workspace, more than the " + std::to_string(workspace_size) + " given" +
                      "; pass outputs laid out like their inputs");
  cudnnHandle_t h = cudnn::handle(device);
  if (fe::detail::set_stream(h, static_cast<cudaStream_t>(stream)) != CUDNN_STATUS_SUCCESS)
    throw CudaError(G.desc.op + ": cudnnSetStream failed");
  std::unordered_map<int64_t, void*> pack = {{kQ, t.q.data}, {kK, t.k.data}, {kV, t.v.data}, {kO, t.out.data}};
  if (G.backward || G.desc.lse) pack[kStats] = t.lse.data;
  if (G.backward) {
    pack[kGradOut] = t.grad_out.data;
    pack[kGradQ] = t.grad_q.data;
    pack[kGradK] = t.grad_k.data;
    pack[kGradV] = t.grad_v.data;
  }
  fe::error_t e = graph->execute(h, pack, workspace);
  if (!e.is_good()) throw CudaError(G.desc.op + ": cuDNN execution failed: " + e.get_message());
}

}  // namespace baracuda::attention_cudnn
