"""`gates mutate [ROW…]` (docs/mutation.md): mutants of the implementation files a row's `sources:` names, each
judged by the gates whose items execute its line, in one warm pytest session per row (docs/mutation.md).

The session (mutate_session) first runs each gate unmutated, recording the lines of those files its items execute
(and which items pass at all); then each mutant in turn, its workers loading the mutated text in place of the file
(an import hook, mutate_hook; the file on disk is never edited). A mutant is killed only when a gate item that passed
unmutated fails or errors: a crash, hang or exit counts only as the gate reports it.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _vllm_gates.base.errors import GatesError
from _vllm_gates.definitions.config import Config
from _vllm_gates.definitions.implementations import PYTHON
from _vllm_gates.definitions.model import GateFile
from _vllm_gates.definitions.patterns import declared_files
from _vllm_gates.definitions.project import Project
from _vllm_gates.definitions.requirements import unmet
from _vllm_gates.definitions.sources import gate_source_files, import_graph
from _vllm_gates.mutation import mutate_hook
from _vllm_gates.mutation.mutate_annotations import survivor_annotations
from _vllm_gates.mutation.mutate_cpp import cpp_mutants
from _vllm_gates.mutation.mutate_cpp_build import MutantBuilds, MutantDoesNotBuild
from _vllm_gates.mutation.mutate_cpp_files import cpp_files_for_row, gates_reaching
from _vllm_gates.mutation.mutate_incremental import CompileMemo, engine_identity, gate_fingerprints, reaching_gates, tree_identity, verdict_holds
from _vllm_gates.mutation.mutate_operators import Mutant, family, mutants
from _vllm_gates.mutation.mutate_report import (
    EQUIVALENTS_FILE,
    Earlier,
    MutationError,
    MutationRowReport,
    earlier_rows,
    load_equivalents,
    stale_equivalents,
    summary_lines,
    survivor_lines,
    write_report,
)
from _vllm_gates.mutation.mutate_schema_report import schema_report
from _vllm_gates.mutation.mutate_warm import WarmPlan, warm_plan
from _vllm_gates.results.mutation_records import NOT_RUN_HERE, MutantEntry, MutantVerdict
from _vllm_gates.results.progress import Progress
from _vllm_gates.results.reports import write_atomic
from _vllm_gates.run.evidence import read_report
from _vllm_gates.run.mutation_evidence import MUTATION_SCHEMA, sources_fingerprint  # the one way `mutation:` claims read it too
from _vllm_gates.workers.sandbox import WRITABLE_VARIABLE

SESSION_END_SECONDS = 10.0  # a session that judged every mutant may take this long to end before it is killed
DETAIL_CHARS = 400  # of a compiler's refusal kept in the report
POLL_SECONDS = 0.05  # how often a session's events are read
HANG_FACTOR = 10.0  # an item of a mutant may take this many times its unmutated seconds (the first pass's) ...
HANG_FLOOR_S = 10.0  # ... and at least this long, before the mutant is timed_out (--timeout bounds the whole mutant)
FIRST_PASS_FLOOR = 300.0  # seconds the session may take to start and judge one unmutated gate, at least (4 x --timeout)
ENGINE = "vllm-gates ast operators 1"
CPP_ENGINE = "vllm-gates C++ token operators 1"  # mutate_cpp (docs/mutation-cpp.md)
# the generator: mutate_operators (docs/mutation.md says why not mutmut/cosmic-ray)


@dataclass(frozen=True)
class Options:
    """What `gates mutate` was asked: rows, a cap per row, the per-mutant timeout, the report, changed lines only."""

    rows: tuple[str, ...]
    max_mutants: int | None
    timeout: float
    json_path: Path
    changed_since: str | None
    seed: int
    impl: str = "python"
    budget: float | None = None  # seconds per row: judging the Python port's mutants, building an external one's (None: no cap)
    first_kill: bool = False  # stop each mutant at the first gate that kills it (faster; the matrix counts that gate only)
    families: tuple[str, ...] = ()  # only these operator families (mutate_operators.family); () for all
    per_line: bool = False  # one mutant per line, drawn with the seed (--per-line 1)
    annotations: str | None = None  # survivors as GitHub annotations: a file, or "-" for stdout (--annotations)
    schema_report: Path | None = None  # the report also in the mutation-testing-report-schema (--schema-report)
    warm: bool = True  # the impl role's workers forked from a server that imported the impl (mutate_warm)
    hang_factor: float | None = HANG_FACTOR  # an item's limit, times its unmutated seconds; None: --timeout alone


def mutable_files(config: Config, gate_file: GateFile) -> list[str]:
    """The `.py` files of the row's `sources:` that its gates' impl side imports and no oracle outside the gate files'
    folder does; never a file under that folder (subject views, builders). Sorted."""
    graph = import_graph(config)
    gates_top = Path(gate_file.folder or gate_file.path).parts[0]
    impl_side = gate_source_files(graph, [r for g in gate_file.gates for r in (g.impl, g.build_impl) if r])
    # an oracle view in the row folder may call the impl (CAPI-ABI's `.subjects:unchanged`): only oracles outside it
    oracle_side = gate_source_files(graph, [r for g in gate_file.gates for r in (g.oracle, g.build_oracle)
                                            if r and r.module.split(".")[0] != gates_top])
    chosen = {config.relative(p) for p in set(impl_side) - set(oracle_side)}
    return [f for f in declared_files(config.root, gate_file.sources)
            if f.endswith(".py") and f in chosen and f.split("/", 1)[0] != gates_top]


def changed_lines(root: Path, rev: str, files: list[str]) -> dict[str, set[int]]:
    """Lines of ``files`` added or changed since ``rev`` (git diff -U0, the working tree included)."""
    done = subprocess.run(["git", "-C", str(root), "diff", "-U0", "--no-color", rev, "--", *files],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise MutationError(f"--changed-since {rev}: git diff failed: {done.stderr.strip()}")
    found: dict[str, set[int]] = {}
    current = None
    for line in done.stdout.splitlines():
        if line.startswith("+++ "):
            current = line[6:] if line.startswith("+++ b/") else None
        elif line.startswith("@@") and current:
            match = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
            if match:
                start, count = int(match.group(1)), int(match.group(2) or 1)
                found.setdefault(current, set()).update(range(start, start + count))
    return found


class Sessions:
    """Starts the warm gate sessions of one `gates mutate` invocation (mutate_session), with the hook's sitecustomize
    on PYTHONPATH, and watches each one's events: a session stuck on one mutant for more than --timeout seconds is
    ended, that mutant is timed_out, and a new session (reusing the first pass) judges the rest."""

    def __init__(self, config: Config, work: Path, seed: int):
        self.config, self.work, self.seed = config, work, seed
        self.first_pass_seconds = 0.0  # the unmutated gates' runs, summed over rows
        (work / "hook").mkdir()
        (work / "hook" / "sitecustomize.py").write_text(mutate_hook.SITECUSTOMIZE, encoding="utf-8")

    def folder(self, row: str) -> Path:
        """The row's working folder (plan, events, first pass, mutants' texts), made on first use."""
        folder = self.work / re.sub(r"[^\w.-]", "_", row)
        (folder / "mutants").mkdir(parents=True, exist_ok=True)
        return folder

    def python_specs(self, row: str, files: list[str], chosen: list[Mutant], warm: WarmPlan | None = None) -> list[dict[str, Any]]:
        """What the session needs of each Python mutant: the real path of its file, its line, its text (a file), and
        the modules a warm worker loads again for it."""
        folder = self.folder(row)
        specs = []
        for number, mutant in enumerate(chosen):
            source = folder / "mutants" / f"{number}.py"
            source.write_text(mutant.source, encoding="utf-8")
            specs.append({"id": mutant.id(row), "path": os.path.realpath(self.config.root / mutant.file),
                          "line": mutant.line, "source": str(source), "failed": str(folder / "mutants" / f"{number}.failed"),
                          **({"purge": list(warm.purge.get(os.path.realpath(self.config.root / mutant.file), ()))}
                             if warm is not None else {})})
        return specs

    def judge(self, row: str, gate_path: str, watch: list[str], specs: list[dict[str, Any]], chosen: list[Mutant],
              trace_gates: list[str], known_bads: bool, timeout: float, found: Callable[[Mutant, MutantVerdict], None],
              impl: str = PYTHON, first_kill: bool = False, warm: WarmPlan | None = None,
              hang_factor: float | None = None) -> dict[str, Any]:
        """The first pass (unmutated items, lines reached, known-bads) and each mutant's result, handed to ``found``
        as it comes; returns the first pass. ``watch``: the files whose importing workers restart between mutants;
        ``warm``: the impl's modules its workers fork with; ``hang_factor``: each item's limit (HANG_FLOOR_S at least)."""
        folder = self.folder(row)
        real = {f: os.path.realpath(self.config.root / f) for f in watch}
        by_id = {mutant.id(row): mutant for mutant in chosen}
        plan: dict[str, Any] = {"work": str(folder), "control": str(folder / "control.json"), "touched": str(folder / "touched.txt"),
                "watch": sorted(set(real.values())), "baseline": str(folder / "baseline.json"), "events": str(folder / "events.jsonl"),
                "trace_gates": trace_gates, "known_bads": known_bads, "external": impl != PYTHON, "first_kill": first_kill,
                "hang": {"factor": hang_factor, "floor": HANG_FLOOR_S} if hang_factor is not None else None,
                **({"warm_modules": list(warm.modules), "warm_control": warm.control()} if warm is not None else {})}
        (folder / "control.json").write_text(json.dumps({"watch": plan["watch"], "touched": plan["touched"],
                                                          "mutant": None, "trace": None,
                                                          **(warm.control() if warm is not None else {})}),
                                             encoding="utf-8")
        left = specs
        while True:
            stuck = self._session(gate_path, folder, {**plan, "mutants": left}, timeout, by_id, found, impl)
            if stuck is None:
                return json.loads((folder / "baseline.json").read_text(encoding="utf-8"))
            found(by_id[stuck], MutantVerdict("timed_out"))
            left = left[[spec["id"] for spec in left].index(stuck) + 1:]

    def _session(self, gate_path: str, folder: Path, plan: dict[str, Any], timeout: float, by_id: dict[str, Mutant],
                 found: Callable[[Mutant, MutantVerdict], None], impl: str) -> str | None:
        """One session over ``plan``'s mutants; the id of the mutant it was stopped on, or None when it judged all."""
        (folder / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
        events = folder / "events.jsonl"
        events.unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
        env.update({mutate_hook.CONTROL_VARIABLE: plan["control"], mutate_hook.PLAN_VARIABLE: str(folder / "plan.json"),
                    WRITABLE_VARIABLE: str(self.work)},  # the hook writes in the row's folder, under the work folder
                   PYTHONPATH=os.pathsep.join(filter(None, [str(self.work / "hook"), env.get("PYTHONPATH")])))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--assert=plain", "-p", "_vllm_gates.frontends.mutate_session",
                   "--rootdir", str(self.config.root), "--hypothesis-profile", mutate_hook.PROFILE,
                   "--hypothesis-seed", str(self.seed), "--gates-impl", impl, gate_path]
        log = folder / "session.log"
        with open(log, "wb") as output:
            process = subprocess.Popen(command, cwd=self.config.root, env=env, stdout=output, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        first_pass = max(4 * timeout, FIRST_PASS_FLOOR)
        deadline, current, read, whole = time.monotonic() + first_pass, None, 0, 0.0
        try:
            while True:
                ended = process.poll() is not None
                with open(events, "a+", encoding="utf-8") as handle:
                    handle.seek(read)
                    text = handle.read()
                complete = text[:text.rfind("\n") + 1]
                read += len(complete.encode("utf-8"))
                for event in (json.loads(line) for line in complete.splitlines()):
                    kind = event.pop("event")
                    if kind == "first-pass":
                        deadline = time.monotonic() + first_pass
                        self.first_pass_seconds += event["seconds"]
                    elif kind == "start":
                        current, deadline = event["id"], time.monotonic() + timeout
                        whole = deadline
                    elif kind == "limit" and current is not None:  # this item's own bound, within the mutant's
                        deadline = min(whole, time.monotonic() + event["seconds"])
                    elif kind == "done":
                        mutant_id = event.pop("id")
                        found(by_id[mutant_id], MutantVerdict.from_data(event, f"{events}: mutant {mutant_id}"))
                        current = None
                    elif kind == "error":
                        raise MutationError(event["message"])
                    elif kind == "end":
                        try:
                            process.wait(SESSION_END_SECONDS)  # its reports of the last mutant, never read
                        except subprocess.TimeoutExpired:
                            pass
                        return None
                if ended:
                    tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:]
                    raise MutationError(f"the gate session of {gate_path} ended (exit {process.returncode}) before "
                                        f"judging every mutant:\n  " + "\n  ".join(tail))
                if time.monotonic() > deadline:
                    if current is None:
                        raise MutationError(f"{gate_path}: the unmutated gates took more than {first_pass:g} s for one "
                                            f"gate (4 x --timeout): no line can be said to be covered; raise --timeout")
                    return current
                time.sleep(POLL_SECONDS)
        finally:
            _stop(process)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops `gates mutate` as Ctrl-C does: the running session (its own process group, which the terminal's
    signals do not reach) and its workers are ended, and what was measured stays in the report."""
    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """The judge first (its lifeline then ends its workers), then whatever is left of its process group."""
    if process.poll() is None:
        process.kill()
    process.wait()
    time.sleep(0.2)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _BudgetSpent(Exception):
    """--budget seconds of a row are spent: its session is stopped and the mutants left are not judged."""


def one_per_line(found: list[Mutant], seed: int) -> list[Mutant]:
    """One mutant of each (file, line), drawn with ``seed``, in their generated order (--per-line 1)."""
    lines: dict[tuple[str, int], list[Mutant]] = {}
    for mutant in found:
        lines.setdefault((mutant.file, mutant.line), []).append(mutant)
    draw = random.Random(seed)
    keep = {id(draw.choice(group)) for group in lines.values()}
    return [m for m in found if id(m) in keep]


def _sample(found: list[Mutant], cap: int | None, seed: int) -> list[Mutant]:
    """At most ``cap`` of the mutants, drawn with ``seed``, in their generated order."""
    if cap is None or len(found) <= cap:
        return found
    keep = set(random.Random(seed).sample(range(len(found)), cap))
    return [m for i, m in enumerate(found) if i in keep]


def _digest(texts: list[tuple[str, bytes]]) -> str:
    return hashlib.sha256(b"".join(name.encode() + b"\0" + text + b"\0" for name, text in texts)).hexdigest()


def _row_folder(config: Config, gate_file: GateFile) -> Path:
    return config.root / (gate_file.folder or str(Path(gate_file.path).parent))


def _gates_fingerprint(folder: Path) -> str:
    """The row folder's files (gate file, parts, operations, builders, subjects, strategies, known-bads)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and p.name != EQUIVALENTS_FILE)
    return _digest([(p.relative_to(folder).as_posix(), p.read_bytes()) for p in files])


