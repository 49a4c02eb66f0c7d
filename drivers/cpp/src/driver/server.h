// The two ways the driver runs: the judge's socket protocol, and the line-per-request debug mode.
#pragma once

namespace gates {

// The protocol version this worker speaks, the one place it is written. The driver reads and writes version 2's
// frames (buffers, `$tensor`) already; it says 1 until the judge speaks 2 (channel.PROTOCOL_VERSION), and the two
// change together (tests/drivers/test_cpp_driver_protocol.py checks they agree).
constexpr int kProtocolVersion = 2;

// docs/worker-protocol.md §4-§5 over the inherited socket `fd`. Returns the process exit status: 0 after bye or a
// clean close, 2 after a refused hello, 3 after a broken frame.
int serve(int fd);

// `--lines`: each stdin line {"operation": S, "input": V} gives one stdout line {"result": ...} or {"error": ...}.
int serve_lines();

}  // namespace gates
