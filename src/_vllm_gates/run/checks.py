"""Run a gate's checks in the judge: named cases, properties (hypothesis), the rejection of known-bads and the
passing of known-goods.

The impl, the oracle and the known-bads are Subjects: calls answered by worker processes in plain data
(docs/worker-protocol.md). Only compare functions and strategies, the gate's own code, run here.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from _vllm_gates.base.errors import DefinitionError, GatesError, Problem
from _vllm_gates.definitions.implementations import kind_of
from _vllm_gates.definitions.model import Case, Gate, Raises, TargetRef
from _vllm_gates.results.outcomes import NotImplementedBy
from _vllm_gates.run.examples_db import GateExamples
from _vllm_gates.values.compare import strict_equal
from _vllm_gates.values.facts import facts_of_pattern, missing_facts
from _vllm_gates.values.render import DifferingPaths, differing_paths, is_plain, render_value
from _vllm_gates.values.value_agreement import AGREE, DISAGREE, Agreement, NothingCompared, ToleranceUsage, under_policy
from _vllm_gates.wire.channel import MAX_BUFFER_BYTES, ProtocolError, orjson_parses
from _vllm_gates.wire.messages import CallOperation, CallTarget, ErrorBody
from _vllm_gates.wire.plain import WRONG, NotPlain, WrongEverywhere, encode
from _vllm_gates.workers.worker_pool import Ahead, CheckRefused, RawReply, ReplyContent, WorkerBroke, WorkerEnded, WorkerLost, WorkerPool

CRASH_RESTARTS = 100  # properties: at most this many worker restarts for the judged impl's crashes while shrinking


class Mismatch(GatesError):
    """The implementation under check disagrees with the expectation or the oracle: the gate FAILS."""

    def __init__(self, headline: str, where: str, data: Any, lines: list[tuple[str, str]] | Callable[[], list[tuple[str, str]]],
                 shrunk: bool = False):
        self.headline, self.where, self.data, self.shrunk = headline, where, data, shrunk
        self._lines = lines
        super().__init__(f"{where}: {headline}")

    @property
    def lines(self) -> list[tuple[str, str]]:
        """The report's labelled lines, rendered when first shown (a known-bad's rejection shows only the headline)."""
        if callable(self._lines):
            self._lines = self._lines()
        return self._lines


class GateBroken(GatesError):
    """The gate's own machinery (builder, strategy, compare) or a worker failed: the gate is in ERROR."""


@dataclass(frozen=True)
class Raised:
    """An exception a subject raised, as the worker reported it: its class name, the names along its MRO, its message."""

    type_name: str
    classes: tuple[str, ...]  # the names along its MRO
    message: str

    def is_a(self, name: str) -> bool:
        return name in self.classes


@dataclass(frozen=True)
class Outcome:
    """What one call produced: a plain value, or an exception."""

    value: Any = None
    error: Raised | None = None
    digest: ReplyContent | None = field(default=None, compare=False, repr=False)  # of the reply it came from (RawReply)

    def describe(self) -> str:
        if self.error is not None:
            return f"raised {self.error.type_name}: {self.error.message}"
        return render_value(self.value)


