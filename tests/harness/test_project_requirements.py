"""A requirement a project declares with its own detector (issue 27, item 1): its gates skip with the detector's
reason, a PARTIAL claim excuses them when the requirement is a device, a run where nothing else was selected exits 7
(serially and under xdist), and a malformed declaration or a failing detector is one error at its pyproject.toml line.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.cpu

DETECTOR = '''import os


def fpga_missing():
    return os.environ.get("EXAMPLE_FPGA_MISSING") or None
'''


def _markers(requires: str) -> str:
    return ('\n[tool.vllm-gates.markers]\ncpu = "runs on any machine"\n'
            'gpu = { help = "needs a CUDA device", requires = "cuda" }\n'
            'dist = "starts several processes"\n'
            f'fpga = {{ help = "needs an FPGA", requires = {requires} }}\n')


@pytest.fixture
def fpga(example, monkeypatch):
    """The example row, claimed PARTIAL, with a second gate on the project's `fpga` marker (a device) that this
    machine lacks (the detector says why)."""
    example.write("example_row/fpga.py", DETECTOR)
    example.write("pyproject.toml", example.read("pyproject.toml") + _markers(
        '{ detect = "example_row.fpga:fpga_missing", device = true }'))
    example.add_gate("on-fpga", "[fpga]")
    example.set_roadmap({"EXAMPLE-ROW": ("PARTIAL", {"M1": "PARTIAL"})})
    monkeypatch.setenv("EXAMPLE_FPGA_MISSING", "no FPGA here (test)")
    return example


def test_a_project_requirement_skips_its_gates_with_the_detectors_reason(fpga):
    result, report = fpga.run_json()
    assert result.code == 0, result.text
    skipped = [i for i in report["items"] if i["gate"] == "on-fpga"]
    assert len(skipped) == 7 and {i["detail"] for i in skipped} == {"fpga gate skipped: no FPGA here (test)"}
    assert fpga.gate(report, "on-fpga")["verdict"] == "SKIPPED"
    assert fpga.row(report)["claim"]["claim_met"], "a device requirement's gates may be skipped under PARTIAL"


def test_a_requirement_that_is_no_device_is_not_excused_by_partial(fpga):
    fpga.edit("device = true", "device = false", "pyproject.toml")
    result, report = fpga.run_json()
    assert result.code == 1, result.text
    assert fpga.row(report)["milestones"][0]["reason"] == \
        "claims PARTIAL, but gates that are not gpu gates were skipped or not proven: on-fpga"


def test_a_met_requirement_runs_its_gates(fpga, monkeypatch):
    monkeypatch.delenv("EXAMPLE_FPGA_MISSING")
    result, report = fpga.run_json()
    assert result.code == 0, result.text
    ran = [i["outcome"] for i in report["items"] if i["gate"] == "on-fpga"]
    assert ran == ["passed"] * 7 and fpga.gate(report, "on-fpga")["verdict"] == "PASS"


def test_only_unmet_project_requirements_selected_is_exit_7_serially_and_under_xdist(fpga):
    result, report = fpga.run_json("--marker", "fpga")
    assert result.code == 7 and report["exit_code"] == 7, result.text
    pytest.importorskip("xdist")
    env = {**os.environ, "CI": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", "-m", "fpga", "gates"],
                          cwd=fpga.root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 7, "the skip's cause crosses from the xdist workers to the judge\n" + done.stdout + done.stderr


@pytest.mark.parametrize("requires, key, message", [
    ('"fpga"', "markers.fpga.requires", "'fpga' is not known (accepted: cuda, upstream, or a table"),
    ('{ detect = "example_row fpga" }', "markers.fpga.requires.detect", 'expected "package.module:function"'),
    ('{ detect = "example_row.fpga:fpga_missing", device = "yes" }', "markers.fpga.requires.device", "expected true or false, got 'yes'"),
    ('{ detect = "example_row.fpga:fpga_missing", gpu = true }', "markers.fpga.requires", "expected 'cuda', 'upstream' or a table with `detect`"),
])
def test_a_malformed_requirement_is_refused_at_its_line(example, requires, key, message):
    example.write("pyproject.toml", example.read("pyproject.toml") + _markers(requires))
    result = example.gates("run")
    assert result.code == 3, result.text
    line = example.line("fpga = {", relative="pyproject.toml")
    assert f"pyproject.toml:{line}:1: [tool.vllm-gates] {key}: {message}" in result.err, result.err
    assert "Traceback" not in result.text


@pytest.mark.parametrize("detector, said", [
    ("def fpga_missing():\n    raise OSError('no /dev/fpga0')\n", "raised OSError: no /dev/fpga0"),
    ("def fpga_missing():\n    return 0\n", "returned 0: a detector returns why the requirement is unmet"),
    ("", "raised AttributeError"),
])
def test_a_failing_detector_is_a_usage_error_at_its_line(fpga, detector, said):
    fpga.write("example_row/fpga.py", detector)
    result = fpga.gates("run")
    assert result.code == 2, result.text
    line = fpga.line("fpga = {", relative="pyproject.toml")
    assert f"pyproject.toml:{line}:1: [tool.vllm-gates] markers.fpga.requires: " \
           f"detect = 'example_row.fpga:fpga_missing': the detector {said}" in result.text, result.text
    assert "Traceback" not in result.text
