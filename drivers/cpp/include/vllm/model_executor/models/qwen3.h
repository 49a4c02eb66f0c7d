// A Qwen3-style decoder run tensor-parallel on rank threads, greedy (issue 30 item 3 and 5; tpw2 contract
// `tp-model-greedy`; vLLM 0.33.0 vllm/model_executor/models/qwen3.py and qwen2.py): embed -> per layer (RMSNorm,
// QKV, per-head q_norm/k_norm, neox RoPE, causal GQA attention scaled by head_dim^-0.5, o_proj, residual, RMSNorm,
// gate_up/silu/down, residual) -> final RMSNorm -> lm_head (tied: embed_tokens' weight) -> argmax, lowest id on a
// tie. Float32; every step recomputes the whole sequence (no KV cache).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "vllm/distributed/tensor_parallel.h"

namespace vllm::model_executor {

struct Qwen3Config {
  int layers = 0;
  int hidden = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int ffn = 0;
  int vocab = 0;
  bool tie_word_embeddings = false;
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  int max_position = 0;
};

// Checkpoint tensors by Hugging Face name (model.embed_tokens.weight, model.layers.{i}.self_attn.q_proj.weight, ...).
using Qwen3Weights = std::map<std::string, HostTensor>;

// Every checkpoint name the config needs, with its shape, in checkpoint order (embed_tokens, the layers, norm,
// then lm_head.weight only when the embeddings are untied).
std::vector<std::pair<std::string, std::vector<std::int64_t>>> Qwen3WeightShapes(const Qwen3Config& config);

struct GreedyDecode {
  std::vector<std::int64_t> tokens;  // [steps]
  HostTensor logits;                 // [steps, vocab]: the last position's logits at each step
};

// One rank's greedy decode of `steps` tokens after `prompt` (the caller checked config, weights, ids and that
// prompt + steps - 1 positions fit max_position).
GreedyDecode Qwen3GreedyOnRank(const TensorParallel& tp, const Qwen3Config& config, const Qwen3Weights& weights,
                               const std::vector<std::int64_t>& prompt, int steps);

// The decode on tp rank threads, as rank 0 sees it; every rank must agree bit for bit, else std::runtime_error
// naming the rank and the step. The shard plan's refusals (std::invalid_argument) come first.
GreedyDecode Qwen3GreedyDecode(int tp, const Qwen3Config& config, const Qwen3Weights& weights,
                               const std::vector<std::int64_t>& prompt, int steps);

}  // namespace vllm::model_executor