@dataclass(frozen=True)
class Subject:
    """A target as a worker runs it: role, target and builder as written, and the call's time limit."""

    pool: WorkerPool
    worker: tuple[str, str]
    target: TargetRef
    build: TargetRef | None
    timeout: float
    role: str
    operation: str | None = None  # an external implementation's operation: asked by name, its input as the case gives it
    kinds: Mapping[str, str] | None = None  # external: Python exception names -> the error kinds its replies use
    judged: bool = False  # the implementation under gate: its worker's crash or hang is its result, not an ERROR

    @property
    def shown(self) -> str:
        return f"operation {self.operation}" if self.operation else self.target.dotted

    def message(self, data: Any, encoded: Any = None) -> dict[str, Any]:
        """The call request for one input (GateBroken when it is not plain data); ``encoded``: its wire form, if known."""
        if encoded is None:
            try:
                encoded = encode(data, "input", self.pool.spec.max_buffer_bytes)
            except NotPlain as error:
                raise GateBroken(f"the case input for {self.role} {self.shown} is not plain data: {error}") from None
        if self.operation is not None:
            return CallOperation(self.operation, encoded).to_wire()
        if self.kinds is not None:  # the audit's stand-in, answered by the external worker itself
            return CallTarget(self.target.dotted, None, None, None, encoded).to_wire()
        return CallTarget(self.target.dotted, self.target.anchor, self.build.dotted if self.build else None,
                          self.build.anchor if self.build else None, encoded).to_wire()

    def outcome(self, data: Any, ahead: Ahead | None = None) -> Outcome:
        """Ask the worker; a worker's failure is ERROR (GateBroken), a target or builder it refuses is too.
        ``ahead``: the requests of the items that follow, sent with this one when it is sent."""
        message = self.message(data)
        try:
            raw = self.pool.exchange_raw({self.worker: message}, self.timeout, ahead)[self.worker]
        except CheckRefused as refused:
            raise self.refused(refused) from None
        except WorkerLost as lost:
            raise self.lost(lost) from None
        return self.outcome_of(raw)

    def lost(self, lost: WorkerLost) -> Exception:
        """A lost worker as the item reports it: the judged implementation's crash, hang or broken reply while
        answering is its result for that input (ImplEnded; docs/worker-protocol.md §9); any other loss, and
        any other role's (an oracle's, a known-bad's: the gate's own code), is the gate's ERROR."""
        if self.judged and isinstance(lost, WorkerEnded):
            return ImplEnded(self, lost)
        return GateBroken(f"{self.role} {self.shown}: {lost}")

    def refused(self, refused: CheckRefused) -> DefinitionError:
        """The definition error of a target its own worker would not resolve (a shared checker had)."""
        return DefinitionError([Problem(self.target.location, f"{self.role} {self.target.dotted}", str(refused))])

    def outcome_of(self, raw: RawReply, like: Outcome | None = None) -> Outcome:
        """The outcome a reply reports; ``like`` itself when the reply says exactly what ``like``'s did (no parse)."""
        digest = raw.content_digest() if b'"$wrong"' not in raw.body else None  # the audit's stand-in: always compared
        if like is not None and digest is not None and like.digest == digest:
            return like
        try:
            reply = self.pool.parse(self.worker, raw)
        except WorkerLost as lost:  # a frame or an id the protocol refuses: the worker was ended
            raise self.lost(lost) from None
        try:
            error = _error_of(reply, raw.buffers)
            if error is None:
                return replace(_outcome_of(reply["result"], not raw.exact and orjson_parses(), raw.buffers,
                                           self.pool.spec.max_buffer_bytes), digest=digest)
        except ProtocolError as broken:  # what the worker sent breaks the protocol (§5, §7): its own doing
            raise self.lost(self.pool.reply_broken(self.worker, str(broken))) from None
        except Exception as exc:  # the judge's own reading failed (numpy or ml_dtypes missing, a bug): not the worker's
            self.pool.discard(self.worker)
            raise GateBroken(f"{self.role} {self.shown}: the judge could not read the worker's reply: "
                             f"{type(exc).__name__}: {exc}") from exc
        return self._failed(error)

    def _failed(self, error: ErrorBody) -> Outcome:
        kind, text = error.kind, error.message
        if kind == "not-implemented" and self.operation is not None:
            raise NotImplementedByWorker(f"{self.role} {self.shown}: not implemented: {text}")
        if kind == "definition" and self.kinds is None:
            where = self.build if self.build is not None and error.which == "build" else self.target
            raise DefinitionError([Problem(where.location, f"{self.role} {where.dotted}", text)])
        if kind == "not-plain":
            raise GateBroken(f"{self.role} {self.shown}: {text}")
        if kind == "builder":
            raise GateBroken(f"{self.role.split()[0]} {text}")
        raise GateBroken(f"{self.role} {self.shown}: {kind}: {text}")

    def expected_kind(self, python_classes: tuple[str, ...] | list[str]) -> str:
        """The error kind an external implementation must raise where the Python side names these classes."""
        assert self.kinds is not None
        kind = kind_of(python_classes, self.kinds)
        if kind is None:
            raise GateBroken(f"no error kind for {python_classes[0]} in [tool.vllm-gates.error-kinds] of pyproject.toml: "
                             f"an external implementation's errors cannot be compared with it")
        return kind

    def raised_as_expected(self, error: Raised, raises: Raises) -> tuple[bool, str]:
        """Whether an error is the case's: by class name (Python), or by kind and the facts its message carries."""
        if self.kinds is None:
            if not error.is_a(raises.type_name):
                return False, "type"
            return (not raises.match or re.search(raises.match, error.message) is not None), "match"
        if not error.is_a(self.expected_kind((raises.type_name,))):
            return False, "type"
        facts = raises.facts if raises.facts is not None else facts_of_pattern(raises.match)
        return not missing_facts(error.message, facts), "facts"


class NotImplementedByWorker(GatesError):
    """The external implementation does not provide the gate's operation: the gate is NOT-IMPLEMENTED for it."""


