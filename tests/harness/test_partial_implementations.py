"""A port in progress (issue 26): examples it answers not-implemented are skipped and counted, never shrunk towards
nor replayed inconsistently; its crash on a generated input is a failing example; no report shows a traceback or
blames the gate for what the implementation did. On the example row, answered by tests/harness/external_worker.py."""
from __future__ import annotations

import re

import pytest

from tests.harness.test_implementations import _external

pytestmark = pytest.mark.cpu

TRACEBACK = re.compile(r"Traceback|FlakyFailure|ExceptionGroup|File \"|gate error")


def _run(example, mode: str):
    _external(example, mode)
    result, report = example.run_json("--impl", "fake", "--profile", "ci")
    items = {i["name"]: i for i in report["items"] if i["gate"] == "page-bytes"}
    return result, example.gate(report), items


def test_examples_not_implemented_are_counted_and_make_the_gate_not_implemented(example):
    result, gate, items = _run(example, "partial")
    assert result.code == 1, result.text
    assert gate["verdict"] == "NOT-IMPLEMENTED" and gate["cases_passed"] == 2, gate
    detail = items["properties"]["detail"]
    found = re.search(r"not implemented by 'fake': (\d+) of (\d+) generated examples were answered not-implemented; "
                      r"the other (\d+) agreed with the oracle", detail)
    assert found, detail
    skipped, total, agreed = map(int, found.groups())
    assert 0 < skipped < total and skipped + agreed == total
    assert items["properties"]["outcome"] == "skipped" and items["properties"]["checks"] == agreed == gate["examples"]
    assert gate["reason"] == detail  # the gate's reason carries the counts
    assert not TRACEBACK.search(result.text)


def test_a_property_whose_every_example_is_not_implemented_is_never_a_pass(example):
    result, gate, items = _run(example, "negatives-only")
    assert gate["verdict"] == "NOT-IMPLEMENTED", gate
    assert re.search(r"all \d+ generated examples were answered not-implemented", items["properties"]["detail"])
    assert items["negative-heads"]["outcome"] == "passed" and items["fp16-page"]["outcome"] == "skipped"
    assert not TRACEBACK.search(result.text)


def test_a_mismatch_among_implemented_examples_fails_shrunk_without_a_flaky_replay(example):
    """The issue's case: not-implemented for some inputs, wrong for others; Hypothesis replayed inconsistently."""
    result, gate, items = _run(example, "partial-wrong")
    assert result.code == 1, result.text
    assert gate["verdict"] == "FAIL" and items["properties"]["outcome"] == "failed", gate
    assert "properties: impl disagrees with the oracle on a generated input" in result.text
    assert "input : {block_size: 0, heads: 3, head_size: 0, dtype_bytes: 1}" in result.text  # shrunk to the least
    assert "(shrunk by hypothesis)" in result.text
    assert not TRACEBACK.search(result.text)


def test_an_implementation_that_answers_one_input_two_ways_fails_naming_it(example):
    """Hypothesis's FlakyFailure (the failure did not repeat on replay) is the implementation's FAIL, with the input."""
    result, gate, items = _run(example, "flaky-wrong")
    assert gate["verdict"] == "FAIL", gate
    assert items["properties"]["detail"].endswith("properties: impl disagrees with the oracle on a generated input")
    assert re.search(r"input +: \{[^}\n]*\bheads: 3[,}]", result.text), result.text  # the input it failed on, whichever
    assert "replayed: the same input did not fail the same way" in result.text
    assert not TRACEBACK.search(result.text)


def test_a_crash_on_a_generated_input_fails_the_properties_with_that_input(example):
    result, gate, items = _run(example, "sigfpe-for-5-heads")
    assert result.code == 1, result.text
    assert gate["verdict"] == "FAIL" and gate["cases_passed"] == 2, gate
    assert items["properties"]["detail"].endswith("properties: impl crashed: its worker was killed by SIGFPE")
    assert "heads: 5" in result.text and "last output: external worker: dividing by zero for" in result.text
    assert not TRACEBACK.search(result.text)
