// The TP handle a loaded model carries (TP-2.5), after the Python port's impl/model_executor/loaded_model.py:
// the rank and size it was loaded for (0 and 1 without a handle) and a scope that makes its handle the calling
// rank thread's current one. Only the handle part: the model itself is out of this brick's scope. Its upstream
// home would be vllm/model_executor; it lives here with the handle it wraps.
#pragma once

#include "vllm/distributed/tensor_parallel.h"

namespace vllm {

class LoadedModel {
 public:
  explicit LoadedModel(const TensorParallel* tensor_parallel = nullptr) : tensor_parallel_(tensor_parallel) {}

  const TensorParallel* tensor_parallel() const { return tensor_parallel_; }
  int tp_rank() const { return tensor_parallel_ ? tensor_parallel_->rank() : 0; }
  int tp_world_size() const { return tensor_parallel_ ? tensor_parallel_->tp_size() : 1; }

  // `auto scope = model.Activate();`: this model's handle is current on the calling thread until scope ends.
  distributed::ScopedTensorParallel Activate() const { return distributed::ScopedTensorParallel(tensor_parallel_); }

 private:
  const TensorParallel* tensor_parallel_;
};

}  // namespace vllm
