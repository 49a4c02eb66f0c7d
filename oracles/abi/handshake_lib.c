/*
 * The smallest library a header can build: the version handshake and a
 * zero-filled default (spec/c-abi.md CAPI-8.1). Used to build libraries from
 * variant headers, whose members need not match the v16 ones.
 */
#include <stdint.h>
#include <string.h>

#include "vllm.h"

int32_t vllm_abi_version(void) { return VLLM_ABI_VERSION; }

vllm_model_params vllm_model_params_default(void) {
  vllm_model_params params;
  memset(&params, 0, sizeof params);
  return params;
}
