// See include/vllm/entrypoints/model_loader.h. Messages as impl/entrypoints/model_loader.py.
#include "vllm/entrypoints/model_loader.h"

#include <stdexcept>

#include "vllm/v1/core/kv_cache_utils.h"
#include "vllm/v1/field_checks.h"
#include "vllm/v1/float_repr.h"

namespace vllm::entrypoints {

using vllm::v1::CheckChoice;
using vllm::v1::CheckFraction;
using vllm::v1::CheckInt;
using vllm::v1::PyFloatRepr;

const std::vector<CIntMember>& CIntMembers() {
  static const std::vector<CIntMember> members = {
      {"block_size", "int32_t", 1, kInt32Max},     {"num_blocks", "int32_t", 0, kInt32Max},
      {"max_model_len", "int32_t", 0, kInt32Max},  {"max_num_batched_tokens", "int32_t", 0, kInt32Max},
      {"kv_cache_memory_bytes", "int64_t", 0, kInt64Max}, {"max_num_seqs", "int32_t", 1, kInt32Max},
  };
  return members;
}

const CIntMember& CIntMemberOf(const std::string& name) {
  for (const CIntMember& member : CIntMembers()) {
    if (name == member.name) return member;
  }
  throw std::out_of_range("no vllm_model_params integer member '" + name + "'");
}

std::string NoCSpellingMessage(const std::string& name, const std::string& value) {
  const CIntMember& member = CIntMemberOf(name);
  return "EngineParams." + name + "=" + value + " has no " + member.ctype + " spelling in vllm_model_params " +
         "(accepted: " + std::to_string(member.minimum) + ".." + std::to_string(member.maximum) + ")";
}

void EngineParams::Validate() const {
  const std::string owner = "EngineParams";
  for (const CIntMember& member : CIntMembers()) {
    const std::string name = member.name;
    const int64_t value = name == "block_size"               ? block_size
                          : name == "num_blocks"             ? num_blocks
                          : name == "max_model_len"          ? max_model_len
                          : name == "max_num_batched_tokens" ? max_num_batched_tokens
                          : name == "kv_cache_memory_bytes"  ? kv_cache_memory_bytes
                                                             : max_num_seqs;
    CheckInt(owner, name, value, member.minimum);
    if (value > member.maximum) throw InvalidArgument(NoCSpellingMessage(name, std::to_string(value)), name);
  }
  CheckChoice(owner, "enable_prefix_caching", enable_prefix_caching, {0, 1, 2});
  CheckChoice(owner, "enable_jump_forward", enable_jump_forward, {0, 1, 2});
  CheckChoice(owner, "device", device, {0, 1, 2});
  CheckFraction(owner, "gpu_memory_utilization", gpu_memory_utilization_value());
}

const char* KnobName(Knob knob) {
  switch (knob) {
    case Knob::kNumBlocks: return "num_blocks";
    case Knob::kKvCacheMemoryBytes: return "kv_cache_memory_bytes";
    case Knob::kGpuMemoryUtilization: return "gpu_memory_utilization";
    case Knob::kFallback: return "fallback";
  }
  return "fallback";
}

namespace {

int64_t BytesPerBlock(const vllm::v1::KVCacheConfig& probe, const std::string& knob) {
  const int64_t bpb = vllm::v1::KVBytesPerBlock(probe);
  if (bpb <= 0) {
    throw NoKVBytesPerBlockError("the model reports " + std::to_string(bpb) +
                                 " KV bytes per block; cannot size the pool from " + knob);
  }
  return bpb;
}

// A resolved count the int32_t vllm_model_params.num_blocks (and the engine) can hold; a larger one is refused, never
// wrapped (issue 12). `source` says where the bytes came from.
int CheckedBlockCount(int64_t num_blocks, int64_t bytes_per_block, const std::string& source) {
  if (num_blocks > kInt32Max) {
    throw std::invalid_argument(source + " over " + std::to_string(bytes_per_block) + " bytes per block is " +
                                std::to_string(num_blocks) +
                                " blocks, more than the int32_t block count holds (at most " +
                                std::to_string(kInt32Max) + ": vllm_model_params.num_blocks is an int32_t); lower it or "
                                "set an explicit --num-blocks");
  }
  return static_cast<int>(num_blocks);
}

}  // namespace

PoolSizing LoadedEngine::ResolveKVPool(const EngineParams& params, const vllm::v1::KVCacheConfig& probe,
                                       std::optional<int64_t> available_kv_cache_memory) {
  // 1. Explicit override wins (vLLM num_gpu_blocks_override), unchecked.
  if (params.num_blocks > 0) return {static_cast<int>(params.num_blocks), Knob::kNumBlocks, std::nullopt, {}};
  // 2. Absolute KV-pool budget; ignores gpu_memory_utilization, as vLLM CacheConfig.
  if (params.kv_cache_memory_bytes > 0) {
    const int64_t budget = params.kv_cache_memory_bytes;
    const int64_t bpb = BytesPerBlock(probe, "--kv-cache-memory");
    if (budget < bpb) {
      throw std::invalid_argument("--kv-cache-memory " + std::to_string(budget) +
                                  " bytes is smaller than a single KV block (" + std::to_string(bpb) +
                                  " bytes); raise --kv-cache-memory or set an explicit --num-blocks");
    }
    const int blocks = CheckedBlockCount(budget / bpb, bpb, "--kv-cache-memory " + std::to_string(budget) + " bytes");
    return {blocks, Knob::kKvCacheMemoryBytes, bpb, {}};
  }
  // 3. The memory profile's budget (ROAD-V1-MEM M3).
  if (available_kv_cache_memory.has_value()) {
    const int64_t avail = *available_kv_cache_memory;
    if (avail <= 0) {
      throw std::invalid_argument(vllm::v1::NoAvailableMemoryMessage() + " (The profile left " +
                                  std::to_string(avail) + " bytes for the KV cache at gpu_memory_utilization=" +
                                  PyFloatRepr(params.gpu_memory_utilization_value()) +
                                  "; --kv-cache-memory or --num-blocks size the pool without it.)");
    }
    const int64_t bpb = BytesPerBlock(probe, "the memory profile");
    if (avail < bpb) {
      throw std::invalid_argument("the " + std::to_string(avail) +
                                  " bytes of available KV cache memory are smaller than a single KV block (" +
                                  std::to_string(bpb) +
                                  " bytes); increase `gpu_memory_utilization`, or set --kv-cache-memory or "
                                  "--num-blocks");
    }
    const int blocks =
        CheckedBlockCount(avail / bpb, bpb, "the " + std::to_string(avail) + " bytes of available KV cache memory");
    return {blocks, Knob::kGpuMemoryUtilization, bpb, {}};
  }
  // 4. No profile: the fallback; an explicitly chosen utilization is reported as not applied.
  PoolSizing sizing{kFallbackNumBlocks, Knob::kFallback, std::nullopt, {}};
  if (params.gpu_memory_utilization_is_explicit()) {
    sizing.warning = "--gpu-memory-utilization " + PyFloatRepr(params.gpu_memory_utilization_value()) +
                     " was accepted but did not size the KV cache: the memory profile run (ROAD-V1-MEM M3) is not "
                     "available, so the pool falls back to " +
                     std::to_string(kFallbackNumBlocks) +
                     " blocks. Size it with --kv-cache-memory <bytes> or --num-blocks <n>.";
  }
  return sizing;
}

int LoadedEngine::ResolveNumBlocks(const EngineParams& params, const vllm::v1::KVCacheConfig& probe,
                                   std::optional<int64_t> available_kv_cache_memory) {
  return ResolveKVPool(params, probe, available_kv_cache_memory).num_blocks;
}

}  // namespace vllm::entrypoints
