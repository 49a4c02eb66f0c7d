"""The warm session of `gates mutate` (docs/mutation.md, "How a mutant is judged"): one pytest session of a row's gate file
judges the unmutated gates once, then every mutant in turn with the items it collected once, restarting only the
workers that imported a mutated file (mutate_hook notes which did).

Loaded with `-p _vllm_gates.frontends.mutate_session` by mutate.py, which writes the plan (the file VLLM_GATES_MUTATION_PLAN
names) and reads the events this session appends, one JSON object a line, so that it can stop a session stuck on one
mutant and start another for the rest. Nothing here runs judged code: the workers do.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from _vllm_gates.base.errors import GatesError
from _vllm_gates.frontends.plugin import gate_run
from _vllm_gates.mutation.mutate_hook import PLAN_VARIABLE, hook_errors
from _vllm_gates.results.mutation_records import Kill, KnownBadVerdict, MutantVerdict
from _vllm_gates.results.records import ItemKind
from _vllm_gates.run.items import RECORD, CaseItem, GateItem
from _vllm_gates.run.pytest_compat import run_again
from _vllm_gates.workers.worker_pool import WorkerPool

DETAIL_CHARS = 400  # of a killing item's failure text kept in the report


class HookFailed(GatesError):
    """A worker could not apply the control file: the session stops, since an unapplied mutant would look survived."""


@dataclass(frozen=True)
class ItemRun:
    """One item's run: passed, failed (a failure or an error in any phase) or skipped; what it said when it failed."""

    status: str
    detail: str = ""


@dataclass
class Session:
    """What this session judges, and the files it talks through."""

    plan: dict[str, Any]
    pool: WorkerPool
    by_gate: dict[str, list[GateItem]] = field(default_factory=dict)  # case and properties items, in file order
    known_bads: list[GateItem] = field(default_factory=list)

    def event(self, **fields: Any) -> None:
        with open(self.plan["events"], "a", encoding="utf-8") as handle:
            handle.write(json.dumps(fields) + "\n")

    def control(self, mutant: dict[str, str] | None = None, trace: str | None = None) -> None:
        """What workers apply from their next import of a watched file on; those that imported one already hold its
        text as it was, and are ended now (a worker that never imports one, an oracle's, is kept)."""
        text = json.dumps({"watch": self.plan["watch"], "touched": self.plan["touched"], "mutant": mutant, "trace": trace,
                           **self.plan.get("warm_control", {})})
        temporary = self.plan["control"] + ".new"
        Path(temporary).write_text(text, encoding="utf-8")
        os.replace(temporary, self.plan["control"])
        touched = Path(self.plan["touched"])
        pids = {int(line.split("\t", 1)[0]) for line in touched.read_text(encoding="utf-8").splitlines() if line} \
            if touched.exists() else set()
        for key, worker in list(self.pool.workers.items()):
            if worker.pid in pids:
                self.pool.discard(key)
        touched.write_text("", encoding="utf-8")
        self.pool.refused.clear()  # a mutant that did not import refused its workers' first check: not the next one

    def warm_up(self, now: bool = True) -> None:
        """From here on (the first pass done), the impl role's workers fork from a server that imported the impl's
        modules unmutated, from disk, without the hook (mutate_warm); ``now`` False: started, not yet used (the first
        pass traces the imports of fresh workers)."""
        if self.plan.get("warm_modules") is not None:
            if now:
                self.control()  # a worker forked from it reads no earlier mutant
            self.pool.use_warm(tuple(self.plan["warm_modules"]), now)

    def limit(self, baseline: dict[str, Any], gate: str, item: str) -> None:
        """Tell mutate.py how long this item may take: its unmutated seconds times the hang factor, at least the
        floor (the session's --timeout still bounds the whole mutant)."""
        hang = self.plan.get("hang")
        if hang:
            unmutated = baseline.get("item_seconds", {}).get(gate, {}).get(item)
            seconds = hang["floor"] if unmutated is None else max(hang["floor"], hang["factor"] * unmutated)
            self.event(event="limit", seconds=round(seconds, 3))

    def check_hook(self) -> None:
        errors = Path(hook_errors(self.plan["control"]))
        if errors.exists():
            raise HookFailed(errors.read_text(encoding="utf-8").strip()[:2000])


