// The tensor-parallel Qwen3-style decoder; see include/vllm/model_executor/models/qwen3.h.
#include "vllm/model_executor/models/qwen3.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "vllm/distributed/shard_plan.h"
#include "vllm/distributed/thread_world.h"
#include "vllm/model_executor/layers/layernorm.h"
#include "vllm/model_executor/layers/linear.h"
#include "vllm/model_executor/layers/rotary_embedding.h"
#include "vllm/model_executor/layers/vocab_parallel_embedding.h"

namespace vllm::model_executor {
namespace {

constexpr Precision kFloat32 = Precision::kFloat32;

std::string LayerName(int layer, const char* rest) { return "model.layers." + std::to_string(layer) + "." + rest; }

// RMSNorm of x's elements in groups of weight's width (a token's hidden vector, or one head of it for Qwen3's
// q_norm/k_norm), by the port's RMSNorm of LAYERS-NORM-ROPE on float32 rows.
HostTensor RmsNorm(const HostTensor& x, const HostTensor& weight, double eps) {
  const auto width = static_cast<std::int64_t>(weight.data.size());
  const layers::FloatTensor rows{layers::FloatType::kFloat32, {static_cast<std::int64_t>(x.data.size()) / width, width},
                                 x.data};
  const layers::FloatTensor scale{layers::FloatType::kFloat32, {width}, weight.data};
  return HostTensor{x.shape, layers::RmsNorm(rows, &scale, eps, nullptr).out.values};
}

// x [tokens, heads·head_dim], token t at position t, every head rotated whole with neox pairing by the port's rotary
// embedding of LAYERS-NORM-ROPE (its float32 cos/sin table of `tokens` positions, base theta).
HostTensor NeoxRope(const HostTensor& x, int head_dim, double theta) {
  const std::int64_t tokens = x.shape[0];
  std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) positions[static_cast<std::size_t>(t)] = t;
  const layers::FloatTensor query{layers::FloatType::kFloat32, x.shape, x.data};
  const layers::FloatTensor cache = layers::CosSinCache(head_dim, tokens, theta);
  return HostTensor{x.shape, layers::RotaryEmbedding(positions, query, nullptr, head_dim, head_dim, cache, true).first.values};
}

// Causal grouped-query attention of the heads QkvParallelForward gave this rank, their counts read off the widths:
// q [T, Hq_r·D], k and v [T, Hkv_r·D]; query head h reads KV head h / (Hq_r / Hkv_r). [T, Hq_r·D].
HostTensor CausalAttention(const HostTensor& q, const HostTensor& k, const HostTensor& v, int head_dim) {
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
        weights[j] = dot * scale;
        top = std::max(top, weights[j]);
      }
      double total = 0.0;
      for (std::size_t j = 0; j <= i; ++j) total += (weights[j] = std::exp(weights[j] - top));
      for (std::size_t c = 0; c < d; ++c) {
        double sum = 0.0;
        for (std::size_t j = 0; j <= i; ++j) sum += weights[j] * v.data[j * kv_width + kv_at + c];
        out.data[i * q_width + q_at + c] = static_cast<float>(sum / total);
      }
    }
  }
  return out;
}

void AddInPlace(HostTensor& residual, const HostTensor& update) {
  for (std::size_t i = 0; i < residual.data.size(); ++i) residual.data[i] += update.data[i];
}

// The tensor `rest` of layer `layer` where the config gives the layer one (a bias), else nullptr.
const HostTensor* GivenWeight(const Qwen3Weights& w, int layer, const char* rest, bool given) {
  return given ? &w.at(LayerName(layer, rest)) : nullptr;
}

// One decoder layer on the residual stream x [T, hidden], in place.
void DecoderLayer(const TensorParallel& tp, const Qwen3Config& c, const Qwen3Weights& w, int layer, HostTensor& x) {
  const auto weight = [&](const char* rest) -> const HostTensor& { return w.at(LayerName(layer, rest)); };
  const HostTensor normed = RmsNorm(x, weight("input_layernorm.weight"), c.rms_norm_eps);
  const QkvProjections projections{&weight("self_attn.q_proj.weight"),
                                   &weight("self_attn.k_proj.weight"),
                                   &weight("self_attn.v_proj.weight"),
                                   GivenWeight(w, layer, "self_attn.q_proj.bias", c.qkv_bias),
                                   GivenWeight(w, layer, "self_attn.k_proj.bias", c.qkv_bias),
                                   GivenWeight(w, layer, "self_attn.v_proj.bias", c.qkv_bias)};
  const QkvOutput qkv = QkvParallelForward(tp, normed, projections, {c.num_heads, c.num_kv_heads, c.head_dim}, kFloat32);
  const HostTensor q = NeoxRope(RmsNorm(*qkv.q, weight("self_attn.q_norm.weight"), c.rms_norm_eps), c.head_dim, c.rope_theta);
  const HostTensor k = NeoxRope(RmsNorm(*qkv.k, weight("self_attn.k_norm.weight"), c.rms_norm_eps), c.head_dim, c.rope_theta);
  const HostTensor attention = CausalAttention(q, k, *qkv.v, c.head_dim);
  const HostTensor* o_bias = GivenWeight(w, layer, "self_attn.o_proj.bias", c.o_proj_bias);
  AddInPlace(x, *RowParallelForward(tp, attention, weight("self_attn.o_proj.weight"), o_bias, kFloat32));
  const HostTensor post = RmsNorm(x, weight("post_attention_layernorm.weight"), c.rms_norm_eps);
  AddInPlace(x, *ParallelMlpForward(tp, post, weight("mlp.gate_proj.weight"), weight("mlp.up_proj.weight"),
                                    weight("mlp.down_proj.weight"), kFloat32));
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
  const HostTensor& embed = w.at("model.embed_tokens.weight");
  const HostTensor& lm_head = c.tie_word_embeddings ? embed : w.at("lm_head.weight");
  GreedyDecode out;
  out.logits = Zeros(steps, c.vocab);
  std::vector<std::int64_t> sequence = prompt;
  for (int step = 0; step < steps; ++step) {
    HostTensor x = *VocabParallelEmbeddingForward(tp, sequence, embed);
    for (int layer = 0; layer < c.layers; ++layer) DecoderLayer(tp, c, w, layer, x);
    const HostTensor last = LastRow(RmsNorm(x, w.at("model.norm.weight"), c.rms_norm_eps));
    const TensorPtr logits = ParallelLmHeadForward(tp, last, lm_head, kFloat32);
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

}  // namespace vllm::model_executor
