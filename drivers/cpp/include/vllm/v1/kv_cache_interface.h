// KV-cache layer specs, groups and the bytes one KV block costs (ROAD-V1-MEM M2).
//
// Ported from the Python port impl/v1/kv_cache_interface.py (which mirrors vllm/v1/kv_cache_interface.py);
// names, field names and the spec hierarchy follow the C++ port, jefby/vllm.cpp
// include/vllm/v1/kv_cache_interface.h:
//   KVCacheSpec -> AttentionSpec -> FullAttentionSpec -> MLAAttentionSpec
//                                -> SlidingWindowSpec
//                                -> ChunkedLocalAttentionSpec
//               -> MambaSpec
// Differences from that header, on purpose: integer fields are int64_t (a case input or a config.json can hold
// any int, and the Python port's arithmetic never wraps); every kv_quant_mode the Python port lays out has its
// page-size formula here (per-token-head fp32 scales, NVFP4 packing, fp8_ds_mla's 656-byte entry) instead of a
// throw; a spec checks its fields with Validate() (Python's __post_init__), which MakeSpec calls.
//
// Page sizes (bytes of one page of block_size tokens):
//   AttentionSpec (sliding window, chunked local) = 2 * block_size * num_kv_heads * head_size * itemsize
//   FullAttentionSpec  = block_size * num_kv_heads * (K width + V width) * itemsize   (NVFP4: packed widths, K and
//                        V equal, as vLLM 0.33.0's FlashInfer layout)
//   MLAAttentionSpec   = block_size * num_kv_heads * head_size * itemsize  -- one latent, NO K+V factor 2, and
//                        head_size_v 0 (vLLM 0.33.0's default; any other width is refused);
//                        fp8_ds_mla: block_size * 656
//   + per-token-head modes: 2 * block_size * num_kv_heads * 4 bytes of fp32 scales, part of the real page
//     (vLLM 0.33.0's real_page_size_bytes once the backend packs them inline)
//   MambaSpec          = sum over state tensors of prod(shape) * itemsize
//   page_size_bytes    = page_size_padded when set (never below the real page), else the real page.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vllm/v1/dtypes.h"

namespace vllm::v1 {

// Upstream KVCacheSpecKind, as the C++ port lists it.
enum class KVCacheSpecKind {
  kFullAttention,
  kMlaAttention,
  kSlidingWindow,
  kSlidingWindowMla,
  kMamba,
  kChunkedLocalAttention,
  kSinkFullAttention,
  kEncoderOnlyAttention,
  kCrossAttention,
  kUnknown,
};

// vLLM 0.33.0's KVQuantMode (vllm/v1/kv_cache_interface.py): every member, with its value. Only kNone,
// kFp8PerTensor, kInt8PerTokenHead, kFp8PerTokenHead and kNvfp4 have page layouts here (IsLaidOut); Validate()
// refuses the others. vLLM's alias CUSTOM = 12 is kOctaveK3v4 (KVQuantModeMembers lists it).
enum class KVQuantMode : uint8_t {
  kNone = 0,
  kFp8PerTensor = 1,
  kInt8PerTokenHead = 2,
  kFp8PerTokenHead = 3,
  kInt4PerTokenHead = 4,
  kNvfp4 = 5,
  kTurboquantK8v4 = 6,
  kTurboquant4bitNc = 7,
  kTurboquantK3v4Nc = 8,
  kTurboquant3bitNc = 9,
  kNvfp4DsMla = 10,
  kUltraquant4bit = 11,
  kOctaveK3v4 = 12,
  kOctaveK3v3 = 13,
  kOctaveK3v3Compact = 14,
};

// vLLM's member name ("NONE", "FP8_PER_TENSOR", ..., "NVFP4", ..., "OCTAVE_K3V3_COMPACT"), never the alias CUSTOM.
const char* KVQuantModeName(KVQuantMode mode);
// Every member name in declaration order, the alias CUSTOM last, with its mode (as KVQuantMode.__members__).
const std::vector<std::pair<std::string, KVQuantMode>>& KVQuantModeMembers();
// The mode a member name (or the alias CUSTOM) names; std::nullopt otherwise.
std::optional<KVQuantMode> KVQuantModeByName(const std::string& name);
// Modes that keep per-token-head scales (vLLM's is_per_token_head: INT8, FP8 and INT4).
bool IsPerTokenHead(KVQuantMode mode);
// The modes whose pages this port computes.
bool IsLaidOut(KVQuantMode mode);
// The quantization mode a kv_cache_dtype string implies, as vLLM 0.33.0's get_kv_quant_mode (no platform handler):
// std::invalid_argument for a turboquant_/octave_ name that is no member (vLLM's KeyError).
KVQuantMode kv_quant_mode_for(const std::string& cache_dtype);
// Bytes one head of `width` elements takes in NVFP4: two values a byte plus one fp8 scale per 16.
int64_t nvfp4_bytes_per_head(int64_t width);

inline constexpr const char* kFp8DsMla = "fp8_ds_mla";
inline constexpr int64_t kFp8DsMlaBytesPerToken = 656;
inline constexpr int64_t kFp8DsMlaHeadSize = 576;
inline constexpr int64_t kFloat32Bytes = 4;

// The KV cache format of one layer. (Upstream: @dataclass(frozen=True) KVCacheSpec.)
struct KVCacheSpec {
  explicit KVCacheSpec(int64_t block_size) : block_size(block_size) {}
  virtual ~KVCacheSpec() = default;

