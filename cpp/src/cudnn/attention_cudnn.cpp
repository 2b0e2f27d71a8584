// cuDNN SDPA graphs for the attention family (see attention_cudnn.h).
#include "cudnn/attention_cudnn.h"

#include <cuda_runtime.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "baracuda/errors.h"
#include "cudnn/cudnn_runtime.h"
#include "plan_util.h"

namespace baracuda::attention_cudnn {

namespace fe = cudnn_frontend;

namespace {

// Tensor uids of the variant pack: the operands, the per-sequence lengths, and the ragged offsets
// of packed operands (kRagged + their slot, the order of ragged_slots).
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kGradOut, kGradQ, kGradK, kGradV, kSeqLenQ, kSeqLenKV, kSink, kAlibi, kRagged = 100
};

// Per operand, its batch / head / row strides (the last dim is contiguous): the graph's layout.
// Packed [total, H, D] operands have no batch stride (their ragged offsets place the sequences):
// the row stride stands in for it.
struct Strides {
  int64_t batch, head, row;
};
// device, then Strides of q, k, v, out (+ grad_out, grad_q, grad_k, grad_v), then 1 for a graph told
// top-left (Graphs::same_lengths), else 0
using Key = std::vector<int64_t>;

Strides of_strides(const int64_t* st, size_t rank) {
  if (rank == 3) return {st[0], st[1], st[0]};
  return {st[0], st[2], st[1]};
}
Strides of_spec(const TensorSpec& s) {
  const auto st = s.effective_strides();
  return of_strides(st.data(), st.size());
}
Strides of_view(const TensorView& v) { return of_strides(v.strides, size_t(v.ndim)); }
void append(Key& key, const Strides& s) { key.insert(key.end(), {s.batch, s.head, s.row}); }

// A packed graph's sequence dims (and the backward's bound of the packed totals) are rounded up to
// one of four steps per octave (at most 25% over), so that batches whose longest sequence differs
// share a graph instead of building one each (a build costs far more than a run).
int64_t bucket(int64_t n) {
  if (n <= 64) return 64;
  int64_t top = 1;
  while (top * 2 <= n) top *= 2;
  const int64_t step = std::max<int64_t>(top / 4, 1);
  return (n + step - 1) / step * step;
}

// The ragged operands of a packed graph, in slot order: operand index in the Key (-1: stats), and
// whether its rows are key rows.
struct RaggedSlot {
  Uid uid;
  int operand;  // index into the Key's Strides (-1: the stats, [total_q, hq])
  bool keys;
};
std::vector<RaggedSlot> ragged_slots(bool backward, bool stats) {
  std::vector<RaggedSlot> r = {{kQ, 0, false}, {kK, 1, true}, {kV, 2, true}, {kO, 3, false}};
  if (backward) r.insert(r.end(), {{kGradOut, 4, false}, {kGradQ, 5, false}, {kGradK, 6, true}, {kGradV, 7, true}});
  if (backward || stats) r.push_back({kStats, -1, false});
  return r;
}

template <class Attributes>
void set_band(Attributes& a, const attention::Geometry& g, bool equal_lengths) {
  if (g.window_left < 0 && g.window_right < 0) return;
  // With Sq == Sk the alignments agree; cuDNN's causal backward is faster told top-left
  // (docs/benchmarks.md). Per-sequence lengths agree only when the run says so (equal_lengths).
  const bool top_left = g.top_left || equal_lengths || (g.sq == g.sk && !g.varlen && !g.has_seqused_k);
  a.set_diagonal_alignment(top_left ? fe::DiagonalAlignment_t::TOP_LEFT : fe::DiagonalAlignment_t::BOTTOM_RIGHT);
  if (g.window_right >= 0) a.set_diagonal_band_right_bound(int(g.window_right));
  // cuDNN's left bound counts the diagonal: key j is visible when j > pos - left_bound.
  if (g.window_left >= 0) a.set_diagonal_band_left_bound(int(g.window_left + 1));
}

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// Softcap and ALiBi (our slopes: cuDNN's alibi_mask makes its own) go through a score modifier, and
// cuDNN takes no mask beside one, so the modifier also applies the causal / right bound: the contract
// of attention_launch.h, s = softcap * tanh(s / softcap) - slope * |i + off - j|, -inf past the bound
// (dense batches only: off = sk - sq bottom-right, else 0; no left window: rule_out).
struct ScoreMod {
  attention::Geometry g;
  TensorPtr slopes;  // the graph's input [1, hq, 1, 1]
  std::shared_ptr<fe::graph::attn::score_modifiers::Softcap> cap =
      std::make_shared<fe::graph::attn::score_modifiers::Softcap>();

