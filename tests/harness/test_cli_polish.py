"""`gates` as a user meets it (issue 14, the engine part): one file mode for every report, table cells that never run
into each other, "nothing could run here" as its own exit status, coverage that counts only rows that loaded, quiet
exits on a closed pipe, one line on Ctrl-C.

Where a user meets a behaviour in a shell (pipes, signals, umask), the `gates` command runs as a subprocess.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _vllm_gates.results.reports import display_width, fixed_width
from _vllm_gates.run.audit import STAND_IN_WIDTH, AuditLine, StandIn, audit_table
from _vllm_gates.run.exitcodes import ExitCode
from tests.harness.conftest import EXAMPLE, GATE_FILE, engine_env

pytestmark = pytest.mark.cpu

IMPL = "example_row/impl.py"
RETURN = "    return 2 * block_size * heads * head_size * dtype_bytes\n"


def _env(**changes: str | None) -> dict[str, str]:
    """A user's shell: nothing of this repository on PYTHONPATH but the engine under test, no CI profile forced;
    ``changes`` set or unset."""
    env = engine_env("CI")
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _gates() -> list[str]:
    found = shutil.which("gates", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "_vllm_gates.frontends.cli"]


def _copy(tmp_path: Path) -> Path:
    project = tmp_path / "p"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    return project


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# 1. reports: one file mode, the umask's --------------------------------------------------------------------------

REPORTS = ("run.json", "run.md", "run.xml", "verdict.json", "verdict.md", "verdict.xml")


def _write_every_report(project: Path, umask: int) -> None:
    """`gates run` (JSON, Markdown, pytest's JUnit) and `gates verdict` (the same three, JUnit written by the engine)."""
    out = project / "out"
    run = subprocess.run([*_gates(), "run", "--json", str(out / "run.json"), "--markdown", str(out / "run.md"),
                          "--junit", str(out / "run.xml")], cwd=project, env=_env(), capture_output=True, text=True,
                         umask=umask, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    verdict = subprocess.run([*_gates(), "verdict", "--evidence", str(out / "run.json"), "--json", str(out / "verdict.json"),
                              "--markdown", str(out / "verdict.md"), "--junit", str(out / "verdict.xml")],
                             cwd=project, env=_env(), capture_output=True, text=True, umask=umask, timeout=300)
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)], ids=["umask-022", "umask-027"])
def test_every_report_gets_the_mode_an_ordinary_file_gets_under_the_umask(tmp_path, umask, mode):
    project = _copy(tmp_path)
    (project / "out").mkdir()
    _write_every_report(project, umask)
    modes = {name: oct(_mode(project / "out" / name)) for name in REPORTS}
    assert modes == {name: oct(mode) for name in REPORTS}, "JSON, Markdown and JUnit alike, as `open(path, 'w')` would"
    assert not [p.name for p in (project / "out").iterdir() if p.name.startswith(".")], "no temporary file is left behind"


def test_a_report_that_exists_keeps_its_mode_as_an_overwritten_file_does(example):
    out = example.root / "out"
    out.mkdir()
    for name in ("run.json", "run.md", "run.xml"):
        (out / name).write_text("old\n", encoding="utf-8")
        os.chmod(out / name, 0o600)
    result = example.gates("run", "--json", str(out / "run.json"), "--markdown", str(out / "run.md"), "--junit", str(out / "run.xml"))
    assert result.code == 0, result.text
    assert {name: oct(_mode(out / name)) for name in ("run.json", "run.md", "run.xml")} == dict.fromkeys(("run.json", "run.md", "run.xml"), "0o600")
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["exit_code"] == 0


# 2. tables: cells never run into each other ------------------------------------------------------------------------

def _gaps_are_spaces(lines: list[str], starts: list[int]) -> None:
    """On every line, the two terminal columns before each column's start (``starts``, from the header) are blank:
    no cell reaches into the gap before the next one."""
    for line in lines:
        columns = _columns_of(line)
        for start in starts:
            assert len(columns) <= start or columns[start - 2:start] == "  ", f"a cell runs into the column at {start}: {line!r}"


def _columns_of(line: str) -> str:
    """The line with each character repeated as many times as the terminal columns it takes."""
    return "".join(ch * display_width(ch) for ch in line)


