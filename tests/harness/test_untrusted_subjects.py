"""The judge never runs the judged: whatever the code under gate does, no verdict turns green that should not.

Each class of attack from the issue, reproduced on a copy of the example project: the impl (or a known-bad)
ends its process, lies in `__eq__`, returns foreign objects, patches the harness, raises Hypothesis internals,
hangs; the run is deselected in part or interrupted. Each is caught: FAIL, ERROR, INCOMPLETE, with a message.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.harness.conftest import EXAMPLE, engine_env

pytestmark = pytest.mark.cpu

IMPL = "example_row/impl.py"
RETURN = "    return 2 * block_size * heads * head_size * dtype_bytes\n"
WRONG = "    return 2 * block_size * heads * head_size * dtype_bytes + (1 if heads == 3 else 0)\n"


def _impl_body(example, body: str, header: str = "") -> None:
    """Replace the impl's last line by ``body`` (indented), with ``header`` at the top of the module."""
    text = example.read(IMPL).replace(RETURN, body)
    example.write(IMPL, header + text)


def _gate(report, name="page-bytes"):
    return next(g for r in report["rows"] for g in r["gates"] if g["gate"] == name)


ENDINGS = {
    "os-exit-0": ("    import os\n    os._exit(0)\n", "exited with status 0"),
    "sys-exit-in-thread-of-kill": ("    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n", "killed by SIGKILL"),
    "segfault-like-abort": ("    import os\n    os.abort()\n", "killed by SIGABRT"),
}


@pytest.mark.parametrize("body,says", ENDINGS.values(), ids=ENDINGS)
def test_an_impl_that_ends_its_process_fails_that_case_and_the_others_still_run(example, body, says):
    """Issue 26: the impl's crash is its result for the case (FAIL, with the input), never PASS nor the gate's ERROR;
    the next case and the properties run on a fresh worker. It crashes on fp16-page's input only, moved out of the
    strategy's range (block_size 0 to 4), so that no drawn example of any seed meets it."""
    example.edit("input: {block_size: 2, heads: 2, head_size: 2, dtype_bytes: 2}\n        expect: 32\n",
                 "input: {block_size: 8, heads: 2, head_size: 2, dtype_bytes: 2}\n        expect: 128\n")
    _impl_body(example, "    if (block_size, heads, head_size, dtype_bytes) == (8, 2, 2, 2):\n" + body.replace("    ", "        ") + RETURN)
    result, report = example.run_json("--profile", "ci")
    assert result.code == 1, result.text
    gate = _gate(report)
    assert gate["verdict"] == "FAIL" and gate["cases_passed"] == 1, gate
    assert "case 'fp16-page': impl crashed: its worker" in result.text and says in result.text
    assert "input      : {block_size: 8, heads: 2, head_size: 2, dtype_bytes: 2}" in result.text
    assert "  expected   : 128\n  oracle     : 128\n" in result.text  # the oracle's reply, read beside the lost one
    assert "gate error" not in result.text and "Traceback" not in result.text
    failed = {i["name"]: i["outcome"] for i in report["items"] if i["gate"] == "page-bytes"}
    assert failed["fp16-page"] == "failed" and failed["negative-heads"] == failed["properties"] == "passed", failed


@pytest.mark.parametrize("role,edit", [
    ("oracle", ("example_row/oracle.py", "    return one + one\n", "    import os\n    os._exit(3)\n")),
    ("known-bad", ("gates/rows/example/known_bad.py", "    return block_size * heads * head_size * dtype_bytes\n",
                   "    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n")),
], ids=["oracle", "known-bad"])
def test_an_oracle_or_known_bad_that_ends_its_process_is_still_a_gate_error(example, role, edit):
    path, old, new = edit
    example.edit(old, new, path)
    result, report = example.run_json()
    assert result.code == 3, result.text
    assert _gate(report)["verdict"] == "ERROR"
    assert "gate error" in result.text and f"worker {role} of gates/rows/example/gate.yaml" in result.text
    assert "impl crashed" not in result.text


def test_an_atexit_handler_or_a_fork_that_exits_cannot_turn_a_wrong_impl_green(example):
    header = ("import atexit, os\natexit.register(lambda: os._exit(0))\n")
    _impl_body(example, "    if os.fork():\n        os._exit(0)\n" + WRONG, header)
    result, report = example.run_json("--profile", "ci")
    assert result.code == 1, result.text
    assert _gate(report)["verdict"] == "FAIL"


