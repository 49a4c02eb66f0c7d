// The planted build of the decoder (tests only; -DGATES_PLANT_LAYER_DEFECTS, never the production driver): five
// defects a port really ships, each planted in layer kPlantedLayer only, as gates/rows/model_taps/known_bad.py plants
// them in the Python port (spec/model-taps.md MT-4.3). Which one is planted is chosen by name before a forward runs
// (the driver's setting "planted-defect"); the decoder hands each layer's weights and steps to Plant.
#pragma once

#ifdef GATES_PLANT_LAYER_DEFECTS

#include <string>

#include "vllm/model_executor/models/qwen3_layer.h"

namespace vllm::model_executor::planted {

// The layer every defect is planted in (of a 4-layer model: one layer before it is right, one after it).
constexpr int kPlantedLayer = 2;
// The base the wrong-RoPE layer rotates by (Qwen3's real one, where the config says 10000).
constexpr double kWrongRopeBase = 1e6;

// The defect to plant, by its known-bad's name: rope-base-wrong, k-v-swapped, rms-eps-outside-sqrt,
// mlp-bfloat16-accumulation, o-proj-partial-dropped; std::invalid_argument naming the value and the five otherwise.
void Choose(const std::string& name);

// In layer kPlantedLayer, the chosen defect planted into the layer's weights or steps; other layers as they are.
//   rope-base-wrong: RoPE's table built with base kWrongRopeBase;
//   k-v-swapped: k_proj's rows loaded where v_proj's go and v_proj's where k_proj's go;
//   rms-eps-outside-sqrt: every RMSNorm of the layer as x / (sqrt(mean(x²)) + eps);
//   mlp-bfloat16-accumulation: the MLP (its input, weights, gate_up, silu·up, down) in bfloat16, its partial stored
//     in the compute dtype before the all-reduce;
//   o-proj-partial-dropped: rank 1's o_proj partial replaced by zeros in the all-reduce (at tp 1: nothing dropped).
void Plant(int layer, Qwen3LayerWeights& weights, Qwen3LayerSteps& steps);

}  // namespace vllm::model_executor::planted

#endif  // GATES_PLANT_LAYER_DEFECTS
