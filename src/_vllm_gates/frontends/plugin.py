"""The pytest plugin, the one engine behind `pytest` and `gates`: collects gate files, judges rows when the run ends.

Registered by the `pytest11` entry (`pytest_entry.py`, which also declares the options) only where the rootdir's
pyproject.toml has a `[tool.vllm-gates]` table: then it registers the project's markers, collects its gate files into
items, records each item's outcome, and at the end of the session prints the row table, writes the reports, adds one
JUnit test case per claim and sets the exit status from the claims.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from _vllm_gates.base.errors import DefinitionError, Problem
from _vllm_gates.definitions.config import implementation_refused, load_config
from _vllm_gates.definitions.gatefile import peek_row_id
from _vllm_gates.definitions.impl_problems import before_run, not_started, pointer
from _vllm_gates.definitions.implementations import PYTHON, Implementation
from _vllm_gates.definitions.model import Gate, GateFile, TargetRef
from _vllm_gates.definitions.project import Project, second_gate_file
from _vllm_gates.definitions.requirements import unmet
from _vllm_gates.definitions.targets import resolve
from _vllm_gates.results.outcomes import NotImplementedBy
from _vllm_gates.run import xdist_run
from _vllm_gates.run.checks import ResolvedGate, Subject
from _vllm_gates.run.features import gathered, run_values
from _vllm_gates.run.items import (
    RECORD,
    RUN_SEED,
    SKIP_CAUSE,
    AuditItem,
    CaseItem,
    DefinitionErrorItem,
    GateItem,
    PropertiesItem,
    known_bad_items,
    known_good_items,
    link_runs,
)
from _vllm_gates.run.profiles import SEED_OPTION, RunSeed, register_profiles
from _vllm_gates.run.selection import Handover, RowsRefused, UnknownRow, requested_rows
from _vllm_gates.run.session import GateRun
from _vllm_gates.workers import lifeline
from _vllm_gates.workers.sandbox import explain_refusal, sandbox_for
from _vllm_gates.workers.worker_pool import WorkerLost, WorkerPool, WorkerSpec

_RUN = pytest.StashKey[GateRun]()


def gate_run(config: pytest.Config) -> GateRun | None:
    """The gate run of this session, or None where the project declares no gates."""
    return config.stash.get(_RUN, None)


@pytest.hookimpl(tryfirst=True)  # before hypothesis loads a --hypothesis-profile that may name ours
def pytest_configure(config: pytest.Config) -> None:
    handed = _handed_over(config)
    snapshot = handed.project if handed is not None else _snapshot(Path(config.rootpath))
    if snapshot is None:
        return
    project = snapshot.config
    implementation = _implementation(project, config.getoption("gates_impl"))
    path = [str(project.root)] + [str(Path(entry)) for entry in config.getini("pythonpath")]
    pool = WorkerPool(WorkerSpec(project.root, tuple(dict.fromkeys(path)), project.allowed_roots, project.worker_preload,
                                 external=implementation.command, settings=implementation.settings,
                                 max_buffer_bytes=project.max_tensor_bytes, sandbox=sandbox_for(project, implementation)),
                      budget_s=project.run_budget)
    changed_since = config.getoption("gates_changed_since")
    meta: dict[str, Any] = {"changed_since": changed_since} if changed_since else {}
    if handed is not None:  # `gates run` resolved them from its own arguments
        rows = handed.rows
        meta.update(handed.meta)
    else:
        rows = _requested_rows(snapshot, list(config.getoption("gates_row") or ()), changed_since)
    seed = RunSeed.choose(config.getoption(SEED_OPTION, default=None), getattr(config, "workerinput", {}).get(xdist_run.SEED_KEY))
    run = GateRun(snapshot, pool=pool, audit=bool(config.getoption("gates_audit")), impl=implementation.name, requested_rows=rows,
                  meta=meta, markexpr=config.option.markexpr or "", collect_only=bool(config.option.collectonly), seed=seed,
                  **run_values(config, handed, xdist_run.is_worker(config)))
    assert run.seed is not None  # chosen above, never None in a run the plugin makes
    config.stash[RUN_SEED] = run.seed
    config.stash[_RUN] = run
    gathered("gates_configure", run=run, config=config)  # each feature's state, in its own stash key
    if xdist_run.is_controller(config):
        config.pluginmanager.register(xdist_run.Controller(run), "vllm-gates-xdist")
    if xdist_run.is_worker(config):  # the controller's death ends this process and its workers (docs/worker-protocol.md §2.1)
        lifeline.current().elder = os.getppid()
    for marker in project.markers:
        config.addinivalue_line("markers", f"{marker.name}: {marker.help}")
    register_profiles()


def _handed_over(config: pytest.Config) -> Handover | None:
    """The snapshot and resolved options `gates run` handed this session (selection.Handover); None under plain pytest."""
    return next((plugin for plugin in config.pluginmanager.get_plugins() if isinstance(plugin, Handover)), None)


def _snapshot(root: Path) -> Project | None:
    """This process's snapshot of the project at pytest's rootdir; None where it declares no gates."""
    try:
        project = load_config(root)
    except DefinitionError as error:
        raise pytest.UsageError(f"vllm-gates configuration:\n{error}") from None
    return Project(project) if project is not None else None


def _implementation(project: Any, name: str | None) -> Implementation:
    """The implementation --gates-impl names (python when none); a usage error names the known ones."""
    refused = implementation_refused(project, "--gates-impl", name) if name else None
    if refused:
        raise pytest.UsageError(refused)
    return project.implementation(name or PYTHON)


def pytest_sessionstart(session: pytest.Session) -> None:
    run = gate_run(session.config)
    if run is not None and _may_collect_gate_files(session.config, run):
        if not xdist_run.is_controller(session.config):  # an xdist controller runs no item: its workers spawn
            run.pool.spawner()  # the fork server imports its preload modules while the judge collects
        implementation = run.project.implementation(run.impl)
        if implementation is not None:
            run.implementation_unusable(before_run(run.project, implementation))


def _may_collect_gate_files(config: pytest.Config, run: GateRun) -> bool:
    """Whether some argument of this session (a path, or a folder above one) holds a gate file of the project."""
    base = Path(config.invocation_params.dir)
    args = {(base / arg.split("::")[0]).resolve() for arg in config.args} or {base.resolve()}
    for path in (p.resolve() for p in run.project.gate_files()):  # one set lookup per folder, not per argument
        if path in args or not args.isdisjoint(path.parents):
            return True
    return False


def _requested_rows(snapshot: Project, rows: list[str], changed_since: str | None) -> tuple[str, ...] | None:
    """Rows named by --gates-row, narrowed by --gates-changed-since (selection.requested_rows); None: every collected row."""
    try:
        return requested_rows(snapshot, rows, changed_since)
    except UnknownRow as refused:
        raise pytest.UsageError(f"--gates-row: {refused} in {snapshot.config.roadmap}") from None
    except (RowsRefused, DefinitionError) as error:
        raise pytest.UsageError(f"--gates-changed-since {changed_since}: {error}") from None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    run = gate_run(parent.config)
    if run is None or file_path.suffix not in (".yaml", ".yml") or not run.project.is_gate_file(file_path):
        return None
    return GateFileNode.from_parent(parent, path=file_path)


class GateFileNode(pytest.File):
    """One row's gate file."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        run = gate_run(self.config)
        assert run is not None
        project = run.project
        row = peek_row_id(self.path)
        if run.requested_rows is not None and row not in run.requested_rows:
            return  # not a row of this run: its file yields nothing
        run.collected(self.path.resolve())
        every = project.marker_names
        common = {"row": row, "gate_id": "<file>", "milestone": "", "line": 1, "markers": every}
        yield from _implementation_error(self, run, common)
        _, roadmap_problems = run.roadmap()
        if roadmap_problems:
            yield DefinitionErrorItem.from_parent(self, name="roadmap", problems=roadmap_problems, **common)
            return
        try:
            gate_file = run.snapshot.run_gate_file(self.path)
        except DefinitionError as error:
            run.file_broken(row, str(error))
            yield DefinitionErrorItem.from_parent(self, name="definition", problems=error.problems, **common)
            return
        first = run.take_gate_file(gate_file)
        if first is not None:
            problem = second_gate_file(gate_file, first)
            run.file_broken(gate_file.row, str(problem))
            yield DefinitionErrorItem.from_parent(self, name="definition", problems=[problem], **common)
            return
        for broken in gate_file.broken_gates:  # ERROR, each at its own line; the file's other gates still run
            yield DefinitionErrorItem.from_parent(self, name=f"definition[{broken.id}]", problems=list(broken.problems),
                                                  **{**common, "gate_id": broken.id, "milestone": broken.milestone,
                                                     "line": broken.problems[0].location.line})
        operations = external_operations(run, gate_file) if run.pool.spec.external and not run.impl_problems else None
        if operations is not None and not run.impl_problems:
            run.operations_listed(gate_file.row, operations)
        yield from _implementation_error(self, run, {**common, "row": gate_file.row})
        if run.impl_problems:  # each gate points at the one error; none is resolved or run
            for gate in gate_file.gates:
                yield DefinitionErrorItem.from_parent(self, name=f"definition[{gate.id}]",
                                                      problems=[pointer(run.impl_problems, run.impl, gate.location)],
                                                      **{**common, "gate_id": gate.id, "milestone": gate.milestone,
                                                         "line": gate.location.line})
            return
        refused = check_targets(run, gate_file)
        for gate in gate_file.gates:
            try:
                if gate.id in refused:
                    raise DefinitionError(refused[gate.id])
                resolved = _resolve_gate(run, gate_file, gate, operations)
            except DefinitionError as error:
                yield DefinitionErrorItem.from_parent(self, name=f"definition[{gate.id}]", problems=error.problems,
                                                      **{**common, "gate_id": gate.id, "milestone": gate.milestone,
                                                         "line": error.problems[0].location.line})
                continue
            yield GateNode.from_parent(self, name=gate.id, row=gate_file.row, resolved=resolved, audit=run.audit)


