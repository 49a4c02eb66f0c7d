"""Workers die with their judge (issue 25, item 7): a judge SIGKILLed while its subject spins leaves no process of its
run behind (fork server, workers, what the subject started), whatever the subject does about it; nothing else dies.

`gates run` is the judge of one run; the subjects' variants, an external worker and a judge whose elder dies (as an
xdist worker's controller can) are judged by a bare worker pool in a process of its own (the judge's engine without
pytest and Hypothesis: it starts in a fraction of the time).

The test finds the run's processes by a variable of its own in the judge's environment, which they inherit, and by
the pids the subject's processes write (a process started without the environment is found by its pid and the
unique flag path in its command line).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from _vllm_gates.workers.lifeline import Lifeline
from tests.harness.conftest import engine_env
from tests.harness.external_worker import SPINNER

pytestmark = [pytest.mark.cpu, pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds processes in /proc")]

MARK = "JUDGE_DEATH_RUN"  # this test's own marker: every process the judge starts inherits it
HARNESS = Path(__file__).resolve().parent
IMPL = "example_row/impl.py"
RETURN = "    return 2 * block_size * heads * head_size * dtype_bytes\n"
WRITE_PID = "    import os\n    open(os.environ['JUDGE_DEATH_FLAG'] + '.worker', 'w').write(str(os.getpid()))\n"
SPIN = "    while True:\n        pass\n"
SUBJECTS = {
    "spins-forever": WRITE_PID + SPIN,
    "ignores-sigterm": "    import signal\n    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
                       "        signal.signal(s, signal.SIG_IGN)\n" + WRITE_PID + SPIN,
    # without the environment, one leaves the worker's session (its ancestry ties it to the run), one is orphaned (its group)
    "starts-grandchildren-that-spin": f"    import os, sys\n    sys.path.insert(0, {str(HARNESS)!r})\n"
                                      "    import external_worker\n    external_worker.spin(os.environ['JUDGE_DEATH_FLAG'])\n",
}


def _state_and_cmdline(pid: int) -> tuple[str, bytes] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        return stat.rsplit(b")", 1)[1].split()[0].decode(), Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return None


def _alive(pid: int, needle: bytes = b"") -> bool:
    """Process ``pid`` runs (a zombie is dead) and its command line holds ``needle``."""
    found = _state_and_cmdline(pid)
    return found is not None and found[0] not in ("Z", "X") and needle in found[1]


def _eventually(condition: Callable[[], bool], within: float = 2.0) -> bool:
    """``condition`` holds within ``within`` seconds (a process just started may not have exec'd its program yet)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _marked(token: str) -> set[int]:
    """The live processes whose environment holds MARK=token."""
    found = set()
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and f"\0{MARK}={token}\0".encode() in b"\0" + Path(f"/proc/{name}/environ").read_bytes():
                found.add(int(name))
        except OSError:
            continue
    return {pid for pid in found if _alive(pid)}


class Run:
    """A judge started on a project with the test's marker, and a bystander: a spinner of the test's, not the run's."""

    def __init__(self, root: Path, tmp: Path, judge: list[str], elder: subprocess.Popen[bytes] | None = None):
        self.token, self.flag, self.elder = os.urandom(8).hex(), tmp / "flag", elder
        env = engine_env()
        env.update({MARK: self.token, "JUDGE_DEATH_FLAG": str(self.flag), "JUDGE_ELDER": str(elder.pid if elder else 0)})
        self.output = tmp / "judge.out"
        self.bystander = subprocess.Popen([sys.executable, "-c", SPINNER, str(tmp / "bystander")], env=env,
                                          start_new_session=True)
        with self.output.open("wb") as out:
            self.judge = subprocess.Popen(judge, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)

    def pid_of(self, who: str) -> int:
        path = self.flag.with_name(f"flag.{who}")
        deadline = time.monotonic() + 120
        while not (path.is_file() and path.read_text()):
            assert self.judge.poll() is None, f"the judge ended ({self.judge.returncode}): {self.output.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"no {who} started: {self.output.read_text()[-2000:]}"
            time.sleep(0.02)
        return int(path.read_text())

    def left_after_kill(self, spawned: set[int]) -> set[int]:
        """SIGKILL the judge (or its elder); the run's processes still alive 2 s later (none, as soon as none is)."""
        (self.elder or self.judge).kill()
        (self.elder or self.judge).wait()
        deadline = time.monotonic() + 2.0
        while True:
            left = self.processes(spawned)
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.05)

    def processes(self, spawned: set[int]) -> set[int]:
        """The run's live processes: those with the marker, and those the subject started (found by their flag path)."""
        found = _marked(self.token) - {self.bystander.pid}
        return found | {pid for pid in spawned if _alive(pid, str(self.flag).encode())}

    def end(self, spawned: set[int]) -> None:
        """Whatever is left of the run (where the test failed) and the bystander, ended by pid."""
        self.judge.kill()
        self.judge.wait()
        for pid in self.processes(spawned):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for process in (self.bystander, self.elder):
            if process is not None:
                process.kill()
                process.wait()