class ImplEnded(GatesError):
    """The judged implementation's worker ended (an exit, a signal), hung, or broke the protocol on one input: that
    input's result, a FAIL naming the input, never the gate's ERROR (docs/worker-protocol.md §9).
    ``oracle``: what the oracle answers there, if asked."""

    def __init__(self, subject: Subject, ended: WorkerEnded, oracle: Outcome | None = None):
        super().__init__(str(ended))
        self.subject, self.ended, self.oracle = subject, ended, oracle

    def mismatch(self, where: str, data: Any, expected: list[tuple[str, str]], shrunk: bool = False,
                 extra: list[tuple[str, str]] | None = None) -> Mismatch:
        """The report of this crash on ``data``: what ended the worker (for a broken reply, what it sent and the limit
        that refused it), what was expected, what it printed last."""
        how = self.ended.how
        if isinstance(self.ended, WorkerBroke):
            headline = f"{self.subject.role} broke the worker protocol: its reply was refused and its worker ended"
            lines = [("impl", "no result: its worker's reply broke the protocol"), ("sent", self.ended.sent), *expected]
        else:
            headline = f"impl {'hung' if self.ended.hung else 'crashed'}: its worker {how}"
            lines = [("impl", f"no result: its worker {how}"), *expected]
        if self.oracle is not None:
            lines.append(("oracle", self.oracle.describe()))
        if self.subject.build is not None:
            lines.append(("note", f"the builder {self.subject.build.dotted} ran in the same worker, just before the impl"))
        lines += [*(extra or []), ("last output", self.ended.output or "(nothing)")]
        return Mismatch(headline, where, data, lines, shrunk=shrunk)


def _error_of(reply: Mapping[str, Any], buffers: Sequence[bytearray]) -> ErrorBody | None:
    """A reply's `error` (an object with a text `kind`), or None when it carries a `result`; ProtocolError for a reply
    of neither shape (docs/worker-protocol.md §5)."""
    if "error" not in reply:
        if "result" not in reply:
            raise ProtocolError(f"a reply has `result` or `error`, got keys {sorted(map(str, reply))[:8]}")
        return None
    error = ErrorBody.from_wire(reply["error"])
    if buffers:
        raise ProtocolError(f"an error reply carries {len(buffers)} buffers, which no $tensor uses")
    return error


def _outcome_of(result: Any, flat_checked: bool = False, buffers: Sequence[bytearray] = (),
                cap: int = MAX_BUFFER_BYTES) -> Outcome:
    """A call's result as the worker sent it: exactly one of a raised exception or an encoded value (its tensors
    read-only numpy arrays over the frame's ``buffers``); ProtocolError for anything else (§5.2, §7)."""
    from _vllm_gates.wire.plain import decode

    if type(result) is not dict:
        raise ProtocolError(f"a result is an object, got {str(result)[:200]}")
    if set(result) == {"raised"}:
        if buffers:
            raise ProtocolError(f"a reply that raised carries {len(buffers)} buffers, which no $tensor uses")
        raised = result["raised"]
        if not (type(raised) is dict and isinstance(raised.get("type"), str) and isinstance(raised.get("message"), str)
                and isinstance(raised.get("mro"), list) and all(isinstance(n, str) for n in raised["mro"])):
            raise ProtocolError(f"a raised exception needs type, mro and message as text, got {str(raised)[:200]}")
        return Outcome(error=Raised(raised["type"], tuple(raised["mro"]), raised["message"]))
    if set(result) == {"value"}:
        return Outcome(value=decode(result["value"], flat_checked=flat_checked, buffers=buffers, cap=cap))
    raise ProtocolError(f"a result has exactly one of `value` or `raised`, got keys {sorted(map(str, result))[:8]}")


