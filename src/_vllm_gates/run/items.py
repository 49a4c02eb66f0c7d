"""pytest items of a gate: its named cases, its properties, its known-bads and known-goods, the audit stand-in,
definition errors.

Each item leaves a typed record of what it checked in ``item.stash``; the plugin reads it with the report.
"""
from __future__ import annotations

from typing import Any

import pytest

from _vllm_gates.base.errors import DefinitionError, GatesError, Problem
from _vllm_gates.definitions.implementations import PYTHON
from _vllm_gates.definitions.model import Case, KnownBad, KnownGood
from _vllm_gates.results.outcomes import NotImplementedBy, SkipCause
from _vllm_gates.results.records import ItemIdentity, ItemKind, ItemRecord
from _vllm_gates.run import checks
from _vllm_gates.run.checks import GateBroken, Mismatch, ResolvedGate, Subject
from _vllm_gates.run.examples_db import SharedExamples
from _vllm_gates.run.profiles import RunSeed, current_profile_name, effective_max_examples, settings_for
from _vllm_gates.values.render import render_case, render_value
from _vllm_gates.values.value_agreement import ToleranceUsage
from _vllm_gates.workers.worker_pool import AHEAD_REQUESTS

RECORD = pytest.StashKey[ItemRecord]()
SKIP_CAUSE = pytest.StashKey[SkipCause]()  # why the item is skipped, as data (the skip's reason is its text)
RUN_SEED = pytest.StashKey[RunSeed]()  # the run's seed (plugin.pytest_configure), in the config's stash
EXAMPLES = pytest.StashKey[SharedExamples | None]()  # the run's example database (plugin.pytest_configure), if any


class KnownBadPassed(GatesError):
    """A known-bad implementation (or the audit stand-in) passed every check of its gate."""


