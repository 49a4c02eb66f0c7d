// The TP-W2 whole-model operation of BACKEND-DISTRIBUTED-TP (tpw2 contract; issue 30 item 3):
//   tp-model-greedy {config: {layers, hidden, num_heads, num_kv_heads, head_dim, ffn, vocab, tie_word_embeddings,
//                    rms_norm_eps, rope_theta, max_position, and optionally qkv_bias, o_proj_bias (bools, default
//                    false)}, weights: {HF name -> float32 tensor}, prompt int64 [n], steps, tp}
//     -> {tokens: int64 [steps], logits: float32 [steps, vocab]} as rank 0 sees them (vllm/model_executor/models/
//        qwen3.h Qwen3GreedyDecode on tp rank threads).
// Inputs are checked before any rank runs, in the Python port's order and words (impl/model_executor/models/
// qwen3_weights.py): config, weights (a bias without its config flag is an unknown tensor), prompt and steps, tp in
// [1, 8], then the shard plan (its refusal, before any rank thread starts).
#include <stdexcept>
#include <string>
#include <vector>

#include "driver/operation.h"
#include "driver/tensor.h"
#include "ops/qwen3_input.h"
#include "ops/tp_input.h"
#include "vllm/model_executor/models/qwen3.h"

namespace {

namespace me = vllm::model_executor;
using gates::Value;

Value tp_model_greedy(const Value& input) {
  const me::Qwen3Config config = gates::qwen3::parse_qwen3_config(gates::tp::member(input, "config"));
  const me::Qwen3Weights weights = gates::qwen3::parse_qwen3_weights(gates::tp::member(input, "weights"), config);
  const std::vector<std::int64_t> prompt = gates::qwen3::parse_token_ids("prompt", gates::tp::member(input, "prompt"), config);
  const int steps = gates::tp::positive_int("steps", gates::tp::member(input, "steps"));
  const long long last = static_cast<long long>(prompt.size()) + steps - 2;
  if (last >= config.max_position)
    throw std::invalid_argument("a prompt of " + std::to_string(prompt.size()) + " tokens and steps=" + std::to_string(steps) +
                                " feed positions up to " + std::to_string(last) + ", beyond config.max_position=" +
                                std::to_string(config.max_position));
  const int tp = gates::qwen3::parse_model_tp(gates::tp::member(input, "tp"));
  const me::GreedyDecode decode = me::Qwen3GreedyDecode(tp, config, weights, prompt, steps);
  gates::Tensor tokens(gates::DType::Int64, {steps});
  for (int i = 0; i < steps; ++i) tokens.set<std::int64_t>(static_cast<std::size_t>(i), decode.tokens[static_cast<std::size_t>(i)]);
  gates::Tensor logits(gates::DType::Float32, decode.logits.shape);
  for (std::size_t i = 0; i < decode.logits.data.size(); ++i) logits.set<float>(i, decode.logits.data[i]);
  Value out = Value::object();
  out["tokens"] = gates::tensor_value(std::move(tokens));
  out["logits"] = gates::tensor_value(std::move(logits));
  return out;
}

}  // namespace

GATES_OPERATION("tp-model-greedy", tp_model_greedy);