@dataclass(frozen=True)
class ResolvedGate:
    """A gate with its subjects (answered by workers) and its own compare function and strategy (run here)."""

    gate: Gate
    impl: Subject
    oracle: Subject | None = None
    compare: Callable[[Any, Any], bool] | None = None
    strategy: Callable[[], Any] | None = None
    known_bad: Mapping[str, Subject] = field(default_factory=dict)
    known_good: Mapping[str, Subject] = field(default_factory=dict)
    audit: Subject | None = None
    oracle_memo: dict[str, Outcome] = field(default_factory=dict, compare=False, repr=False)
    not_implemented: NotImplementedBy | None = None  # the judged implementation does not provide the gate's operation

    def outcomes(self, impl: Subject, data: Any, ahead: Ahead | None = None) -> tuple[Outcome, Outcome]:
        """The impl's and the oracle's outcomes on one input, asked side by side (the oracle's from the memo if it
        has one); an impl reply that says exactly what the oracle's did is not parsed a second time."""
        assert self.oracle is not None
        key = repr(data) if is_plain(data) else None
        want = self.oracle_memo.get(key) if key is not None else None
        messages = {impl.worker: impl.message(data)}
        if want is None:
            messages[self.oracle.worker] = self.oracle.message(data, messages[impl.worker]["input"])
        try:
            raws = impl.pool.exchange_raw(messages, min(impl.timeout, self.oracle.timeout), ahead)
        except WorkerLost as lost:
            who = self.oracle if getattr(lost, "key", None) == self.oracle.worker else impl
            if isinstance(lost, CheckRefused):
                raise who.refused(lost) from None
            error = who.lost(lost)
            if isinstance(error, ImplEnded):  # shown beside the crash: what the input should have given
                error.oracle = want if want is not None else self._oracle_quietly(getattr(lost, "answered", {}), key)
            raise error from None
        if want is None:
            want = self.oracle.outcome_of(raws[self.oracle.worker])
            if key is not None:
                self.oracle_memo[key] = want
        try:
            return impl.outcome_of(raws[impl.worker], like=want), want
        except ImplEnded as broke:  # its reply broke the protocol: shown beside what the oracle answered
            broke.oracle = want
            raise

    def _oracle_quietly(self, answered: Mapping[tuple[str, str], RawReply], key: str | None) -> Outcome | None:
        """The oracle's outcome from its reply collected beside the impl's lost one; None if there is none to read."""
        assert self.oracle is not None
        raw = answered.get(self.oracle.worker)
        if raw is None:
            return None
        try:
            want = self.oracle.outcome_of(raw)
        except Exception:  # shown for information only: the crash is reported either way
            return None
        if key is not None:
            self.oracle_memo[key] = want
        return want


@dataclass(frozen=True)
class Rejection:
    """How a known-bad stand-in was caught: after how many checks, by which case or property."""

    checks: int
    by: str
    detail: str
    item: str = ""  # the rejecting item: the case's name, or "properties"


@dataclass
class Tally:
    """What a property run compared: examples that gave values on both sides, and examples where both raised."""

    examples: int = 0
    values: int = 0
    agreed_errors: int = 0
    not_implemented: int = 0  # examples the implementation answered not-implemented: skipped, as named cases are
    usage: ToleranceUsage = field(default_factory=ToleranceUsage)  # the share of its tolerance the gate's policy used

    def not_implemented_reason(self) -> str:
        """Why properties with examples the implementation does not implement are NOT-IMPLEMENTED (README, "Verdicts")."""
        if not self.examples:
            return f"all {self.not_implemented} generated examples were answered not-implemented"
        return (f"{self.not_implemented} of {self.not_implemented + self.examples} generated examples were answered "
                f"not-implemented; the other {self.examples} agreed with the oracle ({self.values} on values, "
                f"{self.agreed_errors} on errors)")


def _stand_in(actual: Any, expected: Any) -> bool:
    """Whether either side is the audit's stand-in result, which equals nothing."""
    return actual is WRONG or expected is WRONG or isinstance(actual, WrongEverywhere) or isinstance(expected, WrongEverywhere)


def _agree(rg: ResolvedGate, actual: Any, expected: Any) -> Agreement:
    """The gate's comparison of two values: its policy (policies.py), its compare function, or strict equality."""
    if _stand_in(actual, expected):
        return DISAGREE  # the audit's stand-in: a gate's own compare need not know it
    if rg.gate.policy is not None:
        try:
            return under_policy(rg.gate.policy, actual, expected)
        except NothingCompared as nothing:
            raise GateBroken(f"gate {rg.gate.id}: {nothing}") from None
        except Exception as exc:  # numpy missing, or an array numpy cannot compare: the comparison is the gate's own
            raise GateBroken(f"gate {rg.gate.id}: the {rg.gate.policy.name} comparison failed: {type(exc).__name__}: {exc}") from exc
    if rg.compare is None:
        return AGREE if strict_equal(actual, expected) else DISAGREE
    try:
        return AGREE if rg.compare(actual, expected) else DISAGREE
    except Exception as exc:
        raise GateBroken(f"compare {rg.gate.compare.dotted if rg.gate.compare else ''} crashed: {type(exc).__name__}: {exc}") from exc


def _differing(rg: ResolvedGate, actual: Outcome, expected: Outcome) -> DifferingPaths | None:
    """Where two values that strict equality found different differ (render.differing_paths); None where either side
    raised, or where the gate compares otherwise: its policy's report names its own differences, and a compare
    function's notion of equal is its own."""
    if actual.error is not None or expected.error is not None or rg.gate.policy is not None or rg.compare is not None \
            or _stand_in(actual.value, expected.value):
        return None
    return differing_paths(actual.value, expected.value)


def _headline(headline: str, paths: DifferingPaths | None) -> str:
    """A mismatch's headline, naming the first differing path where there are paths to name."""
    return paths.headline(headline) if paths is not None else headline


