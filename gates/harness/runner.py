"""Run gate files through pytest in-process and collect one ItemResult per gate item."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gates.harness.verdicts import ItemResult

MARKER_EXPRESSIONS = {"all": None, "cpu": "cpu", "gpu": "gpu", "dist": "dist"}


@dataclass(eq=False)
class ResultCollector:
    """A pytest plugin object that records gate items' outcomes and any collection error."""

    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    collection_errors: list[str] = field(default_factory=list)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors.append(f"{report.nodeid or '<session>'}: {report.longreprtext.strip()[:2000]}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if "gate_row" not in props:
            return
        entry = self.items.setdefault(report.nodeid, {"props": props, "outcome": "passed", "detail": "", "duration": 0.0})
        entry["props"] = props
        entry["duration"] += report.duration
        if report.skipped:
            longrepr = report.longrepr
            entry["outcome"] = "skipped"
            reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
            entry["detail"] = reason.removeprefix("Skipped: ")
        elif report.failed:
            is_error = report.when != "call" or bool(props.get("gate_error"))
            entry["outcome"] = "error" if is_error else "failed"
            entry["detail"] = report.longreprtext.strip().splitlines()[0][:300] if report.longreprtext.strip() else report.when

    def results(self) -> list[ItemResult]:
        out = []
        for nodeid, entry in self.items.items():
            props = entry["props"]
            out.append(ItemResult(
                nodeid=nodeid, row=str(props["gate_row"]), gate=str(props["gate_id"]), milestone=str(props.get("gate_milestone", "")),
                kind=str(props.get("gate_kind", "")), name=nodeid.rsplit("::", 1)[-1], outcome=entry["outcome"],
                checks=int(props.get("gate_checks", 0) or 0),
                detail=str(props.get("gate_rejected_by", "")) if entry["outcome"] == "passed" else entry["detail"],
                duration=round(entry["duration"], 6)))
        return out


@dataclass(frozen=True)
class PytestRun:
    exit_code: int
    items: list[ItemResult]
    collection_errors: list[str]


def run_pytest(root: Path, files: list[Path], marker: str = "all", junit: str | None = None, profile: str | None = None,
               audit: bool = False, quiet: bool = True, extra: list[str] | None = None) -> PytestRun:
    """Run the given gate files; return pytest's exit code and the gate items' outcomes."""
    # the `gates` package is already imported by the CLI, so pytest cannot rewrite its asserts: say nothing about it
    args = [str(f) for f in files] + ["--rootdir", str(root), "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    expression = MARKER_EXPRESSIONS[marker]
    if expression:
        args += ["-m", expression]
    if junit:
        args.append(f"--junitxml={junit}")
    if profile:
        args.append(f"--hypothesis-profile={profile}")
    if audit:
        args.append("--gates-audit")
    if quiet:
        args += ["-q", "--no-header", "-rfE"]
    args += extra or []
    collector = ResultCollector()
    code = pytest.main(args, plugins=[collector])
    return PytestRun(int(code), collector.results(), collector.collection_errors)
