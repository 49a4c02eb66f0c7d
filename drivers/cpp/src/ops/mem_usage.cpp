// ROAD-V1-MEM M2 operation max-memory-usage-bytes ({spec, max_model_len, max_num_batched_tokens?} -> the spec's
// max_memory_usage_bytes, MEM-2.9), as gates/rows/road_v1_mem/subjects.py max_memory_usage_bytes: the spec is
// constructed first (its refusals come first), then the lengths are read and checked under the spec's class name.
#include "mem_common.h"
#include "mem_specs.h"

namespace gates::mem {
namespace {

GATES_MEM_OPERATION("max-memory-usage-bytes", [](const Value& input) -> Value {
  Mapping(input, "a max-memory-usage input");
  const auto spec = ImplSpec(Required(input, "spec"));
  const std::string owner = spec->type_name();
  const int64_t max_model_len = ReadInt(owner, "max_model_len", Required(input, "max_model_len"), 1);
  const Value* batched = Member(input, "max_num_batched_tokens");
  const std::optional<int64_t> max_num_batched_tokens =
      batched == nullptr ? std::nullopt : ReadOptionalInt(owner, "max_num_batched_tokens", *batched, 1);
  return spec->max_memory_usage_bytes(max_model_len, max_num_batched_tokens);
});

}  // namespace
}  // namespace gates::mem
