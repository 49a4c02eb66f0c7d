// The vocabulary-parallel layers, the forward of one rank (spec/tensor-parallel.md TP-5.3, TP-5.4; vLLM 0.33.0
// vllm/model_executor/layers/vocab_parallel_embedding.py VocabParallelEmbedding, ParallelLMHead, and
// logits_processor.py's gather): the vocabulary padded to a multiple of 64 and cut in contiguous ranges, a rank's
// rows past the vocabulary zero padding (shard_plan.h VocabParallelShard, TP-4.5, TP-4.6). Each layer keeps the
// weight it loaded (sharded_weight.h) and answers its per-rank state (TP-5.7).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vllm/distributed/tensor_parallel.h"
#include "vllm/model_executor/layers/precision.h"
#include "vllm/model_executor/layers/sharded_weight.h"

namespace vllm::model_executor {

// VocabParallelEmbedding at rank `rank` of `tp`: its shard [padded/tp, hidden] of weight [vocab, hidden] (the
// source named `source`).
class VocabParallelEmbedding {
 public:
  VocabParallelEmbedding(const HostTensor& weight, int rank, int tp, const std::string& source = "weight");
  const LoadedWeight& weight() const { return weight_; }
  // Whether each id lies in the rank's loaded rows: those it looks up; the others are masked to row 0 and zeroed.
  std::vector<bool> Mask(const std::vector<std::int64_t>& ids) const;
  // The rank's rows of the ids [tokens, hidden], zero where masked: its output before the all-reduce.
  HostTensor Rows(const std::vector<std::int64_t>& ids) const;
  // The ranks' rows all-reduced: [tokens, hidden] on every rank. Ids are the caller's to check against [0, vocab).
  TensorPtr Forward(const TensorParallel& tp, const std::vector<std::int64_t>& ids) const;

 private:
  LoadedWeight weight_;
  int rank_;
  int tp_;
};

// ParallelLMHead and the logits gather at rank `rank` of `tp`: its shard of weight [vocab, hidden] as the embedding's.
class ParallelLmHead {
 public:
  ParallelLmHead(const HostTensor& weight, int rank, int tp, const std::string& source = "weight");
  const LoadedWeight& weight() const { return weight_; }
  // hidden_states [tokens, hidden] times the rank's shard: [tokens, padded/tp] (zero on padding rows), before the
  // gather.
  HostTensor Logits(const HostTensor& hidden_states, Precision precision) const;
  // The ranks' logits all-gathered along the last dim in rank order, the padding trimmed: [tokens, vocab].
  TensorPtr Gather(const TensorParallel& tp, HostTensor logits) const;
  TensorPtr Forward(const TensorParallel& tp, const HostTensor& hidden_states, Precision precision) const;

 private:
  LoadedWeight weight_;
  int vocab_;
  int rank_;
  int tp_;
};

// The rank's embedding shard of weight [vocab, hidden]: [padded/tp, hidden], rows past the vocabulary zero.
HostTensor VocabShardOf(const TensorParallel& tp, const HostTensor& weight);

// VocabParallelEmbedding's forward: each id inside the rank's range looks up its shard row; an id outside it is
// masked to row 0 and its row zeroed; the rows are all-reduced: [tokens, hidden] on every rank. Ids are the
// caller's to check against [0, vocab).
TensorPtr VocabParallelEmbeddingForward(const TensorParallel& tp, const std::vector<std::int64_t>& ids,
                                        const HostTensor& weight);

// ParallelLMHead and the logits gather: hidden_states [tokens, hidden] times the rank's shard of weight [vocab,
// hidden] (padding rows zero), the [tokens, padded/tp] logits all-gathered along the last dim in rank order, the
// padding trimmed: [tokens, vocab] on every rank.
TensorPtr ParallelLmHeadForward(const TensorParallel& tp, const HostTensor& hidden_states, const HostTensor& weight,
                                Precision precision);

}  // namespace vllm::model_executor
