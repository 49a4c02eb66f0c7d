// The sizing step of vllm_engine_load (include/vllm/capi/load.h).
#include "vllm/capi/load.h"

namespace vllm::capi {
namespace {

using vllm::entrypoints::LoadedEngine;
using vllm::entrypoints::NoKVBytesPerBlockError;

// The member whose value the pool resolution acted on (the one a resolution error is about).
const char* SizingMember(const EngineParams& params) {
  if (params.num_blocks > 0) return "num_blocks";
  return params.kv_cache_memory_bytes > 0 ? "kv_cache_memory_bytes" : "gpu_memory_utilization";
}

}  // namespace

const char* StatusName(vllm_status status) {
  switch (status) {
    case VLLM_OK: return "VLLM_OK";
    case VLLM_ERR_INVALID_ARGUMENT: return "VLLM_ERR_INVALID_ARGUMENT";
    case VLLM_ERR_MODEL_LOAD: return "VLLM_ERR_MODEL_LOAD";
    case VLLM_ERR_RUNTIME: return "VLLM_ERR_RUNTIME";
    case VLLM_ERR_UNKNOWN: return "VLLM_ERR_UNKNOWN";
  }
  return "VLLM_ERR_UNKNOWN";
}

LoadResult EngineLoad(const vllm_model_params& params, const vllm::v1::KVCacheConfig& probe) {
  LoadResult result;
  EngineParams engine;
  try {
    engine = EngineParamsFromC(params);
  } catch (const InvalidArgument& err) {
    result.status = VLLM_ERR_INVALID_ARGUMENT;
    result.error = err.what();
    return result;
  }
  try {
    const int blocks = LoadedEngine::ResolveNumBlocks(engine, probe);
    result.engine_params = engine;
    result.num_blocks = blocks;
  } catch (const NoKVBytesPerBlockError& err) {  // the model, not an argument, cannot be sized
    result.status = VLLM_ERR_MODEL_LOAD;
    result.error = err.what();
  } catch (const std::invalid_argument& err) {
    result.status = VLLM_ERR_INVALID_ARGUMENT;
    result.error = std::string("vllm_model_params.") + SizingMember(engine) + ": " + err.what();
  } catch (const std::runtime_error& err) {
    result.status = VLLM_ERR_MODEL_LOAD;
    result.error = err.what();
  }
  return result;
}

}  // namespace vllm::capi
