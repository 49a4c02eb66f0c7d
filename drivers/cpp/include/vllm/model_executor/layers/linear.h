// The tensor-parallel linear layers, the forward of one rank (spec/tensor-parallel.md §5: TP-5.1, TP-5.2; vLLM
// 0.33.0 vllm/model_executor/layers/linear.py ColumnParallelLinear, RowParallelLinear, QKVParallelLinear,
// MergedColumnParallelLinear). Each takes the unsharded checkpoint tensors (weights [out, in]), cuts the calling
// rank's shard as the shard plan does (shard_plan.h) and runs the layer's collective through the rank's handle
// (thread_world.h runs the ranks). Shapes are the caller's to check; an indivisible geometry throws
// std::invalid_argument as BuildShardPlan does (TP-4.8).
#pragma once

#include "vllm/distributed/tensor_parallel.h"
#include "vllm/model_executor/layers/precision.h"

namespace vllm::model_executor {

// The size of each rank's share of `size` (a layer's out, in or ffn): size / tp; std::invalid_argument
// "<name>=<size> is not divisible by tp=<tp>" otherwise (TP-4.8). The layers below check it on every rank; a caller
// checks it once before the ranks run.
int ShardWidth(const char* name, int size, int tp);

// ColumnParallelLinear: x [tokens, in] times rows [r·out/tp, (r+1)·out/tp) of weight (and bias): [tokens, out/tp];
// with gather_output every rank's columns all-gathered in rank order, [tokens, out].
TensorPtr ColumnParallelForward(const TensorParallel& tp, const HostTensor& x, const HostTensor& weight,
                                const HostTensor* bias, bool gather_output, Precision precision);

// The rank's columns [r·in/tp, (r+1)·in/tp) of x [tokens, in]: RowParallelLinear's input_parallel when its input
// is not parallel already (vLLM's split_tensor_along_last_dim).
HostTensor SplitLastDim(const TensorParallel& tp, const HostTensor& x);

// RowParallelLinear on the rank's input_parallel [tokens, in/tp]: times the same columns of weight [out, in]; rank 0
// alone adds the bias (TP-4.2); the partial sums all-reduced, [tokens, out] on every rank.
TensorPtr RowParallelForward(const TensorParallel& tp, const HostTensor& x_parallel, const HostTensor& weight,
                             const HostTensor* bias, Precision precision);

// The unsharded q/k/v projections of QKVParallelLinear ([Hq·D, hidden], [Hkv·D, hidden] twice) and their biases
// (all three or none).
struct QkvProjections {
  const HostTensor* q_weight = nullptr;
  const HostTensor* k_weight = nullptr;
  const HostTensor* v_weight = nullptr;
  const HostTensor* q_bias = nullptr;
  const HostTensor* k_bias = nullptr;
  const HostTensor* v_bias = nullptr;
};

struct QkvHeadsGeometry {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
};

struct QkvOutput {
  TensorPtr q;  // [tokens, Hq/tp·D]: the rank's query heads
  TensorPtr k;  // [tokens, max(1, Hkv/tp)·D]: KV shard r / replicas (TP-4.3)
  TensorPtr v;
};

// QKVParallelLinear: the rank's fused [q; k; v] shard applied to x [tokens, hidden] and split (no gather).
QkvOutput QkvParallelForward(const TensorParallel& tp, const HostTensor& x, const QkvProjections& projections,
                             const QkvHeadsGeometry& heads, Precision precision);

// The MLP: gate_up as MergedColumnParallelLinear (TP-4.4), silu(gate)·up, down_proj row-parallel without bias and
// all-reduced: [tokens, hidden] on every rank.
TensorPtr ParallelMlpForward(const TensorParallel& tp, const HostTensor& x, const HostTensor& gate_weight,
                             const HostTensor& up_weight, const HostTensor& down_weight, Precision precision);

}  // namespace vllm::model_executor
