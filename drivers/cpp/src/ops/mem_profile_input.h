// Case inputs of the ROAD-V1-MEM M3 profile gates, as gates/rows/road_v1_mem/build_profile.py reads them: a
// recorded fixture (gates/rows/road_v1_mem/fixtures/snapshots/NAME.yaml) with the case's fields laid over it, or
// the same fields inline: device, gpu_memory_utilization, weights_memory, snapshots {before_create,
// before_profile, after_profile}, and for the block gates kv, kv_cache_memory_bytes and profiled.
#pragma once

#include "mem_common.h"
#include "vllm/v1/kv_cache_interface.h"
#include "vllm/worker/memory_profiler.h"

namespace gates::mem {

// The case input with its fixture (if any) loaded and the case's fields laid over it, its keys checked.
Value ResolveProfileInput(const Value& data);

// The profiling result of resolved fields (each snapshot validated in turn, then the result).
vllm::worker::MemoryProfilingResult ProfilingResult(const Value& fields);

// A one-group KV config of kv.num_layers full-attention layers.
vllm::v1::KVCacheConfig KVProbe(const Value& kv);

}  // namespace gates::mem
