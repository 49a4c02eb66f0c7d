// The TP-W2 shard plan (spec/tensor-parallel.md TP-4.1 to TP-4.8); see include/vllm/distributed/shard_plan.h.
#include "vllm/distributed/shard_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace vllm::distributed {
namespace {

// (KV heads per rank, replicas of each KV head) of QKVParallelLinear (TP-4.3).
void KvLayout(int num_heads, int num_kv_heads, int tp, int& heads, int& replicas) {
  if (tp >= num_kv_heads) {
    if (tp % num_kv_heads != 0)
      throw std::invalid_argument("num_kv_heads=" + std::to_string(num_kv_heads) + " does not divide tp=" +
                                  std::to_string(tp) + " (tp >= num_kv_heads replicates each KV head tp/num_kv_heads times)");
    heads = 1;
    replicas = tp / num_kv_heads;
  } else {
    heads = ShardSize(num_kv_heads, tp, "num_kv_heads=" + std::to_string(num_kv_heads));
    replicas = 1;
  }
  if (num_heads % num_kv_heads != 0)
    throw std::invalid_argument("num_heads=" + std::to_string(num_heads) + " is not divisible by num_kv_heads=" +
                                std::to_string(num_kv_heads) + " (grouped-query attention)");
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
                         {{"q_proj", RankPiece(rank, q_rows), whole}, {"k_proj", RankPiece(out.kv_shard, kv_rows), whole},
                          {"v_proj", RankPiece(out.kv_shard, kv_rows), whole}}, std::nullopt, 0});
  out.weights.push_back({"o_proj", g.hidden, q_rows, {{"o_proj", whole, RankPiece(rank, q_rows)}}, bias, 0});
  out.weights.push_back({"gate_up_proj", 2 * ffn_rows, g.hidden,
                         {{"gate_proj", RankPiece(rank, ffn_rows), whole}, {"up_proj", RankPiece(rank, ffn_rows), whole}},
                         std::nullopt, 0});
  out.weights.push_back({"down_proj", g.hidden, ffn_rows, {{"down_proj", whole, RankPiece(rank, ffn_rows)}}, bias, 0});
  const int per_rank = plan.padded_vocab / plan.tp;
  const VocabShards vocab{g.vocab, plan.padded_vocab, per_rank};
  out.vocab_range = vocab.range(rank);
  out.vocab_loaded = vocab.loaded(rank);
  const int padding = per_rank - (out.vocab_loaded.end - out.vocab_loaded.begin);
  out.weights.push_back({"embed_tokens", per_rank, g.hidden, {{"embed_tokens", out.vocab_loaded, whole}}, std::nullopt, padding});
  out.weights.push_back({"lm_head", per_rank, g.hidden,
                         {{g.tie_word_embeddings ? "embed_tokens" : "lm_head", out.vocab_loaded, whole}}, std::nullopt, padding});
  return out;
}

}  // namespace

int PadVocab(int vocab) { return (vocab + kVocabPadding - 1) / kVocabPadding * kVocabPadding; }

int ShardSize(int size, int tp, const std::string& what) {
  if (size % tp != 0) throw std::invalid_argument(what + " is not divisible by tp=" + std::to_string(tp));
  return size / tp;
}

Span RankPiece(int index, int size) { return Span{index * size, (index + 1) * size}; }

QkvHeads QkvHeadLayout(int num_heads, int num_kv_heads, int tp) {
  QkvHeads heads;
  heads.heads_per_rank = ShardSize(num_heads, tp, "num_heads=" + std::to_string(num_heads));
  KvLayout(num_heads, num_kv_heads, tp, heads.kv_heads_per_rank, heads.kv_replicas);
  return heads;
}

Span VocabShards::loaded(int rank) const {
  const Span whole = range(rank);
  return Span{std::min(whole.begin, vocab), std::min(whole.end, vocab)};
}

VocabShards VocabLayout(int vocab, int tp) {
  VocabShards shards;
  shards.vocab = vocab;
  shards.padded_vocab = PadVocab(vocab);
  shards.per_rank = ShardSize(shards.padded_vocab, tp, "the padded vocab " + std::to_string(shards.padded_vocab) + " (vocab=" +
                                                           std::to_string(vocab) + " padded to a multiple of " +
                                                           std::to_string(kVocabPadding) + ")");
  return shards;
}

ShardPlan BuildShardPlan(const ModelGeometry& g, int tp) {
  if (tp < 1) throw std::invalid_argument("tp must be an int >= 1, got " + std::to_string(tp));
  ShardPlan plan;
  plan.tp = tp;
  const QkvHeads heads = QkvHeadLayout(g.num_heads, g.num_kv_heads, tp);
  plan.heads_per_rank = heads.heads_per_rank;
  plan.kv_heads_per_rank = heads.kv_heads_per_rank;
  plan.kv_replicas = heads.kv_replicas;
  ShardSize(g.ffn, tp, "ffn=" + std::to_string(g.ffn));
  plan.padded_vocab = VocabLayout(g.vocab, tp).per_rank * tp;
  for (int rank = 0; rank < tp; ++rank) plan.ranks.push_back(RankOf(g, plan, rank));
  return plan;
}

}  // namespace vllm::distributed
