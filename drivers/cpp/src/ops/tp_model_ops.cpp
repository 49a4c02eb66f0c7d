// The TP-W2 whole-model operation of BACKEND-DISTRIBUTED-TP (tpw2 contract; issue 30 item 3):
//   tp-model-greedy {config: {layers, hidden, num_heads, num_kv_heads, head_dim, ffn, vocab, tie_word_embeddings,
//                    rms_norm_eps, rope_theta, max_position}, weights: {HF name -> float32 tensor}, prompt int64 [n],
//                    steps, tp}
//     -> {tokens: int64 [steps], logits: float32 [steps, vocab]} as rank 0 sees them (vllm/model_executor/models/
//        qwen3.h Qwen3GreedyDecode on tp rank threads).
// Inputs are checked before any rank runs: each a clear invalid-argument naming the field, the weight or the numbers.
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

const char* const kConfigNames[] = {"layers", "hidden",   "num_heads", "num_kv_heads", "head_dim", "ffn", "vocab",
                                    "tie_word_embeddings", "rms_norm_eps", "rope_theta", "max_position"};
const char* const kConfigFields =
    "layers, hidden, num_heads, num_kv_heads, head_dim, ffn, vocab, tie_word_embeddings, rms_norm_eps, rope_theta, max_position";

bool is_config_field(const std::string& name) {
  for (const char* field : kConfigNames)
    if (name == field) return true;
  return false;
}

double finite_number(const Value& config, const char* name) {
  const Value& v = gates::tp::member(config, name);
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    throw std::invalid_argument(std::string("config.") + name + " must be a finite number, got " + gates::py_repr(v) + " (" +
                                gates::py_type_name(v) + ")");
  return v.get<double>();
}

me::Qwen3Config parse_config(const Value& config) {
  if (!config.is_object() || config.contains("$map"))
    throw std::invalid_argument(std::string("config must be a mapping of ") + kConfigFields + "; got " + gates::py_repr(config));
  for (auto it = config.begin(); it != config.end(); ++it)
    if (!is_config_field(it.key()))
      throw std::invalid_argument("config has an unknown field " + gates::py_str_repr(it.key()) + "; fields: " + kConfigFields);
  for (const char* name : kConfigNames)
    if (!config.contains(name)) throw std::invalid_argument(std::string("config.") + name + " is missing; fields: " + kConfigFields);
  me::Qwen3Config c;
  const auto count = [&](const char* name) { return gates::tp::positive_int(std::string("config.") + name, config[name]); };
  c.layers = count("layers");
  c.hidden = count("hidden");
  c.num_heads = count("num_heads");
  c.num_kv_heads = count("num_kv_heads");
  c.head_dim = count("head_dim");
  c.ffn = count("ffn");
  c.vocab = count("vocab");
  c.max_position = count("max_position");
  c.tie_word_embeddings = gates::tp::parse_bool(config, "tie_word_embeddings");
  c.rms_norm_eps = finite_number(config, "rms_norm_eps");
  c.rope_theta = finite_number(config, "rope_theta");
  if (c.head_dim % 2 != 0)
    throw std::invalid_argument("config.head_dim=" + std::to_string(c.head_dim) + " must be even (neox RoPE rotates pairs)");
  if (c.rms_norm_eps < 0) throw std::invalid_argument("config.rms_norm_eps=" + gates::py_float_repr(c.rms_norm_eps) + " must be >= 0");
  if (c.rope_theta <= 1) throw std::invalid_argument("config.rope_theta=" + gates::py_float_repr(c.rope_theta) + " must be > 1");
  return c;
}

me::Qwen3Weights parse_weights(const Value& weights, const me::Qwen3Config& config) {
  if (!weights.is_object() || weights.contains("$map") || gates::is_tensor_value(weights))
    throw std::invalid_argument("weights must be a mapping of Hugging Face names to tensors; got " + gates::py_type_name(weights));
  const auto shapes = me::Qwen3WeightShapes(config);
  for (auto it = weights.begin(); it != weights.end(); ++it)
    if (shapes.count(it.key()) == 0)
      throw std::invalid_argument("weights has " + gates::py_str_repr(it.key()) + ", which this config has no place for" +
                                  (it.key() == "lm_head.weight" ? " (tie_word_embeddings is true: lm_head is embed_tokens)" : ""));
  gates::tp::FloatTensors tensors(weights);
  me::Qwen3Weights out;
  for (const auto& [name, shape] : shapes) {
    if (!weights.contains(name)) throw std::invalid_argument("weights is missing " + gates::py_str_repr(name));
    out[name] = tensors.read(name.c_str(), shape, "");
    if (tensors.precision() != me::Precision::kFloat32)
      throw std::invalid_argument("weights['" + name + "'] is bfloat16; the model runs on float32 only on CPU");
  }
  return out;
}

Value tp_model_greedy(const Value& input) {
  const me::Qwen3Config config = parse_config(gates::tp::member(input, "config"));
  const me::Qwen3Weights weights = parse_weights(gates::tp::member(input, "weights"), config);
  const std::vector<std::int64_t> prompt = gates::tp::parse_ids(input, "prompt", config.vocab);
  if (prompt.empty()) throw std::invalid_argument("prompt has shape (0,), expected at least one token");
  const int steps = gates::tp::positive_int("steps", gates::tp::member(input, "steps"));
  const int tp = gates::tp::parse_tp(input);
  const long long positions = static_cast<long long>(prompt.size()) + steps - 1;
  if (positions > config.max_position)
    throw std::invalid_argument("a prompt of " + std::to_string(prompt.size()) + " tokens and steps=" + std::to_string(steps) +
                                " need " + std::to_string(positions) + " positions, more than config.max_position=" +
                                std::to_string(config.max_position));
  const me::GreedyDecode decode = me::Qwen3GreedyDecode(tp, config, weights, prompt, steps);
  gates::Tensor tokens(gates::DType::Int64, {steps});
  for (int i = 0; i < steps; ++i) tokens.set<std::int64_t>(static_cast<std::size_t>(i), decode.tokens[static_cast<std::size_t>(i)]);
  Value out = Value::object();
  out["tokens"] = gates::tensor_value(std::move(tokens));
  out["logits"] = gates::tp::FloatTensors(input).result(decode.logits);
  return out;
}

}  // namespace

GATES_OPERATION("tp-model-greedy", tp_model_greedy);
