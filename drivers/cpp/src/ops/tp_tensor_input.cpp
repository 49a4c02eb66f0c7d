#include "ops/tp_tensor_input.h"

#include <stdexcept>

#include "driver/pyrepr.h"
#include "ops/tp_input.h"

namespace gates::tp {
namespace {

constexpr int kMaxTp = 8;

bool is_float_dtype(DType dtype) { return dtype == DType::Float32 || dtype == DType::BFloat16; }

}  // namespace

Tensor FloatTensors::checked(const char* name, const std::string& wanted, bool accepting) {
  const Value& value = member(input_, name);
  if (!is_tensor_value(value))
    throw std::invalid_argument(operation_ + ": " + name + " must be " + wanted + ", got " + py_type_name(value));
  Tensor tensor = tensor_of(value);
  const std::string has = operation_ + ": " + name + " has dtype " + dtype_name(tensor.dtype());
  if ((accepting || !dtype_) && !is_float_dtype(tensor.dtype())) throw std::invalid_argument(has + "; accepted: float32, bfloat16");
  if (dtype_ && tensor.dtype() != *dtype_) throw std::invalid_argument(has + ", expected " + dtype_name(*dtype_));
  if (!dtype_) dtype_ = tensor.dtype();
  return tensor;
}

vllm::HostTensor FloatTensors::matrix(const char* name, std::optional<std::int64_t> cols) {
  const Value& value = member(input_, name);
  if (is_tensor_value(value) && value.begin().value().at("shape").size() != 2)
    throw std::invalid_argument(operation_ + ": " + name + " must be a 2-d tensor, got " +
                                shape_text(value.begin().value().at("shape").get<std::vector<std::int64_t>>()));
  const Tensor tensor = checked(name, "a 2-d tensor", true);
  if (cols && tensor.shape()[1] != *cols)
    throw std::invalid_argument(operation_ + ": " + name + " has shape " + shape_text(tensor.shape()) + ", expected " +
                                shape_text({tensor.shape()[0], *cols}));
  return host_tensor(tensor);
}

vllm::HostTensor FloatTensors::read(const char* name, const std::vector<std::int64_t>& shape) {
  const Tensor tensor = checked(name, "a tensor of shape " + shape_text(shape), false);
  if (tensor.shape() != shape)
    throw std::invalid_argument(operation_ + ": " + name + " has shape " + shape_text(tensor.shape()) + ", expected " +
                                shape_text(shape));
  return host_tensor(tensor);
}

std::optional<vllm::HostTensor> FloatTensors::read_optional(const char* name, const std::vector<std::int64_t>& shape) {
  if (member(input_, name).is_null()) return std::nullopt;
  return read(name, shape);
}

vllm::model_executor::Precision FloatTensors::precision() const {
  return dtype_ == DType::BFloat16 ? vllm::model_executor::Precision::kBFloat16 : vllm::model_executor::Precision::kFloat32;
}

Value FloatTensors::result(const vllm::HostTensor& tensor) const {
  Tensor out(dtype_.value_or(DType::Float32), tensor.shape);
  for (std::size_t i = 0; i < tensor.data.size(); ++i) out.set_float32(i, tensor.data[i]);
  return tensor_value(std::move(out));
}

vllm::HostTensor host_tensor(const Tensor& tensor) {
  vllm::HostTensor out;
  out.shape = tensor.shape();
  out.data.resize(tensor.numel());
  for (std::size_t i = 0; i < out.data.size(); ++i) out.data[i] = tensor.get_float32(i);
  return out;
}

int parse_tp(const Value& input, const std::string& operation) {
  const Value& tp = member(input, "tp");
  const std::string range = operation + ": tp must be an int in [1, " + std::to_string(kMaxTp) + "]";
  if (!is_py_int(tp)) throw std::invalid_argument(range + ", got " + py_repr(tp) + " (" + py_type_name(tp) + ")");
  if (tp.is_object() || tp.get<long long>() < 1 || tp.get<long long>() > kMaxTp)
    throw std::invalid_argument(range + " (the largest thread world this port starts), got " + py_repr(tp));
  return static_cast<int>(tp.get<long long>());
}

bool parse_bool(const Value& input, const char* name, const std::string& operation) {
  const Value& value = member(input, name);
  if (!value.is_boolean()) throw std::invalid_argument(operation + ": " + name + " must be a bool, got " + py_repr(value));
  return value.get<bool>();
}

std::vector<std::int64_t> parse_ids(const Value& input, const std::string& operation) {
  const Value& value = member(input, "ids");
  const std::string wanted = operation + ": ids must be a 1-d int64 tensor [tokens], got ";
  if (!is_tensor_value(value)) throw std::invalid_argument(wanted + py_type_name(value));
  const Tensor tensor = tensor_of(value);
  if (tensor.shape().size() != 1) throw std::invalid_argument(wanted + shape_text(tensor.shape()));
  if (tensor.dtype() != DType::Int64)
    throw std::invalid_argument(operation + ": ids has dtype " + dtype_name(tensor.dtype()) + ", expected int64");
  std::vector<std::int64_t> ids(tensor.numel());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = tensor.get<std::int64_t>(i);
  return ids;
}

void check_ids_in_vocab(const std::vector<std::int64_t>& ids, const std::string& operation, std::int64_t vocab) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      throw std::invalid_argument(operation + ": ids[" + std::to_string(i) + "]=" + std::to_string(ids[i]) +
                                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
}

Value tensor_list(const FloatTensors& tensors_of, const std::vector<vllm::TensorPtr>& tensors) {
  Value out = Value::array();
  for (const auto& tensor : tensors) out.push_back(tensors_of.result(*tensor));
  return out;
}

}  // namespace gates::tp
