// KV specs and layouts from case data, as gates/rows/road_v1_mem/build.py builds them (impl_spec,
// impl_kv_config): a spec is {kind, vLLM field names, dtype/dtypes as torch names, kv_quant_mode as a KVQuantMode
// member name}; a layout is {groups: [{layers, spec}], per_layer: [spec or null]}.
#pragma once

#include <memory>

#include "mem_common.h"
#include "vllm/v1/kv_cache_interface.h"

namespace gates::mem {

// The spec a mapping describes, constructed and validated (the Python dataclass's refusals).
std::shared_ptr<vllm::v1::KVCacheSpec> ImplSpec(const Value& data);

// The KVCacheConfig of a layout (num_blocks 0, no tensors).
vllm::v1::KVCacheConfig ImplKVConfig(const Value& layout);

// The C++ port's test layer: one layer, block 16, 2 KV heads, head 64, fp32 (16384 bytes per block).
const Value& DefaultProbe();

}  // namespace gates::mem
