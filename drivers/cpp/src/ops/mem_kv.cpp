// ROAD-V1-MEM M2 operations: kv-bytes-per-block (a KV layout -> KVBytesPerBlock) and page-size-bytes ({spec} ->
// the spec's page_size_bytes, construction refusals included). Inputs as gates/rows/road_v1_mem/build.py
// kv_layout_impl and spec_impl.
#include "mem_common.h"
#include "mem_specs.h"

namespace gates::mem {
namespace {

GATES_MEM_OPERATION("kv-bytes-per-block", [](const Value& input) -> Value {
  return vllm::v1::KVBytesPerBlock(ImplKVConfig(input));
});

GATES_MEM_OPERATION("page-size-bytes", [](const Value& input) -> Value {
  Mapping(input, "a page-size input");
  return ImplSpec(Required(input, "spec"))->page_size_bytes();
});

}  // namespace
}  // namespace gates::mem
