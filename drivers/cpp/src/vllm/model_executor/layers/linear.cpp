// The tensor-parallel linear layers of one rank; see include/vllm/model_executor/layers/linear.h.
#include "vllm/model_executor/layers/linear.h"

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace vllm::model_executor {
namespace {

namespace vd = vllm::distributed;

int DimOf(const HostTensor& tensor, int i) { return static_cast<int>(tensor.shape[static_cast<std::size_t>(i)]); }

int Width(const vd::Span& span) { return span.end - span.begin; }

TensorPtr SharedTensor(HostTensor tensor) { return std::make_shared<HostTensor>(std::move(tensor)); }

// x times every row of a loaded weight (x's columns are the weight's), plus the loaded bias: [tokens, out].
HostTensor TimesLoaded(const HostTensor& x, const LoadedWeight& weight, const std::optional<LoadedBias>& bias,
                       Precision precision) {
  return LinearSlice(x, weight.tensor, vd::Span{0, weight.shard.out}, vd::Span{0, weight.shard.in},
                     bias ? &bias->tensor : nullptr, precision);
}


// The bias a row-parallel rank adds (TP-4.2: the plan gives it to rank 0 only).
std::vector<vd::BiasPart> RowBias(const vd::WeightShard& shard, const std::string& bias_source) {
#ifdef GATES_PLANT_ROW_BIAS_EVERY_RANK
  // planted defect (issue 30 item 5): every rank adds the whole bias, so the sum holds it tp times
  return {{bias_source, vd::Span{0, shard.out}}};
#else
  return vd::RowBiasParts(shard, bias_source);
#endif
}

}  // namespace

int ShardWidth(const char* name, int size, int tp) {
  return vd::ShardSize(size, tp, std::string(name) + "=" + std::to_string(size));
}

ColumnParallelLinear::ColumnParallelLinear(const HostTensor& weight, const HostTensor* bias, bool gather_output, int rank,
                                           int tp, const LinearNames& names)
    : weight_(LoadWeight(vd::ColumnParallelShard(names.shard, names.weight, DimOf(weight, 0), DimOf(weight, 1), tp, rank),
                         {{names.weight, &weight}})),
      bias_(bias ? LoadBias(vd::ColumnBiasParts(weight_.shard, {names.bias}), {{names.bias, bias}}) : std::nullopt),
      gather_output_(gather_output),
      rank_(rank),
      tp_(tp) {}

HostTensor ColumnParallelLinear::Partial(const HostTensor& x, Precision precision) const {
  return TimesLoaded(x, weight_, bias_, precision);
}

TensorPtr ColumnParallelLinear::Collect(const TensorParallel& tp, HostTensor partial) const {
  CheckLoadedFor(tp, rank_, tp_, "ColumnParallelLinear");
  TensorPtr y = SharedTensor(std::move(partial));
  return gather_output_ ? tp.AllGather(y, -1) : y;
}

TensorPtr ColumnParallelLinear::Forward(const TensorParallel& tp, const HostTensor& x, Precision precision) const {
  return Collect(tp, Partial(x, precision));
}

RowParallelLinear::RowParallelLinear(const HostTensor& weight, const HostTensor* bias, int rank, int tp,
                                     const LinearNames& names)
    : weight_(LoadWeight(vd::RowParallelShard(names.shard, names.weight, DimOf(weight, 0), DimOf(weight, 1), tp, rank),
                         {{names.weight, &weight}})),
      bias_(bias ? LoadBias(RowBias(weight_.shard, names.bias), {{names.bias, bias}}) : std::nullopt),
      rank_(rank),
      tp_(tp) {}

HostTensor RowParallelLinear::SplitInput(const HostTensor& x) const { return ColumnSlice(x, weight_.shard.parts.at(0).cols); }

HostTensor RowParallelLinear::Partial(const HostTensor& x_parallel, Precision precision) const {
  return TimesLoaded(x_parallel, weight_, bias_, precision);
}

TensorPtr RowParallelLinear::Reduce(const TensorParallel& tp, HostTensor partial, Precision precision) const {
  CheckLoadedFor(tp, rank_, tp_, "RowParallelLinear");
  TensorPtr sum = tp.AllReduce(SharedTensor(std::move(partial)));
  if (tp.tp_size() > 1) RoundInPlace(precision, *sum);
  return sum;
}

TensorPtr RowParallelLinear::Forward(const TensorParallel& tp, const HostTensor& x_parallel, Precision precision,
                                     const PartialObserver& observe) const {
  HostTensor partial = Partial(x_parallel, precision);
  if (observe) observe(partial);
  return Reduce(tp, std::move(partial), precision);
}

TensorPtr ColumnParallelForward(const TensorParallel& tp, const HostTensor& x, const HostTensor& weight,
                                const HostTensor* bias, bool gather_output, Precision precision) {
  return ColumnParallelLinear(weight, bias, gather_output, tp.rank(), tp.tp_size()).Forward(tp, x, precision);
}

HostTensor SplitLastDim(const TensorParallel& tp, const HostTensor& x) {
  return ColumnSlice(x, vd::RowParallelColumns(DimOf(x, 1), tp.tp_size(), tp.rank()));
}

TensorPtr RowParallelForward(const TensorParallel& tp, const HostTensor& x_parallel, const HostTensor& weight,
                             const HostTensor* bias, Precision precision, const PartialObserver& observe) {
  return RowParallelLinear(weight, bias, tp.rank(), tp.tp_size()).Forward(tp, x_parallel, precision, observe);
}

QkvParallelLinear::QkvParallelLinear(const QkvProjections& p, const QkvHeadsGeometry& g, int rank, int tp,
                                     const QkvNames& names)
    : weight_(LoadWeight(vd::QkvParallelShard(names.shard, names.weights, g.num_heads, g.num_kv_heads, g.head_dim,
                                              DimOf(*p.q_weight, 1), tp, rank),
                         {{names.weights.q, p.q_weight}, {names.weights.k, p.k_weight}, {names.weights.v, p.v_weight}})),
      bias_(p.q_bias ? LoadBias(vd::ColumnBiasParts(weight_.shard, {names.biases.q, names.biases.k, names.biases.v}),
                                {{names.biases.q, p.q_bias}, {names.biases.k, p.k_bias}, {names.biases.v, p.v_bias}})
                     : std::nullopt) {}

QkvOutput QkvParallelLinear::Forward(const HostTensor& x, Precision precision) const {
  const HostTensor fused = TimesLoaded(x, weight_, bias_, precision);
  TensorPtr outputs[3];
  int column = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const int width = Width(weight_.shard.parts.at(i).rows);
    outputs[i] = SharedTensor(ColumnSlice(fused, vd::Span{column, column + width}));
    column += width;
  }
  return QkvOutput{outputs[0], outputs[1], outputs[2]};
}

