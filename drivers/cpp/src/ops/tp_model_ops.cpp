// The TP-W2 whole-model operation of BACKEND-DISTRIBUTED-TP (tpw2 contract; issue 30 item 3):
//   tp-model-greedy {config: {layers, hidden, num_heads, num_kv_heads, head_dim, ffn, vocab, tie_word_embeddings,
//                    rms_norm_eps, rope_theta, max_position, and optionally qkv_bias, o_proj_bias (bools, default
//                    false)}, weights: {HF name -> float32 tensor}, prompt int64 [n], steps, tp}
//     -> {tokens: int64 [steps], logits: float32 [steps, vocab]} as rank 0 sees them (vllm/model_executor/models/
//        qwen3.h Qwen3GreedyDecode on tp rank threads).
// Inputs are checked before any rank runs, in the Python port's order and words (impl/model_executor/models/
// qwen3_weights.py): config, weights (a bias without its config flag is an unknown tensor), prompt and steps, tp in
// [1, 8], then the shard plan (its refusal, before any rank thread starts).
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "driver/operation.h"
#include "driver/pyrepr.h"
#include "ops/tp_input.h"
#include "ops/tp_tensor_input.h"
#include "vllm/model_executor/models/qwen3.h"

namespace {

namespace me = vllm::model_executor;
using gates::Value;

constexpr int kMaxModelTp = 8;
const char* const kConfigIntFields[] = {"layers", "hidden", "num_heads", "num_kv_heads", "head_dim", "ffn", "vocab", "max_position"};
const char* const kConfigFields[] = {"layers", "hidden",  "num_heads", "num_kv_heads", "head_dim", "ffn", "vocab", "max_position",
                               "tie_word_embeddings", "rms_norm_eps", "rope_theta"};
const char* const kConfigOptionalFields[] = {"qkv_bias", "o_proj_bias"};  // bools, false when left out
const char* const kConfigFieldList =
    "layers, hidden, num_heads, num_kv_heads, head_dim, ffn, vocab, max_position, tie_word_embeddings, rms_norm_eps, rope_theta";
const std::string kConfigKnownFieldList = std::string(kConfigFieldList) + ", qkv_bias, o_proj_bias";

bool is_config_field(const std::string& name) {
  for (const char* field : kConfigFields)
    if (name == field) return true;
  for (const char* field : kConfigOptionalFields)
    if (name == field) return true;
  return false;
}

// config.<name> as a bool; `fallback` where an optional field is left out.
bool config_bool(const Value& config, const char* name, bool fallback) {
  if (!config.contains(name)) return fallback;
  const Value& value = config[name];
  if (!value.is_boolean())
    throw std::invalid_argument(std::string("config.") + name + " must be a bool, got " + gates::py_repr(value) + " (" +
                                gates::py_type_name(value) + ")");
  return value.get<bool>();
}

std::string list_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

double finite_number(const std::string& name, const Value& v) {
  if (!v.is_number())
    throw std::invalid_argument(name + " must be a number, got " + gates::py_repr(v) + " (" + gates::py_type_name(v) + ")");
  if (!std::isfinite(v.get<double>())) throw std::invalid_argument(name + " must be finite, got " + gates::py_repr(v));
  return v.get<double>();
}

me::Qwen3Config parse_config(const Value& config) {
  if (!config.is_object() || config.contains("$map") || gates::is_tensor_value(config))
    throw std::invalid_argument(std::string("config must be a mapping of ") + kConfigFieldList + "; got " + gates::py_type_name(config));
  for (auto it = config.begin(); it != config.end(); ++it)
    if (!is_config_field(it.key()))
      throw std::invalid_argument("config has an unknown field " + gates::py_str_repr(it.key()) + "; fields: " + kConfigKnownFieldList);
  for (const char* name : kConfigFields)
    if (!config.contains(name))
      throw std::invalid_argument(std::string("config.") + name + " is missing; fields: " + kConfigKnownFieldList);
  int ints[8];
  for (std::size_t i = 0; i < 8; ++i) ints[i] = gates::tp::positive_int(std::string("config.") + kConfigIntFields[i], config[kConfigIntFields[i]]);
  me::Qwen3Config c;
  c.layers = ints[0], c.hidden = ints[1], c.num_heads = ints[2], c.num_kv_heads = ints[3];
  c.head_dim = ints[4], c.ffn = ints[5], c.vocab = ints[6], c.max_position = ints[7];
  if (c.head_dim % 2 != 0)
    throw std::invalid_argument("config.head_dim=" + std::to_string(c.head_dim) + " must be even (neox RoPE rotates pairs)");
  c.tie_word_embeddings = config_bool(config, "tie_word_embeddings", false);  // required: checked present above
  c.qkv_bias = config_bool(config, "qkv_bias", false);
  c.o_proj_bias = config_bool(config, "o_proj_bias", false);
  c.rms_norm_eps = finite_number("config.rms_norm_eps", config["rms_norm_eps"]);
  if (c.rms_norm_eps < 0) throw std::invalid_argument("config.rms_norm_eps must be >= 0, got " + gates::py_float_repr(c.rms_norm_eps));
  c.rope_theta = finite_number("config.rope_theta", config["rope_theta"]);
  if (c.rope_theta <= 1) throw std::invalid_argument("config.rope_theta must be > 1, got " + gates::py_float_repr(c.rope_theta));
  return c;
}

me::Qwen3Weights parse_weights(const Value& weights, const me::Qwen3Config& config) {
  if (!weights.is_object() || weights.contains("$map") || gates::is_tensor_value(weights))
    throw std::invalid_argument("weights must be a mapping of HF tensor names to tensors, got " + gates::py_type_name(weights));
  const auto shapes = me::Qwen3WeightShapes(config);
  const auto known = [&](const std::string& name) {
    for (const auto& entry : shapes)
      if (entry.first == name) return true;
    return false;
  };
  for (auto it = weights.begin(); it != weights.end(); ++it)
    if (!known(it.key()))
      throw std::invalid_argument("weights has an unknown tensor " + gates::py_str_repr(it.key()) +
                                  (it.key() == "lm_head.weight" ? " (tie_word_embeddings is true: lm_head shares embed_tokens)" : ""));
  for (const auto& [name, shape] : shapes)
    if (!weights.contains(name))
      throw std::invalid_argument("weights is missing " + gates::py_str_repr(name) + " (shape " + list_text(shape) + ")");
  for (const auto& entry : shapes)
    if (!gates::is_tensor_value(weights[entry.first]))
      throw std::invalid_argument("weights[" + gates::py_str_repr(entry.first) + "] must be a tensor, got " +
                                  gates::py_type_name(weights[entry.first]));
  me::Qwen3Weights out;
  for (const auto& [name, shape] : shapes) {
    const gates::Tensor tensor = gates::tensor_of(weights[name]);
    const std::string where = "weights[" + gates::py_str_repr(name) + "]";
    if (tensor.shape() != shape)
      throw std::invalid_argument(where + " has shape " + list_text(tensor.shape()) + ", expected " + list_text(shape));
    if (tensor.dtype() != gates::DType::Float32)
      throw std::invalid_argument(where + " has dtype " + gates::dtype_name(tensor.dtype()) + "; accepted: float32");
    out[name] = gates::tp::host_tensor(tensor);
  }
  return out;
}

std::vector<std::int64_t> parse_prompt(const Value& prompt, const me::Qwen3Config& config) {
  if (!gates::is_tensor_value(prompt)) throw std::invalid_argument("prompt must be a tensor, got " + gates::py_type_name(prompt));
  const gates::Tensor ids = gates::tensor_of(prompt);
  if (ids.dtype() != gates::DType::Int64 || ids.shape().size() != 1 || ids.shape()[0] < 1)
    throw std::invalid_argument(std::string("prompt must be a non-empty int64 tensor [n], got ") + gates::dtype_name(ids.dtype()) +
                                " of shape " + list_text(ids.shape()));
  std::vector<std::int64_t> out(ids.numel());
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = ids.get<std::int64_t>(i);
    if (out[i] < 0 || out[i] >= config.vocab)
      throw std::invalid_argument("prompt[" + std::to_string(i) + "] = " + std::to_string(out[i]) + " is outside [0, vocab=" +
                                  std::to_string(config.vocab) + ")");
  }
  return out;
}

Value tp_model_greedy(const Value& input) {
  const me::Qwen3Config config = parse_config(gates::tp::member(input, "config"));
  const me::Qwen3Weights weights = parse_weights(gates::tp::member(input, "weights"), config);
  const std::vector<std::int64_t> prompt = parse_prompt(gates::tp::member(input, "prompt"), config);
  const int steps = gates::tp::positive_int("steps", gates::tp::member(input, "steps"));
  const long long last = static_cast<long long>(prompt.size()) + steps - 2;
  if (last >= config.max_position)
    throw std::invalid_argument("a prompt of " + std::to_string(prompt.size()) + " tokens and steps=" + std::to_string(steps) +
                                " feed positions up to " + std::to_string(last) + ", beyond config.max_position=" +
                                std::to_string(config.max_position));
  const int tp = gates::tp::positive_int("tp", gates::tp::member(input, "tp"));
  if (tp > kMaxModelTp)
    throw std::invalid_argument("tp=" + std::to_string(tp) + " is more than the " + std::to_string(kMaxModelTp) +
                                " ranks a world here may have");
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
