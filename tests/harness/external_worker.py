"""A stand-alone external implementation of the example row, in the protocol an external worker speaks
(docs/worker-protocol.md §12), written without the engine: the tests' stand-in for a C++ driver.

`python external_worker.py MODE --fd N`. MODE: correct | wrong-value | wrong-kind | few-facts | no-operations |
refuse | crash-at-start | not-implemented-at-call | spin-at-call (at its first call it starts processes that spin without
the environment, one in a session of its own, one orphaned in the worker's process group, and spins itself, heeding no
SIGTERM: tests/harness/test_judge_death.py), peek (opens the gate file under hello's root at each call, as a
port that reads the answers would: tests/harness/test_sandbox.py), or a partial port (issue 26): partial (not-implemented for 4 heads
or more), partial-wrong (that, and one too many bytes for 3 heads), negatives-only (implements only the refusal of
a negative head count), flaky-wrong (one too many bytes the first time it sees 3 heads only), sigfpe-for-5-heads
(dies of SIGFPE for 5 heads and block size 0).
"""
from __future__ import annotations

import json
import os
import resource
import signal
import socket
import struct
import subprocess
import sys

SPINNER = "import os, sys\nopen(sys.argv[1], 'w').write(str(os.getpid()))\nwhile True:\n    pass\n"
ORPHANING = "import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]])\n"  # starts, exits


def read_frame(sock: socket.socket) -> dict | None:
    header = b""
    while len(header) < 4:
        chunk = sock.recv(4 - len(header))
        if not chunk:
            return None
        header += chunk
    length = struct.unpack(">I", header)[0] & 0x7FFFFFFF
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            return None
        body += chunk
    return json.loads(body)


def write_frame(sock: socket.socket, message: dict) -> None:
    body = json.dumps(message, separators=(",", ":")).encode()
    sock.sendall(struct.pack(">I", len(body)) + body)


def decode_map(data: object) -> dict:
    assert isinstance(data, dict) and set(data) == {"$map"}
    return {key: value for key, value in data["$map"]}


SEEN_THREE = [0]  # flaky-wrong: how many times 3 heads were asked


def not_ported(mode: str, data: dict) -> bool:
    """The inputs a partial port answers not-implemented."""
    heads = data["heads"]
    return (mode in ("partial", "partial-wrong") and heads >= 4) or (mode == "negatives-only" and heads >= 0)


def page_bytes(mode: str, data: dict) -> dict:
    heads = data["heads"]
    if mode == "sigfpe-for-5-heads" and heads == 5 and data["block_size"] == 0:
        print(f"external worker: dividing by zero for {data}", file=sys.stderr, flush=True)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.kill(os.getpid(), signal.SIGFPE)
    if heads == 3:
        SEEN_THREE[0] += 1
        if mode == "partial-wrong" or (mode == "flaky-wrong" and SEEN_THREE[0] == 1):
            mode = "wrong-value"
    if heads < 0:
        if mode == "wrong-kind":
            return {"raised": {"type": "runtime-error", "mro": ["runtime-error"], "message": f"heads must be >= 0, got {heads}"}}
        text = "negative head count" if mode == "few-facts" else f"heads must be >= 0, got {heads}"
        return {"raised": {"type": "invalid-argument", "mro": ["invalid-argument"], "message": text}}
    value = 2 * data["block_size"] * heads * data["head_size"] * data["dtype_bytes"]
    return {"value": value + (1 if mode == "wrong-value" else 0)}


def spin(flag: str) -> None:
    """Start processes that spin, without the environment: one in a session of its own (no process group reaches it),
    one whose parent exits (only the group holds it); then spin. SIGTERM is ignored by all but the orphan."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    subprocess.Popen([sys.executable, "-c", "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + SPINNER,
                      flag + ".grandchild"], env={}, start_new_session=True)
    subprocess.Popen([sys.executable, "-c", ORPHANING, SPINNER, flag + ".orphan"], env={}).wait()
    with open(flag + ".worker", "w") as marker:
        marker.write(str(os.getpid()))
    while True:
        pass


def main() -> int:
    mode, fd = sys.argv[1], int(sys.argv[sys.argv.index("--fd") + 1])
    if mode == "crash-at-start":
        print("external worker: cannot start", file=sys.stderr)
        return 9
    sock = socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    hello = read_frame(sock)
    if mode == "refuse" or hello is None or hello.get("op") != "hello":
        write_frame(sock, {"op": "refused", "reason": "this worker refuses"})
        return 2
    with open(os.environ.get("EXTERNAL_WORKER_LOG", os.devnull), "a") as log:
        log.write(json.dumps(hello.get("settings")) + "\n" + json.dumps({"cwd": os.getcwd()}) + "\n")
    operations = [] if mode == "no-operations" else ["page-bytes"]
    write_frame(sock, {"op": "ready", "version": hello["version"], "pid": os.getpid(), "language": "python-external",
                       "operations": operations})
    while True:
        request = read_frame(sock)
        if request is None or request.get("op") == "bye":
            return 0
        reply: dict = {"id": request.get("id")}
        if request.get("op") != "call":
            reply["error"] = {"kind": "protocol", "message": f"unknown op {request.get('op')!r}"}
        elif request.get("target") == "_vllm_gates.wire.standins:wrong_everywhere":
            reply["result"] = {"value": {"$wrong": True}}
        elif mode == "spin-at-call":
            spin(os.environ["JUDGE_DEATH_FLAG"])
        elif mode == "peek":  # a refusal ends the worker with the error it got, as an unguarded read would
            with open(os.path.join(hello["root"], "gates/rows/example/gate.yaml"), encoding="utf-8") as gate_file:
                gate_file.read()
            reply["result"] = page_bytes("correct", decode_map(request["input"]))
        elif request.get("operation") != "page-bytes" or mode == "not-implemented-at-call":
            reply["error"] = {"kind": "not-implemented", "message": f"no operation {request.get('operation')!r}"}
        elif not_ported(mode, decode_map(request["input"])):
            reply["error"] = {"kind": "not-implemented", "message": "this head count is not ported yet"}
        else:
            reply["result"] = page_bytes(mode, decode_map(request["input"]))
        write_frame(sock, reply)


if __name__ == "__main__":
    sys.exit(main())
