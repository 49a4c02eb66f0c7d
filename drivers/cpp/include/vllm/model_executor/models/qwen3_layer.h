// One Qwen3 decoder layer as the decoder (qwen3.cpp) runs it: its checkpoint tensors and the steps it computes with.
// The decoder builds both for each layer, the port's own; a planted build (GATES_PLANT_LAYER_DEFECTS, tests only:
// planted_defects.h) changes one of them in one layer, as the Python port's known-bads patch the layer code.
#pragma once

#include "vllm/distributed/tensor_parallel.h"
#include "vllm/model_executor/layers/linear.h"
#include "vllm/model_executor/layers/precision.h"

namespace vllm::model_executor {

// The unsharded checkpoint tensors of one layer (a bias null where the config gives none).
struct Qwen3LayerWeights {
  const HostTensor* input_norm = nullptr;
  QkvProjections qkv;
  const HostTensor* q_norm = nullptr;
  const HostTensor* k_norm = nullptr;
  const HostTensor* o_proj = nullptr;
  const HostTensor* o_bias = nullptr;
  const HostTensor* post_norm = nullptr;
  const HostTensor* gate = nullptr;
  const HostTensor* up = nullptr;
  const HostTensor* down = nullptr;
};

// The steps of one layer: the RoPE base, every RMSNorm of the layer (x's elements in groups of weight's width),
// o_proj on the attention heads' output (all-reduced, [T, hidden]) and the MLP (all-reduced, [T, hidden]), each
// showing its rank's partial to `observe` (if any) before the all-reduce (the partial the rank computed, whatever the
// reduce then does with it).
struct Qwen3LayerSteps {
  double rope_theta = 0.0;
  HostTensor (*rms_norm)(const HostTensor& x, const HostTensor& weight, double eps, Precision precision) = nullptr;
  TensorPtr (*o_proj)(const TensorParallel& tp, const HostTensor& attention, const Qwen3LayerWeights& weights,
                      Precision precision, const PartialObserver& observe) = nullptr;
  TensorPtr (*mlp)(const TensorParallel& tp, const HostTensor& x, const Qwen3LayerWeights& weights, Precision precision,
                   const PartialObserver& observe) = nullptr;
};

}  // namespace vllm::model_executor
