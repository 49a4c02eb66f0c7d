// See include/vllm/v1/dtypes.h. Sizes as impl/v1/dtypes.py ITEMSIZES (torch's itemsize).
#include "vllm/v1/dtypes.h"

#include <stdexcept>

namespace vllm::v1 {

namespace {
const std::vector<DType>& AllDTypes() {
  static const std::vector<DType> all = {
      {"float32", 4}, {"float16", 2}, {"bfloat16", 2}, {"uint8", 1},
      {"int8", 1},    {"float8_e4m3fn", 1}, {"float8_e5m2", 1},
  };
  return all;
}
}  // namespace

const DType* FindDType(const std::string& name) {
  for (const DType& dtype : AllDTypes()) {
    if (dtype.name == name) return &dtype;
  }
  return nullptr;
}

DType DTypeByName(const std::string& name) {
  const DType* dtype = FindDType(name);
  if (dtype == nullptr) throw std::out_of_range("unknown dtype '" + name + "'");
  return *dtype;
}

}  // namespace vllm::v1
