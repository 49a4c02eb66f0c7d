// See include/vllm/entrypoints/arg_parser.h. The steps follow CPython 3.11 Lib/argparse.py
// (_parse_optional, _get_option_tuples, consume_optional, _format_usage).
#include "vllm/entrypoints/arg_parser.h"

#include <regex>

#include "vllm/v1/str_repr.h"

namespace vllm::entrypoints {

const ArgValue* Namespace::find(const std::string& dest) const {
  for (const auto& [name, value] : items_) {
    if (name == dest) return &value;
  }
  return nullptr;
}

void Namespace::set(const std::string& dest, ArgValue value) {
  for (auto& [name, current] : items_) {
    if (name == dest) {
      current = std::move(value);
      return;
    }
  }
  items_.emplace_back(dest, std::move(value));
}

ArgParser& ArgParser::add(Argument argument) {
  arguments_.push_back(std::move(argument));
  return *this;
}

namespace {

constexpr size_t kTextWidth = 78;  // argparse: terminal columns (80 without one) - 2

std::string UsagePart(const Argument& a) {
  if (a.store_true) return a.required ? a.flag : "[" + a.flag + "]";
  std::string metavar = a.metavar;
  if (metavar.empty() && !a.choices.empty()) {
    metavar = "{";
    for (size_t i = 0; i < a.choices.size(); ++i) metavar += (i ? "," : "") + a.choices[i];
    metavar += "}";
  }
  if (metavar.empty()) {
    for (char c : a.dest) metavar.push_back(static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c));
  }
  const std::string part = a.flag + " " + metavar;
  return a.required ? part : "[" + part + "]";
}

struct Match {
  const Argument* argument = nullptr;  // nullptr: -h/--help
  std::string flag;
  std::optional<std::string> explicit_arg;
};

}  // namespace

std::string ArgParser::usage() const {
  std::vector<std::string> parts = {"[-h]"};
  for (const Argument& a : arguments_) parts.push_back(UsagePart(a));
  const std::string prefix = "usage: ";
  std::string one_line = prog_;
  for (const std::string& part : parts) one_line += " " + part;
  if (prefix.size() + one_line.size() <= kTextWidth) return prefix + one_line;
  const std::string indent(prefix.size() + prog_.size() + 1, ' ');
  std::vector<std::string> lines;
  std::vector<std::string> line;
  size_t line_len = prefix.size() - 1;
  std::vector<std::string> all = {prog_};
  all.insert(all.end(), parts.begin(), parts.end());
  auto flush = [&] {
    std::string text = indent;
    for (size_t i = 0; i < line.size(); ++i) text += (i ? " " : "") + line[i];
    lines.push_back(text);
    line.clear();
  };
  for (const std::string& part : all) {
    if (line_len + 1 + part.size() > kTextWidth && !line.empty()) {
      flush();
      line_len = indent.size() - 1;
    }
    line.push_back(part);
    line_len += part.size() + 1;
  }
  if (!line.empty()) flush();
  lines[0] = lines[0].substr(indent.size());
  std::string out = prefix;
  for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + lines[i];
  return out;
}

void ArgParser::error(const std::string& reason) const {
  throw ArgParseError(usage() + "\n" + prog_ + ": error: " + reason, reason);
}

