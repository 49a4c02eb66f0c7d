// See include/vllm/entrypoints/sizes.h.
#include "vllm/entrypoints/sizes.h"

#include <cstdlib>
#include <stdexcept>
#include <utility>
#include <vector>

#include "vllm/v1/str_repr.h"

namespace vllm::entrypoints {

namespace {

const char* kHint = "plain bytes, k/m/g/t (decimal), K/M/G/T (binary), KB/MB/GB/TB or KiB/MiB/GiB/TiB";

// Decimal digit strings as unsigned integers.
std::string StripZeros(const std::string& digits) {
  const size_t first = digits.find_first_not_of('0');
  return first == std::string::npos ? "0" : digits.substr(first);
}

std::string MulSmall(const std::string& digits, uint32_t factor) {
  std::string out(digits.size(), '0');
  uint64_t carry = 0;
  for (size_t i = digits.size(); i-- > 0;) {
    const uint64_t v = static_cast<uint64_t>(digits[i] - '0') * factor + carry;
    out[i] = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  while (carry) {
    out.insert(out.begin(), static_cast<char>('0' + carry % 10));
    carry /= 10;
  }
  return StripZeros(out);
}

// digits / divisor; the remainder in *remainder.
std::string DivSmall(const std::string& digits, uint32_t divisor, uint32_t* remainder) {
  std::string out;
  uint64_t rest = 0;
  for (char c : digits) {
    rest = rest * 10 + static_cast<uint64_t>(c - '0');
    out.push_back(static_cast<char>('0' + rest / divisor));
    rest %= divisor;
  }
  *remainder = static_cast<uint32_t>(rest);
  return StripZeros(out);
}

struct Unit {
  const char* name;
  bool binary;
  int power;  // 10^power (decimal) or 2^power (binary)
};

const Unit* FindUnit(const std::string& name) {
  static const Unit units[] = {
      {"k", false, 3},  {"m", false, 6},  {"g", false, 9},  {"t", false, 12},
      {"KB", false, 3}, {"MB", false, 6}, {"GB", false, 9}, {"TB", false, 12},
      {"K", true, 10},  {"M", true, 20},  {"G", true, 30},  {"T", true, 40},
      {"KiB", true, 10}, {"MiB", true, 20}, {"GiB", true, 30}, {"TiB", true, 40},
  };
  for (const Unit& unit : units) {
    if (name == unit.name) return &unit;
  }
  return nullptr;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLetter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

// The grammar (?P<whole>[0-9]+)(?:\.(?P<frac>[0-9]+))?(?: +(?=[A-Za-z]))?(?P<unit>[A-Za-z]*), matched in full.
bool MatchSize(const std::string& s, std::string* whole, std::optional<std::string>* frac, std::string* unit) {
  size_t i = 0;
  while (i < s.size() && IsDigit(s[i])) ++i;
  if (i == 0) return false;
  *whole = s.substr(0, i);
  if (i + 1 < s.size() && s[i] == '.' && IsDigit(s[i + 1])) {
    size_t j = i + 1;
    while (j < s.size() && IsDigit(s[j])) ++j;
    *frac = s.substr(i + 1, j - i - 1);
    i = j;
  }
  size_t j = i;
  while (j < s.size() && s[j] == ' ') ++j;
  if (j > i && j < s.size() && IsLetter(s[j])) i = j;
  size_t k = i;
  while (k < s.size() && IsLetter(s[k])) ++k;
  *unit = s.substr(i, k - i);
  return k == s.size();
}

}  // namespace

std::optional<uint64_t> ByteSize::as_uint64() const {
  if (digits.size() > 20) return std::nullopt;
  if (digits.size() == 20 && digits > "18446744073709551615") return std::nullopt;
  return std::strtoull(digits.c_str(), nullptr, 10);
}

std::optional<int64_t> ByteSize::as_int64() const {
  if (digits.size() > 19) return std::nullopt;
  if (digits.size() == 19 && digits > "9223372036854775807") return std::nullopt;
  return static_cast<int64_t>(std::strtoll(digits.c_str(), nullptr, 10));
}

double ByteSize::as_double() const { return std::strtod(digits.c_str(), nullptr); }

ByteSize ParseSize(const std::string& text, const std::string& what) {
  const std::string shown = vllm::v1::PyStrRepr(text);
  std::string whole, unit;
  std::optional<std::string> frac;
  if (!MatchSize(vllm::v1::PyStrip(text), &whole, &frac, &unit)) {
    throw std::invalid_argument(what + ": cannot read " + shown + " as a size; use " + kHint);
  }
  if (const Unit* found = FindUnit(unit); found != nullptr && found->binary) {
    if (frac.has_value()) {
      const std::string lower(1, static_cast<char>(unit[0] - 'A' + 'a'));
      throw std::invalid_argument(what + ": " + shown + " has a fraction with the binary unit '" + unit +
                                  "', which is not allowed; write a whole number of " + unit +
                                  ", or use a decimal unit (" + lower + " or " + unit.substr(0, 1) + "B)");
    }
    std::string value = StripZeros(whole);
    for (int p = 0; p < found->power; p += 10) value = MulSmall(value, 1024);
    return {value};
  } else if (found != nullptr) {
    // (whole.frac) * 10^power: the decimal point moves right by `power` digits.
    const std::string f = frac.value_or("0");
    const size_t shift = static_cast<size_t>(found->power);
    std::string moved = f.substr(0, std::min(shift, f.size()));
    moved.append(shift - moved.size(), '0');
    const std::string integer = StripZeros(whole + moved);
    const std::string rest = f.size() > shift ? f.substr(shift) : "";
    const std::string numerator = StripZeros(rest.empty() ? "0" : rest);
    if (numerator != "0") {
      // rest / 10^len(rest), in lowest terms: only factors 2 and 5 can cancel.
      std::string num = numerator;
      size_t twos = rest.size(), fives = rest.size();
      uint32_t remainder = 0;
      while (twos > 0) {
        std::string halved = DivSmall(num, 2, &remainder);
        if (remainder) break;
        num = halved;
        --twos;
      }
      while (fives > 0) {
        std::string fifth = DivSmall(num, 5, &remainder);
        if (remainder) break;
        num = fifth;
        --fives;
      }
      std::string denominator = "1";
      for (size_t t = 0; t < twos; ++t) denominator = MulSmall(denominator, 2);
      for (size_t t = 0; t < fives; ++t) denominator = MulSmall(denominator, 5);
      throw std::invalid_argument(what + ": " + shown + " is not a whole number of bytes (" + integer + " and " +
                                  num + "/" + denominator + " bytes)");
    }
    return {integer};
  }
  if (!unit.empty()) {
    throw std::invalid_argument(what + ": cannot read " + shown + " as a size: unknown unit " +
                                vllm::v1::PyStrRepr(unit) + "; use " + kHint);
  }
  if (frac.has_value()) {
    throw std::invalid_argument(what + ": " + shown + " is not a whole number of bytes; use " + kHint);
  }
  return {StripZeros(whole)};
}

}  // namespace vllm::entrypoints
