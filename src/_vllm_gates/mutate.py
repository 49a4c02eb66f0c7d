"""`gates mutate [ROW…]` (issue 28 items 1-5): mutants of the implementation files a row's `sources:` names, each
judged by the gates whose items execute its line, in a fresh pytest run of its own (docs/mutation.md).

A first, unmutated pass per gate records the lines of those files its items execute (and which items pass at all);
then each mutant runs in a judge of its own whose processes load the mutated text in place of the file (an import
hook, mutate_hook; the file on disk is never edited). A mutant is killed only when a gate item that passed unmutated
fails or errors: a crash, hang or exit counts only as the gate reports it.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _vllm_gates import mutate_hook
from _vllm_gates.config import Config
from _vllm_gates.model import GateFile
from _vllm_gates.mutate_operators import Mutant, mutants
from _vllm_gates.mutate_report import (EQUIVALENTS_FILE, MutationError, Earlier, RowReport, earlier_rows, load_equivalents,
                                       stale_equivalents, summary_lines, survivor_lines, write_report)
from _vllm_gates.evidence import read_report
from _vllm_gates.mutation_evidence import MUTATION_SCHEMA, sources_fingerprint  # the one way `mutation:` claims read it too
from _vllm_gates.patterns import declared_files
from _vllm_gates.project import Project
from _vllm_gates.sources import gate_source_files, import_graph

ENGINE = "vllm-gates ast operators 1"  # the generator: mutate_operators (docs/mutation.md says why not mutmut/cosmic-ray)


@dataclass(frozen=True)
class Options:
    """What `gates mutate` was asked: rows, a cap per row, the per-mutant timeout, the report, changed lines only."""

    rows: tuple[str, ...]
    max_mutants: int | None
    timeout: float
    json_path: Path
    changed_since: str | None
    seed: int


@dataclass(frozen=True)
class GateRun:
    """What one pytest run of some gates' items left: each item's outcome by (gate, item); timed_out when stopped."""

    outcomes: dict[tuple[str, str], str]
    timed_out: bool


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


def _node_ids(shown: str, gate_file: GateFile, gates: list[str]) -> list[str]:
    """The case and properties items of ``gates`` (known-bads and the audit judge other targets, not the port)."""
    by_id = {gate.id: gate for gate in gate_file.gates}
    return [f"{shown}::{gate}::{name}" for gate in gates
            for name in [case.name for case in by_id[gate].cases] + (["properties"] if by_id[gate].properties else [])]


class Runner:
    """Starts the pytest runs of one `gates mutate` invocation, with the hook's sitecustomize on PYTHONPATH."""

    def __init__(self, config: Config, work: Path, seed: int):
        self.config, self.work, self.seed = config, work, seed
        (work / "hook").mkdir()
        (work / "hook" / "sitecustomize.py").write_text(mutate_hook.SITECUSTOMIZE, encoding="utf-8")

    def run(self, node_ids: list[str], extra: dict[str, str], timeout: float) -> GateRun:
        """One pytest run of ``node_ids``; the outcome of each item from its --gates-json report."""
        out = self.work / "run.json"
        out.unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
        env.update(extra, PYTHONPATH=os.pathsep.join(filter(None, [str(self.work / "hook"), env.get("PYTHONPATH")])))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--assert=plain", "--rootdir", str(self.config.root),
                   "--hypothesis-profile", mutate_hook.PROFILE, "--hypothesis-seed", str(self.seed), "--gates-json", str(out), *node_ids]
        log = self.work / "run.log"
        with open(log, "wb") as output:
            process = subprocess.Popen(command, cwd=self.config.root, env=env, stdout=output, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            _stop(process)
            return GateRun({}, timed_out=True)
        except BaseException:  # Ctrl-C or SIGTERM: its own session does not get the signal, so it is ended here
            _stop(process)
            raise
        try:
            report = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:]
            raise MutationError(f"a gate run wrote no report (exit {process.returncode}): {' '.join(node_ids[:3])}"
                                f"{' …' if len(node_ids) > 3 else ''}\n  " + "\n  ".join(tail)) from None
        return GateRun({(i["gate"], i["name"]): i["outcome"] for i in report.get("items", [])}, timed_out=False)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """The judge first (its lifeline then ends its workers), then whatever is left of its process group."""
    process.kill()
    process.wait()
    time.sleep(0.2)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value), encoding="utf-8")


