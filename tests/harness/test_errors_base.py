"""One exception base (issue 27 item 3): every exception class the engine defines is a GatesError, but for internal
control flow, named here with the reason."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import _vllm_gates
from _vllm_gates.base.errors import GatesError

CONTROL_FLOW = {
    "_vllm_gates.run.checks._StopShrinking": "ends a property run; a BaseException so that Hypothesis does not catch it",
    "_vllm_gates.taps.divergence_shrink._OutOfRuns": "ends a shrinking search at its bound of runs; caught by the search "
                                                "itself, never leaves divergence_shrink.py",
    "_vllm_gates.mutation.mutate._BudgetSpent": "stops a row's session once --budget is spent; caught by mutate_row, never "
                                                "leaves mutate.py",
    "_vllm_gates.wire.plain._Irregular": "hands a value from the fast encoding pass to the careful one; never leaves plain.py",
}


def _engine_exceptions() -> dict[str, type]:
    """Every exception class defined in a module of _vllm_gates, by dotted name."""
    found = {}
    for info in pkgutil.walk_packages(_vllm_gates.__path__, "_vllm_gates."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_engine_exception_is_a_gates_error():
    found = _engine_exceptions()
    outside = sorted(name for name, kind in found.items() if not issubclass(kind, GatesError))
    assert outside == sorted(CONTROL_FLOW)
    assert len(found) > len(CONTROL_FLOW) + 15  # the walk saw the engine's error kinds (channel, checks, cli, ...)
