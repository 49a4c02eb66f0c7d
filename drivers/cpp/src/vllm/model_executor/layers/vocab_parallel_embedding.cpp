// The vocabulary-parallel layers of one rank; see include/vllm/model_executor/layers/vocab_parallel_embedding.h.
#include "vllm/model_executor/layers/vocab_parallel_embedding.h"

#include <algorithm>
#include <memory>

namespace vllm::model_executor {
namespace {

namespace vd = vllm::distributed;

vd::VocabShards Layout(const TensorParallel& tp, const HostTensor& weight) {
  return vd::VocabLayout(static_cast<int>(weight.shape[0]), tp.tp_size());
}

}  // namespace

HostTensor VocabShardOf(const TensorParallel& tp, const HostTensor& weight) {
  const vd::VocabShards vocab = Layout(tp, weight);
  HostTensor shard = RowSlice(weight, vocab.loaded(tp.rank()));
  shard.shape[0] = vocab.per_rank;
  shard.data.resize(static_cast<std::size_t>(vocab.per_rank * weight.shape[1]), 0.0f);  // the zero padding rows
  return shard;
}

TensorPtr VocabParallelEmbeddingForward(const TensorParallel& tp, const std::vector<std::int64_t>& ids,
                                        const HostTensor& weight) {
  const vd::Span range = Layout(tp, weight).range(tp.rank());
  const HostTensor shard = VocabShardOf(tp, weight);
  const std::size_t hidden = static_cast<std::size_t>(weight.shape[1]);
  auto rows = std::make_shared<HostTensor>(Zeros(static_cast<std::int64_t>(ids.size()), weight.shape[1]));
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const bool mine = ids[t] >= range.begin && ids[t] < range.end;
    if (!mine) continue;  // masked to row 0, whose lookup is zeroed: the row stays zero
    const auto row = shard.data.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(ids[t] - range.begin) * hidden);
    std::copy(row, row + static_cast<std::ptrdiff_t>(hidden), rows->data.begin() + static_cast<std::ptrdiff_t>(t * hidden));
  }
  return tp.AllReduce(rows);
}

TensorPtr ParallelLmHeadForward(const TensorParallel& tp, const HostTensor& hidden_states, const HostTensor& weight,
                                Precision precision) {
  const vd::VocabShards vocab = Layout(tp, weight);
  const HostTensor shard = VocabShardOf(tp, weight);
  auto logits = std::make_shared<HostTensor>(
      LinearSlice(hidden_states, shard, vd::Span{0, vocab.per_rank}, vd::Span{0, static_cast<int>(weight.shape[1])}, nullptr,
                  precision));
  const TensorPtr gathered = tp.AllGather(logits, -1);
  return std::make_shared<HostTensor>(ColumnSlice(*gathered, vd::Span{0, vocab.vocab}));
}

}  // namespace vllm::model_executor