def coverage(runner: Runner, shown: str, gate_file: GateFile, files: list[str], timeout: float
             ) -> tuple[dict[str, set[tuple[str, int]]], dict[str, set[str]], dict[str, list[str]]]:
    """Per gate: the (file, line) of ``files`` its items execute unmutated, the items that pass unmutated and those
    that fail or error unmutated (never counted as kills). A gate whose impl side imports none of ``files`` (found
    statically, as `gates affected` does) is not run: it reaches none of their lines."""
    root = runner.config.root
    real = {os.path.realpath(root / f): f for f in files}
    graph = import_graph(runner.config)
    reached: dict[str, set[tuple[str, int]]] = {}
    passing: dict[str, set[str]] = {}
    failing: dict[str, list[str]] = {}
    for gate in gate_file.gates:
        ids = _node_ids(shown, gate_file, [gate.id])
        imported = {os.path.realpath(p) for p in gate_source_files(graph, [r for r in (gate.impl, gate.build_impl) if r])}
        if not ids or not imported & set(real):
            continue
        lines_out, spec = runner.work / f"lines-{gate.id}.txt", runner.work / "trace.json"
        _write_json(spec, {"files": sorted(real), "out": str(lines_out)})
        result = runner.run(ids, {mutate_hook.TRACE_VARIABLE: str(spec)}, timeout * 4)
        if result.timed_out:
            raise MutationError(f"gate {gate.id}'s unmutated run took more than {timeout * 4:g} s (4 x --timeout): "
                                f"no line can be said to be covered; raise --timeout")
        passing[gate.id] = {name for (g, name), outcome in result.outcomes.items() if g == gate.id and outcome == "passed"}
        failing[gate.id] = sorted(name for (g, name), outcome in result.outcomes.items()
                                  if g == gate.id and outcome in ("failed", "error"))
        text = lines_out.read_text(encoding="utf-8") if lines_out.exists() else ""
        reached[gate.id] = {(real[p], int(n)) for p, n in (l.split("\t") for l in text.splitlines()) if p in real}
    return reached, passing, {gate: items for gate, items in failing.items() if items}


def known_bads(runner: Runner, shown: str, gate_file: GateFile, timeout: float) -> list[dict[str, Any]]:
    """Each hand-written known-bad and whether its item rejected it (the kill matrix's other half)."""
    ids = [f"{shown}::{g.id}::known_bad[{kb.name}]" for g in gate_file.gates for kb in g.known_bad]
    if not ids:
        return []
    result = runner.run(ids, {}, timeout * 4)
    if result.timed_out:
        raise MutationError(f"row {gate_file.row}'s known-bad items took more than {timeout * 4:g} s (4 x --timeout)")
    outcome = {(g.id, kb.name): result.outcomes.get((g.id, f"known_bad[{kb.name}]"), "not run")
               for g in gate_file.gates for kb in g.known_bad}
    return [{"gate": g.id, "name": kb.name, "outcome": outcome[(g.id, kb.name)],
             "killed_by": {"gate": g.id, "item": f"known_bad[{kb.name}]"} if outcome[(g.id, kb.name)] == "passed" else None}
            for g in gate_file.gates for kb in g.known_bad]


def judge_mutant(runner: Runner, shown: str, gate_file: GateFile, mutant: Mutant, gates: list[str],
                 passing: dict[str, set[str]], timeout: float) -> dict[str, Any]:
    """Run the covering gates' items against ``mutant``: its status, the first item that failed and every gate that did."""
    root = runner.config.root
    source, failed, spec = runner.work / "mutant.py", runner.work / "import-failed", runner.work / "mutant.json"
    source.write_text(mutant.source, encoding="utf-8")
    failed.unlink(missing_ok=True)
    _write_json(spec, {"path": os.path.realpath(root / mutant.file), "source": str(source), "failed": str(failed)})
    ids = [i for i in _node_ids(shown, gate_file, gates) if i.rsplit("::", 1)[1] in passing[i.split("::")[1]]]
    result = runner.run(ids, {mutate_hook.MUTANT_VARIABLE: str(spec)}, timeout)
    if failed.exists():
        return {"status": "not_compiling", "killed_by": None, "killing_gates": []}
    if result.timed_out:
        return {"status": "timed_out", "killed_by": None, "killing_gates": []}
    failures = [(g, name) for g in gates for name in [i.rsplit("::", 1)[1] for i in ids if i.split("::")[1] == g]
                if result.outcomes.get((g, name)) in ("failed", "error")]
    killing = list(dict.fromkeys(g for g, _ in failures))
    if not failures:
        return {"status": "survived", "killed_by": None, "killing_gates": []}
    return {"status": "killed", "killed_by": {"gate": failures[0][0], "item": failures[0][1]}, "killing_gates": killing}


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