def _generate(config: Config, row: str, files: list[str], changed: dict[str, set[int]] | None,
              generator: Callable[[str, str, set[int] | None], list[Mutant]]) -> list[Mutant]:
    found: list[Mutant] = []
    for file in files:
        try:
            text = (config.root / file).read_text(encoding="utf-8")
            found += generator(file, text, None if changed is None else changed.get(file, set()))
        except SyntaxError as exc:
            raise MutationError(f"row {row}: {file}:{exc.lineno}: does not parse: {exc.msg}") from None
    return found


def _traced_gates(config: Config, gate_file: GateFile, files: set[str]) -> list[str]:
    """The gates whose impl side imports one of ``files`` (found statically, as `gates affected` does): the others
    reach none of their lines and are not run in the first pass."""
    graph = import_graph(config)
    real = {os.path.realpath(config.root / f) for f in files}
    return [gate.id for gate in gate_file.gates
            if real & {os.path.realpath(p) for p in gate_source_files(graph, [r for r in (gate.impl, gate.build_impl) if r])}]


def _reached_only_elsewhere(config: Config, gate_file: GateFile, files: list[str]) -> dict[str, str]:
    """The files some gate that cannot run on this machine imports (its marker's requirement is unmet here: no CUDA
    device, no pinned vLLM), each with why: a mutant there that no gate run here reaches is `not_run_here`, not
    `not_covered` (that gate may reach it where it runs)."""
    graph = import_graph(config)
    real = {os.path.realpath(config.root / f): f for f in files}
    found: dict[str, str] = {}
    for gate in gate_file.gates:
        why = [f"{m.name}: {reason}" for m in config.markers if m.name in gate.markers and m.requires is not None
               for reason in [unmet(m.requires, config)] if reason]
        if not why:
            continue
        for path in gate_source_files(graph, [r for r in (gate.impl, gate.build_impl) if r]):
            file = real.get(os.path.realpath(path))
            if file is not None:
                found[file] = (found[file] + "; " if file in found else "") + f"gate {gate.id} ({', '.join(why)})"
    return {file: f"reached by no gate run here; imported by gates that cannot run here: {why}" for file, why in found.items()}


