// The decoder-taps operation of MODEL-TAPS (gates/rows/model_taps/operations.yaml; spec/model-taps.md):
//   decoder-taps {config, weights (as tp-model-greedy's), ids int64 [T], tp, dtype ("float32" | "bfloat16" |
//                 "float16", default float32), feed (optional: feed point -> float tensor [T, hidden]),
//                 rank_partials (optional bool, default false)}
//     -> {tap name -> tensor} in forward order as rank 0 holds them (vllm/model_executor/models/qwen3.h
//        Qwen3DecoderTaps on tp rank threads): every tap in dtype, logits float32; with rank_partials, each rank's
//        partial before each all-reduce too (MT-1.6).
// Inputs are checked before any rank runs, in the Python port's order and words (impl/model_executor/models/
// qwen3_taps.py, taps_inputs.py): config, weights, ids (and T <= max_position), tp and the shard plan, dtype, feed,
// rank_partials.
#include <regex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "driver/operation.h"
#include "driver/pyrepr.h"
#include "driver/tensor.h"
#include "ops/qwen3_input.h"
#include "ops/tp_input.h"
#include "vllm/distributed/shard_plan.h"
#include "vllm/model_executor/models/qwen3.h"
#ifdef GATES_PLANT_LAYER_DEFECTS
#include "vllm/model_executor/models/planted_defects.h"
#endif

