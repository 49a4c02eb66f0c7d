// The vocabulary-parallel layers, the forward of one rank (spec/tensor-parallel.md TP-5.3, TP-5.4; vLLM 0.33.0
// vllm/model_executor/layers/vocab_parallel_embedding.py VocabParallelEmbedding, ParallelLMHead, and
// logits_processor.py's gather): the vocabulary padded to a multiple of 64 and cut in contiguous ranges
// (shard_plan.h VocabLayout, TP-4.5, TP-4.6); a rank's rows past the vocabulary are zero padding.
#pragma once

#include <cstdint>
#include <vector>

#include "vllm/distributed/tensor_parallel.h"
#include "vllm/model_executor/layers/precision.h"

namespace vllm::model_executor {

// The rank's embedding shard of weight [vocab, hidden]: [padded/tp, hidden], rows past the vocabulary zero.
HostTensor VocabShardOf(const TensorParallel& tp, const HostTensor& weight);

// VocabParallelEmbedding: each id inside the rank's range looks up its shard row; an id outside it is masked to
// row 0 and its row zeroed; the rows are all-reduced: [tokens, hidden] on every rank. Ids are the caller's to check
// against [0, vocab).
TensorPtr VocabParallelEmbeddingForward(const TensorParallel& tp, const std::vector<std::int64_t>& ids,
                                        const HostTensor& weight);

// ParallelLMHead and the logits gather: hidden_states [tokens, hidden] times the rank's shard of weight [vocab,
// hidden] (padding rows zero), the [tokens, padded/tp] logits all-gathered along the last dim in rank order, the
// padding trimmed: [tokens, vocab] on every rank.
TensorPtr ParallelLmHeadForward(const TensorParallel& tp, const HostTensor& hidden_states, const HostTensor& weight,
                                Precision precision);

}  // namespace vllm::model_executor
