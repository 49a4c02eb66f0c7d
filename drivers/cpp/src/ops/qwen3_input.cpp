// The inputs of the whole-model operations on the Qwen3-style decoder (tp-model-greedy, decoder-taps); see
// ops/qwen3_input.h.
#include "ops/qwen3_input.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "driver/pyrepr.h"
#include "driver/tensor.h"
#include "ops/tp_input.h"
#include "ops/tp_tensor_input.h"

namespace gates::qwen3 {
namespace {

namespace me = vllm::model_executor;

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


double finite_number(const std::string& name, const Value& v) {
  if (!v.is_number())
    throw std::invalid_argument(name + " must be a number, got " + gates::py_repr(v) + " (" + gates::py_type_name(v) + ")");
  if (!std::isfinite(v.get<double>())) throw std::invalid_argument(name + " must be finite, got " + gates::py_repr(v));
  return v.get<double>();
}

}  // namespace

std::string list_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

me::Qwen3Config parse_qwen3_config(const Value& config) {
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

me::Qwen3Weights parse_qwen3_weights(const Value& weights, const me::Qwen3Config& config) {
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

std::vector<std::int64_t> parse_token_ids(const std::string& name, const Value& value, const me::Qwen3Config& config) {
  if (!gates::is_tensor_value(value)) throw std::invalid_argument(name + " must be a tensor, got " + gates::py_type_name(value));
  const gates::Tensor ids = gates::tensor_of(value);
  if (ids.dtype() != gates::DType::Int64 || ids.shape().size() != 1 || ids.shape()[0] < 1)
    throw std::invalid_argument(name + " must be a non-empty int64 tensor [n], got " + gates::dtype_name(ids.dtype()) +
                                " of shape " + list_text(ids.shape()));
  std::vector<std::int64_t> out(ids.numel());
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = ids.get<std::int64_t>(i);
    if (out[i] < 0 || out[i] >= config.vocab)
      throw std::invalid_argument(name + "[" + std::to_string(i) + "] = " + std::to_string(out[i]) + " is outside [0, vocab=" +
                                  std::to_string(config.vocab) + ")");
  }
  return out;
}

int parse_model_tp(const Value& value) {
  const int tp = gates::tp::positive_int("tp", value);
  if (tp > kMaxModelTp)
    throw std::invalid_argument("tp=" + std::to_string(tp) + " is more than the " + std::to_string(kMaxModelTp) +
                                " ranks a world here may have");
  return tp;
}

}  // namespace gates::qwen3
