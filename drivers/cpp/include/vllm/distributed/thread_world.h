// A tensor-parallel world of threads (issue 30 item 5; the C++ port's thread-per-rank design): RunOnRanks runs a
// function on tp std::threads, each with the TensorParallel handle of its rank, current for the thread
// (CurrentTensorParallel), whose communicator runs the collectives in process over a shared barrier: all_reduce
// (sum in rank order, the same bits on every rank), all_gather (rank order), reduce_scatter and broadcast.
//
// Nothing hangs: a rank that throws aborts the world, ranks waiting in a collective (or entering one later) are
// released, and RunOnRanks throws RankFailed naming the first rank that failed. A rank that returns while the
// others wait in a collective, and ranks that call different collectives or pass tensors of different shapes,
// fail the same way.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "vllm/distributed/tensor_parallel.h"

namespace vllm::distributed {

// What a thread world's call failed with: the rank that failed first and its message.
struct RankFailed : std::runtime_error {
  RankFailed(int rank_, const std::string& message) : std::runtime_error(message), rank(rank_) {}
  int rank;
};

// Calls fn(handle) on tp >= 1 threads, rank r's handle holding the group [0, tp) at local rank r; returns once
// every rank has returned. Throws RankFailed "rank R of tp=T failed: <what it threw>" when any rank failed,
// std::invalid_argument for tp < 1.
void RunOnRankThreads(int tp, const std::function<void(const TensorParallel&)>& fn);

// The same, collecting each rank's result in rank order.
template <typename Result>
std::vector<Result> RunOnRanks(int tp, const std::function<Result(const TensorParallel&)>& fn) {
  std::vector<std::optional<Result>> slots(tp > 0 ? static_cast<std::size_t>(tp) : 0);
  RunOnRankThreads(tp, [&](const TensorParallel& handle) { slots[static_cast<std::size_t>(handle.rank())] = fn(handle); });
  std::vector<Result> results;
  results.reserve(slots.size());
  for (auto& slot : slots) results.push_back(std::move(*slot));
  return results;
}

}  // namespace vllm::distributed
