"""Rank layout and process groups by stride arithmetic (TP-1.1 to TP-1.9).

Mirrors the group construction of ``initialize_model_parallel`` in vllm/distributed/parallel_state.py
and the C++ port's include/vllm/distributed/parallel_layout.h.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import chain
from typing import Iterator, Sequence, overload

from impl.v1.field_checks import check_int

GROUP_KINDS: tuple[str, ...] = ("tp", "dcp", "pcp", "pp", "dp", "ep")
"""Group kinds in the order every rank creates them (TP-1.4)."""


@dataclass(frozen=True)
class ParallelDims:
    """Parallel sizes of one world; ranks are laid out as (external_dp, dp, pp, pcp, tp), TP innermost."""

    tp: int = 1
    pcp: int = 1
    pp: int = 1
    dp: int = 1
    external_dp: int = 1
    dcp: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pcp", "pp", "dp", "external_dp", "dcp"):
            check_int("ParallelDims", name, getattr(self, name), minimum=1)
        tp, pcp, dcp = self.tp, self.pcp, self.dcp
        if pcp == 1:  # DCP reuses the TP ranks when PCP is disabled (vllm/config/parallel.py)
            if tp % dcp:
                divisors = [d for d in range(1, tp + 1) if tp % d == 0]
                raise ValueError(
                    f"ParallelDims.dcp: tp_size={tp} must be divisible by dcp_size={dcp}; "
                    f"accepted dcp for tp={tp}: {divisors}"
                )
        elif dcp not in (1, pcp, tp * pcp):  # with PCP, DCP is off, the PCP axis, or the whole TP x PCP block
            raise ValueError(
                "ParallelDims.dcp: When PCP is enabled, DCP must be disabled, span the PCP axis, or span the full "
                f"TP x PCP axis. Got TP={tp}, PCP={pcp}, DCP={dcp}; valid DCP sizes are {sorted({1, pcp, tp * pcp})}."
            )

    @cached_property
    def world_size(self) -> int:
        """Number of ranks; DCP groups ranks of the (pcp, tp) block and adds none (TP-1.2)."""
        return self.external_dp * self.dp * self.pp * self.pcp * self.tp

    @cached_property
    def group_shapes(self) -> dict[str, tuple[int, int, int, int]]:
        """Each kind's (blocks, block_stride, block_len, step), worked out once per world (TP-1.8's rank_group)."""
        return {kind: _shape_of(self, kind) for kind in GROUP_KINDS}


def check_rank(dims: ParallelDims, rank: int) -> None:
    """Raise naming the accepted range unless ``rank`` is an int rank of the world of ``dims`` (TP-1.3)."""
    if not isinstance(dims, ParallelDims):
        raise TypeError(f"dims must be a ParallelDims, got {dims!r} ({type(dims).__name__})")
    world = dims.world_size
    if isinstance(rank, bool) or not isinstance(rank, int):
        raise TypeError(f"rank must be an int in [0, {world - 1}], got {rank!r} ({type(rank).__name__})")
    if not 0 <= rank < world:
        raise ValueError(f"rank={rank} is outside the world of {world} ranks; accepted range [0, {world - 1}]")


class StridedRanks(Sequence[int]):
    """Group members ``start + b*block_stride + j*step`` for b < blocks, j < block_len, in that order.

    Every group kind has this shape (``step`` is 1 except for a DCP group over the whole TP x PCP block, whose
    members run PCP first: blocks are the tp indices, 1 apart, each holding its pcp ranks, tp apart), so a group is
    described in O(1) and listed on demand. The blocks nest one way or the other: ``block_stride >= block_len*step``
    (blocks outside the runs) or ``step >= blocks*block_stride`` (runs outside the blocks); members are distinct.
    """

    __slots__ = ("start", "blocks", "block_stride", "block_len", "step")

    start: int
    blocks: int
    block_stride: int
    block_len: int
    step: int

    def __init__(self, start: int, blocks: int, block_stride: int, block_len: int, step: int) -> None:
        for name, value in (("start", start), ("blocks", blocks), ("block_stride", block_stride),
                            ("block_len", block_len), ("step", step)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"StridedRanks is immutable; cannot set {name}")

    def __len__(self) -> int:
        return self.blocks * self.block_len

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"StridedRanks index must be an int or a slice, got {index!r}")
        size = len(self)
        if not -size <= index < size:
            raise IndexError(f"StridedRanks index {index} is outside [-{size}, {size - 1}]")
        block, offset = divmod(index % size, self.block_len)
        return self.start + block * self.block_stride + offset * self.step

    def __iter__(self) -> Iterator[int]:
        stop = self.start + self.blocks * self.block_stride
        step, length = self.step, self.block_len
        if length == 1:
            return iter(range(self.start, stop, self.block_stride))
        starts = range(self.start, stop, self.block_stride)
        return chain.from_iterable(range(s, s + length * step, step) for s in starts)

    def index(self, value: object) -> int:  # type: ignore[override]
        """Position of ``value`` among the members, in O(1) (``list.index`` without start/stop)."""
        if not isinstance(value, bool) and isinstance(value, int):
            rest = value - self.start
            if self.block_stride >= self.block_len * self.step:  # blocks outside the runs
                block, rest = divmod(rest, self.block_stride)
                offset, odd = divmod(rest, self.step)
            else:  # runs outside the blocks
                offset, rest = divmod(rest, self.step)
                block, odd = divmod(rest, self.block_stride)
            if odd == 0 and 0 <= block < self.blocks and 0 <= offset < self.block_len:
                return block * self.block_len + offset
        raise ValueError(f"{value!r} is not a member of {self!r}")

    def __contains__(self, value: object) -> bool:
        try:
            self.index(value)
        except ValueError:
            return False
        return True

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (StridedRanks, list, tuple, range)):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"StridedRanks({list(self)})"


@dataclass(frozen=True)
class RankGroup:
    """The group of one rank: its members in group order and the rank's position among them."""

    ranks: StridedRanks
    local_rank: int

    @property
    def world_size(self) -> int:
        """Number of ranks in the group."""
        return len(self.ranks)


