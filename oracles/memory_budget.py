"""Independent re-derivation of vLLM's KV memory budget, pool size and length fit (MEM-3.2 to MEM-3.7).

The truth is upstream's: `request_memory` in vllm/v1/worker/utils.py (called from init_device in
vllm/v1/worker/gpu_worker.py), `memory_profiling` in vllm/utils/mem_utils.py, `determine_available_memory` in
vllm/v1/worker/gpu_worker.py, and `check_enough_kv_cache_memory` / `estimate_max_model_len` / `get_num_blocks`
in vllm/v1/core/kv_cache_planning.py (0.33.0). The impl mirrors their code (a float ceil, subtraction of a non-KV sum, a
floor division, a bisection over lengths). This oracle reaches the same numbers by other routes:

* the utilization cap is the exact rational product Fraction(total) * Fraction(utilization), with the
  IEEE-754 round-to-nearest-even step of upstream's float product modelled explicitly (candidate byte counts
  around the exact product, each checked against the midpoint of the double grid); no float multiplication.
  The plain exact ceiling would be one byte above vLLM where the double product rounds down onto an integer
  (80 GiB x 0.9, the gate's docstring example), so the rounding is part of the truth;
* the KV budget is a replay of the device (vLLM 0.33.0's profile): from the baseline's level of memory in use,
  the level after the profile (which must not be lower) and the part of the profile's peak no longer allocated
  are put on the device under the ceiling "baseline level + cap"; the budget is the room left under it;
* block counts come from allocating whole blocks in power-of-two batches until the next block would not fit,
  and the fit check counts the budget's whole blocks against the null block vLLM 0.33.0's BlockPool keeps plus the
  blocks one request needs (bisected); bytes are never divided by block bytes;
* a block's bytes are those torch gives a meta tensor of the block's shape.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from functools import lru_cache

import torch

FALLBACK_NUM_BLOCKS = 256  # the C++ port's pool size when nothing sized it (ROAD-V1-MEM M1)
_SIGNIFICAND_BITS = 53     # an IEEE-754 double's significand, the hidden bit included


def _reading(snapshot: Mapping[str, object], key: str) -> int:
    value = snapshot[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"reading {key} must be a non-negative int, got {value!r}")
    return value


def _largest_double_at_most(n: int) -> float:
    """The largest IEEE double that is not above the integer `n`."""
    double = float(n)  # correctly rounded; step down once if it rounded up
    return math.nextafter(double, -math.inf) if Fraction(double) > n else double


def _even_significand(double: float) -> bool:
    """Whether the last significand bit of a (normal or zero) double is 0, the tie-break of round-half-even."""
    mantissa, _ = math.frexp(double)
    return int(mantissa * (1 << _SIGNIFICAND_BITS)) % 2 == 0


def _rounds_to_at_most(exact: Fraction, n: int) -> bool:
    """Whether the double nearest `exact` (ties to even, as IEEE multiplication rounds) is at most `n`.

    With `low` the largest double <= n and `high` the next one (> n), the nearest double is <= n exactly when
    `exact` lies below their midpoint, or on it with `low` even.
    """
    low = _largest_double_at_most(n)
    high = math.nextafter(low, math.inf)
    midpoint = (Fraction(low) + Fraction(high)) / 2
    if exact != midpoint:
        return exact < midpoint
    return _even_significand(low)


def _ceil_of_rounded_product(total: int, fraction: float) -> int:
    """ceil(total * fraction) as upstream's double arithmetic gives it, found without multiplying floats.

    Python's int * float first converts the int to the nearest double (exact below 2^53 bytes), then rounds the
    exact product once. The answer is the smallest integer n with round(product) <= n. The exact product is at
    most half a unit in the last place from its rounding, so n lies within `span` of the exact ceiling; the
    predicate is monotone in n, so a bisection over that window finds it (two checks for device-sized totals).
    """
    exact = Fraction(float(total)) * Fraction(fraction)
    exact_ceiling = -((-exact.numerator) // exact.denominator)
    span = 2 + (1 << max(0, exact_ceiling.bit_length() - _SIGNIFICAND_BITS))
    low, high = exact_ceiling - span, exact_ceiling + span  # invariant: not at low, yes at high
    if _rounds_to_at_most(exact, low) or not _rounds_to_at_most(exact, high):
        raise AssertionError(f"the rounding window around {exact} is wrong")
    while high - low > 1:
        middle = (low + high) >> 1
        if _rounds_to_at_most(exact, middle):
            high = middle
        else:
            low = middle
    return high


def startup_share(baseline: Mapping[str, object], gpu_memory_utilization: float) -> int:
    """The bytes the instance may use, ceil(total x utilization) in vLLM's float semantics (request_memory of
    vllm/v1/worker/utils.py); ValueError when start-up finds less than that free."""
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization {gpu_memory_utilization!r} outside (0, 1]")
    allowed = _ceil_of_rounded_product(_reading(baseline, "total_memory"), gpu_memory_utilization)
    if _reading(baseline, "free_memory") < allowed:
        raise ValueError("free memory at start-up is below the requested share")
    return allowed


def _used_level(snapshot: Mapping[str, object]) -> int:
    """Device bytes in use by anyone, as one reading shows them."""
    return _reading(snapshot, "total_memory") - _reading(snapshot, "free_memory")


def _still_allocated(snapshot: Mapping[str, object]) -> int:
    """Bytes torch holds allocated at the reading; a reading without that figure allows at most its peak and its
    reservation (allocated bytes are never above either)."""
    if "torch_allocated" in snapshot:
        return _reading(snapshot, "torch_allocated")
    return min(_reading(snapshot, "torch_peak"), _reading(snapshot, "torch_memory"))


class _DeviceReplay:
    """Bytes in use on one device, starting at `level`, which the instance may fill up to `ceiling`."""

    def __init__(self, level: int, ceiling: int) -> None:
        self.level, self.ceiling = level, ceiling

    def put(self, nbytes: int) -> None:
        self.level += nbytes

    def move_to(self, level: int) -> None:
        """Set the level read off a later snapshot; vLLM's budget assumes others never free memory meanwhile."""
        if level < self.level:
            raise ValueError("the device shows less memory in use after the profile than at start-up")
        self.level = level

    @property
    def room(self) -> int:
        return self.ceiling - self.level


