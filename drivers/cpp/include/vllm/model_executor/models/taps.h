// The taps and feed of a decoder's forward (spec/model-taps.md MT-1.x, MT-2.x), after the Python port's
// impl/model_executor/models/taps.py: a TapRecorder the layer code hands each named intermediate to. It keeps them in
// forward order when asked to, and at a feed point hands back the fed array in place of the stream; a default-built
// one records nothing and feeds nothing (the greedy decode). Asked to, it also keeps every rank's partial before each
// all-reduce, gathered by an all-gather of its own (MT-1.6).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vllm/distributed/tensor_parallel.h"
#include "vllm/model_executor/layers/linear.h"

namespace vllm::model_executor {

// Tap name -> tensor, in forward order.
using Taps = std::vector<std::pair<std::string, HostTensor>>;
// Feed point -> [T, hidden] array, already in the compute dtype.
using Feed = std::map<std::string, HostTensor>;

// How a rank's partial of a reduced tap is named: the tap's name, this, then the rank (MT-1.6).
constexpr const char* kRankSuffix = ".rank";

class TapRecorder {
 public:
  TapRecorder() = default;  // records nothing, feeds nothing
  // Keeps every tap; reads `feed` (which must outlive the recorder) at the feed points; with `rank_partials`, keeps
  // the ranks' partials before each all-reduce too (MT-1.6).
  explicit TapRecorder(const Feed* feed, bool rank_partials = false)
      : feed_(feed), taps_(Taps{}), rank_partials_(rank_partials) {}

  // `value`, recorded under `name` when taps are kept (MT-1.1).
  const HostTensor& Tap(const std::string& name, const HostTensor& value);
  // At the feed point `name`: the fed array where one is fed, else `stream`; tapped either way (MT-2.1).
  HostTensor Fed(const std::string& name, HostTensor stream);
  // A rank's K or V [T, its KV heads · head_dim], recorded whole when taps are kept: gathered over the ranks in rank
  // order, each KV head once (a head replicated on several ranks read from the first) (MT-1.3). A collective: every
  // rank's recorder calls it, or none does.
  void TapHeads(const TensorParallel& tp, const std::string& name, const HostTensor& value, const QkvHeadsGeometry& heads);

  // What a row-parallel layer whose reduced output is tapped under `name` shows its partial to: with rank_partials,
  // an observer gathering every rank's partial in rank order (its own all-gather, not the reduce) and keeping rank
  // r's under name + ".rank{r}"; otherwise none (MT-1.6). A collective: every rank's recorder is asked, or none is.
  // `tp` and the recorder must outlive the observer.
  PartialObserver RankPartials(const TensorParallel& tp, const std::string& name);

  // The taps kept, in forward order (empty when none are).
  Taps Release() { return taps_ ? std::move(*taps_) : Taps{}; }

 private:
  const Feed* feed_ = nullptr;
  std::optional<Taps> taps_;
  bool rank_partials_ = false;
};

}  // namespace vllm::model_executor