def _members(dims: ParallelDims, kind: str) -> tuple[int, int, int, int]:
    """(blocks, block_stride, block_len, step) of a ``kind`` group (``_shape_of``, kept per world)."""
    try:
        return dims.group_shapes[kind]
    except (KeyError, TypeError):
        raise ValueError(f"kind={kind!r} is not a group kind; accepted: {', '.join(GROUP_KINDS)}") from None


def _shape_of(dims: ParallelDims, kind: str) -> tuple[int, int, int, int]:
    """(blocks, block_stride, block_len, step) of a ``kind`` group, read off vLLM's reshapes (TP-1.4 to TP-1.7)."""
    if kind == "tp":  # view(-1, tp): consecutive chunks
        return 1, dims.tp, dims.tp, 1
    if kind == "dcp":  # transpose(-1, -2).reshape(-1, dcp) when dcp > 1: over the (pcp, tp) block, PCP first
        if dims.pcp == 1 or dims.dcp == 1:  # consecutive chunks, inside a TP group because dcp divides tp
            return 1, dims.dcp, dims.dcp, 1
        if dims.dcp == dims.pcp:  # the PCP group: one rank per pcp index, tp apart
            return dims.pcp, dims.tp, 1, 1
        # dcp == tp*pcp: the whole block, tp index outer (1 apart), pcp index inner (tp apart)
        return dims.tp, 1, dims.pcp, dims.tp
    if kind == "pcp":  # one rank per pcp index, tp apart
        return dims.pcp, dims.tp, 1, 1
    if kind == "pp":  # one rank per stage, tp*pcp apart
        return dims.pp, dims.tp * dims.pcp, 1, 1
    if kind == "dp":  # one rank per dp index, tp*pcp*pp apart
        return dims.dp, dims.tp * dims.pcp * dims.pp, 1, 1
    # ep (group_shapes asks only for GROUP_KINDS): the whole (pcp, tp) block of every dp index, within one stage
    return dims.dp, dims.tp * dims.pcp * dims.pp, dims.tp * dims.pcp, 1