def available_kv_cache_bytes(baseline: Mapping[str, object], before_profile: Mapping[str, object],
                             after_profile: Mapping[str, object], weights_memory: int,
                             gpu_memory_utilization: float) -> int:
    """Room left for the KV cache after replaying the profile on the device (determine_available_memory of
    vllm/v1/worker/gpu_worker.py over memory_profiling of vllm/utils/mem_utils.py, 0.33.0); ValueError when none.

    What the device shows in use after the profile is the instance's weights, workspaces and communicators (all
    that stays); on top of it the profile's peak comes back at every forward pass, less what is still allocated.
    The weights are inside the device level already, so `weights_memory` (recorded by vLLM) adds nothing.
    """
    readings = (baseline, before_profile, after_profile)
    if len({r["device"] for r in readings}) != 1 or len({_reading(r, "total_memory") for r in readings}) != 1:
        raise ValueError("the three readings must come from one device")
    allowed = startup_share(baseline, gpu_memory_utilization)
    # What others (and the CUDA context) held at start-up is not the instance's: the ceiling sits `allowed` above it.
    start_level = _used_level(baseline)
    device = _DeviceReplay(level=start_level, ceiling=start_level + allowed)
    device.move_to(_used_level(after_profile))
    device.put(_reading(after_profile, "torch_peak") - _still_allocated(after_profile))
    if device.room <= 0:
        raise ValueError("no memory left for the KV cache")
    return device.room


@lru_cache(maxsize=None)
def measured_block_bytes(block_size: int, num_kv_heads: int, head_size: int, dtype: str) -> int:
    """Bytes of K and V for `block_size` tokens of one layer, as torch sizes a meta tensor of that shape."""
    block = torch.empty((2, block_size, num_kv_heads, head_size), dtype=getattr(torch, dtype), device="meta")
    return block.nbytes


def _whole_blocks(room: int, per_block: int) -> int:
    """Blocks of `per_block` bytes allocated from `room` until the next one would not fit.

    Blocks are taken in batches of 2^k, the largest batch that fits first, so at most about 2 log2(room /
    per_block) allocations are tried; what is left at the end is less than one block.
    """
    if per_block <= 0:  # as a division by a block of no bytes would fail
        raise ZeroDivisionError(f"cannot count blocks of {per_block} bytes")
    if room < per_block:
        return 0
    batch_log = 0
    while per_block << (batch_log + 1) <= room:
        batch_log += 1
    allocated = 0
    for log in range(batch_log, -1, -1):
        if per_block << log <= room:
            room -= per_block << log
            allocated += 1 << log
    assert 0 <= room < per_block
    return allocated


