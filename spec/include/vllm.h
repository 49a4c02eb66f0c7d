/*
 * vllm.h: the normative C ABI of the engine's model parameters, ABI version 16.
 *
 * Requirements: spec/c-abi.md (CAPI-1 to CAPI-9). Facts carried over from the
 * C++ port's include/vllm.h and vllm_c.cpp; this text is written for this repo.
 *
 * Rules of the struct below:
 *   - It only grows at its end. A field, once released, keeps its name, type
 *     and offset in every later version.
 *   - Every field is annotated with the version that appended it, as "[vN]" at
 *     the start of its comment, and the history below names it as "+name".
 *   - A zero value keeps the behaviour of the version before the field existed,
 *     so a caller that zero-fills the struct and sets only the fields it knows
 *     gets what it got before.
 *   - VLLM_ABI_VERSION is the version of the newest field: a new field bumps
 *     it, and it is not bumped without a new field.
 *
 * Version history (entries without "+name" changed entry points outside this
 * header's scope, not vllm_model_params):
 *   v1   +model_path +tokenizer_config_path +block_size +num_blocks
 *        +max_model_len +max_num_seqs: the first engine-load parameters.
 *   v2   outside this struct (sampling parameters).
 *   v3   outside this struct (sampling parameters).
 *   v4   +tool_parser: explicit tool-call parser for the chat entry points.
 *   v5   +reasoning_parser: explicit reasoning parser for the chat entry points.
 *   v6   +speculative_config: speculative decoding, as a JSON document.
 *   v7   +enable_prefix_caching: prefix caching tri-state.
 *   v8   outside this struct (chat entry points).
 *   v9   +max_num_batched_tokens +scheduling_policy +kv_transfer_config:
 *        step token budget, admission policy, external KV connector;
 *        tokenizer_config_path is honoured from this version on.
 *   v10  +enable_jump_forward: jump-forward decoding tri-state.
 *   v11  speech transcription entry points.
 *   v12  video entry points.
 *   v13  completion from token ids.
 *   v14  +device: device selection.
 *   v15  embedding entry points.
 *   v16  +gpu_memory_utilization +kv_cache_memory_bytes: the KV-pool sizing
 *        knobs; num_blocks <= 0 now means "size automatically".
 */
#ifndef VLLM_H_
#define VLLM_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VLLM_ABI_VERSION 16

/* What a fallible entry point returns. On an error the library keeps a message
 * that names the offending field or file. */
typedef enum vllm_status {
  VLLM_OK = 0,
  VLLM_ERR_INVALID_ARGUMENT = 1, /* a NULL, malformed or out-of-range argument,
                                    including a KV budget below one block */
  VLLM_ERR_MODEL_LOAD = 2,       /* the model, tokenizer or weights failed */
  VLLM_ERR_RUNTIME = 3,          /* a failure while the engine runs */
  VLLM_ERR_UNKNOWN = 4           /* anything else */
} vllm_status;

/* Parameters of an engine load. Plain data, passed by value or by pointer.
 * Start from vllm_model_params_default() and change what you need. Strings are
 * UTF-8, NUL-terminated, borrowed for the duration of the call that reads
 * them; NULL means "not given". */
typedef struct vllm_model_params {
  /* [v1] Model directory or file. Required by the load. */
  const char *model_path;
  /* [v1] Tokenizer config to read instead of the model's own; NULL: the
   * model's own. Read from v9 on. */
  const char *tokenizer_config_path;
  /* [v1] Tokens per KV block. <= 0: 32. */
  int32_t block_size;
  /* [v1] KV blocks in the pool. > 0: exactly this many (an override).
   * <= 0: sized automatically from the v16 knobs below; with neither knob
   * set, the engine's fallback pool. Before v16 the default was 256. */
  int32_t num_blocks;
  /* [v1] Longest sequence in tokens. <= 0: from the model config. */
  int32_t max_model_len;
  /* [v1] Sequences scheduled at once. <= 0: the engine default, 32. */
  int32_t max_num_seqs;
  /* [v4] Tool-call parser name. NULL or "": detected from the chat
   * template. */
  const char *tool_parser;
  /* [v5] Reasoning parser name. NULL or "": detected from the chat
   * template; "none": off. */
  const char *reasoning_parser;
  /* [v6] Speculative decoding config, a JSON object. NULL or "": off. */
  const char *speculative_config;
  /* [v7] Prefix caching: 0 the model's default, 1 on, 2 off. Any other
   * value is VLLM_ERR_INVALID_ARGUMENT. */
  int32_t enable_prefix_caching;
  /* [v9] Tokens admitted per scheduler step. <= 0: the engine default. */
  int32_t max_num_batched_tokens;
  /* [v9] Admission order: "fcfs", "priority" or "lpm". NULL or "":
   * "fcfs". */
  const char *scheduling_policy;
  /* [v9] External KV connector config, a JSON object. NULL or "": none. */
  const char *kv_transfer_config;
  /* [v10] Jump-forward decoding: 0 the default (off), 1 on, 2 off. Any
   * other value is VLLM_ERR_INVALID_ARGUMENT. */
  int32_t enable_jump_forward;
  /* [v14] Device: 0 auto (accelerator first), 1 cpu, 2 cuda. Any other
   * value is VLLM_ERR_INVALID_ARGUMENT. */
  int32_t device;
  /* [v16] Fraction of total device memory the engine may use, in (0, 1].
   * 0.0: the default, 0.92, and the caller counts as not having chosen one.
   * Below 0, above 1 or NaN: VLLM_ERR_INVALID_ARGUMENT. Consulted only when
   * num_blocks <= 0 and kv_cache_memory_bytes == 0. */
  double gpu_memory_utilization;
  /* [v16] Bytes of KV cache to allocate. 0: unset. > 0: the pool is
   * floor(bytes / bytes per block) blocks and gpu_memory_utilization is not
   * consulted; a budget below one block is VLLM_ERR_INVALID_ARGUMENT.
   * Negative: VLLM_ERR_INVALID_ARGUMENT. Ignored when num_blocks > 0. */
  int64_t kv_cache_memory_bytes;
} vllm_model_params;

/* The defaults: every string NULL, block_size 32, num_blocks 0,
 * max_model_len 0, max_num_seqs 32, the tri-states, max_num_batched_tokens
 * and device 0, gpu_memory_utilization 0.92, kv_cache_memory_bytes 0. */
vllm_model_params vllm_model_params_default(void);

/* The VLLM_ABI_VERSION the library was built with. A caller built against
 * another version must refuse the library. */
int32_t vllm_abi_version(void);

#ifdef __cplusplus
}
#endif

#endif /* VLLM_H_ */
