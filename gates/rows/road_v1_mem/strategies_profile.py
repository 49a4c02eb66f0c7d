"""Hypothesis strategies of case inputs for the ROAD-V1-MEM M3 gates (plain data, as gates/inputs/profile*.py read).

Snapshots are drawn as one device's story: a baseline, the weights loaded, a profile run (with or without the
torch_allocated reading vLLM 0.33.0 takes); the utilization and the sizes spread the outcomes over a budget, a
start-up refusal, free memory that grew during the profile and an empty budget.
"""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

UTILIZATIONS = st.one_of(st.sampled_from([0.5, 0.8, 0.9, 0.92, 0.95, 1.0]),
                         st.floats(min_value=0.01, max_value=1.0, allow_nan=False))
DTYPES = st.sampled_from(["float16", "bfloat16", "float32", "float8_e4m3fn"])
BLOCK_SIZES = st.sampled_from([1, 8, 16, 32, 64, 128, 256])
HEAD_SIZES = st.sampled_from([32, 64, 80, 96, 128, 192, 256])


@st.composite
def _device_story(draw: st.DrawFn) -> dict[str, Any]:
    total = draw(st.integers(min_value=1 << 30, max_value=1 << 38))

    def share(fraction: float) -> int:
        return draw(st.integers(min_value=0, max_value=int(total * fraction)))

    def change(current: int, fraction: float) -> int:  # may shrink to zero or grow
        return current + draw(st.integers(min_value=-current, max_value=int(total * fraction)))

    weights = share(0.5)
    reserved = [share(0.05)]
    non_torch = [share(0.1)]
    reserved.append(reserved[0] + weights + share(0.02))
    non_torch.append(change(non_torch[0], 0.05))
    reserved.append(reserved[1] + share(0.05))
    non_torch.append(change(non_torch[1], 0.05))
    before_peak = draw(st.integers(min_value=0, max_value=reserved[1]))
    peaks = [draw(st.integers(min_value=0, max_value=reserved[0])), before_peak, before_peak + share(0.2)]
    start = draw(st.floats(min_value=0, max_value=1e6, allow_nan=False))
    loaded = start + draw(st.floats(min_value=0, max_value=600, allow_nan=False))
    times = [start, loaded, loaded + draw(st.floats(min_value=0, max_value=600, allow_nan=False))]
    snapshots = {}
    record_allocated = draw(st.booleans())  # vLLM 0.33.0 reads it; recorded logs often lack it
    for i, phase in enumerate(("before_create", "before_profile", "after_profile")):
        free = total - reserved[i] - non_torch[i]
        snapshots[phase] = {"torch_peak": peaks[i], "free_memory": free, "total_memory": total,
                            "torch_memory": reserved[i], "timestamp": times[i]}
        if record_allocated:  # allocated never exceeds the peak, and (native allocator) the reservation
            snapshots[phase]["torch_allocated"] = draw(st.integers(min_value=0, max_value=min(peaks[i], reserved[i])))
    return {"device": "cuda:0", "gpu_memory_utilization": draw(UTILIZATIONS), "weights_memory": weights,
            "snapshots": snapshots}


def budget_inputs() -> st.SearchStrategy[dict[str, Any]]:
    """Inline inputs of profile-kv-budget; stories that overfill the device are dropped."""
    return _device_story().filter(lambda s: all(snap["free_memory"] >= 0 for snap in s["snapshots"].values()))


def kv_geometry(max_layers: int = 96) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"num_layers": st.integers(min_value=1, max_value=max_layers),
                                  "block_size": BLOCK_SIZES, "num_kv_heads": st.integers(min_value=1, max_value=64),
                                  "head_size": HEAD_SIZES, "dtype": DTYPES})


def blocks_inputs() -> st.SearchStrategy[dict[str, Any]]:
    """Inline inputs of profile-util-blocks: a story, the KV geometry, the byte knob (mostly unset), a profile or not."""
    knob = st.one_of(st.just(0), st.just(0), st.integers(min_value=1, max_value=1 << 40))
    return st.builds(lambda story, kv, kv_bytes, profiled: {**story, "kv": kv, "kv_cache_memory_bytes": kv_bytes,
                                                            "profiled": profiled},
                     budget_inputs(), kv_geometry(max_layers=80), knob, st.booleans())


def fit_inputs() -> st.SearchStrategy[dict[str, Any]]:
    """Inputs of the fit check and the length estimate: geometry, a budget (possibly empty) and a max length."""
    return st.builds(lambda kv, available, length: {**kv, "available_memory": available, "max_model_len": length},
                     kv_geometry(), st.integers(min_value=-(1 << 30), max_value=1 << 40),
                     st.integers(min_value=1, max_value=1 << 21))


_ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float8_e4m3fn": 1}


@st.composite
def _boundary_fit_input(draw: st.DrawFn) -> dict[str, Any]:
    """A fit input whose budget sits a few bytes from a boundary of vLLM 0.33.0's check: one pool block (the null
    block) alone, or the null block plus one max_model_len request (MEM-3.6)."""
    kv = draw(kv_geometry())
    length = draw(st.integers(min_value=1, max_value=1 << 16))
    page = 2 * kv["block_size"] * kv["num_kv_heads"] * kv["head_size"] * _ELEMENT_BYTES[kv["dtype"]]
    pool_block = kv["num_layers"] * page
    need = -(-length // kv["block_size"]) * pool_block
    edge = draw(st.sampled_from([pool_block, pool_block + need]))
    return {**kv, "available_memory": edge + draw(st.integers(min_value=-2, max_value=2)), "max_model_len": length}


def fit_inputs_near_the_boundary() -> st.SearchStrategy[dict[str, Any]]:
    """Inputs of the fit check: half anywhere (fit_inputs), half within two bytes of a null-block boundary."""
    return st.one_of(fit_inputs(), _boundary_fit_input())
