// See include/vllm/v1/float_repr.h.
#include "vllm/v1/float_repr.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace vllm::v1 {

std::string PyFloatRepr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0.0) return std::signbit(x) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form: [-]d[.ddd]e[+-]XX.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const auto e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exponent = std::atoi(sci.c_str() + e_pos + 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exponent >= -5 + 1 && exponent < 16) {  // Python's repr: fixed for -4 <= exponent < 16
    const int point = exponent + 1;             // digits before the decimal point
    if (point <= 0) {
      out = "0." + std::string(static_cast<size_t>(-point), '0') + digits;
    } else if (static_cast<size_t>(point) >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(point) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp_buf;
  }
  return negative ? "-" + out : out;
}

double PyRound(double x, int ndigits) {
  if (!std::isfinite(x)) return x;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", ndigits, x);  // glibc rounds the exact binary value, ties to even
  return std::strtod(buf, nullptr);
}

std::string PyFormatG(double x, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", precision, x);
  return buf;
}

}  // namespace vllm::v1
