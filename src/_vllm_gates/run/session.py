"""One gate run inside a pytest session: what was collected and selected, each item's result, and the verdicts.

The plugin feeds it; at the end it judges every row in scope, writes the reports, adds the claims to JUnit and
decides the exit status (README, "Verdicts" and "Exit codes").
"""
from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from _vllm_gates.base.errors import Problem
from _vllm_gates.definitions.claims import claimed_roadmap
from _vllm_gates.definitions.config import Config
from _vllm_gates.definitions.model import GateFile, Roadmap
from _vllm_gates.definitions.project import Project
from _vllm_gates.results.outcomes import ItemOutcome, SkipCause
from _vllm_gates.results.records import ItemIdentity, ItemRecord, ItemResult
from _vllm_gates.results.reports import junit_claims, markdown, table, tolerance_properties, write_atomic, write_json
from _vllm_gates.results.verdicts import RunReport, Scope, build_report, with_unknown_rows
from _vllm_gates.run.audit import audit_lines, audit_table
from _vllm_gates.run.evidence import Device, GateEvidence, environment, this_device
from _vllm_gates.run.exitcodes import ExitCode, SessionEnd, exit_code
from _vllm_gates.run.features import Judging, gathered, report_passes
from _vllm_gates.run.fingerprints import Fingerprinter, GateFingerprint
from _vllm_gates.run.items import RECORD, SKIP_CAUSE, GateItem
from _vllm_gates.run.mutation_claims import MutationEvidence
from _vllm_gates.run.partial import selection
from _vllm_gates.run.profiles import RunSeed, current_profile_name
from _vllm_gates.workers.worker_pool import WorkerPool

_WORKER_HEADER = re.compile(r"\[gw[0-9]+\] .* -- Python ")  # the line xdist puts before a worker's failure text


def without_worker_header(lines: list[str]) -> list[str]:
    """A failure's lines without the ``[gw1] linux -- Python 3.11.7 ...`` line an xdist worker's report starts with."""
    return lines[1:] if lines and _WORKER_HEADER.match(lines[0]) else lines


