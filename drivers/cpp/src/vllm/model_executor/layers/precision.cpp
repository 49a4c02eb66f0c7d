// The layers' arithmetic; see include/vllm/model_executor/layers/precision.h.
#include "vllm/model_executor/layers/precision.h"

#include <cstring>

#include "vllm/model_executor/layers/float_tensor.h"

namespace vllm::model_executor {

float Rounded(Precision precision, float value) {
  if (precision == Precision::kFloat32) return value;
  if (precision == Precision::kFloat16) return layers::RoundTo(layers::FloatType::kFloat16, value);
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    bits |= 0x00400000u;  // a NaN: quieted, its top payload bits kept
  } else {
    bits += 0x7fffu + ((bits >> 16) & 1u);  // to nearest, ties to even; a carry moves into the exponent
  }
  bits &= 0xffff0000u;
  std::memcpy(&value, &bits, 4);
  return value;
}

void RoundInPlace(Precision precision, HostTensor& tensor) {
  if (precision == Precision::kFloat32) return;
  for (float& value : tensor.data) value = Rounded(precision, value);
}

HostTensor Zeros(std::int64_t rows, std::int64_t cols) {
  HostTensor out;
  out.shape = {rows, cols};
  out.data.assign(static_cast<std::size_t>(rows * cols), 0.0f);
  return out;
}

HostTensor LinearSlice(const HostTensor& x, const HostTensor& weight, distributed::Span rows, distributed::Span cols,
                       const HostTensor* bias, Precision precision) {
  const std::int64_t tokens = x.shape[0];
  const std::size_t x_width = static_cast<std::size_t>(x.shape[1]);
  const std::size_t w_width = static_cast<std::size_t>(weight.shape[1]);
  HostTensor out = Zeros(tokens, rows.end - rows.begin);
  float* y = out.data.data();
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* xt = x.data.data() + static_cast<std::size_t>(t) * x_width;
    for (int row = rows.begin; row < rows.end; ++row) {
      const float* w = weight.data.data() + static_cast<std::size_t>(row) * w_width;
      double sum = bias != nullptr ? bias->data[static_cast<std::size_t>(row)] : 0.0;
      for (int c = cols.begin; c < cols.end; ++c) sum += static_cast<double>(xt[c - cols.begin]) * w[c];
      *y++ = Rounded(precision, static_cast<float>(sum));
    }
  }
  return out;
}

HostTensor RowSlice(const HostTensor& tensor, distributed::Span rows) {
  const std::size_t width = static_cast<std::size_t>(tensor.shape[1]);
  HostTensor out;
  out.shape = {rows.end - rows.begin, tensor.shape[1]};
  out.data.assign(tensor.data.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(rows.begin) * width),
                  tensor.data.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(rows.end) * width));
  return out;
}

HostTensor ColumnSlice(const HostTensor& tensor, distributed::Span cols) {
  const std::size_t rows = static_cast<std::size_t>(tensor.shape[0]);
  const std::size_t width = static_cast<std::size_t>(tensor.shape[1]);
  HostTensor out;
  out.shape = {tensor.shape[0], cols.end - cols.begin};
  out.data.reserve(rows * static_cast<std::size_t>(cols.end - cols.begin));
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = tensor.data.begin() + static_cast<std::ptrdiff_t>(r * width);
    out.data.insert(out.data.end(), row + cols.begin, row + cols.end);
  }
  return out;
}

}  // namespace vllm::model_executor
