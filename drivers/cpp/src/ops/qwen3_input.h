// The inputs the whole-model operations on the Qwen3-style decoder share (tp-model-greedy, decoder-taps), checked in
// the Python port's words (impl/model_executor/models/qwen3_weights.py): each refusal a std::invalid_argument naming
// the field, the tensor and both shapes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "driver/operation.h"
#include "vllm/model_executor/models/qwen3.h"

namespace gates::qwen3 {

// A shape as Python writes a list: "[8, 64]".
std::string list_text(const std::vector<std::int64_t>& shape);

// The config mapping: layers, hidden, num_heads, num_kv_heads, head_dim, ffn, vocab, max_position,
// tie_word_embeddings, rms_norm_eps, rope_theta, and optionally qkv_bias, o_proj_bias.
vllm::model_executor::Qwen3Config parse_qwen3_config(const Value& config);
// Every checkpoint tensor the config needs, float32 of its shape, and no other.
vllm::model_executor::Qwen3Weights parse_qwen3_weights(const Value& weights, const vllm::model_executor::Qwen3Config& config);
// A non-empty int64 tensor [n] of ids in [0, vocab); `name` is the field refused.
std::vector<std::int64_t> parse_token_ids(const std::string& name, const Value& value,
                                          const vllm::model_executor::Qwen3Config& config);
// tp: an int in [1, 8].
int parse_model_tp(const Value& value);

}  // namespace gates::qwen3