def _implementation_error(node: GateFileNode, run: GateRun, common: dict[str, Any]) -> Iterator[pytest.Item]:
    """The one item of the run that reports why its implementation cannot be used, yielded by the first gate file
    collected once that is known (one error, not one per gate)."""
    if run.report_implementation_once():
        yield DefinitionErrorItem.from_parent(node, name=f"implementation[{run.impl}]", problems=list(run.impl_problems), **common)


CHECK_TIMEOUT = 300.0  # resolving a file's targets imports them (torch, a compiler run): more than one call may take
AUDIT_TARGET = "_vllm_gates.wire.standins:wrong_everywhere"
ROLES = ("impl", "oracle", "known-bad")


def _targets_by_role(gate_file: GateFile, unrunnable: frozenset[str] = frozenset()) -> dict[str, list[tuple[str, TargetRef, TargetRef | None]]]:
    """For each worker role, (key, target, impl whose signature it must have) of every gate of the file, but the
    gates carrying a marker in ``unrunnable`` (their items are skipped here; their targets may import what is absent)."""
    found: dict[str, list[tuple[str, TargetRef, TargetRef | None]]] = {role: [] for role in ROLES}
    for gate in gate_file.gates:
        if unrunnable & set(gate.markers):
            continue
        for key, ref in ((f"gate {gate.id}.impl", gate.impl), (f"gate {gate.id}.build", gate.build_impl)):
            if ref is not None:
                found["impl"].append((key, ref, None))
        for key, ref in ((f"gate {gate.id}.oracle", gate.oracle), (f"gate {gate.id}.build", gate.build_oracle)):
            if ref is not None:
                found["oracle"].append((key, ref, None))
        for what, entries in (("known_bad", gate.known_bad), ("known_good", gate.known_good)):  # one worker for both
            found["known-bad"] += [(f"gate {gate.id}.{what}.{entry.name}", entry.target, gate.impl) for entry in entries]
        if gate.build_impl is not None and (gate.known_bad or gate.known_good):
            found["known-bad"].append((f"gate {gate.id}.build", gate.build_impl, None))
    return found


