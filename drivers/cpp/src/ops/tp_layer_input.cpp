#include "ops/tp_layer_input.h"

#include <stdexcept>
#include <string>

#include "ops/tp_input.h"
#include "vllm/distributed/shard_plan.h"

namespace gates::tp {
namespace {

namespace vd = vllm::distributed;

// `size` split tp ways, refused as "<operation>: <name>=<size> is not divisible by tp=<tp>" (TP-4.8).
void check_split(const std::string& operation, const char* name, std::int64_t size, int tp) {
  vd::ShardSize(static_cast<int>(size), tp, operation + ": " + name + "=" + std::to_string(size));
}

}  // namespace

LinearCall::LinearCall(const Value& input, const Value& tp_holder, const char* operation) : tensors(input, operation) {
  x = tensors.matrix("x");
  tp = parse_tp(tp_holder, operation);
  weight = tensors.matrix("weight", x.shape[1]);
  bias = tensors.read_optional("bias", {weight.shape[0]});
}

LinearCall column_call(const Value& input, const Value& tp_holder) {
  const char* const op = "tp-column-linear";
  LinearCall call(input, tp_holder, op);
  call.gather_output = parse_bool(input, "gather_output", op);
  check_split(op, "out", call.weight.shape[0], call.tp);
  return call;
}

LinearCall row_call(const Value& input, const Value& tp_holder) {
  const char* const op = "tp-row-linear";
  LinearCall call(input, tp_holder, op);
  check_split(op, "in", call.x.shape[1], call.tp);
  return call;
}

QkvCall::QkvCall(const Value& input, const Value& tp_holder) : tensors(input, "tp-qkv-linear") {
  const std::string op = "tp-qkv-linear";
  x = tensors.matrix("x");
  heads.num_heads = positive_int(op + ": num_heads", member(input, "num_heads"));
  heads.num_kv_heads = positive_int(op + ": num_kv_heads", member(input, "num_kv_heads"));
  heads.head_dim = positive_int(op + ": head_dim", member(input, "head_dim"));
  tp = parse_tp(tp_holder, op);
  const std::int64_t q_rows = static_cast<std::int64_t>(heads.num_heads) * heads.head_dim;
  const std::int64_t kv_rows = static_cast<std::int64_t>(heads.num_kv_heads) * heads.head_dim;
  q = tensors.read("q_weight", {q_rows, x.shape[1]});
  k = tensors.read("k_weight", {kv_rows, x.shape[1]});
  v = tensors.read("v_weight", {kv_rows, x.shape[1]});
  const bool q_given = !member(input, "q_bias").is_null();
  const bool k_given = !member(input, "k_bias").is_null();
  const bool v_given = !member(input, "v_bias").is_null();
  if (!(q_given == k_given && k_given == v_given))
    throw std::invalid_argument(op + ": q_bias, k_bias and v_bias come all three or none; got q_bias " +
                                (q_given ? "given" : "null") + ", k_bias " + (k_given ? "given" : "null") + ", v_bias " +
                                (v_given ? "given" : "null"));
  q_bias = tensors.read_optional("q_bias", {q_rows});
  k_bias = tensors.read_optional("k_bias", {kv_rows});
  v_bias = tensors.read_optional("v_bias", {kv_rows});
  check_split(op, "num_heads", heads.num_heads, tp);
  vd::QkvHeadLayout(heads.num_heads, heads.num_kv_heads, tp);
}

vllm::model_executor::QkvProjections QkvCall::projections() const {
  const auto or_null = [](const std::optional<vllm::HostTensor>& t) { return t ? &*t : nullptr; };
  return {&q, &k, &v, or_null(q_bias), or_null(k_bias), or_null(v_bias)};
}

MlpCall::MlpCall(const Value& input, const Value& tp_holder) : tensors(input, "tp-mlp") {
  const char* const op = "tp-mlp";
  x = tensors.matrix("x");
  tp = parse_tp(tp_holder, op);
  gate = tensors.matrix("gate_weight", x.shape[1]);
  up = tensors.read("up_weight", gate.shape);
  down = tensors.read("down_weight", {x.shape[1], gate.shape[0]});
  check_split(op, "ffn", gate.shape[0], tp);
}

EmbeddingCall::EmbeddingCall(const Value& input, const Value& tp_holder) : tensors(input, "tp-vocab-embedding") {
  const char* const op = "tp-vocab-embedding";
  tp = parse_tp(tp_holder, op);
  ids = parse_ids(input, op);
  weight = tensors.matrix("weight");
  vd::VocabLayout(static_cast<int>(weight.shape[0]), tp);
  check_ids_in_vocab(ids, op, weight.shape[0]);
}

LmHeadCall::LmHeadCall(const Value& input, const Value& tp_holder) : tensors(input, "tp-lm-head") {
  const char* const op = "tp-lm-head";
  hidden_states = tensors.matrix("hidden_states");
  tp = parse_tp(tp_holder, op);
  weight = tensors.matrix("weight", hidden_states.shape[1]);
  vd::VocabLayout(static_cast<int>(weight.shape[0]), tp);
}

}  // namespace gates::tp