namespace {

namespace me = vllm::model_executor;
using gates::Value;

struct ComputeDtype {
  me::Precision precision;
  gates::DType wire;
};

const std::pair<const char*, ComputeDtype> kDtypes[] = {
    {"float32", {me::Precision::kFloat32, gates::DType::Float32}},
    {"bfloat16", {me::Precision::kBFloat16, gates::DType::BFloat16}},
    {"float16", {me::Precision::kFloat16, gates::DType::Float16}}};

// The compute dtype named `value` (MT-3.2); the value quoted and the three names listed otherwise.
ComputeDtype parse_dtype(const Value& value) {
  for (const auto& [name, dtype] : kDtypes)
    if (value.is_string() && value.get<std::string>() == name) return dtype;
  throw std::invalid_argument("dtype must be one of float32, bfloat16, float16, got " + gates::py_repr(value));
}

// Whether the ranks' partials are tapped (MT-1.6); the value and its type quoted unless a bool.
bool parse_rank_partials(const Value& value) {
  if (!value.is_boolean())
    throw std::invalid_argument("rank_partials must be a bool, got " + gates::py_repr(value) + " (" + gates::py_type_name(value) + ")");
  return value.get<bool>();
}

bool is_float_tensor_dtype(gates::DType dtype) {
  return dtype == gates::DType::Float16 || dtype == gates::DType::BFloat16 || dtype == gates::DType::Float32 ||
         dtype == gates::DType::Float64;
}

// Whether `name` is a feed point of a model of `layers` layers: layers.{i}.attn.in, layers.{i}.mlp.in, norm.in.
bool is_feed_point(const std::string& name, int layers) {
  static const std::regex layer_feed(R"(layers\.(0|[1-9][0-9]{0,8})\.(attn|mlp)\.in)");
  std::smatch match;
  return name == "norm.in" || (std::regex_match(name, match, layer_feed) && std::stoi(match[1].str()) < layers);
}

// One fed array, checked (MT-3.3) and stored in the compute dtype as torch casts it (through float32).
vllm::HostTensor fed_array(const std::string& where, const Value& value, std::int64_t tokens, std::int64_t hidden,
                           me::Precision precision) {
  if (!gates::is_tensor_value(value)) throw std::invalid_argument(where + " must be a tensor, got " + gates::py_type_name(value));
  const gates::Tensor tensor = gates::tensor_of(value);
  if (!is_float_tensor_dtype(tensor.dtype()))
    throw std::invalid_argument(where + " has dtype " + gates::dtype_name(tensor.dtype()) + "; a float dtype is needed");
  const std::vector<std::int64_t> expected = {tokens, hidden};
  if (tensor.shape() != expected)
    throw std::invalid_argument(where + " has shape " + gates::qwen3::list_text(tensor.shape()) + ", expected " + gates::qwen3::list_text(expected) +
                                " ([T, hidden])");
  vllm::HostTensor out{tensor.shape(), std::vector<float>(tensor.numel())};
  for (std::size_t i = 0; i < out.data.size(); ++i) out.data[i] = me::Rounded(precision, tensor.get_float32(i));
  return out;
}

// The feed (absent or null: nothing fed): each key a feed point of the model, each array [T, hidden] of a float dtype
// (MT-2.1, MT-3.3), refused in the Python port's order: the key, then the array.
me::Feed parse_feed(const Value& feed, const me::Qwen3Config& config, std::int64_t tokens, me::Precision precision) {
  if (feed.is_null()) return {};
  std::vector<std::pair<Value, const Value*>> items;
  if (feed.is_object() && feed.contains("$map") && feed.size() == 1 && feed["$map"].is_array()) {
    for (const Value& item : feed["$map"]) items.emplace_back(item.at(0), &item.at(1));
  } else if (feed.is_object() && !gates::is_tensor_value(feed)) {
    for (auto it = feed.begin(); it != feed.end(); ++it) items.emplace_back(Value(it.key()), &it.value());
  } else {
    throw std::invalid_argument("feed must be a mapping of feed points to [T, hidden] tensors, got " + gates::py_type_name(feed));
  }
  me::Feed out;
  for (const auto& [key, value] : items) {
    const std::string where = "feed[" + gates::py_repr(key) + "]";
    if (!key.is_string() || !is_feed_point(key.get<std::string>(), config.layers))
      throw std::invalid_argument(where + " is not a feed point of this " + std::to_string(config.layers) +
                                  "-layer model; feed points: layers.{i}.attn.in, layers.{i}.mlp.in, norm.in with i in [0, " +
                                  std::to_string(config.layers) + ")");
    out[key.get<std::string>()] = fed_array(where, *value, tokens, config.hidden, precision);
  }
  return out;
}

Value tap_value(const vllm::HostTensor& tap, gates::DType dtype) {
  gates::Tensor out(dtype, tap.shape);
  for (std::size_t i = 0; i < tap.data.size(); ++i) out.set_float32(i, tap.data[i]);
  return gates::tensor_value(std::move(out));
}

Value decoder_taps(const Value& input) {
  const me::Qwen3Config config = gates::qwen3::parse_qwen3_config(gates::tp::member(input, "config"));
  const me::Qwen3Weights weights = gates::qwen3::parse_qwen3_weights(gates::tp::member(input, "weights"), config);
  const std::vector<std::int64_t> ids = gates::qwen3::parse_token_ids("ids", gates::tp::member(input, "ids"), config);
  if (static_cast<long long>(ids.size()) > config.max_position)
    throw std::invalid_argument("ids holds " + std::to_string(ids.size()) + " tokens, beyond config.max_position=" +
                                std::to_string(config.max_position));
  const int tp = gates::qwen3::parse_model_tp(gates::tp::member_or(input, "tp", 1));
  vllm::distributed::BuildShardPlan(me::Qwen3Geometry(config), tp);  // its refusal (TP-4.8)
  const ComputeDtype dtype = parse_dtype(gates::tp::member_or(input, "dtype", "float32"));
  const me::Feed feed = parse_feed(gates::tp::member_or(input, "feed", nullptr), config,
                                   static_cast<std::int64_t>(ids.size()), dtype.precision);
  const bool rank_partials = parse_rank_partials(gates::tp::member_or(input, "rank_partials", false));
#ifdef GATES_PLANT_LAYER_DEFECTS
  me::planted::Choose(gates::setting("planted-defect", ""));
#endif
  Value out = Value::object();
  for (const auto& [name, tap] : me::Qwen3DecoderTaps(tp, config, weights, ids, feed, dtype.precision, rank_partials))
    out[name] = tap_value(tap, name == "logits" ? gates::DType::Float32 : dtype.wire);
  return out;
}

}  // namespace

GATES_OPERATION("decoder-taps", decoder_taps);