  static bool needed(const attention::Geometry& g) { return g.softcap > 0 || g.alibi; }

  TensorPtr forward(const std::shared_ptr<fe::graph::Graph>& sub, TensorPtr s) const {
    using fe::PointwiseMode_t;
    auto op = [&](TensorPtr a, TensorPtr b, PointwiseMode_t mode, const char* name, fe::DataType_t type) {
      auto t = sub->pointwise(a, b, fe::graph::Pointwise_attributes().set_name(name).set_mode(mode).set_compute_data_type(
                                        type == fe::DataType_t::BOOLEAN ? fe::DataType_t::BOOLEAN : fe::DataType_t::FLOAT));
      t->set_data_type(type);
      return t;
    };
    auto index = [&](int axis) {
      auto t = sub->pointwise(s, fe::graph::Pointwise_attributes()
                                     .set_name(axis == 2 ? "row_index" : "col_index")
                                     .set_mode(PointwiseMode_t::GEN_INDEX)
                                     .set_axis(axis)
                                     .set_compute_data_type(fe::DataType_t::INT32));
      t->set_data_type(fe::DataType_t::INT32);
      return t;
    };
    auto scalar = [](float v) { return std::make_shared<fe::graph::Tensor_attributes>(v); };
    if (g.softcap > 0) s = cap->forward(sub, s, scalar(float(g.softcap)));
    if (!g.alibi && g.window_right < 0) return s;
    const int32_t off = g.top_left ? 0 : int32_t(g.sk - g.sq);
    auto int_scalar = [](int32_t v) { return std::make_shared<fe::graph::Tensor_attributes>(v); };
    auto shifted = [&](TensorPtr idx, int32_t by) {  // an index plus a constant, in int32 as cuDNN's own masks
      if (by == 0) return idx;
      auto t = sub->pointwise(idx, int_scalar(by), fe::graph::Pointwise_attributes().set_name("shift").set_mode(
                                                      PointwiseMode_t::ADD).set_compute_data_type(fe::DataType_t::INT32));
      t->set_data_type(fe::DataType_t::INT32);
      return t;
    };
    auto row = index(2), col = index(3);
    if (g.alibi) {  // |j - (i + off)|
      auto rel = op(col, shifted(row, off), PointwiseMode_t::SUB, "j_minus_pos", fe::DataType_t::FLOAT);
      auto dist = sub->pointwise(rel, fe::graph::Pointwise_attributes().set_name("abs").set_mode(PointwiseMode_t::ABS)
                                          .set_compute_data_type(fe::DataType_t::FLOAT));
      dist->set_data_type(fe::DataType_t::FLOAT);
      s = op(s, op(dist, slopes, PointwiseMode_t::MUL, "alibi", fe::DataType_t::FLOAT), PointwiseMode_t::SUB,
             "minus_alibi", fe::DataType_t::FLOAT);
    }
    if (g.window_right < 0) return s;
    // j <= i + off + right, in the form cuDNN's causal mask takes (its 9.19 refuses a left bound's
    // comparison here: rule_out)
    auto keep = op(shifted(row, off + int32_t(g.window_right)), col, PointwiseMode_t::CMP_GE, "right_bound",
                   fe::DataType_t::BOOLEAN);
    auto masked = sub->pointwise(s, scalar(fe::graph::attn::score_modifiers::get_negative_inf_value()), keep,
                                 fe::graph::Pointwise_attributes().set_name("mask").set_mode(
                                     PointwiseMode_t::BINARY_SELECT));
    return masked;
  }
  // The band and ALiBi pass the gradient through; softcap's derivative from the forward's tanh input.
  TensorPtr backward(const std::shared_ptr<fe::graph::Graph>& sub, TensorPtr ds) const {
    return cap->backward(sub, ds, std::make_shared<fe::graph::Tensor_attributes>(float(g.softcap)));
  }
};

template <class Attributes>
void set_rules(Attributes& a, const attention::Geometry& g, bool equal_lengths, const std::shared_ptr<ScoreMod>& mod) {
  if (!mod) return set_band(a, g, equal_lengths);
  a.set_score_mod([mod](std::shared_ptr<fe::graph::Graph> sub, TensorPtr s) { return mod->forward(sub, s); });
  if constexpr (std::is_same_v<Attributes, fe::graph::SDPA_backward_attributes>)
    if (g.softcap > 0)
      a.set_score_mod_bprop([mod](std::shared_ptr<fe::graph::Graph> sub, TensorPtr ds) { return mod->backward(sub, ds); });
}

}  // namespace