def item_run(item: GateItem) -> ItemRun:
    """Run ``item`` once more: failed when any phase failed (the first failure's text), skipped, else passed."""
    reports = run_again(item)
    failed = next((r for r in reports if r.failed), None)
    if failed is not None:
        return ItemRun("failed", failed.longreprtext.strip()[:DETAIL_CHARS])
    return ItemRun("skipped" if any(r.skipped for r in reports) else "passed")


def first_pass(session: Session, work: Path) -> dict[str, Any]:
    """Each traced gate's items unmutated, with the lines of the watched files its workers execute; then the
    known-bads, each with the item that rejected it."""
    passing: dict[str, list[str]] = {}
    failing: dict[str, list[str]] = {}
    reached: dict[str, list[tuple[str, int]]] = {}
    seconds: dict[str, float] = {}
    item_seconds: dict[str, dict[str, float]] = {}
    traced = not session.plan.get("external")  # an external implementation's lines are not traced: mutants name their gates
    for number, gate in enumerate(g for g in session.by_gate if g in session.plan["trace_gates"]):
        clock = time.monotonic()
        lines = work / f"lines-{number}.txt"
        if traced:
            session.control(trace=str(lines))
        outcomes = {}
        for item in session.by_gate[gate]:
            started = time.monotonic()
            outcomes[item.name] = item_run(item)
            item_seconds.setdefault(gate, {})[item.name] = round(time.monotonic() - started, 3)
        session.check_hook()
        passing[gate] = [name for name, found in outcomes.items() if found.status == "passed"]
        failing[gate] = [name for name, found in outcomes.items() if found.status == "failed"]
        text = lines.read_text(encoding="utf-8") if lines.exists() else ""
        reached[gate] = sorted({(path, int(line)) for path, line in (entry.split("\t") for entry in text.splitlines())})
        seconds[gate] = round(time.monotonic() - clock, 3)
        session.event(event="first-pass", gate=gate, seconds=seconds[gate])
    if traced:
        session.control()
    session.warm_up()  # its server imports while the known-bads run
    known = []
    for item in session.known_bads if session.plan["known_bads"] else []:
        found = item_run(item)
        record = item.stash.get(RECORD, None)
        rejected = found.status == "passed" and record is not None
        known.append(KnownBadVerdict(item.identity.gate, item.name.removeprefix("known_bad[").removesuffix("]"), found.status,
                                     Kill(item.identity.gate, record.rejected_item or item.name, record.rejected_by[:DETAIL_CHARS])
                                     if rejected and record is not None else None).to_data())
    return {"passing": passing, "failing": {g: names for g, names in failing.items() if names}, "reached": reached,
            "known_bads": known, "seconds": seconds, "item_seconds": item_seconds}