def _lines_of(paths: DifferingPaths | None) -> list[tuple[str, str]]:
    """The differing paths' report lines, shown before the two whole values."""
    return paths.lines() if paths is not None else []


def errors_agree(impl: Raised, oracle: Raised, subject: Subject | None = None) -> bool:
    """Two errors agree when the impl's is the oracle's class or a subclass of it, by class name; for an external
    implementation, when its error is of the kind the oracle's Python class maps to."""
    if subject is not None and subject.kinds is not None:
        return impl.is_a(subject.expected_kind(oracle.classes))
    return impl.is_a(oracle.type_name)


def outcomes_agree(rg: ResolvedGate, impl: Outcome, oracle: Outcome, subject: Subject | None = None) -> Agreement:
    """Both return equal values, or both raise errors that agree."""
    if impl is oracle and impl.digest is not None and impl.error is None and rg.compare is None and rg.gate.policy is None:
        return AGREE  # one reply's content, parsed once: strict equality is reflexive on plain data
    if impl.error is not None or oracle.error is not None:
        agree = impl.error is not None and oracle.error is not None and errors_agree(impl.error, oracle.error, subject)
        return AGREE if agree else DISAGREE
    return _agree(rg, impl.value, oracle.value)


def requests_ahead(rg: ResolvedGate, impl: Subject, following: Sequence[Case]) -> Ahead:
    """The calls the next case items will make, in order, per worker (check_case's requests for each, the oracle's
    only for an input it has no outcome for yet): sent with this item's own, so that the workers answer them while
    the judge works (docs/worker-protocol.md §10). An input that is not plain data ends the list, as its item
    asks nothing."""

    def ahead() -> Mapping[tuple[str, str], Sequence[dict[str, Any]]]:
        found: dict[tuple[str, str], list[dict[str, Any]]] = {impl.worker: []}
        known = set(rg.oracle_memo)
        for case in following:
            try:
                encoded = encode(case.input, "input", impl.pool.spec.max_buffer_bytes)
            except NotPlain:
                break
            message = impl.message(case.input, encoded)
            found[impl.worker].append(message)
            if case.raises is None and rg.oracle is not None:
                key = repr(case.input) if is_plain(case.input) else None
                if key is None or key not in known:
                    found.setdefault(rg.oracle.worker, []).append(rg.oracle.message(case.input, encoded))
                if key is not None:
                    known.add(key)
        return found

    return ahead


def _raised_name(raises: Raises, impl: Subject) -> str:
    """The error a case expects, as the judged implementation must raise it (a kind, for an external one)."""
    return raises.type_name if impl.kinds is None else f"{impl.expected_kind((raises.type_name,))} (for {raises.type_name})"


def _raises_text(raises: Raises, impl: Subject) -> str:
    return f"raises {_raised_name(raises, impl)}" + (f" matching {raises.match!r}" if raises.match else "")


