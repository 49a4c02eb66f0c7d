"""Evidence from earlier runs (docs/evidence.md): `--evidence F` (pytest: `--gates-evidence F`) read once, the gates
it covers under today's fingerprints put into the scope before the verdicts, and each gate's fingerprint and
device added to the report (its evidence for later runs)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from _vllm_gates.run.features import Judging, ReportPass, RunOption, hookimpl

EVIDENCE = RunOption("evidence", "an earlier run's --json report (another machine's): its gates count where their "
                                 "fingerprint matches the tree now (repeatable)", metavar="F", repeat=True,
                     narrows="counts earlier reports toward the verdicts")


@hookimpl
def gates_add_options() -> list[RunOption]:
    return [EVIDENCE]


@hookimpl
def gates_plan_run(plan: Any, args: Any, project: Any) -> Any:
    """`gates run` reads the files once, before anything runs, and hands them over (a file that cannot be used:
    a usage error naming it)."""
    from _vllm_gates.run.evidence import EvidenceError, load_evidence_files

    try:
        return replace(plan, evidence=tuple(load_evidence_files(getattr(args, EVIDENCE.dest), absolute=True)))
    except EvidenceError as error:
        raise plan.refused(str(error)) from None


@hookimpl
def gates_run_values(config: Any, handed: Any, worker: bool) -> dict[str, Any]:
    """The evidence `gates run` handed over; else the --gates-evidence files (an xdist worker judges nothing)."""
    if handed is not None:
        return {"evidence": list(handed.evidence)}
    if worker:
        return {"evidence": []}
    import pytest

    from _vllm_gates.run.evidence import EvidenceError, load_evidence_files

    try:
        return {"evidence": load_evidence_files(list(config.getoption(EVIDENCE.pytest_dest) or ()))}
    except EvidenceError as error:
        raise pytest.UsageError(str(error)) from None


@hookimpl
def gates_before_verdicts(judging: Judging) -> None:
    """A partial selection judges what it ran, on nothing else; a whole run counts the evidence its fingerprints match."""
    if judging.partial is not None:
        return
    from _vllm_gates.run.evidence import assess, fill_evidence
    from _vllm_gates.run.implemented import answered_on_evidence

    assessed = assess(judging.run.evidence, judging.fingerprints, judging.run.impl)
    fill_evidence(judging.scope, assessed)
    judging.answered.update(answered_on_evidence(assessed))


def _offered(report: Any, judging: Judging) -> Any:
    return replace(report, evidence_offered=bool(judging.run.evidence) and judging.partial is None)


def _fingerprinted(report: Any, judging: Judging) -> Any:
    from _vllm_gates.run.evidence import with_fingerprints

    run = judging.run
    return with_fingerprints(report, judging.fingerprints, run.device, run.needs_device, judging.scope.simulated)


@hookimpl
def gates_report_passes() -> list[ReportPass]:
    return [ReportPass(300, "evidence offered", _offered), ReportPass(400, "fingerprints", _fingerprinted)]
