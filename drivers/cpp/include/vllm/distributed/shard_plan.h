// The TP-W2 shard plan (BACKEND-DISTRIBUTED-TP, spec/tensor-parallel.md TP-4.1 to TP-4.8): which rows and columns of
// which checkpoint tensor every tensor-parallel rank holds, as vLLM 0.33.0's ColumnParallelLinear,
// RowParallelLinear, QKVParallelLinear, MergedColumnParallelLinear, VocabParallelEmbedding and ParallelLMHead cut
// them (vllm/model_executor/layers/linear.py, vocab_parallel_embedding.py). Behaviour follows the Python port
// impl/distributed/shard_plan.py.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace vllm::distributed {

// vLLM's DEFAULT_VOCAB_PADDING_SIZE: the vocabulary is padded to a multiple of it (TP-4.5).
constexpr int kVocabPadding = 64;

// The sizes of a Qwen3/Llama-style decoder that decide its shards; each int >= 1.
struct ModelGeometry {
  int hidden = 0;
  int num_heads = 0;     // Hq
  int num_kv_heads = 0;  // Hkv
  int head_dim = 0;
  int ffn = 0;
  int vocab = 0;
  bool tie_word_embeddings = false;
};

// A half-open range [begin, end) of rows or columns of an unsharded checkpoint tensor.
struct Span {
  int begin = 0;
  int end = 0;
};

// One checkpoint tensor's slice inside a rank's weight.
struct WeightPart {
  std::string source;  // q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, embed_tokens, lm_head
  Span rows;
  Span cols;
};

// A rank's weight of one layer: shape [out, in], parts stacked along its rows, the bias it adds (row-parallel
// layers: the whole bias on rank 0 only) and its zero padding rows (vocab layers).
struct WeightShard {
  std::string name;
  int out = 0;
  int in = 0;
  std::vector<WeightPart> parts;
  std::optional<Span> bias;
  int padding_rows = 0;
};

struct RankShards {
  int rank = 0;
  int kv_shard = 0;    // the K/V shard the rank loads: rank / kv_replicas
  Span vocab_range;    // its ids of the padded vocabulary
  Span vocab_loaded;   // the checkpoint rows it loads: vocab_range clipped to the vocabulary
  std::vector<WeightShard> weights;  // qkv_proj, o_proj, gate_up_proj, down_proj, embed_tokens, lm_head
};

struct ShardPlan {
  int tp = 1;
  int padded_vocab = 0;
  int heads_per_rank = 0;
  int kv_heads_per_rank = 0;  // max(1, Hkv / tp)
  int kv_replicas = 1;        // tp / Hkv when tp >= Hkv
  std::vector<RankShards> ranks;
};

// The vocabulary rounded up to a multiple of kVocabPadding (vLLM's pad_vocab_size).
int PadVocab(int vocab);

// size / tp; std::invalid_argument "<what> is not divisible by tp=<tp>" otherwise (vLLM's divide(), TP-4.8).
int ShardSize(int size, int tp, const std::string& what);

// The `index`-th of equal consecutive pieces of `size`: [index * size, (index + 1) * size).
Span RankPiece(int index, int size);

// QKVParallelLinear's heads at tp ranks (TP-4.3): Hq / tp query heads a rank, max(1, Hkv / tp) KV heads, each KV
// head replicated tp / Hkv times when tp >= Hkv. std::invalid_argument naming the numbers for an indivisible split.
struct QkvHeads {
  int heads_per_rank = 0;
  int kv_heads_per_rank = 0;
  int kv_replicas = 1;
  // The K/V shard rank `rank` loads: rank / kv_replicas.
  int kv_shard(int rank) const { return rank / kv_replicas; }
};
QkvHeads QkvHeadLayout(int num_heads, int num_kv_heads, int tp);

// VocabParallelEmbedding's vocabulary at tp ranks (TP-4.5): padded to a multiple of kVocabPadding, cut in tp
// contiguous ranges; std::invalid_argument when the padded vocabulary is not divisible by tp.
struct VocabShards {
  int vocab = 0;
  int padded_vocab = 0;
  int per_rank = 0;
  Span range(int rank) const { return RankPiece(rank, per_rank); }
  // The checkpoint rows rank `rank` loads: its range clipped to the vocabulary (the rest are zero padding rows).
  Span loaded(int rank) const;
};
VocabShards VocabLayout(int vocab, int tp);

