"""Workers die with their judge (docs/worker-protocol.md §2.1): a watcher process ends every process of the judge's run once the
judge's end of a pipe closes, which the kernel does however the judge ends, SIGKILL included.

On Linux each process the judge starts carries ``VLLM_GATES_LIFELINE=<token>`` in its environment, and whatever
those start inherits it; the watcher ends (SIGKILL) each process that carries it, each member of a process group such
a process leads, and each descendant, looking again until none is left. Without /proc (macOS, BSD) the judge tells the
watcher each worker's process group as it starts it and again once it has ended it; the watcher ends the groups it
was told about. Standard library only: the watcher runs this file as a script (docs/worker-protocol.md §2.1).
"""
from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import time

ENV = "VLLM_GATES_LIFELINE"
SCANS = sys.platform.startswith("linux") and os.path.isdir("/proc/self")  # the watcher finds the run's processes itself
SWEEP_LIMIT_S = 10.0  # a sweep gives up on processes that still will not die (stuck in the kernel) after this long


class Lifeline:
    """The judge's side: the pipe whose closing is the judge's death, and the watcher process holding its other end."""

    def __init__(self, scan: bool = SCANS):
        self.token = os.urandom(16).hex()
        self.scan = scan
        self._watcher = 0  # its pid, once started
        self._fd = -1
        self._groups: set[int] = set()  # told to the watcher (where it cannot scan): told again to a new one
        self.elder = 0  # a process whose death ends this judge too (an xdist worker's controller), 0 for none

    def environ(self) -> dict[str, str]:
        """The environment for a process the judge starts: the judge's own with the run's token; the watcher is
        started (again, if something ended it) first."""
        self._ensure_watcher()
        return {**os.environ, ENV: self.token}

    def adopt(self, pid: int) -> None:
        """Where the watcher cannot find the run's processes: it is to end process group ``pid`` if the judge dies."""
        if not self.scan:
            self._groups.add(pid)
            self._tell(b"+%d\n" % pid)

    def release(self, pid: int) -> None:
        """Process group ``pid`` was ended by the judge: the watcher forgets it (its id may be reused)."""
        if not self.scan:
            self._groups.discard(pid)
            self._tell(b"-%d\n" % pid)

    def cut(self) -> None:
        """Close the judge's end now, as its death would: the watcher ends the run's processes and exits."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._watcher:
            os.waitpid(self._watcher, 0)
            self._watcher = 0

    def _ensure_watcher(self) -> None:
        if self._watcher and _running(self._watcher):
            return
        if self._fd >= 0:  # the watcher was ended (by whom?): a new one, same token, watches the same processes
            os.close(self._fd)
        read_end, self._fd = os.pipe()  # both ends close-on-exec: no process the judge starts holds the write end
        try:
            os.set_inheritable(read_end, True)
            command = [sys.executable, "-I", "-S", os.path.abspath(__file__), "--fd", str(read_end), "--token", self.token,
                       "--elder", str(self.elder)]
            # no Popen: the watcher is meant to outlive the judge, which never waits for it; a group of its own, so that
            # a Ctrl-C at the judge's terminal does not reach it
            self._watcher = os.posix_spawn(sys.executable, command + ([] if self.scan else ["--groups-only"]),
                                           {k: v for k, v in os.environ.items() if k != ENV}, setpgroup=0,
                                           file_actions=[(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)])
        finally:
            os.close(read_end)
        if self._groups:
            self._tell(b"".join(b"+%d\n" % group for group in self._groups))

    def _tell(self, line: bytes) -> None:
        self._ensure_watcher()
        try:
            os.write(self._fd, line)
        except OSError:  # the watcher just died: the next start begins a new one
            pass


_CURRENT: Lifeline | None = None


def current() -> Lifeline:
    """This judge process's lifeline: one watcher for all its worker pools, started with the first worker."""
    global _CURRENT
    if _CURRENT is None:
        _CURRENT = Lifeline()
    return _CURRENT


def _running(pid: int) -> bool:
    """Whether the judge's child ``pid`` still runs (reaped if it ended)."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == 0
    except ChildProcessError:
        return False


# the watcher ---------------------------------------------------------------------------------------------------------

def _processes() -> dict[int, tuple[int, int]]:
    """Every live process: pid -> (parent pid, process group); zombies (already dead) left out."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()  # the command name in brackets may hold anything
        except (OSError, IndexError):
            continue
        if fields and fields[0] not in (b"Z", b"X"):
            found[int(name)] = (int(fields[1]), int(fields[2]))
    return found


def _carries(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return marker in b"\0" + environ.read()
    except OSError:  # another user's process, or gone
        return False


def run_processes(token: str) -> set[int]:
    """The live processes of the run with ``token``: those carrying it, the members of the process groups they lead
    (each worker leads one: an orphan left in it is found), and the descendants of all these."""
    table = _processes()
    marker = b"\0%s=%s\0" % (ENV.encode(), token.encode())
    marked = {pid for pid in table if _carries(pid, marker)}
    groups = {pid for pid in marked if table[pid][1] == pid}
    found = marked | {pid for pid, (_, group) in table.items() if group in groups}
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found - {os.getpid(), 1}


def _sweep_scanned(token: str) -> None:
    deadline = time.monotonic() + SWEEP_LIMIT_S
    while time.monotonic() < deadline:
        doomed = run_processes(token)
        if not doomed:
            return
        for pid in doomed:  # each look sees the run afresh: a process forked meanwhile is found the next time
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.005)


def _sweep_groups(groups: set[int]) -> None:
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def watch(fd: int, token: str, scan: bool, elder: int = 0) -> int:
    """Read the judge's pipe until it closes (keeping the process groups told), then end the run's processes. If the
    ``elder`` ends first, the judge (this process's parent) is killed: its pipe then closes."""
    groups: set[int] = set()
    pending = b""
    judge, elder_fd = os.getppid(), _pidfd(elder)
    while True:
        if elder:  # a pidfd turns readable when its process ends; without one, look every 0.2 s
            ready = select.select([fd] if elder_fd < 0 else [fd, elder_fd], [], [], 0.2 if elder_fd < 0 else None)[0]
            if fd not in ready:
                if elder_fd in ready or (elder_fd < 0 and _ended(elder)):
                    if os.getppid() == judge:  # still this watcher's parent, so still the same process
                        os.kill(judge, signal.SIGKILL)
                    elder = 0
                continue
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            (groups.add if line[:1] == b"+" else groups.discard)(int(line[1:]))
    _sweep_groups(groups)
    if scan:
        _sweep_scanned(token)
    return 0


def _pidfd(pid: int) -> int:
    """A descriptor that turns readable when process ``pid`` ends (Linux 5.3+), or -1."""
    try:
        return os.pidfd_open(pid) if pid else -1
    except (AttributeError, OSError):
        return -1


def _ended(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False


def main() -> int:
    parser = argparse.ArgumentParser(prog="lifeline.py")
    parser.add_argument("--fd", type=int, required=True, help="the read end of the judge's pipe")
    parser.add_argument("--token", required=True, help=f"the run's {ENV} value")
    parser.add_argument("--groups-only", action="store_true", help="end only the process groups the judge told")
    parser.add_argument("--elder", type=int, default=0, help="a process whose death ends the judge too (0: none)")
    args = parser.parse_args()
    os.closerange(3, args.fd)  # nothing of the judge's but the pipe is held open here
    os.closerange(args.fd + 1, 1 << 16)
    return watch(args.fd, args.token, not args.groups_only, args.elder)


if __name__ == "__main__":
    sys.exit(main())
