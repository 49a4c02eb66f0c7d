"""Upstream parity: a row's claim `upstream: VERSION`, judged by its gates with the upstream marker alone, where the
pinned release is installed; "not checked here" elsewhere, without changing the exit code; declared deviations."""
from __future__ import annotations

from importlib import metadata

import pytest

pytestmark = pytest.mark.cpu

INSTALLED = metadata.version("PyYAML")  # an installed package stands in for the pinned upstream release
ROADMAP = """rows:
  EXAMPLE-ROW:
    title: A toy row
    state: DONE
    upstream: "{claim}"
    milestones:
      M1: {{title: "page bytes", state: DONE}}
"""


def _pin(example, version: str = INSTALLED, claim: str | None = None, upstream_gate: bool = True, oracle: str | None = None) -> None:
    text = example.read("pyproject.toml").replace("[tool.pytest.ini_options]", f"""[tool.vllm-gates.upstream]
package = "PyYAML"
version = "{version}"
install = "pip install PyYAML=={version}"

[tool.vllm-gates.markers]
cpu = "runs on any machine"
upstream = {{ help = "compares with the pinned upstream release", requires = "upstream" }}

[tool.pytest.ini_options]""")
    example.write("pyproject.toml", text)
    example.write("spec/roadmap.yaml", ROADMAP.format(claim=claim or version))
    if upstream_gate:
        block = example.gate_block("upstream-page-bytes", "[upstream]")
        if oracle:
            block = block.replace("example_row.oracle:counted_page_bytes", oracle)
        example.write("gates/rows/example/gate.yaml", example.read() + block)


def test_parity_is_met_where_the_pinned_release_is_installed_and_its_gates_pass(example):
    _pin(example)
    result, report = example.run_json()
    assert result.code == 0, result.text
    parity = example.row(report)["parity"]
    assert parity == {"claimed": INSTALLED, "verdict": "PASS", "met": True, "reason": "", "gates": ["upstream-page-bytes"]}
    header = next(line for line in result.out.splitlines() if line.startswith("row "))
    assert header.split()[-1] == "upstream"
    assert f"{INSTALLED} ok" in next(line for line in result.out.splitlines() if "(row)" in line)
    assert example.row(report)["claim"]["claim_met"] is True


def test_parity_is_not_checked_where_another_release_is_installed_and_the_exit_code_stands(example):
    _pin(example, version="0.0.1")
    result, report = example.run_json()
    assert result.code == 0, result.text
    parity = example.row(report)["parity"]
    assert parity["met"] is None
    assert f"PyYAML {INSTALLED} is installed, but the project pins 0.0.1 (pip install PyYAML==0.0.1 installs it)" in parity["reason"]
    assert "0.0.1 not checked here" in result.out


def test_parity_is_not_checked_by_a_run_that_deselects_the_upstream_gates(example):
    _pin(example)
    result, report = example.run_json("--marker", "cpu")
    assert result.code == 0, result.text
    assert example.row(report)["parity"]["met"] is None
    assert "deselected by -m 'cpu'" in example.row(report)["parity"]["reason"]


def test_an_upstream_gate_that_fails_fails_the_parity_claim_only(example):
    example.write("example_row/upstream_stand_in.py", "def page_bytes(block_size, heads, head_size, dtype_bytes):\n"
                                                       "    return block_size * heads * head_size * dtype_bytes\n")
    _pin(example, oracle="example_row.upstream_stand_in:page_bytes")
    result, report = example.run_json()
    assert result.code == 1, result.text
    row = example.row(report)
    assert row["claim"]["claim_met"] is True and row["parity"]["met"] is False
    assert "upstream-page-bytes FAIL" in row["parity"]["reason"]
    assert f"EXAMPLE-ROW: upstream {INSTALLED}: upstream-page-bytes FAIL" in result.out


def test_a_parity_claim_without_upstream_gates_is_not_met(example):
    _pin(example, upstream_gate=False)
    result, report = example.run_json()
    assert result.code == 1
    assert "no gate of the row carries the upstream marker" in example.row(report)["parity"]["reason"]


