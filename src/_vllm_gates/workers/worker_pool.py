"""The judge's side of the worker protocol: one worker process per role and gate file, replaced when it dies.

A worker that exits, is killed, closes the channel or overruns the call's time is reported as what happened
(exit status, signal name, "timed out after 60 s"); the judge never takes its exit for its own.
"""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from _vllm_gates.base.errors import GatesError
from _vllm_gates.wire.channel import (
    MAX_BUFFER_BYTES,
    PROTOCOL_VERSION,
    ChannelClosed,
    ChannelTimeout,
    Part,
    ProtocolError,
    forget,
    frame,
    frame_parts,
    frame_size,
    parse,
    receive,
    receive_buffered,
    send,
    send_parts,
)
from _vllm_gates.wire.messages import Bye, Fork, Forked, Hello, Ready, ServerHello, Status, StatusQuery, read
from _vllm_gates.workers import landlock, lifeline
from _vllm_gates.workers.sandbox import SCRATCH_VARIABLE, Sandbox

STARTUP_TIMEOUT = 120.0
AHEAD_REQUESTS = 32  # at most this many calls sent ahead of their items to one worker (docs/worker-protocol.md §10)
AHEAD_BYTES = 32 * 1024  # and at most this many bytes of them, buffers included: far below a socket's buffer, so the send never blocks

Ahead = Callable[[], Mapping[tuple[str, str], Sequence[dict[str, Any]]]]  # the next items' requests, per worker


class WorkerLost(GatesError):
    """The worker could not answer: it died, closed the channel, broke the protocol or ran out of time."""


class WorkerEnded(WorkerLost):
    """The worker's process ended (an exit, a signal), hung, or was ended for a reply that broke the protocol
    (WorkerBroke) while answering a call: what the code it ran did, not a fault of the run (for the judged
    implementation, that case's result: docs/worker-protocol.md §9). ``how``: what happened, in words; ``output``: the last lines it printed;
    ``hung``: it overran the call's time."""

    def __init__(self, message: str, how: str, output: str, hung: bool = False):
        super().__init__(message)
        self.how, self.output, self.hung = how, output, hung


class WorkerBroke(WorkerEnded):
    """The worker's reply to a call broke the protocol (a frame, an id, a reply's shape, a buffer or a `$tensor` past
    what docs/worker-protocol.md §3, §5 and §7 allow), and the judge ended it: like an exit, what the code behind it
    did (§9). ``sent``: what it sent and the limit that refused it."""

    def __init__(self, message: str, sent: str, output: str):
        super().__init__(message, f"broke the protocol: {sent}", output)
        self.sent = sent


class CheckRefused(WorkerLost):
    """A worker's first check of its gate file's targets named problems a shared checker had not: nothing is called."""


@dataclass(frozen=True)
class WorkerSpec:
    """How to start a worker: the project root, what goes on its sys.path, the roots its targets may name, and
    the modules the fork server imports once for all workers (where the platform cannot fork, each worker is a
    fresh interpreter)."""

    root: Path
    path: tuple[str, ...]
    allowed_roots: tuple[str, ...]
    preload: tuple[str, ...] = ()
    command: tuple[str, ...] = (sys.executable, "-m", "_vllm_gates.workers.worker_main")
    external: tuple[str, ...] = ()  # the impl role's command when an external implementation is judged (else Python's)
    settings: tuple[tuple[str, str], ...] = ()  # the judged implementation's settings, sent to every worker in hello
    max_buffer_bytes: int = MAX_BUFFER_BYTES  # `max-tensor-bytes`: the cap on a message's tensor bytes, both ways (hello)
    sandbox: Sandbox | None = None  # the impl role's scratch folder and Landlock rules (sandbox.py); None: started as the others


