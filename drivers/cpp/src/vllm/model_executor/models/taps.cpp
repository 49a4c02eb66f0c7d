// The taps and feed of a decoder's forward; see include/vllm/model_executor/models/taps.h.
#include "vllm/model_executor/models/taps.h"

#include <memory>
#include <string>
#include <vector>

#include "vllm/distributed/shard_plan.h"
#include "vllm/model_executor/layers/precision.h"

namespace vllm::model_executor {

const HostTensor& TapRecorder::Tap(const std::string& name, const HostTensor& value) {
  if (taps_) taps_->emplace_back(name, value);
  return value;
}

HostTensor TapRecorder::Fed(const std::string& name, HostTensor stream) {
  if (feed_ != nullptr) {
    const auto fed = feed_->find(name);
    if (fed != feed_->end()) stream = fed->second;
  }
  Tap(name, stream);
  return stream;
}

void TapRecorder::TapHeads(const TensorParallel& tp, const std::string& name, const HostTensor& value,
                           const QkvHeadsGeometry& heads) {
  if (!taps_) return;
  const HostTensor gathered = *tp.AllGather(std::make_shared<HostTensor>(value), -1);
  const int replicas = distributed::QkvHeadLayout(heads.num_heads, heads.num_kv_heads, tp.tp_size()).kv_replicas;
  const int width = static_cast<int>(value.shape[1]);
  HostTensor once = Zeros(value.shape[0], std::int64_t{width} * (tp.tp_size() / replicas));
  for (int shard = 0; shard < tp.tp_size() / replicas; ++shard) {
    const HostTensor columns = ColumnSlice(gathered, distributed::Span{shard * replicas * width, (shard * replicas + 1) * width});
    for (std::int64_t t = 0; t < value.shape[0]; ++t)
      std::copy(columns.data.begin() + t * width, columns.data.begin() + (t + 1) * width,
                once.data.begin() + t * once.shape[1] + std::int64_t{shard} * width);
  }
  taps_->emplace_back(name, std::move(once));
}

PartialObserver TapRecorder::RankPartials(const TensorParallel& tp, const std::string& name) {
  if (!taps_ || !rank_partials_) return {};
  return [this, &tp, name](const HostTensor& partial) {
    const HostTensor gathered = *tp.AllGather(std::make_shared<HostTensor>(partial), 0);  // rank r's rows r·T..(r+1)·T
    const auto size = static_cast<std::ptrdiff_t>(partial.data.size());
    for (int rank = 0; rank < tp.tp_size(); ++rank) {
      const auto at = gathered.data.begin() + rank * size;
      taps_->emplace_back(name + kRankSuffix + std::to_string(rank), HostTensor{partial.shape, std::vector<float>(at, at + size)});
    }
  };
}

}  // namespace vllm::model_executor
