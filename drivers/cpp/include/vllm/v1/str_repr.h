// Python's spelling of text in messages: repr(str) (quotes and escapes chosen as Python chooses them) and the
// Python port's shown() (a repr cut to 60 characters). Text is UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vllm::v1 {

// The code points of UTF-8 text (an invalid byte stands for itself).
std::vector<uint32_t> DecodeUtf8(const std::string& text);
std::string EncodeUtf8(const std::vector<uint32_t>& code_points);

// str.isspace() of one code point.
bool IsPyWhitespace(uint32_t code_point);

// text.strip(): Python's whitespace removed from both ends.
std::string PyStrip(const std::string& text);

// repr(text).
std::string PyStrRepr(const std::string& text);

// repr(text) cut to `limit` characters plus "..." when longer (impl/entrypoints/config_file.py shown()).
std::string Shown(const std::string& repr_text, size_t limit = 60);

}  // namespace vllm::v1
