// The vocabulary-parallel layers of one rank; see include/vllm/model_executor/layers/vocab_parallel_embedding.h.
#include "vllm/model_executor/layers/vocab_parallel_embedding.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

namespace vllm::model_executor {
namespace {

namespace vd = vllm::distributed;

// The rank's shard of a vocabulary weight [vocab, hidden] named `source`.
LoadedWeight LoadVocabShard(const HostTensor& weight, int rank, int tp, const std::string& source) {
  const vd::WeightShard shard = vd::VocabParallelShard(source, source, static_cast<int>(weight.shape[0]),
                                                       static_cast<int>(weight.shape[1]), tp, rank);
  return LoadWeight(shard, {{source, &weight}});
}


}  // namespace

VocabParallelEmbedding::VocabParallelEmbedding(const HostTensor& weight, int rank, int tp, const std::string& source)
    : weight_(LoadVocabShard(weight, rank, tp, source)), rank_(rank), tp_(tp) {}

std::vector<bool> VocabParallelEmbedding::Mask(const std::vector<std::int64_t>& ids) const {
  const vd::Span loaded = weight_.shard.parts.at(0).rows;
  std::vector<bool> mask(ids.size());
  for (std::size_t t = 0; t < ids.size(); ++t) mask[t] = ids[t] >= loaded.begin && ids[t] < loaded.end;
  return mask;
}

HostTensor VocabParallelEmbedding::Rows(const std::vector<std::int64_t>& ids) const {
  const vd::Span loaded = weight_.shard.parts.at(0).rows;
  const std::vector<bool> mask = Mask(ids);
  const std::size_t hidden = static_cast<std::size_t>(weight_.shard.in);
  HostTensor rows = Zeros(static_cast<std::int64_t>(ids.size()), weight_.shard.in);
  for (std::size_t t = 0; t < ids.size(); ++t) {
    if (!mask[t]) continue;  // masked to row 0, whose lookup is zeroed: the row stays zero
    const auto row = weight_.tensor.data.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(ids[t] - loaded.begin) * hidden);
    std::copy(row, row + static_cast<std::ptrdiff_t>(hidden), rows.data.begin() + static_cast<std::ptrdiff_t>(t * hidden));
  }
  return rows;
}

TensorPtr VocabParallelEmbedding::Forward(const TensorParallel& tp, const std::vector<std::int64_t>& ids) const {
  CheckLoadedFor(tp, rank_, tp_, "VocabParallelEmbedding");
  return tp.AllReduce(std::make_shared<HostTensor>(Rows(ids)));
}

ParallelLmHead::ParallelLmHead(const HostTensor& weight, int rank, int tp, const std::string& source)
    : weight_(LoadVocabShard(weight, rank, tp, source)), vocab_(static_cast<int>(weight.shape[0])), rank_(rank), tp_(tp) {}

HostTensor ParallelLmHead::Logits(const HostTensor& hidden_states, Precision precision) const {
  return LinearSlice(hidden_states, weight_.tensor, vd::Span{0, weight_.shard.out}, vd::Span{0, weight_.shard.in}, nullptr,
                     precision);
}

TensorPtr ParallelLmHead::Gather(const TensorParallel& tp, HostTensor logits) const {
  CheckLoadedFor(tp, rank_, tp_, "ParallelLmHead");
  const TensorPtr gathered = tp.AllGather(std::make_shared<HostTensor>(std::move(logits)), -1);
  return std::make_shared<HostTensor>(ColumnSlice(*gathered, vd::Span{0, vocab_}));
}

TensorPtr ParallelLmHead::Forward(const TensorParallel& tp, const HostTensor& hidden_states, Precision precision) const {
  return Gather(tp, Logits(hidden_states, precision));
}

HostTensor VocabShardOf(const TensorParallel& tp, const HostTensor& weight) {
  return LoadVocabShard(weight, tp.rank(), tp.tp_size(), "weight").tensor;
}

TensorPtr VocabParallelEmbeddingForward(const TensorParallel& tp, const std::vector<std::int64_t>& ids,
                                        const HostTensor& weight) {
  return VocabParallelEmbedding(weight, tp.rank(), tp.tp_size()).Forward(tp, ids);
}

TensorPtr ParallelLmHeadForward(const TensorParallel& tp, const HostTensor& hidden_states, const HostTensor& weight,
                                Precision precision) {
  return ParallelLmHead(weight, tp.rank(), tp.tp_size()).Forward(tp, hidden_states, precision);
}

}  // namespace vllm::model_executor
