// The worker's sizing path with a device measured (MEM-3.3, MEM-3.5): start-up request, profile budget, pool size.
//
// Ported from impl/worker/gpu_worker.py, which mirrors vllm/v1/worker/gpu_worker.py (init_device's memory request,
// determine_available_memory) as the engine hands the budget to vllm/v1/core/kv_cache_utils.py.
#pragma once

#include <functional>
#include <optional>

#include "vllm/entrypoints/model_loader.h"
#include "vllm/v1/kv_cache_interface.h"
#include "vllm/worker/kv_budget.h"
#include "vllm/worker/memory_profiler.h"

namespace vllm::worker {

// vLLM 0.33.0's profiling check: free memory after the profile above free memory at start-up is refused (vLLM
// asserts; the port throws std::invalid_argument with the same text).
void check_free_memory_did_not_grow(const MemoryProfilingResult& profile);

// The KV budget: the start-up request (on the baseline snapshot) less the profile's non-KV memory, after the check.
KVCacheBudget determine_available_memory(const MemoryProfilingResult& profile, double gpu_memory_utilization);

using BudgetFn = std::function<KVCacheBudget(const MemoryProfilingResult&, double)>;

// The pool size with the budget computed by budget_fn. With a profile (a device was measured) the start-up
// request is checked whatever sizes the pool, as vLLM's init_device does; the profile's budget is computed only
// when neither num_blocks nor the byte knob wins.
int num_blocks_with(const BudgetFn& budget_fn, const vllm::entrypoints::EngineParams& params,
                    const vllm::v1::KVCacheConfig& probe, const std::optional<MemoryProfilingResult>& profile);

// The block count the engine resolves when the worker profiled the device (or none, without a profile).
int profiled_num_blocks(const vllm::entrypoints::EngineParams& params, const vllm::v1::KVCacheConfig& probe,
                        const std::optional<MemoryProfilingResult>& profile);

}  // namespace vllm::worker