def check_case(rg: ResolvedGate, case: Case, impl: Subject, check_oracle: bool = True, following: Sequence[Case] = (),
               usage: ToleranceUsage | None = None) -> int:
    """Run one named case; return the number of checks made, raise Mismatch on disagreement. ``following``: the
    case items that run next on the same subject, whose calls may be sent with this one's; ``usage``: notes the
    share of its tolerance each passing comparison of the impl used."""
    usage = usage if usage is not None else ToleranceUsage()
    where = f"{case.location}: gate {rg.gate.id}, case {case.name!r}"
    ahead = requests_ahead(rg, impl, following) if following else None
    try:
        if case.raises is None and rg.oracle is not None:
            got, oracle_got = rg.outcomes(impl, case.input, ahead)
        else:
            got, oracle_got = impl.outcome(case.input, ahead), None
    except ImplEnded as ended:
        shown = [("expected", _raises_text(case.raises, impl))] if case.raises is not None else \
            [("expected", render_value(case.expect))] if case.has_expect else []
        raise ended.mismatch(where, case.input, shown) from None
    checks = 0
    if case.raises is not None:
        checks += 1
        error = got.error
        ok, part = impl.raised_as_expected(error, case.raises) if error is not None else (False, "type")
        expected = _raised_name(case.raises, impl)
        if not ok and part == "type":
            raise Mismatch(f"expected {expected} to be raised", where, case.input,
                           [("impl", got.describe()), ("expected", _raises_text(case.raises, impl))])
        assert error is not None  # nothing raised is a "type" mismatch, raised above
        if not ok and part == "match":
            raise Mismatch(f"{case.raises.type_name} raised, but its message does not match", where, case.input,
                           [("message", error.message), ("pattern", case.raises.match or "")])
        if not ok:
            facts = case.raises.facts if case.raises.facts is not None else facts_of_pattern(case.raises.match)
            raise Mismatch(f"{expected} raised, but its message lacks facts the case names", where, case.input,
                           [("message", error.message), ("missing", ", ".join(missing_facts(error.message, facts)))])
        return checks
    if case.has_expect:
        checks += 1
        agreement = DISAGREE if got.error is not None else _agree(rg, got.value, case.expect)
        if not agreement:
            paths = _differing(rg, got, Outcome(case.expect))

            def lines() -> list[tuple[str, str]]:
                shown = [("impl", got.describe()), ("expected", render_value(case.expect))]
                return _lines_of(paths) + shown + ([("oracle", oracle_got.describe())] if oracle_got is not None else []) + \
                    agreement.lines()
            raise Mismatch(_headline("impl does not return the expected value", paths), where, case.input, lines)
        usage.note(agreement, f"case {case.name!r}")
        if oracle_got is not None and check_oracle:
            checks += 1
            agreement = DISAGREE if oracle_got.error is not None else _agree(rg, oracle_got.value, case.expect)
            if not agreement:
                paths = _differing(rg, oracle_got, Outcome(case.expect))
                raise Mismatch(_headline("the oracle does not return the expected value (the oracle or the case is wrong)", paths),
                               where, case.input, [*_lines_of(paths), ("oracle", oracle_got.describe()),
                                                   ("expected", render_value(case.expect)), ("impl", got.describe()),
                                                   *agreement.lines()])
    if oracle_got is not None:
        checks += 1
        agreement = outcomes_agree(rg, got, oracle_got, impl)
        if not agreement:
            paths = _differing(rg, got, oracle_got)
            raise Mismatch(_headline("impl disagrees with the oracle", paths), where, case.input,
                           lambda: [*_lines_of(paths), ("impl", got.describe()), ("oracle", oracle_got.describe()),
                                    *agreement.lines()])
        usage.note(agreement, f"case {case.name!r}")
    return checks


