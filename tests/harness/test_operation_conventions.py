"""Conventions that spare a team files when it adds an operation (docs/gating-a-port.md, issue 27 item 5): a gate
with `operation: NAME` finds its strategy and its listed known-bads in the row folder's module named after NAME."""
from __future__ import annotations

import pytest

from tests.harness.test_implementations import IMPL_LINE, OPERATIONS

pytestmark = pytest.mark.cpu

HELPER = """from gates.rows.example.known_bad import accepts_negative, drops_factor_two  # noqa: F401
from gates.rows.example.strategies import geometries as strategy  # noqa: F401
"""


def _conventional(example) -> None:
    """The example gate as `operation: page-bytes`, its strategy and known-bads left to `page_bytes.py`."""
    example.write("gates/rows/example/operations.yaml", OPERATIONS)
    example.edit(IMPL_LINE, "    operation: page-bytes\n")
    example.edit("[tool.pytest.ini_options]", '[tool.vllm-gates.error-kinds]\nValueError = "invalid-argument"\n\n'
                                              "[tool.pytest.ini_options]", "pyproject.toml")
    example.edit("      strategy: .strategies:geometries\n", "")
    text = example.read()
    example.write("gates/rows/example/gate.yaml", text[:text.index("    known_bad:")] +
                  "    known_bad: [drops-factor-two, accepts-negative]\n")
    example.write("gates/rows/example/page_bytes.py", HELPER)


def test_the_strategy_and_known_bads_are_found_by_the_operations_name(example):
    _conventional(example)
    result, report = example.run_json()
    assert result.code == 0, result.text
    gate = example.gate(report)
    assert (gate["verdict"], gate["examples"], gate["known_bad_rejected"], gate["known_bad_total"]) == ("PASS", 50, 2, 2)


def test_a_missing_conventional_target_is_a_definition_error_at_its_line(example):
    _conventional(example)
    example.write("gates/rows/example/page_bytes.py", HELPER.replace("accepts_negative, ", ""))
    result, report = example.run_json()
    assert result.code == 3, result.text
    assert f"gates/rows/example/gate.yaml:{example.line('known_bad: [')}:" in result.text
    assert "gates.rows.example.page_bytes" in result.text and "accepts_negative" in result.text