// The process-wide cache of built graphs, shared by plans whose graphs agree (packed batches with
// other lengths land in the same buckets); bounded, a plan keeps its own graphs alive.
std::mutex g_cache_mu;
std::map<Key, std::shared_ptr<fe::graph::Graph>> g_cache;
constexpr size_t kCacheGraphs = 256;

struct Graphs {
  AttentionDescriptor desc;
  attention::Geometry geo;
  bool backward = false;
  bool padded = false;   // per-sequence lengths (packed sequences or seqused_k)
  bool ragged = false;   // packed sequences: ragged offsets place them
  bool stats_in_workspace = false;  // cuDNN's stats are ours to place (packed forward lse, every padded backward)
  std::vector<RaggedSlot> slots;    // ragged: the operands given ragged offsets (slot r: uid kRagged + r)
  // Packed self-attention (one offsets tensor for q and k, no seqused_k, as many key as query rows):
  // every sequence has Sq == Sk, so a causal band is the same told top-left, which cuDNN runs faster;
  // a second graph, built at select, serves such runs.
  bool same_lengths = false;
  int64_t sq = 0, sk = 0;           // the graph's sequence dims
  int64_t total_q = 0, total_k = 0; // the backward's bound of the packed totals
  Key signature;                    // what the graph depends on besides the device and the strides
  // The workspace: ours first (aux bytes: CudnnPadding's arrays, the backward's delta for grad_sinks),
  // then cuDNN's.
  int64_t aux = 0, seq_len_at = 0, ragged_at = 0, stats_at = 0, delta_at = 0;
  int64_t workspace = 0;  // aux + the cuDNN workspace of the graph built at select
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
    auto index_tensor = [&](const char* name, int64_t uid, int64_t n, fe::DataType_t type) {
      return graph->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({n, 1, 1, 1}).set_stride(
          {1, 1, 1, 1}).set_data_type(type));
    };
    auto ragged_of = [&](Uid uid, const std::shared_ptr<fe::graph::Tensor_attributes>& t) {
      if (!ragged) return;
      for (size_t r = 0; r < slots.size(); ++r)
        if (slots[r].uid == uid)
          t->set_ragged_offset(index_tensor("ragged_offset", kRagged + int64_t(r), g.batch + 1, fe::DataType_t::INT64));
    };
    auto dims = [&](int64_t heads, int64_t seq, int64_t d) { return std::vector<int64_t>{g.batch, heads, seq, d}; };
    auto layout = [](const Strides& s) { return std::vector<int64_t>{s.batch, s.head, s.row, 1}; };
    auto input = [&](const char* name, Uid uid, std::vector<int64_t> dim, const Strides& s) {
      auto t = graph->tensor(
          fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(std::move(dim)).set_stride(layout(s)));
      ragged_of(uid, t);
      return t;
    };
    auto output = [&](const std::shared_ptr<fe::graph::Tensor_attributes>& t, Uid uid, std::vector<int64_t> dim,
                      const Strides& s) {
      t->set_output(true).set_uid(uid).set_dim(std::move(dim)).set_stride(layout(s));
      ragged_of(uid, t);
    };
    // Stats: lse's [B, hq, S] where cuDNN writes or reads lse itself; [total_q, hq] packed.
    const std::vector<int64_t> stats_dim = {g.batch, g.hq, sq, 1};
    const std::vector<int64_t> stats_stride =
        ragged ? std::vector<int64_t>{g.hq, 1, g.hq, 1} : std::vector<int64_t>{g.hq * sq, sq, 1, 1};
    std::shared_ptr<fe::graph::Tensor_attributes> seq_len_q, seq_len_kv;
    if (padded) {
      seq_len_q = index_tensor("seq_len_q", kSeqLenQ, g.batch, fe::DataType_t::INT32);
      seq_len_kv = index_tensor("seq_len_kv", kSeqLenKV, g.batch, fe::DataType_t::INT32);
    }
    std::shared_ptr<ScoreMod> mod;
    if (ScoreMod::needed(g)) {
      mod = std::make_shared<ScoreMod>();
      mod->g = g;
      if (g.alibi)
        mod->slopes = graph->tensor(fe::graph::Tensor_attributes().set_name("alibi_slopes").set_uid(kAlibi).set_dim(
            {1, g.hq, 1, 1}).set_stride({g.hq, 1, 1, 1}).set_data_type(fe::DataType_t::FLOAT));  // [Hq]: rule_out
    }
    auto q = input("q", kQ, dims(g.hq, sq, g.d), st[0]);
    auto k = input("k", kK, dims(g.hkv, sk, g.d), st[1]);
    auto v = input("v", kV, dims(g.hkv, sk, g.dv), st[2]);
    if (!backward) {
      auto a = fe::graph::SDPA_attributes().set_name("attention").set_generate_stats(desc.lse).set_attn_scale(
          float(g.scale));
      if (padded) a.set_padding_mask(true).set_seq_len_q(seq_len_q).set_seq_len_kv(seq_len_kv);
      if (g.sinks)
        a.set_sink_token(graph->tensor(fe::graph::Tensor_attributes().set_name("sinks").set_uid(kSink).set_dim(
            {1, g.hq, 1, 1}).set_stride({g.hq, 1, 1, 1}).set_data_type(fe::DataType_t::FLOAT)));
      set_rules(a, g, key.back() != 0, mod);
      auto [o, stats] = graph->sdpa(q, k, v, a);
      output(o, kO, dims(g.hq, sq, g.dv), st[3]);
      if (desc.lse) {
        stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim(stats_dim).set_stride(
            stats_stride);
        ragged_of(kStats, stats);
      }
    } else {
      auto o = input("out", kO, dims(g.hq, sq, g.dv), st[3]);
      auto grad_out = input("grad_out", kGradOut, dims(g.hq, sq, g.dv), st[4]);
      auto stats = graph->tensor(fe::graph::Tensor_attributes()
                                     .set_name("lse")
                                     .set_uid(kStats)
                                     .set_dim(stats_dim)
                                     .set_stride(stats_stride)
                                     .set_data_type(fe::DataType_t::FLOAT));
      ragged_of(kStats, stats);
      // Sinks need nothing here: the stats include them, and p = exp(s - stats) is all the backward
      // reads. grad_sinks is ours (backward_sinks), after the graph.
      auto a = fe::graph::SDPA_backward_attributes().set_name("attention_backward").set_attn_scale(float(g.scale));
      if (desc.deterministic) a.set_deterministic_algorithm(true);
      if (padded) a.set_padding_mask(true).set_seq_len_q(seq_len_q).set_seq_len_kv(seq_len_kv);
      if (ragged) a.set_max_total_seq_len_q(total_q).set_max_total_seq_len_kv(total_k);
      set_rules(a, g, key.back() != 0, mod);
      auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, grad_out, stats, a);
      output(dq, kGradQ, dims(g.hq, sq, g.d), st[5]);
      output(dk, kGradK, dims(g.hkv, sk, g.d), st[6]);
      output(dv, kGradV, dims(g.hkv, sk, g.dv), st[7]);
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

  // The plan's graph for `key` (device and strides): its own, another plan's, or a new one.
  std::shared_ptr<fe::graph::Graph> find_or_make(const Key& key, std::string& why) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = graphs.find(key);
    if (it != graphs.end()) return it->second;
    Key full = signature;
    full.insert(full.end(), key.begin(), key.end());
    std::shared_ptr<fe::graph::Graph> graph;
    {
      std::lock_guard<std::mutex> cache_lock(g_cache_mu);
      auto c = g_cache.find(full);
      if (c != g_cache.end()) graph = c->second;
    }
    if (!graph) {
      graph = make(key, why);
      if (!graph) return nullptr;
      std::lock_guard<std::mutex> cache_lock(g_cache_mu);
      if (g_cache.size() >= kCacheGraphs) g_cache.erase(g_cache.begin());
      g_cache.emplace(full, graph);
    }
    graphs.emplace(key, graph);
    return graph;
  }

  std::shared_ptr<fe::graph::Graph> get(const Key& key) const {
    std::string why;
    auto graph = find_or_make(key, why);
    if (!graph)
      throw Unsupported(desc.op + ": the cuDNN plan cannot take these output strides on cuda:" +
                        std::to_string(key[0]) + " (" + why + "); pass outputs laid out like their inputs");
    return graph;
  }
};

