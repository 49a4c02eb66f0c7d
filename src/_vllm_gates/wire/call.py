"""What a gate's builder returns: the arguments of one call of an impl, oracle or known-bad (docs/gate-files.md)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    """Positional and keyword arguments for one call of a gate target."""

    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def apply(self, target: Callable[..., Any]) -> Any:
        """Call ``target`` with these arguments."""
        return target(*self.args, **dict(self.kwargs))
