// The BACKEND-DISTRIBUTED-TP TP-W2 operation (gate.yaml: shard-plan), answering what the Python binding returns:
//   tp-shard-plan {geometry: {hidden, num_heads, num_kv_heads, head_dim, ffn, vocab, tie_word_embeddings?}, tp}
//                 -> shard_plan(ModelGeometry.from_mapping(geometry), tp).as_plain()   (impl/distributed/shard_plan.py)
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
  for (std::size_t i = 0; i < 6; ++i) *slots[i] = gates::tp::positive_int(std::string("geometry.") + kIntFields[i], fields[kIntFields[i]]);
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
  const vd::ShardPlan plan = vd::BuildShardPlan(geometry, gates::tp::positive_int("tp", gates::tp::member(input, "tp")));
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