@dataclass(eq=False)
class GateRun:
    """State of one session's gate run; ``finish`` turns it into verdicts, reports and an exit status. Only this
    module writes its fields (its methods below); a feature keeps its own state in ``stash`` (features.py)."""

    snapshot: Project  # the project's definitions, loaded once for the whole run (project.py)
    pool: WorkerPool = None  # type: ignore[assignment]  # every gate run that collects has one (plugin); a run judged from evidence has none
    audit: bool = False
    requested_rows: tuple[str, ...] | None = None
    json_path: str | None = None
    markdown_path: str | None = None
    junit_path: str | None = None  # only where pytest does not run (pytest writes its own --junitxml)
    meta: dict[str, Any] = field(default_factory=dict)
    collected_files: set[Path] = field(default_factory=set)
    gate_files: dict[str, GateFile] = field(default_factory=dict)
    row_files: dict[str, str] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)
    selected: list[ItemIdentity] = field(default_factory=list)
    selected_items: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # the names of each gate's selected items
    deselected: int = 0
    declared: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # the manifest: items of each gate
    gate_markers: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    markexpr: str = ""
    collect_only: bool = False  # --collect-only: nothing is judged, so a shared checker's word stands for targets
    items_left: dict[str, int] = field(default_factory=dict)  # selected items not yet run, by the gate file answering them
    interrupted: str | None = None
    other_failures: int = 0
    summary: str = ""
    report: RunReport | None = None
    started: float = field(default_factory=time.time)
    impl: str = "python"
    answered: dict[str, frozenset[str]] = field(default_factory=dict)  # by row: the operations its external worker listed
    impl_problems: list[Problem] = field(default_factory=list)  # why the implementation cannot be used: its gates are ERROR
    impl_reported: bool = False  # those problems have their one item in this run (each gate points at it)
    not_run_why: str = ""  # why gates outside this run did not run, when it is not a marker filter
    evidence: list[GateEvidence] = field(default_factory=list)  # from --gates-evidence files
    mutation: MutationEvidence | None = None  # `gates verdict --mutation`: milestones' `mutation:` judged on it (None: not judged)
    device: Device = field(default_factory=lambda: Device("unknown"))
    seed: RunSeed | None = None  # the run seed of profiles that are not derandomized (profiles.RunSeed)
    notes: list[str] = field(default_factory=list)  # said once, under the row table (the example database, examples_db)
    stash: pytest.Stash = field(default_factory=pytest.Stash)  # each feature's own state, by its key
    _results: dict[str, ItemResult] = field(default_factory=dict)  # by node id, folded as its phases arrive
    _fingerprints: dict[tuple[str, str], GateFingerprint] | None = None

    @property
    def project(self) -> Config:
        """The project's configuration (of the run's snapshot)."""
        return self.snapshot.config

    def roadmap(self) -> tuple[Roadmap | None, list[Problem]]:
        """The roadmap of the run's snapshot, or the problems that kept it from loading."""
        return self.snapshot.roadmap_or_problems

    def tell(self, note: str) -> None:
        """Say ``note`` once, under the row table."""
        self.notes.append(note)

    def note_meta(self, key: str, value: Any) -> None:
        """Record ``value`` under ``key`` in the JSON report's `meta`."""
        self.meta[key] = value

    def interrupt(self, why: str, override: bool = False) -> None:
        """The run is stopped by signal ``why``: the first one stands, unless ``override`` (SIGTERM, the stronger)."""
        if override or self.interrupted is None:
            self.interrupted = why

    def implementation_unusable(self, problems: list[Problem]) -> None:
        """Why the run's implementation cannot be used: its gates are ERROR, each pointing at one item saying so."""
        self.impl_problems = problems

    def report_implementation_once(self) -> bool:
        """Whether the item reporting the implementation's problems is still to be yielded (then it is, once)."""
        if not self.impl_problems or self.impl_reported:
            return False
        self.impl_reported = True
        return True

    def collected(self, path: Path) -> None:
        """A gate file of a row of this run was collected."""
        self.collected_files.add(path)

    def file_broken(self, row: str, message: str) -> None:
        """Row ``row``'s gate file does not load (or is its second one): the row is ERROR, saying why."""
        self.broken[row] = message

    def take_gate_file(self, gate_file: GateFile) -> str | None:
        """Record the row's gate file; where another file of the row came first, record nothing and return its path."""
        first = self.row_files.setdefault(gate_file.row, gate_file.path)
        if first != gate_file.path:
            return first
        self.gate_files[gate_file.row] = gate_file
        return None

    def operations_listed(self, row: str, operations: frozenset[str]) -> None:
        """The operations the external implementation's worker for the row's gate file answers."""
        self.answered[row] = operations

    def gate_collected(self, key: tuple[str, str], names: list[str], markers: tuple[str, ...]) -> None:
        """A gate's manifest: the names of the items it declares, and its markers."""
        self.declared[key] = names
        self.gate_markers[key] = markers

    def count_deselected(self, count: int) -> None:
        self.deselected += count

    def selection_made(self, items: list[GateItem], worker_files: Iterable[str]) -> None:
        """The gate items selected to run, and the gate file whose workers answer each item that has one."""
        self.selected = [item.identity for item in items]
        for item in items:
            self.selected_items.setdefault((item.identity.row, item.identity.gate), set()).add(item.name)
        for where in worker_files:
            self.items_left[where] = self.items_left.get(where, 0) + 1

    def item_done(self, where: str) -> bool:
        """One item answered by gate file ``where``'s workers ended; whether it was the file's last selected one."""
        if where not in self.items_left:
            return False
        self.items_left[where] -= 1
        if self.items_left[where] > 0:
            return False
        del self.items_left[where]
        return True

    def keep_workers(self) -> None:
        """No gate file's workers end as its items end (`gates mutate` runs the items again for each mutant)."""
        self.items_left.clear()

    def other_failure(self) -> None:
        """A test that is not a gate item failed (or a gate item whose xdist worker died before it could report)."""
        self.other_failures += 1

    def merge_worker(self, found: dict[str, Any]) -> None:
        """Fold one xdist worker's collection (xdist_run.manifest) into the controller's run (every worker collects
        the same items); the gate files it names come from the run's snapshot, each loaded once in this process."""
        from _vllm_gates.base.errors import DefinitionError

        self.collected_files.update(Path(p) for p in found["collected_files"])
        self.broken.update({row: why for row, why in found["broken"].items() if row not in self.broken})
        for row, operations in found["answered"].items():
            self.answered.setdefault(row, frozenset(operations))
        for row, gate, names in found["declared"]:
            self.declared.setdefault((row, gate), list(names))
        for row, gate, markers in found["gate_markers"]:
            self.gate_markers.setdefault((row, gate), tuple(markers))
        for row, gate, names in found["selected"]:  # each worker selects the same items (it collects them all)
            self.selected_items.setdefault((row, gate), set()).update(names)
        self.interrupted = self.interrupted or found["interrupted"]
        self.meta.setdefault("profile", found["profile"])  # the Hypothesis profile the items ran under, not the controller's
        if "drawn" not in self.meta:  # the run seed (the controller's, pytest_configure_node) under the workers' profile
            self.meta["seed"], self.meta["drawn"] = found["drawing"]
        roadmap, _ = self.roadmap()
        for row, path in found["row_files"].items():
            if row in self.gate_files or row in self.broken or roadmap is None:
                continue
            self.row_files[row] = path
            try:
                self.gate_files[row] = self.snapshot.run_gate_file(self.project.root / path)
            except DefinitionError as error:  # changed on disk since the worker read it
                self.broken[row] = str(error)

    def record(self, item: pytest.Item, report: pytest.TestReport) -> None:
        """Fold one phase's report into the item's result; other tests only count when they fail."""
        if not isinstance(item, GateItem):
            if report.failed:
                self.other_failure()
            return
        self.fold(item.nodeid, item.identity, item.stash.get(RECORD, None), item.stash.get(SKIP_CAUSE, None), report)

    def fold(self, nodeid: str, identity: ItemIdentity, found: ItemRecord | None, cause: SkipCause | None,
             report: pytest.TestReport) -> None:
        """Fold one phase's report of a gate item into its result (here, or sent by an xdist worker); ``cause``: why
        the item skips, when it does for a reason of ours (the report's reason is then its text)."""
        entry = self._results.get(nodeid) or ItemResult.begun(nodeid, identity)
        entry = replace(entry, duration=entry.duration + report.duration, record=found if found is not None else entry.record)
        if report.skipped:
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
            entry = replace(entry, outcome=ItemOutcome.SKIPPED, cause=cause,
                            reason=cause.text() if cause is not None else reason.removeprefix("Skipped: "))
        elif report.failed:
            harness_error = report.when != "call" or (found is not None and found.harness_error)
            lines = without_worker_header(report.longreprtext.strip().splitlines())
            entry = replace(entry, outcome=ItemOutcome.ERROR if harness_error else ItemOutcome.FAILED,
                            reason=lines[0][:300] if lines else report.when)
        self._results[nodeid] = entry

    def results(self) -> list[ItemResult]:
        return list(self._results.values())

    def scope(self, roadmap: Roadmap) -> list[str]:
        """Rows this run judges: those asked for; else every row when every gate file was collected; else the collected."""
        if self.requested_rows is not None:
            return list(self.requested_rows)
        every = {p.resolve() for p in self.project.gate_files()}
        collected = set(self.gate_files) | set(self.broken)
        known = [r.id for r in roadmap.rows]
        if every and every <= self.collected_files:
            return known + [row for row in self.broken if row not in known]
        return [row for row in known if row in collected] + [row for row in self.broken if row not in known]

    def judge(self) -> RunReport:
        roadmap, problems = self.roadmap()
        items = self.results()
        if roadmap is None:
            message = "\n".join(str(p) for p in problems)
            rows = sorted({i.row for i in items})
            return with_unknown_rows(RunReport((), tuple(items)), {row: message for row in rows})
        rows = self.scope(roadmap)
        in_run = self.gates_in_run()
        partial = self.partial_selection()
        done = {(i.row, i.gate, i.name) for i in items}
        wanted = self.declared if partial is None else \
            {key: [name for name in names if name in self.selected_items.get(key, ())] for key, names in self.declared.items()}
        missing = {key: tuple(name for name in names if (*key, name) not in done) for key, names in wanted.items() if key in in_run}
        fingerprints = self.fingerprints(roadmap, rows)
        why = self.not_run_why or (f"deselected by -m {self.markexpr!r}" if self.markexpr else "not collected in this run")
        scope = Scope(rows, in_run | {(i.row, i.gate) for i in items}, why,
                      simulated={key for key, markers in self.gate_markers.items() if self.device.simulated and self.needs_device(markers)},
                      parity_marker=self.project.parity_marker(), device_markers=self.project.device_markers)
        implementation = self.project.implementation(self.impl)
        claimed = claimed_roadmap(roadmap, self.impl, implementation.claims if implementation else ())
        judging = Judging(self, roadmap, claimed, scope, partial, fingerprints, {})
        gathered("gates_before_verdicts", judging=judging)  # the features' additions to the scope (evidence)
        report = build_report(claimed, list(self.gate_files.values()), items, dict(self.broken), scope,
                              {key: names for key, names in missing.items() if names})
        for step in report_passes():  # in their declared order (features.report_passes)
            report = step.apply(report, judging)
        return report

    def partial_selection(self) -> dict[tuple[str, str], Any] | None:
        """The gates a run that selected part of its rows (-k, node ids) selected, how much of each; None for a run
        of whole rows (every item of every gate its marker expression keeps), judged as ever (partial.py)."""
        if not self.collected_files:  # nothing collected here (gates verdict, a run without gate files)
            return None
        keeps = self._marker_filter()
        gates = {(gf.row, gate.id): keeps(gate.markers) for gf in self.gate_files.values() for gate in gf.gates}
        gates.update({(row, "<file>"): keeps(self.project.marker_names) for row in self.broken})
        return selection(gates, self.declared, self.selected_items)

    def fingerprints(self, roadmap: Roadmap, rows: list[str]) -> dict[tuple[str, str], GateFingerprint]:
        """The fingerprint of every gate of the rows in scope, as the tree is now."""
        if self._fingerprints is None:
            maker = Fingerprinter(self.project, self.impl)
            self._fingerprints = {(gf.row, gate.id): maker.gate(gf, gate, roadmap.row(gf.row))
                                  for gf in self.gate_files.values() if gf.row in rows for gate in gf.gates}
        return self._fingerprints

    def needs_device(self, markers: tuple[str, ...]) -> bool:
        """A marker of these requires a device (on a simulated device, their gates' PASS backs no claim)."""
        return not self.project.device_markers.isdisjoint(markers)

    def gates_in_run(self) -> set[tuple[str, str]]:
        """Gates whose markers the run's -m expression selects (all without one): each of their items must run."""
        if not self.markexpr:
            return set(self.declared)
        keeps = self._marker_filter()
        return {key for key, markers in self.gate_markers.items() if keeps(markers)}

    def _marker_filter(self) -> Any:
        """Whether the run's -m expression keeps an item with these markers (every one without an expression)."""
        if not self.markexpr:
            return lambda markers: True
        from _vllm_gates.run.pytest_compat import marker_expression

        return marker_expression(self.markexpr)

    def finish(self, config: pytest.Config | None, pytest_status: int) -> int:
        """Judge the run, write its reports and return the session's exit status (config None: pytest did not run)."""
        if self.audit:
            lines = audit_lines(self.results())
            self.summary = f"{audit_table(lines)}\n\naudit exit {int(exit_code(lines))}"
            return int(exit_code(lines, self._session_end(pytest_status)))
        self.device = this_device()
        report = self.judge()
        self.report = report
        code = int(exit_code(report, self._session_end(pytest_status)))
        if code == ExitCode.OK and self.meta.get("unproven_shards"):  # a shard missing proves nothing: never green
            code = int(ExitCode.UNPROVEN)
        seed, drawn = self.drawing() if report.items else (None, "")  # how the examples were drawn (the seed, printed)
        ending = f"{report.checks} checks in {time.time() - self.started:.1f}s; exit {code}"
        sandbox = self.pool.spec.sandbox if self.pool is not None else None  # told once where it does not confine
        unconfined = [sandbox.note] if sandbox is not None and sandbox.note else []
        self.summary = "\n".join([table(report), "", *([drawn] if drawn else []), *unconfined, *self.notes, ending])
        self.meta["sandbox"] = (sandbox.note or "landlock") if sandbox is not None else None
        if self.nothing_affected():
            code = int(exit_code(report, self._session_end(pytest_status, nothing_affected=True)))
            self.summary = f"no row is affected by changes since {self.meta['changed_since']}: nothing to gate"
            self.meta["nothing_affected"] = True
        if config is not None:
            _add_claims_to_junit(config, report)
        elif self.junit_path:
            write_atomic(Path(self.junit_path), junit_claims(report))
        meta = {"markexpr": self.markexpr or self.meta.get("markexpr", ""), "interrupted": self.interrupted, "rows": [r.row for r in report.rows],
                "profile": current_profile_name(), "seed": seed, "selection": "partial" if report.partial else "whole rows",
                **{key: value for key, value in self.meta.items() if key not in ("seed", "drawn")}}
        if self.json_path:
            write_json(Path(self.json_path), report, code, meta, self.evidence_record())
        if self.markdown_path:
            write_atomic(Path(self.markdown_path), markdown(report, code) + (f"\n{drawn}\n" if drawn else ""))
        return code

    def drawing(self) -> tuple[str | None, str]:
        """The run seed the gate items drew from (None: derandomized) and the summary's line on it; an xdist
        controller's are those its workers sent (its own profile is not theirs)."""
        from _vllm_gates.run.profiles import derandomized

        if "drawn" in self.meta:
            return self.meta["seed"], self.meta["drawn"]
        if self.seed is None:
            return None, ""
        return (None if derandomized() else self.seed.value), self.seed.describe(current_profile_name())

    def nothing_affected(self) -> bool:
        """--changed-since found no affected row: a green run that judged nothing, and its reports say so."""
        return self.requested_rows == () and bool(self.meta.get("changed_since"))

    def evidence_record(self) -> dict[str, Any]:
        """The run-wide part of the evidence in its JSON report: what was judged, where, and every input's hash."""
        from vllm_gates import __version__

        inputs: dict[str, str] = {}
        for fingerprint in (self._fingerprints or {}).values():
            inputs.update(fingerprint.inputs)
        return {"impl": self.impl, "harness": __version__, "device": asdict(self.device), "simulated": self.device.simulated,
                "environment": environment(), "inputs": dict(sorted(inputs.items())), "from": sorted({e.source for e in self.evidence})}

    def _session_end(self, pytest_status: int, nothing_affected: bool = False) -> SessionEnd:
        """How the session ended, for the exit code beside the verdicts."""
        return SessionEnd(bool(self.interrupted), pytest_status, self.other_failures, nothing_affected)


