// Dtypes by name (impl/v1/dtypes.py): a KV spec only reads a dtype's name and its bytes per element.
//
// The C++ port carries a vt::DType enum (jefby/vllm.cpp include/vt/dtype.h); here a dtype is plain data named as
// torch names it, so that specs built from case inputs and from config.json read the same way.
#pragma once

#include <string>
#include <vector>

namespace vllm::v1 {

struct DType {
  std::string name;  // torch's name: "float32", "bfloat16", "uint8", ...
  int itemsize = 0;  // bytes per element

  bool operator==(const DType& other) const { return name == other.name && itemsize == other.itemsize; }
  bool operator!=(const DType& other) const { return !(*this == other); }
  // How a torch.dtype prints in an f-string ("torch.bfloat16"), as the Python port's messages show it.
  std::string torch_str() const { return "torch." + name; }
};

// Every dtype a KV spec is built with; nullptr for any other name.
const DType* FindDType(const std::string& name);

// The dtype `name`; throws std::out_of_range naming it when unknown.
DType DTypeByName(const std::string& name);

}  // namespace vllm::v1
