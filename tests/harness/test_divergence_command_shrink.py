"""`gates diverge` on the toy decoder of test_divergence_command (docs/divergence.md): a localized break shrunk to
its minimal reproduction (the reference re-run on each candidate) without touching the full run's table, verdict
or exit code; `--no-shrink`; drift and a replayed dump, where nothing is shrunk; a reference that is not installed
here, skipped with the reason (exit 7), never a pass."""
from __future__ import annotations

import json

import pytest

from tests.harness.conftest import Example
from tests.harness.test_divergence_command import table_lines, toy

pytestmark = pytest.mark.cpu

LATE_BREAK = '''

def port_broken_layer1_from_token2(config, weights, ids, dtype, feed=None):
    """Layer 1's MLP multiplies by W_1 transposed from the third token on (each token's row is computed apart, so
    rows 2.. are those of port_broken_layer1): no prompt under 3 tokens shows the break."""
    taps = _forward(config, weights, ids, dtype, feed)
    broken = _forward(config, weights, ids, dtype, feed, broken_layer=1)
    return {name: np.concatenate([value[:2], broken[name][2:]]) for name, value in taps.items()}
'''


def late_break(example: Example) -> Example:
    toy(example).write("example_row/toy_decoder.py", example.read("example_row/toy_decoder.py") + LATE_BREAK)
    example.edit("impl: example_row.toy_decoder:port\n", "impl: example_row.toy_decoder:port_broken_layer1_from_token2\n")
    return example


def diverge(example: Example, *args: str, name: str = "diverge.json") -> tuple[object, dict]:
    report = example.root / "out" / name
    result = example.gates("diverge", "EXAMPLE-ROW", "--gate", "toy-taps", "--json", str(report), *args)
    return result, (json.loads(report.read_text()) if report.exists() else {})


def test_a_break_is_shrunk_to_the_fewest_layers_and_the_shortest_prompt_that_keep_it(example: Example) -> None:
    result, report = diverge(late_break(example))
    assert result.code == 1, result.text
    assert "LOCALIZED BREAK at layer 1, tap layers.1.mlp.out" in result.out
    assert ("minimal reproduction: 2 of 3 layers, the first 3 tokens of 4 (ids [1, 5, 2]): the break at layer 1, "
            "tap layers.1.mlp.out") in result.out
    assert "shrinking: 4 runs (at most 16), the reference re-run on each" in result.out
    shrunk = report["shrink"]
    assert shrunk["sought"] and shrunk["full"] == {"layers": 3, "tokens": 4}
    assert {key: shrunk["minimal"][key] for key in ("layers", "tokens", "ids", "tap", "layer")} == \
        {"layers": 2, "tokens": 3, "ids": [1, 5, 2], "tap": "layers.1.mlp.out", "layer": 1}
    assert [(run["layers"], run["tokens"], run["outcome"]) for run in shrunk["runs"]] == [
        (2, 4, "kept"), (2, 1, "lost"), (2, 2, "lost"), (2, 3, "kept")]
    assert shrunk["minimal"]["isolated"]["passed"] is False


def test_no_shrink_and_shrinking_leave_the_full_runs_table_verdict_and_exit_code_alone(example: Example) -> None:
    late_break(example)
    shrinking, shrunk = diverge(example)
    plain, declined = diverge(example, "--no-shrink", name="plain.json")
    assert shrinking.code == plain.code == 1, plain.text
    assert table_lines(shrinking.out) == table_lines(plain.out)
    assert plain.out.startswith(shrinking.out.split("shrinking:")[0])  # everything before the shrinking, unchanged
    assert "shrinking:" not in plain.out and "minimal reproduction: not sought: --no-shrink" in plain.out
    assert {key: value for key, value in shrunk.items() if key != "shrink"} == \
        {key: value for key, value in declined.items() if key != "shrink"}
    assert declined["shrink"]["sought"] is False and declined["shrink"]["reason"] == "--no-shrink"
    assert declined["shrink"]["runs"] == [] and declined["shrink"]["minimal"] is None


def test_drift_has_nothing_to_shrink(example: Example) -> None:
    result, report = diverge(toy(example))
    assert result.code == 0, result.text
    assert "shrinking" not in result.out and "minimal reproduction" not in result.out
    assert report["shrink"]["sought"] is False
    assert report["shrink"]["reason"] == "no localized break: nothing to shrink"
    assert report["shrink"]["full"] == {"layers": 3, "tokens": 4} and report["shrink"]["runs"] == []


def test_a_break_against_a_replayed_dump_is_not_shrunk_and_says_why(example: Example) -> None:
    dump = example.root / "oracle.safetensors"
    assert toy(example).gates("diverge", "EXAMPLE-ROW", "--gate", "toy-taps", "--dump", str(dump)).code == 0
    example.edit("impl: example_row.toy_decoder:port\n", "impl: example_row.toy_decoder:port_broken_layer1\n")
    result, report = diverge(example, "--against", str(dump))
    assert result.code == 1, result.text
    assert "minimal reproduction: not sought: the reference is a recorded dump" in result.out
    assert report["shrink"]["sought"] is False and "recorded dump" in report["shrink"]["reason"]


ABSENT = '''"""A reference that needs a package this machine lacks."""
import vllm_gates_absent_package  # noqa: F401


def taps(config, weights, ids, dtype, feed=None):
    return {}
'''
IMPORT_ERROR_AT_CALL = '''"""A reference that says, when called, what it needs (as upstream/hf_qwen3.py does)."""


def taps(config, weights, ids, dtype, feed=None):
    raise ImportError("transformers is not installed (the reference pins 5.25.x)")
'''


@pytest.mark.parametrize("module, text, reason", [
    ("absent_reference", ABSENT, "ModuleNotFoundError: No module named 'vllm_gates_absent_package'"),
    ("lazy_reference", IMPORT_ERROR_AT_CALL, "ImportError: transformers is not installed (the reference pins 5.25.x)"),
])
def test_a_reference_that_is_not_installed_is_skipped_with_the_reason_exit_7(example: Example, module: str, text: str,
                                                                            reason: str) -> None:
    toy(example).write(f"example_row/{module}.py", text)
    result, report = diverge(example, "--against", f"example_row.{module}:taps")
    assert result.code == 7, result.text
    assert result.err.strip() == f"gates diverge: skipped: the reference example_row.{module}:taps cannot run here: {reason}"
    assert "DRIFT" not in result.out and "BREAK" not in result.out and "tap " not in result.out
    assert report["skipped"].endswith(reason) and report["exit_code"] == 7 and report["reference"] == f"example_row.{module}:taps"
    assert "taps" not in report and "classification" not in report


OWN_MODULE_AT_CALL = '''"""A reference whose own project module is missing: the project's error, not a package to install."""


def taps(config, weights, ids, dtype, feed=None):
    import example_row.no_such_helper  # noqa: F401
'''


@pytest.mark.parametrize("against, said", [
    ("example_row.no_such_reference:taps", "cannot import module 'example_row.no_such_reference'"),
    ("example_row.own_module_reference:taps", "ModuleNotFoundError: No module named 'example_row.no_such_helper'"),
])
def test_a_module_the_project_lacks_is_an_error_not_a_skip(example: Example, against: str, said: str) -> None:
    toy(example).write("example_row/own_module_reference.py", OWN_MODULE_AT_CALL)
    result, _ = diverge(example, "--against", against)
    assert result.code == 3, result.text
    assert said in result.err and "skipped" not in result.err
