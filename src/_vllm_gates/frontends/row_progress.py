"""The progress of `gates audit` and of a shard run (docs/mutation.md, "Progress"): a pytest plugin that keeps one
line per row (its items done of total, passed, failed and skipped so far, the rate and an ETA), redrawn in place on a
terminal, where pytest's own per-item letters are left out; a plain line now and then when the output is not one."""
from __future__ import annotations

import sys
from collections.abc import Generator
from typing import Any, TextIO

import pytest

from _vllm_gates.results.progress import Progress
from _vllm_gates.run.items import GateItem


class RowProgress:
    """One Progress per row, in the order the rows' items run; a row's line is kept when its last item ends."""

    def __init__(self, stream: TextIO | None = None, live: bool | None = None):
        self.stream = stream or sys.stdout
        self.live = bool(getattr(self.stream, "isatty", lambda: False)()) if live is None else live
        self.row_of: dict[str, str] = {}  # node id -> row
        self.totals: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self.failed: set[str] = set()  # node ids with a failing phase
        self.skipped: set[str] = set()  # node ids skipped in a phase
        self.current: tuple[str, Progress] | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            row = item.identity.row if isinstance(item, GateItem) else "other tests"
            self.row_of[item.nodeid] = row
            self.totals[row] = self.totals.get(row, 0) + 1

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        """A row's clock starts with its first item."""
        row = self.row_of.get(nodeid)
        if row is not None:
            self._progress(row)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = self.row_of.get(report.nodeid)
        if row is None:
            return
        if report.failed:
            self.failed.add(report.nodeid)
        elif report.skipped:
            self.skipped.add(report.nodeid)
        if report.when != "teardown":
            return
        outcome = "failed" if report.nodeid in self.failed else "skipped" if report.nodeid in self.skipped else "passed"
        counts = self.counts.setdefault(row, {"passed": 0, "failed": 0, "skipped": 0})
        counts[outcome] += 1
        self.done[row] = self.done.get(row, 0) + 1
        progress = self._progress(row)
        progress.update(self.done[row], counts)
        if self.done[row] == self.totals[row]:
            progress.close(keep=True)
            self.current = None

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Generator[None, Any, Any]:
        """On a terminal the live line stands for pytest's per-item letters: they are left out (not the counts)."""
        result = yield
        if self.live and isinstance(result, tuple) and len(result) == 3 and report.nodeid in self.row_of:
            return (result[0], "", result[2])
        return result

    def _progress(self, row: str) -> Progress:
        if self.current is None or self.current[0] != row:
            if self.current is not None:
                self.current[1].close(keep=True)
            self.current = (row, Progress(row, self.totals[row], noun="items", stream=self.stream, live=self.live))
        return self.current[1]
