"""A worker of the protocol in docs/worker-protocol.md: runs the code under gate and answers the judge in plain data.

`python -m _vllm_gates.workers.worker_main --fd N`: N is this end of a socket pair the judge holds the other end of. The
worker resolves targets (only under the allowed roots), runs builders and targets, and encodes what they return;
it decides nothing. Whatever the code under gate does here — exit, hang, patch modules — ends in this process.
"""
from __future__ import annotations

import argparse
import inspect
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from _vllm_gates.base.errors import DefinitionError, GatesError, Location
from _vllm_gates.definitions.model import TargetRef
from _vllm_gates.definitions.targets import check_same_signature, resolve
from _vllm_gates.wire.call import Call
from _vllm_gates.wire.channel import MAX_BUFFER_BYTES, PROTOCOL_VERSION, ChannelClosed, ProtocolError, parse, receive, receive_buffered, send, socket_from_fd
from _vllm_gates.wire.messages import ErrorBody, Fork, Forked, Hello, Ready, Refused, ServerHello, Status, StatusQuery, read
from _vllm_gates.wire.plain import NotPlain, decode, encode
from _vllm_gates.wire.settings import set_current
from _vllm_gates.wire.standins import WRONG_RESULT
from _vllm_gates.workers.sandbox import SCRATCH_VARIABLE

ENGINE_TARGETS = ("_vllm_gates.wire.standins",)  # the audit's stand-in lives in the engine itself


class Failed(GatesError):
    """A request that cannot be answered with a result: the protocol's error kind, message, and which target failed."""

    def __init__(self, kind: str, message: str, which: str = "target"):
        self.kind, self.message, self.which = kind, message, which
        super().__init__(message)


class Worker:
    """Resolved targets of this worker, and the answers to the judge's requests."""

    def __init__(self, allowed_roots: tuple[str, ...], cap: int = MAX_BUFFER_BYTES):
        self.allowed_roots, self.cap = allowed_roots, cap  # cap: the hello's max_buffer_bytes, on tensors both ways
        self.buffers: tuple[bytearray, ...] = ()  # the buffers of the request being answered
        self.resolved: dict[tuple[str, str | None], Callable[..., Any]] = {}

    def target(self, written: str, anchor: str | None) -> Callable[..., Any]:
        key = (written, anchor)
        if key not in self.resolved:
            ref = TargetRef(written, Location("", 0, 0), anchor)
            roots = self.allowed_roots + (ENGINE_TARGETS if ref.module in ENGINE_TARGETS else ())
            try:
                self.resolved[key] = resolve(ref, "target", roots)
            except DefinitionError as error:
                raise Failed("definition", "; ".join(p.message for p in error.problems)) from None
        return self.resolved[key]

    def check(self, request: dict[str, Any]) -> dict[str, Any]:
        """Resolve every target of a gate (and a known-bad's signature against the impl's); list what fails."""
        if self.buffers:
            raise Failed("protocol", f"a check request carries {len(self.buffers)} buffers, which no $tensor uses")
        problems = []
        for entry in request["targets"]:
            try:
                found = self.target(entry["target"], entry.get("anchor"))
                if entry.get("signature_of"):
                    impl = self.target(entry["signature_of"], entry.get("anchor"))
                    ref = TargetRef(entry["target"], Location("", 0, 0), entry.get("anchor"))
                    impl_ref = TargetRef(entry["signature_of"], Location("", 0, 0), entry.get("anchor"))
                    try:
                        check_same_signature(impl, found, ref, "target", impl_ref)
                    except DefinitionError as error:
                        raise Failed("definition", "; ".join(p.message for p in error.problems)) from None
            except Failed as failure:
                problems.append({"key": entry["key"], "message": failure.message})
        return {"problems": problems}

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        """Build the call from the case input, check it binds, make it, and encode what came back."""
        target = self.target(request["target"], request.get("anchor"))
        try:
            data = decode(request["input"], "input", buffers=self.buffers, writable=True, cap=self.cap)
        except Exception as exc:
            raise Failed("protocol", f"the input is not plain data: {exc}") from None
        call = self._build(request.get("build"), request.get("build_anchor"), data)
        _check_binds(target, call, request["target"])
        try:
            value = call.apply(target)
        except BaseException as exc:  # whatever the target raises (argparse's exit, Hypothesis's StopTest) is data
            return {"raised": _raised(exc)}
        if value is WRONG_RESULT:
            return {"value": {"$wrong": True}}
        try:
            return {"value": encode(value, cap=self.cap)}
        except NotPlain as error:
            raise Failed("not-plain", str(error)) from None

    def _build(self, build: str | None, anchor: str | None, data: Any) -> Call:
        if build is None:
            return Call(kwargs=dict(data)) if isinstance(data, dict) else Call(args=(data,))
        try:
            builder = self.target(build, anchor)
        except Failed as failure:
            raise Failed(failure.kind, failure.message, "build") from None
        name = getattr(builder, "__qualname__", build)
        try:
            call = builder(data)
        except Exception as exc:
            from _vllm_gates.values.render import render_value

            raise Failed("builder", f"builder {name} failed on input {render_value(data)}: {type(exc).__name__}: {_text(exc)}",
                         "build") from None
        if not isinstance(call, Call):
            raise Failed("builder", f"builder {name} returned {type(call).__name__}, expected vllm_gates.Call", "build")
        return call


