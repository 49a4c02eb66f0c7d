"""The minimal reproduction of a localized break (docs/divergence.md, "The minimal reproduction"): the fewest layers,
then the shortest prompt prefix, whose whole localization still breaks at the full run's tap. A bounded,
deterministic search; each candidate input is localized by a callable (the reference re-run on it, the
implementation free-running and teacher-forced), whose errors make that candidate lost, never the full verdict."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from _vllm_gates.base.errors import GatesError
from _vllm_gates.definitions.model import tap_pattern
from _vllm_gates.taps.divergence import DRIFT, Classification, Divergence

CONFIG_KEY, LAYERS_KEY, IDS_KEY, WEIGHTS_KEY = "config", "layers", "ids", "weights"
"""The case input keys shrinking reads: `config.layers` (the layer count), `weights` (each layer's named by the
gate's `layer` pattern), `ids` (the prompt): the `decoder-taps` operation's."""
MAX_RUNS = 16
"""The most candidate runs one shrinking makes (each: the reference and the implementation twice)."""
KEPT, LOST, ERROR = "kept", "lost", "error"

Localize = Callable[[Mapping[str, Any]], Divergence]
"""A candidate input's localization; raises GatesError where it cannot be judged."""


@dataclass(frozen=True)
class ShrinkRun:
    """One candidate: its layer count and prompt length, and what it showed: KEPT (a localized break at the full
    run's tap), LOST (drift, or a break at another tap) or ERROR (it could not be judged: why)."""

    layers: int | None  # None: the case's layer count, not cut
    tokens: int | None  # None: the case's prompt, not cut
    outcome: str
    text: str


@dataclass(frozen=True)
class Shrunk:
    """The minimal reproduction of the full run's break: its layer count, its prompt (``ids``) and its localization
    (the full run's where no smaller input kept the break); ``reason``: why none was sought (then nothing else is
    set but the full run's size); ``notes``: a dimension that could not be shrunk, or the bound reached."""

    reason: str | None
    full_layers: int | None
    full_ids: tuple[int, ...] | None
    layers: int | None = None
    ids: tuple[int, ...] | None = None
    divergence: Divergence | None = None
    runs: tuple[ShrinkRun, ...] = ()
    notes: tuple[str, ...] = ()
    max_runs: int = MAX_RUNS

    @property
    def sought(self) -> bool:
        return self.reason is None

    def describe(self) -> str:
        """The one-line summary: the minimal reproduction and the break it still shows, or why none was sought."""
        if self.reason is not None:
            return f"minimal reproduction: not sought: {self.reason}"
        assert self.divergence is not None
        layers = f"{self.layers} of {self.full_layers} layers" if self.layers is not None else "the case's layers"
        prompt = (f"the first {tokens(len(self.ids))} of {len(self.full_ids)} (ids {list(self.ids)})"
                  if self.ids is not None and self.full_ids is not None else "the case's prompt")
        found = self.divergence.classification
        return f"minimal reproduction: {layers}, {prompt}: the break at {_where(found)}, tap {found.tap}"


def not_sought(reason: str, case_input: Mapping[str, Any]) -> Shrunk:
    """A Shrunk that says why no smaller reproduction was sought, with the full run's size."""
    return Shrunk(reason, _layer_count(case_input), _ids(case_input))


def shrink(full: Divergence, case_input: Mapping[str, Any], layer_pattern: str, localize: Localize,
           max_runs: int = MAX_RUNS) -> Shrunk:
    """The fewest layers (counting up from the break's layer + 1), then on them the shortest prompt prefix
    (lengths 1, 2, 4, ... until one keeps the break, then bisected between the longest that lost it and the shortest
    that kept it), that keep a localized break at the full run's tap; at most ``max_runs`` candidates, the full input
    never re-run; where the bound stops it, the smallest input that kept the break so far."""
    if not full.broke:
        return not_sought("no localized break: nothing to shrink", case_input)
    search = _Search(full, case_input, layer_pattern, localize, max_runs)
    search.run()
    return Shrunk(None, search.full_layers, search.full_ids, search.layers, search.ids,
                  search.kept[(search.layers, _length(search.ids))], tuple(search.runs), tuple(search.notes), max_runs)


class _OutOfRuns(Exception):
    """The search reached its bound of runs."""


class _Search:
    """One shrinking: the candidates run so far and the smallest input that kept the break."""

    def __init__(self, full: Divergence, case_input: Mapping[str, Any], layer_pattern: str, localize: Localize,
                 max_runs: int):
        self.full, self.input, self.pattern, self.localize = full, case_input, layer_pattern, localize
        self.max_runs = max_runs
        self.full_layers, self.full_ids = _layer_count(case_input), _ids(case_input)
        self.uncuttable = _layers_unshrinkable(case_input)
        self.layers = self.full_layers if self.uncuttable is None else None  # None: the input's layers, not cut
        self.ids = self.full_ids  # None: the case's prompt, not cut
        self.kept: dict[tuple[int | None, int | None], Divergence] = {(self.layers, _length(self.ids)): full}
        self.runs: list[ShrinkRun] = []
        self.notes: list[str] = []

    def run(self) -> None:
        try:
            self._fewer_layers()
            self._shorter_prompt()
        except _OutOfRuns:
            self.notes.append(f"stopped at the bound of {self.max_runs} runs: a smaller reproduction may exist")

    def _fewer_layers(self) -> None:
        if self.uncuttable is not None:
            self.notes.append(f"layers not shrunk: {self.uncuttable}")
            return
        assert self.full_layers is not None
        start = self.full.classification.layer + 1 if self.full.classification.layer is not None else 1
        for layers in range(start, self.full_layers):
            if self._try(layers, self.ids):
                self.layers = layers
                return

    def _shorter_prompt(self) -> None:
        if self.full_ids is None:
            self.notes.append(f"prompt not shrunk: the case's input has no 1-D integer {IDS_KEY!r} array")
            return
        whole = self.full_ids
        longest_lost, shortest_kept, length = 0, len(whole), 1  # the whole prompt keeps it (on self.layers)
        while length < len(whole):
            if self._try(self.layers, whole[:length]):
                self.ids, shortest_kept = whole[:length], length
                break
            longest_lost, length = length, length * 2
        while shortest_kept - longest_lost > 1:
            middle = (shortest_kept + longest_lost) // 2
            if self._try(self.layers, whole[:middle]):
                self.ids, shortest_kept = whole[:middle], middle
            else:
                longest_lost = middle

    def _try(self, layers: int | None, ids: tuple[int, ...] | None) -> bool:
        """Localize the input cut to ``layers`` and ``ids`` (None: not cut); whether it keeps the break at the full
        run's tap."""
        if len(self.runs) >= self.max_runs:
            raise _OutOfRuns
        try:
            found = self.localize(truncated(self.input, self.pattern, layers, ids))
        except GatesError as error:
            self.runs.append(ShrinkRun(layers, _length(ids), ERROR, str(error)))
            return False
        kept = found.broke and found.classification.tap == self.full.classification.tap
        self.runs.append(ShrinkRun(layers, _length(ids), KEPT if kept else LOST, _short(found.classification)))
        if kept:
            self.kept[(layers, _length(ids))] = found
        return kept


def truncated(case_input: Mapping[str, Any], layer_pattern: str, layers: int | None,
              ids: tuple[int, ...] | None) -> dict[str, Any]:
    """The case's input for the first ``layers`` layers (None: as it is): `config.layers` set, the weights of later
    layers dropped (a weight belongs to layer i where a dot-separated suffix of its name starts with the gate's
    `layer` pattern: `model.layers.3.mlp.up_proj.weight`); and ``ids`` as its prompt, in the case's dtype (None:
    the case's)."""
    import numpy as np

    cut = dict(case_input)
    if layers is not None:
        cut[CONFIG_KEY] = {**case_input[CONFIG_KEY], LAYERS_KEY: layers}
        cut[WEIGHTS_KEY] = {name: value for name, value in case_input[WEIGHTS_KEY].items()
                            if (_layer_of_weight(name, layer_pattern) or 0) < layers}
    if ids is not None:
        cut[IDS_KEY] = np.asarray(ids, dtype=np.asarray(case_input[IDS_KEY]).dtype)
    return cut


def _layer_of_weight(name: str, layer_pattern: str) -> int | None:
    pattern = tap_pattern(layer_pattern, prefix=True)
    for start in [0] + [at + 1 for at, char in enumerate(name) if char == "."]:
        found = pattern.match(name[start:])
        if found:
            return int(found.group(1))
    return None


def _layer_count(case_input: Mapping[str, Any]) -> int | None:
    config = case_input.get(CONFIG_KEY)
    count = config.get(LAYERS_KEY) if isinstance(config, Mapping) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 1 else None


def _layers_unshrinkable(case_input: Mapping[str, Any]) -> str | None:
    """Why the case's input cannot be cut to fewer layers, or None."""
    if _layer_count(case_input) is None:
        return f"the case's input has no whole {CONFIG_KEY}.{LAYERS_KEY} >= 1"
    if not isinstance(case_input.get(WEIGHTS_KEY), Mapping):
        return f"the case's input has no {WEIGHTS_KEY!r} mapping"
    return None


def _ids(case_input: Mapping[str, Any]) -> tuple[int, ...] | None:
    import numpy as np

    ids = case_input.get(IDS_KEY)
    if not isinstance(ids, np.ndarray) or ids.ndim != 1 or ids.dtype.kind not in "iu" or not ids.size:
        return None
    return tuple(int(i) for i in ids)


def _length(ids: tuple[int, ...] | None) -> int | None:
    return None if ids is None else len(ids)


def _short(found: Classification) -> str:
    if found.kind == DRIFT:
        return "drift, no localized break"
    return f"a localized break at {_where(found)}, tap {found.tap}"


def _where(found: Classification) -> str:
    return f"layer {found.layer}" if found.layer is not None else "outside the layers"


def tokens(count: int) -> str:
    """``count`` tokens, in words."""
    return f"{count} token" + ("" if count == 1 else "s")