NOT_PLAIN = {
    "int-whose-eq-is-always-true": ("class Liar(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n\n\n",
                                    "    return Liar(0)\n", "result is not plain data"),
    "object-equal-to-everything": ("class Anything:\n    def __eq__(self, other):\n        return True\n\n\n",
                                   "    return Anything()\n", "result is not plain data"),
    # a numpy array is a tensor since protocol version 2 (compared, and never equal to an int); its scalars are not plain
    "numpy-scalar": ("import numpy\n\n\n", "    return numpy.int64(2 * block_size * heads * head_size * dtype_bytes)\n", "numpy.int64"),
}


@pytest.mark.parametrize("header,body,says", NOT_PLAIN.values(), ids=NOT_PLAIN)
def test_results_that_are_not_plain_data_are_errors_never_compared(example, header, body, says):
    _impl_body(example, body, header)
    result, report = example.run_json()
    assert result.code == 3, result.text
    assert _gate(report)["verdict"] == "ERROR"
    assert says in result.text


PATCHES = {
    "replaces-the-verdict-function": "import _vllm_gates.results.verdicts as v\nv.gate_verdict = lambda *a, **k: (v.Verdict.PASS, '')\n",
    "replaces-the-comparison": "import _vllm_gates.values.compare as c\nc.strict_equal = lambda a, b: True\n",
    "replaces-claim-met": "import _vllm_gates.results.verdicts as v\nv.claim_met = lambda *a, **k: (True, '')\n",
}


@pytest.mark.parametrize("header", PATCHES.values(), ids=PATCHES)
def test_patching_the_harness_from_the_subject_changes_nothing(example, header):
    _impl_body(example, WRONG, header)
    result, report = example.run_json("--profile", "ci")
    assert result.code == 1, result.text
    assert _gate(report)["verdict"] == "FAIL"


def test_hypothesis_internals_raised_by_the_subject_are_an_outcome_not_a_skip(example):
    _impl_body(example, "    from hypothesis.errors import StopTest\n    raise StopTest(0)\n")
    result, report = example.run_json("--profile", "ci")
    assert result.code == 1, result.text
    assert _gate(report)["verdict"] == "FAIL"
    assert "StopTest" in result.text


def test_a_deselected_item_is_no_pass_of_its_gate(example, monkeypatch):
    """-k selects part of the gate (issue 25): judged on what it selected, never a claim met, never evidence. (`gates
    run` refuses a -k it did not place: tests/harness/test_selection_guard.py.)"""
    _impl_body(example, WRONG.replace("heads == 3", "heads == 2"))  # wrong on the one case selected
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{os.environ.get('PYTEST_ADDOPTS', '')} -k fp16-page")
    result = example.pytest(f"--gates-json={example.root / 'out.json'}", "gates")
    report = json.loads((example.root / "out.json").read_text(encoding="utf-8"))
    assert result.ret == 1, result.stdout.str()
    gate = _gate(report)
    assert (gate["verdict"], gate["partial"], gate["executed"]) == ("FAIL", True, False)
    assert "partial: 1 of 7 items selected" in gate["reason"]
    assert report["rows"][0]["claim"]["claim_met"] is False and report["rows"][0]["claim"]["judged"] is False


def test_a_session_stopped_early_is_incomplete(example):
    example.edit("        expect: 32\n", "        expect: 33\n")  # the first case fails, -x stops the session
    result = example.pytest("-x", f"--gates-json={example.root / 'out.json'}", "gates")
    report = json.loads((example.root / "out.json").read_text(encoding="utf-8"))
    assert result.ret == 1
    assert _gate(report)["verdict"] == "FAIL" and "not run" not in _gate(report)["reason"]
    example.add_gate("second")  # a copy of the gate as it was: its fp16-page passes
    result = example.pytest("--maxfail=1", "-k", "fp16", f"--gates-json={example.root / 'out.json'}", "gates")
    report = json.loads((example.root / "out.json").read_text(encoding="utf-8"))
    assert result.ret == 1  # in a partial selection too, a selected item that did not run is never a pass
    assert (_gate(report)["verdict"], _gate(report, "second")["verdict"]) == ("FAIL", "INCOMPLETE")
    assert "declared but not run here: fp16-page" in _gate(report, "second")["reason"]


def test_a_hanging_impl_times_out_as_a_failure_of_the_case(example):
    example.edit("    markers: [cpu]\n", "    markers: [cpu]\n    timeout: 2\n")
    _impl_body(example, "    while True:\n        pass\n")
    started = time.monotonic()
    result, report = example.run_json()
    assert result.code == 1, result.text
    assert _gate(report)["verdict"] == "FAIL"
    assert "case 'fp16-page': impl hung: its worker timed out after 2 s; it was killed" in result.text
    assert "shrinking  : none: each try could hang as long again" in result.text  # one hang, not one per shrink step
    assert time.monotonic() - started < 120