Namespace ArgParser::parse(const std::vector<std::string>& argv) const {
  static const std::regex negative_number(R"(^-\d+$|^-\d*\.\d+$)");
  // Every flag string the parser knows, -h and --help first.
  std::vector<std::pair<std::string, const Argument*>> flags = {{"-h", nullptr}, {"--help", nullptr}};
  for (const Argument& a : arguments_) flags.emplace_back(a.flag, &a);
  auto exact = [&](const std::string& flag) -> std::optional<Match> {
    for (const auto& [name, argument] : flags) {
      if (name == flag) return Match{argument, name, std::nullopt};
    }
    return std::nullopt;
  };

  // _parse_optional: an option (Match), an unknown option (flag set, no argument) or a value (std::nullopt).
  struct Classified {
    bool is_option = false;
    bool known = false;
    Match match;
  };
  auto classify = [&](const std::string& arg) -> Classified {
    if (arg.empty() || arg[0] != '-') return {};
    if (auto m = exact(arg)) return {true, true, *m};
    if (arg.size() == 1) return {};
    if (const auto eq = arg.find('='); eq != std::string::npos) {
      if (auto m = exact(arg.substr(0, eq))) {
        m->explicit_arg = arg.substr(eq + 1);
        return {true, true, *m};
      }
    }
    std::vector<Match> tuples;
    if (arg.rfind("--", 0) == 0) {
      const auto eq = arg.find('=');
      const std::string prefix = eq == std::string::npos ? arg : arg.substr(0, eq);
      std::optional<std::string> explicit_arg;
      if (eq != std::string::npos) explicit_arg = arg.substr(eq + 1);
      for (const auto& [name, argument] : flags) {
        if (name.rfind(prefix, 0) == 0) tuples.push_back({argument, name, explicit_arg});
      }
    } else {
      const std::string short_prefix = arg.substr(0, 2);
      for (const auto& [name, argument] : flags) {
        if (name == short_prefix) {
          tuples.push_back({argument, name, arg.substr(2)});
        } else if (name.rfind(arg, 0) == 0) {
          tuples.push_back({argument, name, std::nullopt});
        }
      }
    }
    if (tuples.size() > 1) {
      std::string options;
      for (size_t i = 0; i < tuples.size(); ++i) options += (i ? ", " : "") + tuples[i].flag;
      error("ambiguous option: " + arg + " could match " + options);
    }
    if (tuples.size() == 1) return {true, true, tuples[0]};
    if (std::regex_match(arg, negative_number)) return {};
    if (arg.find(' ') != std::string::npos) return {};
    return {true, false, Match{nullptr, arg, std::nullopt}};
  };

  Namespace ns;
  for (const Argument& a : arguments_) {
    if (a.default_value.has_value() && ns.find(a.dest) == nullptr) ns.set(a.dest, *a.default_value);
  }
  // The pattern of each argument: 'O' option, 'A' value, '-' the "--" separator (everything after it is 'A').
  std::vector<Classified> kinds(argv.size());
  std::vector<char> pattern(argv.size(), 'A');
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--") {
      pattern[i] = '-';
      break;
    }
    kinds[i] = classify(argv[i]);
    if (kinds[i].is_option) pattern[i] = 'O';
  }
  std::vector<std::string> extras;
  std::vector<const Argument*> seen;
  auto take = [&](const Argument& a, const std::string& text) {
    ArgValue value = text;
    if (a.type) {
      try {
        value = a.type(text);
      } catch (const ArgumentTypeError& err) {
        error("argument " + a.flag + ": " + err.what());
      } catch (const std::invalid_argument&) {
        error("argument " + a.flag + ": invalid " + a.type_name + " value: " + vllm::v1::PyStrRepr(text));
      }
    }
    if (!a.choices.empty()) {
      const std::string* chosen = std::get_if<std::string>(&value);
      bool ok = false;
      for (const std::string& choice : a.choices) ok = ok || (chosen != nullptr && *chosen == choice);
      if (!ok) {
        std::string listed;
        for (size_t i = 0; i < a.choices.size(); ++i) listed += (i ? ", " : "") + vllm::v1::PyStrRepr(a.choices[i]);
        error("argument " + a.flag + ": invalid choice: " + vllm::v1::PyStrRepr(text) + " (choose from " + listed +
              ")");
      }
    }
    ns.set(a.dest, std::move(value));
    seen.push_back(&a);
  };
  size_t i = 0;
  while (i < argv.size()) {
    if (pattern[i] == '-') {  // "--": the rest are values no option takes
      extras.insert(extras.end(), argv.begin() + static_cast<long>(i), argv.end());
      break;
    }
    if (pattern[i] == 'A') {
      extras.push_back(argv[i]);
      ++i;
      continue;
    }
    const Classified& c = kinds[i];
    ++i;
    if (!c.known) {
      extras.push_back(c.match.flag);
      continue;
    }
    const Argument* a = c.match.argument;
    const std::string name = a == nullptr ? "-h/--help" : a->flag;
    if (a == nullptr || a->store_true) {
      if (c.match.explicit_arg.has_value()) {
        error("argument " + name + ": ignored explicit argument " + vllm::v1::PyStrRepr(*c.match.explicit_arg));
      }
      if (a == nullptr) throw HelpRequested(usage());
      ns.set(a->dest, true);
      seen.push_back(a);
      continue;
    }
    if (c.match.explicit_arg.has_value()) {
      take(*a, *c.match.explicit_arg);
      continue;
    }
    if (i >= argv.size() || pattern[i] != 'A') error("argument " + name + ": expected one argument");
    take(*a, argv[i]);
    ++i;
  }
  std::string missing;
  for (const Argument& a : arguments_) {
    bool given = false;
    for (const Argument* s : seen) given = given || s == &a;
    if (a.required && !given) missing += (missing.empty() ? "" : ", ") + a.flag;
  }
  if (!missing.empty()) error("the following arguments are required: " + missing);
  if (!extras.empty()) {
    std::string listed;
    for (size_t k = 0; k < extras.size(); ++k) listed += (k ? " " : "") + extras[k];
    error("unrecognized arguments: " + listed);
  }
  return ns;
}

}  // namespace vllm::entrypoints