def _generate(config: Config, row: str, files: list[str], changed: dict[str, set[int]] | None) -> list[Mutant]:
    found: list[Mutant] = []
    for file in files:
        try:
            text = (config.root / file).read_text(encoding="utf-8")
            found += mutants(file, text, None if changed is None else changed.get(file, set()))
        except SyntaxError as exc:
            raise MutationError(f"row {row}: {file}:{exc.lineno}: does not parse: {exc.msg}") from None
    return found


def mutate_row(runner: Runner, project: Project, row: str, options: Options, earlier: Earlier | None,
               save: Any) -> RowReport:
    """One row: generate, cover, judge each mutant (reusing an earlier report's measurements), saving after each."""
    config = project.config
    gate_file = project.gate_file(row)
    if gate_file is None:
        raise MutationError(f"row {row} has no gate file that loads")
    shown = config.relative(project.paths[row]) or str(project.paths[row])
    files = mutable_files(config, gate_file)
    if not files:
        raise MutationError(f"row {row}: its sources {list(gate_file.sources)} name no Python file of the "
                            f"implementation to mutate (oracle files and the gate files' folder are not mutated)")
    changed = changed_lines(config.root, options.changed_since, files) if options.changed_since else None
    found = _generate(config, row, files, changed)
    chosen = _sample(found, options.max_mutants, options.seed)
    folder = _row_folder(config, gate_file)
    report = RowReport(row, sources_fingerprint(config.root, files), _gates_fingerprint(folder),
                       [g.id for g in gate_file.gates], files=list(files))
    save(report)
    declared = load_equivalents(folder / EQUIVALENTS_FILE)
    report.stale_equivalents = [{"id": e.id, "reason": e.reason, "fingerprint": e.fingerprint}
                                for e in stale_equivalents(declared, {m.fingerprint for m in found})]
    equivalent = {e.fingerprint for e in declared}
    reuse = {m.fingerprint: earlier.reusable(report.sources_fingerprint, report.gates_fingerprint, m.id(row),
                                             m.fingerprint) if earlier else None for m in chosen}
    if all(reuse[m.fingerprint] or m.fingerprint in equivalent for m in chosen):  # nothing to run: no first pass
        reached: dict[str, set[tuple[str, int]]] = {}
        passing: dict[str, set[str]] = {}
        report.known_bads = earlier.known_bads if earlier else []
    else:
        mutated = sorted({m.file for m in chosen if not reuse[m.fingerprint] and m.fingerprint not in equivalent})
        reached, passing, report.unmutated_failures = coverage(runner, shown, gate_file, mutated, options.timeout)
        report.known_bads = [] if changed is not None else known_bads(runner, shown, gate_file, options.timeout)
    for mutant in chosen:
        record = {"id": mutant.id(row), "file": mutant.file, "line": mutant.line, "operator": mutant.operator,
                  "diff": mutant.diff, "fingerprint": mutant.fingerprint}
        before = reuse[mutant.fingerprint]
        if mutant.fingerprint in equivalent:
            outcome: dict[str, Any] = {"status": "equivalent", "killed_by": None, "killing_gates": [], "gates_run": []}
        elif before:
            outcome = {k: before.get(k) for k in ("status", "killed_by", "killing_gates", "gates_run")}
        else:
            gates = [g for g, lines in reached.items() if (mutant.file, mutant.line) in lines and passing[g]]
            outcome = {"status": "not_covered", "killed_by": None, "killing_gates": []} if not gates else \
                judge_mutant(runner, shown, gate_file, mutant, gates, passing, options.timeout)
            outcome["gates_run"] = gates
        report.mutants.append({**record, **outcome})
        save(report)
    return report


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
    earlier = earlier_rows(_earlier_report(options.json_path))
    started, clock = datetime.now(timezone.utc).isoformat(timespec="seconds"), time.monotonic()
    done: list[RowReport] = []
    meta = {"impl": "python", "engine": ENGINE, "seed": options.seed, "started": started,
            "changed_since": options.changed_since}

    def save(current: RowReport) -> None:
        rows_now = done + ([current] if all(current is not row for row in done) else [])
        write_report(options.json_path, {**meta, "seconds": round(time.monotonic() - clock, 3)}, rows_now)

    gate_files: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="gates-mutate-") as work:
        runner = Runner(config, Path(work), options.seed)
        for row in rows:
            row_clock = time.monotonic()
            report = mutate_row(runner, project, row, options, earlier.get(row), save)
            done.append(report)
            save(report)
            gate_file = project.gate_file(row)
            if gate_file is not None:
                gate_files.update({g.id: g.location.path for g in gate_file.gates})
            for line in summary_lines(report, time.monotonic() - row_clock) + survivor_lines(report, gate_files):
                print(line)
    print(f"mutation report: {options.json_path}")
    return 0
