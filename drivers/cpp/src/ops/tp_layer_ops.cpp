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
using gates::tp::kAnyDim;
using vllm::HostTensor;
using vllm::TensorParallel;
using vllm::TensorPtr;

const HostTensor* or_null(const std::optional<HostTensor>& tensor) { return tensor ? &*tensor : nullptr; }

Value on_ranks(int tp, const gates::tp::FloatTensors& tensors, const std::function<TensorPtr(const TensorParallel&)>& forward) {
  return gates::tp::tensor_list(tensors, vd::RunOnRanks<TensorPtr>(tp, forward));
}

// x [tokens, in], weight [out, in], bias [out] | null of a linear layer.
struct LinearInputs {
  gates::tp::FloatTensors tensors;
  HostTensor x;
  HostTensor weight;
  std::optional<HostTensor> bias;
  int tp;
  explicit LinearInputs(const Value& input) : tensors(input) {
    x = tensors.read("x", {kAnyDim, kAnyDim}, "[tokens, in]");
    weight = tensors.read("weight", {kAnyDim, x.shape[1]}, "[out, in]");
    bias = tensors.read_optional("bias", {weight.shape[0]}, "[out]");
    tp = gates::tp::parse_tp(input);
  }
};

Value tp_column_linear(const Value& input) {
  LinearInputs in(input);
  const bool gather = gates::tp::parse_bool(input, "gather_output");
  me::ShardWidth("out", static_cast<int>(in.weight.shape[0]), in.tp);
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, in.tensors, [&](const TensorParallel& tp) {
    return me::ColumnParallelForward(tp, in.x, in.weight, or_null(in.bias), gather, precision);
  });
}

Value tp_row_linear(const Value& input) {
  LinearInputs in(input);
  me::ShardWidth("in", static_cast<int>(in.weight.shape[1]), in.tp);
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, in.tensors, [&](const TensorParallel& tp) {
    return me::RowParallelForward(tp, me::SplitLastDim(tp, in.x), in.weight, or_null(in.bias), precision);
  });
}

Value tp_qkv_linear(const Value& input) {
  gates::tp::FloatTensors tensors(input);
  me::QkvHeadsGeometry heads;
  heads.num_heads = gates::tp::positive_int("num_heads", gates::tp::member(input, "num_heads"));
  heads.num_kv_heads = gates::tp::positive_int("num_kv_heads", gates::tp::member(input, "num_kv_heads"));
  heads.head_dim = gates::tp::positive_int("head_dim", gates::tp::member(input, "head_dim"));
  const int tp = gates::tp::parse_tp(input);
  const std::int64_t q_rows = static_cast<std::int64_t>(heads.num_heads) * heads.head_dim;
  const std::int64_t kv_rows = static_cast<std::int64_t>(heads.num_kv_heads) * heads.head_dim;
  const HostTensor x = tensors.read("x", {kAnyDim, kAnyDim}, "[tokens, hidden]");
  const HostTensor q = tensors.read("q_weight", {q_rows, x.shape[1]}, "[num_heads * head_dim, hidden]");
  const HostTensor k = tensors.read("k_weight", {kv_rows, x.shape[1]}, "[num_kv_heads * head_dim, hidden]");
  const HostTensor v = tensors.read("v_weight", {kv_rows, x.shape[1]}, "[num_kv_heads * head_dim, hidden]");
  const auto q_bias = tensors.read_optional("q_bias", {q_rows}, "[num_heads * head_dim]");
  const auto k_bias = tensors.read_optional("k_bias", {kv_rows}, "[num_kv_heads * head_dim]");
  const auto v_bias = tensors.read_optional("v_bias", {kv_rows}, "[num_kv_heads * head_dim]");
  if (q_bias.has_value() != k_bias.has_value() || q_bias.has_value() != v_bias.has_value())
    throw std::invalid_argument(std::string("q_bias, k_bias and v_bias must all be tensors or all be null; got ") +
                                (q_bias ? "a tensor" : "null") + ", " + (k_bias ? "a tensor" : "null") + " and " +
                                (v_bias ? "a tensor" : "null"));
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
  gates::tp::FloatTensors tensors(input);
  const HostTensor x = tensors.read("x", {kAnyDim, kAnyDim}, "[tokens, hidden]");
  const HostTensor gate = tensors.read("gate_weight", {kAnyDim, x.shape[1]}, "[ffn, hidden]");
  const HostTensor up = tensors.read("up_weight", gate.shape, "[ffn, hidden]");
  const HostTensor down = tensors.read("down_weight", {x.shape[1], gate.shape[0]}, "[hidden, ffn]");
  const int tp = gates::tp::parse_tp(input);
  me::ShardWidth("ffn", static_cast<int>(gate.shape[0]), tp);
  const me::Precision precision = tensors.precision();
  return on_ranks(tp, tensors, [&](const TensorParallel& handle) {
    return me::ParallelMlpForward(handle, x, gate, up, down, precision);
  });
}

Value tp_vocab_embedding(const Value& input) {
  gates::tp::FloatTensors tensors(input);
  const HostTensor weight = tensors.read("weight", {kAnyDim, kAnyDim}, "[vocab, hidden]");
  const std::vector<std::int64_t> ids = gates::tp::parse_ids(input, "ids", weight.shape[0]);
  const int tp = gates::tp::parse_tp(input);
  vd::VocabLayout(static_cast<int>(weight.shape[0]), tp);
  return on_ranks(tp, tensors, [&](const TensorParallel& handle) { return me::VocabParallelEmbeddingForward(handle, ids, weight); });
}

Value tp_lm_head(const Value& input) {
  gates::tp::FloatTensors tensors(input);
  const HostTensor hidden = tensors.read("hidden_states", {kAnyDim, kAnyDim}, "[tokens, hidden]");
  const HostTensor weight = tensors.read("weight", {kAnyDim, hidden.shape[1]}, "[vocab, hidden]");
  const int tp = gates::tp::parse_tp(input);
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
