// The per-rank tensor-parallel handle (BACKEND-DISTRIBUTED-TP, TP-2.1 to TP-2.4).
//
// Behaviour follows the Python port impl/distributed/tensor_parallel.py (GroupCoordinator's singleton bypass in
// upstream vllm/distributed/parallel_state.py: a one-rank group returns its input from every collective). The
// C++ port keeps this class in include/vllm/model_executor/models/tensor_parallel.h as vllm::TensorParallel with
// rank() and tp_size(); the thread-local accessors are in parallel_layout.h, as there.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "vllm/distributed/parallel_layout.h"

namespace vllm {

// A host tensor: enough for the handle's contract (shape checks, identity of the returned tensor).
struct HostTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;

  int dim() const { return static_cast<int>(shape.size()); }
};
using TensorPtr = std::shared_ptr<HostTensor>;

// The collectives of a group with more than one rank (a gloo, NCCL or in-process backend).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual TensorPtr AllReduce(const TensorPtr& tensor) = 0;
  virtual TensorPtr AllGather(const TensorPtr& tensor, int dim) = 0;
  virtual TensorPtr ReduceScatter(const TensorPtr& tensor, int dim) = 0;
  virtual TensorPtr Broadcast(const TensorPtr& tensor, int src) = 0;
};

// One rank's view of its TP group: rank and size, and the group's collectives.
class TensorParallel {
 public:
  TensorParallel();  // the single-GPU handle: the group {0}, no communicator
  explicit TensorParallel(distributed::RankGroup group, Communicator* communicator = nullptr);

  int rank() const { return group_.local_rank; }
  int tp_size() const { return group_.size(); }
  int world_size() const { return tp_size(); }
  const distributed::RankGroup& group() const { return group_; }
  Communicator* communicator() const { return communicator_; }

  // Each returns `tensor` itself in a one-rank group; a larger group needs its communicator (else
  // std::runtime_error "TensorParallel.all_reduce: the TP group has N ranks but no communicator; ...").
  // A bad tensor, dim or src is std::invalid_argument.
  TensorPtr AllReduce(const TensorPtr& tensor) const;
  TensorPtr AllGather(const TensorPtr& tensor, int dim = -1) const;
  TensorPtr ReduceScatter(const TensorPtr& tensor, int dim = -1) const;
  TensorPtr Broadcast(const TensorPtr& tensor, int src = 0) const;

 private:
  void RequireCommunicator(const char* collective) const;

  distributed::RankGroup group_;
  Communicator* communicator_ = nullptr;
};

namespace distributed {

// Makes a handle current for a scope, then restores the one that was current before (Python use_tensor_parallel),
// also when the scope is left by an exception.
class ScopedTensorParallel {
 public:
  explicit ScopedTensorParallel(const TensorParallel* tp) : previous_(SetCurrentTensorParallel(tp)) {}
  ~ScopedTensorParallel() { SetCurrentTensorParallel(previous_); }
  ScopedTensorParallel(const ScopedTensorParallel&) = delete;
  ScopedTensorParallel& operator=(const ScopedTensorParallel&) = delete;

 private:
  const TensorParallel* previous_;
};

}  // namespace distributed
}  // namespace vllm
