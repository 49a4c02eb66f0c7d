#include "driver/framing.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include <sys/uio.h>
#include <unistd.h>

namespace gates {
namespace {

// Reads exactly n bytes; returns how many arrived before the end of the channel.
std::size_t read_all(int fd, std::uint8_t* buf, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, buf + got, std::min<std::size_t>(n - got, SSIZE_MAX));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("reading the channel failed: ") + std::strerror(errno));
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

std::uint64_t big_endian(const std::uint8_t* at, std::size_t size) {
  std::uint64_t value = 0;
  for (std::size_t k = 0; k < size; ++k) value = (value << 8) | at[k];
  return value;
}

void put_big_endian(std::uint8_t* at, std::uint64_t value, std::size_t size) {
  for (std::size_t k = 0; k < size; ++k) at[k] = static_cast<std::uint8_t>(value >> (8 * (size - 1 - k)));
}

std::string hex_word(std::uint32_t word) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", word);
  return text;
}

void read_exactly(int fd, std::uint8_t* buf, std::size_t n, const char* where) {
  if (read_all(fd, buf, n) < n) throw std::runtime_error(std::string("the channel closed inside ") + where);
}

// Bit 30's part after the body: count, lengths (checked against the limits), then each buffer into its allocation.
std::vector<Bytes> read_buffers(int fd, std::uint64_t max_buffer_bytes) {
  std::uint8_t head[4];
  read_exactly(fd, head, 4, "a frame's buffer count");
  std::uint64_t count = big_endian(head, 4);
  if (count == 0 || count > kMaxBuffers)
    throw std::runtime_error("a frame with " + std::to_string(count) + " buffers: the count must be 1 to " +
                             std::to_string(kMaxBuffers));
  std::vector<std::uint8_t> lengths(8 * count);
  read_exactly(fd, lengths.data(), lengths.size(), "a frame's buffer lengths");
  std::vector<std::uint64_t> sizes(count);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < count; ++i) {
    sizes[i] = big_endian(lengths.data() + 8 * i, 8);
    if (sizes[i] > max_buffer_bytes - total) {
      std::string sum = sizes[i] > UINT64_MAX - total ? "more than " + std::to_string(UINT64_MAX) : std::to_string(total + sizes[i]);
      throw std::runtime_error("a frame's buffers come to " + sum + " bytes by buffer " + std::to_string(i) + " (of " +
                               std::to_string(sizes[i]) + " bytes), over the limit of " + std::to_string(max_buffer_bytes) +
                               " buffer bytes per message (max_buffer_bytes)");
    }
    total += sizes[i];
  }
  std::vector<Bytes> buffers(count);
  for (std::size_t i = 0; i < count; ++i) {
    buffers[i].resize(static_cast<std::size_t>(sizes[i]));
    read_exactly(fd, buffers[i].data(), buffers[i].size(), "a frame's buffers");
  }
  return buffers;
}

// Writes every byte the iovecs name, IOV_MAX at a time, resuming after partial writes.
void write_all(int fd, std::vector<iovec>& parts) {
  std::size_t next = 0;
  while (next < parts.size()) {
    if (parts[next].iov_len == 0) {
      ++next;
      continue;
    }
    int batch = static_cast<int>(std::min<std::size_t>(parts.size() - next, IOV_MAX));
    ssize_t w = ::writev(fd, parts.data() + next, batch);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("writing the channel failed: ") + std::strerror(errno));
    }
    std::size_t left = static_cast<std::size_t>(w);
    while (left > 0) {
      std::size_t step = std::min(left, parts[next].iov_len);
      parts[next].iov_base = static_cast<char*>(parts[next].iov_base) + step;
      parts[next].iov_len -= step;
      left -= step;
      if (parts[next].iov_len == 0) ++next;
    }
  }
}

}  // namespace

Frame read_frame(int fd, std::uint64_t max_buffer_bytes) {
  std::uint8_t head[4];
  std::size_t got = read_all(fd, head, 4);
  if (got == 0) throw ChannelClosed("the channel closed");
  if (got < 4) throw std::runtime_error("the channel closed inside a frame header");
  std::uint32_t word = static_cast<std::uint32_t>(big_endian(head, 4));
  if (word & kReservedFlag)
    throw std::runtime_error("a frame with bit 29 (reserved) set in its header word " + hex_word(word));
  std::uint32_t length = word & kLengthMask;
  if (length > kMaxFrame)
    throw std::runtime_error("a frame of " + std::to_string(length) + " bytes is over the limit of " + std::to_string(kMaxFrame));
  Frame frame;
  frame.exact = (word & kExactFlag) != 0;
  frame.body.resize(length);
  read_exactly(fd, reinterpret_cast<std::uint8_t*>(frame.body.data()), length, "a frame");
  if (word & kBuffersFlag) frame.buffers = read_buffers(fd, max_buffer_bytes);
  return frame;
}

void write_frame(int fd, const std::string& body, bool exact, const std::vector<const Bytes*>& buffers) {
  if (body.size() > kMaxFrame) throw std::logic_error("a reply of " + std::to_string(body.size()) + " bytes is over the frame limit of 268435456");
  if (buffers.size() > kMaxBuffers) throw std::logic_error("a reply of " + std::to_string(buffers.size()) + " buffers");
  std::uint32_t word = static_cast<std::uint32_t>(body.size()) | (exact ? kExactFlag : 0u) | (buffers.empty() ? 0u : kBuffersFlag);
  std::uint8_t head[4];
  put_big_endian(head, word, 4);
  std::vector<std::uint8_t> table(buffers.empty() ? 0 : 4 + 8 * buffers.size());
  std::vector<iovec> parts{{head, 4}, {const_cast<char*>(body.data()), body.size()}};
  if (!buffers.empty()) {
    put_big_endian(table.data(), buffers.size(), 4);
    for (std::size_t i = 0; i < buffers.size(); ++i) put_big_endian(table.data() + 4 + 8 * i, buffers[i]->size(), 8);
    parts.push_back({table.data(), table.size()});
    for (const Bytes* buffer : buffers) parts.push_back({const_cast<std::uint8_t*>(buffer->data()), buffer->size()});
  }
  write_all(fd, parts);
}

}  // namespace gates
