"""`gates run --shard I/N` (docs/evidence.md): a deterministic slice of the selected gates (shards.py), its
node ids and seed handed to pytest and its plan recorded in the report's `meta`, the evidence `gates verdict` merges."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from _vllm_gates.run.features import RunOption, RunPlan, hookimpl

SHARD = RunOption("shard", "run shard I of N (from 1): a deterministic slice of the selected gates, a gate with its "
                           "upstream legs kept whole; needs --json, its evidence for `gates verdict`",
                  metavar="I/N", pytest=False)
SHARD_DURATIONS = RunOption("shard-durations", "an earlier run's --json report: --shard balances the shards by the "
                                               "durations it recorded (default: by item count; repeatable; every shard "
                                               "must be given the same files)", metavar="F", repeat=True, pytest=False)


@hookimpl
def gates_add_options() -> list[RunOption]:
    return [SHARD, SHARD_DURATIONS]


@hookimpl
def gates_plan_run(plan: RunPlan, args: Any, project: Any) -> RunPlan | None:
    """The shard's node ids, seed and record (shards.shard_run); a usage error naming the flag and its value."""
    given, durations = getattr(args, SHARD.dest), getattr(args, SHARD_DURATIONS.dest)
    if durations and not given:
        raise plan.refused(f"--shard-durations {durations[0]}: balances the shards of --shard I/N; give --shard with it")
    if not given:
        return None
    from _vllm_gates.run.pick import item_names
    from _vllm_gates.run.pytest_compat import marker_expression
    from _vllm_gates.run.shards import ShardError, groups, parse_shard, recorded_durations, shard_run

    try:
        shard = parse_shard(given)
        if args.gate or args.case:
            raise ShardError(f"--shard {given}: a shard is a slice of whole rows; it cannot be combined with --gate or --case")
        if not args.json:
            raise ShardError(f"--shard {given}: a shard's evidence is its JSON report: give --json F")
        keeps = (lambda markers: True) if args.marker == "all" else marker_expression(args.marker)
        rows = list(plan.rows)
        found = groups(project, rows or None, keeps, item_names)
        impl = plan.impl or "python"
        selection = {"rows": rows or None, "marker": args.marker, "impl": impl, "changed_since": args.changed_since}
        run = shard_run(project, shard, found, recorded_durations(durations), selection, impl, args.seed)
    except ShardError as error:
        raise plan.refused(str(error)) from None
    return replace(plan, targets=run.node_ids, seed=run.seed, meta={**plan.meta, "shard": run.record})
