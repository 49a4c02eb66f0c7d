"""The run's own passes over its report (README, "Verdicts"): each row's operation count (implemented) and, for a
claim missed only for want of operations, the claims entry to add; a row line for gate files no roadmap row names,
and a partial selection judged on what it selected (partial)."""
from __future__ import annotations

from typing import Any

from _vllm_gates.run.features import Judging, ReportPass, hookimpl


def _counted(report: Any, judging: Judging) -> Any:
    """Each row's operations implemented: what its worker listed in this run, else on evidence."""
    from _vllm_gates.run.implemented import with_operation_counts

    run = judging.run
    return with_operation_counts(report, run.gate_files, run.impl, {**judging.answered, **run.answered})


def _claims_hints(report: Any, judging: Judging) -> Any:
    """A claim another port misses only for want of operations names the claims key that states its own."""
    from _vllm_gates.run.implemented import with_claims_hints

    return with_claims_hints(report, judging.run.impl)


def _unknown_rows(report: Any, judging: Judging) -> Any:
    from _vllm_gates.results.verdicts import with_unknown_rows

    return with_unknown_rows(report, {row: message for row, message in judging.run.broken.items()
                                      if judging.roadmap.row(row) is None})


def _partial(report: Any, judging: Judging) -> Any:
    if judging.partial is None:
        return report
    from _vllm_gates.run.partial import judge_partial

    return judge_partial(report, judging.partial)


@hookimpl
def gates_report_passes() -> list[ReportPass]:
    return [ReportPass(200, "operation counts", _counted),
            ReportPass(250, "claims hints", _claims_hints), ReportPass(500, "unknown rows", _unknown_rows),
            ReportPass(600, "partial selection", _partial)]
