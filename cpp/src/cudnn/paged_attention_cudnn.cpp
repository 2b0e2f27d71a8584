// cuDNN SDPA over paged caches for the paged_attention family (see paged_attention_cudnn.h).
#include "cudnn/paged_attention_cudnn.h"

#include <cuda_runtime.h>
#include <cudnn_frontend.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "baracuda/errors.h"
#include "cudnn/attention_cudnn.h"
#include "cudnn/cudnn_runtime.h"
#include "plan_util.h"

namespace baracuda::paged_attention_cudnn {

namespace fe = cudnn_frontend;

namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kSeqLenQ, kSeqLenKV, kTableK, kTableV, kSink };

// q / out strides (batch, token, head) in elements: the graph's layout of [B, Hq, Sq, D].
struct Layout {
  int64_t q_batch, q_token, q_head, out_batch, out_token, out_head;
  bool operator<(const Layout& o) const {
    return std::tie(q_batch, q_token, q_head, out_batch, out_token, out_head) <
           std::tie(o.q_batch, o.q_token, o.q_head, o.out_batch, o.out_token, o.out_head);
  }
};

// The graph's key from q's and out's (batch, token, head) strides, select's and run's alike. A single
// query token's stride addresses nothing (a [B, H, D] q has none; a size-1 dim's stride may differ
// between the descriptor and the tensor run gets): it is keyed as head x heads, so run finds
// select's graph instead of building another.
Layout layout_of(int64_t sq, int64_t hq, int64_t q_batch, int64_t q_token, int64_t q_head, int64_t out_batch,
                 int64_t out_token, int64_t out_head) {
  auto token = [&](int64_t t, int64_t head) { return sq == 1 ? head * hq : t; };
  return {q_batch, token(q_token, q_head), q_head, out_batch, token(out_token, out_head), out_head};
}

}  // namespace

struct Graphs {
  PagedAttentionDescriptor desc;
  paged_attention::Geometry geo;
  int64_t k_page = 0, k_slot = 0, k_head = 0, v_page = 0, v_slot = 0, v_head = 0;
  // fp8 caches: cuDNN reads a bf16 pool of the table's pages (CudnnPaged::k_pool), `pool_pages` of
  // them, at these offsets of the workspace; 16-bit caches: the caches themselves.
  bool pooled = false;
  int64_t pool_pages = 0, k_pool_at = 0, v_pool_at = 0;
  int64_t seq_at = 0, table_at = 0, aux = 0, workspace = 0;
  mutable std::mutex mu;
  mutable std::map<std::pair<int, Layout>, std::shared_ptr<fe::graph::Graph>> graphs;

