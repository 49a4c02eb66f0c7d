// The command-line KV sizing flags shared by kv-plan and the example CLI (MEM-1.1, MEM-1.9; issue 14).
//
// Ported from impl/entrypoints/cli_args.py (which mirrors vllm/engine/arg_utils.py; --kv-cache-memory-bytes is
// accepted as an alias). One number syntax for every numeric flag: ASCII digits, an optional leading '-' and, for a
// fraction, one '.'; a flag whose value reaches the C ABI is bounded by its vllm_model_params member's C type.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "vllm/entrypoints/arg_parser.h"
#include "vllm/entrypoints/model_loader.h"

namespace vllm::entrypoints {

// A flag value refused after parsing; the message starts with the flag as the user types it.
struct FlagError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The flag that sets an EngineParams field ("num_blocks" -> "--num-blocks"); empty for any other field.
std::string FlagOfField(const std::string& field);

// Value parsers (throw ArgumentTypeError):
// an integer of at most `maximum` in absolute value (`what` says why);
std::function<ArgValue(const std::string&)> BoundedIntArg(int64_t maximum, const std::string& what);
// an integer bounded by the C type of the vllm_model_params member it fills;
std::function<ArgValue(const std::string&)> MemberIntArg(const std::string& member);
// a fraction such as 0.9, 1, .5 (its range is EngineParams'); a double;
ArgValue DecimalArg(const std::string& text);
// a byte size (include/vllm/entrypoints/sizes.h) that fits the int64_t kv_cache_memory_bytes.
std::function<ArgValue(const std::string&)> SizeArg(const std::string& flag);

// Add --block-size, --num-blocks, --kv-cache-memory (alias --kv-cache-memory-bytes), --gpu-memory-utilization and
// --max-model-len.
ArgParser& AddSizingArguments(ArgParser& parser);

// Validated EngineParams from parsed flags; an unset utilization stays the default (not explicit).
EngineParams EngineParamsFromArgs(const Namespace& args);

// EngineParamsFromArgs for a command line: each flag is checked alone first, so that a refusal names the flag
// ("--gpu-memory-utilization must be ..."), not the field; throws FlagError.
EngineParams CheckedEngineParams(const Namespace& args);

// make(); a refusal worded "<prefix> must be ..." is rethrown as FlagError "<flag> must be ...".
void Reworded(const std::string& flag, const std::string& prefix, const std::function<void()>& make);

}  // namespace vllm::entrypoints
