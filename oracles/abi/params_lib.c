/*
 * A stand-in engine library compiled from the spec header: the documented
 * defaults, the ABI version, a field-by-field copy and the documented checks
 * (spec/c-abi.md CAPI-4, CAPI-6, CAPI-8, CAPI-9). Written from the header's
 * comments, not from any Python code; mirrors the C++ port's vllm_c.cpp.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vllm.h"

#define ORACLE_FALLBACK_NUM_BLOCKS 256

vllm_model_params vllm_model_params_default(void) {
  vllm_model_params p;
  memset(&p, 0, sizeof p);
  p.model_path = NULL;
  p.tokenizer_config_path = NULL;
  p.block_size = 32;
  p.num_blocks = 0;
  p.max_model_len = 0;
  p.max_num_seqs = 32;
  p.tool_parser = NULL;
  p.reasoning_parser = NULL;
  p.speculative_config = NULL;
  p.enable_prefix_caching = 0;
  p.max_num_batched_tokens = 0;
  p.scheduling_policy = NULL;
  p.kv_transfer_config = NULL;
  p.enable_jump_forward = 0;
  p.device = 0;
  p.gpu_memory_utilization = 0.92;
  p.kv_cache_memory_bytes = 0;
  return p;
}

int32_t vllm_abi_version(void) { return VLLM_ABI_VERSION; }

/* The default struct written through a pointer, so a reader needs no by-value return. */
void vllm_oracle_default_into(vllm_model_params *out) { *out = vllm_model_params_default(); }

/* Another library's vllm_model_params_default(), called by value and written through a pointer. */
void vllm_oracle_default_via(vllm_model_params (*make_default)(void), vllm_model_params *out) {
  *out = make_default();
}

static const char *oracle_dup(const char *text, int *failed) {
  size_t length;
  char *copy;
  if (text == NULL) return NULL;
  length = strlen(text);
  copy = malloc(length + 1);
  if (copy == NULL) {
    *failed = 1;
    return NULL;
  }
  memcpy(copy, text, length + 1);
  return copy;
}

/* Frees the strings vllm_oracle_copy allocated into *params. */
void vllm_oracle_release(vllm_model_params *params) {
  free((void *)params->model_path);
  free((void *)params->tokenizer_config_path);
  free((void *)params->tool_parser);
  free((void *)params->reasoning_parser);
  free((void *)params->speculative_config);
  free((void *)params->scheduling_policy);
  free((void *)params->kv_transfer_config);
  memset(params, 0, sizeof *params);
}

/* Copies *src into *dst one field at a time, duplicating every string. 0 on success. */
int vllm_oracle_copy(const vllm_model_params *src, vllm_model_params *dst) {
  int failed = 0;
  memset(dst, 0, sizeof *dst);
  dst->model_path = oracle_dup(src->model_path, &failed);
  dst->tokenizer_config_path = oracle_dup(src->tokenizer_config_path, &failed);
  dst->block_size = src->block_size;
  dst->num_blocks = src->num_blocks;
  dst->max_model_len = src->max_model_len;
  dst->max_num_seqs = src->max_num_seqs;
  dst->tool_parser = oracle_dup(src->tool_parser, &failed);
  dst->reasoning_parser = oracle_dup(src->reasoning_parser, &failed);
  dst->speculative_config = oracle_dup(src->speculative_config, &failed);
  dst->enable_prefix_caching = src->enable_prefix_caching;
  dst->max_num_batched_tokens = src->max_num_batched_tokens;
  dst->scheduling_policy = oracle_dup(src->scheduling_policy, &failed);
  dst->kv_transfer_config = oracle_dup(src->kv_transfer_config, &failed);
  dst->enable_jump_forward = src->enable_jump_forward;
  dst->device = src->device;
  dst->gpu_memory_utilization = src->gpu_memory_utilization;
  dst->kv_cache_memory_bytes = src->kv_cache_memory_bytes;
  if (failed) {
    vllm_oracle_release(dst);
    return 1;
  }
  return 0;
}

