"""`gates diverge ROW --gate ID` (docs/divergence.md): where an implementation's forward diverges from a reference's,
tap by tap. The reference and the implementation answer in workers (worker_pool), never in this process: the
reference free-running, the implementation free-running and teacher-forced (the case's input with the gate's
`taps.feed` key set to the reference's feed points); divergence.localize judges the three."""
from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from _vllm_gates.base.errors import DefinitionError, GatesError, Location
from _vllm_gates.base.fields import TARGET_PATTERN
from _vllm_gates.definitions.config import Config, implementation_refused
from _vllm_gates.definitions.gatefile import peek_row_id
from _vllm_gates.definitions.impl_problems import before_run
from _vllm_gates.definitions.implementations import PYTHON, Implementation
from _vllm_gates.definitions.import_failures import missing_package, not_installed
from _vllm_gates.definitions.model import Case, Gate, GateFile, KnownBad, TargetRef
from _vllm_gates.definitions.project import Project, unknown_name
from _vllm_gates.results.reports import write_atomic
from _vllm_gates.run.checks import Outcome, Subject
from _vllm_gates.run.exitcodes import ExitCode
from _vllm_gates.taps.divergence import Divergence, localize
from _vllm_gates.taps.divergence_report import FORMAT, as_json, render_shrink, render_text, shrink_as_json
from _vllm_gates.taps.divergence_shrink import IDS_KEY, WEIGHTS_KEY, Shrunk, not_sought, shrink
from _vllm_gates.taps.tap_dumps import TapDumpError, TapFile, check_dump, read_dump, spill, write_dump
from _vllm_gates.workers.sandbox import sandbox_for
from _vllm_gates.workers.worker_pool import WorkerPool, WorkerSpec

ORACLE = "oracle"


class DivergeUsage(GatesError):
    """A flag naming what the project does not have: exit 2, naming the flag and the close names."""


class ReferenceUnavailable(GatesError):
    """The reference cannot run here (its module, or a package it needs, is not installed): a skip with the reason,
    exit 7, never a pass."""


class DivergeError(GatesError):
    """The localization could not be made (a worker lost, a side raised, taps that cannot be compared): exit 3."""


@dataclass(frozen=True)
class Options:
    """The command's arguments as given."""

    row: str
    gate: str
    case: str | None = None
    impl: str | None = None
    against: str = ORACLE
    json: str | None = None
    dump: str | None = None
    known_bad: str | None = None  # judge this known-bad of the gate in place of the implementation
    shrink: bool = True  # seek the fewest layers and shortest prompt that keep a localized break


@dataclass(frozen=True)
class Opened:
    """What the flags name: the row's gate file, the gate (with `taps:`), the case and the implementation."""

    gate_file: GateFile
    gate: Gate
    case: Case
    implementation: Implementation
    known_bad: KnownBad | None = None  # --known-bad: judged in place of the implementation


def run_diverge(project: Project, options: Options) -> int:
    """The command: 0 no localized break, 1 a localized break, 3 an error, 7 the reference cannot run here (a skip,
    with the reason); DivergeUsage for usage, exit 2."""
    return run_opened(project, open_gate(project, options), options)