def _unrunnable_markers(run: GateRun) -> frozenset[str]:
    """Markers requiring the pinned upstream release where it is not installed: their gates' targets (adapters that
    import vLLM) are not resolved at collection, and their items are skipped with the reason. Checking this reads
    package metadata only; CUDA is not asked here (it would import torch in the judge)."""
    wanting = [m for m in run.project.markers if m.requires is not None and m.requires.upstream]
    return frozenset(m.name for m in wanting) if wanting and unmet(wanting[0].requires, run.project) else frozenset()  # type: ignore[arg-type]


SHARED_CHECKER = "<collection checks>"  # the worker key of collection's shared checkers (no gate file has it)


def check_targets(run: GateRun, gate_file: GateFile) -> dict[str, list[Problem]]:
    """Have the workers resolve the file's targets (none is imported in the judge); the problems by gate id. An
    external implementation's impl worker is asked nothing here: its ready lists the operations it answers."""
    by_role = _targets_by_role(gate_file, _unrunnable_markers(run))
    if run.pool.spec.external:
        by_role["impl"] = []
    messages = {role: {"op": "check", "targets": [
        {"key": key, "target": ref.dotted, "anchor": ref.anchor, **({"signature_of": impl.dotted} if impl else {})}
        for key, ref, impl in entries]} for role, entries in by_role.items() if entries}
    replies, vouched = _checked_in_shared_workers(run, gate_file, messages)
    if not run.collect_only:
        for role in vouched:  # the shared checker's word is not enough to run on: each worker checks first
            run.pool.check_first((gate_file.path, role), messages[role], CHECK_TIMEOUT)
    return _check_problems(by_role, replies, lambda text: explain_refusal(run.pool.spec.sandbox, run.impl, text))


