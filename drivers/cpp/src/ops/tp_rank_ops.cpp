// The TP-W2 per-rank state operation of BACKEND-DISTRIBUTED-TP (spec/tensor-parallel.md TP-5.7), run on tp rank
// threads (vllm/distributed/thread_world.h), the layer's collective included:
//   tp-layer-ranks {layer: column | row | qkv | mlp | embedding | lm_head, inputs: the matching layer operation's
//                   inputs without tp, tp}
//     -> one map a rank, in rank order: {held: {name: {parts: [{source, rows, cols}], padding_rows, tensor}},
//        bias: null | {parts: [{source, rows}], tensor}, partials: {name: tensor}, mask: bool [tokens] | null}
// Ranges are half-open [begin, end) in the unsharded input tensor's coordinates, as the layer's shard (shard_plan.h)
// names them. The inputs are refused as the matching layer operation refuses them (tp_layer_input.h); an unknown
// layer, or an unknown or missing key of `inputs`, is invalid-argument naming it.
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "driver/operation.h"
#include "driver/pyrepr.h"
#include "driver/tensor.h"
#include "ops/tp_input.h"
#include "ops/tp_layer_input.h"
#include "ops/tp_tensor_input.h"
#include "vllm/distributed/thread_world.h"
#include "vllm/model_executor/layers/linear.h"
#include "vllm/model_executor/layers/vocab_parallel_embedding.h"

