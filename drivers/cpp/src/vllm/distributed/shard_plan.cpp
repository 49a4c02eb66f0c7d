// The TP-W2 shard plan (spec/tensor-parallel.md TP-4.1 to TP-4.8); see include/vllm/distributed/shard_plan.h.
#include "vllm/distributed/shard_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace vllm::distributed {
namespace {

int Shard(int size, int tp, const std::string& what) {
  if (size % tp != 0) throw std::invalid_argument(what + " is not divisible by tp=" + std::to_string(tp));
  return size / tp;
}

Span Piece(int index, int size) { return Span{index * size, (index + 1) * size}; }

// (KV heads per rank, replicas of each KV head) of QKVParallelLinear (TP-4.3).
void KvLayout(const ModelGeometry& g, int tp, int& heads, int& replicas) {
  if (tp >= g.num_kv_heads) {
    if (tp % g.num_kv_heads != 0)
      throw std::invalid_argument("num_kv_heads=" + std::to_string(g.num_kv_heads) + " does not divide tp=" +
                                  std::to_string(tp) + " (tp >= num_kv_heads replicates each KV head tp/num_kv_heads times)");
    heads = 1;
    replicas = tp / g.num_kv_heads;
  } else {
    heads = Shard(g.num_kv_heads, tp, "num_kv_heads=" + std::to_string(g.num_kv_heads));
    replicas = 1;
  }
  if (g.num_heads % g.num_kv_heads != 0)
    throw std::invalid_argument("num_heads=" + std::to_string(g.num_heads) + " is not divisible by num_kv_heads=" +
                                std::to_string(g.num_kv_heads) + " (grouped-query attention)");
}

RankShards RankOf(const ModelGeometry& g, const ShardPlan& plan, int rank) {
  const Span whole{0, g.hidden};
  const int q_rows = plan.heads_per_rank * g.head_dim;
  const int kv_rows = plan.kv_heads_per_rank * g.head_dim;
  const int ffn_rows = g.ffn / plan.tp;
  RankShards out;
  out.rank = rank;
  out.kv_shard = rank / plan.kv_replicas;
  const std::optional<Span> bias = rank == 0 ? std::optional<Span>(whole) : std::nullopt;
  out.weights.push_back({"qkv_proj", q_rows + 2 * kv_rows, g.hidden,
                         {{"q_proj", Piece(rank, q_rows), whole}, {"k_proj", Piece(out.kv_shard, kv_rows), whole},
                          {"v_proj", Piece(out.kv_shard, kv_rows), whole}}, std::nullopt, 0});
  out.weights.push_back({"o_proj", g.hidden, q_rows, {{"o_proj", whole, Piece(rank, q_rows)}}, bias, 0});
  out.weights.push_back({"gate_up_proj", 2 * ffn_rows, g.hidden,
                         {{"gate_proj", Piece(rank, ffn_rows), whole}, {"up_proj", Piece(rank, ffn_rows), whole}},
                         std::nullopt, 0});
  out.weights.push_back({"down_proj", g.hidden, ffn_rows, {{"down_proj", whole, Piece(rank, ffn_rows)}}, bias, 0});
  const int per_rank = plan.padded_vocab / plan.tp;
  out.vocab_range = Piece(rank, per_rank);
  out.vocab_loaded = Span{std::min(out.vocab_range.begin, g.vocab), std::min(out.vocab_range.end, g.vocab)};
  const int padding = per_rank - (out.vocab_loaded.end - out.vocab_loaded.begin);
  out.weights.push_back({"embed_tokens", per_rank, g.hidden, {{"embed_tokens", out.vocab_loaded, whole}}, std::nullopt, padding});
  out.weights.push_back({"lm_head", per_rank, g.hidden,
                         {{g.tie_word_embeddings ? "embed_tokens" : "lm_head", out.vocab_loaded, whole}}, std::nullopt, padding});
  return out;
}

}  // namespace

int PadVocab(int vocab) { return (vocab + kVocabPadding - 1) / kVocabPadding * kVocabPadding; }

ShardPlan BuildShardPlan(const ModelGeometry& g, int tp) {
  if (tp < 1) throw std::invalid_argument("tp must be an int >= 1, got " + std::to_string(tp));
  ShardPlan plan;
  plan.tp = tp;
  plan.heads_per_rank = Shard(g.num_heads, tp, "num_heads=" + std::to_string(g.num_heads));
  KvLayout(g, tp, plan.kv_heads_per_rank, plan.kv_replicas);
  Shard(g.ffn, tp, "ffn=" + std::to_string(g.ffn));
  plan.padded_vocab = PadVocab(g.vocab);
  Shard(plan.padded_vocab, tp, "the padded vocab " + std::to_string(plan.padded_vocab) + " (vocab=" +
                                   std::to_string(g.vocab) + " padded to a multiple of " + std::to_string(kVocabPadding) + ")");
  for (int rank = 0; rank < tp; ++rank) plan.ranks.push_back(RankOf(g, plan, rank));
  return plan;
}

}  // namespace vllm::distributed