def _add_claims_to_junit(config: pytest.Config, report: RunReport) -> None:
    """One JUnit test case per row and milestone claim, so CI that reads JUnit sees what the row table says."""
    from _vllm_gates.run.pytest_compat import junit_writer

    write = junit_writer(config)
    if write is None:
        return
    for row in report.rows:
        for claim in (c for c in (*row.milestones, row.claim) if c.judged):  # a partial selection judges none
            name = f"{row.row}::{claim.milestone or '(row)'}::claim[{claim.claimed}]"
            outcome = "passed" if claim.claim_met else "failed"
            longrepr = None if claim.claim_met else f"{claim.verdict.value}: {claim.reason}"
            properties = tolerance_properties(report, row.row, claim.milestone)
            for when, result in (("call", outcome), ("teardown", "passed")):
                write(pytest.TestReport(
                    nodeid=f"vllm-gates::{name}", location=("vllm-gates", 0, name), keywords={}, outcome=result,  # type: ignore[arg-type]  # "passed" or "failed"
                    longrepr=longrepr if when == "call" else None, when=when, duration=0.0,  # type: ignore[arg-type]  # "call" or "teardown"
                    user_properties=properties if when == "teardown" else []))


def judge_without_items(project: Project, options: dict[str, Any]) -> int:
    """Judge rows where there is no gate file to collect: the same verdicts and reports, printed here."""
    run = GateRun(project, json_path=options.get("json"), markdown_path=options.get("markdown"), junit_path=options.get("junit"),
                  meta={"markexpr": options.get("markexpr", "")})
    if options.get("changed_since"):
        run.meta["changed_since"] = options["changed_since"]
    roadmap, _ = run.roadmap()
    rows = options.get("rows")
    if roadmap is not None:
        run.requested_rows = tuple(rows) if rows is not None else tuple(r.id for r in roadmap.rows)
    code = run.finish(None, pytest.ExitCode.NO_TESTS_COLLECTED)
    print(run.summary)
    return code


def judge_on_evidence(project: Project, evidence: list[GateEvidence], options: dict[str, Any]) -> int:
    """`gates verdict`: judge the claims of the rows asked for (all by default) from evidence alone, running nothing."""
    run = GateRun(project, json_path=options.get("json"), markdown_path=options.get("markdown"),
                  junit_path=options.get("junit"), evidence=evidence,
                  meta={"markexpr": "", "verdict_only": True, "unproven_shards": options.get("unproven_shards") or []},
                  impl=options.get("impl") or "python", mutation=options.get("mutation"))
    run.gate_files = {gf.row: gf for gf in project.gate_files}
    run.broken = {row: message for row, (_, message) in project.broken.items()}
    run.requested_rows = tuple(options.get("rows") or (r.id for r in project.roadmap.rows))
    run.not_run_why = "not run: `gates verdict` runs nothing"
    code = run.finish(None, pytest.ExitCode.OK)
    print(run.summary)
    return code