def _starts(header: str) -> list[int]:
    return [m.start() for m in re.finditer(r"(?<=  )\S", header)]


def test_fixed_width_columns_count_terminal_columns_and_escape_control_characters():
    body = [("ROW", "通义千问", "tab\there", "x"), ("ROW-2", "e\u0301e\u0301", "line\nbreak", "y"), ("R", "plain", "esc\x1b[31m", "z")]
    lines = fixed_width(("row", "gate", "state", "last"), body)
    assert "\t" not in "".join(lines) and "\n" not in "".join(lines) and "\x1b" not in "".join(lines)
    assert "tab\\there" in lines[1] and "line\\nbreak" in lines[2] and "esc\\x1b[31m" in lines[3]
    last = {_columns_of(line).rindex(cell) for line, cell in zip(lines[1:], "xyz")}
    assert len(last) == 1, f"the last column starts at one terminal column: {lines}"
    _gaps_are_spaces(lines, _starts(lines[0]))


def test_a_long_stand_in_state_is_cut_in_its_cell_and_given_whole_under_the_audit_table():
    long_state = "ERROR: " + "the builder failed: " * 20
    lines = [AuditLine("ROW-A", "short", "fails (case 'c1')", 3, 3, StandIn.REJECTED),
             AuditLine("ROW-A", "long", long_state, 0, 2, StandIn.ERROR),
             AuditLine("ROW-B", "wide", "fails (case 'c2') 通义千问", 1, 1, StandIn.REJECTED)]
    text = audit_table(lines).splitlines()
    table, notes = text[:4], text[5:]
    assert all(line.endswith("rejected") for line in table[1:]), table
    positions = {_columns_of(line).index(line.rsplit("  ", 1)[-1].strip()) for line in table[1:]}
    assert len(positions) == 1, f"the known-bad column starts at one terminal column on every line: {table}"
    _gaps_are_spaces(table, _starts(table[0]))
    cut = re.search(r"ERROR: .*…", table[2])
    assert cut and display_width(cut.group(0)) == STAND_IN_WIDTH, table[2]
    assert notes == [f"ROW-A::long: {long_state}"], "the cut state is given whole, once"


def test_gates_audit_shows_a_skipped_gpu_gate_without_running_its_cell_into_the_next(example, monkeypatch):
    from _vllm_gates.definitions import requirements

    monkeypatch.setitem(requirements.DETECTORS, "cuda", lambda project: "no CUDA device (torch.cuda.is_available() is False)")
    example.add_gate("on-gpu", "[gpu]")
    result = example.gates("audit")
    assert result.code == 0, result.text
    out = result.out.splitlines()
    top = next(i for i, line in enumerate(out) if line.startswith("row ") and "stand-in" in line)
    table = out[top:top + 3]
    assert [line.split()[1] for line in table[1:]] == ["on-gpu", "page-bytes"]
    assert all(line.endswith("rejected") for line in table[1:])
    _gaps_are_spaces(table, _starts(table[0]))
    assert "EXAMPLE-ROW::on-gpu: not audited: gpu gate skipped: no CUDA device (torch.cuda.is_available() is False)" in out


def test_the_run_table_columns_line_up_under_their_rule(example):
    example.add_gate("a-gate-with-a-rather-long-identifier-for-the-table", "[cpu]")
    result = example.gates("run")
    lines = result.out.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("row ") and "verdict" in line)
    rule = lines[top + 1]
    table = [line for line in lines[top:] if line.startswith(("row ", "EXAMPLE-ROW "))]
    starts = [m.start() for m in re.finditer(r"(?<=  )-", rule)]
    assert len(starts) == 9, rule
    _gaps_are_spaces(table, starts)


# 3. nothing could run here: its own exit status --------------------------------------------------------------------

@pytest.fixture
def gpu_only(example, monkeypatch):
    """The example row with only a gpu gate, claimed PARTIAL (a skipped gpu gate meets it), on a machine without CUDA."""
    from _vllm_gates.definitions import requirements

    monkeypatch.setitem(requirements.DETECTORS, "cuda", lambda project: "no CUDA device (torch.cuda.is_available() is False)")
    example.edit("markers: [cpu]", "markers: [gpu]")
    example.set_roadmap({"EXAMPLE-ROW": ("PARTIAL", {"M1": "PARTIAL"})})
    return example


