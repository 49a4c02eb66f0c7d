"""The strength audit of a tolerance (docs/numeric-gates.md): a gate compared under a tolerance yields one more item,
`strength`, that checks the tolerance rejects the wrong answers derived from its expected results (tolerance_audit)."""
from __future__ import annotations

from typing import Any

from _vllm_gates.run.features import hookimpl


@hookimpl
def gates_gate_items(node: Any, resolved: Any, common: dict[str, Any]) -> list[Any]:
    from _vllm_gates.run.items import StrengthItem
    from _vllm_gates.values.policies import has_tolerance

    gate = resolved.gate
    if not has_tolerance(gate.policy):
        return []
    return [StrengthItem.from_parent(node, name="strength", resolved=resolved, **common, line=gate.location.line)]
