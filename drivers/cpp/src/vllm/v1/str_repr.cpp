// See include/vllm/v1/str_repr.h.
#include "vllm/v1/str_repr.h"

#include <cstdio>

namespace vllm::v1 {

std::vector<uint32_t> DecodeUtf8(const std::string& text) {
  std::vector<uint32_t> out;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || i + static_cast<size_t>(extra) >= n + (extra == 0 ? 1 : 0)) {
      out.push_back(c);
      ++i;
      continue;
    }
    uint32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1F) : extra == 2 ? (c & 0x0F) : (c & 0x07);
    bool ok = true;
    for (int k = 1; k <= extra; ++k) {
      if (i + static_cast<size_t>(k) >= n || (s[i + k] & 0xC0) != 0x80) {
        ok = false;
        break;
      }
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (!ok) {
      out.push_back(c);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

std::string EncodeUtf8(const std::vector<uint32_t>& code_points) {
  std::string out;
  for (uint32_t cp : code_points) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

bool IsPyWhitespace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string PyStrip(const std::string& text) {
  const std::vector<uint32_t> cps = DecodeUtf8(text);
  size_t begin = 0, end = cps.size();
  while (begin < end && IsPyWhitespace(cps[begin])) ++begin;
  while (end > begin && IsPyWhitespace(cps[end - 1])) --end;
  return EncodeUtf8(std::vector<uint32_t>(cps.begin() + static_cast<long>(begin), cps.begin() + static_cast<long>(end)));
}

namespace {
// str.isprintable() of one code point, for the code points a size or a flag value plausibly holds: controls,
// separators other than the space, and the common format characters are not printable.
bool IsPyPrintable(uint32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c >= 0x80 && c <= 0xA0) return false;
  if (c == 0xAD || c == 0x061C || c == 0x180E || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) ||
      (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) ||
      c == 0x3000 || c == 0xFEFF || (c >= 0xD800 && c <= 0xDFFF) || (c >= 0xE000 && c <= 0xF8FF) ||
      (c >= 0xFFF9 && c <= 0xFFFB) || c == 0xFFFE || c == 0xFFFF || c > 0x10FFFF) {
    return false;
  }
  return true;
}
}  // namespace

std::string PyStrRepr(const std::string& text) {
  const std::vector<uint32_t> cps = DecodeUtf8(text);
  bool has_single = false, has_double = false;
  for (uint32_t c : cps) {
    has_single = has_single || c == '\'';
    has_double = has_double || c == '"';
  }
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (uint32_t c : cps) {
    char buf[16];
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (IsPyPrintable(c)) {
      out += EncodeUtf8({c});
    } else {
      if (c < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", c);
      }
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string Shown(const std::string& repr_text, size_t limit) {
  const std::vector<uint32_t> cps = DecodeUtf8(repr_text);
  if (cps.size() <= limit) return repr_text;
  return EncodeUtf8(std::vector<uint32_t>(cps.begin(), cps.begin() + static_cast<long>(limit))) + "...";
}

}  // namespace vllm::v1
