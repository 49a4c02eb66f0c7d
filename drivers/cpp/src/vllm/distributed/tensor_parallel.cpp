// The per-rank TP handle and the thread-local current one; see include/vllm/distributed/tensor_parallel.h.
// Mirrors impl/distributed/tensor_parallel.py.
#include "vllm/distributed/tensor_parallel.h"

#include <stdexcept>
#include <string>

namespace vllm {
namespace {

void CheckTensor(const char* collective, const TensorPtr& tensor) {
  if (!tensor) throw std::invalid_argument(std::string("TensorParallel.") + collective + ": tensor must be a tensor, got null");
}

void CheckDim(const char* collective, const TensorPtr& tensor, int dim) {
  CheckTensor(collective, tensor);
  const int ndim = tensor->dim();
  if (ndim == 0)
    throw std::invalid_argument(std::string("TensorParallel.") + collective +
                                ": tensor must have at least one dimension, got a 0-d tensor");
  if (dim < -ndim || dim >= ndim)
    throw std::invalid_argument(std::string("TensorParallel.") + collective + ": dim must be an int in [" +
                                std::to_string(-ndim) + ", " + std::to_string(ndim - 1) + "], got " + std::to_string(dim));
}

distributed::RankGroup SingletonGroup() {
  distributed::RankGroup group;
  group.ranks = {0};
  return group;
}

}  // namespace

TensorParallel::TensorParallel() : group_(SingletonGroup()) {}

TensorParallel::TensorParallel(distributed::RankGroup group, Communicator* communicator)
    : group_(std::move(group)), communicator_(communicator) {
  if (group_.ranks.empty()) throw std::invalid_argument("TensorParallel.group must have at least one rank");
  if (group_.local_rank < 0 || group_.local_rank >= group_.size())
    throw std::invalid_argument("RankGroup.local_rank must be in [0, " + std::to_string(group_.size() - 1) + "], got " +
                                std::to_string(group_.local_rank));
}

void TensorParallel::RequireCommunicator(const char* collective) const {
  if (communicator_ == nullptr)
    throw std::runtime_error(std::string("TensorParallel.") + collective + ": the TP group has " +
                             std::to_string(tp_size()) +
                             " ranks but no communicator; only a one-rank group runs collectives without one");
}

TensorPtr TensorParallel::AllReduce(const TensorPtr& tensor) const {
  CheckTensor("all_reduce", tensor);
  if (tp_size() == 1) return tensor;
  RequireCommunicator("all_reduce");
  return communicator_->AllReduce(tensor);
}

TensorPtr TensorParallel::AllGather(const TensorPtr& tensor, int dim) const {
  CheckDim("all_gather", tensor, dim);
  if (tp_size() == 1) return tensor;
  RequireCommunicator("all_gather");
  return communicator_->AllGather(tensor, dim);
}

TensorPtr TensorParallel::ReduceScatter(const TensorPtr& tensor, int dim) const {
  CheckDim("reduce_scatter", tensor, dim);
  if (tp_size() == 1) return tensor;
  RequireCommunicator("reduce_scatter");
  return communicator_->ReduceScatter(tensor, dim);
}

TensorPtr TensorParallel::Broadcast(const TensorPtr& tensor, int src) const {
  CheckTensor("broadcast", tensor);
  if (src < 0 || src >= tp_size())
    throw std::invalid_argument("TensorParallel.broadcast: src must be an int in [0, " + std::to_string(tp_size() - 1) +
                                "], got " + std::to_string(src));
  if (tp_size() == 1) return tensor;
  RequireCommunicator("broadcast");
  return communicator_->Broadcast(tensor, src);
}

namespace distributed {
namespace {

const TensorParallel*& CurrentSlot() {
  thread_local const TensorParallel* slot = nullptr;
  return slot;
}

}  // namespace

const TensorParallel* SetCurrentTensorParallel(const TensorParallel* tp) {
  const TensorParallel* previous = CurrentSlot();
  CurrentSlot() = tp;
  return previous;
}

const TensorParallel* CurrentTensorParallel() { return CurrentSlot(); }

int CurrentTpRank() {
  const TensorParallel* tp = CurrentSlot();
  return tp != nullptr ? tp->rank() : 0;
}

int CurrentTpWorldSize() {
  const TensorParallel* tp = CurrentSlot();
  return tp != nullptr ? tp->tp_size() : 1;
}

}  // namespace distributed
}  // namespace vllm
