"""`gates verdict --evidence shard-*.json` (docs/evidence.md, "Shards"): the shards of one `gates run --shard I/N`
add up to the run they split, or are refused: shards of different trees, seeds or selections, and shards that
overlap, are usage errors naming them; a shard missing (or a gate its plan gave it and it did not run) leaves
claims unproven, never green.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _vllm_gates.base.errors import GatesError
from _vllm_gates.run.evidence import read_run_report


class ShardsRefused(GatesError):
    """Evidence shards that do not belong together; the message names the files and what differs."""


@dataclass(frozen=True)
class ShardFile:
    """One evidence file that a shard wrote: its record (`meta.shard`), seed and profile, and the gates it ran."""

    shown: str
    record: Mapping[str, Any]
    seed: Any
    profile: Any
    executed: frozenset[str]  # ROW::GATE of each gate it ran whole


@dataclass(frozen=True)
class Merged:
    """The shards of one run, checked: the rows they selected and what is missing (empty: every shard, whole)."""

    count: int
    rows: tuple[str, ...]
    missing: tuple[str, ...]


def shard_files(paths: list[str]) -> list[ShardFile]:
    """The evidence files written by `gates run --shard` (others are plain evidence, not checked here)."""
    found = []
    for shown in paths:
        report = read_run_report(Path(shown), shown)
        record = report.meta.get("shard")
        if not isinstance(record, dict):
            continue
        executed = frozenset(f"{gate.row}::{gate.gate}" for gate in report.gates() if gate.executed and not gate.partial)
        found.append(ShardFile(shown, record, report.meta.get("seed"), report.meta.get("profile"), executed))
    return found


_SAME = (("tree", "trees", lambda f: f.record.get("tree")),
         ("seed", "seeds", lambda f: (f.profile, f.seed)),
         ("selection", "selections", lambda f: (f.record.get("count"), f.record.get("selection"))),
         ("plan", "plans (--shard-durations differ)", lambda f: f.record.get("plan")))


def merge(files: list[ShardFile]) -> Merged | None:
    """The shards checked against each other (None: no shard among the evidence); ShardsRefused naming the first
    two files that differ in tree, seed, selection or plan, or that overlap, or a file whose record is malformed."""
    if not files:
        return None
    for found in files:
        _check_record(found)
    first = files[0]
    for what, plural, value in _SAME:
        for other in files[1:]:
            if value(other) != value(first):
                raise ShardsRefused(f"--evidence {first.shown} and {other.shown} are shards of different {plural}: "
                                    f"{what} {_shown(value(first))} against {_shown(value(other))}")
    count, plan = int(first.record["count"]), first.record["plan"]
    by_index: dict[int, ShardFile] = {}
    for found in files:
        index = int(found.record["index"])
        if index in by_index:
            raise ShardsRefused(f"--evidence {by_index[index].shown} and {found.shown} overlap: both are shard {index}/{count}")
        by_index[index] = found
    ran: dict[str, ShardFile] = {}
    for found in files:
        for gate in sorted(found.executed):
            if gate in ran:
                raise ShardsRefused(f"--evidence {ran[gate].shown} and {found.shown} overlap: both ran gate {gate}")
            ran[gate] = found
    missing = [line for index in range(1, count + 1) for line in _unproven(index, count, plan, by_index.get(index))]
    rows = first.record.get("selection", {}).get("rows")
    return Merged(count, tuple(rows or ()), tuple(missing))


def _unproven(index: int, count: int, plan: Any, found: ShardFile | None) -> list[str]:
    """What shard ``index`` of the plan left unproven (all of it when its file is missing); ShardsRefused where it
    ran a gate the plan gives another shard."""
    planned = [f"{group['group'].split('::')[0]}::{gate}" for group in plan[index - 1] for gate in group["gates"]]
    if found is None:
        return [f"shard {index}/{count} is missing: {len(planned)} gate(s) unproven "
                f"({', '.join(planned[:3])}{', ...' if len(planned) > 3 else ''})"]
    missing = []
    for gate in planned:  # what does not load (definition[ID], <file>) is judged ERROR from the tree, not a shard
        if gate not in found.executed and not gate.endswith("::<file>") and "::definition[" not in gate:
            missing.append(f"{found.shown} (shard {index}/{count}) did not run {gate}")
    whole_rows = {gate.removesuffix("::<file>") for gate in planned if gate.endswith("::<file>")}  # every gate of it
    for gate in sorted(g for g in found.executed - set(planned) if g.split("::")[0] not in whole_rows):
        raise ShardsRefused(f"--evidence {found.shown} ran {gate}, which the plan gives another shard")
    return missing


def _check_record(found: ShardFile) -> None:
    """``meta.shard`` as `gates run --shard` writes it: index within count, a plan of count shards of groups."""
    record, problem = found.record, ""
    try:
        index, count, plan = int(record["index"]), int(record["count"]), record["plan"]
        if not 1 <= index <= count or len(plan) != count:
            problem = f"index {index} of {count} with a plan of {len(plan)} shards"
        elif not all(isinstance(g["group"], str) and all(isinstance(x, str) for x in g["gates"]) for s in plan for g in s):
            problem = "a group of its plan without its name and gates"
    except (KeyError, TypeError, ValueError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        raise ShardsRefused(f"--evidence {found.shown}: malformed meta.shard ({problem})")


def _shown(value: Any) -> str:
    """A differing value, short: a tree's hash abbreviated, a plan by its size."""
    if isinstance(value, str) and len(value) == 64:
        return value[:12]
    if isinstance(value, list):
        return f"of {sum(len(shard) for shard in value)} groups in {len(value)} shards ({str(value)[:120]}...)"
    return repr(value)