namespace {
namespace rank_state {

namespace vd = vllm::distributed;
namespace me = vllm::model_executor;
using gates::Value;
using gates::tp::FloatTensors;
using vllm::HostTensor;
using vllm::TensorParallel;

const char* const kOperation = "tp-layer-ranks";

// Each layer and the keys of its inputs: the matching layer operation's, without tp.
struct LayerKeys {
  const char* layer;
  std::vector<const char*> keys;
};
const std::vector<LayerKeys>& layer_keys() {
  static const std::vector<LayerKeys> table = {
      {"column", {"x", "weight", "bias", "gather_output"}},
      {"row", {"x", "weight", "bias"}},
      {"qkv", {"x", "q_weight", "k_weight", "v_weight", "q_bias", "k_bias", "v_bias", "num_heads", "num_kv_heads", "head_dim"}},
      {"mlp", {"x", "gate_weight", "up_weight", "down_weight"}},
      {"embedding", {"ids", "weight"}},
      {"lm_head", {"hidden_states", "weight"}},
  };
  return table;
}

const LayerKeys& parse_layer(const Value& layer) {
  std::string names;
  for (const LayerKeys& entry : layer_keys()) {
    if (layer.is_string() && layer.get<std::string>() == entry.layer) return entry;
    names += std::string(names.empty() ? "" : ", ") + entry.layer;
  }
  throw std::invalid_argument(std::string(kOperation) + ": layer must be one of " + names + ", got " + gates::py_repr(layer));
}

bool is_key(const LayerKeys& layer, const std::string& key) {
  for (const char* known : layer.keys)
    if (key == known) return true;
  return false;
}

// The keys of `inputs` in their order (a key that is not a str as its repr), or nullopt when it is not a map.
std::optional<std::vector<std::pair<std::string, bool>>> keys_of(const Value& inputs) {
  std::vector<std::pair<std::string, bool>> keys;  // (the key, or its repr when not a str; whether a str)
  if (!inputs.is_object()) return std::nullopt;
  if (inputs.size() == 1 && inputs.begin().key().rfind('$', 0) == 0) {  // a tagged value: a tensor, a big int, ...
    if (!inputs.contains("$map")) return std::nullopt;
    for (const Value& pair : inputs["$map"])  // a map with a key that is not a str
      keys.emplace_back(pair[0].is_string() ? pair[0].get<std::string>() : gates::py_repr(pair[0]), pair[0].is_string());
    return keys;
  }
  for (auto it = inputs.begin(); it != inputs.end(); ++it) keys.emplace_back(it.key(), true);
  return keys;
}

// `inputs` as a map of exactly the layer's keys: the first unknown key, else the first missing one, named.
void check_keys(const LayerKeys& layer, const Value& inputs) {
  const std::string where = std::string(kOperation) + ": inputs of layer " + layer.layer;
  const auto keys = keys_of(inputs);
  if (!keys) {
    std::string names;
    for (const char* key : layer.keys) names += std::string(names.empty() ? "" : ", ") + key;
    throw std::invalid_argument(where + " must be a map of " + names + ", got " + gates::py_type_name(inputs));
  }
  for (const auto& [key, is_str] : *keys)
    if (!is_str || !is_key(layer, key))
      throw std::invalid_argument(where + ": unknown key " + (is_str ? gates::py_str_repr(key) : key));
  for (const char* key : layer.keys)
    if (!inputs.contains(key)) throw std::invalid_argument(where + ": missing key " + gates::py_str_repr(key));
}

Value span_value(const vd::Span& span) { return Value::array({span.begin, span.end}); }

// A held weight: its parts (source, rows, cols), its zero padding rows and the tensor.
Value held_value(const FloatTensors& tensors, const me::LoadedWeight& weight) {
  Value parts = Value::array();
  for (const vd::WeightPart& part : weight.shard.parts) {
    Value item = Value::object();
    item["source"] = part.source;
    item["rows"] = span_value(part.rows);
    item["cols"] = span_value(part.cols);
    parts.push_back(std::move(item));
  }
  Value out = Value::object();
  out["parts"] = std::move(parts);
  out["padding_rows"] = weight.shard.padding_rows;
  out["tensor"] = tensors.result(weight.tensor);
  return out;
}

// The bias a rank adds: null, or its parts (source, rows) and the tensor.
Value bias_value(const FloatTensors& tensors, const std::optional<me::LoadedBias>& bias) {
  if (!bias) return Value();
  Value parts = Value::array();
  for (const vd::BiasPart& part : bias->parts) {
    Value item = Value::object();
    item["source"] = part.source;
    item["rows"] = span_value(part.rows);
    parts.push_back(std::move(item));
  }
  Value out = Value::object();
  out["parts"] = std::move(parts);
  out["tensor"] = tensors.result(bias->tensor);
  return out;
}

Value mask_value(const std::vector<bool>& mask) {
  gates::Tensor tensor(gates::DType::Bool, {static_cast<std::int64_t>(mask.size())});
  for (std::size_t i = 0; i < mask.size(); ++i) tensor.set<bool>(i, mask[i]);
  return gates::tensor_value(std::move(tensor));
}

// One rank's state, the four keys in the contract's order.
Value rank_value(Value held, Value bias, Value partials, Value mask = Value()) {
  Value out = Value::object();
  out["held"] = std::move(held);
  out["bias"] = std::move(bias);
  out["partials"] = std::move(partials);
  out["mask"] = std::move(mask);
  return out;
}

Value on_ranks(int tp, const std::function<Value(const TensorParallel&)>& rank) {
  Value out = Value::array();
  for (Value& state : vd::RunOnRanks<Value>(tp, rank)) out.push_back(std::move(state));
  return out;
}

Value column_ranks(const Value& inputs, const Value& input) {
  const gates::tp::LinearCall in = gates::tp::column_call(inputs, input);
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, [&](const TensorParallel& handle) {
    const me::ColumnParallelLinear layer(in.weight, in.bias_or_null(), in.gather_output, handle.rank(), handle.tp_size());
    HostTensor partial = layer.Partial(in.x, precision);
    Value partials = {{"out", in.tensors.result(partial)}};
    layer.Collect(handle, std::move(partial));
    return rank_value({{"weight", held_value(in.tensors, layer.weight())}}, bias_value(in.tensors, layer.bias()),
                      std::move(partials));
  });
}

Value row_ranks(const Value& inputs, const Value& input) {
  const gates::tp::LinearCall in = gates::tp::row_call(inputs, input);
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, [&](const TensorParallel& handle) {
    const me::RowParallelLinear layer(in.weight, in.bias_or_null(), handle.rank(), handle.tp_size());
    HostTensor partial = layer.Partial(layer.SplitInput(in.x), precision);
    Value partials = {{"out", in.tensors.result(partial)}};
    layer.Reduce(handle, std::move(partial), precision);
    return rank_value({{"weight", held_value(in.tensors, layer.weight())}}, bias_value(in.tensors, layer.bias()),
                      std::move(partials));
  });
}