/* 1 when text is NULL or well-formed UTF-8 (no overlong form, no surrogate, nothing above U+10FFFF). */
static int oracle_utf8_ok(const char *text) {
  const unsigned char *s = (const unsigned char *)text;
  if (s == NULL) return 1;
  while (*s != 0) {
    unsigned char lead = *s;
    unsigned char low = 0x80, high = 0xBF;
    int more;
    if (lead < 0x80) {
      s += 1;
      continue;
    }
    if (lead >= 0xC2 && lead <= 0xDF) {
      more = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      more = 2;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      more = 3;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return 0;
    }
    if (s[1] < low || s[1] > high) return 0;
    for (int i = 2; i <= more; ++i) {
      if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    }
    s += more + 1;
  }
  return 1;
}

static int oracle_tri_state_ok(int32_t value) { return value == 0 || value == 1 || value == 2; }

#define ORACLE_REFUSE(name)  \
  do {                       \
    *field = name;           \
    return VLLM_ERR_INVALID_ARGUMENT; \
  } while (0)

/*
 * The documented checks, in member order; then what each member means (*read,
 * with *utilization_chosen false when 0.0 stood for the default); then the pool
 * size without a memory profile: num_blocks > 0 wins, then
 * kv_cache_memory_bytes / bytes_per_block, else the 256-block fallback. On
 * refusal *field names the first bad member.
 */
int32_t vllm_oracle_check(const vllm_model_params *p, int64_t bytes_per_block, const char **field,
                          int64_t *num_blocks, vllm_model_params *read, int32_t *utilization_chosen) {
  double util = p->gpu_memory_utilization;
  *field = NULL;
  *num_blocks = 0;
  *read = *p;
  *utilization_chosen = util != 0.0;
  if (!oracle_utf8_ok(p->model_path)) ORACLE_REFUSE("model_path");
  if (!oracle_utf8_ok(p->tokenizer_config_path)) ORACLE_REFUSE("tokenizer_config_path");
  if (!oracle_utf8_ok(p->tool_parser)) ORACLE_REFUSE("tool_parser");
  if (!oracle_utf8_ok(p->reasoning_parser)) ORACLE_REFUSE("reasoning_parser");
  if (!oracle_utf8_ok(p->speculative_config)) ORACLE_REFUSE("speculative_config");
  if (!oracle_tri_state_ok(p->enable_prefix_caching)) ORACLE_REFUSE("enable_prefix_caching");
  if (!oracle_utf8_ok(p->scheduling_policy)) ORACLE_REFUSE("scheduling_policy");
  if (!oracle_utf8_ok(p->kv_transfer_config)) ORACLE_REFUSE("kv_transfer_config");
  if (!oracle_tri_state_ok(p->enable_jump_forward)) ORACLE_REFUSE("enable_jump_forward");
  if (!oracle_tri_state_ok(p->device)) ORACLE_REFUSE("device");
  if (isnan(util) || util < 0.0 || util > 1.0) ORACLE_REFUSE("gpu_memory_utilization");
  if (p->kv_cache_memory_bytes < 0) ORACLE_REFUSE("kv_cache_memory_bytes");
  if (read->block_size <= 0) read->block_size = 32;
  if (read->num_blocks <= 0) read->num_blocks = 0;
  if (read->max_model_len <= 0) read->max_model_len = 0;
  if (read->max_num_seqs <= 0) read->max_num_seqs = 32;
  if (read->max_num_batched_tokens <= 0) read->max_num_batched_tokens = 0;
  if (!*utilization_chosen) read->gpu_memory_utilization = 0.92;
  if (p->num_blocks > 0) {
    *num_blocks = p->num_blocks;
  } else if (p->kv_cache_memory_bytes > 0) {
    if (bytes_per_block <= 0 || p->kv_cache_memory_bytes < bytes_per_block) ORACLE_REFUSE("kv_cache_memory_bytes");
    *num_blocks = p->kv_cache_memory_bytes / bytes_per_block;
    /* num_blocks is an int32_t in the struct and the engine: a larger pool is refused, never wrapped. */
    if (*num_blocks > INT32_MAX) ORACLE_REFUSE("kv_cache_memory_bytes");
  } else {
    *num_blocks = ORACLE_FALLBACK_NUM_BLOCKS;
  }
  return VLLM_OK;
}
