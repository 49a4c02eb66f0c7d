// The tensor-parallel Qwen3-style decoder; see include/vllm/model_executor/models/qwen3.h.
#include "vllm/model_executor/models/qwen3.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "vllm/distributed/shard_plan.h"
#include "vllm/distributed/thread_world.h"
#include "vllm/model_executor/layers/layernorm.h"
#include "vllm/model_executor/layers/linear.h"
#include "vllm/model_executor/layers/rotary_embedding.h"
#include "vllm/model_executor/layers/vocab_parallel_embedding.h"
#include "vllm/model_executor/models/qwen3_layer.h"
#ifdef GATES_PLANT_LAYER_DEFECTS
#include "vllm/model_executor/models/planted_defects.h"  // the planted build's five defects (tests only)
#endif

namespace vllm::model_executor {
namespace {

constexpr Precision kFloat32 = Precision::kFloat32;

std::string LayerName(int layer, const char* rest) { return "model.layers." + std::to_string(layer) + "." + rest; }

layers::FloatType FloatTypeOf(Precision precision) {
  switch (precision) {
    case Precision::kBFloat16: return layers::FloatType::kBFloat16;
    case Precision::kFloat16: return layers::FloatType::kFloat16;
    case Precision::kFloat32: break;
  }
  return layers::FloatType::kFloat32;
}

// `value` as the forward keeps an intermediate: rounded to a 16-bit dtype, as torch stores a tensor of it; in float32
// the double the port accumulates in.
double Stored(Precision precision, double value) {
  return precision == kFloat32 ? value : Rounded(precision, static_cast<float>(value));
}

// RMSNorm of x's elements in groups of weight's width (a token's hidden vector, or one head of it for Qwen3's
// q_norm/k_norm), by the port's RMSNorm of LAYERS-NORM-ROPE on rows of the precision's dtype (its statistics in
// float32).
HostTensor RmsNorm(const HostTensor& x, const HostTensor& weight, double eps, Precision precision) {
  const auto width = static_cast<std::int64_t>(weight.data.size());
  const layers::FloatTensor rows{FloatTypeOf(precision), {static_cast<std::int64_t>(x.data.size()) / width, width}, x.data};
  const layers::FloatTensor scale{FloatTypeOf(precision), {width}, weight.data};
  return HostTensor{x.shape, layers::RmsNorm(rows, &scale, eps, nullptr).out.values};
}

// x [tokens, heads·head_dim], token t at position t, every head rotated whole with neox pairing by the port's rotary
// embedding of LAYERS-NORM-ROPE (its float32 cos/sin table of `tokens` positions, base theta), in the precision.
HostTensor NeoxRope(const HostTensor& x, int head_dim, double theta, Precision precision) {
  const std::int64_t tokens = x.shape[0];
  std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) positions[static_cast<std::size_t>(t)] = t;
  const layers::FloatTensor query{FloatTypeOf(precision), x.shape, x.data};
  const layers::FloatTensor cache = layers::CosSinCache(head_dim, tokens, theta);
  return HostTensor{x.shape, layers::RotaryEmbedding(positions, query, nullptr, head_dim, head_dim, cache, true).first.values};
}

// Causal grouped-query attention of the heads QkvParallelForward gave this rank, their counts read off the widths:
// q [T, Hq_r·D], k and v [T, Hkv_r·D]; query head h reads KV head h / (Hq_r / Hkv_r). [T, Hq_r·D]. The scores q·k and
// the probabilities are stored in the precision (the softmax itself is wider), as the Python port's forward.
HostTensor CausalAttention(const HostTensor& q, const HostTensor& k, const HostTensor& v, int head_dim, Precision precision) {
  const std::size_t tokens = static_cast<std::size_t>(q.shape[0]);
  const std::size_t d = static_cast<std::size_t>(head_dim);
  const std::size_t q_width = static_cast<std::size_t>(q.shape[1]);
  const std::size_t kv_width = static_cast<std::size_t>(k.shape[1]);
  const std::size_t heads = q_width / d;
  const std::size_t group = heads / (kv_width / d);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  HostTensor out = Zeros(q.shape[0], q.shape[1]);
  std::vector<double> weights(tokens);
  for (std::size_t h = 0; h < heads; ++h) {
    const std::size_t q_at = h * d;
    const std::size_t kv_at = h / group * d;
    for (std::size_t i = 0; i < tokens; ++i) {
      double top = -INFINITY;
      for (std::size_t j = 0; j <= i; ++j) {
        double dot = 0.0;
        for (std::size_t c = 0; c < d; ++c) dot += static_cast<double>(q.data[i * q_width + q_at + c]) * k.data[j * kv_width + kv_at + c];
        weights[j] = Stored(precision, dot) * scale;
        top = std::max(top, weights[j]);
      }
      double total = 0.0;
      for (std::size_t j = 0; j <= i; ++j) total += (weights[j] = std::exp(weights[j] - top));
      for (std::size_t j = 0; j <= i; ++j) weights[j] = Stored(precision, weights[j] / total);
      for (std::size_t c = 0; c < d; ++c) {
        double sum = 0.0;
        for (std::size_t j = 0; j <= i; ++j) sum += weights[j] * v.data[j * kv_width + kv_at + c];
        out.data[i * q_width + q_at + c] = Rounded(precision, static_cast<float>(sum));
      }
    }
  }
  return out;
}

// residual + update, stored in the precision.
HostTensor Added(const HostTensor& residual, const HostTensor& update, Precision precision) {
  HostTensor sum = residual;
  for (std::size_t i = 0; i < sum.data.size(); ++i) sum.data[i] = Rounded(precision, sum.data[i] + update.data[i]);
  return sum;
}

// The tensor `rest` of layer `layer` where the config gives the layer one (a bias), else nullptr.
const HostTensor* GivenWeight(const Qwen3Weights& w, int layer, const char* rest, bool given) {
  return given ? &w.at(LayerName(layer, rest)) : nullptr;
}

// Layer `layer`'s checkpoint tensors, by their names model.layers.{layer}.*.
Qwen3LayerWeights LayerWeights(const Qwen3Config& c, const Qwen3Weights& w, int layer) {
  const auto weight = [&](const char* rest) { return &w.at(LayerName(layer, rest)); };
  Qwen3LayerWeights out;
  out.input_norm = weight("input_layernorm.weight");
  out.qkv = {weight("self_attn.q_proj.weight"), weight("self_attn.k_proj.weight"), weight("self_attn.v_proj.weight"),
             GivenWeight(w, layer, "self_attn.q_proj.bias", c.qkv_bias), GivenWeight(w, layer, "self_attn.k_proj.bias", c.qkv_bias),
             GivenWeight(w, layer, "self_attn.v_proj.bias", c.qkv_bias)};
  out.q_norm = weight("self_attn.q_norm.weight");
  out.k_norm = weight("self_attn.k_norm.weight");
  out.o_proj = weight("self_attn.o_proj.weight");
  out.o_bias = GivenWeight(w, layer, "self_attn.o_proj.bias", c.o_proj_bias);
  out.post_norm = weight("post_attention_layernorm.weight");
  out.gate = weight("mlp.gate_proj.weight");
  out.up = weight("mlp.up_proj.weight");
  out.down = weight("mlp.down_proj.weight");
  return out;
}

// o_proj, RowParallelLinear on the rank's heads, its bias on rank 0 (TP-5.2): [T, hidden] all-reduced, the rank's
// partial shown to `observe` first.
TensorPtr OProj(const TensorParallel& tp, const HostTensor& attention, const Qwen3LayerWeights& w, Precision p,
                const PartialObserver& observe) {
  return RowParallelForward(tp, attention, *w.o_proj, w.o_bias, p, observe);
}

// The MLP: gate_up, silu(gate)·up, down_proj (TP-4.4, TP-4.2): [T, hidden] all-reduced, down_proj's partial shown to
// `observe` first.
TensorPtr Mlp(const TensorParallel& tp, const HostTensor& x, const Qwen3LayerWeights& w, Precision p,
              const PartialObserver& observe) {
  return ParallelMlpForward(tp, x, *w.gate, *w.up, *w.down, p, observe);
}

// One decoder layer on the residual stream x [T, hidden]: the stream leaving it. The recorder gets the layer's taps
// under layers.{layer}. (with the ranks' partials before each all-reduce when it keeps them) and may feed its two
// sub-blocks (spec/model-taps.md MT-1.2, MT-1.6, MT-2.1).
HostTensor DecoderLayer(const TensorParallel& tp, const Qwen3Config& c, const Qwen3Weights& weights, int layer, HostTensor x,
                        Precision p, TapRecorder& recorder) {
  const std::string name = "layers." + std::to_string(layer) + ".";
  const QkvHeadsGeometry heads{c.num_heads, c.num_kv_heads, c.head_dim};
  Qwen3LayerWeights w = LayerWeights(c, weights, layer);
  Qwen3LayerSteps steps{c.rope_theta, &RmsNorm, &OProj, &Mlp};
#ifdef GATES_PLANT_LAYER_DEFECTS
  planted::Plant(layer, w, steps);  // the planted build's defect, in its layer only (tests only)
#endif
  const double eps = c.rms_norm_eps;
  x = recorder.Fed(name + "attn.in", std::move(x));
  const QkvOutput qkv = QkvParallelForward(tp, steps.rms_norm(x, *w.input_norm, eps, p), w.qkv, heads, p);
  const HostTensor q = NeoxRope(steps.rms_norm(*qkv.q, *w.q_norm, eps, p), c.head_dim, steps.rope_theta, p);
  const HostTensor k = NeoxRope(steps.rms_norm(*qkv.k, *w.k_norm, eps, p), c.head_dim, steps.rope_theta, p);
  recorder.TapHeads(tp, name + "attn.k", k, heads);
  recorder.TapHeads(tp, name + "attn.v", *qkv.v, heads);
  const TensorPtr attended = steps.o_proj(tp, CausalAttention(q, k, *qkv.v, c.head_dim, p), w, p,
                                          recorder.RankPartials(tp, name + "attn.out"));
  x = recorder.Fed(name + "mlp.in", Added(x, recorder.Tap(name + "attn.out", *attended), p));
  const TensorPtr mlp =
      steps.mlp(tp, steps.rms_norm(x, *w.post_norm, eps, p), w, p, recorder.RankPartials(tp, name + "mlp.out"));
  return recorder.Tap(name + "out", Added(x, recorder.Tap(name + "mlp.out", *mlp), p));
}

// The residual stream [T, hidden] entering the final norm: the embedding, then every layer (MT-1.1).
HostTensor Decoder(const TensorParallel& tp, const Qwen3Config& c, const Qwen3Weights& w, const std::vector<std::int64_t>& ids,
                   Precision p, TapRecorder& recorder) {
  HostTensor x = recorder.Tap("embed", *VocabParallelEmbeddingForward(tp, ids, w.at("model.embed_tokens.weight")));
  for (int layer = 0; layer < c.layers; ++layer) x = DecoderLayer(tp, c, w, layer, std::move(x), p, recorder);
  return recorder.Fed("norm.in", std::move(x));
}

const HostTensor& LmHeadWeight(const Qwen3Config& c, const Qwen3Weights& w) {
  return w.at(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
}

// The last row of x [T, hidden]: [1, hidden].
HostTensor LastRow(const HostTensor& x) {
  const auto width = static_cast<std::ptrdiff_t>(x.shape[1]);
  return HostTensor{{1, x.shape[1]}, std::vector<float>(x.data.end() - width, x.data.end())};
}

// The lowest id of the largest logit of row `row` of logits [T, vocab].
std::int64_t Argmax(const HostTensor& logits, std::size_t row) {
  const std::size_t vocab = static_cast<std::size_t>(logits.shape[1]);
  const float* values = logits.data.data() + row * vocab;
  std::size_t best = 0;
  for (std::size_t i = 1; i < vocab; ++i)
    if (values[i] > values[best]) best = i;
  return static_cast<std::int64_t>(best);
}

}  // namespace

distributed::ModelGeometry Qwen3Geometry(const Qwen3Config& c) {
  return {c.hidden, c.num_heads, c.num_kv_heads, c.head_dim, c.ffn, c.vocab, c.tie_word_embeddings};
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> Qwen3WeightShapes(const Qwen3Config& c) {
  const std::int64_t hidden = c.hidden, q_rows = std::int64_t{c.num_heads} * c.head_dim;
  const std::int64_t kv_rows = std::int64_t{c.num_kv_heads} * c.head_dim, ffn = c.ffn, d = c.head_dim;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes = {{"model.embed_tokens.weight", {c.vocab, hidden}}};
  struct LayerTensor {
    const char* name;
    std::vector<std::int64_t> shape;
    bool given;
  };
  for (int i = 0; i < c.layers; ++i) {
    const LayerTensor layer[] = {
        {"input_layernorm.weight", {hidden}, true},         {"self_attn.q_proj.weight", {q_rows, hidden}, true},
        {"self_attn.q_proj.bias", {q_rows}, c.qkv_bias},    {"self_attn.k_proj.weight", {kv_rows, hidden}, true},
        {"self_attn.k_proj.bias", {kv_rows}, c.qkv_bias},   {"self_attn.v_proj.weight", {kv_rows, hidden}, true},
        {"self_attn.v_proj.bias", {kv_rows}, c.qkv_bias},   {"self_attn.o_proj.weight", {hidden, q_rows}, true},
        {"self_attn.o_proj.bias", {hidden}, c.o_proj_bias}, {"self_attn.q_norm.weight", {d}, true},
        {"self_attn.k_norm.weight", {d}, true},             {"post_attention_layernorm.weight", {hidden}, true},
        {"mlp.gate_proj.weight", {ffn, hidden}, true},      {"mlp.up_proj.weight", {ffn, hidden}, true},
        {"mlp.down_proj.weight", {hidden, ffn}, true}};
    for (const LayerTensor& tensor : layer)
      if (tensor.given) shapes.emplace_back(LayerName(i, tensor.name), tensor.shape);
  }
  shapes.emplace_back("model.norm.weight", std::vector<std::int64_t>{hidden});
  if (!c.tie_word_embeddings) shapes.emplace_back("lm_head.weight", std::vector<std::int64_t>{c.vocab, hidden});
  return shapes;
}

GreedyDecode Qwen3GreedyOnRank(const TensorParallel& tp, const Qwen3Config& c, const Qwen3Weights& w,
                               const std::vector<std::int64_t>& prompt, int steps) {
  GreedyDecode out;
  out.logits = Zeros(steps, c.vocab);
  std::vector<std::int64_t> sequence = prompt;
  TapRecorder untapped;
  for (int step = 0; step < steps; ++step) {
    const HostTensor x = Decoder(tp, c, w, sequence, kFloat32, untapped);
    const HostTensor last = LastRow(RmsNorm(x, w.at("model.norm.weight"), c.rms_norm_eps, kFloat32));
    const TensorPtr logits = ParallelLmHeadForward(tp, last, LmHeadWeight(c, w), kFloat32);
    std::copy(logits->data.begin(), logits->data.end(),
              out.logits.data.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(step) * static_cast<std::size_t>(c.vocab)));
    out.tokens.push_back(Argmax(*logits, 0));
    sequence.push_back(out.tokens.back());
  }
  return out;
}

GreedyDecode Qwen3GreedyDecode(int tp, const Qwen3Config& c, const Qwen3Weights& w, const std::vector<std::int64_t>& prompt,
                               int steps) {
  distributed::BuildShardPlan(Qwen3Geometry(c), tp);  // the plan's refusal, before any rank thread starts (TP-4.8)
  const std::vector<GreedyDecode> ranks = distributed::RunOnRanks<GreedyDecode>(
      tp, [&](const TensorParallel& handle) { return Qwen3GreedyOnRank(handle, c, w, prompt, steps); });
  for (std::size_t r = 1; r < ranks.size(); ++r)
    for (int step = 0; step < steps; ++step) {
      const std::size_t at = static_cast<std::size_t>(step) * static_cast<std::size_t>(c.vocab);
      const bool same = ranks[r].tokens[static_cast<std::size_t>(step)] == ranks[0].tokens[static_cast<std::size_t>(step)] &&
                        std::memcmp(ranks[r].logits.data.data() + at, ranks[0].logits.data.data() + at,
                                    sizeof(float) * static_cast<std::size_t>(c.vocab)) == 0;
      if (!same)
        throw std::runtime_error("rank " + std::to_string(r) + " of tp=" + std::to_string(tp) + " disagrees with rank 0 at step " +
                                 std::to_string(step) + " (its token " + std::to_string(ranks[r].tokens[static_cast<std::size_t>(step)]) +
                                 ", rank 0's " + std::to_string(ranks[0].tokens[static_cast<std::size_t>(step)]) + ", or its logits)");
    }
  return ranks[0];
}

Qwen3Weights Qwen3WeightsIn(const Qwen3Weights& weights, Precision precision) {
  Qwen3Weights out = weights;
  for (auto& entry : out) RoundInPlace(precision, entry.second);
  return out;
}

Taps Qwen3TapsOnRank(const TensorParallel& tp, const Qwen3Config& c, const Qwen3Weights& w, const std::vector<std::int64_t>& ids,
                     const Feed& feed, Precision p, bool rank_partials) {
  TapRecorder recorder(&feed, rank_partials);
  const HostTensor x = Decoder(tp, c, w, ids, p, recorder);
  const HostTensor normed = recorder.Tap("norm.out", RmsNorm(x, w.at("model.norm.weight"), c.rms_norm_eps, p));
  recorder.Tap("logits", *ParallelLmHeadForward(tp, normed, LmHeadWeight(c, w), p));
  return recorder.Release();
}

Taps Qwen3DecoderTaps(int tp, const Qwen3Config& c, const Qwen3Weights& w, const std::vector<std::int64_t>& ids,
                      const Feed& feed, Precision p, bool rank_partials) {
  distributed::BuildShardPlan(Qwen3Geometry(c), tp);  // the plan's refusal, before any rank thread starts (TP-4.8)
  const Qwen3Weights in_precision = Qwen3WeightsIn(w, p);
  const std::vector<Taps> ranks = distributed::RunOnRanks<Taps>(
      tp, [&](const TensorParallel& handle) { return Qwen3TapsOnRank(handle, c, in_precision, ids, feed, p, rank_partials); });
  for (std::size_t r = 1; r < ranks.size(); ++r) {
    const bool same_names = ranks[r].size() == ranks[0].size() &&
                            std::equal(ranks[r].begin(), ranks[r].end(), ranks[0].begin(),
                                       [](const auto& a, const auto& b) { return a.first == b.first; });
    if (!same_names) throw std::runtime_error("decoder-taps: rank " + std::to_string(r) + " reports other taps than rank 0");
    for (std::size_t i = 0; i < ranks[0].size(); ++i) {
      const HostTensor& theirs = ranks[r][i].second;
      const HostTensor& ours = ranks[0][i].second;
      if (theirs.shape != ours.shape || std::memcmp(theirs.data.data(), ours.data.data(), sizeof(float) * ours.data.size()) != 0)
        throw std::runtime_error("decoder-taps: rank " + std::to_string(r) + "'s tap '" + ranks[0][i].first + "' differs from rank 0's");
    }
  }
  return ranks[0];
}

}  // namespace vllm::model_executor