def run_properties(rg: ResolvedGate, impl: Subject, settings_for: Callable[..., Any], max_examples: int,  # noqa: C901 (one Hypothesis run and its except ladder; to be split so its contract reads in one place)
                   hunting: bool = False, seed: int | None = None, examples: GateExamples | None = None) -> Tally:
    """Impl and oracle agree on generated inputs; return what was compared, raise Mismatch (shrunk) if not.

    An example the implementation answers not-implemented is rejected (Hypothesis draws another, and never shrinks
    towards it) and counted in the tally; a crash or hang of its worker is a failing example (docs/worker-protocol.md §9).
    ``seed``: the gate's own seed under a profile that is not derandomized (a known-bad hunt never takes one).
    ``examples``: the gate's examples in the run's database (README, "A shared example database"): those saved
    there run first, and a failure found is saved there; the examples generated are the same with or without it."""
    import hypothesis
    from hypothesis.errors import Unsatisfiable
    from hypothesis.strategies import SearchStrategy

    from _vllm_gates.run.profiles import examples_of_the_gate_alone

    props = rg.gate.properties
    assert props is not None and rg.strategy is not None and rg.oracle is not None
    where = f"{props.location}: gate {rg.gate.id}, properties"
    try:
        strategy = rg.strategy()
    except Exception as exc:
        raise GateBroken(f"strategy {props.strategy.dotted} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(strategy, SearchStrategy):
        raise GateBroken(f"strategy {props.strategy.dotted} returned {type(strategy).__name__}, expected a hypothesis strategy")
    tally = Tally()
    broken: list[BaseException] = []  # the first harness failure ends the run: Hypothesis must not shrink or replay it
    crashes: list[ImplEnded] = []
    replaying = [examples is not None and not hunting and examples.any_saved()]  # the saved examples' run comes first

    def agree_on(data: Any) -> None:
        if broken:
            raise broken[0]
        try:
            got, want = rg.outcomes(impl, data)
        except NotImplementedByWorker:
            tally.not_implemented += 1
            hypothesis.reject()
        except ImplEnded as ended:
            tally.examples += 1
            crashes.append(ended)
            if ended.ended.hung or len(crashes) > CRASH_RESTARTS:  # each further try would cost a restart (or a hang)
                raise _StopShrinking(ended, data) from None
            raise ended.mismatch(where, data, [], shrunk=not hunting) from None
        except (GateBroken, DefinitionError) as error:
            broken.append(error)
            raise
        tally.examples += 1
        try:
            agreement = outcomes_agree(rg, got, want, impl)
        except GateBroken as error:
            broken.append(error)
            raise
        if not agreement:
            paths = _differing(rg, got, want)
            raise Mismatch(_headline("impl disagrees with the oracle on a generated input", paths), where, data,
                           [*_lines_of(paths), ("impl", got.describe()), ("oracle", want.describe()), *agreement.lines()],
                           shrunk=not hunting)
        tally.usage.note(agreement, lambda: f"the generated example {render_value(data, 80)}")
        if got.error is None:
            tally.values += 1
        else:
            tally.agreed_errors += 1

    database = None if hunting or examples is None else examples.database

    def prepared(replay: bool) -> Any:
        chosen = settings_for(max_examples=max_examples, hunting=hunting, seed=None if hunting else seed, database=database,
                              replay=replay)
        test = _with_rejections(chosen, impl)(hypothesis.given(strategy)(agree_on))
        if examples is not None and not hunting:
            test._hypothesis_internal_database_key = examples.key  # the gate's own key, not agree_on's digest
        return test

    def both_runs() -> None:
        if replaying[0]:
            try:
                prepared(replay=True)()
            except Unsatisfiable:  # each saved example was rejected (not implemented) or no longer fits the strategy
                pass
            replaying[0] = False
        prepared(replay=False)()

    try:
        with examples_of_the_gate_alone():
            both_runs()
    except BaseException as error:
        from_database = [examples.replayed()] if replaying[0] and examples is not None else []  # found replaying them
        return _property_verdict(error, _PropertyRun(rg, where, tally, broken, from_database, hunting))
    if tally.examples == 0 and not tally.not_implemented:
        raise GateBroken(f"the properties of gate {rg.gate.id} ran no example")
    return tally


@dataclass(frozen=True)
class _PropertyRun:
    """What a property run that ended in an exception leaves for its verdict: the examples counted, the first harness
    failure (GateBroken or DefinitionError raised inside it), and the report's line when the saved examples ran."""

    rg: ResolvedGate
    where: str
    tally: Tally
    broken: list[BaseException]
    from_database: list[tuple[str, str]]
    hunting: bool


def _property_verdict(error: BaseException, run: _PropertyRun) -> Tally:
    """The Hypothesis contract of a property run, in one place: what the exception it ended with means for the item.
    Raises what the item reports; returns the tally only where every example was answered not-implemented.

        ended with                          the item
        _StopShrinking (the impl crashed)   FAIL at the crash; "shrinking" says why it stopped (a hang, or restarts)
        another HypothesisException         ERROR: Hypothesis could not run (a health check, a deadline, ...)
        anything, after a harness failure   that GateBroken / DefinitionError: Hypothesis must not judge the gate's own
        Mismatch                            FAIL, shrunk; "from the database" where the saved examples ran
        GateBroken, DefinitionError         ERROR, as raised
        Unsatisfiable                       every example not implemented: the tally (no pass); else ERROR
        Flaky                               FAIL "replayed" where a Mismatch lies behind it (answers vary); else ERROR
        an exception group                  its most severe failure (the gate's own before a mismatch)
        KeyboardInterrupt behind it         the interrupt: the run stops, no item fails
        another Exception                   ERROR (Hypothesis's or the engine's own: the impl runs in a worker)
        another BaseException               raised as it is
    """
    from hypothesis.errors import Flaky, HypothesisException, Unsatisfiable

    rg, where = run.rg, run.where
    if isinstance(error, _StopShrinking):
        why = ("none: each try could hang as long again" if error.ended.ended.hung
               else f"stopped after {CRASH_RESTARTS} worker restarts")
        raise error.ended.mismatch(where, error.data, [], shrunk=not run.hunting and not error.ended.ended.hung,
                                   extra=[("shrinking", why), *run.from_database]) from None
    if isinstance(error, HypothesisException) and not isinstance(error, (Unsatisfiable, Flaky)):
        raise _could_not_run(rg, error) from error
    if run.broken:
        raise run.broken[0] from None
    if isinstance(error, Mismatch):
        if run.from_database:
            raise Mismatch(error.headline, error.where, error.data, [*error.lines, *run.from_database],
                           shrunk=error.shrunk) from None
        raise error
    if isinstance(error, (GateBroken, DefinitionError)):
        raise error
    if isinstance(error, Unsatisfiable):
        if run.tally.not_implemented and not run.tally.examples:
            return run.tally  # every example was answered not-implemented: the item says so, it is no pass
        raise _could_not_run(rg, error) from error
    if isinstance(error, Flaky):
        replayed = next((leaf for leaf in _leaves(error) if isinstance(leaf, Mismatch)), None)
        if replayed is None:
            raise _could_not_run(rg, error) from error
        raise Mismatch(replayed.headline, replayed.where, replayed.data, replayed.lines + [
            ("replayed", "the same input did not fail the same way when Hypothesis ran it again: the implementation "
                         "answers it differently from call to call"), *run.from_database], shrunk=False) from None
    if hasattr(error, "exceptions"):  # an exception group: hypothesis found several distinct failures
        raise _most_severe(error) from error
    interrupt = _interrupt_behind(error)
    if interrupt is not None:  # Ctrl-C or SIGTERM while Hypothesis set up: the run stops, no item fails
        raise interrupt from None
    if isinstance(error, Exception):
        raise _could_not_run(rg, error) from error
    raise error


def _could_not_run(rg: ResolvedGate, error: BaseException) -> GateBroken:
    return GateBroken(f"hypothesis could not run the properties of gate {rg.gate.id}: {type(error).__name__}: {error}")


def _interrupt_behind(error: BaseException) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt (Ctrl-C, or SIGTERM as the plugin raises it) that ``error`` was raised in handling."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return seen
        seen = seen.__context__
    return None


class _StopShrinking(BaseException):  # control flow, not an error kind: no GatesError (errors.py)
    """Ends a property run at the judged impl's crash once shrinking it has cost enough worker restarts (or at its
    first hang): a BaseException, so that Hypothesis neither catches nor shrinks it."""

    def __init__(self, ended: ImplEnded, data: Any):
        super().__init__(str(ended))
        self.ended, self.data = ended, data


def _with_rejections(chosen: Any, impl: Subject) -> Any:
    """The settings for an external implementation, which may answer some examples not-implemented: those are
    rejected, so Hypothesis's health check for strategies that filter too much does not apply."""
    import hypothesis
    from hypothesis import HealthCheck

    if impl.operation is None or not isinstance(chosen, hypothesis.settings):
        return chosen
    return hypothesis.settings(chosen, suppress_health_check=[*chosen.suppress_health_check, HealthCheck.filter_too_much])


def _leaves(group: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    for inner in getattr(group, "exceptions", ()):
        found.extend(_leaves(inner) if hasattr(inner, "exceptions") else [inner])
    return found


def _most_severe(group: BaseException) -> BaseException:
    """Of several distinct failures, the gate's own crash outranks an impl mismatch."""
    leaves = _leaves(group)
    for kind in (DefinitionError, GateBroken, Mismatch):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return GateBroken(f"the properties raised {len(leaves)} unexpected errors: " + "; ".join(f"{type(e).__name__}: {e}" for e in leaves))


def hunt(rg: ResolvedGate, stand_in: Subject, settings_for: Callable[..., Any], max_examples: int) -> tuple[int, Rejection | None]:
    """Run every check against a stand-in impl; return checks made and how it was rejected, or None if it passed."""
    checks = 0
    for case in rg.gate.cases:
        try:
            checks += check_case(rg, case, stand_in, check_oracle=False)
        except Mismatch as mismatch:
            checks += 1
            return checks, Rejection(checks, f"case {case.name!r}", mismatch.headline, case.name)
    if rg.gate.properties is not None:
        try:
            checks += run_properties(rg, stand_in, settings_for, max_examples, hunting=True).examples
        except Mismatch as mismatch:
            return checks + 1, Rejection(checks + 1, "properties", f"{mismatch.headline}: {render_value(mismatch.data)}",
                                                  "properties")
    return checks, None


@dataclass(frozen=True)
class Refusal:
    """Where a gate rejected a known-good: a case (its name) or "properties", and the mismatch it raised there."""

    item: str
    mismatch: Mismatch


@dataclass
class GoodRun:
    """A known-good judged as the impl is: the checks made, the most of its tolerance a passing comparison used,
    and every case (and the properties) that rejected it."""

    checks: int = 0
    used: float | None = None
    refusals: list[Refusal] = field(default_factory=list)


def judge_known_good(rg: ResolvedGate, good: Subject, settings_for: Callable[..., Any], max_examples: int,
                     seed: int | None = None) -> GoodRun:
    """Every case and the properties on a known-good, exactly as on the impl: the same comparisons and, with the
    gate's ``seed``, the same generated examples (shrunk where one fails, as the impl's would be); unlike a hunt it
    does not stop at the first rejection, so the report names every case that rejects it."""
    found = GoodRun()
    usage = ToleranceUsage()
    for case in rg.gate.cases:
        try:
            found.checks += check_case(rg, case, good, check_oracle=False, usage=usage)
        except Mismatch as mismatch:
            found.checks += 1
            found.refusals.append(Refusal(case.name, mismatch))
    found.used = usage.used
    if rg.gate.properties is not None:
        try:
            tally = run_properties(rg, good, settings_for, max_examples, seed=seed)
        except Mismatch as mismatch:
            found.checks += 1
            found.refusals.append(Refusal("properties", mismatch))
        else:
            found.checks += tally.examples
            if tally.usage.used is not None:
                found.used = max(found.used or 0.0, tally.usage.used)
    return found
