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
#include <functional>
#include <vector>

#include "driver/operation.h"
#include "ops/tp_layer_input.h"
#include "ops/tp_tensor_input.h"
#include "vllm/distributed/thread_world.h"
#include "vllm/model_executor/layers/linear.h"
#include "vllm/model_executor/layers/vocab_parallel_embedding.h"

namespace {

namespace vd = vllm::distributed;
namespace me = vllm::model_executor;
using gates::Value;
using vllm::TensorParallel;
using vllm::TensorPtr;

Value on_ranks(int tp, const gates::tp::FloatTensors& tensors, const std::function<TensorPtr(const TensorParallel&)>& forward) {
  return gates::tp::tensor_list(tensors, vd::RunOnRanks<TensorPtr>(tp, forward));
}

Value tp_column_linear(const Value& input) {
  const gates::tp::LinearCall in = gates::tp::column_call(input, input);
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, in.tensors, [&](const TensorParallel& tp) {
    return me::ColumnParallelForward(tp, in.x, in.weight, in.bias_or_null(), in.gather_output, precision);
  });
}

Value tp_row_linear(const Value& input) {
  const gates::tp::LinearCall in = gates::tp::row_call(input, input);
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, in.tensors, [&](const TensorParallel& tp) {
    return me::RowParallelForward(tp, me::SplitLastDim(tp, in.x), in.weight, in.bias_or_null(), precision);
  });
}

Value tp_qkv_linear(const Value& input) {
  const gates::tp::QkvCall in(input, input);
  const me::QkvProjections projections = in.projections();
  const me::Precision precision = in.tensors.precision();
  const auto outputs = vd::RunOnRanks<me::QkvOutput>(in.tp, [&](const TensorParallel& handle) {
    return me::QkvParallelForward(handle, in.x, projections, in.heads, precision);
  });
  Value out = Value::array();
  for (const me::QkvOutput& rank : outputs)
    out.push_back(Value::array({in.tensors.result(*rank.q), in.tensors.result(*rank.k), in.tensors.result(*rank.v)}));
  return out;
}

Value tp_mlp(const Value& input) {
  const gates::tp::MlpCall in(input, input);
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, in.tensors, [&](const TensorParallel& handle) {
    return me::ParallelMlpForward(handle, in.x, in.gate, in.up, in.down, precision);
  });
}

Value tp_vocab_embedding(const Value& input) {
  const gates::tp::EmbeddingCall in(input, input);
  return on_ranks(in.tp, in.tensors, [&](const TensorParallel& handle) {
    return me::VocabParallelEmbeddingForward(handle, in.ids, in.weight);
  });
}

Value tp_lm_head(const Value& input) {
  const gates::tp::LmHeadCall in(input, input);
  const me::Precision precision = in.tensors.precision();
  return on_ranks(in.tp, in.tensors, [&](const TensorParallel& handle) {
    return me::ParallelLmHeadForward(handle, in.hidden_states, in.weight, precision);
  });
}

}  // namespace

GATES_OPERATION("tp-column-linear", tp_column_linear);
GATES_OPERATION("tp-row-linear", tp_row_linear);
GATES_OPERATION("tp-qkv-linear", tp_qkv_linear);
GATES_OPERATION("tp-mlp", tp_mlp);
GATES_OPERATION("tp-vocab-embedding", tp_vocab_embedding);
GATES_OPERATION("tp-lm-head", tp_lm_head);