def _ask_by_role(run: GateRun, where: str, messages: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any] | WorkerLost]:
    found = run.pool.request_many({(where, role): message for role, message in messages.items()}, CHECK_TIMEOUT)
    return {role: reply for (_, role), reply in found.items()}


def _checked_in_shared_workers(run: GateRun, gate_file: GateFile, messages: dict[str, dict[str, Any]]
                               ) -> tuple[dict[str, dict[str, Any] | WorkerLost], list[str]]:
    """At collection one checker per role resolves every file's targets, so collecting starts no three workers per
    file; a role it finds any problem in, or could not answer, is checked again in the file's own worker, whose
    answer stands: another row's code in the shared checker cannot break a file. The replies by role, and the roles
    the shared checker alone vouched for (a run has each of their workers check them first, in its own process)."""
    shared = _ask_by_role(run, SHARED_CHECKER, messages)
    doubtful = [role for role, reply in shared.items()
                if isinstance(reply, WorkerLost) or "error" in reply or reply.get("result", {}).get("problems") != []]
    if doubtful:
        shared.update(_ask_by_role(run, gate_file.path, {role: messages[role] for role in doubtful}))
    return shared, [role for role in messages if role not in doubtful]


def _check_problems(by_role: dict[str, list[tuple[str, TargetRef, TargetRef | None]]],
                    replies: dict[str, dict[str, Any] | WorkerLost],
                    explain_impl: Callable[[str], str] = lambda text: text) -> dict[str, list[Problem]]:
    """The problems the check replies name, by gate id; a lost worker or a broken reply is a problem of each target.
    ``explain_impl`` adds to an impl problem what its sandbox refused (sandbox.explain_refusal)."""
    problems: dict[str, list[Problem]] = {}
    for role, reply in replies.items():
        refs = {key: ref for key, ref, _ in by_role[role]}
        if isinstance(reply, WorkerLost) or "error" in reply:
            text = str(reply) if isinstance(reply, WorkerLost) else str(reply["error"].get("message"))
            for key, ref in refs.items():
                problems.setdefault(key.split(".")[0].removeprefix("gate "), []).append(
                    Problem(ref.location, key, f"the {role} worker could not resolve the targets: {text}"))
            continue
        for entry in reply.get("result", {}).get("problems", []):
            named = refs.get(written) if isinstance(entry, dict) and isinstance(written := entry.get("key"), str) else None
            if named is None:  # a problem about a target the judge never named: the worker is broken
                for key, known in refs.items():
                    problems.setdefault(key.split(".")[0].removeprefix("gate "), []).append(
                        Problem(known.location, key, f"the {role} worker broke the protocol: {str(entry)[:200]}"))
                break
            message = str(entry.get("message"))
            problems.setdefault(entry["key"].split(".")[0].removeprefix("gate "), []).append(
                Problem(named.location, entry["key"], explain_impl(message) if role == "impl" else message))
    return problems


