// Device memory snapshots and their field-wise difference (MEM-3.1).
//
// Ported from impl/worker/memory_snapshot.py, which mirrors MemorySnapshot and format_gib of
// vllm/utils/mem_utils.py. Readings are plain numbers here: taking them from a device is the device helper's
// job, the arithmetic runs without one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

namespace vllm::worker {

inline constexpr int64_t kGiB = int64_t{1} << 30;

// Bytes as GiB rounded to two decimals, spelled as Python prints the float ("79.0", "8.01").
double FormatGibValue(int64_t num_bytes);
std::string FormatGib(int64_t num_bytes);

// What one device holds at one moment. Validate() refuses impossible readings (Python's __post_init__).
struct MemorySnapshot {
  std::string device;       // "cuda:0"
  int64_t torch_peak = 0;   // torch's peak allocation
  int64_t free_memory = 0;
  int64_t total_memory = 0;
  int64_t torch_memory = 0;  // torch-reserved memory
  double timestamp = 0.0;    // seconds
  // torch's current allocation (vLLM 0.33.0 reads it); unset: min(torch_peak, torch_memory), the most the
  // other readings allow.
  std::optional<int64_t> torch_allocated;

  void Validate() const;
  int64_t allocated() const { return torch_allocated.value_or(std::min(torch_peak, torch_memory)); }
  // Device memory in use by anyone: total - free.
  int64_t cuda_memory() const { return total_memory - free_memory; }
  // Device memory in use that torch's allocator did not reserve.
  int64_t non_torch_memory() const { return cuda_memory() - torch_memory; }
};

// Field-wise difference of two snapshots of one device (later - earlier); any field may be negative.
struct MemoryDelta {
  std::string device;
  int64_t torch_peak = 0;
  int64_t torch_allocated = 0;
  int64_t free_memory = 0;
  int64_t cuda_memory = 0;
  int64_t torch_memory = 0;
  int64_t non_torch_memory = 0;
  double elapsed = 0.0;
};

// later - earlier; throws std::invalid_argument when the two cannot come from one device.
MemoryDelta operator-(const MemorySnapshot& later, const MemorySnapshot& earlier);

}  // namespace vllm::worker