Value qkv_ranks(const Value& inputs, const Value& input) {
  const gates::tp::QkvCall in(inputs, input);
  const me::QkvProjections projections = in.projections();
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, [&](const TensorParallel& handle) {
    const me::QkvParallelLinear layer(projections, in.heads, handle.rank(), handle.tp_size());
    const me::QkvOutput out = layer.Forward(in.x, precision);
    Value partials = {{"q", in.tensors.result(*out.q)}, {"k", in.tensors.result(*out.k)}, {"v", in.tensors.result(*out.v)}};
    return rank_value({{"qkv", held_value(in.tensors, layer.weight())}}, bias_value(in.tensors, layer.bias()),
                      std::move(partials));
  });
}

Value mlp_ranks(const Value& inputs, const Value& input) {
  const gates::tp::MlpCall in(inputs, input);
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, [&](const TensorParallel& handle) {
    const me::ParallelMlp layer(in.gate, in.up, in.down, handle.rank(), handle.tp_size());
    const HostTensor gate_up = layer.GateUp(in.x, precision);
    HostTensor down = layer.down().Partial(layer.Activation(gate_up, precision), precision);
    Value partials = {{"gate_up", in.tensors.result(gate_up)}, {"down", in.tensors.result(down)}};
    layer.down().Reduce(handle, std::move(down), precision);
    Value held = {{"gate_up", held_value(in.tensors, layer.gate_up())}, {"down", held_value(in.tensors, layer.down().weight())}};
    return rank_value(std::move(held), Value(), std::move(partials));
  });
}

Value embedding_ranks(const Value& inputs, const Value& input) {
  const gates::tp::EmbeddingCall in(inputs, input);
  return on_ranks(in.tp, [&](const TensorParallel& handle) {
    const me::VocabParallelEmbedding layer(in.weight, handle.rank(), handle.tp_size());
    Value partials = {{"rows", in.tensors.result(layer.Rows(in.ids))}};
    layer.Forward(handle, in.ids);
    return rank_value({{"weight", held_value(in.tensors, layer.weight())}}, Value(), std::move(partials),
                      mask_value(layer.Mask(in.ids)));
  });
}

Value lm_head_ranks(const Value& inputs, const Value& input) {
  const gates::tp::LmHeadCall in(inputs, input);
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, [&](const TensorParallel& handle) {
    const me::ParallelLmHead layer(in.weight, handle.rank(), handle.tp_size());
    HostTensor logits = layer.Logits(in.hidden_states, precision);
    Value partials = {{"logits", in.tensors.result(logits)}};
    layer.Gather(handle, std::move(logits));
    return rank_value({{"weight", held_value(in.tensors, layer.weight())}}, Value(), std::move(partials));
  });
}

Value tp_layer_ranks(const Value& input) {
  const LayerKeys& layer = parse_layer(gates::tp::member(input, "layer"));
  const Value& inputs = gates::tp::member(input, "inputs");
  check_keys(layer, inputs);
  const std::string name = layer.layer;
  if (name == "column") return column_ranks(inputs, input);
  if (name == "row") return row_ranks(inputs, input);
  if (name == "qkv") return qkv_ranks(inputs, input);
  if (name == "mlp") return mlp_ranks(inputs, input);
  if (name == "embedding") return embedding_ranks(inputs, input);
  return lm_head_ranks(inputs, input);
}

}  // namespace rank_state
}  // namespace

GATES_OPERATION("tp-layer-ranks", rank_state::tp_layer_ranks);