// The per-layer shards (TP-4.1 to TP-4.6): the one place that computes which rows and columns of which checkpoint
// tensor a rank holds. The layers (vllm/model_executor/layers) load what these name and the whole-model plan
// (BuildShardPlan) composes them. `name` names the rank's weight, each source the unsharded tensor a part is cut from.

// ColumnParallelLinear's rows at rank `rank` of `tp` (TP-4.1): [r·out/tp, (r+1)·out/tp); std::invalid_argument
// "<size_name>=<out> is not divisible by tp=<tp>" otherwise.
Span ColumnParallelRows(int out, int tp, int rank, const char* size_name = "out");
// RowParallelLinear's input columns at rank `rank` of `tp` (TP-4.2): [r·in/tp, (r+1)·in/tp), the columns of x it
// multiplies (vLLM's split_tensor_along_last_dim); std::invalid_argument "<size_name>=<in> is not divisible by
// tp=<tp>" otherwise.
Span RowParallelColumns(int in, int tp, int rank, const char* size_name = "in");

// ColumnParallelLinear (TP-4.1): ColumnParallelRows of `source` [out, in], every column.
WeightShard ColumnParallelShard(const std::string& name, const std::string& source, int out, int in, int tp, int rank);
// MergedColumnParallelLinear (TP-4.4): the ColumnParallelRows of each of `sources` ([out, in] each), stacked in order.
// `size_name` names out in the refusal of an indivisible split (as the row-parallel shard's names in).
WeightShard MergedColumnParallelShard(const std::string& name, const std::vector<std::string>& sources, int out, int in,
                                      int tp, int rank, const char* size_name = "ffn");
// RowParallelLinear (TP-4.2): RowParallelColumns of `source` [out, in], every row; its bias, the whole [0, out), is
// added by rank 0 only.
WeightShard RowParallelShard(const std::string& name, const std::string& source, int out, int in, int tp, int rank,
                             const char* size_name = "in");

// The q, k and v projections a QKVParallelLinear is cut from ([Hq·D, hidden], [Hkv·D, hidden] twice).
struct QkvSources {
  std::string q;
  std::string k;
  std::string v;
};
// QKVParallelLinear (TP-4.3): the rank's query heads of q, then KV shard kv_shard(rank) of k and of v, every column;
// QkvHeadLayout's refusals.
WeightShard QkvParallelShard(const std::string& name, const QkvSources& sources, int num_heads, int num_kv_heads,
                             int head_dim, int hidden, int tp, int rank);

// VocabParallelEmbedding and ParallelLMHead (TP-4.5, TP-4.6): the rank's loaded rows of `source` [vocab, hidden],
// every column, then the zero padding rows up to padded/tp; VocabLayout's refusal.
WeightShard VocabParallelShard(const std::string& name, const std::string& source, int vocab, int hidden, int tp,
                               int rank);

// One bias vector's rows inside the bias a rank adds.
struct BiasPart {
  std::string source;
  Span rows;
};
// The bias a column-parallel rank adds (TP-4.1, TP-4.3): the rows of each of shard.parts, part i's taken from
// bias_sources[i] (std::invalid_argument unless there is one source per part).
std::vector<BiasPart> ColumnBiasParts(const WeightShard& shard, const std::vector<std::string>& bias_sources);
// The bias a row-parallel rank adds (TP-4.2): shard.bias of `bias_source` where the shard has one, else nothing.
std::vector<BiasPart> RowBiasParts(const WeightShard& shard, const std::string& bias_source);

// Every rank's shards of `geometry` at `tp` ranks, composed of the per-layer shards above. Throws
// std::invalid_argument naming the numbers for a geometry vLLM cannot shard (TP-4.8): Hq % tp, the KV split,
// Hq % Hkv, ffn % tp, padded vocab % tp; and for tp < 1.
ShardPlan BuildShardPlan(const ModelGeometry& geometry, int tp);

}  // namespace vllm::distributed
