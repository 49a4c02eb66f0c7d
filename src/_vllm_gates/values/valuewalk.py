"""One walk over two results side by side: which kind of pair each place holds, the paths of its parts, and two
maps' keys paired by strict equality. Exact comparison (compare.py) and comparison under a policy (tolerance.py)
are visitors over it, so both see a result's structure the same way (docs/gate-files.md, "compare")."""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any, Protocol, TypeVar

from _vllm_gates.wire.tensors import is_array

T = TypeVar("T", covariant=True)


class PairVisitor(Protocol[T]):
    """What a comparison does with each kind of pair; an arm descends by calling ``visit`` on the parts it picks."""

    def arrays(self, path: str, actual: Any, expected: Any) -> T:
        """Either side a numpy array (the other side may be anything)."""

    def lists(self, path: str, actual: Any, expected: Any) -> T:
        """Both sides lists or tuples (a list equals a tuple)."""

    def maps(self, path: str, actual: dict[Any, Any], expected: dict[Any, Any]) -> T:
        """Both sides dicts."""

    def leaves(self, path: str, actual: Any, expected: Any) -> T:
        """Anything else: numbers, strings, None, the audit's stand-in, or two values of different kinds."""


def visit(visitor: PairVisitor[T], path: str, actual: Any, expected: Any) -> T:
    """The visitor's arm for the pair at ``path``: arrays first (an array never equals a list), then lists, maps,
    leaves."""
    if is_array(actual) or is_array(expected):
        return visitor.arrays(path, actual, expected)
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        return visitor.lists(path, actual, expected)
    if isinstance(actual, dict) and isinstance(expected, dict):
        return visitor.maps(path, actual, expected)
    return visitor.leaves(path, actual, expected)


def item_path(path: str, index: int) -> str:
    """The path of a list's item: "result.ranks[0]"."""
    return f"{path}[{index}]"


def key_path(path: str, key: Any) -> str:
    """The path of a map's entry: "result.ranks" for an identifier key, "result['a b']" and "result[1]" else."""
    return f"{path}.{key}" if isinstance(key, str) and key.isidentifier() else f"{path}[{key!r}]"


def key_token(key: Any) -> Any:
    """A key as strict equality sees it: equal tokens exactly when the keys are strictly equal (1, 1.0, True
    differ; NaN keys share one token)."""
    if isinstance(key, bool):
        return ("bool", key)
    if isinstance(key, int):
        return ("int", key)
    if isinstance(key, float):
        return ("float", "nan") if math.isnan(key) else ("float", key)
    if isinstance(key, (list, tuple)):
        return ("seq", tuple(key_token(k) for k in key))
    return ("other", key)


ABSENT = object()  # the side of a key pair whose map lacks the key


@dataclass(frozen=True)
class KeyPairs:
    """Two maps' keys paired by token: ``actual`` and ``expected`` map each token to its key. ``distinct``: False
    where keys of one map are strictly equal among themselves (NaN keys), which no pairing by token can match."""

    actual: dict[Any, Any]
    expected: dict[Any, Any]
    distinct: bool

    def entries(self) -> Iterator[tuple[Any, Any, Any]]:
        """(token, actual key or ABSENT, expected key or ABSENT) in walk order: the expected map's keys in its order,
        then the actual map's keys it lacks."""
        for token, _key in chain(self.expected.items(), ((t, k) for t, k in self.actual.items() if t not in self.expected)):
            yield token, self.actual.get(token, ABSENT), self.expected.get(token, ABSENT)


def pair_keys(actual: dict[Any, Any], expected: dict[Any, Any]) -> KeyPairs:
    """The keys of two maps, paired by strict equality."""
    ours = {key_token(key): key for key in actual}
    theirs = {key_token(key): key for key in expected}
    return KeyPairs(ours, theirs, len(ours) == len(actual) and len(theirs) == len(expected))