class Spawner:
    """Starts fresh worker interpreters; reports how one ended."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, worker_end: socket.socket, log: Any, scratch: str | None = None) -> int:
        """Start one worker; ``scratch``: a confined worker's own folder, its working directory and TMPDIR, and under
        Landlock the command runs restricted to the sandbox's rules (docs/worker-protocol.md §2.2)."""
        command, env = [*self.spec.command, "--fd", str(worker_end.fileno())], lifeline.current().environ()
        if scratch is not None:
            command = self._from_root(command)
            env.update({"TMPDIR": scratch, SCRATCH_VARIABLE: scratch})
            rules = self.spec.sandbox.for_worker(scratch, tuple(command)) if self.spec.sandbox is not None else None
            if rules is not None:  # a fresh interpreter of the standard library alone restricts itself, then runs it
                _check_runnable(command[0])  # as Popen would, before the wrapper starts
                command = [sys.executable, "-I", "-S", landlock.__file__, rules.to_json(), *command]
        process = subprocess.Popen(command, pass_fds=(worker_end.fileno(),), stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, cwd=scratch or self.spec.root, start_new_session=True, env=env)
        self.processes[process.pid] = process
        return process.pid

    def _from_root(self, command: list[str]) -> list[str]:
        """The command as a worker in its scratch folder runs it: its program, where written as a relative path
        (`build/cpp/…`), and each word naming a file of the project (a script) are the project root's, as `command`
        is written in pyproject.toml; a bare program name is looked up on PATH."""
        def absolute(word: str, program: bool) -> str:
            if os.path.isabs(word) or (program and "/" not in word):
                return word
            return str(self.spec.root / word) if program or (self.spec.root / word).is_file() else word

        return [absolute(word, number == 0) for number, word in enumerate(command)]

    def wait(self, pid: int, timeout: float) -> int | None:
        """The return code (negative: the signal), or None while it still runs after ``timeout`` s."""
        try:
            return self.processes[pid].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        pass


def _check_runnable(program: str) -> None:
    """OSError, as starting it would raise, when ``program`` (a path, or a name looked up on PATH) cannot be run."""
    if shutil.which(program) is None:
        missing = "/" not in program or not os.path.exists(program)
        number = errno.ENOENT if missing else errno.EACCES
        raise (FileNotFoundError if missing else PermissionError)(number, os.strerror(number), program)


class ForkServer(Spawner):
    """Starts workers by forking a server that imported the preload modules once (torch takes seconds to import)."""

    def __init__(self, spec: WorkerSpec):
        super().__init__(spec)
        judge_end, server_end = socket.socketpair()
        self.log = tempfile.TemporaryFile(prefix="vllm-gates-forkserver-")  # noqa: SIM115 (the server's output while it lives; close() closes it)
        self.server = subprocess.Popen([*spec.command, "--zygote", "--fd", str(server_end.fileno())],
                                       pass_fds=(server_end.fileno(),), stdin=subprocess.DEVNULL, stdout=self.log,
                                       stderr=subprocess.STDOUT, cwd=spec.root, start_new_session=True,
                                       env={**lifeline.current().environ(),
                                            "PYTHONPATH": os.pathsep.join([*spec.path, os.environ.get("PYTHONPATH", "")])})
        lifeline.current().adopt(self.server.pid)
        server_end.close()
        self.control = judge_end
        send(self.control, ServerHello(tuple(spec.preload)).to_wire())
        self.ready = False

    def _ask(self, message: Fork | StatusQuery, expected: type[Forked] | type[Status], fds: list[int] | None = None,
             timeout: float = STARTUP_TIMEOUT) -> Any:
        from _vllm_gates.wire.channel import frame

        try:
            if not self.ready:
                read(receive(self.control, STARTUP_TIMEOUT), Ready)
                self.ready = True
            socket.send_fds(self.control, [frame(message.to_wire())], fds or [])
            return read(receive(self.control, timeout), expected)
        except (ChannelClosed, ChannelTimeout, ProtocolError, OSError) as error:
            raise WorkerLost(f"the fork server failed ({type(error).__name__}: {error})") from None

    def start(self, worker_end: socket.socket, log: Any, scratch: str | None = None) -> int:
        rules = self.spec.sandbox.for_worker(scratch) if scratch is not None and self.spec.sandbox is not None else None
        request = Fork(scratch, rules.to_json() if rules else None)
        return self._ask(request, Forked, [worker_end.fileno(), log.fileno()]).pid

    def wait(self, pid: int, timeout: float) -> int | None:
        status = self._ask(StatusQuery(pid, timeout), Status, timeout=timeout + 30)
        if status.signal is not None:
            return -status.signal
        return status.exit

    def close(self) -> None:
        try:
            self.control.close()
            self.server.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.server.kill()
        lifeline.current().release(self.server.pid)
        self.log.close()