def external_operations(run: GateRun, gate_file: GateFile) -> frozenset[str]:
    """The operations the external implementation's worker for this file answers. A worker that does not start
    (an OS error, an exit or a broken protocol before its ready) is the run's implementation problem, told once:
    every gate of this file and of the files after it is ERROR, pointing at it (a crash never looks like a pass)."""
    try:
        return run.pool.operations((gate_file.path, "impl"))
    except WorkerLost as lost:
        implementation = run.project.implementation(run.impl)
        assert implementation is not None
        run.implementation_unusable([not_started(run.project, implementation, str(lost), f"impl of {gate_file.path}")])
        return frozenset()


def _resolve_gate(run: GateRun, gate_file: GateFile, gate: Gate, operations: frozenset[str] | None = None) -> ResolvedGate:
    """Subjects answered by the file's workers; the gate's own compare and strategy resolved here. With an external
    implementation (``operations``: what it answers), the impl is the gate's operation there, or NOT-IMPLEMENTED."""
    def subject(role: str, ref: TargetRef, build: TargetRef | None, label: str) -> Subject:
        return Subject(run.pool, (gate_file.path, role), ref, build, gate.timeout or run.project.call_timeout, label)

    def own(ref: TargetRef | None, key: str) -> Any:
        return resolve(ref, f"gate {gate.id}.{key}", run.project.allowed_roots) if ref is not None else None

    audit_ref = TargetRef(AUDIT_TARGET, gate.location)
    impl = replace(subject("impl", gate.impl, gate.build_impl, "impl"), judged=True)
    audit = subject("known-bad", audit_ref, gate.build_impl, "the audit stand-in")
    missing = None
    if operations is not None:
        kinds = dict(run.project.error_kinds)
        impl = replace(impl, build=None, operation=gate.operation, kinds=kinds, role=f"impl {run.impl}")
        audit = replace(audit, worker=(gate_file.path, "impl"), build=None, kinds=kinds)
        if gate.operation is None:
            missing = NotImplementedBy(run.impl, f"gate {gate.id} names a Python target, not an operation of the row, so only "
                                                 f"the python implementation can answer it")
        elif gate.operation not in operations:
            missing = NotImplementedBy(run.impl, f"its worker does not list operation {gate.operation!r}")
    return ResolvedGate(
        gate=gate, impl=impl,
        oracle=subject("oracle", gate.oracle, gate.build_oracle, "oracle") if gate.oracle else None,
        compare=own(gate.compare, "compare"),
        strategy=own(gate.properties.strategy if gate.properties else None, "properties.strategy"),
        known_bad={kb.name: subject("known-bad", kb.target, gate.build_impl, f"known-bad {kb.name}") for kb in gate.known_bad},
        known_good={kg.name: subject("known-bad", kg.target, gate.build_impl, f"known-good {kg.name}") for kg in gate.known_good},
        audit=audit, not_implemented=missing)