def test_a_claim_of_another_release_than_the_pin_is_refused_at_its_line(example):
    _pin(example, claim="9.9")
    result = example.gates("list")
    assert result.code == 3
    assert f"spec/roadmap.yaml:5:" in result.text and "claims parity with '9.9', but the project pins" in result.text


DEVIATIONS = f"""upstream: "{INSTALLED}"
deviations:
  explicit-units:
    row: EXAMPLE-ROW
    operation: page-bytes
    upstream: counts bytes one way
    ours: counts them another
    why: a reason
    checked_by: {{gate}}
"""
OPERATIONS = """row: EXAMPLE-ROW
operations:
  page-bytes:
    summary: Bytes of one KV page.
    input: {block_size: int32}
    output: int64
    python: {impl: example_row.impl:page_bytes}
"""


def test_gates_deviations_lists_each_with_the_gate_that_checks_it(example):
    _pin(example)
    example.write("gates/rows/example/operations.yaml", OPERATIONS)
    example.write("spec/deviations.yaml", DEVIATIONS.format(gate="upstream-page-bytes"))
    result = example.gates("deviations")
    assert result.code == 0, result.text
    assert f"deviations from PyYAML {INSTALLED} (spec/deviations.yaml): 1" in result.out
    assert "explicit-units" in result.out and "why:      a reason" in result.out


@pytest.mark.parametrize("gate, message", [("no-such-gate", "'no-such-gate' is not a gate of"),
                                           ("page-bytes", "'page-bytes' does not carry the 'upstream' marker")])
def test_a_deviation_checked_by_no_upstream_gate_is_refused(example, gate, message):
    _pin(example)
    example.write("gates/rows/example/operations.yaml", OPERATIONS)
    example.write("spec/deviations.yaml", DEVIATIONS.format(gate=gate))
    for command in ("deviations", "list"):
        result = example.gates(command)
        assert result.code == 3, result.text
        assert message in result.text and "spec/deviations.yaml:9:" in result.text


def test_upstream_gates_without_a_parity_claim_fail_the_run(example):
    """Without the claim nothing would judge them: a failing upstream gate must not pass unnoticed."""
    _pin(example)
    example.write("spec/roadmap.yaml", ROADMAP.format(claim="x").replace('    upstream: "x"\n', ""))
    result, report = example.run_json()
    assert result.code == 1, result.text
    assert "claims no upstream parity" in example.row(report)["parity"]["reason"]


def test_the_upstream_jobs_evidence_meets_the_parity_claim_in_gates_verdict(example):
    """CI's merge job runs nothing: the upstream job's report is the evidence for the parity claim."""
    _pin(example)
    result, _ = example.run_json("--marker", "upstream", name="upstream.json")
    assert result.code in (0, 6), result.text  # the cpu gates are UNPROVEN in that run
    cpu, _ = example.run_json("--marker", "cpu", name="cpu.json")
    verdict = example.gates("verdict", "--evidence", str(example.root / "out" / "cpu.json"),
                            "--evidence", str(example.root / "out" / "upstream.json"))
    assert verdict.code == 0, verdict.text
    assert f"{INSTALLED} ok" in verdict.out


def test_an_upstream_gate_whose_oracle_needs_the_absent_release_is_skipped_not_an_error(example):
    """Where the pin is not installed, the upstream gates' targets (adapters that import it) are not resolved."""
    example.write("example_row/needs_upstream.py", "import not_an_installed_upstream_package  # noqa: F401\n\n\n"
                                                     "def page_bytes(block_size, heads, head_size, dtype_bytes):\n    return 0\n")
    _pin(example, version="0.0.1", oracle="example_row.needs_upstream:page_bytes")
    result, report = example.run_json()
    assert result.code == 0, result.text
    assert example.gate(report, "upstream-page-bytes")["verdict"] == "SKIPPED"
    assert example.row(report)["parity"]["met"] is None