def test_arguments_that_do_not_bind_are_a_definition_error_not_an_agreed_type_error(example):
    example.edit('"heads": st.integers(0, 5)', '"hedas": st.integers(0, 5)', "gates/rows/example/strategies.py")
    result, report = example.run_json("--profile", "ci")
    assert result.code == 3, result.text
    assert "do not bind" in result.text and "missing a required argument: 'heads'" in result.text


def test_a_property_whose_examples_only_agree_on_errors_checked_nothing(example):
    example.edit('"heads": st.integers(0, 5)', '"heads": st.integers(-5, -1)', "gates/rows/example/strategies.py")
    result, report = example.run_json("--profile", "ci")
    gate = _gate(report)
    assert gate["verdict"] == "EMPTY" and "checked nothing" in gate["reason"], gate
    assert (gate["values_compared"], gate["errors_agreed"]) == (0, 50)
    assert result.code == 1, result.text


def test_the_audit_goes_through_the_worker_and_fails_the_gate(example):
    result = example.gates("audit")
    assert result.code == 0, result.text
    assert "fails (case 'fp16-page')" in result.text


def test_an_interrupt_that_hypothesis_turned_into_its_own_error_still_stops_the_run():
    """A SIGTERM while Hypothesis sets up surfaced once as its AssertionError: the properties FAILed, blaming the impl."""
    from _vllm_gates.run.checks import _interrupt_behind

    try:
        try:
            raise KeyboardInterrupt("SIGTERM")
        except KeyboardInterrupt:
            raise AssertionError("state._runner is None")
    except AssertionError as error:
        assert str(_interrupt_behind(error)) == "SIGTERM"
    assert _interrupt_behind(ValueError("no interrupt")) is None


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_run_says_so_and_meets_no_claim(tmp_path, stop):
    import shutil

    project = tmp_path / "p"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    impl = project / IMPL
    impl.write_text(impl.read_text(encoding="utf-8").replace(RETURN, "    import time\n    time.sleep(0.05)\n" + RETURN), encoding="utf-8")
    env = engine_env()
    process = subprocess.Popen([sys.executable, "-m", "_vllm_gates.frontends.cli", "run", "--json", "out.json"], cwd=project, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal
    first = process.stdout.read(1)  # the first progress mark: the run is under way, not still starting up
    process.send_signal(stop)
    out, _ = process.communicate(timeout=120)
    out = first + out
    assert process.returncode == 130, out
    report = json.loads((project / "out.json").read_text(encoding="utf-8"))
    assert report["interrupted"] == report["meta"]["interrupted"] == stop.name and report["exit_code"] == 130
    assert all(not r["claim"]["claim_met"] for r in report["rows"])
    assert _gate(report)["verdict"] in ("INCOMPLETE", "ERROR"), out


def test_a_gate_may_require_a_share_of_value_comparisons(example):
    example.edit('"heads": st.integers(0, 5)', '"heads": st.integers(-4, 1)', "gates/rows/example/strategies.py")
    example.edit("      max_examples: 50\n", "      max_examples: 50\n      min_value_share: 0.9\n")
    result, report = example.run_json("--profile", "ci")
    gate = _gate(report)
    assert gate["verdict"] == "EMPTY" and "below the gate's min_value_share 0.9" in gate["reason"], gate
    assert gate["values_compared"] + gate["errors_agreed"] == 50 and gate["errors_agreed"] > 5


def _run_on_a_budget(example, seconds: int, body: str):
    example.edit('allowed-roots = ["example_row", "gates"]\n', f'allowed-roots = ["example_row", "gates"]\nrun-budget = {seconds}\n',
                 "pyproject.toml")
    _impl_body(example, body + RETURN)
    result, _ = example.run_json()
    assert result.code == 3, result.text
    return result


def test_the_run_budget_bounds_all_workers_together(example):
    result = _run_on_a_budget(example, 1, "    import time\n    time.sleep(0.4)\n")
    assert "budget of 1 s is spent" in result.text or "timed out after" in result.text


def test_a_call_cut_short_by_the_run_budget_is_not_the_impls_hang(example):
    """The budget, not the impl, ended a call well within its own time limit: ERROR, never the impl's FAIL."""
    result = _run_on_a_budget(example, 4, "    if heads == 2:\n        import time\n        time.sleep(30)\n")
    assert "impl hung" not in result.text
    assert "the run's budget of 4 s ran out" in result.text or "budget of 4 s is spent" in result.text