def test_a_gpu_run_without_a_gpu_says_nothing_could_run_here(gpu_only):
    result, report = gpu_only.run_json("--marker", "gpu")
    assert result.code == ExitCode.NOT_RUNNABLE == 7, result.text
    assert report["exit_code"] == 7 and report["checks"] == 0
    assert {i["outcome"] for i in report["items"]} == {"skipped"} and all("no CUDA device" in i["detail"] for i in report["items"])
    assert all(c["claim_met"] for r in report["rows"] for c in (*r["milestones"], r["claim"])), \
        "every claim reads ok, which is why the exit status must say that nothing ran"
    assert "exit 7" in result.out
    assert gpu_only.pytest("-m", "gpu", "gates").ret == 7, "pytest and `gates run` give it one status"


def test_nothing_selected_stays_five_and_evidence_turns_the_gpu_run_into_a_judgement(gpu_only):
    assert gpu_only.gates("run", "--marker", "dist").code == ExitCode.EMPTY, "no item selected: nothing ran"
    gpu_only.edit("markers: [gpu]", "markers: [cpu]")
    gpu_only.add_gate("on-gpu", "[gpu]")
    cpu, _ = gpu_only.run_json("--marker", "cpu", name="cpu.json")
    assert cpu.code == 0, cpu.text
    judged = gpu_only.gates("run", "--marker", "gpu", "--evidence", str(gpu_only.root / "out" / "cpu.json"))
    assert judged.code == 0, "the cpu gate rests on evidence, the gpu gate is SKIPPED under PARTIAL: judged, not 'nothing ran'"


def test_gates_run_marker_gpu_on_a_machine_without_cuda_exits_7(tmp_path, no_cuda):
    project = _copy(tmp_path)
    gate = project / GATE_FILE
    gate.write_text(gate.read_text(encoding="utf-8").replace("markers: [cpu]", "markers: [gpu]"), encoding="utf-8")
    done = subprocess.run([*_gates(), "run", "--marker", "gpu"], cwd=project, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 7, done.stdout + done.stderr
    assert "gpu gate skipped: no CUDA device" in done.stdout


def test_the_exit_codes_are_documented_where_users_look():
    from _vllm_gates.frontends.cli import EPILOG

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Exit codes"):]
    section = section[:section.index("\n## ")]
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)}
    assert documented == {int(code) for code in ExitCode}
    assert "7 nothing could run here" in EPILOG
    assert "`checks` of the summary line" in readme


# 4. coverage counts only rows that loaded --------------------------------------------------------------------------

def test_coverage_reports_a_broken_row_once_and_does_not_count_its_requirements(example):
    example.write("spec/other.md", "# Other\n\n- **OT-1.1** Something no gate covers.\n")
    example.edit("markers: [cpu]", "markers: [cpu, tpu]")
    result = example.gates("coverage")
    assert result.code == ExitCode.ERROR, result.text
    assert "EX-1.1" not in result.out and "EX-1.2" not in result.out, "a broken row's requirements are not 'uncovered'"
    assert "spec/other.md:3: OT-1.1 has no covering gate" in result.out, "the other specs are still counted"
    assert result.out.count("EXAMPLE-ROW") == 1 and "row EXAMPLE-ROW is broken" in result.out
    assert "the 2 requirement(s) of spec/example.md that no loaded gate covers are not counted" in result.out
    assert result.err.count("definition error in row EXAMPLE-ROW") == 1 and "unknown marker 'tpu'" in result.err
    assert result.out.splitlines()[-1].startswith("1 requirement(s) without a gate; 0 covered")


def test_coverage_of_a_loaded_row_is_unchanged(example):
    result = example.gates("coverage")
    assert (result.code, result.out) == (0, "0 requirement(s) without a gate; 2 covered\n")


# 5. pipes and signals ----------------------------------------------------------------------------------------------