  int64_t block_size;  // tokens in a block

  // Bytes of one page (block_size tokens) of this layer, padding included.
  virtual int64_t page_size_bytes() const = 0;
  virtual int64_t storage_block_size() const { return block_size; }
  virtual KVCacheSpecKind kind() const = 0;
  // The upstream class name ("FullAttentionSpec"), which the refusals start with.
  virtual const char* type_name() const = 0;
  // Most bytes one request of max_model_len tokens can hold in this layer (max_num_batched_tokens unset:
  // max_model_len).
  virtual int64_t max_memory_usage_bytes(int64_t max_model_len,
                                         std::optional<int64_t> max_num_batched_tokens = std::nullopt) const = 0;

  // Refuse invalid fields, then a padded page below the real one (Python's __post_init__). Throws
  // std::invalid_argument worded as the Python port.
  void Validate() const {
    check_fields();
    check_page();
  }

 protected:
  virtual void check_fields() const;
  virtual void check_page() const {}
};

// Paged K and V of one attention layer. (Upstream: AttentionSpec.)
struct AttentionSpec : KVCacheSpec {
  AttentionSpec(int64_t block_size, int64_t num_kv_heads, int64_t head_size, DType dtype,
                KVQuantMode kv_quant_mode = KVQuantMode::kNone,
                std::optional<int64_t> page_size_padded = std::nullopt)
      : KVCacheSpec(block_size),
        num_kv_heads(num_kv_heads),
        head_size(head_size),
        dtype(std::move(dtype)),
        kv_quant_mode(kv_quant_mode),
        page_size_padded(page_size_padded) {}

  int64_t num_kv_heads;
  int64_t head_size;
  DType dtype;
  KVQuantMode kv_quant_mode;
  std::optional<int64_t> page_size_padded;

  int64_t page_size_bytes() const override;
  // K and V values of block_size tokens, without scales.
  virtual int64_t data_page_size_bytes() const;
  // fp32 K and V scales per token and head (per-token-head modes), else 0.
  int64_t scale_bytes_per_page() const;
  // The unpadded page, scales included (vLLM's real_page_size_bytes): the floor for page_size_padded.
  int64_t real_page_size_bytes() const;
  // The same size under vLLM's other name.
  int64_t unpadded_page_size_bytes() const { return real_page_size_bytes(); }

 protected:
  void check_fields() const override;
  void check_page() const override;
};

// Every token's K and V is kept; V may be narrower or wider than K. sliding_window / attention_chunk_size record
// a layer computed locally but cached in full. (Upstream: FullAttentionSpec.)
struct FullAttentionSpec : AttentionSpec {
  FullAttentionSpec(int64_t block_size, int64_t num_kv_heads, int64_t head_size, DType dtype,
                    std::optional<int64_t> head_size_v = std::nullopt,
                    KVQuantMode kv_quant_mode = KVQuantMode::kNone,
                    std::optional<int64_t> page_size_padded = std::nullopt,
                    std::optional<int64_t> sliding_window = std::nullopt,
                    std::optional<int64_t> attention_chunk_size = std::nullopt)
      : AttentionSpec(block_size, num_kv_heads, head_size, std::move(dtype), kv_quant_mode, page_size_padded),
        head_size_v(head_size_v.value_or(head_size)),
        sliding_window(sliding_window),
        attention_chunk_size(attention_chunk_size) {}

