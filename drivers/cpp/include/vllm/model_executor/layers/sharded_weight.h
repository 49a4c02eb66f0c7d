// What a tensor-parallel rank loads of a layer (spec/tensor-parallel.md TP-4.1 to TP-4.6; its per-rank state, TP-5.7):
// the weight a shard of the shard plan names (vllm/distributed/shard_plan.h), cut from the unsharded checkpoint
// tensors, and the bias the rank adds. The layers (linear.h, vocab_parallel_embedding.h) keep both; the ranges come
// from the shard, never from the layer.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vllm/distributed/shard_plan.h"
#include "vllm/distributed/tensor_parallel.h"

namespace vllm::model_executor {

// The unsharded checkpoint tensors a shard's parts name, by source name.
using ShardSources = std::map<std::string, const HostTensor*>;

// A rank's weight of one layer: the shard it was cut by and the tensor [shard.out, shard.in], each part's rows and
// columns of its source stacked along the rows in order, then shard.padding_rows zero rows.
struct LoadedWeight {
  distributed::WeightShard shard;
  HostTensor tensor;
};

// The bias a rank adds: its parts (rows of their source vectors) and the tensor, the parts concatenated.
struct LoadedBias {
  std::vector<distributed::BiasPart> parts;
  HostTensor tensor;
};

// `shard` cut from `sources`; std::logic_error naming a part whose source is missing or smaller than its ranges.
LoadedWeight LoadWeight(const distributed::WeightShard& shard, const ShardSources& sources);

// The bias of `parts` cut from `sources` (1-d tensors), or nullopt when there are no parts; std::logic_error as
// LoadWeight's.
std::optional<LoadedBias> LoadBias(std::vector<distributed::BiasPart> parts, const ShardSources& sources);

// A layer loaded for rank `rank` of `tp_size` runs its collective on that rank's handle only: std::logic_error naming
// `layer` and both ranks otherwise.
void CheckLoadedFor(const TensorParallel& tp, int rank, int tp_size, const char* layer);

}  // namespace vllm::model_executor
