"""`gates run --shard I/N` (docs/evidence.md, "Shards"): a deterministic slice of the selected gates, balanced by
the durations earlier run reports recorded (by item count where none did), a gate never split from its upstream
legs; the plan of every shard is recorded in the shard's report, so `gates verdict` can check the shards add up.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _vllm_gates.base.errors import GatesError
from _vllm_gates.definitions.model import Gate
from _vllm_gates.definitions.project import Project
from _vllm_gates.run.evidence import EvidenceError, read_run_report
from _vllm_gates.run.fingerprints import Fingerprinter

_SHARD = re.compile(r"([0-9]+)/([0-9]+)")


class ShardError(GatesError):
    """A --shard or --shard-durations the run cannot use; the message names the flag and the value."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``I/N`` with 1 <= I <= N; ShardError naming --shard and the text otherwise."""
    found = _SHARD.fullmatch(text.strip())
    if found is None:
        raise ShardError(f"--shard {text!r}: expected I/N, shard I of N counted from 1 (e.g. --shard 1/4)")
    index, count = int(found.group(1)), int(found.group(2))
    if count < 1:
        raise ShardError(f"--shard {text!r}: the number of shards N must be at least 1")
    if not 1 <= index <= count:
        raise ShardError(f"--shard {text!r}: the shard I must be between 1 and N={count} (shards are counted from 1)")
    return Shard(index, count)


@dataclass(frozen=True)
class ShardGroup:
    """Gates that run in one shard: a gate with its upstream legs (`leg_of`), their known-bad hunts inside them; or
    the definition-error item of a gate (``definition[ID]``) or of a whole row (``<file>``) that does not load."""

    row: str
    gates: tuple[str, ...]
    node_ids: tuple[str, ...]
    items: int

    @property
    def key(self) -> str:
        return f"{self.row}::{self.gates[0]}"


def groups(project: Project, rows: Collection[str] | None, keeps: Callable[[tuple[str, ...]], bool],
           items_of: Callable[[Gate], list[str]]) -> list[ShardGroup]:
    """The groups of the rows (all when None) whose gates the marker filter ``keeps``, in gate-file order;
    ``items_of``: a gate's item names (pick.item_names)."""
    config = project.config
    found: list[ShardGroup] = []
    for gate_file in project.gate_files:
        if rows is not None and gate_file.row not in rows:
            continue
        shown = config.relative(Path(gate_file.path)) or gate_file.path
        members: dict[str, list[Gate]] = {}
        for gate in gate_file.gates:
            members.setdefault(gate.leg_of or gate.id, []).append(gate)
        for gates in members.values():
            kept = [gate for gate in gates if keeps(gate.markers)]
            if kept:
                found.append(ShardGroup(gate_file.row, tuple(g.id for g in kept), tuple(f"{shown}::{g.id}" for g in kept),
                                   sum(len(items_of(g)) for g in kept)))
        for broken in gate_file.broken_gates:  # a gate that does not load: its one definition-error item (ERROR)
            found.append(ShardGroup(gate_file.row, (f"definition[{broken.id}]",), (f"{shown}::definition[{broken.id}]",), 1))
    for row, (path, _) in sorted(project.broken.items()):
        if rows is None or row in rows:  # its one definition-error item: a group of its own
            found.append(ShardGroup(row, ("<file>",), (config.relative(path) or str(path),), 1))
    return found


def recorded_durations(paths: list[str]) -> dict[tuple[str, str], float]:
    """Seconds per gate, summed over its items, from earlier run reports (`--shard-durations F`); a gate in several
    reports counts its last. ShardError naming the file that is not a run report."""
    found: dict[tuple[str, str], float] = {}
    for shown in paths:
        try:
            report = read_run_report(Path(shown), shown, "--shard-durations")
        except EvidenceError as error:
            raise ShardError(str(error)) from None
        this: dict[tuple[str, str], float] = {}
        for item in report.items:
            this[(item.row, item.gate)] = this.get((item.row, item.gate), 0.0) + item.duration
        found.update(this)
    return found


