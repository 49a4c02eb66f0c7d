"""The taps and feed of a decoder's forward (spec/model-taps.md MT-1.x): a Recorder the layer code hands each named
intermediate to. It keeps them in forward order when asked to, and at a feed point hands back the fed array (cast to
the stream's dtype) in place of the stream; NO_TAPS records nothing and feeds nothing (the greedy decode)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch

from impl.distributed import communication_op


@dataclass(frozen=True)
class Recorder:
    """Named intermediates of one forward (``taps``, None: none kept), the fed feed points (``feed``), and whether
    the ranks' partials before each all-reduce are kept too (``rank_partials``, MT-1.6)."""

    feed: Mapping[str, torch.Tensor] = field(default_factory=dict)
    taps: dict[str, torch.Tensor] | None = None
    rank_partials: bool = False

    def tap(self, name: str, value: torch.Tensor) -> torch.Tensor:
        """``value``, recorded under ``name`` when taps are kept (MT-1.1)."""
        if self.taps is not None:
            self.taps[name] = value
        return value

    def fed(self, name: str, stream: torch.Tensor) -> torch.Tensor:
        """At the feed point ``name``: the fed array in the stream's dtype where one is fed, else the stream; tapped
        either way (MT-2.1)."""
        value = self.feed.get(name)
        if value is not None:
            stream = value.to(device=stream.device, dtype=stream.dtype)
        return self.tap(name, stream)

    def tap_heads(self, name: str, value: torch.Tensor, replicas: int) -> None:
        """A rank's K or V [T, its kv heads * head_dim], recorded whole: gathered over the ranks in rank order, each
        KV head once (a head replicated on ``replicas`` consecutive ranks read from the first) (MT-1.3)."""
        if self.taps is None:
            return
        gathered = communication_op.all_gather(value, dim=-1)
        ranks = gathered.shape[-1] // value.shape[-1]
        if replicas > 1:
            gathered = gathered.view(value.shape[0], ranks, value.shape[-1])[:, ::replicas].reshape(value.shape[0], -1)
        self.taps[name] = gathered


    def reduced(self, name: str, partial: torch.Tensor, collective: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """``collective(partial)`` tapped under ``name``; with rank_partials, every rank's ``partial`` before it first,
        gathered in rank order under ``name.rank{r}`` (MT-1.6). The gather is its own collective: what the reduce
        does with the partials is seen in ``name`` only."""
        if self.taps is not None and self.rank_partials:
            gathered = communication_op.all_gather(partial.unsqueeze(0), dim=0)
            for rank, value in enumerate(gathered.unbind(0)):
                self.taps[f"{name}{RANK_SUFFIX.format(r=rank)}"] = value
        return self.tap(name, collective(partial))


RANK_SUFFIX = ".rank{r}"
"""How a rank's partial of a reduced tap is named: the tap's name, then this with r the rank (MT-1.6)."""

NO_TAPS = Recorder()
"""Records nothing and feeds nothing: the untapped forward."""
