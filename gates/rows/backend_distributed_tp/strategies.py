"""Hypothesis strategy for the layout gates: ``{dims, kind}`` with a world of at most 4096 ranks."""
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
    dims["dcp"] = draw(st.sampled_from([d for d in range(1, dims["tp"] + 1) if dims["tp"] % d == 0]))
    return dims


def layouts() -> st.SearchStrategy[dict[str, Any]]:
    """Plain case inputs: a valid ParallelDims mapping and a group kind."""
    return st.fixed_dictionaries({"dims": _dims(), "kind": st.sampled_from(KINDS)})
