// See include/vllm/worker/memory_snapshot.h.
#include "vllm/worker/memory_snapshot.h"

#include <cmath>
#include <stdexcept>

#include "vllm/v1/field_checks.h"
#include "vllm/v1/float_repr.h"

namespace vllm::worker {

double FormatGibValue(int64_t num_bytes) {
  return vllm::v1::PyRound(static_cast<double>(num_bytes) / static_cast<double>(kGiB), 2);
}

std::string FormatGib(int64_t num_bytes) { return vllm::v1::PyFloatRepr(FormatGibValue(num_bytes)); }

void MemorySnapshot::Validate() const {
  if (device.empty()) {
    throw std::invalid_argument("MemorySnapshot.device must be a non-empty device name such as 'cuda:0', got ''");
  }
  vllm::v1::CheckInt("MemorySnapshot", "torch_peak", torch_peak, 0);
  vllm::v1::CheckInt("MemorySnapshot", "free_memory", free_memory, 0);
  vllm::v1::CheckInt("MemorySnapshot", "total_memory", total_memory, 0);
  vllm::v1::CheckInt("MemorySnapshot", "torch_memory", torch_memory, 0);
  vllm::v1::CheckInt("MemorySnapshot", "torch_allocated", allocated(), 0);
  if (allocated() > torch_peak) {
    throw std::invalid_argument("MemorySnapshot.torch_allocated (" + std::to_string(allocated()) +
                                ") must be <= torch_peak (" + std::to_string(torch_peak) +
                                "); the peak allocation is never below the current one");
  }
  if (total_memory == 0) throw std::invalid_argument("MemorySnapshot.total_memory must be > 0 bytes, got 0");
  if (free_memory > total_memory) {
    throw std::invalid_argument("MemorySnapshot.free_memory (" + std::to_string(free_memory) +
                                ") must be <= total_memory (" + std::to_string(total_memory) + ")");
  }
  if (torch_memory > cuda_memory()) {
    throw std::invalid_argument("MemorySnapshot.torch_memory (" + std::to_string(torch_memory) +
                                ") must be <= the device memory in use (total - free = " +
                                std::to_string(cuda_memory()) +
                                "); torch cannot reserve more than the device has handed out");
  }
  if (!std::isfinite(timestamp)) {
    throw std::invalid_argument("MemorySnapshot.timestamp must be a finite number of seconds, got " +
                                vllm::v1::PyFloatRepr(timestamp));
  }
}

MemoryDelta operator-(const MemorySnapshot& later, const MemorySnapshot& earlier) {
  if (earlier.device != later.device) {
    throw std::invalid_argument("snapshots of different devices cannot be subtracted: '" + later.device + "' - '" +
                                earlier.device + "'");
  }
  if (earlier.total_memory != later.total_memory) {
    throw std::invalid_argument("snapshots of '" + later.device + "' disagree on total_memory (" +
                                std::to_string(later.total_memory) + " vs " + std::to_string(earlier.total_memory) +
                                "); they cannot come from one device");
  }
  MemoryDelta delta;
  delta.device = later.device;
  delta.torch_peak = later.torch_peak - earlier.torch_peak;
  delta.torch_allocated = later.allocated() - earlier.allocated();
  delta.free_memory = later.free_memory - earlier.free_memory;
  delta.cuda_memory = later.cuda_memory() - earlier.cuda_memory();
  delta.torch_memory = later.torch_memory - earlier.torch_memory;
  delta.non_torch_memory = later.non_torch_memory() - earlier.non_torch_memory();
  delta.elapsed = later.timestamp - earlier.timestamp;
  return delta;
}

}  // namespace vllm::worker
