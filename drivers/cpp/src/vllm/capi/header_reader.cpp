// Reading a header's vllm_model_params in either convention (include/vllm/capi/header_reader.h).
#include "vllm/capi/header_reader.h"

#include <cctype>
#include <optional>
#include <regex>
#include <sstream>

#include "vllm/v1/str_repr.h"

namespace vllm::capi {
namespace {

const char kStructOpen[] = "typedef struct vllm_model_params";

std::vector<std::string> Lines(const std::string& text) {
  // str.splitlines() for the line ends a header uses (\n, \r\n, \r).
  std::vector<std::string> lines;
  std::string current;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n' || c == '\r') {
      lines.push_back(current);
      current.clear();
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      current += c;
    }
  }
  if (!current.empty()) lines.push_back(current);
  return lines;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string Strip(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && IsSpace(s[begin])) ++begin;
  while (end > begin && IsSpace(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A comment line's text without its "/*", leading "*" and "*/" markers.
std::string CommentText(const std::string& line) {
  std::string s = Strip(line);
  if (StartsWith(s, "/*")) s = s.substr(2);
  if (EndsWith(s, "*/")) s = s.substr(0, s.size() - 2);
  s = Strip(s);
  size_t stars = 0;
  while (stars < s.size() && s[stars] == '*') ++stars;
  return Strip(s.substr(stars));
}

std::string Join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? separator : "") + parts[i];
  return out;
}

std::string NormalisedType(const std::string& text) {
  std::string spaced;
  for (char c : text) spaced += c == '*' ? std::string(" * ") : std::string(1, c);
  std::istringstream words(spaced);
  std::vector<std::string> parts;
  for (std::string word; words >> word;) parts.push_back(word);
  return Join(parts, " ");
}

std::pair<size_t, size_t> StructSpan(const std::vector<std::string>& lines) {
  size_t start = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (StartsWith(Strip(lines[i]), kStructOpen)) {
      start = i;
      break;
    }
  }
  if (start == lines.size()) throw AbiHistoryError("the header does not declare 'typedef struct vllm_model_params'");
  for (size_t end = start + 1; end < lines.size(); ++end)
    if (StartsWith(Strip(lines[end]), "}")) return {start, end};
  throw AbiHistoryError("the struct vllm_model_params is not closed");
}

struct Declared {
  std::string name, ctype;
  std::optional<int> annotation, heading;
};

std::optional<int> LeadingAnnotation(const std::string& text) {  // "^\[v(\d+)\]"
  static const std::regex pattern(R"(^\[v([0-9]+)\])");
  std::smatch m;
  if (std::regex_search(text, m, pattern)) return std::stoi(m[1].str());
  return std::nullopt;
}

std::optional<int> Heading(const std::string& line) {  // "\(ABI v(\d+)\)"
  static const std::regex pattern(R"(\(ABI v([0-9]+)\))");
  std::smatch m;
  if (std::regex_search(line, m, pattern)) return std::stoi(m[1].str());
  return std::nullopt;
}

std::vector<Declared> Declarations(const std::vector<std::string>& lines, size_t begin, size_t end) {
  static const std::regex member(R"(^(.*?)\b([A-Za-z_][A-Za-z0-9_]*)\s*;$)");
  std::vector<Declared> found;
  std::vector<std::vector<std::string>> blocks;
  bool in_comment = false;
  for (size_t i = begin; i < end; ++i) {
    const std::string stripped = Strip(lines[i]);
    if (in_comment || StartsWith(stripped, "/*")) {
      if (!in_comment) blocks.emplace_back();
      blocks.back().push_back(CommentText(stripped));
      in_comment = !Contains(stripped, "*/");
      continue;
    }
    if (stripped.empty()) continue;
    std::smatch m;
    if (!std::regex_match(stripped, m, member))
      throw AbiHistoryError("cannot read the member line " + vllm::v1::PyStrRepr(stripped));
    std::vector<std::string> joined;
    for (const auto& block : blocks) joined.push_back(Join(block, " "));
    Declared d{m[2].str(), NormalisedType(m[1].str()), LeadingAnnotation(Strip(Join(joined, " "))), std::nullopt};
    for (const auto& block : blocks)
      if (!block.empty())
        if (auto h = Heading(block.front())) d.heading = h;
    found.push_back(d);
    blocks.clear();
  }
  return found;
}