def weights(found: list[ShardGroup], durations: Mapping[tuple[str, str], float]) -> dict[str, float]:
    """Each group's weight: its recorded seconds; a group none recorded weighs its items at the recorded mean per
    item (by its item count alone where nothing was recorded)."""
    known = {g.key: sum(durations[(g.row, gate)] for gate in g.gates if (g.row, gate) in durations) for g in found
             if any((g.row, gate) in durations for gate in g.gates)}
    counted = sum(g.items for g in found if g.key in known)
    per_item = sum(known.values()) / counted if counted and sum(known.values()) > 0 else 1.0
    return {g.key: known.get(g.key, g.items * per_item) for g in found}


def plan(found: list[ShardGroup], count: int, weight: Mapping[str, float]) -> list[list[str]]:
    """The groups of each shard: heaviest first, each to the lightest shard so far (the lowest index on a tie);
    the same on every machine given the same groups and weights."""
    shards: list[list[str]] = [[] for _ in range(count)]
    loads = [0.0] * count
    for group in sorted(found, key=lambda g: (-weight[g.key], g.key)):
        lightest = min(range(count), key=lambda i: (loads[i], i))
        shards[lightest].append(group.key)
        loads[lightest] += weight[group.key]
    return shards


def tree(project: Project, impl: str, found: list[ShardGroup]) -> str:
    """The sha256 of every selected gate's fingerprint: two shards of one tree agree on it."""
    maker, roadmap = Fingerprinter(project.config, impl), project.roadmap
    by_row = {gf.row: gf for gf in project.gate_files}
    lines = []
    for group in found:
        gate_file = by_row.get(group.row)
        if gate_file is None:
            continue
        for gate in (g for g in gate_file.gates if g.id in group.gates):
            lines.append(f"{group.row}::{gate.id} {maker.gate(gate_file, gate, roadmap.row(group.row)).fingerprint}")
    return hashlib.sha256("\n".join(sorted(lines)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ShardRun:
    """What one shard runs (its node ids), the run seed its examples draw from (--seed, or the tree's) and the record
    its report carries (`meta.shard`)."""

    node_ids: list[str]
    seed: int
    record: dict[str, Any]


def shard_run(project: Project, shard: Shard, found: list[ShardGroup], durations: Mapping[tuple[str, str], float],
              selection: Mapping[str, Any], impl: str, given_seed: int | None) -> ShardRun:
    """Shard ``shard`` of the groups ``found``; ShardError when there are fewer groups than shards (a shard would
    run nothing). Shards without --seed share one taken from the tree's hash, whatever the profile: each run would
    otherwise draw its own, and the profile in force is only known inside the run (a derandomized one ignores it)."""
    if len(found) < shard.count:
        raise ShardError(f"--shard {shard.label}: the selection has {len(found)} group(s) of gates that run together, "
                         f"fewer than {shard.count} shards (use at most --shard I/{max(len(found), 1)})")
    weight = weights(found, durations)
    shards = plan(found, shard.count, weight)
    by_key = {g.key: g for g in found}
    mine = shards[shard.index - 1]
    digest = tree(project, impl, found)
    seed = given_seed if given_seed is not None else int(digest[:8], 16) % 10**9
    record = {"index": shard.index, "count": shard.count, "tree": digest,
              "selection": dict(selection), "balanced_by": "durations" if durations else "items",
              "plan": [[{"group": key, "gates": list(by_key[key].gates), "weight": round(weight[key], 6)} for key in keys]
                       for keys in shards]}
    return ShardRun([node for key in mine for node in by_key[key].node_ids], seed, record)


def selection_text(selection: Mapping[str, Any]) -> str:
    """A selection as one line for messages."""
    return json.dumps(dict(selection), sort_keys=True)
