// The checked inputs of the TP-W2 layer operations (tp_layer_ops.cpp), shared with tp-layer-ranks
// (tp_rank_ops.cpp), which takes the same inputs and refuses them with the same messages (spec/tensor-parallel.md
// TP-5.7): each check in the Python port's order (impl/model_executor/layers/tp_operations.py *_payload), each
// refusal "<operation>: <name> ...". `tp_holder` is the map holding tp: the call's input for a layer operation, the
// outer input for tp-layer-ranks, whose layer inputs are a map of their own.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "driver/operation.h"
#include "ops/tp_tensor_input.h"
#include "vllm/model_executor/layers/linear.h"

namespace gates::tp {

// tp-column-linear {x, weight, bias, gather_output} and tp-row-linear {x, weight, bias}.
struct LinearCall {
  FloatTensors tensors;
  vllm::HostTensor x;
  int tp = 1;
  vllm::HostTensor weight;
  std::optional<vllm::HostTensor> bias;
  bool gather_output = false;  // column only
  LinearCall(const Value& input, const Value& tp_holder, const char* operation);
  const vllm::HostTensor* bias_or_null() const { return bias ? &*bias : nullptr; }
};
LinearCall column_call(const Value& input, const Value& tp_holder);
LinearCall row_call(const Value& input, const Value& tp_holder);

// tp-qkv-linear {x, q_weight, k_weight, v_weight, q_bias, k_bias, v_bias, num_heads, num_kv_heads, head_dim}.
struct QkvCall {
  FloatTensors tensors;
  vllm::HostTensor x;
  vllm::model_executor::QkvHeadsGeometry heads;
  int tp = 1;
  vllm::HostTensor q, k, v;
  std::optional<vllm::HostTensor> q_bias, k_bias, v_bias;
  QkvCall(const Value& input, const Value& tp_holder);
  // Pointers into this call: valid while it lives.
  vllm::model_executor::QkvProjections projections() const;
};

// tp-mlp {x, gate_weight, up_weight, down_weight}.
struct MlpCall {
  FloatTensors tensors;
  vllm::HostTensor x;
  int tp = 1;
  vllm::HostTensor gate, up, down;
  MlpCall(const Value& input, const Value& tp_holder);
};

// tp-vocab-embedding {ids, weight}: ids inside [0, vocab).
struct EmbeddingCall {
  FloatTensors tensors;
  int tp = 1;
  std::vector<std::int64_t> ids;
  vllm::HostTensor weight;
  EmbeddingCall(const Value& input, const Value& tp_holder);
};

// tp-lm-head {hidden_states, weight}.
struct LmHeadCall {
  FloatTensors tensors;
  vllm::HostTensor hidden_states;
  int tp = 1;
  vllm::HostTensor weight;
  LmHeadCall(const Value& input, const Value& tp_holder);
};

}  // namespace gates::tp
