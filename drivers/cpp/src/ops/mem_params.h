// EngineParams from case data (EngineParams(**fields) in the Python port), and the plain view the sizing gates
// compare (gates/rows/road_v1_mem/subjects.py params_view).
#pragma once

#include "mem_common.h"
#include "vllm/entrypoints/model_loader.h"

namespace gates::mem {

// EngineParams(**fields): every field checked in the Python port's order, with its type and range refusals.
vllm::entrypoints::EngineParams EngineParamsFrom(const Value& fields);

// {block_size, num_blocks, kv_cache_memory_bytes, max_model_len, gpu_memory_utilization, utilization_explicit}.
Value ParamsView(const vllm::entrypoints::EngineParams& params);

// ParamsView plus the other integer members (max_num_seqs, max_num_batched_tokens, the tri-states, device), as
// gates/rows/road_v1_mem/subjects.py engine_params_view: the engine-params operation's output (MEM-1.1).
Value EngineParamsView(const vllm::entrypoints::EngineParams& params);

}  // namespace gates::mem