def judge(session: Session, baseline: dict[str, Any], mutant: dict[str, Any]) -> MutantVerdict:
    """The mutant against the items that passed unmutated, of the gates that executed its line (an external
    implementation's mutant names the gates that can reach it): each gate stops at its first failing item, and with
    `first_kill` the mutant at its first failing gate. Killed when one fails, not_compiling when importing the
    mutated module raised."""
    if "command" in mutant:
        gates = [g for g in session.by_gate if g in mutant["gates"] and baseline["passing"].get(g)]
    else:
        where = [mutant["path"], mutant["line"]]
        gates = [g for g in session.by_gate if where in [list(w) for w in baseline["reached"].get(g, [])]
                 and baseline["passing"].get(g)]
    if not gates:
        return MutantVerdict("not_covered")
    if "command" in mutant:
        session.pool.use_external(tuple(mutant["command"]))
    else:
        Path(mutant["failed"]).unlink(missing_ok=True)
        session.control(mutant={"path": mutant["path"], "source": mutant["source"], "failed": mutant["failed"],
                                "purge": mutant.get("purge", [])})
    failures: list[tuple[str, str, str]] = []
    if session.plan.get("first_kill"):  # the cheapest gates first (their unmutated seconds); the first kill ends it
        gates = sorted(gates, key=lambda g: baseline["seconds"].get(g, 0.0))
    for gate in gates:
        for item in (i for i in session.by_gate[gate] if i.name in baseline["passing"][gate]):
            session.limit(baseline, gate, item.name)
            found = item_run(item)
            if found.status == "failed":
                failures.append((gate, item.name, found.detail))
                break
        if failures and session.plan.get("first_kill"):
            break
        if "failed" in mutant and os.path.exists(mutant["failed"]):
            break
    session.check_hook()
    if "failed" in mutant and os.path.exists(mutant["failed"]):
        return MutantVerdict("not_compiling", gates_run=tuple(gates))
    if not failures:
        return MutantVerdict("survived", gates_run=tuple(gates))
    gate, name, detail = failures[0]
    return MutantVerdict("killed", Kill(gate, name, detail), tuple(g for g, _, _ in failures), tuple(gates))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """Instead of running each item once: the first pass (or the one an earlier session saved), then each mutant."""
    path = os.environ.get(PLAN_VARIABLE)
    run = gate_run(session.config)
    if not path or run is None:
        return None
    plan = json.loads(Path(path).read_text(encoding="utf-8"))
    run.keep_workers()  # no worker is retired as a file's items end: they run again and again
    state = Session(plan, run.pool)
    broken = [item for item in session.items if isinstance(item, GateItem) and item.identity.kind == ItemKind.DEFINITION]
    if broken:
        state.event(event="error", message="the gate file does not load unmutated: " + "; ".join(
            str(problem) for item in broken for problem in getattr(item, "problems", []))[:2000])
        return True
    for item in session.items:
        if isinstance(item, CaseItem):  # no calls sent ahead: a gate stops at its first failing item, leaving them unclaimed
            item.run_of = ((), 0)
        if isinstance(item, GateItem) and item.identity.kind in (ItemKind.CASE, ItemKind.PROPERTIES):
            state.by_gate.setdefault(item.identity.gate, []).append(item)
        elif isinstance(item, GateItem) and item.identity.kind == ItemKind.KNOWN_BAD:
            state.known_bads.append(item)
    try:
        state.check_hook()
        state.warm_up(now=False)  # its server imports torch and the impl beside the first pass
        baseline_file = Path(plan["baseline"])
        if baseline_file.exists():
            baseline = json.loads(baseline_file.read_text(encoding="utf-8"))
            state.warm_up()
        else:
            baseline = first_pass(state, Path(plan["work"]))
            if baseline["failing"] and not any(baseline["passing"].values()):  # skipped everywhere is no error
                state.event(event="error", message=f"no item of the gates {plan['trace_gates']} passes unmutated "
                                                   f"(failing: {baseline['failing']}): no mutant can be judged")
                return True
            baseline_file.with_suffix(".new").write_text(json.dumps(baseline), encoding="utf-8")
            os.replace(baseline_file.with_suffix(".new"), baseline_file)
        state.event(event="first-pass-done")
        for mutant in plan["mutants"]:
            state.event(event="start", id=mutant["id"])
            clock = time.monotonic()
            result = judge(state, baseline, mutant)
            state.event(event="done", id=mutant["id"], **replace(result, seconds=round(time.monotonic() - clock, 3)).to_data())
    except HookFailed as failed:
        state.event(event="error", message=f"the mutation hook failed in a worker: {failed}")
        return True
    state.event(event="end")
    return True
