// The BACKEND-DISTRIBUTED-TP TP-W2 operation (gate.yaml: shard-plan), answering what the Python binding returns:
//   tp-shard-plan {geometry: {hidden, num_heads, num_kv_heads, head_dim, ffn, vocab, tie_word_embeddings?}, tp}
//                 -> shard_plan(ModelGeometry.from_mapping(geometry), tp).as_plain()   (impl/distributed/shard_plan.py)
#include <climits>
#include <stdexcept>
#include <string>

#include "driver/operation.h"
#include "driver/pyrepr.h"
#include "ops/tp_input.h"
#include "vllm/distributed/shard_plan.h"

namespace {

namespace vd = vllm::distributed;
using gates::Value;

const char* const kIntFields[] = {"hidden", "num_heads", "num_kv_heads", "head_dim", "ffn", "vocab"};
const char* const kFieldList = "hidden, num_heads, num_kv_heads, head_dim, ffn, vocab, tie_word_embeddings";

// An int >= 1 that fits an int32, else the Python port's TypeError/ValueError text naming `name` (TP-4.8).
int PositiveInt(const std::string& name, const Value& v) {
  if (!gates::is_py_int(v))
    throw std::invalid_argument(name + " must be an int >= 1, got " + gates::py_repr(v) + " (" + gates::py_type_name(v) + ")");
  const std::string over = name + "=" + gates::py_repr(v) + " is over " + std::to_string(INT_MAX) + ", more than this port counts";
  if (v.is_object()) {  // {"$int": text}: outside int64/uint64
    if (v["$int"].get<std::string>().rfind('-', 0) == 0)
      throw std::invalid_argument(name + " must be an int >= 1, got " + gates::py_repr(v));
    throw std::invalid_argument(over);
  }
  if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(INT_MAX))
    throw std::invalid_argument(over);
  const long long value = v.is_number_unsigned() ? static_cast<long long>(v.get<unsigned long long>()) : v.get<long long>();
  if (value < 1) throw std::invalid_argument(name + " must be an int >= 1, got " + gates::py_repr(v));
  if (value > INT_MAX) throw std::invalid_argument(over);
  return static_cast<int>(value);
}

vd::ModelGeometry ParseGeometry(const Value& fields) {
  if (!fields.is_object() || fields.contains("$map"))
    throw std::invalid_argument(std::string("geometry must be a mapping of ") + kFieldList + "; got " + gates::py_repr(fields) +
                                " (" + gates::py_type_name(fields) + ")");
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    bool known = it.key() == "tie_word_embeddings";
    for (const char* name : kIntFields) known = known || it.key() == name;
    if (!known) throw std::invalid_argument("geometry has an unknown field " + gates::py_str_repr(it.key()) + "; fields: " + kFieldList);
  }
  for (const char* name : kIntFields)
    if (!fields.contains(name)) throw std::invalid_argument(std::string("geometry.") + name + " is missing; fields: " + kFieldList);
  vd::ModelGeometry g;
  int* slots[] = {&g.hidden, &g.num_heads, &g.num_kv_heads, &g.head_dim, &g.ffn, &g.vocab};
  for (std::size_t i = 0; i < 6; ++i) *slots[i] = PositiveInt(std::string("geometry.") + kIntFields[i], fields[kIntFields[i]]);
  const Value tied = gates::tp::member_or(fields, "tie_word_embeddings", false);
  if (!tied.is_boolean())
    throw std::invalid_argument("geometry.tie_word_embeddings must be a bool, got " + gates::py_repr(tied) + " (" +
                                gates::py_type_name(tied) + ")");
  g.tie_word_embeddings = tied.get<bool>();
  return g;
}

Value SpanValue(const vd::Span& span) { return Value::array({span.begin, span.end}); }

Value tp_shard_plan(const Value& input) {
  const vd::ModelGeometry geometry = ParseGeometry(gates::tp::member(input, "geometry"));
  const vd::ShardPlan plan = vd::BuildShardPlan(geometry, PositiveInt("tp", gates::tp::member(input, "tp")));
  Value out = Value::object();
  out["tp"] = plan.tp;
  out["padded_vocab"] = plan.padded_vocab;
  out["heads_per_rank"] = plan.heads_per_rank;
  out["kv_heads_per_rank"] = plan.kv_heads_per_rank;
  out["kv_replicas"] = plan.kv_replicas;
  Value ranks = Value::array();
  for (const vd::RankShards& rank : plan.ranks) {
    Value entry = Value::object();
    entry["rank"] = rank.rank;
    entry["kv_shard"] = rank.kv_shard;
    entry["vocab_range"] = SpanValue(rank.vocab_range);
    entry["vocab_loaded"] = SpanValue(rank.vocab_loaded);
    Value weights = Value::object();
    for (const vd::WeightShard& weight : rank.weights) {
      Value parts = Value::array();
      for (const vd::WeightPart& part : weight.parts) {
        Value item = Value::object();
        item["source"] = part.source;
        item["rows"] = SpanValue(part.rows);
        item["cols"] = SpanValue(part.cols);
        parts.push_back(std::move(item));
      }
      Value shard = Value::object();
      shard["shape"] = Value::array({weight.out, weight.in});
      shard["parts"] = std::move(parts);
      shard["bias"] = weight.bias ? SpanValue(*weight.bias) : Value();
      shard["padding_rows"] = weight.padding_rows;
      weights[weight.name] = std::move(shard);
    }
    entry["weights"] = std::move(weights);
    ranks.push_back(std::move(entry));
  }
  out["ranks"] = std::move(ranks);
  return out;
}

}  // namespace

GATES_OPERATION("tp-shard-plan", tp_shard_plan);
