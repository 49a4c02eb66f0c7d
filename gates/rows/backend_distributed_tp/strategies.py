"""Hypothesis strategies for the layout gates: ``{dims, kind}`` with a world of at most 4096 ranks, and ``{dims}``
size mixes, valid or not, for the ParallelConfig size rule."""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

MAX_WORLD = 4096
KINDS = ("tp", "dcp", "pcp", "pp", "dp", "ep")


@st.composite
def _dims(draw: Any) -> dict[str, int]:
    """Sizes drawn one axis at a time so that their product stays within MAX_WORLD."""
    room = MAX_WORLD
    dims: dict[str, int] = {}
    for name, cap in (("tp", 16), ("pcp", 4), ("pp", 8), ("dp", 16), ("external_dp", 8)):
        dims[name] = draw(st.integers(1, min(cap, room)))
        room //= dims[name]
    dims["dcp"] = draw(st.sampled_from(valid_dcp(dims["tp"], dims["pcp"])))
    return dims


def valid_dcp(tp: int, pcp: int) -> list[int]:
    """The dcp sizes vLLM's ParallelConfig takes (vllm/config/parallel.py): the divisors of tp when pcp is 1,
    else 1, pcp and tp*pcp."""
    if pcp == 1:
        return [d for d in range(1, tp + 1) if tp % d == 0]
    return sorted({1, pcp, tp * pcp})


def layouts() -> st.SearchStrategy[dict[str, Any]]:
    """Plain case inputs: a valid ParallelDims mapping and a group kind."""
    return st.fixed_dictionaries({"dims": _dims(), "kind": st.sampled_from(KINDS)})


@st.composite
def _any_sizes(draw: Any) -> dict[str, int]:
    """tp, pcp, pp and dcp (dp and external_dp left at 1); dcp is a valid size half the time, else any of 1..2*tp*pcp."""
    dims = {"tp": draw(st.integers(1, 8)), "pcp": draw(st.integers(1, 4)), "pp": draw(st.integers(1, 2))}
    valid = valid_dcp(dims["tp"], dims["pcp"])
    dims["dcp"] = draw(st.one_of(st.sampled_from(valid), st.integers(1, 2 * dims["tp"] * dims["pcp"])))
    return dims


def sizes() -> st.SearchStrategy[dict[str, Any]]:
    """Plain case inputs ``{dims}`` for the size rule: accepted and refused dcp sizes alike."""
    return st.fixed_dictionaries({"dims": _any_sizes()})