class GateItem(pytest.Item):
    """Common to every gate item: its identity, its markers, a record in the stash, failures that point at the YAML."""

    kind = ItemKind.CASE

    def __init__(self, *, row: str, gate_id: str, milestone: str, markers: tuple[str, ...], line: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.identity = ItemIdentity(row, gate_id, milestone, self.kind, line)
        for marker in markers:
            self.add_marker(marker)

    def runtest(self) -> None:
        try:
            self.stash[RECORD] = self.run_checks()
        except (GateBroken, DefinitionError):
            self.stash[RECORD] = ItemRecord(0, harness_error=True)
            raise
        except checks.NotImplementedByWorker as absent:  # the worker listed the operation, then said it has none
            self.skip_for(NotImplementedBy(self.config.getoption("gates_impl") or PYTHON, str(absent)))

    def skip_for(self, cause: SkipCause) -> None:
        """Skip the item for ``cause``, kept as data in its stash for the verdict."""
        self.stash[SKIP_CAUSE] = cause
        pytest.skip(cause.text())

    def run_checks(self) -> ItemRecord:
        raise NotImplementedError

    def reportinfo(self) -> tuple[Any, int, str]:
        resolved = getattr(self, "resolved", None)  # a gate written in a part file (`parts:`) is reported at that file
        path = self.config.rootpath / resolved.gate.location.path if resolved is not None else self.path
        return path, max(self.identity.line - 1, 0), f"{self.identity.row}::{self.identity.gate}::{self.name}"

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        error = excinfo.value
        if isinstance(error, Mismatch):
            seed = self.config.stash.get(RUN_SEED, None)
            return _render_mismatch(error, self.nodeid, seed.drawn(current_profile_name()) if seed else "",
                                    seed.replay(current_profile_name()) if seed else "")
        if isinstance(error, (KnownBadPassed, ToleranceTooWide)):
            return str(error)
        if isinstance(error, TooTight):
            return self._too_tight_shown(error)
        if isinstance(error, DefinitionError):
            return "\n".join(f"definition error: {p}" for p in error.problems)
        if isinstance(error, GateBroken):
            cause = error.__cause__
            text = f"gate error (the gate's own code failed, not the implementation): {error}"
            if cause is not None:
                text += "\n" + self._cause_shown(cause)
            return text
        return super().repr_failure(excinfo, style=style)

    def _too_tight_shown(self, error: TooTight) -> str:
        """The headline, then the report of each case or example that rejected the known-good, as the impl's would read."""
        seed = self.config.stash.get(RUN_SEED, None)
        drawn, replay = (seed.drawn(current_profile_name()), seed.replay(current_profile_name())) if seed else ("", "")
        shown = [_render_mismatch(_of_known_good(refusal.mismatch), self.nodeid, drawn, replay) for refusal in error.refusals]
        return "\n".join([str(error), *shown])

    def _cause_shown(self, cause: BaseException) -> str:
        """pytest's short traceback of what broke the gate; Python's own where pytest cannot render a frame (an
        interrupt can leave one without a line number), so a report never fails in the making."""
        try:
            return str(super().repr_failure(pytest.ExceptionInfo.from_exc_info((type(cause), cause, cause.__traceback__)), style="short"))  # type: ignore[arg-type]  # no traceback: the fallback below
        except Exception:
            import traceback

            return "".join(traceback.format_exception(type(cause), cause, cause.__traceback__, limit=-8)).rstrip()


def _render_mismatch(error: Mismatch, nodeid: str, drawn: str, replay: str) -> str:
    """A mismatch's report; a generated input's also says how it was drawn and the command that draws it again
    (the same profile and seed: the gate's examples depend on nothing else)."""
    width = max((len(label) for label, _ in error.lines), default=5)
    lines = [f"{error.where}: {error.headline}", f"  {'input'.ljust(width)}: {render_value(error.data)}"]
    lines += [f"  {label.ljust(width)}: {text}" for label, text in error.lines]
    if error.shrunk:
        lines += [f"  drawn with {drawn}" if drawn else "",
                  "  (shrunk by hypothesis) to replay it as a named case, add under `cases:`:",
                  "    " + render_case("shrunk-example", error.data).replace("\n", "\n    "),
                  f"  rerun: pytest '{nodeid}' {replay}".rstrip()]
    return "\n".join(line for line in lines if line)


class CaseItem(GateItem):
    kind = ItemKind.CASE

    def __init__(self, *, resolved: ResolvedGate, case: Case, **kwargs: Any):
        super().__init__(**kwargs)
        self.resolved, self.case = resolved, case
        self.run_of: tuple[tuple[Case, ...], int] = ((), 0)  # the cases run one after another with it, and its place

    def run_checks(self) -> ItemRecord:
        if self.resolved.not_implemented:
            self.skip_for(self.resolved.not_implemented)
        cases, at = self.run_of
        following = cases[at + 1:at + 1 + AHEAD_REQUESTS] if cases else ()
        usage = ToleranceUsage()
        made = checks.check_case(self.resolved, self.case, self.resolved.impl, following=following, usage=usage)
        return ItemRecord(made, tolerance_used=usage.used, tolerance_at=usage.at, excused=usage.excused)


def link_runs(items: list[pytest.Item]) -> None:
    """Mark each stretch of case items of one gate that the session runs one after another (none skipped by a
    marker), so that each item's calls can be sent with those of the items before it (docs/worker-protocol.md §10)."""
    start = 0
    while start < len(items):
        end = start
        first = items[start]
        if isinstance(first, CaseItem) and _runs_plainly(first):
            while end + 1 < len(items) and isinstance(nxt := items[end + 1], CaseItem) and nxt.resolved is first.resolved \
                    and _runs_plainly(nxt):
                end += 1
        if end > start:
            cases = tuple(item.case for item in items[start:end + 1])  # type: ignore[attr-defined]
            for at, item in enumerate(items[start:end + 1]):
                item.run_of = (cases, at)  # type: ignore[attr-defined]
        start = end + 1


_SKIPPING = frozenset({"skip", "skipif", "xfail"})


def _runs_plainly(item: CaseItem) -> bool:
    """No marker of its own that may skip it (a requirement unmet here adds one). Only a shortcut: a request sent
    ahead that its item never claims costs a new worker, never a wrong reply."""
    return item.resolved.not_implemented is None and not any(m.name in _SKIPPING for m in item.own_markers)


class PropertiesItem(GateItem):
    kind = ItemKind.PROPERTIES

    def __init__(self, *, resolved: ResolvedGate, **kwargs: Any):
        super().__init__(**kwargs)
        self.resolved = resolved

    def run_checks(self) -> ItemRecord:
        if self.resolved.not_implemented:
            self.skip_for(self.resolved.not_implemented)
        declared = self.resolved.gate.properties.max_examples  # type: ignore[union-attr]
        seed = self.config.stash.get(RUN_SEED, None)
        shared = self.config.stash.get(EXAMPLES, None)
        impl = self.config.getoption("gates_impl") or PYTHON
        tally = checks.run_properties(self.resolved, self.resolved.impl, settings_for, effective_max_examples(declared),
                                      seed=seed.for_gate(self.identity.row, self.identity.gate) if seed else None,
                                      examples=shared.for_gate(self.identity.row, self.identity.gate, impl) if shared else None)
        record = ItemRecord(tally.examples, values=tally.values, agreed_errors=tally.agreed_errors,
                            tolerance_used=tally.usage.used, tolerance_at=tally.usage.at, excused=tally.usage.excused)
        if tally.not_implemented:  # examples skipped as named cases are: the gate is NOT-IMPLEMENTED, never PASS
            self.stash[RECORD] = record
            self.skip_for(NotImplementedBy(self.config.getoption("gates_impl") or PYTHON, tally.not_implemented_reason()))
        return record


class KnownBadItem(GateItem):
    """Passes when the gate rejects the stand-in; fails with 'cannot tell NAME from correct' otherwise."""

    kind = ItemKind.KNOWN_BAD

    def __init__(self, *, resolved: ResolvedGate, label: str, stand_in: Subject, **kwargs: Any):
        super().__init__(**kwargs)
        self.resolved, self.label, self.stand_in = resolved, label, stand_in

    def run_checks(self) -> ItemRecord:
        props = self.resolved.gate.properties
        budget = effective_max_examples(props.max_examples) if props else 0
        made, rejection = checks.hunt(self.resolved, self.stand_in, settings_for, budget)
        if rejection is None:
            self.stash[RECORD] = ItemRecord(made)
            where = f"{self.resolved.gate.location.path}:{self.identity.line}"  # the known_bad entry (the gate's line for the audit)
            raise KnownBadPassed(f"{where}: gate {self.resolved.gate.id} cannot tell {self.label} from correct: "
                                 f"it passed all {made} checks (cases and generated examples)")
        return ItemRecord(made, f"{rejection.by}: {rejection.detail}", rejected_item=rejection.item)


class AuditItem(KnownBadItem):
    """The wrong-everywhere stand-in: a gate that cannot reject it cannot fail at all."""

    kind = ItemKind.AUDIT

    def __init__(self, *, resolved: ResolvedGate, **kwargs: Any):
        assert resolved.audit is not None
        super().__init__(resolved=resolved, label="the wrong-everywhere stand-in", stand_in=resolved.audit, **kwargs)


class ToleranceTooWide(GatesError):
    """A wrong answer derived from the expected results passed every case and example (the gate is WEAK), or one
    could be derived from none of them (its tolerance is unchecked against it)."""


class StrengthItem(GateItem):
    """The tolerance audit of a gate whose `compare:` policy has a tolerance (docs/numeric-gates.md §5): passes when every
    wrong answer (tolerance_audit.py) fails at least one case or generated example."""

    kind = ItemKind.STRENGTH

    def __init__(self, *, resolved: ResolvedGate, **kwargs: Any):
        super().__init__(**kwargs)
        self.resolved = resolved

    def run_checks(self) -> ItemRecord:
        from _vllm_gates.run.strength_samples import case_samples, example_samples
        from _vllm_gates.values.tolerance_audit import DEFAULT_STRENGTH, audit_tolerance, usable

        gate = self.resolved.gate
        assert gate.policy is not None
        budget = effective_max_examples(gate.properties.max_examples) if gate.properties else 0
        found = case_samples(self.resolved) + example_samples(self.resolved, settings_for, budget)
        samples = usable(gate.policy, found)
        if not samples:
            raise GateBroken(f"gate {gate.id}: the tolerance audit has nothing to derive wrong answers from: no case or "
                             f"generated example expects a result holding an array that {gate.policy.describe()} "
                             f"compares with a tolerance ({len(found)} expected result(s) hold none)")
        finding = audit_tolerance(gate.policy, samples, gate.strength or DEFAULT_STRENGTH)
        record = ItemRecord(len(samples) * len(finding.answers), finding.summary(), strength=finding.to_data())
        if not finding.strong:
            self.stash[RECORD] = record
            raise ToleranceTooWide(f"{gate.location.path}:{gate.location.line}: gate {gate.id}: {finding.summary()}")
        return record


class TooTight(GatesError):
    """The gate rejected a known-good implementation: it cannot tell a legitimate port from a broken one. The gate's
    problem, never the implementation's: the item is an ERROR (docs/gate-files.md, "Known-goods")."""

    def __init__(self, headline: str, refusals: list[checks.Refusal]):
        super().__init__(headline)
        self.refusals = refusals


NUMERIC_LABELS = ("max abs error", "max rel error", "NMSE", "array", "mismatched", "differs")  # in the order shown


def numeric_report(mismatch: Mismatch) -> str:
    """A mismatch's policy findings on one line, the errors first: the max abs and rel errors (and NMSE under the
    nmse policy) of the first array out of tolerance, then that array (its dtype, shape and tolerance) and how many
    of its elements; "" where no policy compared (tolerance_report.how_far_off writes the lines)."""
    taken: dict[str, str] = {}
    for label, text in mismatch.lines:
        if label in NUMERIC_LABELS and label not in taken:
            taken[label] = text.split(" at [", 1)[0] if label == "max abs error" else text
    if not any(label == "policy" and text.startswith("nmse") for label, text in mismatch.lines):
        taken.pop("NMSE", None)  # another policy's bound is not on it: kept short, the full report follows
    if "array" not in taken and "differs" not in taken:
        return ""
    return "; ".join(taken[label] if label in ("array", "differs") else f"{label} {taken[label]}"
                     for label in NUMERIC_LABELS if label in taken)


def _as_known_good(headline: str) -> str:
    """A mismatch's headline, which names the side under check "impl", as said of the known-good."""
    return "the known-good " + headline[len("impl "):] if headline.startswith("impl ") else headline


def _of_known_good(mismatch: Mismatch) -> Mismatch:
    """A mismatch found on a known-good, its side under check called the known-good instead of "impl"."""
    lines = [("known-good" if label == "impl" else label, text) for label, text in mismatch.lines]
    return Mismatch(_as_known_good(mismatch.headline), mismatch.where, mismatch.data, lines, mismatch.shrunk)


class KnownGoodItem(GateItem):
    """Passes when the gate passes the known-good on every case and generated example, judged as the impl is; an
    ERROR, TOO TIGHT, naming the case or example and the error it saw, otherwise."""

    kind = ItemKind.KNOWN_GOOD

    def __init__(self, *, resolved: ResolvedGate, label: str, good: Subject, **kwargs: Any):
        super().__init__(**kwargs)
        self.resolved, self.label, self.good = resolved, label, good

    def run_checks(self) -> ItemRecord:
        props = self.resolved.gate.properties
        budget = effective_max_examples(props.max_examples) if props else 0
        seed = self.config.stash.get(RUN_SEED, None)
        found = checks.judge_known_good(self.resolved, self.good, settings_for, budget,
                                        seed=seed.for_gate(self.identity.row, self.identity.gate) if seed else None)
        if not found.refusals:
            return ItemRecord(found.checks, tolerance_used=found.used)
        self.stash[RECORD] = ItemRecord(found.checks, harness_error=True)
        first = found.refusals[0]
        where = f"case {first.item!r}" if first.item != "properties" else "a generated example"
        more = f" (and {len(found.refusals) - 1} more: {', '.join(r.item for r in found.refusals[1:])})" if found.refusals[1:] else ""
        seen = numeric_report(first.mismatch) or _as_known_good(first.mismatch.headline)
        raise TooTight(f"{self.resolved.gate.location.path}:{self.identity.line}: TOO TIGHT: gate {self.resolved.gate.id} "
                       f"rejects known-good {self.label} on {where}{more}: {seen}", found.refusals)


class DefinitionErrorItem(GateItem):
    """Stands for a file or gate that did not load, so its row reports ERROR while other rows still run."""

    kind = ItemKind.DEFINITION

    def __init__(self, *, problems: list[Problem], **kwargs: Any):
        super().__init__(**kwargs)
        self.problems = problems

    def run_checks(self) -> ItemRecord:
        raise DefinitionError(self.problems)


def known_bad_items(parent: pytest.Collector, resolved: ResolvedGate, common: dict[str, Any], entries: tuple[KnownBad, ...]) -> list[KnownBadItem]:
    return [KnownBadItem.from_parent(parent, name=f"known_bad[{kb.name}]", resolved=resolved, label=kb.name,
                                     stand_in=resolved.known_bad[kb.name], **{**common, "line": kb.location.line})
            for kb in entries]


def known_good_items(parent: pytest.Collector, resolved: ResolvedGate, common: dict[str, Any], entries: tuple[KnownGood, ...]) -> list[KnownGoodItem]:
    return [KnownGoodItem.from_parent(parent, name=f"known_good[{kg.name}]", resolved=resolved, label=kg.name,
                                      good=resolved.known_good[kg.name], **{**common, "line": kg.location.line})
            for kg in entries]