def mutate_row(sessions: Sessions, project: Project, row: str, options: Options, earlier: Earlier | None,  # noqa: C901 (one row's pass, its steps in order: generate, sample, reuse, judge, save)
               save: Callable[[MutationRowReport], None], memo: CompileMemo | None = None) -> MutationRowReport:
    """One row: generate, then judge every mutant not measured before in a warm session, saving after each."""
    config = project.config
    gate_file = project.gate_file(row)
    if gate_file is None:
        raise MutationError(f"row {row} has no gate file that loads")
    shown = config.relative(project.paths[row]) or str(project.paths[row])
    external = options.impl != PYTHON
    files = cpp_files_for_row(config, gate_file) if external else mutable_files(config, gate_file)
    if not files:
        raise MutationError(f"row {row}: its sources {list(gate_file.sources)} name no Python file of the "
                            f"implementation to mutate (oracle files and the gate files' folder are not mutated)"
                            if not external else f"row {row}: no source of implementation {options.impl} registers "
                            f"an operation of its gates")
    changed = changed_lines(config.root, options.changed_since, files) if options.changed_since else None
    generator = cpp_mutants if external else functools.partial(mutants, compiling=memo.compiles) if memo else mutants
    generated = _generate(config, row, files, changed, generator)
    found = [m for m in generated if not options.families or family(m.operator) in options.families]
    chosen = _sample(one_per_line(found, options.seed) if options.per_line else found, options.max_mutants, options.seed)
    folder = _row_folder(config, gate_file)
    graph = import_graph(config)
    report = MutationRowReport(row, sources_fingerprint(config.root, files), _gates_fingerprint(folder),
                       [g.id for g in gate_file.gates], files=list(files), population=len(found),
                       gate_fingerprints=gate_fingerprints(config, gate_file, files, graph, options.impl),
                       sampling="per-line" if options.per_line else "drawn" if len(chosen) < len(found) else "all")
    save(report)
    declared = load_equivalents(folder / EQUIVALENTS_FILE)
    every = generated if changed is None else _generate(config, row, files, None, generator)
    report.stale_equivalents = [{"id": e.id, "reason": e.reason, "fingerprint": e.fingerprint}  # against every mutant
                                for e in stale_equivalents(declared, {m.fingerprint for m in every}, config.root, files)]
    equivalent = {e.fingerprint for e in declared}
    elsewhere = {} if external else _reached_only_elsewhere(config, gate_file, files)
    reach = ({f: gates_reaching(config, gate_file, f) for f in files} if external
             else reaching_gates(config, gate_file, files, graph))
    outcomes: dict[str, MutantVerdict] = {}
    for mutant in chosen:
        before = earlier.record(mutant.id(row), mutant.fingerprint) if earlier else None
        if before and not verdict_holds(before, reach.get(mutant.file, []), earlier.gate_fingerprints if earlier else {},
                                        report.gate_fingerprints):
            before = None
        if mutant.fingerprint in equivalent:
            outcomes[mutant.id(row)] = MutantVerdict("equivalent")
        elif before and (before.get("status") != NOT_RUN_HERE or mutant.file in elsewhere):
            outcomes[mutant.id(row)] = replace(MutantVerdict.from_data(before, f"{row}: earlier mutant {mutant.id(row)}"), seconds=None)
            report.reused += 1
    left = [m for m in chosen if m.id(row) not in outcomes]
    if options.budget is not None:  # judged in a random order, so that what the budget leaves out is a fair draw
        left = random.Random(options.seed).sample(left, len(left))
    progress = Progress(row, len(left))
    clock, tally = time.monotonic(), {"judged": 0, "killed": 0, "survived": 0}

    def judged(mutant: Mutant, outcome: MutantVerdict) -> None:
        if outcome.status == "not_covered" and mutant.file in elsewhere:
            outcome = replace(outcome, status=NOT_RUN_HERE, detail=elsewhere[mutant.file])
        outcomes[mutant.id(row)] = outcome
        recorded()

    def recorded() -> None:
        report.mutants = [MutantEntry(m.id(row), m.file, m.line, m.operator, m.diff, m.fingerprint, outcomes[m.id(row)]).to_data()
                          for m in chosen if m.id(row) in outcomes]
        save(report)

    def counted(mutant: Mutant, outcome: MutantVerdict) -> None:
        """A mutant judged now: recorded, shown on the progress line, and the row stopped once --budget is spent."""
        judged(mutant, outcome)
        tally["judged"] += 1
        if outcome.status in tally:
            tally[outcome.status] += 1
        progress.update(tally["judged"], {"killed": tally["killed"], "survived": tally["survived"]})
        if options.budget is not None and not external and time.monotonic() - clock > options.budget:
            raise _BudgetSpent

    try:
        _judge_left(sessions, config, gate_file, row, shown, files, options, left, changed, counted, report)
    except _BudgetSpent:
        baseline = sessions.folder(row) / "baseline.json"
        first = json.loads(baseline.read_text(encoding="utf-8")) if baseline.exists() else {}
        report.unmutated_failures = first.get("failing", {})
        report.known_bads = first.get("known_bads", []) if changed is None else []
        print(f"{row}: --budget {options.budget:g} s spent: "
              f"{len([m for m in chosen if m.id(row) not in outcomes])} mutants not judged")
    finally:
        progress.close()
    if not left:  # nothing to run: no session
        report.known_bads = earlier.known_bads if earlier else []
    report.unjudged = len([m for m in chosen if m.id(row) not in outcomes])
    recorded()
    return report


