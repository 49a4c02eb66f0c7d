// The arithmetic of the port's CPU layers (issue 30 item 5): float32 tensors, dot products accumulated in double
// and stored as float32, and, for bfloat16 or float16 inputs, each result rounded to that dtype where torch stores a
// tensor of it (a matmul's output, an activation, an all-reduced sum).
#pragma once

#include <cstddef>
#include <cstdint>

#include "vllm/distributed/shard_plan.h"
#include "vllm/distributed/tensor_parallel.h"

namespace vllm::model_executor {

enum class Precision { kFloat32, kBFloat16, kFloat16 };

// `value` as a tensor of that precision stores it: itself, or the nearest bfloat16 or float16 (ties to even; NaN
// stays NaN; a float16 past its largest finite value is inf).
float Rounded(Precision precision, float value);
// Every element of `tensor` Rounded.
void RoundInPlace(Precision precision, HostTensor& tensor);

// A zero-filled [rows, cols] tensor.
HostTensor Zeros(std::int64_t rows, std::int64_t cols);

// x @ weight[rows, cols]^T (+ bias[rows]), [tokens, rows.end - rows.begin], rounded once per element: x is
// [tokens, cols.end - cols.begin] and `rows` and `cols` lie inside weight (the caller checked the shapes).
HostTensor LinearSlice(const HostTensor& x, const HostTensor& weight, distributed::Span rows, distributed::Span cols,
                       const HostTensor* bias, Precision precision);

// Rows [rows.begin, rows.end) of a [n, width] tensor.
HostTensor RowSlice(const HostTensor& tensor, distributed::Span rows);
// Columns [cols.begin, cols.end) of a [n, width] tensor.
HostTensor ColumnSlice(const HostTensor& tensor, distributed::Span cols);

}  // namespace vllm::model_executor