def run_opened(project: Project, opened: Opened, options: Options) -> int:
    """The command on what the flags opened (ci/bench/bench_taps.py runs it on a case of its own)."""
    problems = before_run(project.config, opened.implementation)
    if problems:
        raise DefinitionError(problems)
    context = {"row": opened.gate_file.row, "gate": opened.gate.id, "case": opened.case.name,
               "impl": judged_name(opened)}
    pool = _pool(project, opened.implementation)
    try:
        with tempfile.TemporaryDirectory(prefix="gates-diverge-") as folder:  # each side's taps, held on disk
            reference, source = _reference(pool, project, opened, options)
            if not isinstance(reference, TapFile):
                reference = spill(reference, Path(folder) / "reference.safetensors")
            if options.dump:  # recorded before the implementation runs: a reference is worth keeping whatever it does
                _record(options.dump, reference, opened.case, source)
            divergence = _localized(pool, project, opened, reference, opened.case.input, Path(folder))
            title = (f"gates diverge {opened.gate_file.row} --gate {opened.gate.id} --case {opened.case.name}: "
                     f"{judged_name(opened)} against {source}")
            print(render_text(divergence, title), end="", flush=True)  # the full run's verdict, before any shrinking
        shrunk = _shrunk(pool, project, opened, options, divergence)
    except (DefinitionError, DivergeUsage):
        raise
    except ReferenceUnavailable as unavailable:  # never a pass: its own exit code, as `gates run`'s nothing-could-run
        print(f"gates diverge: skipped: {unavailable}", file=sys.stderr)
        if options.json:
            report = {"format": FORMAT, **context, "reference": options.against, "skipped": str(unavailable),
                      "exit_code": int(ExitCode.NOT_RUNNABLE)}
            write_atomic(Path(options.json), json.dumps(report, indent=2) + "\n")
        return ExitCode.NOT_RUNNABLE
    except GatesError as error:  # a worker lost, a side that raised or crashed, taps or a dump that cannot be used
        print(f"gates diverge: {error}", file=sys.stderr)
        return ExitCode.ERROR
    finally:
        pool.close()
    print(render_shrink(shrunk, divergence), end="")
    code = ExitCode.CLAIM_NOT_MET if divergence.broke else ExitCode.OK
    if options.json:
        report = {**as_json(divergence, {**context, "reference": source, "exit_code": int(code)}),
                  "shrink": shrink_as_json(shrunk)}
        write_atomic(Path(options.json), json.dumps(report, indent=2) + "\n")
    return code


def open_gate(project: Project, options: Options) -> Opened:
    """The row, gate, case and implementation the flags name; DivergeUsage naming the flag and the close names."""
    rows = [row.id for row in project.roadmap.rows]
    if options.row not in rows:
        raise DivergeUsage(unknown_name("ROW", options.row, "not a row of the roadmap", rows))
    path = next((p for p in project.config.gate_files() if peek_row_id(p) == options.row), None)
    if path is None:
        raise DivergeUsage(f"row {options.row} has no gate file (rows = {list(project.config.rows)} in pyproject.toml)")
    gate_file = project.whole_gate_file(path)
    by_id = {gate.id: gate for gate in gate_file.gates}
    if options.gate not in by_id:
        raise DivergeUsage(unknown_name("--gate", options.gate, f"row {options.row} has no such gate", list(by_id)))
    gate = by_id[options.gate]
    if gate.taps is None:
        with_taps = [g.id for g in gate_file.gates if g.taps is not None]
        raise DivergeUsage(f"--gate {gate.id}: the gate declares no `taps:`, so it names no taps to compare "
                           f"(gates of {options.row} with taps: {', '.join(with_taps) or 'none'}; docs/divergence.md)")
    names = [case.name for case in gate.cases]
    if not names:
        raise DivergeUsage(f"--gate {gate.id}: the gate has no named case to run (docs/divergence.md)")
    name = options.case or names[0]
    if name not in names:
        raise DivergeUsage(unknown_name("--case", name, f"gate {gate.id} has no such case", names))
    refused = implementation_refused(project.config, "--impl", options.impl) if options.impl else None
    if refused:
        raise DivergeUsage(refused)
    implementation = project.config.implementation(options.impl or PYTHON)
    assert implementation is not None
    if implementation.external and gate.operation is None:
        raise DivergeUsage(f"--impl {implementation.name}: gate {gate.id} names a Python target, not an operation of the "
                           f"row, so only the python implementation can answer it")
    if options.known_bad is not None:
        listed = [entry.name for entry in gate.known_bad]
        if options.known_bad not in listed:
            raise DivergeUsage(unknown_name("--known-bad", options.known_bad, f"gate {gate.id} lists no such known-bad",
                                            listed))
        if options.impl:
            raise DivergeUsage(f"--known-bad {options.known_bad}: a known-bad is a Python target of the gate, judged in "
                               f"place of the implementation: give it without --impl {options.impl}")
    _check_against(options.against)
    case = next(case for case in gate.cases if case.name == name)
    if not isinstance(case.input, dict) or gate.taps.feed in case.input:
        raise DivergeUsage(f"--case {name}: its input must be a mapping without the feed key {gate.taps.feed!r} "
                           f"(the teacher-forced run sets it)")
    recorded = [flag for flag, asked in (("--dump", options.dump), ("--against", options.against.endswith(".safetensors")))
                if asked]
    missing = [key for key in (IDS_KEY, WEIGHTS_KEY) if key not in case.input]
    if recorded and missing:
        raise DivergeUsage(f"{recorded[0]}: case {name}'s input has no {missing[0]!r}: a dump records the case's ids "
                           f"and the fingerprint of its weights")
    known_bad = next((entry for entry in gate.known_bad if entry.name == options.known_bad), None)
    return Opened(gate_file, gate, case, implementation, known_bad)


