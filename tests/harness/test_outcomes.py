"""Skip causes are data (issue 27, item 1): the verdict and the exit code read the cause an item carries, never its
text, and a cause survives the plain-data round trip xdist puts it through."""
from __future__ import annotations

import pytest

from _vllm_gates.results.outcomes import ItemOutcome, NotImplementedBy, RequirementUnmet, from_data, to_data
from _vllm_gates.results.verdicts import ClaimResult, ItemResult, RowReport, RunReport, Verdict, gate_verdict
from _vllm_gates.run.exitcodes import ExitCode, exit_code

pytestmark = pytest.mark.cpu


def _skipped(name: str, cause: object, kind: str = "case", detail: str | None = None) -> ItemResult:
    text = detail if detail is not None else cause.text()  # type: ignore[attr-defined]
    return ItemResult(f"g.yaml::R::g::{name}", "R", "g", "M1", kind, name, ItemOutcome.SKIPPED, reason=text,
                      cause=cause)  # type: ignore[arg-type]


@pytest.mark.parametrize("cause", [RequirementUnmet("gpu", "cuda", "no CUDA device"), NotImplementedBy("cpp", "no 'kv-plan'")])
def test_a_cause_survives_the_plain_data_round_trip(cause):
    data = to_data(cause)
    assert all(isinstance(value, str) for value in data.values())
    assert from_data(data) == cause


def test_not_implemented_is_read_from_the_cause_not_from_a_sentence_that_looks_like_it():
    lookalike = _skipped("c1", None, detail="not implemented by 'cpp': written by a user's own skip")
    assert gate_verdict([lookalike], True)[0] is Verdict.SKIPPED
    absent = [_skipped("c1", NotImplementedBy("cpp", "no 'kv-plan'")), _skipped("c2", None, detail="other")]
    assert gate_verdict(absent, True) == (Verdict.NOT_IMPLEMENTED, "not implemented by 'cpp': 1 of 2 cases (first c1: no 'kv-plan')")


def _report(items: list[ItemResult]) -> RunReport:
    claim = ClaimResult("R", None, "DONE", Verdict.SKIPPED, True, "")
    return RunReport((RowReport("R", "title", claim, (), ()),), tuple(items))


def test_nothing_could_run_here_only_for_items_skipped_for_an_unmet_requirement():
    unmet = RequirementUnmet("gpu", "cuda", "no CUDA device")
    assert exit_code(_report([_skipped("c1", unmet)])) is ExitCode.NOT_RUNNABLE
    lookalike = _skipped("c1", None, detail=unmet.text())  # the same words, from a skip of the user's own
    assert exit_code(_report([lookalike])) is ExitCode.EMPTY
