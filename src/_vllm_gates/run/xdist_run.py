"""A gate run split across pytest-xdist workers (`pytest -n N`, README "CI"): the workers run their share of the items
and send what they collected and what each item checked; the controller alone judges and writes the reports, so
the verdicts, reports and exit code are those of a serial run.

Each gate item's report carries its identity and record in ``user_properties`` (xdist sends them with the report);
each worker's collection (the gate files, the items every gate declares, the broken rows) reaches the controller in
``workeroutput`` when the worker finishes. A worker that dies leaves its gates' items missing: INCOMPLETE, never a pass.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from _vllm_gates.results.outcomes import SkipCause, from_data, to_data
from _vllm_gates.results.records import ItemIdentity, ItemRecord
from _vllm_gates.run.profiles import current_profile_name

if TYPE_CHECKING:
    from _vllm_gates.run.session import GateRun

KEY = "vllm_gates"
SEED_KEY = "vllm_gates_seed"  # the controller's run seed, in each worker's workerinput


def is_worker(config: pytest.Config) -> bool:
    """This process is an xdist worker: it runs items, the controller judges."""
    return hasattr(config, "workerinput")


def is_controller(config: pytest.Config) -> bool:
    """This process distributes the items to xdist workers and runs none itself (``-n N`` sets ``--dist load``)."""
    return not is_worker(config) and getattr(config.option, "dist", "no") != "no"


def attach(report: pytest.TestReport, identity: ItemIdentity, record: ItemRecord | None, cause: SkipCause | None) -> None:
    """Put what the controller needs of a gate item's phase into its report."""
    payload: dict[str, Any] = {"identity": identity.to_data()}
    if record is not None:
        payload["record"] = record.to_data()
    if cause is not None:
        payload["cause"] = to_data(cause)
    report.user_properties.append((KEY, payload))


def payload_of(report: pytest.TestReport) -> tuple[ItemIdentity, ItemRecord | None, SkipCause | None] | None:
    """The identity, record and skip cause a worker attached to this report, or None (not a gate item)."""
    found = next((value for name, value in getattr(report, "user_properties", ()) if name == KEY), None)
    if found is None:
        return None
    where = f"{report.nodeid}: the record an xdist worker sent"
    identity = ItemIdentity.from_data(found.get("identity"), where)
    record = ItemRecord.from_data(found["record"], where) if "record" in found else None
    return identity, record, from_data(found["cause"]) if "cause" in found else None


def manifest(run: GateRun) -> dict[str, Any]:
    """What one worker collected, as plain data for ``workeroutput``."""
    return {"collected_files": sorted(str(p) for p in run.collected_files),
            "row_files": dict(run.row_files), "broken": dict(run.broken),
            "answered": {row: sorted(operations) for row, operations in run.answered.items()},
            "declared": [[row, gate, names] for (row, gate), names in run.declared.items()],
            "gate_markers": [[row, gate, list(markers)] for (row, gate), markers in run.gate_markers.items()],
            "selected": [[row, gate, sorted(names)] for (row, gate), names in run.selected_items.items()],
            "interrupted": run.interrupted, "profile": current_profile_name(), "drawing": list(run.drawing())}


class Controller:
    """The controller's side: every worker's reports and collection folded into the one run it judges."""

    def __init__(self, run: GateRun):
        self.run = run

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        found = payload_of(report)
        if found is not None:
            self.run.fold(report.nodeid, *found, report)
        elif report.failed:  # another test, or a gate item whose worker died before it could report
            self.run.other_failure()

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Every worker draws from the controller's run seed (a fresh one would differ per worker)."""
        if self.run.seed is not None:
            node.workerinput[SEED_KEY] = self.run.seed.value

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        found = getattr(node, "workeroutput", {}).get(KEY)
        if found is not None:
            self.run.merge_worker(found)
