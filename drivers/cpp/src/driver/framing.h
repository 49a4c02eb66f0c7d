// Frames on the protocol channel (docs/worker-protocol.md §3, version 2: /work/briefs/wire-v2.md "Frame"): a 4-byte
// big-endian word (bits 0-28 the JSON body's length, bit 29 reserved, bit 30 the buffers flag, bit 31 the
// exact-numbers flag), the UTF-8 JSON body, then with bit 30 a 4-byte buffer count N, N 8-byte lengths and the
// N buffers' bytes back to back.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "driver/tensor.h"

namespace gates {

constexpr std::uint32_t kMaxFrame = 268435456;  // 256 MiB of JSON body
constexpr std::uint32_t kExactFlag = 0x80000000u;
constexpr std::uint32_t kBuffersFlag = 0x40000000u;
constexpr std::uint32_t kReservedFlag = 0x20000000u;
constexpr std::uint32_t kLengthMask = 0x1fffffffu;
constexpr std::uint32_t kMaxBuffers = 4096;
constexpr std::uint64_t kDefaultMaxBufferBytes = 4294967296ull;  // 4 GiB, unless hello's max_buffer_bytes says

struct ChannelClosed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One message as read: the body, its exact-numbers flag, and its buffers (empty without bit 30).
struct Frame {
  std::string body;
  bool exact = false;
  std::vector<Bytes> buffers;
};

// Reads one message. Throws ChannelClosed at a clean end of the channel (no byte of a new frame read), and
// std::runtime_error naming the number and the limit for a broken one: bit 29 set, a body over kMaxFrame, a buffer
// count of 0 or over kMaxBuffers, buffer lengths summing past `max_buffer_bytes` (all checked before any buffer is
// allocated), or a frame cut short. Each buffer is read straight into its own allocation.
Frame read_frame(int fd, std::uint64_t max_buffer_bytes);

// Writes one message (header, body, then with `buffers` the count, the lengths and the bytes) with writev, so that
// neither the body nor a buffer is copied; loops on partial writes. The caller keeps to the limits (std::logic_error
// otherwise).
void write_frame(int fd, const std::string& body, bool exact, const std::vector<const Bytes*>& buffers = {});

}  // namespace gates
