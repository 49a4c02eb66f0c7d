"""pytest nodes for gate files: a file holds gates, a gate holds case, property and known-bad items."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from gates.harness import checks
from gates.harness.checks import GateBroken, Mismatch, ResolvedGate
from gates.harness.compare import WrongEverywhere
from gates.harness.model import MARKERS, Case, KnownBad
from gates.harness.profiles import effective_max_examples, settings_for
from gates.harness.render import render_case, render_value
from gates.harness.yamlsource import Problem

KIND_CASE, KIND_PROPERTIES, KIND_KNOWN_BAD, KIND_AUDIT, KIND_DEFINITION = "case", "properties", "known_bad", "audit", "definition"


class DefinitionProblems(Exception):
    """A gate file, its roadmap row or a target cannot be used: reported as ERROR of the row."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class _GateItem(pytest.Item):
    """Common reporting for every gate item: metadata in user_properties, failures that point at the YAML."""

    kind = ""

    def __init__(self, *, row: str, gate_id: str, milestone: str, markers: tuple[str, ...], line: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.row, self.gate_id, self.milestone, self.line = row, gate_id, milestone, line
        for marker in markers:
            self.add_marker(marker)
        self.user_properties.extend([("gate_row", row), ("gate_id", gate_id), ("gate_milestone", milestone),
                                     ("gate_kind", self.kind), ("gate_markers", ",".join(markers))])

    def record(self, name: str, value: Any) -> None:
        self.user_properties.append((name, value))

    def runtest(self) -> None:
        try:
            self.record("gate_checks", self.run_checks())
        except (GateBroken, DefinitionProblems):
            self.record("gate_error", True)
            raise

    def run_checks(self) -> int:
        raise NotImplementedError

    def reportinfo(self) -> tuple[Any, int, str]:
        return self.path, max(self.line - 1, 0), f"{self.row}::{self.gate_id}::{self.name}"

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        error = excinfo.value
        if isinstance(error, Mismatch):
            return _render_mismatch(error, self.nodeid)
        if isinstance(error, KnownBadPassed):
            return str(error)
        if isinstance(error, DefinitionProblems):
            return "\n".join(f"definition error: {p}" for p in error.problems)
        if isinstance(error, GateBroken):
            cause = error.__cause__
            text = f"gate error (the gate's own code failed, not the implementation): {error}"
            if cause is not None:
                text += "\n" + str(super().repr_failure(excinfo.from_exc_info((type(cause), cause, cause.__traceback__)), style="short"))
            return text
        return super().repr_failure(excinfo, style=style)


class KnownBadPassed(Exception):
    """A known-bad implementation passed every check of its gate."""


def _render_mismatch(error: Mismatch, nodeid: str) -> str:
    width = max((len(label) for label, _ in error.lines), default=5)
    lines = [f"{error.where}: {error.headline}", f"  {'input'.ljust(width)}: {render_value(error.data)}"]
    lines += [f"  {label.ljust(width)}: {text}" for label, text in error.lines]
    if error.shrunk:
        lines += ["  (shrunk by hypothesis) to replay it as a named case, add under `cases:`:",
                  "    " + render_case("shrunk-example", error.data).replace("\n", "\n    "),
                  f"  rerun: pytest '{nodeid}' --hypothesis-profile=ci"]
    return "\n".join(lines)


class CaseItem(_GateItem):
    kind = KIND_CASE

    def __init__(self, *, resolved: ResolvedGate, case: Case, **kwargs: Any):
        super().__init__(**kwargs)
        self.resolved, self.case = resolved, case

    def run_checks(self) -> int:
        return checks.check_case(self.resolved, self.case, self.resolved.impl)


class PropertiesItem(_GateItem):
    kind = KIND_PROPERTIES

    def __init__(self, *, resolved: ResolvedGate, **kwargs: Any):
        super().__init__(**kwargs)
        self.resolved = resolved

    def run_checks(self) -> int:
        declared = self.resolved.gate.properties.max_examples  # type: ignore[union-attr]
        return checks.run_properties(self.resolved, self.resolved.impl, settings_for, effective_max_examples(declared))


class KnownBadItem(_GateItem):
    """Passes when the gate rejects the stand-in; fails with 'cannot tell NAME from correct' otherwise."""

    kind = KIND_KNOWN_BAD

    def __init__(self, *, resolved: ResolvedGate, label: str, stand_in: Callable[..., Any], **kwargs: Any):
        super().__init__(**kwargs)
        self.resolved, self.label, self.stand_in = resolved, label, stand_in

    def run_checks(self) -> int:
        props = self.resolved.gate.properties
        budget = effective_max_examples(props.max_examples) if props else 0
        made, rejection = checks.hunt(self.resolved, self.stand_in, settings_for, budget)
        if rejection is None:
            self.record("gate_checks", made)
            where = f"{self.resolved.gate.location.path}:{self.line}"  # the known_bad entry (the gate's line for the audit)
            raise KnownBadPassed(f"{where}: gate {self.resolved.gate.id} cannot tell {self.label} from correct: "
                                 f"it passed all {made} checks (cases and generated examples)")
        self.record("gate_rejected_by", f"{rejection.by}: {rejection.detail}")
        return made


class AuditItem(KnownBadItem):
    kind = KIND_AUDIT

    def __init__(self, **kwargs: Any):
        super().__init__(label="the wrong-everywhere stand-in", stand_in=lambda *args, **kw: WrongEverywhere(), **kwargs)


class DefinitionErrorItem(_GateItem):
    """Stands for a file or gate that did not load, so its row reports ERROR while other rows still run."""

    kind = KIND_DEFINITION

    def __init__(self, *, problems: list[Problem], **kwargs: Any):
        super().__init__(markers=MARKERS, **kwargs)
        self.problems = problems

    def run_checks(self) -> int:
        raise DefinitionProblems(self.problems)


def known_bad_items(parent: pytest.Collector, resolved: ResolvedGate, common: dict[str, Any], entries: tuple[KnownBad, ...]) -> list[KnownBadItem]:
    return [KnownBadItem.from_parent(parent, name=f"known_bad[{kb.name}]", resolved=resolved, label=kb.name,
                                     stand_in=resolved.known_bad[kb.name], **{**common, "line": kb.location.line})
            for kb in entries]
