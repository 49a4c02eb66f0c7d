"""The expected results the tolerance audit derives its wrong answers from (docs/numeric-gates.md §5): each named case's
`expect:` and the oracle's outcome for it, and the oracle's outcome for each generated example.

No implementation is asked. The oracle is asked once per input at most: its outcomes are memoised on the gate
(ResolvedGate.oracle_memo), which the run's case items and known-bad hunts have mostly filled already, and the
examples are those a known-bad hunt draws (derandomized, the same every run).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _vllm_gates.run.checks import Outcome, ResolvedGate
from _vllm_gates.values.render import is_plain, render_value
from _vllm_gates.values.tolerance_audit import Sample


def oracle_outcome(rg: ResolvedGate, data: Any) -> Outcome:
    """The oracle's outcome on ``data``, from the gate's memo when it has one (GateBroken if its worker fails)."""
    assert rg.oracle is not None
    key = repr(data) if is_plain(data) else None
    found = rg.oracle_memo.get(key) if key is not None else None
    if found is None:
        found = rg.oracle.outcome(data)
        if key is not None:
            rg.oracle_memo[key] = found
    return found


def case_samples(rg: ResolvedGate) -> list[Sample]:
    """One sample per named case that expects a value: its `expect:` and the oracle's value, where there are."""
    found = []
    for case in rg.gate.cases:
        if case.raises is not None:
            continue
        references = [case.expect] if case.has_expect else []
        if rg.oracle is not None:
            outcome = oracle_outcome(rg, case.input)
            if outcome.error is None:
                references.append(outcome.value)
        if references:
            found.append(Sample(f"case {case.name!r}", "case", tuple(references)))
    return found


def example_samples(rg: ResolvedGate, settings_for: Callable[..., Any], max_examples: int) -> list[Sample]:
    """One sample per distinct generated example the oracle answers with a value, drawn as a known-bad hunt
    draws them (GateBroken if the strategy fails, as the properties item reports it)."""
    import hypothesis

    from _vllm_gates.run.checks import GateBroken
    from _vllm_gates.run.profiles import examples_of_the_gate_alone

    props = rg.gate.properties
    if props is None or rg.strategy is None or rg.oracle is None:
        return []
    try:
        strategy = rg.strategy()
    except Exception as exc:
        raise GateBroken(f"strategy {props.strategy.dotted} failed: {type(exc).__name__}: {exc}") from exc
    drawn: list[Any] = []
    seen: set[str] = set()

    def collect(data: Any) -> None:
        key = repr(data)
        if key not in seen:
            seen.add(key)
            drawn.append(data)

    test = settings_for(max_examples=max_examples, hunting=True)(hypothesis.given(strategy)(collect))
    try:
        with examples_of_the_gate_alone():
            test()
    except Exception as exc:
        raise GateBroken(f"hypothesis could not draw the examples of gate {rg.gate.id}: {type(exc).__name__}: {exc}") from exc
    found = []
    for data in drawn:
        outcome = oracle_outcome(rg, data)
        if outcome.error is None:
            found.append(Sample(f"the generated example {render_value(data, 80)}", "example", (outcome.value,)))
    return found
