// Frames on the protocol channel (docs/worker-protocol.md §3): a 4-byte big-endian word (bits 0-30 the body's
// length, bit 31 the exact-numbers flag), then the UTF-8 JSON body.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace gates {

constexpr std::uint32_t kMaxFrame = 268435456;  // 256 MiB
constexpr std::uint32_t kExactFlag = 0x80000000u;

struct ChannelClosed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One frame's body. Throws ChannelClosed at a clean end of the channel (no byte of a new frame read), and
// std::runtime_error for a broken frame (too long, cut short, a read error). `exact` gets the flag.
std::string read_frame(int fd, bool& exact);

// Writes one frame, looping on partial writes; sets the flag when `exact`.
void write_frame(int fd, const std::string& body, bool exact);

}  // namespace gates
