"""The share of its tolerance a passing item used (value_agreement.ToleranceUsage): its JUnit test case carries it as
the property `tolerance_used`, as `record_property` would (docs/reports.md)."""
from __future__ import annotations

from typing import Any

from _vllm_gates.run.features import hookimpl


@hookimpl
def gates_item_properties(record: Any) -> list[tuple[str, str]]:
    return [] if record.tolerance_used is None else [("tolerance_used", f"{record.tolerance_used:.6g}")]
