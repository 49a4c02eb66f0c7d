// The TP-W2 numeric layer operations of BACKEND-DISTRIBUTED-TP (tpw2 contract; spec/tensor-parallel.md §5), each
// run on tp rank threads (vllm/distributed/thread_world.h) and answered as the list of the ranks' outputs in rank
// order:
//   tp-column-linear   {x [tokens, in], weight [out, in], bias [out] | null, tp, gather_output}
//   tp-row-linear      {x [tokens, in], weight [out, in], bias [out] | null, tp}
//   tp-qkv-linear      {x, q_weight, k_weight, v_weight, q_bias/k_bias/v_bias | null, num_heads, num_kv_heads,
//                       head_dim, tp}  -> [[q, k, v], ...]
//   tp-mlp             {x [tokens, hidden], gate_weight, up_weight [ffn, hidden], down_weight [hidden, ffn], tp}
//   tp-vocab-embedding {ids int64 [tokens], weight [vocab, hidden], tp}
//   tp-lm-head         {hidden_states [tokens, hidden], weight [vocab, hidden], tp}
// Inputs are checked before any rank runs: a wrong shape or dtype, an indivisible geometry, an id outside the
// vocabulary or a tp outside [1, 8] is invalid-argument.
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "driver/operation.h"
#include "ops/tp_input.h"
#include "ops/tp_tensor_input.h"
#include "vllm/distributed/shard_plan.h"
#include "vllm/distributed/thread_world.h"
#include "vllm/model_executor/layers/linear.h"
#include "vllm/model_executor/layers/vocab_parallel_embedding.h"

namespace {

namespace vd = vllm::distributed;
namespace me = vllm::model_executor;
using gates::Value;
using vllm::HostTensor;
using vllm::TensorParallel;
using vllm::TensorPtr;

const HostTensor* or_null(const std::optional<HostTensor>& tensor) { return tensor ? &*tensor : nullptr; }

Value on_ranks(int tp, const gates::tp::FloatTensors& tensors, const std::function<TensorPtr(const TensorParallel&)>& forward) {
  return gates::tp::tensor_list(tensors, vd::RunOnRanks<TensorPtr>(tp, forward));
}

// `size` split tp ways, refused as "<operation>: <name>=<size> is not divisible by tp=<tp>" (TP-4.8).
void check_divisible(const std::string& operation, const char* name, std::int64_t size, int tp) {
  vd::ShardSize(static_cast<int>(size), tp, operation + ": " + name + "=" + std::to_string(size));
}

// x [tokens, in], tp, weight [out, in], bias [out] | null of a linear layer, checked in the Python port's order.
struct LinearInputs {
  gates::tp::FloatTensors tensors;
  HostTensor x;
  int tp;
  HostTensor weight;
  std::optional<HostTensor> bias;
  LinearInputs(const Value& input, const char* operation) : tensors(input, operation) {
    x = tensors.matrix("x");
    tp = gates::tp::parse_tp(input, operation);
    weight = tensors.matrix("weight", x.shape[1]);
    bias = tensors.read_optional("bias", {weight.shape[0]});
  }
};

Value tp_column_linear(const Value& input) {
  const char* const op = "tp-column-linear";
  LinearInputs in(input, op);
  const bool gather = gates::tp::parse_bool(input, "gather_output", op);
  check_divisible(op, "out", in.weight.shape[0], in.tp);
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, in.tensors, [&](const TensorParallel& tp) {
    return me::ColumnParallelForward(tp, in.x, in.weight, or_null(in.bias), gather, precision);
  });
}

Value tp_row_linear(const Value& input) {
  const char* const op = "tp-row-linear";
  LinearInputs in(input, op);
  check_divisible(op, "in", in.x.shape[1], in.tp);
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, in.tensors, [&](const TensorParallel& tp) {
    return me::RowParallelForward(tp, me::SplitLastDim(tp, in.x), in.weight, or_null(in.bias), precision);
  });
}

