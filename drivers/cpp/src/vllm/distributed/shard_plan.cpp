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

// The rank's piece of `size` split tp ways, `name` naming the size in the refusal of an indivisible split.
Span SplitPiece(const char* name, int size, int tp, int rank) {
  return RankPiece(rank, ShardSize(size, tp, std::string(name) + "=" + std::to_string(size)));
}

RankShards RankOf(const ModelGeometry& g, int tp, int rank) {
  const QkvHeads heads = QkvHeadLayout(g.num_heads, g.num_kv_heads, tp);
  const VocabShards vocab = VocabLayout(g.vocab, tp);
  RankShards out;
  out.rank = rank;
  out.kv_shard = heads.kv_shard(rank);
  out.vocab_range = vocab.range(rank);
  out.vocab_loaded = vocab.loaded(rank);
  out.weights.push_back(QkvParallelShard("qkv_proj", {"q_proj", "k_proj", "v_proj"}, g.num_heads, g.num_kv_heads,
                                         g.head_dim, g.hidden, tp, rank));
  out.weights.push_back(RowParallelShard("o_proj", "o_proj", g.hidden, g.num_heads * g.head_dim, tp, rank));
  out.weights.push_back(MergedColumnParallelShard("gate_up_proj", {"gate_proj", "up_proj"}, g.ffn, g.hidden, tp, rank));
  out.weights.push_back(RowParallelShard("down_proj", "down_proj", g.hidden, g.ffn, tp, rank, "ffn"));
  out.weights.push_back(VocabParallelShard("embed_tokens", "embed_tokens", g.vocab, g.hidden, tp, rank));
  out.weights.push_back(
      VocabParallelShard("lm_head", g.tie_word_embeddings ? "embed_tokens" : "lm_head", g.vocab, g.hidden, tp, rank));
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

Span ColumnParallelRows(int out, int tp, int rank, const char* size_name) { return SplitPiece(size_name, out, tp, rank); }

Span RowParallelColumns(int in, int tp, int rank, const char* size_name) { return SplitPiece(size_name, in, tp, rank); }

WeightShard ColumnParallelShard(const std::string& name, const std::string& source, int out, int in, int tp, int rank) {
  return MergedColumnParallelShard(name, {source}, out, in, tp, rank, "out");
}

WeightShard MergedColumnParallelShard(const std::string& name, const std::vector<std::string>& sources, int out, int in,
                                      int tp, int rank, const char* size_name) {
  const Span rows = ColumnParallelRows(out, tp, rank, size_name);
  WeightShard shard{name, 0, in, {}, std::nullopt, 0};
  for (const std::string& source : sources) {
    shard.parts.push_back({source, rows, Span{0, in}});
    shard.out += rows.end - rows.begin;
  }
  return shard;
}

WeightShard RowParallelShard(const std::string& name, const std::string& source, int out, int in, int tp, int rank,
                             const char* size_name) {
  const Span cols = RowParallelColumns(in, tp, rank, size_name);
  const std::optional<Span> bias = rank == 0 ? std::optional<Span>(Span{0, out}) : std::nullopt;
  return WeightShard{name, out, cols.end - cols.begin, {{source, Span{0, out}, cols}}, bias, 0};
}

WeightShard QkvParallelShard(const std::string& name, const QkvSources& sources, int num_heads, int num_kv_heads,
                             int head_dim, int hidden, int tp, int rank) {
  const QkvHeads heads = QkvHeadLayout(num_heads, num_kv_heads, tp);
  const Span q_rows = RankPiece(rank, heads.heads_per_rank * head_dim);
  const Span kv_rows = RankPiece(heads.kv_shard(rank), heads.kv_heads_per_rank * head_dim);
  const Span whole{0, hidden};
  return WeightShard{name, (q_rows.end - q_rows.begin) + 2 * (kv_rows.end - kv_rows.begin), hidden,
                     {{sources.q, q_rows, whole}, {sources.k, kv_rows, whole}, {sources.v, kv_rows, whole}}, std::nullopt, 0};
}

WeightShard VocabParallelShard(const std::string& name, const std::string& source, int vocab, int hidden, int tp,
                               int rank) {
  const VocabShards layout = VocabLayout(vocab, tp);
  const Span loaded = layout.loaded(rank);
  const int padding = layout.per_rank - (loaded.end - loaded.begin);
  return WeightShard{name, layout.per_rank, hidden, {{source, loaded, Span{0, hidden}}}, std::nullopt, padding};
}

std::vector<BiasPart> ColumnBiasParts(const WeightShard& shard, const std::vector<std::string>& bias_sources) {
  if (bias_sources.size() != shard.parts.size())
    throw std::invalid_argument("ColumnBiasParts: " + shard.name + " has " + std::to_string(shard.parts.size()) +
                                " parts but " + std::to_string(bias_sources.size()) + " bias sources");
  std::vector<BiasPart> parts;
  for (std::size_t i = 0; i < bias_sources.size(); ++i) parts.push_back({bias_sources[i], shard.parts[i].rows});
  return parts;
}

std::vector<BiasPart> RowBiasParts(const WeightShard& shard, const std::string& bias_source) {
  if (!shard.bias) return {};
  return {{bias_source, *shard.bias}};
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
  plan.padded_vocab = VocabLayout(g.vocab, tp).padded_vocab;
  for (int rank = 0; rank < tp; ++rank) plan.ranks.push_back(RankOf(g, tp, rank));
  return plan;
}

}  // namespace vllm::distributed
