"""Requirement skips (README, "Markers"): an item whose marker requires what this machine lacks (CUDA for gpu, the
pinned upstream release, a project's own detector) is skipped with the reason, after `-m` and `-k` deselect, so that
a requirement (importing torch to ask for CUDA) is checked only when a selected item needs it."""
from __future__ import annotations

from typing import Any

import pluggy

from _vllm_gates.run.features import hookimpl

pytest_hookimpl = pluggy.HookimplMarker("pytest")  # pytest.hookimpl, without importing pytest where no pytest runs


class RequirementSkips:
    """The pytest side: skips the selected items whose requirement is unmet, each requirement asked once per run."""

    def __init__(self, run: Any):
        self.run = run

    @pytest_hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        import pytest

        from _vllm_gates.results.outcomes import RequirementUnmet
        from _vllm_gates.run.items import SKIP_CAUSE, DefinitionErrorItem, GateItem
        from _vllm_gates.run.profiles import load_default_profile

        names = set(self.run.project.marker_names)
        reasons: dict[Any, str | None] = {}  # each requirement asked once per run
        for item in items:
            if isinstance(item, DefinitionErrorItem):
                continue
            for name in sorted({m.name for m in item.iter_markers()} & names):
                requirement = self.run.project.marker(name).requires
                if requirement is None:
                    continue
                if requirement not in reasons:
                    reasons[requirement] = self._unmet(requirement)
                reason = reasons[requirement]
                if reason:
                    cause = RequirementUnmet(name, requirement.name, reason)
                    if isinstance(item, GateItem):
                        item.stash[SKIP_CAUSE] = cause
                    why = cause.text() if isinstance(item, GateItem) else f"{name} test skipped: {reason}"
                    item.add_marker(pytest.mark.skip(reason=why))
                    break
        if any(isinstance(item, GateItem) for item in items):
            load_default_profile()

    def _unmet(self, requirement: Any) -> str | None:
        """Why this machine lacks the requirement; a project's detector that fails is a usage error at its line."""
        import pytest

        from _vllm_gates.base.errors import DefinitionError
        from _vllm_gates.definitions.requirements import unmet

        try:
            return unmet(requirement, self.run.project)
        except DefinitionError as error:
            raise pytest.UsageError(f"vllm-gates configuration:\n{error}") from None


@hookimpl
def gates_configure(run: Any, config: Any) -> None:
    config.pluginmanager.register(RequirementSkips(run), "vllm-gates-requirements")