def judged_name(opened: Opened) -> str:
    """What the report says was judged: the implementation, or the known-bad judged in its place."""
    return f"known-bad {opened.known_bad.name}" if opened.known_bad else opened.implementation.name


def _check_against(against: str) -> None:
    if against == ORACLE or TARGET_PATTERN.match(against):
        return
    if against.endswith(".safetensors"):
        if not Path(against).is_file():
            raise DivergeUsage(f"--against {against}: no such file")
        return
    raise DivergeUsage(f"--against {against}: expected `oracle`, a recorded dump FILE.safetensors or a reference "
                       f"target module:function")


def _pool(project: Project, implementation: Implementation) -> WorkerPool:
    """The workers of this command, started as `gates run` starts them: the implementation's in its sandbox."""
    config = project.config
    return WorkerPool(WorkerSpec(config.root, _worker_path(config), config.allowed_roots, config.worker_preload,
                                 external=implementation.command, settings=implementation.settings,
                                 max_buffer_bytes=config.max_tensor_bytes, sandbox=sandbox_for(config, implementation)))


def _worker_path(config: Config) -> tuple[str, ...]:
    """The folders a worker imports from: the project's root, then its `pythonpath` entries."""
    return tuple(dict.fromkeys([str(config.root)] + [str(config.root / entry) for entry in config.pythonpath]))


def _reference(pool: WorkerPool, project: Project, opened: Opened,
               options: Options) -> tuple[Mapping[str, Any], str]:
    """The reference's free-running taps (a recorded dump's, or a worker's answer) and what the reference is."""
    if options.against.endswith(".safetensors"):
        return _replayed(options.against, opened.case), f"dump {options.against}"
    subject = _reference_subject(pool, project, opened, options)
    assert subject is not None
    try:
        reference = _reference_taps(subject, opened.case.input, _worker_path(project.config))
    except DefinitionError as error:  # its module does not import: a missing package is a skip, not the gate's error
        reason = not_installed(error, _worker_path(project.config))
        if reason is None:
            raise
        raise ReferenceUnavailable(f"the reference {subject.target.dotted} cannot run here: {reason}") from None
    return reference, f"{'oracle ' if options.against == ORACLE else ''}{subject.target.dotted}"


def _reference_subject(pool: WorkerPool, project: Project, opened: Opened, options: Options) -> Subject | None:
    """The live reference as a worker asks it (the gate's oracle, or the --against target); None: a recorded dump."""
    if options.against.endswith(".safetensors"):
        return None
    gate = opened.gate
    target = gate.oracle if options.against == ORACLE else TargetRef(options.against, Location("--against", 1, 1))
    assert target is not None
    return Subject(pool, (opened.gate_file.path, "oracle"), target, gate.build_oracle,
                   gate.timeout or project.config.call_timeout, "reference")