_SIGNATURES: dict[int, inspect.Signature | None] = {}


def _signature(target: Callable[..., Any]) -> inspect.Signature | None:
    if id(target) not in _SIGNATURES:
        try:
            _SIGNATURES[id(target)] = inspect.signature(target)
        except (TypeError, ValueError):
            _SIGNATURES[id(target)] = None
    return _SIGNATURES[id(target)]


_BINDS: set[tuple[int, int, frozenset[str]]] = set()  # (target, positional count, keyword names) shapes that bind


def _check_binds(target: Callable[..., Any], call: Call, written: str) -> None:
    """Arguments that do not bind to the target's parameters are the gate's mistake, not an outcome to compare.

    Whether arguments bind depends only on how many are positional and which keywords are named, so each shape
    that binds is remembered."""
    shape = (id(target), len(call.args), frozenset(call.kwargs))
    if shape in _BINDS:
        return
    signature = _signature(target)
    if signature is None:
        return
    try:
        signature.bind(*call.args, **dict(call.kwargs))
    except TypeError as exc:
        raise Failed("definition", f"the call's arguments do not bind to {written}{signature}: {exc}") from None
    _BINDS.add(shape)


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # an exception whose __str__ fails still has a type to report
        return f"<{type(exc).__name__} whose message cannot be shown>"


def _raised(exc: BaseException) -> dict[str, Any]:
    return {"type": type(exc).__name__, "mro": [cls.__name__ for cls in type(exc).__mro__], "message": _text(exc)}


def serve(fd: int) -> int:
    """Answer requests until the judge says bye or closes the channel."""
    sock = socket_from_fd(fd)
    hello, refusal = _hello(receive(sock))
    if hello is None:
        send(sock, Refused(refusal[:500]).to_wire())
        return 2
    if not os.environ.get(SCRATCH_VARIABLE):  # a confined worker stays in its scratch folder (sandbox.py)
        os.chdir(hello.root)
    for entry in reversed(hello.path):
        sys.path.insert(0, entry)
    worker = Worker(hello.allowed_roots, hello.max_buffer_bytes)
    set_current(hello.settings)
    send(sock, Ready(PROTOCOL_VERSION, os.getpid(), "python").to_wire())
    handlers = {"check": worker.check, "call": worker.call}
    while True:
        try:
            got = receive_buffered(sock, cap=worker.cap)
        except ChannelClosed:
            return 0
        request = parse(got.body, got.exact)
        worker.buffers = got.buffers
        op = request.get("op")
        if op == "bye":
            return 0
        reply: dict[str, Any] = {"id": request.get("id")}
        handler = handlers.get(op) if isinstance(op, str) else None  # an unhashable op is unknown, not a crash
        try:
            if handler is None:
                raise Failed("protocol", f"unknown op {op!r}")
            reply["result"] = handler(request)
        except Failed as failure:
            reply["error"] = ErrorBody(failure.kind, failure.message, failure.which).to_wire()
        except Exception as exc:  # the worker's own failure: reported, never a result
            reply["error"] = ErrorBody("worker", f"{type(exc).__name__}: {_text(exc)}\n{traceback.format_exc()[-2000:]}").to_wire()
        worker.buffers = ()
        try:
            send(sock, reply, worker.cap)
        except (ProtocolError, ValueError) as exc:  # a result too big for a frame, or not JSON after all
            send(sock, {"id": request.get("id"), "error": ErrorBody("not-plain", f"the result cannot be sent: {exc}").to_wire()})


