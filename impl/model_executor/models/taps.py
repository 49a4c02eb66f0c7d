"""The taps and feed of a decoder's forward (spec/model-taps.md MT-1.x): a Recorder the layer code hands each named
intermediate to. It keeps them in forward order when asked to, and at a feed point hands back the fed array (cast to
the stream's dtype) in place of the stream; NO_TAPS records nothing and feeds nothing (the greedy decode)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import torch

from impl.distributed import communication_op


@dataclass(frozen=True)
class Recorder:
    """Named intermediates of one forward (``taps``, None: none kept) and the fed feed points (``feed``)."""

    feed: Mapping[str, torch.Tensor] = field(default_factory=dict)
    taps: dict[str, torch.Tensor] | None = None

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


NO_TAPS = Recorder()
"""Records nothing and feeds nothing: the untapped forward."""
