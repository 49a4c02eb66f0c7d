// A command-line parser that reads and refuses flags as the Python port's argparse parsers do (Python 3.11
// argparse, optionals only): exact flags, unique prefixes ("--num" for --num-blocks), "--flag=value", a value
// that looks like a negative number, refusals worded "argument --num-blocks: expected one argument", and a
// refusal message that starts with the usage lines, as argparse prints them to stderr.
//
// The Python CLIs are impl/entrypoints/cli_args.py (the shared sizing flags) and impl/entrypoints/kv_plan.py.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace vllm::entrypoints {

// A parsed flag value: None, an int, a float, a string or a bool.
using ArgValue = std::variant<std::monostate, int64_t, double, std::string, bool>;

// What a flag's value parser throws for text it refuses; the message follows "argument --flag: ".
struct ArgumentTypeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A refused command line: what argparse prints before exiting with status 2 ("usage: ...\nPROG: error: REASON").
struct ArgParseError : std::invalid_argument {
  ArgParseError(const std::string& message, std::string reason_)
      : std::invalid_argument(message), reason(std::move(reason_)) {}
  std::string reason;
};

// -h / --help was given: argparse prints the help and exits with status 0.
struct HelpRequested : std::runtime_error {
  explicit HelpRequested(const std::string& usage) : std::runtime_error(usage) {}
};

// Parsed flags by destination, in the order the arguments were added; a suppressed default is absent.
class Namespace {
 public:
  const ArgValue* find(const std::string& dest) const;
  void set(const std::string& dest, ArgValue value);
  const std::vector<std::pair<std::string, ArgValue>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, ArgValue>> items_;
};

struct Argument {
  std::string flag;       // "--num-blocks"
  std::string dest;       // "num_blocks"
  std::string metavar;    // "N"; empty: the choices ({a,b}) or DEST in capitals
  bool store_true = false;
  // Text -> value; throws ArgumentTypeError. Unset: the text itself.
  std::function<ArgValue(const std::string&)> type;
  std::string type_name;  // for "invalid <type_name> value: 'x'" when `type` throws another std::invalid_argument
  std::vector<std::string> choices;
  bool required = false;
  std::optional<ArgValue> default_value = ArgValue{};  // std::nullopt: argparse.SUPPRESS
};

class ArgParser {
 public:
  explicit ArgParser(std::string prog) : prog_(std::move(prog)) {}

  ArgParser& add(Argument argument);
  // Throws ArgParseError (refusal), HelpRequested (-h), or what a value parser throws otherwise.
  Namespace parse(const std::vector<std::string>& argv) const;
  // "usage: PROG [-h] [--flag N] ...", wrapped at 78 columns as argparse wraps it.
  std::string usage() const;

 private:
  [[noreturn]] void error(const std::string& reason) const;
  std::string prog_;
  std::vector<Argument> arguments_;
};

}  // namespace vllm::entrypoints