class GateNode(pytest.Collector):
    """One gate: its named cases, its properties, its known-bad and known-good entries and the audit stand-in."""

    def __init__(self, *, row: str, resolved: ResolvedGate, audit: bool, **kwargs: Any):
        super().__init__(**kwargs)
        self.row, self.resolved, self.audit = row, resolved, audit

    def collect(self) -> Iterator[pytest.Item]:
        items = list(self._items())
        run = gate_run(self.config)
        assert run is not None
        key = (self.row, self.resolved.gate.id)
        run.gate_collected(key, [item.name for item in items], self.resolved.gate.markers)
        yield from items

    def _items(self) -> Iterator[pytest.Item]:
        gate = self.resolved.gate
        common = {"row": self.row, "gate_id": gate.id, "milestone": gate.milestone, "markers": gate.markers}
        if not self.audit:
            for case in gate.cases:
                yield CaseItem.from_parent(self, name=case.name, resolved=self.resolved, case=case, **common, line=case.location.line)
            if gate.properties is not None:
                yield PropertiesItem.from_parent(self, name="properties", resolved=self.resolved, **common, line=gate.properties.location.line)
        yield from known_bad_items(self, self.resolved, common, gate.known_bad)
        yield from known_good_items(self, self.resolved, common, gate.known_good)
        yield AuditItem.from_parent(self, name="audit", resolved=self.resolved, **common, line=gate.location.line)
        yield from gathered("gates_gate_items", node=self, resolved=self.resolved, common=common)  # (the strength audit)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: an unmarked test is selected by the default marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The project's unmarked tests get its default marker."""
    run = gate_run(config)
    if run is None or not run.project.default_marker:
        return
    names = set(run.project.marker_names)
    for item in items:
        if not {m.name for m in item.iter_markers()} & names:
            item.add_marker(run.project.default_marker)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        run = gate_run(items[0].config)
        if run is not None:
            run.count_deselected(sum(isinstance(item, GateItem) for item in items))


def pytest_collection_finish(session: pytest.Session) -> None:
    run = gate_run(session.config)
    if run is not None:
        run.selection_made([item for item in session.items if isinstance(item, GateItem)],
                           [where for where in map(_worker_file, session.items) if where is not None])
        if not xdist_run.is_worker(session.config):  # an xdist worker runs what it is sent, in the order it is sent
            link_runs(session.items)
        if run.pool is not None:
            run.pool.retire(SHARED_CHECKER)


def _worker_file(item: pytest.Item) -> str | None:
    """The gate file whose workers answer this item (None for items no worker answers)."""
    resolved = getattr(item, "resolved", None) if isinstance(item, GateItem) else None
    return resolved.impl.worker[0] if resolved is not None else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    run = gate_run(item.config)
    if run is not None:
        run.record(item, report)
        record = item.stash.get(RECORD, None) if isinstance(item, GateItem) and report.when == "call" else None
        if record is not None:  # JUnit: the item's test case carries what the features take from its record
            item.user_properties.extend(gathered("gates_item_properties", record=record))
        if isinstance(item, GateItem) and xdist_run.is_worker(item.config):
            xdist_run.attach(report, item.identity, item.stash.get(RECORD, None), item.stash.get(SKIP_CAUSE, None))
        if report.when == "teardown":
            _one_item_done(run, item)
    return report


def _one_item_done(run: GateRun, item: pytest.Item) -> None:
    """After a gate file's last selected item, its workers end (hundreds of files never hold hundreds of workers)."""
    where = _worker_file(item)
    if where is not None and run.item_done(where):
        run.pool.retire(where)


@pytest.hookimpl(tryfirst=True)  # before junitxml writes its file: the claims join it as test cases
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    run = gate_run(session.config)
    if run is None:
        return
    if xdist_run.is_worker(session.config):  # the controller judges the whole run
        session.config.workeroutput[xdist_run.KEY] = xdist_run.manifest(run)  # type: ignore[attr-defined]
        return
    if run.collected_files or run.requested_rows is not None:
        session.exitstatus = run.finish(session.config, int(exitstatus))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    run = gate_run(terminalreporter.config)
    if run is not None and run.summary:
        terminalreporter.write_sep("=", "vllm-gates")
        terminalreporter.write_line(run.summary)


def pytest_unconfigure(config: pytest.Config) -> None:
    run = gate_run(config)
    if run is not None:
        run.pool.close()
