// The tensor-parallel linear layers, the forward of one rank (spec/tensor-parallel.md §5: TP-5.1, TP-5.2; vLLM
// 0.33.0 vllm/model_executor/layers/linear.py ColumnParallelLinear, RowParallelLinear, QKVParallelLinear,
// MergedColumnParallelLinear). A layer is loaded on one rank from the unsharded checkpoint tensors (weights
// [out, in]) by the shard the shard plan's per-layer function names (shard_plan.h, the only place computing
// ranges) and keeps it (sharded_weight.h); its forward runs the layer's collective through the rank's handle
// (thread_world.h runs the ranks). Each layer also answers its per-rank state (TP-5.7): the weight and bias it
// loaded and its outputs before the collective. Shapes are the caller's to check; an indivisible geometry throws
// std::invalid_argument as BuildShardPlan does (TP-4.8).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "vllm/distributed/shard_plan.h"
#include "vllm/distributed/tensor_parallel.h"
#include "vllm/model_executor/layers/precision.h"
#include "vllm/model_executor/layers/sharded_weight.h"

namespace vllm::model_executor {

// The size of each rank's share of `size` (a layer's out, in or ffn): size / tp; std::invalid_argument
// "<name>=<size> is not divisible by tp=<tp>" otherwise (TP-4.8). The layers below check it on every rank; a caller
// checks it once before the ranks run.
int ShardWidth(const char* name, int size, int tp);

// The names a linear layer's shard and its sources carry (defaults: the layer operations' names, TP-5.7).
struct LinearNames {
  std::string shard = "weight";
  std::string weight = "weight";
  std::string bias = "bias";
};

// ColumnParallelLinear at rank `rank` of `tp` (TP-4.1): rows [r·out/tp, (r+1)·out/tp) of weight [out, in] and of
// bias [out] (or none).
class ColumnParallelLinear {
 public:
  ColumnParallelLinear(const HostTensor& weight, const HostTensor* bias, bool gather_output, int rank, int tp,
                       const LinearNames& names = {});
  const LoadedWeight& weight() const { return weight_; }
  const std::optional<LoadedBias>& bias() const { return bias_; }
  // x [tokens, in] times the rank's rows, plus its bias rows: [tokens, out/tp], before any gather.
  HostTensor Partial(const HostTensor& x, Precision precision) const;
  // The partial, or with gather_output every rank's partial all-gathered along the last dim in rank order.
  TensorPtr Collect(const TensorParallel& tp, HostTensor partial) const;
  TensorPtr Forward(const TensorParallel& tp, const HostTensor& x, Precision precision) const;

 private:
  LoadedWeight weight_;
  std::optional<LoadedBias> bias_;
  bool gather_output_;
  int rank_;
  int tp_;
};

// Sees a row-parallel layer's partial [tokens, out] on its rank, before the all-reduce: every rank's observer at the
// same point, so it may run a collective of its own (a tap recorder gathers the ranks' partials, MT-1.6). Empty: none.
using PartialObserver = std::function<void(const HostTensor& partial)>;

// RowParallelLinear at rank `rank` of `tp` (TP-4.2): columns [r·in/tp, (r+1)·in/tp) of weight [out, in]; the whole
// bias [out] (or none) on rank 0 only.
class RowParallelLinear {
 public:
  RowParallelLinear(const HostTensor& weight, const HostTensor* bias, int rank, int tp, const LinearNames& names = {});
  const LoadedWeight& weight() const { return weight_; }
  const std::optional<LoadedBias>& bias() const { return bias_; }
  // The rank's columns of x [tokens, in]: its input_parallel when the input is not parallel already.
  HostTensor SplitInput(const HostTensor& x) const;
  // input_parallel [tokens, in/tp] times the rank's weight, plus the bias it adds: [tokens, out], before the reduce.
  HostTensor Partial(const HostTensor& x_parallel, Precision precision) const;
  // The ranks' partials all-reduced, stored in the layer's precision: [tokens, out] on every rank.
  TensorPtr Reduce(const TensorParallel& tp, HostTensor partial, Precision precision) const;
  // The partial, shown to `observe` (if any), then reduced.
  TensorPtr Forward(const TensorParallel& tp, const HostTensor& x_parallel, Precision precision,
                    const PartialObserver& observe = {}) const;

