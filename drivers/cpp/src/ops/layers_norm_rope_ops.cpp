// The LAYERS-NORM-ROPE operations (gates/rows/layers_norm_rope/operations.yaml), answering what the Python bindings
// return (build.py rms_impl, cache_call, rope_impl):
//   rms-norm {x, weight|null, eps, residual|null}      -> normed, or [normed, new residual]   (RmsNorm)
//   rope-cos-sin-cache {rotary_dim, max_position, base} -> float32 [max_position, rotary_dim]  (CosSinCache)
//   rotary-embedding {positions, query, key|null, head_size, rotary_dim, max_position, base, neox}
//                                                      -> [query, key|null]                   (RopeForward)
// Tensors arrive and leave as `$tensor` values (docs/worker-protocol.md §7.4); float32, float16 and bfloat16 only.
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "driver/operation.h"
#include "driver/pyrepr.h"
#include "driver/tensor.h"
#include "vllm/model_executor/layers/layernorm.h"
#include "vllm/model_executor/layers/rotary_embedding.h"

namespace {

namespace vl = vllm::layers;
using gates::Value;

const Value& Member(const Value& input, const char* name) {
  if (!input.is_object() || !input.contains(name))
    throw std::invalid_argument(std::string("the input has no '") + name + "' (got " + gates::py_repr(input).substr(0, 200) + ")");
  return input.at(name);
}

// A float32/float16/bfloat16 tensor input as the port's FloatTensor (its values exact in float32).
vl::FloatTensor FloatInput(const Value& value, const char* name) {
  if (!gates::is_tensor_value(value))
    throw std::invalid_argument(std::string(name) + " must be a tensor, got " + gates::py_type_name(value));
  const gates::Tensor tensor = gates::tensor_of(value);
  vl::FloatTensor out;
  switch (tensor.dtype()) {
    case gates::DType::Float32: out.dtype = vl::FloatType::kFloat32; break;
    case gates::DType::Float16: out.dtype = vl::FloatType::kFloat16; break;
    case gates::DType::BFloat16: out.dtype = vl::FloatType::kBFloat16; break;
    default:
      throw std::invalid_argument(std::string(name) + " is a " + gates::dtype_name(tensor.dtype()) +
                                  " tensor; these layers take float32, float16 or bfloat16");
  }
  out.shape = tensor.shape();
  out.values.resize(tensor.numel());
  for (std::size_t i = 0; i < tensor.numel(); ++i) out.values[i] = tensor.get_float32(i);
  return out;
}

std::optional<vl::FloatTensor> OptionalFloatInput(const Value& value, const char* name) {
  if (value.is_null()) return std::nullopt;
  return FloatInput(value, name);
}

Value TensorOutput(const vl::FloatTensor& tensor) {
  const gates::DType dtype = tensor.dtype == vl::FloatType::kFloat32   ? gates::DType::Float32
                             : tensor.dtype == vl::FloatType::kFloat16 ? gates::DType::Float16
                                                                       : gates::DType::BFloat16;
  gates::Tensor out(dtype, tensor.shape);
  for (std::size_t i = 0; i < tensor.values.size(); ++i) out.set_float32(i, tensor.values[i]);  // exact: a value of dtype
  return gates::tensor_value(std::move(out));
}

double Number(const Value& value, const char* name) {
  if (!value.is_number() || value.is_boolean())
    throw std::invalid_argument(std::string(name) + " must be a number, got " + gates::py_repr(value) + " (" +
                                gates::py_type_name(value) + ")");
  return value.get<double>();
}

std::int64_t Int(const Value& value, const char* name) {
  if (!value.is_number_integer() || value.is_boolean() ||
      (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)))
    throw std::invalid_argument(std::string(name) + " must be an int, got " + gates::py_repr(value) + " (" +
                                gates::py_type_name(value) + ")");
  return value.get<std::int64_t>();
}

Value RmsNormOp(const Value& input) {
  const vl::FloatTensor x = FloatInput(Member(input, "x"), "x");
  const std::optional<vl::FloatTensor> weight = OptionalFloatInput(Member(input, "weight"), "weight");
  const std::optional<vl::FloatTensor> residual = OptionalFloatInput(Member(input, "residual"), "residual");
  const double eps = Number(Member(input, "eps"), "eps");
  vl::RmsNormResult result = vl::RmsNorm(x, weight ? &*weight : nullptr, eps, residual ? &*residual : nullptr);
  if (!result.residual) return TensorOutput(result.out);
  return Value::array({TensorOutput(result.out), TensorOutput(*result.residual)});
}

Value CosSinCacheOp(const Value& input) {
  return TensorOutput(vl::CosSinCache(Int(Member(input, "rotary_dim"), "rotary_dim"),
                                      Int(Member(input, "max_position"), "max_position"),
                                      Number(Member(input, "base"), "base")));
}

// The positions, flattened (NR-3.1): an int64 tensor of any shape.
std::vector<std::int64_t> Positions(const Value& value) {
  if (!gates::is_tensor_value(value))
    throw std::invalid_argument("positions must be an int64 tensor, got " + gates::py_type_name(value));
  const gates::Tensor tensor = gates::tensor_of(value);
  if (tensor.dtype() != gates::DType::Int64)
    throw std::invalid_argument(std::string("positions must be an int64 tensor, got ") + gates::dtype_name(tensor.dtype()));
  std::vector<std::int64_t> positions(tensor.numel());
  for (std::size_t i = 0; i < tensor.numel(); ++i) positions[i] = tensor.get<std::int64_t>(i);
  return positions;
}

Value RotaryEmbeddingOp(const Value& input) {
  const std::vector<std::int64_t> positions = Positions(Member(input, "positions"));
  const vl::FloatTensor query = FloatInput(Member(input, "query"), "query");
  const std::optional<vl::FloatTensor> key = OptionalFloatInput(Member(input, "key"), "key");
  const Value& neox = Member(input, "neox");
  if (!neox.is_boolean()) throw std::invalid_argument("neox must be a bool, got " + gates::py_repr(neox));
  auto [rotated_query, rotated_key] =
      vl::RopeForward(positions, query, key ? &*key : nullptr, Int(Member(input, "head_size"), "head_size"),
                      Int(Member(input, "rotary_dim"), "rotary_dim"), Int(Member(input, "max_position"), "max_position"),
                      Number(Member(input, "base"), "base"), neox.get<bool>());
  return Value::array({TensorOutput(rotated_query), rotated_key ? TensorOutput(*rotated_key) : Value(nullptr)});
}

}  // namespace

GATES_OPERATION("rms-norm", RmsNormOp);
GATES_OPERATION("rope-cos-sin-cache", CosSinCacheOp);
GATES_OPERATION("rotary-embedding", RotaryEmbeddingOp);