@dataclass(frozen=True)
class RawReply:
    """A reply frame as it arrived, not yet parsed: its body, its exact-numbers flag, the request it must answer, and
    its buffers (a tensor's elements)."""

    body: bytes
    exact: bool
    request_id: int
    buffers: tuple[bytearray, ...] = ()

    def content_digest(self) -> ReplyContent | None:
        """What the reply says past its id (two replies with equal contents parse to the same result): a hash of
        the body and the buffers themselves (compared byte for byte, without hashing 256 MiB); None when the body
        does not open with the id, as the judge's own worker writes it."""
        prefix = b'{"id":%d,' % self.request_id
        if not self.body.startswith(prefix):
            return None
        digest = hashlib.blake2b(self.body[len(prefix):], digest_size=32)
        digest.update(b"exact" if self.exact else b"plain")
        return ReplyContent(digest.digest(), self.buffers)


@dataclass(frozen=True)
class ReplyContent:
    """A reply's content past its id: the body's hash and its buffers (equal when every byte is)."""

    body_digest: bytes
    buffers: tuple[bytearray, ...] = ()


class WorkerProcess:
    """One running worker and the judge's end of its channel."""

    def __init__(self, spec: WorkerSpec, label: str, spawner: Spawner, confined: bool = False):
        self.label, self.spawner = label, spawner
        judge_end, worker_end = socket.socketpair()
        self.log = tempfile.TemporaryFile(prefix="vllm-gates-worker-")  # noqa: SIM115 (the worker's output while it lives; close() closes it)
        # the judged implementation's worker: a scratch folder of its own, removed when it ends (sandbox.py)
        self.scratch = tempfile.mkdtemp(prefix="vllm-gates-impl-") if confined and spec.sandbox is not None else None
        try:
            self.pid = spawner.start(worker_end, self.log, self.scratch)
        except (OSError, WorkerLost) as error:  # the command cannot be run at all: no such file, not executable
            judge_end.close()
            self.log.close()
            self._remove_scratch()
            if isinstance(error, WorkerLost):
                raise
            raise WorkerLost(f"worker {label} could not be started: {error}") from None
        finally:
            worker_end.close()
        lifeline.current().adopt(self.pid)  # after the start: its own failure is not the command's
        self.returncode: int | None = None
        self.sock = judge_end
        self.next_id = 0
        self.unanswered: deque[int] = deque()  # ids of the requests sent whose replies are not read yet, in order
        self.ahead: deque[bytes] = deque()  # requests sent ahead of the items that will ask for them, not yet claimed
        self.cap = spec.max_buffer_bytes
        send(self.sock, Hello(str(spec.root), tuple(spec.path), tuple(spec.allowed_roots), label, dict(spec.settings),
                              self.cap).to_wire())
        self.started = False
        self.operations: frozenset[str] | None = None  # what an external worker's ready said it answers
        self.told_bye = False

    def wait_ready(self) -> None:
        if self.started:
            return
        reply = self._receive(lambda: receive(self.sock, STARTUP_TIMEOUT), STARTUP_TIMEOUT, "starting")
        version = reply.get("version") if type(reply) is dict and reply.get("op") == "ready" else PROTOCOL_VERSION
        if version != PROTOCOL_VERSION:  # said first: another version's ready may differ in every other field
            self.kill()
            raise WorkerLost(f"worker {self.label} did not start: it speaks protocol version {str(version)[:40]}, "
                             f"this judge speaks version {PROTOCOL_VERSION}")
        try:
            ready = read(reply, Ready)
        except ProtocolError as error:
            self.kill()
            said = str(reply)[:300] if type(reply) is not dict or reply.get("op") != "ready" else str(error)
            raise WorkerLost(f"worker {self.label} did not start: {said}") from None
        if ready.operations is not None:
            self.operations = frozenset(ready.operations)
        self.started = True

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and wait for its reply; WorkerLost (and the worker ended) if none comes."""
        self.send_request(message)
        return self.receive_reply(timeout)

    def send_request(self, message: dict[str, Any], ahead: Sequence[dict[str, Any]] = ()) -> None:
        """Send one request, and in the same write those the next items will make (``ahead``, cut to AHEAD_REQUESTS
        and AHEAD_BYTES), so that the worker answers them while the judge works; each item claims its own."""
        self.wait_ready()
        self.next_id += 1
        parts: list[Part] = frame_parts({**message, "id": self.next_id}, self.cap)
        ids, contents = [self.next_id], []
        size = frame_size(parts)
        for later in ahead[:AHEAD_REQUESTS]:
            try:
                sent = frame_parts({**later, "id": self.next_id + 1}, self.cap)
            except ProtocolError:  # too big for a frame: its item sends it, and is told so
                break
            if size + frame_size(sent) > AHEAD_BYTES:
                break
            self.next_id += 1
            parts.extend(sent)
            ids.append(self.next_id)
            contents.append(frame(later, self.cap))
            size += frame_size(sent)
        try:
            send_parts(self.sock, parts)
        except OSError:
            raise self._ended("the channel closed") from None
        self.unanswered.extend(ids)
        self.ahead.extend(contents)

    def claim(self, message: dict[str, Any]) -> bool:
        """Whether this request was sent ahead, next in line: its reply is then the next to read, and nothing is sent."""
        if not self.ahead:
            return False
        parts = frame_parts(message, self.cap)  # a big tensor's request is sized, never joined, to be told apart
        if frame_size(parts) == len(self.ahead[0]) and b"".join(parts) == self.ahead[0]:
            self.ahead.popleft()
            return True
        return False

    def receive_reply(self, timeout: float) -> dict[str, Any]:
        return self.parse_reply(self.receive_raw(timeout))

    def receive_raw(self, timeout: float) -> RawReply:
        """The reply to the oldest request not yet answered, unparsed (WorkerLost, and the worker ended, if none comes)."""
        got = self._receive(lambda: receive_buffered(self.sock, timeout, self.cap), timeout, "answering")
        return RawReply(got.body, got.exact, self.unanswered.popleft() if self.unanswered else self.next_id, got.buffers)

    def parse_reply(self, raw: RawReply) -> dict[str, Any]:
        reply = self._receive(lambda: parse(raw.body, raw.exact), 0, "answering")
        if reply.get("id") != raw.request_id:
            raise self.broke(f"it answered request {str(reply.get('id'))[:40]} to request {raw.request_id}")
        return reply

    def _receive(self, read: Any, timeout: float, doing: str) -> Any:
        try:
            return read()
        except ChannelTimeout:
            self.kill()
            message = f"worker {self.label} timed out after {timeout:g} s {doing}; it was killed"
            if doing != "answering":
                raise WorkerLost(message) from None
            raise WorkerEnded(message, f"timed out after {timeout:g} s; it was killed", self._last_output(), hung=True) from None
        except ChannelClosed:
            ended = self._ended("the channel closed")
            raise (ended if doing == "answering" else WorkerLost(str(ended))) from None
        except ProtocolError as error:
            if doing == "answering":
                raise self.broke(str(error)) from None
            self.kill()
            raise WorkerLost(f"worker {self.label} broke the protocol: {error}") from None

    def broke(self, sent: str) -> WorkerBroke:
        """End this worker for a reply that broke the protocol (``sent``: what, and the limit it broke), as a WorkerBroke
        carrying its last output."""
        self.kill()
        return WorkerBroke(f"worker {self.label} broke the protocol: {sent}{self._log_tail()}", sent, self._last_output())

    def alive(self) -> bool:
        return self.returncode is None and self.sock.fileno() >= 0

    def _ended(self, what: str) -> WorkerEnded:
        """How the process behind a closed channel ended (its exit status or signal), as a WorkerEnded."""
        code = self.spawner.wait(self.pid, 10.0)
        if code is None:
            self.kill()
            return WorkerEnded(f"worker {self.label}: {what} but the process did not end; it was killed{self._log_tail()}",
                               "closed its channel but did not end; it was killed", self._last_output())
        self.returncode = code
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            how = f"was killed by {name}"
        else:
            how = f"exited with status {code}"
        self._kill_group()
        return WorkerEnded(f"worker {self.label} {how} ({what}){self._log_tail()}", how, self._last_output())

    def _last_output(self) -> str:
        """The last 3 lines the worker printed, joined by ' | ' (at most 580 characters); '' if none."""
        try:
            self.log.seek(0)
            lines = self.log.read().decode("utf-8", "replace").strip().splitlines()[-3:]
        except (OSError, ValueError):
            return ""
        return " | ".join(lines)[:580]

    def _log_tail(self) -> str:
        output = self._last_output()
        return f"; its last output: {output}" if output else ""

    def _kill_group(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)  # whatever the subject forked ends with it
        except (ProcessLookupError, PermissionError):
            pass
        lifeline.current().release(self.pid)
        self._remove_scratch()

    def _remove_scratch(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def kill(self) -> None:
        self._kill_group()
        if self.returncode is None:
            try:
                self.returncode = self.spawner.wait(self.pid, 10.0)
            except WorkerLost:
                pass
        forget(self.sock)
        self.sock.close()

    def say_bye(self) -> None:
        if self.alive() and not self.told_bye:
            self.told_bye = True
            try:
                send(self.sock, Bye().to_wire())
            except OSError:
                pass

    def close(self) -> None:
        if self.alive():
            try:
                self.say_bye()
                self.returncode = self.spawner.wait(self.pid, 5.0)
            except (OSError, WorkerLost):
                pass
        self.kill()
        self.log.close()


@dataclass(eq=False)
class WorkerPool:
    """Workers by (gate file, role), started on first use, replaced after they are lost, ended when their file is
    done (``retire``); a budget for the run."""

    spec: WorkerSpec
    budget_s: float | None = None
    started_at: float = field(default_factory=time.monotonic)
    workers: dict[tuple[str, str], WorkerProcess] = field(default_factory=dict)
    first_checks: dict[tuple[str, str], tuple[dict[str, Any], float]] = field(default_factory=dict)
    refused: dict[tuple[str, str], str] = field(default_factory=dict)
    _unsettled: dict[tuple[str, str], float] = field(default_factory=dict)  # first checks sent, not yet answered
    _retiring: list[WorkerProcess] = field(default_factory=list)
    _spawner: Spawner | None = None
    _external: Spawner | None = None
    _warm: Spawner | None = None  # the impl role's fork server that imported the impl's modules (use_warm)
    _warm_used: bool = False

    def spawner(self) -> Spawner:
        """The fork server where the platform can fork (a worker then costs a fork, not an interpreter start and the
        engine's imports: a run with a hundred gate files starts two hundred workers), else fresh interpreters."""
        if self._spawner is None:
            self._spawner = ForkServer(self.spec) if hasattr(os, "fork") else Spawner(self.spec)
        return self._spawner

    def spawner_for(self, role: str) -> Spawner:
        """An external implementation's own command for the impl role; the engine's Python worker otherwise."""
        if role == "impl" and self.spec.external:
            if self._external is None:
                self._external = Spawner(replace(self.spec, command=self.spec.external))
            return self._external
        if role == "impl" and self._warm is not None and self._warm_used:
            return self._warm
        return self.spawner()

    def use_warm(self, modules: tuple[str, ...], now: bool = True) -> None:
        """Fork the impl role's workers from a second fork server that imported ``modules`` too (`gates mutate`: the
        impl's modules, unmutated, so a mutant's worker loads again only what the mutant changes); started at once,
        used from now on, or (``now`` False) only once asked again."""
        if self._warm is None and hasattr(os, "fork") and not self.spec.external:
            self._warm = ForkServer(replace(self.spec, preload=self.spec.preload + modules))
        self._warm_used = self._warm_used or now

    def use_external(self, command: tuple[str, ...]) -> None:
        """Answer the impl role with another external command from now on (`gates mutate --impl cpp`: a mutant's
        build); the impl workers running are ended, and no earlier refusal of a first check is kept."""
        self.spec = replace(self.spec, external=command)
        if self._external is not None:
            self._external.close()
            self._external = None
        for key in [k for k in self.workers if k[1] == "impl"]:
            self.discard(key)
        self.refused.clear()

    def worker(self, key: tuple[str, str]) -> WorkerProcess:
        """The running worker for ``key``, started (and its first check answered) if there is none."""
        found = self._start(key)
        self._settle(key)
        return found

    def _start(self, key: tuple[str, str]) -> WorkerProcess:
        """The worker for ``key``; a new one is started, and sent its first check without waiting for the answer."""
        if key in self.refused:
            raise CheckRefused(self.refused[key])
        found = self.workers.get(key)
        if found is None or not found.alive():
            if found is not None:
                found.kill()
            found = self.workers[key] = WorkerProcess(self.spec, f"{key[1]} of {key[0]}", self.spawner_for(key[1]),
                                                      confined=key[1] == "impl")
            if key in self.first_checks:
                message, timeout = self.first_checks[key]
                self._unsettled[key] = timeout
                try:
                    found.send_request(message)
                except WorkerLost:
                    self._unsettled.pop(key, None)
                    self.workers.pop(key, None)
                    raise
        return found

    def check_first(self, key: tuple[str, str], message: dict[str, Any], timeout: float) -> None:
        """Have the worker for ``key`` answer this `check` before any other request, each time one starts: the gate
        file's targets resolved in the file's own process, where a shared checker resolved them at collection."""
        self.first_checks[key] = (message, timeout)

    def _settle(self, key: tuple[str, str]) -> None:
        """Wait for a new worker's first check; CheckRefused (and no more workers for ``key``) if it names problems."""
        if key not in self._unsettled:
            return
        timeout = self._unsettled.pop(key)
        worker = self.workers.get(key)
        if worker is None:  # ended meanwhile: the next start checks again
            raise WorkerLost(f"worker {key[1]} of {key[0]} is gone")
        try:
            reply = worker.receive_reply(self._within_budget(timeout))
        except WorkerEnded as ended:  # before any call: resolving the targets, not running a case
            self.workers.pop(key, None)
            raise WorkerLost(f"{ended} while resolving the gate file's targets") from None
        except WorkerLost:
            self.workers.pop(key, None)
            raise
        problems = reply.get("result", {}).get("problems") if "error" not in reply else None
        if problems == []:
            return
        said = (str(reply["error"].get("message")) if "error" in reply
                else "; ".join(str(p.get("message")) if isinstance(p, dict) else str(p) for p in problems or ["no problem list"]))
        self.refused[key] = f"worker {worker.label} refused the gate file's targets, which the shared checker had resolved: {said[:1000]}"
        self.discard(key)
        raise CheckRefused(self.refused[key])

    def retire(self, where: str) -> None:
        """End the workers of gate file ``where`` (its items have run; a later request starts them anew), so a run of
        hundreds of files holds a few workers at a time. They are told bye now and reaped at the next retire."""
        for worker in self._retiring:
            worker.close()
        self._retiring = [self.workers.pop(key) for key in [k for k in self.workers if k[0] == where]]
        for worker in self._retiring:
            worker.say_bye()

    def operations(self, key: tuple[str, str], timeout: float = STARTUP_TIMEOUT) -> frozenset[str]:
        """The operations the (external) worker for ``key`` says it answers; WorkerLost if it does not start."""
        worker = self.worker(key)
        try:
            worker.wait_ready()
        except WorkerLost:
            self.workers.pop(key, None)
            raise
        if worker.operations is None:
            self.discard(key)
            raise WorkerLost(f"worker {worker.label} did not list the operations it answers (`operations` in its ready)")
        return worker.operations

    def start(self, keys: list[tuple[str, str]]) -> None:
        """Start these workers at once, so their imports run side by side."""
        for key in keys:
            self.worker(key)

    def _within_budget(self, timeout: float) -> float:
        """The call's time limit, cut to what is left of the run's budget (WorkerLost when none is)."""
        if self.budget_s is None:
            return timeout
        left = self.budget_s - (time.monotonic() - self.started_at)
        if left <= 0:
            raise WorkerLost(f"the run's budget of {self.budget_s:g} s is spent: not run")
        return min(timeout, left)

    def request(self, key: tuple[str, str], message: dict[str, Any], timeout: float) -> dict[str, Any]:
        return self.parse(key, self.exchange_raw({key: message}, timeout)[key])

    def exchange_raw(self, messages: dict[tuple[str, str], dict[str, Any]], timeout: float,
                     ahead: Ahead | None = None) -> dict[tuple[str, str], RawReply]:
        """One request to each of several workers, the replies unparsed; the first worker lost raises WorkerLost
        (carrying its key, and in ``answered`` the others' replies, still collected). ``ahead``: the next items' requests."""
        replies = self._exchange(messages, timeout, ahead)
        lost = next((reply for reply in replies.values() if isinstance(reply, WorkerLost)), None)
        if lost is not None:
            lost.answered = {key: reply for key, reply in replies.items() if isinstance(reply, RawReply)}  # type: ignore[attr-defined]
            raise lost
        return replies  # type: ignore[return-value]

    def _exchange(self, messages: dict[tuple[str, str], dict[str, Any]], timeout: float,
                  ahead: Ahead | None = None) -> dict[tuple[str, str], RawReply | WorkerLost]:
        """Every request sent before any reply is awaited (the workers work side by side); per worker its raw reply
        or how it was lost. The run's budget bounds the wait. A request sent ahead is claimed, not sent again; one
        sent fresh carries ``ahead()``'s requests for that worker with it."""
        limit = self._within_budget(timeout)
        cut, timeout = limit < timeout, limit
        replies: dict[tuple[str, str], RawReply | WorkerLost] = {}
        for key in messages:  # new workers start, and take their first checks, side by side
            try:
                self._start(key)
            except WorkerLost as error:
                replies[key] = self._lost(key, error)
        later: Mapping[tuple[str, str], Sequence[dict[str, Any]]] | None = None
        for key, message in messages.items():
            if key in replies:
                continue
            try:
                self._settle(key)
                worker = self.workers[key]
                if worker.ahead:
                    if worker.claim(message):
                        continue
                    worker = self._abandon_ahead(key)
                if ahead is not None and later is None:
                    later = ahead()
                worker.send_request(message, later.get(key, ()) if later else ())
            except WorkerLost as error:
                replies[key] = self._lost(key, error)
        for key in messages:
            if key not in replies:
                try:
                    replies[key] = self.workers[key].receive_raw(timeout)
                except WorkerEnded as error:
                    if cut and error.hung:  # the run's budget cut the call's own limit: not the subject's hang
                        replies[key] = self._lost(key, WorkerLost(f"{error}; the run's budget of {self.budget_s:g} s ran out"))
                    else:
                        replies[key] = self._lost(key, error)
                except WorkerLost as error:
                    replies[key] = self._lost(key, error)
        return replies

    def _abandon_ahead(self, key: tuple[str, str]) -> WorkerProcess:
        """A worker whose requests sent ahead are not the ones asked for (the items ran in another order): it is
        ended with the calls no item claimed, and a new one started, so that no reply waits on an unclaimed call."""
        self.discard(key)
        found = self._start(key)
        self._settle(key)
        return found

    def _lost(self, key: tuple[str, str], error: WorkerLost) -> WorkerLost:
        self.workers.pop(key, None)
        error.key = key  # type: ignore[attr-defined]
        return error

    def parse(self, key: tuple[str, str], raw: RawReply) -> dict[str, Any]:
        """A raw reply's message; WorkerLost (and the worker ended) if it breaks the protocol."""
        worker = self.workers.get(key)
        if worker is None:
            raise WorkerLost(f"worker {key[1]} of {key[0]} is gone")
        try:
            return worker.parse_reply(raw)
        except WorkerLost:
            self.workers.pop(key, None)
            raise

    def reply_broken(self, key: tuple[str, str], sent: str) -> WorkerBroke:
        """A reply of the worker for ``key`` whose content breaks the protocol (a bad `$tensor`, a result of no allowed
        shape): the worker is ended, and the break returned as its WorkerBroke, with its last output."""
        worker = self.workers.pop(key, None)
        if worker is None:
            return WorkerBroke(f"worker {key[1]} of {key[0]} broke the protocol: {sent}", sent, "")
        return worker.broke(sent)

    def discard(self, key: tuple[str, str]) -> None:
        """End a worker that broke the protocol; the next request starts a new one."""
        worker = self.workers.pop(key, None)
        if worker is not None:
            worker.kill()

    def request_many(self, messages: dict[tuple[str, str], dict[str, Any]], timeout: float) -> dict[tuple[str, str], dict[str, Any] | WorkerLost]:
        """One request to each of several workers, sent before any reply is awaited; per worker its reply or how it was lost."""
        found: dict[tuple[str, str], dict[str, Any] | WorkerLost] = {}
        try:
            replies = self._exchange(messages, timeout)
        except WorkerLost as spent:  # the run's budget: no worker was asked
            return {key: spent for key in messages}
        for key, raw in replies.items():
            try:
                found[key] = raw if isinstance(raw, WorkerLost) else self.parse(key, raw)
            except WorkerLost as error:
                found[key] = error
        return found

    def close(self) -> None:
        workers = self._retiring + list(self.workers.values())
        self._retiring = []
        for worker in workers:  # every worker is told first, so that they end side by side
            worker.say_bye()
        for worker in workers:
            worker.close()
        self.workers.clear()
        for spawner in (self._spawner, self._warm):
            if spawner is not None:
                spawner.close()
        self._spawner = self._warm = None
        self._external = None