def _judge_left(sessions: Sessions, config: Config, gate_file: GateFile, row: str, shown: str, files: list[str],
                options: Options, left: list[Mutant], changed: dict[str, set[int]] | None,
                judged: Callable[[Mutant, MutantVerdict], None], report: MutationRowReport) -> None:
    """The mutants no earlier verdict covers, judged in the row's warm session (built first for an external one)."""
    external = options.impl != PYTHON
    if left and external:
        specs = _external_specs(config, gate_file, row, options, left, judged)
        if specs:
            built = {spec["id"] for spec in specs}
            first = sessions.judge(row, shown, [], specs, [m for m in left if m.id(row) in built],
                                   [g.id for g in gate_file.gates if g.operation], False, options.timeout, judged, options.impl,
                                   options.first_kill)
            report.unmutated_failures = first["failing"]
    elif left:
        warm = warm_plan(config, gate_file, files) if options.warm else None
        first = sessions.judge(row, shown, files, sessions.python_specs(row, files, left, warm), left,
                               _traced_gates(config, gate_file, {m.file for m in left}), changed is None, options.timeout, judged,
                               first_kill=options.first_kill, warm=warm, hang_factor=options.hang_factor)
        report.unmutated_failures = first["failing"]
        report.known_bads = first["known_bads"]