QkvOutput QkvParallelForward(const TensorParallel& tp, const HostTensor& x, const QkvProjections& p,
                             const QkvHeadsGeometry& g, Precision precision) {
  return QkvParallelLinear(p, g, tp.rank(), tp.tp_size()).Forward(x, precision);
}

ParallelMlp::ParallelMlp(const HostTensor& gate_weight, const HostTensor& up_weight, const HostTensor& down_weight, int rank,
                         int tp, const MlpNames& names)
    : gate_up_(LoadWeight(vd::MergedColumnParallelShard(names.gate_up, {names.gate, names.up}, DimOf(gate_weight, 0),
                                                        DimOf(gate_weight, 1), tp, rank),
                          {{names.gate, &gate_weight}, {names.up, &up_weight}})),
      down_(down_weight, nullptr, rank, tp, names.down) {}

HostTensor ParallelMlp::GateUp(const HostTensor& x, Precision precision) const {
  return TimesLoaded(x, gate_up_, std::nullopt, precision);
}

HostTensor ParallelMlp::Activation(const HostTensor& gate_up, Precision precision) const {
  const int gate_rows = Width(gate_up_.shard.parts.at(0).rows);
  HostTensor gate = ColumnSlice(gate_up, vd::Span{0, gate_rows});
  const HostTensor up = ColumnSlice(gate_up, vd::Span{gate_rows, gate_rows + Width(gate_up_.shard.parts.at(1).rows)});
  for (std::size_t i = 0; i < gate.data.size(); ++i) {
    const float g = gate.data[i];
    const float silu = Rounded(precision, g / (1.0f + std::exp(-g)));
    gate.data[i] = Rounded(precision, silu * up.data[i]);
  }
  return gate;
}

TensorPtr ParallelMlp::Forward(const TensorParallel& tp, const HostTensor& x, Precision precision,
                               const PartialObserver& observe) const {
  return down_.Forward(tp, Activation(GateUp(x, precision), precision), precision, observe);  // down_proj on the rank's activation
}

TensorPtr ParallelMlpForward(const TensorParallel& tp, const HostTensor& x, const HostTensor& gate_weight,
                             const HostTensor& up_weight, const HostTensor& down_weight, Precision precision,
                             const PartialObserver& observe) {
  return ParallelMlp(gate_weight, up_weight, down_weight, tp.rank(), tp.tp_size()).Forward(tp, x, precision, observe);
}

}  // namespace vllm::model_executor
