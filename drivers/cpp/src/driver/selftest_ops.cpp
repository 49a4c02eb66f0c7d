// Two operations of the driver itself, for its protocol tests (tests/drivers/test_cpp_driver_protocol.py); no
// gate names them. `driver-echo` returns its input; `driver-raise` throws what its input describes:
// {"raise": "raised", "kind": K, "message": S} a gates::Raised, or "invalid_argument" / "out_of_range" /
// "runtime_error" the standard exception of that name with the message.
#include <stdexcept>
#include <string>

#include "driver/operation.h"

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

}  // namespace

GATES_OPERATION("driver-echo", [](const gates::Value& input) -> gates::Value { return input; });
GATES_OPERATION("driver-raise", raise_as_told);
