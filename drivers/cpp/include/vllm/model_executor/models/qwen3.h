// A Qwen3-style decoder run tensor-parallel on rank threads, greedy (issue 30 item 3 and 5; tpw2 contract
// `tp-model-greedy`; vLLM 0.33.0 vllm/model_executor/models/qwen3.py and qwen2.py): embed -> per layer (RMSNorm,
// QKV (q/k/v biases with qkv_bias, as Qwen2), per-head q_norm/k_norm, neox RoPE, causal GQA attention scaled by
// head_dim^-0.5, o_proj (its bias with o_proj_bias, as Llama's attention_bias), residual, RMSNorm, gate_up/silu/down,
// residual) -> final RMSNorm -> lm_head (tied: embed_tokens' weight) -> argmax, lowest id on a tie. Float32; every
// step recomputes the whole sequence (no KV cache). The decoder composes the tensor-parallel layers of
// layers/linear.h and layers/vocab_parallel_embedding.h, which take their ranges from the shard plan
// (shard_plan.h, TP-4.x): it holds no sharding of its own.
//
// The same layer code runs the decoder-taps forward (spec/model-taps.md): one forward over the ids in float32,
// bfloat16 or float16, a TapRecorder (taps.h) getting each named intermediate and replacing the residual stream at
// the fed feed points; the greedy decode records and feeds nothing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "vllm/distributed/shard_plan.h"
#include "vllm/distributed/tensor_parallel.h"
#include "vllm/model_executor/layers/precision.h"
#include "vllm/model_executor/models/taps.h"

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
  bool qkv_bias = false;     // q_proj/k_proj/v_proj carry a bias (sharded with their weight's rows)
  bool o_proj_bias = false;  // o_proj carries a bias (added by rank 0 before the all-reduce, TP-4.2)
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  int max_position = 0;
};

// Checkpoint tensors by Hugging Face name (model.embed_tokens.weight, model.layers.{i}.self_attn.q_proj.weight, ...).
using Qwen3Weights = std::map<std::string, HostTensor>;

// The sizes the shard plan cuts the config's model by.
distributed::ModelGeometry Qwen3Geometry(const Qwen3Config& config);

// Every checkpoint name the config needs, with its shape, in checkpoint order (embed_tokens, the layers, each bias
// the config asks for after its weight, norm, then lm_head.weight only when the embeddings are untied).
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
// naming the rank and the step. A geometry the shard plan refuses at tp is refused with the plan's message
// (std::invalid_argument, TP-4.8) before any rank thread starts.
GreedyDecode Qwen3GreedyDecode(int tp, const Qwen3Config& config, const Qwen3Weights& weights,
                               const std::vector<std::int64_t>& prompt, int steps);

// Every weight as a tensor of `precision` stores it (float32: as they are): what a forward in that dtype runs on.
Qwen3Weights Qwen3WeightsIn(const Qwen3Weights& weights, Precision precision);

// One rank's taps of one forward over `ids` (positions 0..T-1) in `precision`, its weights already in it
// (Qwen3WeightsIn), the residual stream replaced by `feed`'s arrays at its feed points (MT-1.x, MT-2.x): embed, per
// layer attn.in, attn.k, attn.v, attn.out, mlp.in, mlp.out, out, then norm.in, norm.out and logits (float32 values of
// the dtype's); with `rank_partials`, every rank's partial before each of a layer's all-reduces just before the
// reduced tap, attn.out.rank{r} and mlp.out.rank{r} in rank order (MT-1.6). The caller checked config, weights, ids
// (T <= max_position) and the feed.
Taps Qwen3TapsOnRank(const TensorParallel& tp, const Qwen3Config& config, const Qwen3Weights& weights,
                     const std::vector<std::int64_t>& ids, const Feed& feed, Precision precision,
                     bool rank_partials = false);

// The taps on tp rank threads, as rank 0 holds them; every rank must report the same names and bits, else
// std::runtime_error naming the rank and the tap. The shard plan's refusal comes before any rank thread starts.
Taps Qwen3DecoderTaps(int tp, const Qwen3Config& config, const Qwen3Weights& weights, const std::vector<std::int64_t>& ids,
                      const Feed& feed, Precision precision, bool rank_partials = false);

}  // namespace vllm::model_executor
