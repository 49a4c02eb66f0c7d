// The tensors of a TP-W2 numeric call (tpw2 contract: every float tensor of one call float32 or bfloat16, all of
// one dtype; ids int64), read into the port's float32 HostTensors with their shapes checked, and results written
// back in the call's dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "driver/operation.h"
#include "driver/tensor.h"
#include "vllm/distributed/tensor_parallel.h"
#include "vllm/model_executor/layers/precision.h"

namespace gates::tp {

// A dim of an expected shape that any size satisfies (the first tensor read decides it).
constexpr std::int64_t kAnyDim = -1;

class FloatTensors {
 public:
  explicit FloatTensors(const Value& input) : input_(input) {}

  // The member `name`: a float32 or bfloat16 tensor of the call's dtype whose shape is `expected` (kAnyDim: any
  // size), described as `dims` ("[tokens, in]") when its number of dims is wrong. std::invalid_argument naming both
  // shapes or both dtypes.
  vllm::HostTensor read(const char* name, const std::vector<std::int64_t>& expected, const std::string& dims);
  // The same, or nullopt for null.
  std::optional<vllm::HostTensor> read_optional(const char* name, const std::vector<std::int64_t>& expected,
                                                const std::string& dims);

  vllm::model_executor::Precision precision() const;
  // `tensor` as a tensor value of the call's dtype (float32 before any tensor was read).
  Value result(const vllm::HostTensor& tensor) const;

 private:
  const Value& input_;
  std::optional<DType> dtype_;
  std::string first_;  // the member that set the dtype
};

// tp: an int in [1, 8] (the contract's world sizes).
int parse_tp(const Value& input);

// A bool member `name` (a Python bool, not an int).
bool parse_bool(const Value& input, const char* name);

// The int64 tensor member `name` of shape [n] (n any), each id in [0, vocab).
std::vector<std::int64_t> parse_ids(const Value& input, const char* name, std::int64_t vocab);

// A list value of `tensors`, each written by `tensors_of`.
Value tensor_list(const FloatTensors& tensors_of, const std::vector<vllm::TensorPtr>& tensors);

}  // namespace gates::tp
