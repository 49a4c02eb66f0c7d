// Byte sizes given on the command line, e.g. --kv-cache-memory 4GiB (MEM-1.9, MEM-1.10).
//
// Ported from impl/entrypoints/sizes.py, which mirrors vLLM's human_readable_int
// (vllm/utils/argparse_utils.py) and adds explicit SI/IEC units. Rules, in full:
//   - plain bytes: ASCII digits only ("4294967296"); no sign, exponent, underscore or fraction;
//   - vLLM's one-letter suffixes: lowercase k m g t are decimal (10^3 .. 10^12) and may carry a fraction
//     ("25.6k" = 25600); uppercase K M G T are binary (2^10 .. 2^40) and may not;
//   - explicit units: KB MB GB TB decimal (fraction allowed), KiB MiB GiB TiB binary (no fraction);
//   - surrounding whitespace (Python's str.strip) is ignored and spaces may separate number and unit;
//   - a fraction must come to a whole number of bytes ("1.0005k" is refused, never truncated);
//   - anything else is an error quoting the text.
// The arithmetic is exact on decimal digits: a size has no upper bound here (the flag that reads it bounds it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace vllm::entrypoints {

// A non-negative whole number of bytes as decimal digits (no leading zeros; "0" for zero).
struct ByteSize {
  std::string digits;

  // The value when it fits an int64_t / a uint64_t.
  std::optional<int64_t> as_int64() const;
  std::optional<uint64_t> as_uint64() const;
  double as_double() const;
};

// The bytes `text` denotes; `what` names the option in the messages. Throws std::invalid_argument worded as the
// Python port ("--kv-cache-memory: cannot read '4gb' as a size: unknown unit 'gb'; use ...").
ByteSize ParseSize(const std::string& text, const std::string& what);

}  // namespace vllm::entrypoints