  std::shared_ptr<fe::graph::Graph> make(const Layout& L, int device, std::string& why) const {
    const paged_attention::Geometry& g = geo;
    auto graph = std::make_shared<fe::graph::Graph>();
    graph->set_io_data_type(g.dtype == DType::BFloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    auto tensor = [&](const char* name, Uid uid, std::vector<int64_t> dim, std::vector<int64_t> stride) {
      return graph->tensor(
          fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(std::move(dim)).set_stride(std::move(stride)));
    };
    auto int_tensor = [&](const char* name, Uid uid, std::vector<int64_t> dim, std::vector<int64_t> stride) {
      auto t = tensor(name, uid, std::move(dim), std::move(stride));
      t->set_data_type(fe::DataType_t::INT32);
      return t;
    };
    const int64_t B = g.batch, hq = g.hq, hkv = g.hkv, sq = g.sq, d = g.d, P = g.max_pages;
    auto q = tensor("q", kQ, {B, hq, sq, d}, {L.q_batch, L.q_head, L.q_token, 1});
    // The caches as cuDNN's containers [pages, kv heads, page_size, d]: our [pages, page_size, kv heads,
    // d] (or heads-first) seen through its strides.
    auto k = tensor("k_cache", kK, {pool_pages, hkv, g.page_size, d}, {k_page, k_head, k_slot, 1});
    auto v = tensor("v_cache", kV, {pool_pages, hkv, g.page_size, d}, {v_page, v_head, v_slot, 1});
    auto a = fe::graph::SDPA_attributes().set_name("paged_attention").set_generate_stats(desc.lse).set_attn_scale(
        g.scale);
    a.set_padding_mask(true)
        .set_seq_len_q(int_tensor("seq_len_q", kSeqLenQ, {B, 1, 1, 1}, {1, 1, 1, 1}))
        .set_seq_len_kv(int_tensor("seq_len_kv", kSeqLenKV, {B, 1, 1, 1}, {1, 1, 1, 1}))
        .set_paged_attention_k_table(int_tensor("table_k", kTableK, {B, 1, P, 1}, {P, P, 1, 1}))
        .set_paged_attention_v_table(int_tensor("table_v", kTableV, {B, 1, P, 1}, {P, P, 1, 1}))
        .set_paged_attention_max_seq_len_kv(int(P * g.page_size));
    if (g.sinks) {
      auto sinks = tensor("sinks", kSink, {1, hq, 1, 1}, {hq, 1, 1, 1});
      sinks->set_data_type(fe::DataType_t::FLOAT);
      a.set_sink_token(sinks);
    }
    if (g.window_left >= 0 || g.window_right >= 0) {
      a.set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT);  // the queries are the last positions
      if (g.window_right >= 0) a.set_diagonal_band_right_bound(int(g.window_right));
      if (g.window_left >= 0) a.set_diagonal_band_left_bound(int(g.window_left + 1));  // counts the diagonal
    }
    auto [o, stats] = graph->sdpa(q, k, v, a);
    o->set_output(true).set_uid(kO).set_dim({B, hq, sq, d}).set_stride({L.out_batch, L.out_head, L.out_token, 1});
    if (desc.lse)
      stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim({B, hq, sq, 1}).set_stride(
          {hq * sq, sq, 1, 1});
    try {
      fe::error_t e = graph->build(cudnn::handle(device), {fe::HeurMode_t::A});
      if (!e.is_good()) {
        why = "cuDNN " + attention_cudnn::library_version() + " refuses it: " + e.get_message();
        return nullptr;
      }
    } catch (const std::exception& e) {
      why = "cuDNN " + attention_cudnn::library_version() + " refuses it: " + e.what();
      return nullptr;
    }
    return graph;
  }

  std::shared_ptr<fe::graph::Graph> get(const Layout& L, int device, std::string& why) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = graphs.find({device, L});
    if (it != graphs.end()) return it->second;
    auto graph = make(L, device, why);
    if (graph) graphs.emplace(std::make_pair(device, L), graph);
    return graph;
  }
};

std::string rule_out(const PagedAttentionDescriptor& desc, const paged_attention::Geometry& g) {
  if (g.dtype != DType::Float16 && g.dtype != DType::BFloat16) return "cuDNN takes float16 / bfloat16 q";
  if (desc.k_cache.dtype != g.dtype && g.dtype != DType::BFloat16)
    return "cuDNN takes fp8 caches under bfloat16 q only (dequantized to q's dtype; float16 could overflow)";
  if (g.softcap > 0 || g.alibi) return "cuDNN takes per-request lengths only without softcap or ALiBi";
  if (g.d % 8 != 0 || g.d > 256) return "cuDNN takes head dims that are multiples of 8, up to 256";
  if (g.batch == 0 || g.hq == 0 || g.sq == 0 || g.max_pages == 0) return "an empty operand";
  return "";
}