std::vector<std::string> UniqueInOrder(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    bool seen = false;
    for (const auto& o : out) seen = seen || o == n;
    if (!seen) out.push_back(n);
  }
  return out;
}

bool IsVersionMacro(const std::string& line) {
  static const std::regex macro(R"(^#\s*define\s+VLLM_ABI_VERSION\s+(\S+))");
  return std::regex_search(Strip(line), macro);
}

// The comments before the "#define VLLM_ABI_VERSION" line, each as its lines without "/*" and "*/" (a line's
// leading spaces and "*" kept): the history comment of either convention (spec/c-abi.md CAPI-1.7).
std::vector<std::vector<std::string>> HistoryComments(const std::vector<std::string>& lines) {
  std::vector<std::vector<std::string>> comments;
  bool in_comment = false;
  for (const std::string& line : lines) {
    if (IsVersionMacro(line)) break;
    std::string rest = line;
    while (true) {
      if (!in_comment) {
        const size_t open = rest.find("/*");
        if (open == std::string::npos) break;
        rest = rest.substr(open + 2);
        comments.emplace_back();
        in_comment = true;
      }
      const size_t close = rest.find("*/");
      comments.back().push_back(close == std::string::npos ? rest : rest.substr(0, close));
      if (close == std::string::npos) break;
      in_comment = false;
      rest = rest.substr(close + 2);
    }
  }
  return comments;
}

// "+name" words of " *   vN  text" history lines, continuation lines indented by eight spaces after " *".
std::map<int, std::vector<std::string>> AnnotationHistory(const std::vector<std::string>& lines) {
  static const std::regex entry(R"(^v([0-9]+)\s+(.*)$)");
  std::map<int, std::vector<std::string>> entries;
  for (const auto& comment : HistoryComments(lines)) {
    std::optional<int> current;
    for (const std::string& line : comment) {
      size_t first = 0;
      while (first < line.size() && IsSpace(line[first])) ++first;
      const bool starred = first < line.size() && line[first] == '*';
      const std::string body = CommentText(line);
      std::smatch m;
      if (starred && std::regex_match(body, m, entry)) {
        current = std::stoi(m[1].str());
        if (entries.count(*current))
          throw AbiHistoryError("the version history comment has two entries for v" + std::to_string(*current));
        entries[*current] = {};
      } else if (body.empty() || !StartsWith(line, " *        ")) {
        current.reset();
        continue;
      }
      if (current) {
        std::istringstream words(body);
        for (std::string word; words >> word;) {
          if (word.empty() || word[0] != '+') continue;
          std::string name = word.substr(1);
          while (!name.empty() && std::string(":,.;").find(name.back()) != std::string::npos) name.pop_back();
          entries[*current].push_back(name);
        }
      }
    }
  }
  return entries;
}

// "vN:" or "vN —" / "vN –" / "vN -" opening a log line, followed by a space or the line's end.
std::optional<int> PortEntry(const std::string& body) {
  if (body.size() < 2 || body[0] != 'v' || !std::isdigit(static_cast<unsigned char>(body[1]))) return std::nullopt;
  size_t i = 1;
  while (i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]))) ++i;
  const int version = std::stoi(body.substr(1, i - 1));
  size_t after = 0;
  if (i < body.size() && body[i] == ':') {
    after = i + 1;
  } else {
    size_t j = i;
    while (j < body.size() && IsSpace(body[j])) ++j;
    if (j == i) return std::nullopt;
    if (body.compare(j, 3, "\xE2\x80\x94") == 0 || body.compare(j, 3, "\xE2\x80\x93") == 0) {
      after = j + 3;
    } else if (j < body.size() && body[j] == '-') {
      after = j + 1;
    } else {
      return std::nullopt;
    }
  }
  if (after < body.size() && !IsSpace(body[after])) return std::nullopt;
  return version;
}

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// "vllm_model_params.<member>" not preceded by a word character or a dot.
std::vector<std::string> Claims(const std::string& text) {
  static const std::string marker = "vllm_model_params.";
  std::vector<std::string> names;
  for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) {
    if (at > 0 && (IsWordChar(text[at - 1]) || text[at - 1] == '.')) continue;
    size_t begin = at + marker.size(), end = begin;
    if (end >= text.size() || !(std::isalpha(static_cast<unsigned char>(text[end])) || text[end] == '_')) continue;
    while (end < text.size() && IsWordChar(text[end])) ++end;
    names.push_back(text.substr(begin, end - begin));
  }
  return UniqueInOrder(names);
}

