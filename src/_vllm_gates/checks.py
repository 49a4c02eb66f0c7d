"""Run a gate's checks: named cases, properties (hypothesis), and the rejection of a known-bad stand-in."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from vllm_gates import Call
from _vllm_gates.compare import WrongEverywhere, strict_equal
from _vllm_gates.model import Case, Gate
from _vllm_gates.render import is_plain, render_value


class Mismatch(Exception):
    """The implementation under check disagrees with the expectation or the oracle: the gate FAILS."""

    def __init__(self, headline: str, where: str, data: Any, lines: list[tuple[str, str]], shrunk: bool = False):
        self.headline, self.where, self.data, self.lines, self.shrunk = headline, where, data, lines, shrunk
        super().__init__(f"{where}: {headline}")


class GateBroken(Exception):
    """The gate's own machinery (builder, oracle, strategy, compare) crashed: the gate is in ERROR."""


@dataclass(frozen=True)
class ResolvedGate:
    """A gate with its targets imported."""

    gate: Gate
    impl: Callable[..., Any]
    oracle: Callable[..., Any] | None = None
    build_impl: Callable[..., Any] | None = None
    build_oracle: Callable[..., Any] | None = None
    compare: Callable[[Any, Any], bool] | None = None
    strategy: Callable[[], Any] | None = None
    known_bad: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    oracle_memo: dict[str, "Outcome"] = field(default_factory=dict, compare=False, repr=False)

    def oracle_outcome(self, data: Any) -> "Outcome":
        """The oracle's outcome on one input, computed once per run (oracles are deterministic by contract)."""
        assert self.oracle is not None
        key = repr(data) if is_plain(data) else None
        if key is not None and key in self.oracle_memo:
            return self.oracle_memo[key]
        outcome = invoke(self.oracle, build_call(self.build_oracle, data, "oracle"))
        if key is not None:
            self.oracle_memo[key] = outcome
        return outcome


@dataclass(frozen=True)
class Outcome:
    """What one call produced: a value, or an exception."""

    value: Any = None
    error: BaseException | None = None

    def describe(self) -> str:
        if self.error is not None:
            return f"raised {type(self.error).__name__}: {self.error}"
        return render_value(self.value)


@dataclass(frozen=True)
class Rejection:
    """How a known-bad stand-in was caught: after how many checks, by which case or property."""

    checks: int
    by: str
    detail: str