def _hello(data: Any) -> tuple[Hello | None, str]:
    """The judge's first message as a hello this worker can answer, or None and why it refuses it: not a hello,
    another protocol version (both named, docs/worker-protocol.md §4), or a field it cannot use (a max_buffer_bytes
    that is not a count of bytes, named with its value)."""
    if type(data) is not dict or data.get("op") != "hello":
        return None, f"expected a hello of protocol version {PROTOCOL_VERSION}, got {data!r}"
    if data.get("version") != PROTOCOL_VERSION:
        return None, f"this worker speaks protocol version {PROTOCOL_VERSION}; the judge sent version {str(data.get('version'))[:40]}"
    try:
        return read(data, Hello), ""
    except ProtocolError as error:
        return None, str(error)


def zygote(fd: int) -> int:
    """A fork server: import the preload modules once, then fork one worker per request (docs/worker-protocol.md).

    Each request carries two descriptors, the new worker's channel end and its log; the reply is the worker's pid.
    A status request reaps a worker and says how it ended.
    """
    import importlib

    control = socket_from_fd(fd)
    hello = read(receive(control), ServerHello)
    for name in hello.preload:
        try:
            importlib.import_module(name)
        except Exception:  # a module that does not import here is imported (and reported) by the worker that needs it
            pass
    send(control, Ready(PROTOCOL_VERSION, os.getpid()).to_wire())
    while True:
        try:
            received, fds = _receive_with_fds(control)
            request = read(received, Fork, StatusQuery)
        except (ChannelClosed, ProtocolError):  # the judge closed the channel, or said something else: done
            return 0
        if isinstance(request, Fork):
            channel_fd, log_fd = fds
            pid = os.fork()
            if pid == 0:
                control.close()
                os.setsid()
                os.dup2(log_fd, 1)
                os.dup2(log_fd, 2)
                os.close(log_fd)
                if request.scratch:
                    _confine(request.scratch, request.rules)
                os._exit(serve(channel_fd))
            os.close(channel_fd)
            os.close(log_fd)
            send(control, Forked(pid).to_wire())
        else:
            assert isinstance(request, StatusQuery)  # read() returns one of the kinds it was asked for
            send(control, _status(request.pid, request.wait).to_wire())


def _confine(scratch: str, rules: str | None) -> None:
    """A forked impl worker enters its scratch folder (its working directory and TMPDIR) and, under Landlock, its
    sandbox's rules, before it reads its hello or imports any target (docs/worker-protocol.md §2.2). One that
    cannot is ended (status 126) with the reason in its log: the judge reports it, never runs it unconfined."""
    import tempfile

    os.chdir(scratch)
    os.environ.update({"TMPDIR": scratch, SCRATCH_VARIABLE: scratch})
    tempfile.tempdir = None  # tempfile's folder is found again, from TMPDIR
    if rules:
        from _vllm_gates.workers.landlock import Rules, restrict

        try:
            restrict(Rules.from_json(rules))
        except OSError as error:
            print(f"vllm-gates sandbox: this worker cannot be confined: {error}", flush=True)
            os._exit(126)


def _receive_with_fds(sock: Any) -> tuple[dict[str, Any], list[int]]:
    import json
    import socket
    import struct

    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 2)
    if not data:
        raise ChannelClosed()
    (length,) = struct.unpack(">I", data[:4])
    length &= ~(1 << 31)  # the exact-numbers flag of the length word
    body = data[4:]
    while len(body) < length:
        more = sock.recv(length - len(body))
        if not more:
            raise ChannelClosed()
        body += more
    return json.loads(body.decode("utf-8")), list(fds)


def _status(pid: int, wait: float) -> Status:
    """How a forked worker ended: its exit status or signal; None for both when it is still running after ``wait`` s."""
    import time

    deadline = time.monotonic() + wait
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return Status(None, None, unknown=True)
        if done:
            if os.WIFSIGNALED(status):
                return Status(None, os.WTERMSIG(status))
            return Status(os.WEXITSTATUS(status), None)
        if time.monotonic() >= deadline:
            return Status(None, None)
        time.sleep(0.02)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m _vllm_gates.workers.worker_main")
    parser.add_argument("--fd", type=int, required=True, help="this end of the socket pair the judge holds")
    parser.add_argument("--zygote", action="store_true", help="serve as the fork server that starts workers")
    args = parser.parse_args()
    return zygote(args.fd) if args.zygote else serve(args.fd)


if __name__ == "__main__":
    sys.exit(main())