  int64_t head_size_v;
  std::optional<int64_t> sliding_window;
  std::optional<int64_t> attention_chunk_size;

  int64_t data_page_size_bytes() const override;
  int64_t max_memory_usage_bytes(int64_t max_model_len,
                                 std::optional<int64_t> max_num_batched_tokens = std::nullopt) const override;
  KVCacheSpecKind kind() const override { return KVCacheSpecKind::kFullAttention; }
  const char* type_name() const override { return "FullAttentionSpec"; }

 protected:
  void check_fields() const override;
  // head_size_v >= 1 (MLA: exactly 0).
  virtual void check_head_size_v() const;
};

// Multi-head latent attention: one compressed latent per token (head_size = kv_lora_rank + qk_rope_head_dim),
// no separate V (head_size_v 0). cache_dtype_str "fp8_ds_mla" is DeepSeek's fixed 656-byte entry.
// (Upstream: MLAAttentionSpec.)
struct MLAAttentionSpec : FullAttentionSpec {
  MLAAttentionSpec(int64_t block_size, int64_t head_size, DType dtype, int64_t num_kv_heads = 1,
                   KVQuantMode kv_quant_mode = KVQuantMode::kNone,
                   std::optional<int64_t> page_size_padded = std::nullopt,
                   std::optional<std::string> cache_dtype_str = std::nullopt)
      : FullAttentionSpec(block_size, num_kv_heads, head_size, std::move(dtype), /*head_size_v=*/0,
                          kv_quant_mode, page_size_padded),
        cache_dtype_str(std::move(cache_dtype_str)) {}

  std::optional<std::string> cache_dtype_str;

  int64_t data_page_size_bytes() const override;
  KVCacheSpecKind kind() const override { return KVCacheSpecKind::kMlaAttention; }
  const char* type_name() const override { return "MLAAttentionSpec"; }

 protected:
  void check_fields() const override;
  void check_head_size_v() const override;
};

// Attention over the last sliding_window tokens; older pages can be freed. (Upstream: SlidingWindowSpec.)
struct SlidingWindowSpec : AttentionSpec {
  SlidingWindowSpec(int64_t block_size, int64_t num_kv_heads, int64_t head_size, DType dtype, int64_t sliding_window,
                    KVQuantMode kv_quant_mode = KVQuantMode::kNone,
                    std::optional<int64_t> page_size_padded = std::nullopt)
      : AttentionSpec(block_size, num_kv_heads, head_size, std::move(dtype), kv_quant_mode, page_size_padded),
        sliding_window(sliding_window) {}

  int64_t sliding_window;

  int64_t max_memory_usage_bytes(int64_t max_model_len,
                                 std::optional<int64_t> max_num_batched_tokens = std::nullopt) const override;
  KVCacheSpecKind kind() const override { return KVCacheSpecKind::kSlidingWindow; }
  const char* type_name() const override { return "SlidingWindowSpec"; }

 protected:
  void check_fields() const override;
};

// Attention within fixed chunks of attention_chunk_size tokens. (Upstream: ChunkedLocalAttentionSpec.)
struct ChunkedLocalAttentionSpec : AttentionSpec {
  ChunkedLocalAttentionSpec(int64_t block_size, int64_t num_kv_heads, int64_t head_size, DType dtype,
                            int64_t attention_chunk_size, KVQuantMode kv_quant_mode = KVQuantMode::kNone,
                            std::optional<int64_t> page_size_padded = std::nullopt)
      : AttentionSpec(block_size, num_kv_heads, head_size, std::move(dtype), kv_quant_mode, page_size_padded),
        attention_chunk_size(attention_chunk_size) {}

  int64_t attention_chunk_size;

  int64_t max_memory_usage_bytes(int64_t max_model_len,
                                 std::optional<int64_t> max_num_batched_tokens = std::nullopt) const override;
  KVCacheSpecKind kind() const override { return KVCacheSpecKind::kChunkedLocalAttention; }
  const char* type_name() const override { return "ChunkedLocalAttentionSpec"; }

