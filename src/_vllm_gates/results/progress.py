"""One live progress line for long work (`gates mutate`, `gates audit`; docs/mutation.md, "Progress"): done of total,
the counts so far, the rate and an ETA, redrawn in place on a terminal; on other output a plain line now and then, so
that a CI log stays readable.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TextIO

PLAIN_EVERY = 60.0  # seconds between plain lines when the output is not a terminal
REDRAW_EVERY = 0.2  # seconds between redraws on a terminal


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s" if rest >= 60 else f"{rest}s"


@dataclass
class Progress:
    """The progress of one unit of work (a row): ``update`` after each step, ``close`` when it ends. ``live`` says
    whether the output is a terminal (None: ask the stream)."""

    label: str
    total: int
    noun: str = "judged"
    stream: TextIO = field(default_factory=lambda: sys.stdout)
    live: bool | None = None
    clock: Callable[[], float] = time.monotonic
    started: float = 0.0
    shown: float = float("-inf")
    width: int = 0

    def __post_init__(self) -> None:
        if self.live is None:
            self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = self.clock()
        if not self.live:  # the next plain line waits one period: a short row prints none
            self.shown = self.started

    def line(self, done: int, counts: Mapping[str, int]) -> str:
        """What is shown: `ROW: 12/200 judged, killed 10, survived 2, 1.50/s, ETA 2m05s`."""
        elapsed = self.clock() - self.started
        rate = done / elapsed if elapsed > 0 and done else 0.0
        eta = _duration((self.total - done) / rate) if rate and done < self.total else "-" if done < self.total else "0s"
        shown = "".join(f", {name.replace('_', ' ')} {count}" for name, count in counts.items())
        return f"{self.label}: {done}/{self.total} {self.noun}{shown}, {rate:.2f}/s, ETA {eta}"

    def update(self, done: int, counts: Mapping[str, int]) -> None:
        now = self.clock()
        due = now - self.shown >= REDRAW_EVERY or done >= self.total if self.live else now - self.shown >= PLAIN_EVERY
        if not due:
            return
        self.shown = now
        text = self.line(done, counts)
        if self.live:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self, keep: bool = False) -> None:
        """The live line erased (what follows prints on a clean line), or with ``keep`` ended as it stands; nothing
        for plain output."""
        if self.live and self.width:
            self.stream.write("\n" if keep else "\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
