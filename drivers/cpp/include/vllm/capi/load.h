// The sizing step of vllm_engine_load and its status mapping (spec/c-abi.md CAPI-9.1 to CAPI-9.4; the C++ port's
// src/vllm_c.cpp, except that a KV budget below one block, or one giving more blocks than the int32_t num_blocks
// holds, is VLLM_ERR_INVALID_ARGUMENT as the header promises; ported from impl/capi/load.py). Never throws for a
// bad argument: it reports a status and a message.
#pragma once

#include <optional>
#include <string>

#include "vllm/capi/convert.h"
#include "vllm/v1/kv_cache_interface.h"

namespace vllm::capi {

struct LoadResult {
  vllm_status status = VLLM_OK;
  std::optional<std::string> error;                 // the last-error text
  std::optional<EngineParams> engine_params;        // on VLLM_OK
  std::optional<int> num_blocks;                    // on VLLM_OK
};

// Read `params` and size the KV pool for the model `probe`, without a memory profile.
LoadResult EngineLoad(const vllm_model_params& params, const vllm::v1::KVCacheConfig& probe);

const char* StatusName(vllm_status status);

}  // namespace vllm::capi