def _per_block(num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype: str) -> int:
    """Bytes of one block across all `num_layers` layers: one meta-measured block tensor per layer."""
    return sum(measured_block_bytes(block_size, num_kv_heads, head_size, dtype) for _ in range(num_layers))


def pool_num_blocks(baseline: Mapping[str, object], before_profile: Mapping[str, object],
                    after_profile: Mapping[str, object], weights_memory: int, gpu_memory_utilization: float,
                    num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype: str,
                    kv_cache_memory_bytes: int, profiled: bool) -> int:
    """Whole blocks of `num_layers` full-attention layers allocated from an explicit byte budget, else from the
    profile's room, else 256 (get_num_blocks of vllm/v1/core/kv_cache_utils.py); ValueError when none fits.

    A measured device is checked at start-up whatever sizes the pool (init_device of vllm/v1/worker/gpu_worker.py).
    """
    per_block = _per_block(num_layers, block_size, num_kv_heads, head_size, dtype)
    if profiled:
        startup_share(baseline, gpu_memory_utilization)
    if kv_cache_memory_bytes > 0:
        budget = kv_cache_memory_bytes
    elif profiled:
        budget = available_kv_cache_bytes(baseline, before_profile, after_profile, weights_memory,
                                          gpu_memory_utilization)
    else:
        return FALLBACK_NUM_BLOCKS
    blocks = _whole_blocks(budget, per_block)
    if blocks == 0:
        raise ValueError("the budget does not hold one block")
    return blocks


def _check_batch(max_num_batched_tokens: int | None) -> None:
    """A scheduled batch holds at least one token; a full-attention layer keeps a block for every token of the
    request whatever the batch (MEM-2.9), so the batch never enters the fit counts below."""
    if max_num_batched_tokens is not None and (isinstance(max_num_batched_tokens, bool)
                                               or not isinstance(max_num_batched_tokens, int)
                                               or max_num_batched_tokens < 1):
        raise ValueError(f"max_num_batched_tokens must be an int >= 1, got {max_num_batched_tokens!r}")


def longest_fitting_len(num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype: str,
                        available_memory: int, max_model_len: int, max_num_batched_tokens: int | None = None) -> int:
    """Longest request (at most max_model_len) whose whole blocks in every layer fit; 0 if none does
    (estimate_max_model_len of vllm/v1/core/kv_cache_utils.py): the tokens of the blocks one request can take."""
    _check_batch(max_num_batched_tokens)
    per_block = _per_block(num_layers, block_size, num_kv_heads, head_size, dtype)
    blocks = _whole_blocks(max(available_memory, 0), per_block)
    return min(blocks * block_size, max_model_len)


def _blocks_to_cover(tokens: int, block_size: int) -> int:
    """The fewest blocks of `block_size` tokens that hold `tokens` tokens, by bisection on the block count."""
    low, high = 0, 1  # invariant: low blocks are too few, high blocks are enough
    while high * block_size < tokens:
        low, high = high, high << 1
    while high - low > 1:
        middle = (low + high) >> 1
        if middle * block_size >= tokens:
            high = middle
        else:
            low = middle
    return high if tokens > 0 else 0


NULL_BLOCKS = 1  # blocks of the pool BlockPool keeps for itself (its null block) in vLLM 0.33.0


def refuse_if_too_small(num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype: str,
                        available_memory: int, max_model_len: int, max_num_batched_tokens: int | None = None) -> None:
    """ValueError unless the budget's whole pool blocks hold the null block and every block of one max_model_len
    request (MEM-3.6; check_enough_kv_cache_memory of vllm/v1/core/kv_cache_planning.py, 0.33.0)."""
    _check_batch(max_num_batched_tokens)
    per_block = _per_block(num_layers, block_size, num_kv_heads, head_size, dtype)
    if per_block <= 0:
        raise ZeroDivisionError(f"cannot fit blocks of {per_block} bytes")
    pool_blocks = _whole_blocks(max(available_memory, 0), per_block)
    if pool_blocks < NULL_BLOCKS + _blocks_to_cover(max_model_len, block_size):
        raise ValueError("the pool does not hold the null block and one request of max_model_len")
