// Byte arithmetic that refuses to wrap: the Python port's ints are unbounded, a C++ int64_t is not, so a product
// past INT64_MAX throws std::overflow_error (Python's OverflowError kind) naming what was being computed.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace vllm::v1 {

inline int64_t CheckedMul(int64_t a, int64_t b, const char* what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    throw std::overflow_error(std::string(what) + " does not fit in an int64_t (" + std::to_string(a) + " x " +
                              std::to_string(b) + ")");
  }
  return out;
}

inline int64_t CheckedAdd(int64_t a, int64_t b, const char* what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    throw std::overflow_error(std::string(what) + " does not fit in an int64_t (" + std::to_string(a) + " + " +
                              std::to_string(b) + ")");
  }
  return out;
}

// Ceiling division of a non-negative a by a positive b.
inline int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace vllm::v1
