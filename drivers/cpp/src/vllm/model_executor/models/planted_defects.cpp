// The planted build's five defects (tests only); see include/vllm/model_executor/models/planted_defects.h.
#ifdef GATES_PLANT_LAYER_DEFECTS

#include "vllm/model_executor/models/planted_defects.h"

#include <cmath>
#include <memory>
#include <stdexcept>
#include <utility>

namespace vllm::model_executor::planted {
namespace {

const char* const kDefects[] = {"rope-base-wrong", "k-v-swapped", "rms-eps-outside-sqrt", "mlp-bfloat16-accumulation",
                                "o-proj-partial-dropped"};

std::string chosen;  // set by Choose before the rank threads start; read by them only

// RMSNorm with eps outside the square root: each group of weight's width scaled by 1 / (sqrt(mean(x²)) + eps) in
// float32, stored in the precision, times the weight there.
HostTensor RmsNormEpsOutsideSqrt(const HostTensor& x, const HostTensor& weight, double eps, Precision precision) {
  const std::size_t width = weight.data.size();
  HostTensor out = x;
  for (std::size_t at = 0; at < x.data.size(); at += width) {
    double squares = 0.0;
    for (std::size_t i = 0; i < width; ++i) squares += static_cast<double>(x.data[at + i]) * x.data[at + i];
    const float scale = 1.0f / (std::sqrt(static_cast<float>(squares / static_cast<double>(width))) + static_cast<float>(eps));
    for (std::size_t i = 0; i < width; ++i)
      out.data[at + i] = Rounded(precision, Rounded(precision, x.data[at + i] * scale) * weight.data[i]);
  }
  return out;
}

// `tensor` in bfloat16.
HostTensor InBFloat16(const HostTensor& tensor) {
  HostTensor out = tensor;
  RoundInPlace(Precision::kBFloat16, out);
  return out;
}

TensorPtr MlpInBFloat16(const TensorParallel& tp, const HostTensor& x, const Qwen3LayerWeights& w, Precision precision,
                        const PartialObserver& observe) {
  const ParallelMlp mlp(InBFloat16(*w.gate), InBFloat16(*w.up), InBFloat16(*w.down), tp.rank(), tp.tp_size());
  const Precision narrow = Precision::kBFloat16;
  HostTensor partial = mlp.down().Partial(mlp.Activation(mlp.GateUp(InBFloat16(x), narrow), narrow), narrow);
  RoundInPlace(precision, partial);
  if (observe) observe(partial);
  return mlp.down().Reduce(tp, std::move(partial), precision);
}

// Rank 1's partial is right (shown to `observe` as computed); the reduce is handed zeros in its place.
TensorPtr OProjRank1Dropped(const TensorParallel& tp, const HostTensor& attention, const Qwen3LayerWeights& w,
                            Precision precision, const PartialObserver& observe) {
  const RowParallelLinear o_proj(*w.o_proj, w.o_bias, tp.rank(), tp.tp_size());
  HostTensor partial = o_proj.Partial(attention, precision);
  if (observe) observe(partial);
  if (tp.rank() == 1) std::fill(partial.data.begin(), partial.data.end(), 0.0f);
  return o_proj.Reduce(tp, std::move(partial), precision);
}

}  // namespace

void Choose(const std::string& name) {
  for (const char* defect : kDefects)
    if (name == defect) {
      chosen = name;
      return;
    }
  std::string names;
  for (const char* defect : kDefects) names += std::string(names.empty() ? "" : ", ") + defect;
  throw std::invalid_argument("the planted build's setting planted-defect is '" + name + "'; it plants one of " + names);
}

void Plant(int layer, Qwen3LayerWeights& weights, Qwen3LayerSteps& steps) {
  if (layer != kPlantedLayer) return;
  if (chosen == "rope-base-wrong") steps.rope_theta = kWrongRopeBase;
  if (chosen == "k-v-swapped") std::swap(weights.qkv.k_weight, weights.qkv.v_weight);
  if (chosen == "rms-eps-outside-sqrt") steps.rms_norm = &RmsNormEpsOutsideSqrt;
  if (chosen == "mlp-bfloat16-accumulation") steps.mlp = &MlpInBFloat16;
  if (chosen == "o-proj-partial-dropped") steps.o_proj = &OProjRank1Dropped;
}

}  // namespace vllm::model_executor::planted

#endif  // GATES_PLANT_LAYER_DEFECTS
