// See include/vllm/v1/field_checks.h.
#include "vllm/v1/field_checks.h"

#include <cmath>
#include <stdexcept>

#include "vllm/v1/float_repr.h"

namespace vllm::v1 {

int64_t CheckInt(const std::string& owner, const std::string& name, int64_t value, int64_t minimum) {
  if (value < minimum) {
    throw std::invalid_argument(owner + "." + name + " must be an int >= " + std::to_string(minimum) + ", got " +
                                std::to_string(value));
  }
  return value;
}

std::optional<int64_t> CheckOptionalInt(const std::string& owner, const std::string& name,
                                        std::optional<int64_t> value, int64_t minimum) {
  if (value.has_value()) CheckInt(owner, name, *value, minimum);
  return value;
}

std::string PyIntList(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + "]";
}

int64_t CheckChoice(const std::string& owner, const std::string& name, int64_t value,
                    const std::vector<int64_t>& choices) {
  for (int64_t choice : choices) {
    if (choice == value) return value;
  }
  throw std::invalid_argument(owner + "." + name + " must be one of " + PyIntList(choices) + ", got " +
                              std::to_string(value));
}

double CheckFraction(const std::string& owner, const std::string& name, double value) {
  if (!std::isfinite(value) || !(0.0 < value && value <= 1.0)) {
    throw std::invalid_argument(owner + "." + name + " must be a finite float in (0, 1], got " +
                                PyFloatRepr(value));
  }
  return value;
}

}  // namespace vllm::v1