def _external_specs(config: Config, gate_file: GateFile, row: str, options: Options, left: list[Mutant],
                    judged: Callable[[Mutant, MutantVerdict], None]) -> list[dict[str, Any]]:
    """Each mutant of an external implementation built (cached under build/mutants/IMPL); one that does not build is
    judged not_compiling here. Building stops once --budget seconds are spent: the mutants after are not judged."""
    implementation = config.implementation(options.impl)
    assert implementation is not None
    try:
        builds = MutantBuilds(config.root, implementation, config.root / "build" / "mutants" / options.impl)
    except GatesError as error:
        raise MutationError(f"--impl {options.impl}: {error}") from None
    clock = time.monotonic()
    specs: list[dict[str, Any]] = []
    for mutant in left:
        if options.budget is not None and time.monotonic() - clock > options.budget:
            print(f"{row}: --budget {options.budget:g} s spent building mutants: {len(left) - len(specs)} not judged")
            break
        try:
            binary = builds.binary(mutant)
        except MutantDoesNotBuild as refused:
            judged(mutant, MutantVerdict("not_compiling", detail=str(refused)[-DETAIL_CHARS:]))
            continue
        specs.append({"id": mutant.id(row), "command": [str(binary), *implementation.command[1:]],
                      "gates": gates_reaching(config, gate_file, mutant.file)})
    return specs


