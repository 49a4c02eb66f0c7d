// The tensor-parallel linear layers of one rank; see include/vllm/model_executor/layers/linear.h.
#include "vllm/model_executor/layers/linear.h"

#include <cmath>
#include <memory>
#include <string>

namespace vllm::model_executor {
namespace {

namespace vd = vllm::distributed;

int Dim(const HostTensor& tensor, int i) { return static_cast<int>(tensor.shape[static_cast<std::size_t>(i)]); }

// The rank's piece of `size` split tp ways; `name` names the size in the refusal of an indivisible one.
vd::Span RankShare(const TensorParallel& tp, int size, const char* name) {
  return vd::RankPiece(tp.rank(), ShardWidth(name, size, tp.tp_size()));
}

TensorPtr Shared(HostTensor tensor) { return std::make_shared<HostTensor>(std::move(tensor)); }

// The all-reduced sum, stored in the layer's precision.
TensorPtr AllReduced(const TensorParallel& tp, HostTensor partial, Precision precision) {
  TensorPtr sum = tp.AllReduce(Shared(std::move(partial)));
  if (tp.tp_size() > 1) RoundInPlace(precision, *sum);
  return sum;
}

// Whether this rank adds a row-parallel layer's bias (TP-4.2: rank 0 only).
bool AddsBias(const TensorParallel& tp) {
#ifdef GATES_PLANT_ROW_BIAS_EVERY_RANK
  (void)tp;
  return true;  // planted defect (issue 30 item 5): every rank adds the bias, so the sum holds it tp times
#else
  return tp.rank() == 0;
#endif
}

}  // namespace

int ShardWidth(const char* name, int size, int tp) {
  return vd::ShardSize(size, tp, std::string(name) + "=" + std::to_string(size));
}

TensorPtr ColumnParallelForward(const TensorParallel& tp, const HostTensor& x, const HostTensor& weight,
                                const HostTensor* bias, bool gather_output, Precision precision) {
  const vd::Span rows = RankShare(tp, Dim(weight, 0), "out");
  TensorPtr y = Shared(LinearSlice(x, weight, rows, vd::Span{0, Dim(weight, 1)}, bias, precision));
  return gather_output ? tp.AllGather(y, -1) : y;
}

HostTensor SplitLastDim(const TensorParallel& tp, const HostTensor& x) {
  return ColumnSlice(x, RankShare(tp, Dim(x, 1), "in"));
}

TensorPtr RowParallelForward(const TensorParallel& tp, const HostTensor& x_parallel, const HostTensor& weight,
                             const HostTensor* bias, Precision precision) {
  const vd::Span cols = RankShare(tp, Dim(weight, 1), "in");
  HostTensor partial = LinearSlice(x_parallel, weight, vd::Span{0, Dim(weight, 0)}, cols, AddsBias(tp) ? bias : nullptr, precision);
  return AllReduced(tp, std::move(partial), precision);
}

QkvOutput QkvParallelForward(const TensorParallel& tp, const HostTensor& x, const QkvProjections& p,
                             const QkvHeadsGeometry& g, Precision precision) {
  const vd::QkvHeads heads = vd::QkvHeadLayout(g.num_heads, g.num_kv_heads, tp.tp_size());
  const vd::Span whole{0, Dim(x, 1)};
  const int kv_shard = heads.kv_shard(tp.rank());
  QkvOutput out;
  out.q = Shared(LinearSlice(x, *p.q_weight, vd::RankPiece(tp.rank(), heads.heads_per_rank * g.head_dim), whole, p.q_bias, precision));
  const vd::Span kv_rows = vd::RankPiece(kv_shard, heads.kv_heads_per_rank * g.head_dim);
  out.k = Shared(LinearSlice(x, *p.k_weight, kv_rows, whole, p.k_bias, precision));
  out.v = Shared(LinearSlice(x, *p.v_weight, kv_rows, whole, p.v_bias, precision));
  return out;
}

TensorPtr ParallelMlpForward(const TensorParallel& tp, const HostTensor& x, const HostTensor& gate_weight,
                             const HostTensor& up_weight, const HostTensor& down_weight, Precision precision) {
  const vd::Span rows = RankShare(tp, Dim(gate_weight, 0), "ffn");
  const vd::Span whole{0, Dim(x, 1)};
  HostTensor gate = LinearSlice(x, gate_weight, rows, whole, nullptr, precision);
  const HostTensor up = LinearSlice(x, up_weight, rows, whole, nullptr, precision);
  for (std::size_t i = 0; i < gate.data.size(); ++i) {
    const float g = gate.data[i];
    const float silu = Rounded(precision, g / (1.0f + std::exp(-g)));
    gate.data[i] = Rounded(precision, silu * up.data[i]);
  }
  return RowParallelForward(tp, gate, down_weight, nullptr, precision);  // down_proj on the rank's activation
}

}  // namespace vllm::model_executor