 protected:
  void check_fields() const override;
};

// Recurrent state of a Mamba / gated-delta-net layer: fixed-size tensors per sequence slot, not per block.
// (Upstream: MambaSpec.)
struct MambaSpec : KVCacheSpec {
  MambaSpec(int64_t block_size, std::vector<std::vector<int64_t>> shapes, std::vector<DType> dtypes,
            std::optional<int64_t> page_size_padded = std::nullopt, std::string mamba_cache_mode = "none",
            int64_t num_speculative_blocks = 0, std::string mamba_type = "mamba2",
            int64_t num_prefill_checkpoint_blocks = 0)
      : KVCacheSpec(block_size),
        shapes(std::move(shapes)),
        dtypes(std::move(dtypes)),
        page_size_padded(page_size_padded),
        mamba_cache_mode(std::move(mamba_cache_mode)),
        num_speculative_blocks(num_speculative_blocks),
        mamba_type(std::move(mamba_type)),
        num_prefill_checkpoint_blocks(num_prefill_checkpoint_blocks) {}

  std::vector<std::vector<int64_t>> shapes;
  std::vector<DType> dtypes;
  std::optional<int64_t> page_size_padded;
  std::string mamba_cache_mode;  // "none" or "align" (vLLM 0.33.0's MambaCacheMode)
  int64_t num_speculative_blocks;
  std::string mamba_type;
  int64_t num_prefill_checkpoint_blocks;  // align mode: extra resident states

  // Sum over the state tensors of elements * itemsize.
  int64_t real_page_size_bytes() const;
  int64_t page_size_bytes() const override;
  int64_t max_memory_usage_bytes(int64_t max_model_len,
                                 std::optional<int64_t> max_num_batched_tokens = std::nullopt) const override;
  KVCacheSpecKind kind() const override { return KVCacheSpecKind::kMamba; }
  const char* type_name() const override { return "MambaSpec"; }

 protected:
  void check_fields() const override;
  void check_page() const override;
};

// Construct a spec and Validate() it, as constructing the Python dataclass does.
template <typename Spec, typename... Args>
std::shared_ptr<Spec> MakeSpec(Args&&... args) {
  auto spec = std::make_shared<Spec>(std::forward<Args>(args)...);
  spec->Validate();
  return spec;
}

// One allocation of `size` bytes shared by the named layers. (Upstream: KVCacheTensor.)
struct KVCacheTensor {
  int64_t size;
  std::vector<std::string> shared_by;
  int64_t offset = 0;
  int64_t block_stride = 0;
};

// Layers that share one spec and one block table. (Upstream: KVCacheGroupSpec.) Validate() refuses an empty or
// repeating layer list, as the Python port's __post_init__.
struct KVCacheGroupSpec {
  KVCacheGroupSpec(std::vector<std::string> layer_names, std::shared_ptr<KVCacheSpec> kv_cache_spec,
                   bool is_eagle_group = false)
      : layer_names(std::move(layer_names)), kv_cache_spec(std::move(kv_cache_spec)), is_eagle_group(is_eagle_group) {}

  std::vector<std::string> layer_names;
  std::shared_ptr<KVCacheSpec> kv_cache_spec;
  bool is_eagle_group = false;

  void Validate() const;
};

// The KV pool of one worker. per_layer_attn_specs is the heterogeneous-KV form (one entry per decoder layer,
// nullptr for a layer without attention KV such as a GDN layer); when non-empty it, not the groups, sizes a block.
// (Upstream: KVCacheConfig; per_layer_attn_specs is the C++ port's addition.)
struct KVCacheConfig {
  int64_t num_blocks = 0;
  std::vector<KVCacheTensor> kv_cache_tensors;
  std::vector<KVCacheGroupSpec> kv_cache_groups;
  std::vector<std::shared_ptr<AttentionSpec>> per_layer_attn_specs = {};

  bool has_mamba_layers() const;
  bool needs_kv_cache_zeroing() const { return has_mamba_layers(); }
};

// The bytes one more KV block costs across all layers: what a byte budget is divided by (MEM-2.1).
// Per-layer specs when present (nullptr entries skipped); else each attention group's page times its layer
// count. Mamba/GDN state is per sequence slot, not per block, and counts 0.
int64_t KVBytesPerBlock(const KVCacheConfig& config);

}  // namespace vllm::v1