def _earlier_report(path: Path) -> dict[str, Any] | None:
    """The report a rerun resumes from (None: no file yet); MutationError when the file `--json` names is not a
    mutation report, which gates mutate then refuses to overwrite."""
    if not path.exists():
        return None
    try:
        return read_report(path, f"--json {path}", MUTATION_SCHEMA, "mutation report", "the --json report of `gates mutate`",
                           MutationError)
    except MutationError as error:
        raise MutationError(f"{error}; not overwritten: name another file") from None


def run_mutate(project: Project, options: Options) -> int:
    """`gates mutate`: every row asked for (default: all), the report written after each mutant; 0 when it ran."""
    config = project.config
    rows = list(options.rows) or [r.id for r in project.roadmap.rows if r.id in project.paths]
    previous = _earlier_report(options.json_path)
    generator = ENGINE if options.impl == PYTHON else CPP_ENGINE
    tree, engine = tree_identity(config.root), engine_identity(config, generator)
    refused = _not_reusable(previous, tree, engine, options.first_kill) if previous is not None else None
    if refused:
        print(f"{options.json_path}: {refused}: nothing in it is reused")
        previous = None
    earlier = earlier_rows(previous)
    started, clock = datetime.now(timezone.utc).isoformat(timespec="seconds"), time.monotonic()
    done: list[MutationRowReport] = []
    meta = {"impl": options.impl, "engine": generator, "engine_fingerprint": engine, "tree": tree, "seed": options.seed,
            "started": started, "changed_since": options.changed_since, "first_kill": options.first_kill,
            "families": list(options.families) or None}

    def save(current: MutationRowReport) -> None:
        rows_now = done + ([current] if all(current is not row for row in done) else [])
        write_report(options.json_path, {**meta, "seconds": round(time.monotonic() - clock, 3)}, rows_now)

    gate_files: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="gates-mutate-") as work, _sigterm_as_interrupt():
        sessions = Sessions(config, Path(work), options.seed)
        memo = CompileMemo(config.root / "build" / "mutants" / "python-compiles.json")
        for row in rows:
            row_clock = time.monotonic()
            report = mutate_row(sessions, project, row, options, earlier.get(row), save, memo)
            memo.save()
            done.append(report)
            save(report)
            gate_file = project.gate_file(row)
            if gate_file is not None:
                gate_files.update({g.id: g.location.path for g in gate_file.gates})
            for line in summary_lines(report, time.monotonic() - row_clock) + survivor_lines(report, gate_files):
                print(line)
    print(f"mutation report: {options.json_path}")
    document = json.loads(options.json_path.read_text(encoding="utf-8")) if done else {"rows": []}
    if options.schema_report is not None:
        write_atomic(options.schema_report, json.dumps(schema_report(document, config.root), indent=1) + "\n")
        print(f"mutation-testing-report-schema report: {options.schema_report}")
    if options.annotations is not None:
        lines = "".join(line + "\n" for line in survivor_annotations(document))
        if options.annotations == "-":
            sys.stdout.write(lines)
        else:
            write_atomic(Path(options.annotations), lines)
            print(f"GitHub annotations of the survivors: {options.annotations}")
    return 0


def _not_reusable(previous: dict[str, Any], tree: str, engine: str, first_kill: bool) -> str | None:
    """Why an earlier report's verdicts cannot be reused at all (another tree, another engine, measured the other
    way), None when they may be, mutant by mutant."""
    if previous.get("tree") != tree:
        return f"measured on another tree ({previous.get('tree') or 'not recorded'}; this one is {tree})"
    if previous.get("engine_fingerprint") != engine:
        return f"measured by another engine version ({previous.get('engine_fingerprint') or 'not recorded'})"
    if bool(previous.get("first_kill")) != first_kill:
        return f"measured {'with' if previous.get('first_kill') else 'without'} --first-kill"
    return None