def _reference_taps(subject: Subject, data: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """The reference's taps for one input; ReferenceUnavailable where it raised ImportError for a package not
    installed here (upstream/hf_qwen3.py raises it, naming the missing package); ``path``: the worker's import path."""
    outcome = subject.outcome(data)
    reason = missing_package(outcome.error.type_name, outcome.error.message, path) if outcome.error else None
    if reason is not None:
        raise ReferenceUnavailable(f"the reference {subject.target.dotted} cannot run here: {reason}")
    return _taps(outcome, f"the reference {subject.target.dotted}")


def _record(path: str, reference: Mapping[str, Any], case: Case, source: str) -> None:
    try:
        write_dump(Path(path), reference, case.input[IDS_KEY], case.input[WEIGHTS_KEY], source)
    except OSError as error:
        raise TapDumpError(f"--dump {path}: {error}") from None


def _localized(pool: WorkerPool, project: Project, opened: Opened, reference: Mapping[str, Any],
               data: Mapping[str, Any], folder: Path | None = None) -> Divergence:
    """The localization of one input from the reference's taps on it (each side's taps held in ``folder``, if given)."""
    free, forced = _implementation_taps(pool, project, opened, reference, data, folder)
    return localize(reference, free, forced, opened.gate.taps, opened.gate.policy)  # type: ignore[arg-type]


def _shrunk(pool: WorkerPool, project: Project, opened: Opened, options: Options, divergence: Divergence) -> Shrunk:
    """The fewest layers and shortest prompt that keep the full run's localized break (divergence_shrink), each
    candidate the reference re-run on it and the implementation free-running and teacher-forced; or why none."""
    data, taps = opened.case.input, opened.gate.taps
    assert taps is not None
    if not divergence.broke:
        return not_sought("no localized break: nothing to shrink", data)
    if not options.shrink:
        return not_sought("--no-shrink", data)
    subject = _reference_subject(pool, project, opened, options)
    if subject is None:
        return not_sought("the reference is a recorded dump, which cannot be re-run on fewer layers or a shorter "
                          "prompt (run it against the live reference)", data)
    reference_subject, path = subject, _worker_path(project.config)

    def candidate(cut: Mapping[str, Any]) -> Divergence:
        return _localized(pool, project, opened, _reference_taps(reference_subject, cut, path), cut)

    return shrink(divergence, data, taps.layer, candidate)


def _implementation_taps(pool: WorkerPool, project: Project, opened: Opened, reference: Mapping[str, Any],
                         data: Mapping[str, Any], folder: Path | None = None) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The implementation's free-running taps on ``data``, and its teacher-forced ones (``data`` with the gate's feed
    key set to the reference's feed points); each held in a tap file in ``folder`` once answered, where one is given."""
    taps = opened.gate.taps
    assert taps is not None
    impl = impl_subject(pool, project, opened)
    free: Mapping[str, Any] = _taps(impl.outcome(data), f"the implementation {impl.shown} (free-running)")
    if folder is not None:
        free = spill(free, folder / "free.safetensors")
    forced: Mapping[str, Any] = _taps(impl.outcome({**data, taps.feed: feed_of(reference, opened)}),
                                      f"the implementation {impl.shown} (teacher-forced)")
    if folder is not None:
        forced = spill(forced, folder / "forced.safetensors")
    return free, forced


def impl_subject(pool: WorkerPool, project: Project, opened: Opened) -> Subject:
    """What answers as the implementation: the gate's impl, the known-bad judged in its place, or the external
    implementation's operation, each asked as `gates run` and `gates audit` ask it."""
    config, gate = project.config, opened.gate
    impl = replace(Subject(pool, (opened.gate_file.path, "impl"), gate.impl, gate.build_impl,
                           gate.timeout or config.call_timeout, "impl"), judged=True)
    if opened.known_bad is not None:  # the planted defect answers in the known-bads' worker, as `gates audit` asks it
        impl = Subject(pool, (opened.gate_file.path, "known-bad"), opened.known_bad.target, gate.build_impl,
                       gate.timeout or config.call_timeout, f"known-bad {opened.known_bad.name}")
    elif opened.implementation.external:  # as `gates run --impl NAME` asks it: the gate's operation, by name
        impl = replace(impl, build=None, operation=gate.operation, kinds=dict(config.error_kinds),
                       role=f"impl {opened.implementation.name}")
    return impl


def feed_of(reference: Mapping[str, Any], opened: Opened) -> dict[str, Any]:
    """The teacher-forced run's feed: the reference's taps at the gate's feed points; DivergeError where it has none."""
    taps = opened.gate.taps
    assert taps is not None
    feed = {name: reference[name] for name in reference if taps.is_feed_point(name)}
    if not feed:
        raise DivergeError(f"the reference reports no feed point ({', '.join(taps.feed_points)}) among its taps "
                           f"({', '.join(reference)}): nothing to teacher-force")
    return feed


def _replayed(path: str, case: Case) -> TapFile:
    """A recorded dump's taps, refused unless recorded on the case's ids and weights."""
    dump = read_dump(Path(path))
    check_dump(dump, case.input[IDS_KEY], case.input[WEIGHTS_KEY], f"--against {path}")
    return dump.taps


def _taps(outcome: Outcome, what: str) -> dict[str, Any]:
    """A side's answer as a mapping tap name -> array; DivergeError where it raised or answered something else."""
    if outcome.error is not None:
        raise DivergeError(f"{what} raised {outcome.error.type_name}: {outcome.error.message}")
    import numpy as np

    value = outcome.value
    if not isinstance(value, dict) or not all(isinstance(name, str) and isinstance(array, np.ndarray)
                                              for name, array in value.items()):
        raise DivergeError(f"{what} answered {type(value).__name__}, not a mapping of tap names to arrays")
    return value
