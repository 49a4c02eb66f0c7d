// The port's C entry points of the model-parameter ABI: vllm_model_params_default() and vllm_abi_version()
// (spec/c-abi.md CAPI-1.5, CAPI-4.1, CAPI-8.1; the C++ port's src/vllm_c.cpp). The defaults are the header's:
// strings NULL, block_size 32, max_num_seqs 32 (the engine's; the port's header comment said 8),
// gpu_memory_utilization 0.92, every other member 0 (num_blocks 0: sized automatically since v16).
#include <cstring>

#include "vllm/capi/vllm_h.h"

extern "C" {

vllm_model_params vllm_model_params_default(void) {
  vllm_model_params params;
  std::memset(&params, 0, sizeof params);
  params.block_size = 32;
  params.max_num_seqs = 32;
  params.gpu_memory_utilization = 0.92;
  return params;
}

int32_t vllm_abi_version(void) { return VLLM_ABI_VERSION; }

}  // extern "C"
