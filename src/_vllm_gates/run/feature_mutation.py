"""Claims that require strength (docs/mutation.md): `--mutation F` (pytest: `--gates-mutation F`), a `gates mutate`
report, read once; a milestone stating `mutation: S` is DONE only where its row scored at least S on today's sources
(mutation_claims.judge_strength, the first pass over a run's report)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from _vllm_gates.run.features import Judging, ReportPass, RunOption, hookimpl

MUTATION = RunOption("mutation", "a `gates mutate` report: a milestone stating `mutation: S` is DONE only where its "
                                 "row scored at least S on today's sources (docs/reports.md)", metavar="F",
                     narrows="judges milestones on a mutation report")


def mutation_evidence(shown: str | None, refused: Callable[[str], Exception]) -> Any:
    """The report's rows (mutation_claims.load_mutation_evidence; None: an empty record, so a `mutation:` claim is
    refused and says so); ``refused(why)`` is raised, naming the file, where it cannot be used."""
    from _vllm_gates.run.mutation_claims import load_mutation_evidence
    from _vllm_gates.run.mutation_evidence import MutationEvidenceError

    try:
        return load_mutation_evidence(shown)
    except MutationEvidenceError as error:
        raise refused(str(error)) from None


@hookimpl
def gates_add_options() -> list[RunOption]:
    return [MUTATION]


@hookimpl
def gates_plan_run(plan: Any, args: Any, project: Any) -> Any:
    """Checked before anything runs (a report that cannot be used is a usage error), handed on absolute."""
    shown = getattr(args, MUTATION.dest)
    if not shown:
        return None
    mutation_evidence(shown, plan.refused)
    return replace(plan, pytest_args=plan.pytest_args + tuple(MUTATION.pytest_args(Path(shown).resolve())))


@hookimpl
def gates_run_values(config: Any, handed: Any, worker: bool) -> dict[str, Any] | None:
    """Without the option a run does not judge `mutation:` (None); an xdist worker judges nothing."""
    shown = config.getoption(MUTATION.pytest_dest)
    if not shown or worker:
        return None
    import pytest

    return {"mutation": mutation_evidence(shown, pytest.UsageError)}


def _judged(report: Any, judging: Judging) -> Any:
    """A whole run given a mutation report: each met DONE claim stating `mutation:` held against it."""
    run = judging.run
    if run.mutation is None or judging.partial is not None:
        return report
    from _vllm_gates.run.mutation_claims import judge_strength

    return judge_strength(report, judging.claimed, run.mutation, run.project.root)


@hookimpl
def gates_report_passes() -> list[ReportPass]:
    return [ReportPass(100, "mutation claims", _judged)]