def rank_group(dims: ParallelDims, rank: int, kind: str) -> RankGroup:
    """The ``kind`` group holding ``rank``, from the rank's strides alone, never the table (TP-1.8)."""
    check_rank(dims, rank)
    blocks, block_stride, block_len, step = _members(dims, kind)
    block = (rank // block_stride) % blocks
    offset = (rank // step) % block_len
    ranks = StridedRanks(rank - block * block_stride - offset * step, blocks, block_stride, block_len, step)
    return RankGroup(ranks=ranks, local_rank=block * block_len + offset)


@lru_cache(maxsize=1)
def _all_ranks(world: int) -> list[int]:
    """``[0, world)`` as one list that the tables of every kind of the last world slice: building all six shares it
    (never handed out, never changed; slices are copies)."""
    return list(range(world))


def group_ranks(dims: ParallelDims, kind: str) -> list[list[int]]:
    """Every ``kind`` group of the world, in vLLM's group order and member order (TP-1.4 to TP-1.7).

    vLLM's transposes move the group's own axis innermost and put TP in its place, so the groups are
    enumerated over the remaining axes in that order; each group is one strided slice of the ranks, except a DCP
    group over the whole (pcp, tp) block (dcp = tp*pcp), which is its block's PCP runs in tp order.
    """
    if not isinstance(dims, ParallelDims):
        raise TypeError(f"dims must be a ParallelDims, got {dims!r} ({type(dims).__name__})")
    _, stride, length, _ = _members(dims, kind)  # validates kind
    tp, pcp, pp, world = dims.tp, dims.pcp, dims.pp, dims.world_size
    pp_stride, dp_stride = tp * pcp, tp * pcp * pp
    edp_stride = dp_stride * dims.dp
    if kind == "dcp" and pcp > 1 and dims.dcp > 1:  # transpose(-1, -2): over (edp, dp, pp), PCP first, then TP
        if dims.dcp == pcp:  # the PCP table
            kind, stride = "pcp", tp
        else:  # dcp == tp*pcp: every (pcp, tp) block, its PCP runs one after another
            ranks = _all_ranks(world)
            return [list(chain.from_iterable(ranks[b + t : b + pp_stride : tp] for t in range(tp)))
                    for b in range(0, world, pp_stride)]
    if kind in ("tp", "dcp") and length == 1:  # one rank per group, in rank order
        return [[rank] for rank in range(world)]
    ranks = _all_ranks(world)
    if kind in ("tp", "dcp"):  # consecutive chunks in rank order
        return [ranks[s : s + length] for s in range(0, world, length)]
    if kind == "pcp":  # transpose(3, 4): over (edp, dp, pp), then tp
        return [ranks[b + t : b + pp_stride : stride] for b in range(0, world, pp_stride) for t in range(tp)]
    if kind == "pp":  # transpose(2, 4): over (edp, dp), then tp, then pcp
        return [ranks[b + t + c * tp : b + dp_stride : stride]
                for b in range(0, world, dp_stride) for t in range(tp) for c in range(pcp)]
    if kind == "dp":  # transpose(1, 4): over edp, then tp, pp, pcp
        return [ranks[b + t + p * pp_stride + c * tp : b + edp_stride : stride]
                for b in range(0, world, edp_stride) for t in range(tp) for p in range(pp) for c in range(pcp)]
    # ep, transpose(1, 2): over (edp, pp); members are the (pcp, tp) block of every dp index
    return [list(chain.from_iterable(ranks[s : s + length] for s in range(b + p * pp_stride, b + edp_stride, stride)))
            for b in range(0, world, edp_stride) for p in range(pp)]