std::shared_ptr<const Graphs> build(const PagedAttentionDescriptor& desc, const paged_attention::Geometry& g,
                                    std::string& why) {
  why = rule_out(desc, g);
  if (!why.empty()) return nullptr;
  const int device = cudnn::build_device(why);
  if (device < 0) return nullptr;
  auto G = std::make_shared<Graphs>();
  G->desc = desc;
  G->geo = g;
  G->seq_at = 0;
  G->table_at = align256(2 * g.batch * int64_t(sizeof(int32_t)));
  G->aux = G->table_at + align256(g.batch * g.max_pages * int64_t(sizeof(int32_t)));
  G->pooled = desc.k_cache.dtype != g.dtype;
  if (G->pooled) {
    G->pool_pages = fp8_pool_pages(g);
    if (G->pool_pages > INT32_MAX) {  // one dequantizing block per page (a 31-bit grid)
      why = "the fp8 pool of " + std::to_string(G->pool_pages) + " pages is past 2^31 - 1";
      return nullptr;
    }
    const int64_t slot = g.hkv * g.d, page = g.page_size * slot, bytes = fp8_pool_bytes(g);
    G->k_page = G->v_page = page, G->k_slot = G->v_slot = slot, G->k_head = G->v_head = g.d;
    G->k_pool_at = G->aux, G->v_pool_at = G->aux + bytes;
    G->aux += 2 * bytes;
  } else {
    const auto ks = desc.k_cache.effective_strides(), vs = desc.v_cache.effective_strides();
    G->pool_pages = g.pages;
    G->k_page = ks[0], G->k_slot = ks[1], G->k_head = ks[2];
    G->v_page = vs[0], G->v_slot = vs[1], G->v_head = vs[2];
  }
  const auto qs = desc.q.effective_strides(), os = desc.out.effective_strides();  // [B, Sq, H, D] or [B, H, D]
  const Layout L = layout_of(g.sq, g.hq, qs[0], qs.size() == 4 ? qs[1] : 0, qs[qs.size() - 2], os[0],
                             os.size() == 4 ? os[1] : 0, os[os.size() - 2]);
  auto graph = G->get(L, device, why);
  if (!graph) return nullptr;
  int64_t bytes = 0;
  if (!graph->get_workspace_size(bytes).is_good()) {
    why = "cuDNN did not report the graph's workspace";
    return nullptr;
  }
  G->workspace = G->aux + bytes;
  return G;
}

int64_t workspace_bytes(const Graphs& graphs) { return graphs.workspace; }

void run(const Graphs& G, const paged_attention::Geometry& g, const paged_attention::Pointers& p, void* workspace,
         int64_t workspace_size, StreamHandle stream, int device) {
  const std::string op = "paged_attention";
  const Layout L = layout_of(g.sq, g.hq, g.q_batch, g.q_token, g.q_head, g.out_batch, g.out_token, g.out_head);
  // The caches' strides are the descriptor's (check_view; a size-1 dim's stride addresses nothing).
  std::string why;
  auto graph = G.get(L, device, why);
  if (!graph)
    throw Unsupported(op + ": the cuDNN plan cannot take these out strides on cuda:" + std::to_string(device) + " (" +
                      why + "); pass out laid out like q");
  int64_t need = 0;
  if (!graph->get_workspace_size(need).is_good() || G.aux + need > workspace_size)
    throw Unsupported(op + ": the cuDNN graph for these strides needs " + std::to_string(G.aux + need) +
                      " bytes of workspace, more than the " + std::to_string(workspace_size) + " given");
  cudnnHandle_t h = cudnn::handle(device);
  if (fe::detail::set_stream(h, static_cast<cudaStream_t>(stream)) != CUDNN_STATUS_SUCCESS)
    throw CudaError(op + ": cudnnSetStream failed");
  char* aux = static_cast<char*>(workspace);
  paged_attention::CudnnPaged m;
  m.seq_len_q = reinterpret_cast<int32_t*>(aux + G.seq_at);
  m.seq_len_kv = m.seq_len_q + g.batch;
  m.table = reinterpret_cast<int32_t*>(aux + G.table_at);
  if (G.pooled) m.k_pool = aux + G.k_pool_at, m.v_pool = aux + G.v_pool_at;
  paged_attention::cudnn_paged_prepare(g, p, m, stream);
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<void*>(p.q)},
      {kK, G.pooled ? m.k_pool : const_cast<void*>(p.k_cache)},
      {kV, G.pooled ? m.v_pool : const_cast<void*>(p.v_cache)},
      {kO, p.out},                          {kSeqLenQ, m.seq_len_q},             {kSeqLenKV, m.seq_len_kv},
      {kTableK, m.table},                   {kTableV, m.table}};
  if (G.desc.lse) pack[kStats] = p.lse;
  if (g.sinks) pack[kSink] = const_cast<float*>(p.sinks);
  fe::error_t e = graph->execute(h, pack, aux + G.aux);
  if (!e.is_good()) throw CudaError(op + ": cuDNN execution failed: " + e.get_message());
  paged_attention::cudnn_paged_finish(g, p, stream);
}

}  // namespace baracuda::paged_attention_cudnn
