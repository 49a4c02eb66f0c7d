// The tensors of a TP-W2 numeric call (tpw2 contract: every float tensor of one call float32 or bfloat16, all of
// one dtype; ids int64), read into the port's float32 HostTensors with their shapes and dtypes checked as the
// Python port checks them (impl/model_executor/layers/tp_operations.py: each refusal "<operation>: <name> ..."),
// and results written back in the call's dtype.
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

class FloatTensors {
 public:
  FloatTensors(const Value& input, std::string operation) : input_(input), operation_(std::move(operation)) {}

  // The member `name`: a 2-d float32 or bfloat16 tensor, of the call's dtype once one is set, with `cols` columns
  // when given (a weight [out, in] whose in is x's).
  vllm::HostTensor matrix(const char* name, std::optional<std::int64_t> cols = std::nullopt);
  // The member `name`: a tensor of exactly `shape` and the call's dtype.
  vllm::HostTensor read(const char* name, const std::vector<std::int64_t>& shape);
  // The same, or nullopt for null.
  std::optional<vllm::HostTensor> read_optional(const char* name, const std::vector<std::int64_t>& shape);

  vllm::model_executor::Precision precision() const;
  // `tensor` as a tensor value of the call's dtype (float32 before any tensor was read).
  Value result(const vllm::HostTensor& tensor) const;

 private:
  // The tensor member `name`, its dtype checked (`accepting`: the first float tensor of the call sets it).
  Tensor checked(const char* name, const std::string& wanted, bool accepting);

  const Value& input_;
  std::string operation_;
  std::optional<DType> dtype_;
};

// A float tensor's elements as float32.
vllm::HostTensor host_tensor(const Tensor& tensor);

// tp: an int in [1, 8] (the contract's world sizes), refused naming the operation.
int parse_tp(const Value& input, const std::string& operation);

// A bool member `name` (a Python bool, not an int).
bool parse_bool(const Value& input, const char* name, const std::string& operation);

// The int64 tensor member "ids" of shape [tokens].
std::vector<std::int64_t> parse_ids(const Value& input, const std::string& operation);
// Each of `ids` inside [0, vocab), else the first outside named.
void check_ids_in_vocab(const std::vector<std::int64_t>& ids, const std::string& operation, std::int64_t vocab);

// A list value of `tensors`, each written by `tensors_of`.
Value tensor_list(const FloatTensors& tensors_of, const std::vector<vllm::TensorPtr>& tensors);

}  // namespace gates::tp