std::string rule_out(const AttentionDescriptor&, const attention::Geometry& g) {
  if (g.dtype != DType::Float16 && g.dtype != DType::BFloat16) return "cuDNN takes float16 / bfloat16";
  if (ScoreMod::needed(g) && (g.varlen || g.has_seqused_k || g.sinks))
    return "cuDNN takes softcap and ALiBi on dense batches without sinks";
  if (g.alibi && g.alibi_batch_stride) return "cuDNN takes ALiBi slopes per head ([Hq]), not per sequence";
  if (ScoreMod::needed(g) && g.window_left >= 0)
    return "cuDNN takes softcap and ALiBi with a causal or right bound, not a left window";
  if (g.batch == 0 || g.hq == 0 || g.sq == 0 || g.sk == 0 || g.d == 0 || g.dv == 0) return "an empty operand";
  if (g.d % 8 != 0 || g.dv % 8 != 0 || g.d > 256 || g.dv > 256)
    return "cuDNN takes head dims that are multiples of 8, up to 256";
  if (g.varlen || g.has_seqused_k) return "";  // rows that see no key: cudnn_padding_finish writes them
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

namespace {

// The graph's dims and flags, and the layout of CudnnPadding's arrays in the workspace.
void shape(Graphs& G) {
  const attention::Geometry& g = G.geo;
  const AttentionDescriptor& d = G.desc;
  G.backward = d.op == "attention_backward";
  G.ragged = g.varlen;
  G.padded = g.varlen || g.has_seqused_k;
  G.sq = G.ragged ? bucket(g.sq) : g.sq;
  G.sk = G.ragged ? bucket(g.sk) : g.sk;
  if (G.ragged && G.backward) {
    G.total_q = bucket(std::max<int64_t>(g.total_q, 1));
    G.total_k = bucket(std::max<int64_t>(g.total_k, 1));
  }
  G.stats_in_workspace = G.padded && (G.backward || (G.ragged && d.lse));
  if (G.ragged) G.slots = ragged_slots(G.backward, d.lse);
  double scale = g.scale;
  int64_t scale_bits = 0;
  std::memcpy(&scale_bits, &scale, sizeof(scale_bits));
  int64_t softcap_bits = 0;
  std::memcpy(&softcap_bits, &g.softcap, sizeof(softcap_bits));
  G.signature = {int64_t(g.dtype), G.backward, d.lse, d.deterministic, G.padded, G.ragged, g.batch, g.hq, g.hkv,
                 g.d, g.dv, G.sq, G.sk, G.total_q, G.total_k, g.top_left, g.window_left, g.window_right, scale_bits,
                 g.sinks && !G.backward, softcap_bits, g.alibi, g.alibi_batch_stride};
  const int64_t stats_bytes = align256((g.varlen ? g.hq * g.total_q : g.batch * g.hq * g.sq) * int64_t(sizeof(float)));
  int64_t at = 0;
  if (G.padded) {
    G.seq_len_at = at;
    at += align256(2 * g.batch * int64_t(sizeof(int32_t)));
    G.ragged_at = at;
    at += align256(int64_t(G.slots.size()) * (g.batch + 1) * int64_t(sizeof(int64_t)));
    G.stats_at = at;
    if (G.stats_in_workspace) at += stats_bytes;
  }
  G.delta_at = at;
  if (G.backward && g.sinks) at += stats_bytes;  // delta, lse's layout
  G.aux = at;
}

}  // namespace

std::shared_ptr<const Graphs> build(const AttentionDescriptor& desc, const attention::Geometry& g, std::string& why) {
  why = rule_out(desc, g);
  if (!why.empty()) return nullptr;
  const int device = cudnn::build_device(why);
  if (device < 0) return nullptr;
  auto G = std::make_shared<Graphs>();
  G->desc = desc;
  G->geo = g;
  shape(*G);
  Key key = {device};
  for (const TensorSpec* s : {&desc.q, &desc.k, &desc.v, &desc.out}) append(key, of_spec(*s));
  if (G->backward)  // grad_out like out, each gradient like its input
    for (const TensorSpec* s : {&desc.out, &desc.q, &desc.k, &desc.v}) append(key, of_spec(*s));
  key.push_back(0);
  auto graph = G->find_or_make(key, why);
  if (!graph) return nullptr;
  int64_t cudnn_bytes = 0;
  if (!graph->get_workspace_size(cudnn_bytes).is_good()) {
    why = "cuDNN did not report the graph's workspace";
    return nullptr;
  }
  if (g.varlen && !g.has_seqused_k && g.total_q == g.total_k && !g.top_left &&
      (g.window_left >= 0 || g.window_right >= 0)) {
    key.back() = 1;
    std::string why_not;  // without it, every run takes the bottom-right graph
    int64_t bytes = 0;
    if (auto same = G->find_or_make(key, why_not); same && same->get_workspace_size(bytes).is_good()) {
      G->same_lengths = true;
      cudnn_bytes = std::max(cudnn_bytes, bytes);
    }
  }
  G->workspace = G->aux + cudnn_bytes;
  return G;
}

int64_t workspace_bytes(const Graphs& graphs) { return graphs.workspace; }

void run(const Graphs& G, const AttentionTensors& t, const attention::Pointers& p, void* workspace,
         int64_t workspace_size, StreamHandle stream, int device) {
  Key key = {device};
  for (const TensorView* v : {&t.q, &t.k, &t.v, &t.out}) append(key, of_view(*v));
  if (G.backward)
    for (const TensorView* v : {&t.grad_out, &t.grad_q, &t.grad_k, &t.grad_v}) append(key, of_view(*v));
  key.push_back(G.same_lengths && t.cu_seqlens_q.data == t.cu_seqlens_k.data);
  auto graph = G.get(key);
  int64_t need = 0;
  if (!graph->get_workspace_size(need).is_good() || G.aux + need > workspace_size)
    throw Unsupported(G.desc.op + ": the cuDNN graph for these output strides needs " + std::to_string(G.aux + need) +
                      " bytes of workspace, more than the " + std::to_string(workspace_size) + " given" +
                      "; pass outputs laid out like their inputs");
  cudnnHandle_t h = cudnn::handle(device);
  if (fe::detail::set_stream(h, static_cast<cudaStream_t>(stream)) != CUDNN_STATUS_SUCCESS)
    throw CudaError(G.desc.op + ": cudnnSetStream failed");
  std::unordered_map<int64_t, void*> pack = {{kQ, t.q.data}, {kK, t.k.data}, {kV, t.v.data}, {kO, t.out.data}};
  if (G.backward || G.desc.lse) pack[kStats] = t.lse.data;
  if (G.geo.sinks && !G.backward) pack[kSink] = t.sinks.data;
  if (G.geo.alibi) pack[kAlibi] = t.alibi_slopes.data;
  if (G.backward) {
    pack[kGradOut] = t.grad_out.data;
    pack[kGradQ] = t.grad_q.data;
    pack[kGradK] = t.grad_k.data;
    pack[kGradV] = t.grad_v.data;
  }
  char* aux = static_cast<char*>(workspace);
  attention::CudnnPadding m;
  if (G.padded) {
    const attention::Geometry& g = G.geo;
    m.seq_len_q = reinterpret_cast<int32_t*>(aux + G.seq_len_at);
    m.seq_len_kv = m.seq_len_q + g.batch;
    m.max_sq = G.sq;
    m.max_sk = G.sk;
    pack[kSeqLenQ] = m.seq_len_q;
    pack[kSeqLenKV] = m.seq_len_kv;
    if (G.ragged) {
      const auto* st = reinterpret_cast<const Strides*>(key.data() + 1);
      m.nragged = int(G.slots.size());
      for (size_t r = 0; r < G.slots.size(); ++r) {
        m.ragged[r] = reinterpret_cast<int64_t*>(aux + G.ragged_at) + int64_t(r) * (g.batch + 1);
        m.ragged_row[r] = G.slots[r].operand < 0 ? g.hq : st[G.slots[r].operand].row;
        m.ragged_keys[r] = G.slots[r].keys;
        pack[kRagged + int64_t(r)] = m.ragged[r];
      }
    }
    if (G.stats_in_workspace) {
      m.stats = reinterpret_cast<float*>(aux + G.stats_at);
      pack[kStats] = m.stats;
    }
    attention::cudnn_padding_prepare(g, p, m, G.backward, stream);
  }
  fe::error_t e = graph->execute(h, pack, aux + G.aux);
  if (!e.is_good()) throw CudaError(G.desc.op + ": cuDNN execution failed: " + e.get_message());
  if (G.padded) attention::cudnn_padding_finish(G.geo, p, m, G.backward, stream);
  if (G.backward && G.geo.sinks) {  // grad_sinks = -sum of exp(sink - lse) * delta, as our kernels do
    attention::Pointers with_delta = p;
    with_delta.delta = aux + G.delta_at;
    attention::backward_delta(G.geo, with_delta, stream);
    attention::backward_sinks(G.geo, with_delta, stream);
  }
}

}  // namespace baracuda::attention_cudnn