def _with_closed_stdout(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with its stdout a pipe whose reader has already gone, as in `gates list | head -1` once
    head has exited."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(command, cwd=cwd, env=env, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "PYTHONUNBUFFERED"])
@pytest.mark.parametrize("args, code, says", [
    (["list"], 0, ""), (["coverage"], 1, ""), (["--help"], 0, ""), (["list", "--help"], 0, ""),
    (["check-independence"], 5, "no Python file under the packages of the independence contracts"),
], ids=["list", "coverage", "help", "list-help", "check-independence"])
def test_every_command_exits_quietly_on_a_closed_pipe_with_its_own_status(tmp_path, args, code, says, buffered):
    project = _copy(tmp_path)
    (project / "spec" / "extra.md").write_text("- **EX-9.1** uncovered, so coverage exits 1\n", encoding="utf-8")
    env = _env(PYTHONUNBUFFERED=None if buffered else "1")
    done = _with_closed_stdout([*_gates(), *args], project, env)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr and "BrokenPipe" not in done.stderr
    assert (done.stderr == "") if not says else (says in done.stderr and len(done.stderr.splitlines()) == 1), done.stderr
    assert done.returncode == code, done.stderr


def test_a_gate_run_into_a_closed_pipe_finishes_writes_its_report_and_keeps_its_status(tmp_path):
    project = _copy(tmp_path)
    impl = project / IMPL
    impl.write_text(impl.read_text(encoding="utf-8").replace(RETURN, RETURN.replace("return 2 *", "return 3 *")), encoding="utf-8")
    done = _with_closed_stdout([*_gates(), "run", "--json", "out.json"], project, _env(PYTHONUNBUFFERED=None))
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.returncode == 1, "the claim is not met: a closed pipe does not turn that into success"
    assert json.loads((project / "out.json").read_text(encoding="utf-8"))["exit_code"] == 1


def test_gates_affected_exits_quietly_on_a_closed_pipe(tmp_path):
    project = _copy(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=project, check=True)
    subprocess.run([*git, "add", "-A"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], cwd=project, check=True)
    (project / IMPL).write_text((project / IMPL).read_text(encoding="utf-8") + "\n", encoding="utf-8")
    done = _with_closed_stdout([*_gates(), "affected", "--base", "HEAD", "--explain"], project, _env(PYTHONUNBUFFERED=None))
    assert done.returncode == 0 and done.stderr == "", done.stderr


def _blocked_on_output(process: subprocess.Popen[str], timeout: float = 60) -> None:
    """Wait until ``process`` is stuck writing to its stdout pipe, which nobody reads (Linux: /proc/PID/wchan)."""
    wchan = Path(f"/proc/{process.pid}/wchan")
    start = time.monotonic()
    while time.monotonic() < start + timeout:
        if process.poll() is not None:
            raise AssertionError(f"exited {process.returncode} before filling the pipe: {process.stderr.read() if process.stderr else ''}")
        where = wchan.read_text().strip()
        if "pipe" in where:  # pipe_write, anon_pipe_write, pipe_wait (older kernels)
            return
        if where == "0" and time.monotonic() > start + 15:  # a kernel that hides wchan: by now it is writing
            return
        time.sleep(0.05)
    raise AssertionError("never blocked on its output")


def _default_sigint() -> None:
    """A child started from a background job inherits SIGINT ignored: Ctrl-C must reach it as it does in a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupted(command: list[str], cwd: Path, until_busy=_blocked_on_output, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Ctrl-C (SIGINT to the process) once ``until_busy(process)`` returns: by default, once it is stuck writing
    output that nobody reads yet. Returns the exit status and stderr."""
    process = subprocess.Popen(command, cwd=cwd, env=env or _env(PYTHONUNBUFFERED=None), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    try:
        until_busy(process)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, err


@pytest.fixture
def big_project(tmp_path):
    """The example with enough gates and requirements that `gates list`, `verdict` and `coverage` print more than a
    pipe holds (so each can be caught writing), and an evidence file for `gates verdict`."""
    if not Path("/proc/self/wchan").exists():
        pytest.skip("needs /proc/PID/wchan to see that a process is blocked writing")
    project = _copy(tmp_path)
    evidence = project / "out" / "run.json"
    done = subprocess.run([*_gates(), "run", "--json", str(evidence)], cwd=project, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (project / GATE_FILE).read_text(encoding="utf-8")
    block = text[text.index("  - id: page-bytes"):]
    (project / GATE_FILE).write_text(text + "".join(block.replace("id: page-bytes", f"id: copy-{i}-{'x' * 60}") for i in range(700)),
                                     encoding="utf-8")
    (project / "spec" / "many.md").write_text("".join(f"- **MANY-{i}.1** requirement {i} that no gate covers, {'y' * 60}\n"
                                                      for i in range(2000)), encoding="utf-8")
    return project, evidence


@pytest.mark.parametrize("command", [["list"], ["coverage"], ["verdict", "--evidence", "EVIDENCE"]], ids=["list", "coverage", "verdict"])
def test_ctrl_c_prints_one_line_and_exits_130(big_project, command):
    project, evidence = big_project
    code, err = _interrupted([*_gates(), *[str(evidence) if arg == "EVIDENCE" else arg for arg in command]], project)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.splitlines() == ["gates: interrupted (SIGINT): stopped before it finished"], err
    assert code == 130


def test_ctrl_c_while_gates_affected_waits_for_git_is_one_line(tmp_path):
    project = _copy(tmp_path)
    bin_dir, started = tmp_path / "bin", tmp_path / "git-started"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f"#!/bin/sh\ntouch '{started}'\nexec sleep 60\n", encoding="utf-8")
    os.chmod(bin_dir / "git", 0o755)
    env = _env(PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    def git_started(process: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert time.monotonic() < deadline and process.poll() is None, "git was never started"
            time.sleep(0.05)

    code, err = _interrupted([*_gates(), "affected", "--base", "HEAD"], project, git_started, env)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.splitlines() == ["gates: interrupted (SIGINT): stopped before it finished"] and code == 130


def test_ctrl_c_in_gates_run_stops_it_without_a_traceback(tmp_path):
    project = _copy(tmp_path)
    impl = project / IMPL
    impl.write_text(impl.read_text(encoding="utf-8").replace(RETURN, "    import time\n    time.sleep(0.05)\n" + RETURN), encoding="utf-8")
    process = subprocess.Popen([*_gates(), "run", "--json", "out.json"], cwd=project, env=_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, preexec_fn=_default_sigint)
    first = process.stdout.read(1)  # the first progress mark: the run is under way (not still starting up)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=120)
    out = first + out
    assert process.returncode == 130, out
    assert "Traceback" not in out, out
    assert json.loads((project / "out.json").read_text(encoding="utf-8"))["interrupted"] == "SIGINT"


def test_a_signal_inside_a_gc_callback_is_told_apart_so_it_is_sent_again_not_raised_there():
    """Ctrl-C landing in a garbage-collection callback (Hypothesis registers one) must not be raised there: Python
    prints it as an ignored exception with a traceback and drops it; the handler sends the signal again instead."""
    import gc
    import sys

    from _vllm_gates.run.feature_interrupts import inside_gc_callback

    seen: list[bool] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(inside_gc_callback(sys._getframe()))

    gc.callbacks.append(callback)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(callback)
    assert seen and all(seen)
    assert not inside_gc_callback(sys._getframe())


def test_a_signal_at_an_instruction_without_a_line_is_sent_again_not_raised():
    """Ctrl-C landing where a frame has no line number (Python 3.11, entering a `with` block's managers): pytest's
    report of the KeyboardInterrupt fails on the missing line and the run exits 1 with a traceback (seen under load
    in CI's run of test_ctrl_c_in_gates_run_stops_it_without_a_traceback); the handler sends the signal again."""
    import sys
    from types import SimpleNamespace

    from _vllm_gates.run.feature_interrupts import no_line_to_show

    assert not no_line_to_show(sys._getframe())
    outer = SimpleNamespace(f_lineno=12, f_back=None)
    assert no_line_to_show(SimpleNamespace(f_lineno=None, f_back=outer))
    assert no_line_to_show(SimpleNamespace(f_lineno=3, f_back=SimpleNamespace(f_lineno=None, f_back=None)))
    assert not no_line_to_show(SimpleNamespace(f_lineno=3, f_back=outer))
