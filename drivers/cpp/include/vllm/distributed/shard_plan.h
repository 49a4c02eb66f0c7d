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

// Every rank's shards of `geometry` at `tp` ranks. Throws std::invalid_argument naming the numbers for a geometry
// vLLM cannot shard (TP-4.8): Hq % tp, the KV split, Hq % Hkv, ffn % tp, padded vocab % tp; and for tp < 1.
ShardPlan BuildShardPlan(const ModelGeometry& geometry, int tp);

}  // namespace vllm::distributed
