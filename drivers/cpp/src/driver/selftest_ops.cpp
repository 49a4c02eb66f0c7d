// Operations of the driver itself, for its protocol tests (tests/drivers/test_cpp_driver_protocol.py and
// test_cpp_driver_tensors.py); no gate names them. `driver-echo` returns its input (tensors included);
// `driver-raise` throws what its input describes: {"raise": "raised", "kind": K, "message": S} a gates::Raised, or
// "invalid_argument" / "out_of_range" / "runtime_error" the standard exception of that name with the message.
// The tensor ones check the C++ side bit for bit: `driver-arange` {"shape": [...], "scale": x} returns
// {"float32": arange(n) * x (float32 arithmetic) in that shape, "bfloat16": it rounded, "float16": it rounded}, or
// with "copies": k a list of k such float32 tensors;
// `driver-convert` {"tensor": T, "dtype": D} returns T converted element by element (tensor.h Tensor::to);
// `driver-elements` {"tensor": T} returns {"dtype", "shape", "elements"}: each element read through the tensor
// type, as a bool, an int or a float.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "driver/operation.h"
#include "driver/tensor.h"

namespace {

gates::Value raise_as_told(const gates::Value& input) {
  const std::string how = input.at("raise").get<std::string>();
  const std::string message = input.value("message", std::string("driver-raise"));
  if (how == "raised") throw gates::Raised(input.at("kind").get<std::string>(), message);
  if (how == "invalid_argument") throw std::invalid_argument(message);
  if (how == "out_of_range") throw std::out_of_range(message);
  if (how == "runtime_error") throw std::runtime_error(message);
  return gates::Value(nullptr);
}

gates::Value arange_scaled(const gates::Value& input) {
  gates::Tensor values(gates::DType::Float32, input.at("shape").get<std::vector<std::int64_t>>());
  const float scale = static_cast<float>(input.at("scale").get<double>());
  for (std::size_t i = 0; i < values.numel(); ++i) values.set<float>(i, static_cast<float>(i) * scale);
  if (input.contains("copies")) {  // a list of that many float32 tensors (past 4096: the writer's limit)
    gates::Value copies = gates::Value::array();
    for (std::int64_t k = input.at("copies").get<std::int64_t>(); k > 0; --k) copies.push_back(gates::tensor_value(values));
    return copies;
  }
  gates::Value out = gates::Value::object();
  out["bfloat16"] = gates::tensor_value(values.to(gates::DType::BFloat16));
  out["float16"] = gates::tensor_value(values.to(gates::DType::Float16));
  out["float32"] = gates::tensor_value(std::move(values));
  return out;
}

gates::Value convert_as_told(const gates::Value& input) {
  auto dtype = gates::dtype_named(input.at("dtype").get<std::string>());
  if (!dtype) throw std::invalid_argument("no dtype " + input.at("dtype").dump());
  return gates::tensor_value(gates::tensor_of(input.at("tensor")).to(*dtype));
}

gates::Value elements_of(const gates::Value& input) {
  const gates::Tensor tensor = gates::tensor_of(input.at("tensor"));
  gates::Value elements = gates::Value::array();
  for (std::size_t i = 0; i < tensor.numel(); ++i) {
    switch (tensor.dtype()) {
      case gates::DType::Bool: elements.push_back(tensor.get<bool>(i)); break;
      case gates::DType::UInt8: elements.push_back(tensor.get<std::uint8_t>(i)); break;
      case gates::DType::Int8: elements.push_back(tensor.get<std::int8_t>(i)); break;
      case gates::DType::Int16: elements.push_back(tensor.get<std::int16_t>(i)); break;
      case gates::DType::Int32: elements.push_back(tensor.get<std::int32_t>(i)); break;
      case gates::DType::Int64: elements.push_back(tensor.get<std::int64_t>(i)); break;
      default: elements.push_back(tensor.get_float64(i));
    }
  }
  gates::Value out = gates::Value::object();
  out["dtype"] = gates::dtype_name(tensor.dtype());
  out["shape"] = tensor.shape();
  out["elements"] = std::move(elements);
  return out;
}

}  // namespace

GATES_OPERATION("driver-echo", [](const gates::Value& input) -> gates::Value { return input; });
GATES_OPERATION("driver-raise", raise_as_told);
GATES_OPERATION("driver-arange", arange_scaled);
GATES_OPERATION("driver-convert", convert_as_told);
GATES_OPERATION("driver-elements", elements_of);