Value tp_qkv_linear(const Value& input) {
  const std::string op = "tp-qkv-linear";
  gates::tp::FloatTensors tensors(input, op);
  const HostTensor x = tensors.matrix("x");
  me::QkvHeadsGeometry heads;
  heads.num_heads = gates::tp::positive_int(op + ": num_heads", gates::tp::member(input, "num_heads"));
  heads.num_kv_heads = gates::tp::positive_int(op + ": num_kv_heads", gates::tp::member(input, "num_kv_heads"));
  heads.head_dim = gates::tp::positive_int(op + ": head_dim", gates::tp::member(input, "head_dim"));
  const int tp = gates::tp::parse_tp(input, op);
  const std::int64_t q_rows = static_cast<std::int64_t>(heads.num_heads) * heads.head_dim;
  const std::int64_t kv_rows = static_cast<std::int64_t>(heads.num_kv_heads) * heads.head_dim;
  const HostTensor q = tensors.read("q_weight", {q_rows, x.shape[1]});
  const HostTensor k = tensors.read("k_weight", {kv_rows, x.shape[1]});
  const HostTensor v = tensors.read("v_weight", {kv_rows, x.shape[1]});
  const bool q_given = !gates::tp::member(input, "q_bias").is_null();
  const bool k_given = !gates::tp::member(input, "k_bias").is_null();
  const bool v_given = !gates::tp::member(input, "v_bias").is_null();
  if (!(q_given == k_given && k_given == v_given))
    throw std::invalid_argument(op + ": q_bias, k_bias and v_bias come all three or none; got q_bias " +
                                (q_given ? "given" : "null") + ", k_bias " + (k_given ? "given" : "null") + ", v_bias " +
                                (v_given ? "given" : "null"));
  const auto q_bias = tensors.read_optional("q_bias", {q_rows});
  const auto k_bias = tensors.read_optional("k_bias", {kv_rows});
  const auto v_bias = tensors.read_optional("v_bias", {kv_rows});
  check_divisible(op, "num_heads", heads.num_heads, tp);
  vd::QkvHeadLayout(heads.num_heads, heads.num_kv_heads, tp);
  const me::QkvProjections projections{&q, &k, &v, or_null(q_bias), or_null(k_bias), or_null(v_bias)};
  const me::Precision precision = tensors.precision();
  const auto outputs = vd::RunOnRanks<me::QkvOutput>(tp, [&](const TensorParallel& handle) {
    return me::QkvParallelForward(handle, x, projections, heads, precision);
  });
  Value out = Value::array();
  for (const me::QkvOutput& rank : outputs)
    out.push_back(Value::array({tensors.result(*rank.q), tensors.result(*rank.k), tensors.result(*rank.v)}));
  return out;
}

Value tp_mlp(const Value& input) {
  const char* const op = "tp-mlp";
  gates::tp::FloatTensors tensors(input, op);
  const HostTensor x = tensors.matrix("x");
  const int tp = gates::tp::parse_tp(input, op);
  const HostTensor gate = tensors.matrix("gate_weight", x.shape[1]);
  const HostTensor up = tensors.read("up_weight", gate.shape);
  const HostTensor down = tensors.read("down_weight", {x.shape[1], gate.shape[0]});
  check_divisible(op, "ffn", gate.shape[0], tp);
  const me::Precision precision = tensors.precision();
  return on_ranks(tp, tensors, [&](const TensorParallel& handle) {
    return me::ParallelMlpForward(handle, x, gate, up, down, precision);
  });
}

Value tp_vocab_embedding(const Value& input) {
  const char* const op = "tp-vocab-embedding";
  gates::tp::FloatTensors tensors(input, op);
  const int tp = gates::tp::parse_tp(input, op);
  const std::vector<std::int64_t> ids = gates::tp::parse_ids(input, op);
  const HostTensor weight = tensors.matrix("weight");
  vd::VocabLayout(static_cast<int>(weight.shape[0]), tp);
  gates::tp::check_ids_in_vocab(ids, op, weight.shape[0]);
  return on_ranks(tp, tensors, [&](const TensorParallel& handle) { return me::VocabParallelEmbeddingForward(handle, ids, weight); });
}

Value tp_lm_head(const Value& input) {
  const char* const op = "tp-lm-head";
  gates::tp::FloatTensors tensors(input, op);
  const HostTensor hidden = tensors.matrix("hidden_states");
  const int tp = gates::tp::parse_tp(input, op);
  const HostTensor weight = tensors.matrix("weight", hidden.shape[1]);
  vd::VocabLayout(static_cast<int>(weight.shape[0]), tp);
  const me::Precision precision = tensors.precision();
  return on_ranks(tp, tensors, [&](const TensorParallel& handle) {
    return me::ParallelLmHeadForward(handle, hidden, weight, precision);
  });
}

}  // namespace

GATES_OPERATION("tp-column-linear", tp_column_linear);
GATES_OPERATION("tp-row-linear", tp_row_linear);
GATES_OPERATION("tp-qkv-linear", tp_qkv_linear);
GATES_OPERATION("tp-mlp", tp_mlp);
GATES_OPERATION("tp-vocab-embedding", tp_vocab_embedding);
GATES_OPERATION("tp-lm-head", tp_lm_head);
