#include "driver/framing.h"

#include <cerrno>
#include <cstring>

#include <unistd.h>

namespace gates {
namespace {

// Reads exactly n bytes; returns how many arrived before the end of the channel.
std::size_t read_all(int fd, char* buf, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, buf + got, n - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("reading the channel failed: ") + std::strerror(errno));
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

}  // namespace

std::string read_frame(int fd, bool& exact) {
  unsigned char head[4];
  std::size_t got = read_all(fd, reinterpret_cast<char*>(head), 4);
  if (got == 0) throw ChannelClosed("the channel closed");
  if (got < 4) throw std::runtime_error("the channel closed inside a frame header");
  std::uint32_t word = (std::uint32_t(head[0]) << 24) | (std::uint32_t(head[1]) << 16) | (std::uint32_t(head[2]) << 8) |
                       std::uint32_t(head[3]);
  exact = (word & kExactFlag) != 0;
  std::uint32_t length = word & ~kExactFlag;
  if (length > kMaxFrame) throw std::runtime_error("a frame of " + std::to_string(length) + " bytes is over the limit of 268435456");
  std::string body(length, '\0');
  if (read_all(fd, body.data(), length) < length) throw std::runtime_error("the channel closed inside a frame");
  return body;
}

void write_frame(int fd, const std::string& body, bool exact) {
  if (body.size() > kMaxFrame) throw std::runtime_error("a reply of " + std::to_string(body.size()) + " bytes is over the frame limit of 268435456");
  std::uint32_t word = static_cast<std::uint32_t>(body.size()) | (exact ? kExactFlag : 0u);
  std::string frame;
  frame.reserve(body.size() + 4);
  frame += static_cast<char>((word >> 24) & 0xff);
  frame += static_cast<char>((word >> 16) & 0xff);
  frame += static_cast<char>((word >> 8) & 0xff);
  frame += static_cast<char>(word & 0xff);
  frame += body;
  std::size_t sent = 0;
  while (sent < frame.size()) {
    ssize_t w = ::write(fd, frame.data() + sent, frame.size() - sent);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("writing the channel failed: ") + std::strerror(errno));
    }
    sent += static_cast<std::size_t>(w);
  }
}

}  // namespace gates