// The port's version log: each "vN:" / "vN —" entry of the history comment, running to the next entry or the end
// of its comment, with the members it names (CAPI-1.6, CAPI-1.7). Remarks after the macro are never entries.
std::map<int, std::vector<std::string>> PortLog(const std::vector<std::string>& lines) {
  std::map<int, std::vector<std::string>> texts;
  for (const auto& comment : HistoryComments(lines)) {
    std::optional<int> current;
    for (const std::string& line : comment) {
      const std::string body = CommentText(line);
      if (auto version = PortEntry(body)) {
        current = version;
        if (texts.count(*current))
          throw AbiHistoryError("the version log before VLLM_ABI_VERSION has two entries for v" +
                                std::to_string(*current));
        texts[*current] = {};
      }
      if (current) texts[*current].push_back(body);
    }
  }
  std::map<int, std::vector<std::string>> log;
  for (const auto& [version, parts] : texts) log[version] = Claims(Join(parts, " "));
  return log;
}

}  // namespace

int ReadAbiVersion(const std::string& text) {
  static const std::regex macro(R"(^#\s*define\s+VLLM_ABI_VERSION\s+(\S+))");
  std::vector<std::string> values;
  for (const std::string& line : Lines(text)) {
    std::smatch m;
    const std::string stripped = Strip(line);
    if (std::regex_search(stripped, m, macro)) values.push_back(m[1].str());
  }
  bool digits = values.size() == 1 && !values[0].empty();
  if (digits)
    for (char c : values[0]) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits) {
    std::vector<std::string> shown;
    for (const auto& v : values) shown.push_back(vllm::v1::PyStrRepr(v));
    throw AbiHistoryError("expected one '#define VLLM_ABI_VERSION <number>', found [" + Join(shown, ", ") + "]");
  }
  return std::stoi(values[0]);
}

HeaderFacts ReadHeader(const std::string& text) {
  const std::vector<std::string> lines = Lines(text);
  const auto [start, end] = StructSpan(lines);
  const std::vector<Declared> declared = Declarations(lines, start + 1, end);
  if (declared.empty()) throw AbiHistoryError("struct vllm_model_params declares no member");
  HeaderFacts facts;
  bool annotated = false;
  for (const auto& d : declared) annotated = annotated || d.annotation.has_value();
  if (annotated) {
    for (const auto& d : declared) {
      if (!d.annotation)
        throw AbiHistoryError("member " + vllm::v1::PyStrRepr(d.name) + " has no '[vN]' annotation opening its comment");
      facts.members.push_back({d.name, d.ctype, *d.annotation});
    }
    facts.convention = Convention::kAnnotations;
  } else {
    bool headed = false;
    for (const auto& d : declared) headed = headed || d.heading.has_value();
    if (!headed)
      throw AbiHistoryError("member " + vllm::v1::PyStrRepr(declared.front().name) +
                            " has no '[vN]' annotation opening its comment, and the struct has no '(ABI vN)' heading");
    int current = 1;
    for (const auto& d : declared) {
      if (d.heading) current = *d.heading;
      facts.members.push_back({d.name, d.ctype, current});
    }
    facts.convention = Convention::kHeadings;
  }
  facts.log = facts.convention == Convention::kAnnotations ? AnnotationHistory(lines) : PortLog(lines);
  facts.abi_version = ReadAbiVersion(text);
  return facts;
}

}  // namespace vllm::capi
