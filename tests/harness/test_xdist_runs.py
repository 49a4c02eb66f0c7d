"""`pytest -n N` (pytest-xdist, issue 15): the workers run the items, the controller alone judges, and the verdicts,
reports and exit code equal a serial run's. Before, every worker judged its own share and wrote the same report
file, and the controller exited 0 whatever the claims."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("xdist", reason="pytest-xdist is not installed (pip install -e '.[test]')")

pytestmark = pytest.mark.cpu

VARIES = {"duration"}  # how long each item took is the only figure a split may change


def _normalised(report: dict[str, Any]) -> dict[str, Any]:
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VARIES}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    report = strip(report)
    report["items"] = sorted(report["items"], key=lambda item: item["nodeid"])  # workers finish in any order
    return report


def _run(root: Path, name: str, *args: str) -> tuple[int, dict[str, Any], str]:
    out = root / "out" / f"{name}.json"
    env = {**os.environ, "CI": "1"}  # the ci profile: derandomized, so both runs draw the same examples
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--gates-json={out}",
                           f"--junitxml={root / 'out' / name}.xml", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=600)
    return done.returncode, json.loads(out.read_text(encoding="utf-8")), done.stdout + done.stderr


@pytest.mark.parametrize("broken", [False, True], ids=["claims-met", "a-claim-not-met"])
def test_a_run_split_over_two_workers_reports_what_a_serial_run_does(example, broken):
    if broken:  # the impl goes wrong for 4 heads and more: the properties find it, the claim fails
        example.write("example_row/impl.py", example.read("example_row/impl.py").replace(
            "return 2 * block_size * heads * head_size * dtype_bytes",
            "return (3 if heads >= 4 else 2) * block_size * heads * head_size * dtype_bytes"))
    serial_code, serial, serial_text = _run(example.root, "serial")
    split_code, split, split_text = _run(example.root, "split", "-n", "2")
    assert split_code == serial_code == (1 if broken else 0), serial_text + split_text
    assert _normalised(split) == _normalised(serial)
    assert len(split["items"]) == len(serial["items"]) > 0
    assert split["meta"]["profile"] == "ci"
    table = next(line for line in split_text.splitlines() if "(row)" in line)
    expected = ["FAIL", "DONE", "NOT", "MET"] if broken else ["PASS", "DONE", "ok"]
    assert table.split()[-len(expected):] == expected
    junit = (example.root / "out" / "split.xml").read_text(encoding="utf-8")
    assert "claim[DONE]" in junit  # the controller adds the claims to its JUnit, as a serial run does


def test_only_the_controller_writes_the_report(example):
    code, report, text = _run(example.root, "split", "-n", "2")
    assert code == 0, text
    assert report["rows"] and all(item["outcome"] == "passed" for item in report["items"])
    assert text.count("checks in") == 1  # one row table, the controller's


def test_whole_gate_files_to_each_worker_report_what_a_serial_run_does(example):
    """CI's split (ci/cpu.sh: `-n N --dist loadfile`): two rows' gate files on two workers, the same report."""
    example.add_row("SECOND-ROW")
    serial_code, serial, serial_text = _run(example.root, "serial")
    split_code, split, split_text = _run(example.root, "split", "-n", "2", "--dist", "loadfile")
    assert split_code == serial_code == 0, serial_text + split_text
    assert _normalised(split) == _normalised(serial)
    assert {row["row"] for row in split["rows"]} == {"EXAMPLE-ROW", "SECOND-ROW"}


def test_every_worker_draws_from_the_controllers_seed(example):
    """Without CI (the dev profile) the controller draws the run seed and gives it to each worker: the seed it prints
    replays, in a serial run, what every worker drew (issue 25)."""
    from tests.harness.test_replay import add_logged_gate

    log = add_logged_gate(example)
    example.add_row("SECOND-ROW")  # a copy of the row with its logged gate: one gate file to each worker
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--hypothesis-profile=dev"]
    split = subprocess.run(base + ["-n", "2", "--dist", "loadfile"], cwd=example.root, env=env, capture_output=True,
                           text=True, timeout=600)
    assert split.returncode == 0, split.stdout + split.stderr
    seed = next(line for line in split.stdout.splitlines() if line.startswith("hypothesis profile dev, seed ")).split()[4]
    drawn = sorted(log.read_text(encoding="utf-8").splitlines())
    log.unlink()
    serial = subprocess.run(base + [f"--hypothesis-seed={seed}"], cwd=example.root, env=env, capture_output=True, text=True,
                            timeout=600)
    assert serial.returncode == 0, serial.stdout + serial.stderr
    assert len(drawn) == 120 and sorted(log.read_text(encoding="utf-8").splitlines()) == drawn
