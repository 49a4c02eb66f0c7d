"""A serial run sends a gate's next case calls with the current one (docs/worker-protocol.md §10), and that changes
what it costs, never what it finds (issue 15: the run near plain pytest).

Each call the subject answers is logged with the process that answered it, and a conftest in the judge logs each
write of an impl call with how many later calls went with it. The tests check that every call is made once and in
order in one worker, and that the later cases' calls went with the first. A subject that exits or hangs on one case costs that case, and only that
case, as it does when calls go one at a time. A call sent ahead that its item never asks for (the item is skipped
as it starts) ends its worker, and the next case gets its answer from a new worker.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from _vllm_gates.wire.plain import encode
from _vllm_gates.workers.worker_pool import AHEAD_BYTES, WorkerPool, WorkerSpec
from tests.harness.conftest import engine_env, log_beside
from tests.harness.test_shared_checkers import PYPROJECT  # a project of rows under gates/rows, subjects in pkg

pytestmark = pytest.mark.cpu

MODULE = '''import os
import time

_LOG = {log!r}


def page(n):
    with open(_LOG, "a") as log:
        log.write(f"{{os.getpid()}} {{n}}\\n")
    if n == {exit_on}:
        os._exit(3)
    if n == {hang_on}:
        time.sleep(60)
    return 2 * n


def page_plus_one(n):
    return 2 * n + 1
'''
CASES = 6


def _project(root: Path, exit_on: int = -1, hang_on: int = -1, conftest: str = "") -> Path:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "row.py").write_text(MODULE.format(exit_on=exit_on, hang_on=hang_on, log=str(_calls_log(root))))
    (root / "spec").mkdir()
    (root / "spec" / "s.md").write_text("# S\n\n- **S-1.1** pages are counted\n")
    (root / "spec" / "roadmap.yaml").write_text("rows:\n  R-0:\n    title: row\n    state: DONE\n    milestones:\n"
                                                "      M1: {title: pages, state: DONE}\n")
    (root / "pyproject.toml").write_text(PYPROJECT)
    folder = root / "gates" / "rows" / "r0"
    folder.mkdir(parents=True)
    for package in (root / "gates", root / "gates" / "rows", folder):
        (package / "__init__.py").write_text("")
    cases = "".join(f"      c{n}: {{input: {{n: {n}}}, expect: {2 * n}}}\n" for n in range(CASES))
    (folder / "gate.yaml").write_text("row: R-0\ntitle: row\nspec: spec/s.md\ngates:\n  - id: g\n    milestone: M1\n"
                                      "    covers: [S-1.1]\n    markers: [cpu]\n    timeout: 3\n    impl: pkg.row:page\n"
                                      f"    cases:\n{cases}    known_bad:\n      plus-one: pkg.row:page_plus_one\n")
    if conftest:
        (root / "conftest.py").write_text(conftest)
    return root


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = engine_env()
    return subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def _calls_log(root: Path) -> Path:
    """Where the impl logs its calls: beside the project, where its confined workers may write."""
    return log_beside(root, "calls.log")


def _calls(root: Path) -> list[tuple[str, int]]:
    """(pid, n) of each call the impl answered, in the order made."""
    return [(pid, int(n)) for pid, n in (line.split() for line in _calls_log(root).read_text().splitlines())]


SENDS = '''import os

import _vllm_gates.workers.worker_pool as workers

_send = workers.WorkerProcess.send_request


def send_request(self, message, ahead=()):
    before = len(self.ahead)
    _send(self, message, ahead)
    if message.get("op") == "call" and self.label.startswith("impl"):
        with open(os.path.join(os.path.dirname(__file__), "sends.log"), "a") as log:
            log.write(f"{message['input']['$map'][0][1]} {len(self.ahead) - before}\\n")


workers.WorkerProcess.send_request = send_request
'''


def _writes(root: Path) -> list[tuple[int, int]]:
    """Each write of an impl call by the judge: (the case's n, how many calls of later items went with it)."""
    return [(int(n), int(ahead)) for n, ahead in (line.split() for line in (root / "sends.log").read_text().splitlines())]


def _outcomes(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Case name -> PASSED / FAILED / ERROR / SKIPPED, from pytest's -rA summary."""
    found = {}
    for line in result.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR", "SKIPPED") and "::g::c" in rest:
            found[rest.split("::g::")[1].split()[0]] = word
    return found


def test_every_case_call_is_made_once_in_order_in_one_worker_and_sent_ahead(tmp_path):
    root = _project(tmp_path, conftest=SENDS)
    ran = _pytest(root)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    calls = _calls(root)
    assert [n for _, n in calls] == list(range(CASES)), calls
    assert len({pid for pid, _ in calls}) == 1, calls
    assert _writes(root) == [(0, CASES - 1)], _writes(root)  # one write: c0's call, and every later case's with it


def test_a_subject_that_exits_on_one_case_costs_that_case_only(tmp_path):
    root = _project(tmp_path, exit_on=2)
    ran = _pytest(root)
    assert ran.returncode != 0
    outcomes = _outcomes(ran)
    assert outcomes == {"c0": "PASSED", "c1": "PASSED", "c2": "FAILED", "c3": "PASSED", "c4": "PASSED", "c5": "PASSED"}, ran.stdout
    assert "c2" in ran.stdout and "exited with status 3" in ran.stdout, ran.stdout
    calls = _calls(root)
    first = calls[0][0]
    assert [n for pid, n in calls if pid == first] == [0, 1, 2], calls  # the calls sent ahead of c2 died with it
    assert [n for pid, n in calls if pid != first] == [3, 4, 5], calls  # and were asked again of a new worker


def test_a_subject_that_hangs_on_one_case_times_out_that_case_only(tmp_path):
    root = _project(tmp_path, hang_on=1)
    ran = _pytest(root)
    outcomes = _outcomes(ran)
    assert outcomes == {"c0": "PASSED", "c1": "FAILED", "c2": "PASSED", "c3": "PASSED", "c4": "PASSED", "c5": "PASSED"}, ran.stdout
    assert "timed out after 3 s" in ran.stdout, ran.stdout


SKIP_C2 = '''import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if item.name == "c2":
        pytest.skip("skipped as it starts")
'''


def test_a_call_sent_ahead_that_no_item_asks_for_ends_its_worker(tmp_path):
    root = _project(tmp_path, conftest=SKIP_C2)
    ran = _pytest(root)
    outcomes = _outcomes(ran)
    assert outcomes == {"c0": "PASSED", "c1": "PASSED", "c3": "PASSED", "c4": "PASSED", "c5": "PASSED"}, ran.stdout
    assert "1 skipped" in ran.stdout and "skipped as it starts" in ran.stdout, ran.stdout
    calls = _calls(root)
    first = calls[0][0]
    later = [n for pid, n in calls if pid != first]
    assert later == [3, 4, 5], calls  # c3's answer came from a new worker, not from the one that ran c2's call
    ran_first = [n for pid, n in calls if pid == first]  # c0 and c1, then as far as it got before it was ended
    assert ran_first[:2] == [0, 1] and ran_first == list(range(len(ran_first))), calls


def test_an_xdist_worker_sends_nothing_ahead_and_finds_the_same(tmp_path):
    pytest.importorskip("xdist")
    root = _project(tmp_path, exit_on=2, conftest=SENDS)
    serial = _outcomes(_pytest(root))
    assert _writes(root) == [(0, CASES - 1), (3, 2)], _writes(root)  # after c2's worker died, c3 sent c4 and c5 along
    for log in (_calls_log(root), root / "sends.log"):  # the judge's conftest writes in the project, the impl beside it
        log.unlink()
    parallel = _pytest(root, "-n", "2")
    assert _outcomes(parallel) == serial, parallel.stdout
    assert sorted(_writes(root)) == [(n, 0) for n in range(CASES)], _writes(root)  # one call per write


def test_requests_ahead_stop_short_of_the_byte_limit(tmp_path):
    root = _project(tmp_path)
    pool = WorkerPool(WorkerSpec(root, (str(root),), ("pkg", "gates")))
    try:
        key = ("gates/rows/r0/gate.yaml", "impl")
        small = {"op": "call", "target": "pkg.row:page", "input": encode({"n": 1}, "input")}
        big = {"op": "call", "target": "pkg.row:page", "input": encode({"n": 1, "pad": "x" * AHEAD_BYTES}, "input")}
        reply = pool.exchange_raw({key: small}, 10, ahead=lambda: {key: [small, small, big, small]})[key]
        assert pool.parse(key, reply)["result"]["value"] == 2
        worker = pool.workers[key]
        assert len(worker.ahead) == 2 and len(worker.unanswered) == 2  # the two small ones; the big one and all after it wait
        for _ in range(2):
            assert pool.parse(key, pool.exchange_raw({key: small}, 10)[key])["result"]["value"] == 2
        assert not worker.ahead and not worker.unanswered and pool.workers[key] is worker
    finally:
        pool.close()