 private:
  LoadedWeight weight_;
  std::optional<LoadedBias> bias_;
  int rank_;
  int tp_;
};

// ColumnParallelLinear's forward: x [tokens, in] times rows [r·out/tp, (r+1)·out/tp) of weight (and bias):
// [tokens, out/tp]; with gather_output every rank's columns all-gathered in rank order, [tokens, out].
TensorPtr ColumnParallelForward(const TensorParallel& tp, const HostTensor& x, const HostTensor& weight,
                                const HostTensor* bias, bool gather_output, Precision precision);

// The rank's columns [r·in/tp, (r+1)·in/tp) of x [tokens, in]: RowParallelLinear's input_parallel when its input
// is not parallel already (vLLM's split_tensor_along_last_dim).
HostTensor SplitLastDim(const TensorParallel& tp, const HostTensor& x);

// RowParallelLinear's forward on the rank's input_parallel [tokens, in/tp]: times the same columns of weight
// [out, in]; rank 0 alone adds the bias (TP-4.2); the partial sums all-reduced, [tokens, out] on every rank. The
// rank's partial is shown to `observe` (if any) before the reduce.
TensorPtr RowParallelForward(const TensorParallel& tp, const HostTensor& x_parallel, const HostTensor& weight,
                             const HostTensor* bias, Precision precision, const PartialObserver& observe = {});

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

// The names of QKVParallelLinear's shard and sources.
struct QkvNames {
  std::string shard = "qkv";
  distributed::QkvSources weights{"q_weight", "k_weight", "v_weight"};
  distributed::QkvSources biases{"q_bias", "k_bias", "v_bias"};
};

// QKVParallelLinear at rank `rank` of `tp` (TP-4.3): the fused [q; k; v] shard of the projections, its biases' same
// rows (or none).
class QkvParallelLinear {
 public:
  QkvParallelLinear(const QkvProjections& projections, const QkvHeadsGeometry& heads, int rank, int tp,
                    const QkvNames& names = {});
  const LoadedWeight& weight() const { return weight_; }
  const std::optional<LoadedBias>& bias() const { return bias_; }
  // The fused shard applied to x [tokens, hidden] and split into q, k and v (no collective).
  QkvOutput Forward(const HostTensor& x, Precision precision) const;

 private:
  LoadedWeight weight_;
  std::optional<LoadedBias> bias_;
};

// QKVParallelLinear's forward: the rank's fused [q; k; v] shard applied to x [tokens, hidden] and split (no gather).
QkvOutput QkvParallelForward(const TensorParallel& tp, const HostTensor& x, const QkvProjections& projections,
                             const QkvHeadsGeometry& heads, Precision precision);

// The names of the MLP's shards and sources.
struct MlpNames {
  std::string gate_up = "gate_up";
  std::string gate = "gate_weight";
  std::string up = "up_weight";
  LinearNames down{"down", "down_weight", "down_bias"};
};

// The MLP at rank `rank` of `tp`: gate_up as MergedColumnParallelLinear (TP-4.4) of gate and up [ffn, hidden],
// silu(gate)·up, down_proj [hidden, ffn] row-parallel without bias (TP-4.2).
class ParallelMlp {
 public:
  ParallelMlp(const HostTensor& gate_weight, const HostTensor& up_weight, const HostTensor& down_weight, int rank, int tp,
              const MlpNames& names = {});
  const LoadedWeight& gate_up() const { return gate_up_; }
  const RowParallelLinear& down() const { return down_; }
  // x [tokens, hidden] times the rank's gate_up rows: [tokens, 2·ffn/tp], its gate columns then its up columns.
  HostTensor GateUp(const HostTensor& x, Precision precision) const;
  // silu(gate)·up of a GateUp result: [tokens, ffn/tp], down's input_parallel.
  HostTensor Activation(const HostTensor& gate_up, Precision precision) const;
  // down(silu(gate)·up) all-reduced: [tokens, hidden] on every rank; down's partial shown to `observe` (if any) first.
  TensorPtr Forward(const TensorParallel& tp, const HostTensor& x, Precision precision,
                    const PartialObserver& observe = {}) const;

 private:
  LoadedWeight gate_up_;
  RowParallelLinear down_;
};

// The MLP's forward: gate_up as MergedColumnParallelLinear (TP-4.4), silu(gate)·up, down_proj row-parallel without
// bias and all-reduced: [tokens, hidden] on every rank. down_proj's partial is shown to `observe` (if any) before the
// reduce.
TensorPtr ParallelMlpForward(const TensorParallel& tp, const HostTensor& x, const HostTensor& gate_weight,
                             const HostTensor& up_weight, const HostTensor& down_weight, Precision precision,
                             const PartialObserver& observe = {});

}  // namespace vllm::model_executor