def _judge_dies_and_takes_its_run(run: Run, spawns: bool, expect_fork_server: bool) -> None:
    """Once the subject runs (and has started what it starts), SIGKILL the judge: nothing of its run is left 2 s later."""
    spawned: set[int] = set()
    try:
        worker = run.pid_of("worker")
        spawned = {run.pid_of("grandchild"), run.pid_of("orphan")} if spawns else set()
        before = run.processes(spawned)
        assert {worker} | spawned <= before, (worker, spawned, before)
        assert not expect_fork_server or any(_alive(pid, b"--zygote") for pid in before), before
        left = run.left_after_kill(spawned)
        assert not left, {pid: _state_and_cmdline(pid) for pid in left}
        assert run.judge.wait(timeout=2) == -signal.SIGKILL
        assert _alive(run.bystander.pid), "a process that is not the run's was ended"
    finally:
        run.end(spawned)


GATES_RUN = [sys.executable, "-m", "_vllm_gates.frontends.cli", "run"]
POOL_JUDGE = """
import os, sys
from pathlib import Path
from typing import Callable
from _vllm_gates.wire.plain import encode
from _vllm_gates.workers import lifeline
from _vllm_gates.workers.worker_pool import WorkerPool, WorkerSpec
root, external = Path.cwd(), tuple(sys.argv[1:])
lifeline.current().elder = int(os.environ["JUDGE_ELDER"])
pool = WorkerPool(WorkerSpec(root, (str(root),), ("example_row", "gates"), external=external))
call = {"operation": "page-bytes"} if external else {"target": "example_row.impl:page_bytes", "anchor": None, "build": None,
                                                     "build_anchor": None}
pool.request(("gates/rows/example/gate.yaml", "impl"),
             {"op": "call", **call, "input": encode(dict(block_size=2, heads=2, head_size=2, dtype_bytes=2))}, 600)
"""


def test_a_killed_gates_run_leaves_no_process_of_its_run(example, tmp_path):
    example.write(IMPL, example.read(IMPL).replace(RETURN, SUBJECTS["spins-forever"]))
    _judge_dies_and_takes_its_run(Run(example.root, tmp_path, GATES_RUN), spawns=False, expect_fork_server=True)


def test_a_killed_judge_leaves_no_external_worker_nor_what_it_started(tmp_path):
    command = [sys.executable, str(HARNESS / "external_worker.py"), "spin-at-call"]
    run = Run(HARNESS.parent / "example_project", tmp_path, [sys.executable, "-c", POOL_JUDGE, *command])
    _judge_dies_and_takes_its_run(run, spawns=True, expect_fork_server=False)


@pytest.mark.parametrize("subject", SUBJECTS)
def test_a_killed_judge_leaves_no_process_of_its_run_whatever_the_subject_does(example, tmp_path, subject):
    example.write(IMPL, example.read(IMPL).replace(RETURN, SUBJECTS[subject]))
    run = Run(example.root, tmp_path, [sys.executable, "-c", POOL_JUDGE])
    _judge_dies_and_takes_its_run(run, spawns="grandchild" in subject, expect_fork_server=True)


def test_a_judge_whose_elder_dies_ends_with_its_run(example, tmp_path):
    """An xdist worker is a judge whose controller's death ends it too: here the elder is a process of the test's."""
    example.write(IMPL, example.read(IMPL).replace(RETURN, SUBJECTS["starts-grandchildren-that-spin"]))
    elder = subprocess.Popen([sys.executable, "-c", "import time\ntime.sleep(600)"])
    run = Run(example.root, tmp_path, [sys.executable, "-c", POOL_JUDGE], elder=elder)
    _judge_dies_and_takes_its_run(run, spawns=True, expect_fork_server=True)


def _spinner(tmp: Path, name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", SPINNER, str(tmp / name)], start_new_session=True)


def test_without_proc_the_watcher_ends_the_groups_it_was_told_of_and_only_those(tmp_path):
    lifeline = Lifeline(scan=False)
    told, released = _spinner(tmp_path, "told"), _spinner(tmp_path, "released")
    try:
        lifeline.adopt(told.pid)
        lifeline.adopt(released.pid)
        lifeline.release(released.pid)
        lifeline.cut()
        assert told.wait(timeout=2) == -signal.SIGKILL
        assert released.poll() is None
    finally:
        for process in (told, released):
            process.kill()
            process.wait()


def test_a_watcher_that_something_ended_is_started_again_and_told_what_the_first_was(tmp_path):
    lifeline, told = Lifeline(scan=False), _spinner(tmp_path, "told")
    try:
        first, watcher = lifeline.environ(), lifeline._watcher
        lifeline.adopt(told.pid)
        os.kill(watcher, signal.SIGKILL)
        os.waitpid(watcher, 0)
        assert lifeline.environ() == first  # the same token: the processes started so far are still found
        assert lifeline._watcher != watcher and _eventually(lambda: _alive(lifeline._watcher, b"lifeline.py"))
        lifeline.cut()
        assert told.wait(timeout=2) == -signal.SIGKILL
    finally:
        told.kill()
        told.wait()
        lifeline.cut()
