#include "ops/tp_tensor_input.h"

#include <stdexcept>

#include "driver/pyrepr.h"
#include "ops/tp_input.h"

namespace gates::tp {
namespace {

constexpr int kMaxTp = 8;

std::string shape_with(const std::vector<std::int64_t>& expected, const std::vector<std::int64_t>& actual) {
  std::vector<std::int64_t> filled = expected;
  for (std::size_t i = 0; i < filled.size(); ++i)
    if (filled[i] == kAnyDim) filled[i] = actual[i];
  return shape_text(filled);
}

Tensor tensor_member(const Value& input, const char* name) {
  const Value& value = member(input, name);
  if (!is_tensor_value(value))
    throw std::invalid_argument(std::string(name) + " must be a tensor, got " + py_repr(value) + " (" + py_type_name(value) + ")");
  return tensor_of(value);
}

}  // namespace

vllm::HostTensor FloatTensors::read(const char* name, const std::vector<std::int64_t>& expected, const std::string& dims) {
  const Tensor tensor = tensor_member(input_, name);
  if (tensor.dtype() != DType::Float32 && tensor.dtype() != DType::BFloat16)
    throw std::invalid_argument(std::string(name) + " is " + dtype_name(tensor.dtype()) + "; accepted dtypes: float32, bfloat16");
  if (dtype_ && *dtype_ != tensor.dtype())
    throw std::invalid_argument(std::string(name) + " is " + dtype_name(tensor.dtype()) + " but " + first_ + " is " +
                                dtype_name(*dtype_) + " (all tensors of a call share one dtype)");
  if (!dtype_) {
    dtype_ = tensor.dtype();
    first_ = name;
  }
  const auto& shape = tensor.shape();
  if (shape.size() != expected.size())
    throw std::invalid_argument(std::string(name) + " has shape " + shape_text(shape) + ", expected " +
                                std::to_string(expected.size()) + " dims" + (dims.empty() ? "" : " " + dims));
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (expected[i] != kAnyDim && shape[i] != expected[i])
      throw std::invalid_argument(std::string(name) + " has shape " + shape_text(shape) + ", expected " +
                                  shape_with(expected, shape) + (dims.empty() ? "" : " " + dims));
  vllm::HostTensor out;
  out.shape = shape;
  out.data.resize(tensor.numel());
  for (std::size_t i = 0; i < out.data.size(); ++i) out.data[i] = tensor.get_float32(i);
  return out;
}

std::optional<vllm::HostTensor> FloatTensors::read_optional(const char* name, const std::vector<std::int64_t>& expected,
                                                            const std::string& dims) {
  if (member_or(input_, name, Value()).is_null()) return std::nullopt;
  return read(name, expected, dims);
}

vllm::model_executor::Precision FloatTensors::precision() const {
  return dtype_ == DType::BFloat16 ? vllm::model_executor::Precision::kBFloat16 : vllm::model_executor::Precision::kFloat32;
}

Value FloatTensors::result(const vllm::HostTensor& tensor) const {
  Tensor out(dtype_.value_or(DType::Float32), tensor.shape);
  for (std::size_t i = 0; i < tensor.data.size(); ++i) out.set_float32(i, tensor.data[i]);
  return tensor_value(std::move(out));
}

int parse_tp(const Value& input) {
  const Value& tp = member(input, "tp");
  if (!is_py_int(tp) || tp.is_object() || tp.get<long long>() < 1 || tp.get<long long>() > kMaxTp)
    throw std::invalid_argument("tp must be an int in [1, " + std::to_string(kMaxTp) + "], got " + py_repr(tp) +
                                (is_py_int(tp) ? "" : " (" + py_type_name(tp) + ")"));
  return static_cast<int>(tp.get<long long>());
}

bool parse_bool(const Value& input, const char* name) {
  const Value& value = member(input, name);
  if (!value.is_boolean())
    throw std::invalid_argument(std::string(name) + " must be a bool, got " + py_repr(value) + " (" + py_type_name(value) + ")");
  return value.get<bool>();
}

std::vector<std::int64_t> parse_ids(const Value& input, const char* name, std::int64_t vocab) {
  const Tensor tensor = tensor_member(input, name);
  if (tensor.dtype() != DType::Int64)
    throw std::invalid_argument(std::string(name) + " is " + dtype_name(tensor.dtype()) + ", expected int64");
  if (tensor.shape().size() != 1)
    throw std::invalid_argument(std::string(name) + " has shape " + shape_text(tensor.shape()) + ", expected 1 dim [tokens]");
  std::vector<std::int64_t> ids(tensor.numel());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = tensor.get<std::int64_t>(i);
    if (ids[i] < 0 || ids[i] >= vocab)
      throw std::invalid_argument(std::string(name) + "[" + std::to_string(i) + "]=" + std::to_string(ids[i]) +
                                  " is outside [0, vocab=" + std::to_string(vocab) + ")");
  }
  return ids;
}

Value tensor_list(const FloatTensors& tensors_of, const std::vector<vllm::TensorPtr>& tensors) {
  Value out = Value::array();
  for (const auto& tensor : tensors) out.push_back(tensors_of.result(*tensor));
  return out;
}

}  // namespace gates::tp