def build_call(builder: Callable[..., Any] | None, data: Any, role: str) -> Call:
    """Turn case input into a Call; a builder crash is the gate's error, not the impl's."""
    if builder is None:
        return Call(kwargs=dict(data)) if isinstance(data, Mapping) else Call(args=(data,))
    try:
        call = builder(data)
    except Exception as exc:
        raise GateBroken(f"{role} builder {getattr(builder, '__qualname__', builder)} failed on input {render_value(data)}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(call, Call):
        raise GateBroken(f"{role} builder {getattr(builder, '__qualname__', builder)} returned {type(call).__name__}, expected vllm_gates.Call")
    return call


def invoke(target: Callable[..., Any], call: Call) -> Outcome:
    try:
        return Outcome(value=call.apply(target))
    except (Exception, SystemExit) as exc:  # the target's exception (argparse's exit too) is data for the comparison
        return Outcome(error=exc)


def _agree(rg: ResolvedGate, actual: Any, expected: Any) -> bool:
    if isinstance(actual, WrongEverywhere) or isinstance(expected, WrongEverywhere):
        return False  # the audit's stand-in: a gate's own compare need not know it
    if rg.compare is None:
        return strict_equal(actual, expected)
    try:
        return bool(rg.compare(actual, expected))
    except Exception as exc:
        raise GateBroken(f"compare {rg.gate.compare.dotted if rg.gate.compare else ''} crashed: {type(exc).__name__}: {exc}") from exc


def _class_names(error: BaseException) -> list[str]:
    return [cls.__name__ for cls in type(error).__mro__]


def outcomes_agree(rg: ResolvedGate, impl: Outcome, oracle: Outcome) -> bool:
    """Both return equal values, or both raise and the impl's exception is (a subclass of) the oracle's class, by name."""
    if impl.error is not None or oracle.error is not None:
        return impl.error is not None and oracle.error is not None and type(oracle.error).__name__ in _class_names(impl.error)
    return _agree(rg, impl.value, oracle.value)


def check_case(rg: ResolvedGate, case: Case, impl: Callable[..., Any], check_oracle: bool = True) -> int:
    """Run one named case; return the number of checks made, raise Mismatch on disagreement."""
    where = f"{case.location}: gate {rg.gate.id}, case {case.name!r}"
    got = invoke(impl, build_call(rg.build_impl, case.input, "impl"))
    checks = 0
    if case.raises is not None:
        checks += 1
        error = got.error
        if error is None or case.raises.type_name not in _class_names(error):
            raise Mismatch(f"expected {case.raises.type_name} to be raised", where, case.input,
                           [("impl", got.describe()), ("expected", f"raises {case.raises.type_name}" + (f" matching {case.raises.match!r}" if case.raises.match else ""))])
        if case.raises.match and not re.search(case.raises.match, str(error)):
            raise Mismatch(f"{case.raises.type_name} raised, but its message does not match", where, case.input,
                           [("message", str(error)), ("pattern", case.raises.match)])
        return checks
    oracle_got = rg.oracle_outcome(case.input) if rg.oracle else None
    if case.has_expect:
        checks += 1
        if got.error is not None or not _agree(rg, got.value, case.expect):
            lines = [("impl", got.describe()), ("expected", render_value(case.expect))]
            if oracle_got is not None:
                lines.append(("oracle", oracle_got.describe()))
            raise Mismatch("impl does not return the expected value", where, case.input, lines)
        if oracle_got is not None and check_oracle:
            checks += 1
            if oracle_got.error is not None or not _agree(rg, oracle_got.value, case.expect):
                raise Mismatch("the oracle does not return the expected value (the oracle or the case is wrong)", where, case.input,
                               [("oracle", oracle_got.describe()), ("expected", render_value(case.expect)), ("impl", got.describe())])
    if oracle_got is not None:
        checks += 1
        if not outcomes_agree(rg, got, oracle_got):
            raise Mismatch("impl disagrees with the oracle", where, case.input, [("impl", got.describe()), ("oracle", oracle_got.describe())])
    return checks


def run_properties(rg: ResolvedGate, impl: Callable[..., Any], settings_for: Callable[..., Any], max_examples: int,
                   hunting: bool = False) -> int:
    """Impl and oracle agree on generated inputs; return how many examples ran, raise Mismatch (shrunk) if not."""
    import hypothesis
    from hypothesis.errors import HypothesisException
    from hypothesis.strategies import SearchStrategy

    props = rg.gate.properties
    assert props is not None and rg.strategy is not None and rg.oracle is not None
    where = f"{props.location}: gate {rg.gate.id}, properties"
    try:
        strategy = rg.strategy()
    except Exception as exc:
        raise GateBroken(f"strategy {props.strategy.dotted} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(strategy, SearchStrategy):
        raise GateBroken(f"strategy {props.strategy.dotted} returned {type(strategy).__name__}, expected a hypothesis strategy")
    count = 0

    def agree_on(data: Any) -> None:
        nonlocal count
        count += 1
        got = invoke(impl, build_call(rg.build_impl, data, "impl"))
        want = rg.oracle_outcome(data)
        if not outcomes_agree(rg, got, want):
            raise Mismatch("impl disagrees with the oracle on a generated input", where, data,
                           [("impl", got.describe()), ("oracle", want.describe())], shrunk=not hunting)

    test = settings_for(max_examples=max_examples, hunting=hunting)(hypothesis.given(strategy)(agree_on))
    try:
        test()
    except (Mismatch, GateBroken):
        raise
    except HypothesisException as exc:
        raise GateBroken(f"hypothesis could not run the properties of gate {rg.gate.id}: {type(exc).__name__}: {exc}") from exc
    except BaseException as exc:
        if hasattr(exc, "exceptions"):  # an exception group: hypothesis found several distinct failures
            raise _most_severe(exc) from exc
        raise
    if count == 0:
        raise GateBroken(f"the properties of gate {rg.gate.id} ran no example")
    return count


def _leaves(group: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    for inner in getattr(group, "exceptions", ()):
        found.extend(_leaves(inner) if hasattr(inner, "exceptions") else [inner])
    return found


def _most_severe(group: BaseException) -> BaseException:
    """Of several distinct failures, the gate's own crash outranks an impl mismatch."""
    leaves = _leaves(group)
    for kind in (GateBroken, Mismatch):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return GateBroken(f"the properties raised {len(leaves)} unexpected errors: " + "; ".join(f"{type(e).__name__}: {e}" for e in leaves))


def hunt(rg: ResolvedGate, stand_in: Callable[..., Any], settings_for: Callable[..., Any], max_examples: int) -> tuple[int, Rejection | None]:
    """Run every check against a stand-in impl; return checks made and how it was rejected, or None if it passed."""
    checks = 0
    for case in rg.gate.cases:
        try:
            checks += check_case(rg, case, stand_in, check_oracle=False)
        except Mismatch as mismatch:
            checks += 1
            return checks, Rejection(checks, f"case {case.name!r}", mismatch.headline)
    if rg.gate.properties is not None:
        try:
            checks += run_properties(rg, stand_in, settings_for, max_examples, hunting=True)
        except Mismatch as mismatch:
            return checks + 1, Rejection(checks + 1, "properties", f"{mismatch.headline}: {render_value(mismatch.data)}")
    return checks, None
