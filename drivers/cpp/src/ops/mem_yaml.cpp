// See mem_yaml.h.
#include "mem_yaml.h"

#include <cmath>
#include <regex>
#include <vector>

namespace gates::mem {

namespace {

struct Line {
  size_t number;
  size_t indent;
  std::string text;  // without indentation and comment
};

// The text before a comment: '#' at the start or after whitespace, outside quotes.
std::string StripComment(const std::string& s) {
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    if (c == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) return s.substr(0, i);
  }
  return s;
}

std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}

[[noreturn]] void Bad(const std::string& source, size_t line, const std::string& why) {
  Refuse(source + ": line " + std::to_string(line) + ": " + why + " (only block mappings of scalars are read)");
}

Value Scalar(const std::string& raw, const std::string& source, size_t line) {
  const std::string s = Trim(raw);
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return Value();
  if (s.front() == '"') {
    if (s.size() < 2 || s.back() != '"') Bad(source, line, "unterminated string");
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      if (s[i] == '\\' && i + 2 < s.size()) {
        const char e = s[++i];
        out.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e);
      } else {
        out.push_back(s[i]);
      }
    }
    return out;
  }
  if (s.front() == '\'') {
    if (s.size() < 2 || s.back() != '\'') Bad(source, line, "unterminated string");
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      out.push_back(s[i]);
      if (s[i] == '\'' && i + 2 < s.size() && s[i + 1] == '\'') ++i;
    }
    return out;
  }
  if (s.front() == '[' || s.front() == '{' || s.front() == '&' || s.front() == '*' || s.front() == '|' ||
      s.front() == '>' || s.front() == '!') {
    Bad(source, line, "unsupported YAML value '" + s + "'");
  }
  static const std::vector<std::string> trues = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
  static const std::vector<std::string> falses = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
  for (const auto& t : trues) {
    if (s == t) return true;
  }
  for (const auto& f : falses) {
    if (s == f) return false;
  }
  static const std::regex int_re("[-+]?(0|[1-9][0-9_]*)");
  static const std::regex float_re(R"([-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?)");
  std::string digits;
  for (char c : s) {
    if (c != '_') digits.push_back(c);
  }
  if (std::regex_match(s, int_re)) {
    const bool negative = digits[0] == '-';
    const std::string magnitude = digits[0] == '-' || digits[0] == '+' ? digits.substr(1) : digits;
    Value v = DecimalValue(magnitude);
    if (negative) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        Bad(source, line, "integer out of range");
      }
      if (v.is_object()) Bad(source, line, "integer out of range");
      return Value(-v.get<int64_t>());
    }
    return v;
  }
  if (std::regex_match(s, float_re) && s != "." && s != "+." && s != "-.") return std::strtod(digits.c_str(), nullptr);
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf") return HUGE_VAL;
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") return -HUGE_VAL;
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return std::nan("");
  return s;
}

Value Block(const std::vector<Line>& lines, size_t& at, size_t indent, const std::string& source) {
  Value out = Value::object();
  while (at < lines.size() && lines[at].indent >= indent) {
    const Line& line = lines[at];
    if (line.indent != indent) Bad(source, line.number, "unexpected indentation");
    if (line.text.rfind("- ", 0) == 0 || line.text == "-") Bad(source, line.number, "sequences are not read");
    const size_t colon = line.text.find(": ") != std::string::npos ? line.text.find(": ")
                         : (!line.text.empty() && line.text.back() == ':') ? line.text.size() - 1
                                                                            : std::string::npos;
    if (colon == std::string::npos) Bad(source, line.number, "expected 'key: value'");
    const std::string key = Trim(line.text.substr(0, colon));
    const std::string rest = Trim(line.text.substr(colon + 1));
    if (out.contains(key)) Bad(source, line.number, "key '" + key + "' given twice");
    ++at;
    if (rest.empty() && at < lines.size() && lines[at].indent > indent) {
      out[key] = Block(lines, at, lines[at].indent, source);
    } else {
      out[key] = Scalar(rest, source, line.number);
    }
  }
  return out;
}

}  // namespace

Value ParseYamlMapping(const std::string& text, const std::string& source) {
  std::vector<Line> lines;
  size_t number = 0, start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string raw = text.substr(start, end - start);
    ++number;
    start = end + 1;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    if (raw.rfind("---", 0) == 0 || raw.rfind("%", 0) == 0) Bad(source, number, "documents and directives");
    if (raw.find('\t') != std::string::npos && raw.find_first_not_of(" \t") != std::string::npos &&
        raw.find_first_not_of(' ') < raw.size() && raw[raw.find_first_not_of(' ')] == '\t') {
      Bad(source, number, "tab indentation");
    }
    const std::string content = StripComment(raw);
    if (Trim(content).empty()) continue;
    const size_t indent = content.find_first_not_of(' ');
    lines.push_back({number, indent, Trim(content)});
    if (end == text.size()) break;
  }
  size_t at = 0;
  if (lines.empty()) return Value();
  Value out = Block(lines, at, lines[0].indent, source);
  if (at != lines.size()) Bad(source, lines[at].number, "unexpected indentation");
  return out;
}

}  // namespace gates::mem
