"""The wrong answers a too-wide tolerance lets through (docs/numeric-gates.md §5), derived from an expected result and scaled
to its data, never to the tolerance: zeros, a constant equal to its mean, its last axis permuted, it plus seeded
noise of a share of its RMS (absolute noise: the same for every element), and relative noise, each element moved by
a share of itself (e·(1 ± ρ), the sign seeded; under `ulp` by a number of units in its last place), which the rtol
term of a tolerance must reject where the atol term alone would let RMS-scaled noise through.

Each is the expected result with one array the policy applies a tolerance to replaced (floating arrays; under
`tokens` also the token ids, never the oracle's margins), the others left right: a port wrong in one output of several must fail too, and an
output compared exactly, or a second output of another scale, would otherwise hide a tolerance too wide for the
first. numpy is imported only when an answer is derived.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _vllm_gates.values.policies import ALLCLOSE_DEFAULTS, Policy

ZEROS, MEAN, PERMUTED, NOISE, RELATIVE = "zeros", "the expected mean", "the last axis permuted", "noise", "relative noise"
WRONG_ANSWERS = (ZEROS, MEAN, PERMUTED, NOISE, RELATIVE)
NOISE_SEED = 29  # the noise of sample i is drawn from PCG64(SeedSequence([NOISE_SEED, i])): the same on every machine
CHUNK = 1 << 20  # elements per step while noise is added: the float64 temporaries stay a few MiB

ArrayMap = Callable[[Any, Any], Any]  # (expected array, its noise generator or None) -> the wrong array


def governed(value: Any, policy: Policy) -> list[Any]:
    """The arrays inside a result that ``policy`` applies a tolerance to, in the order a result is walked."""
    return [array for _, array in governed_places(value, policy)]


def governed_places(value: Any, policy: Policy) -> list[tuple[str, Any]]:
    """``governed``'s arrays with their places in the result ("" for the result itself, "[0]", "['logits']")."""
    found: list[tuple[str, Any]] = []

    def noted(array: Any, place: str) -> Any:
        found.append((place, array))
        return array

    substituted(value, policy, noted)
    return found


def substituted(value: Any, policy: Policy, make: Callable[[Any, str], Any], place: str = "") -> Any:
    """``value`` with each array ``governed`` yields replaced by ``make(array, its place)``; the rest as it is."""
    import numpy as np

    if isinstance(value, np.ndarray):  # under tokens too: the arrays beside the ids are compared as allclose
        return make(value, place) if value.dtype.name in ALLCLOSE_DEFAULTS else value
    if isinstance(value, dict):
        if policy.name == "tokens" and policy.tokens in value and policy.margins in value:
            ids = value[policy.tokens]
            governed_ids = isinstance(ids, np.ndarray) and ids.dtype.kind in "iu"
            return {key: (inner if key == policy.margins  # the oracle's own margins are never compared
                          else make(inner, f"{place}[{key!r}]") if key == policy.tokens and governed_ids
                          else inner if key == policy.tokens
                          else substituted(inner, policy, make, f"{place}[{key!r}]"))
                    for key, inner in value.items()}
        return {key: substituted(inner, policy, make, f"{place}[{key!r}]") for key, inner in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(substituted(inner, policy, make, f"{place}[{number}]") for number, inner in enumerate(value))
    return value


def wrong_answer(name: str, expected: Any, policy: Policy, sample: int, level: float,
                 place: str | None = None, dtype: str | None = None) -> Any | None:
    """The wrong answer ``name`` derived from ``expected`` (``level``: the noise's share of the RMS; for relative
    noise the share of each element, or under `ulp` the units; ``sample``: the sample's number, which seeds its
    noise), in the governed array at ``place`` only (None: in every one) and of ``dtype`` only (None: of any); None
    where it equals ``expected`` there (an all-zero, constant or row-constant expectation, noise too small to change
    an element, or no such array): it is then no wrong answer."""
    import numpy as np

    make: Callable[[Any], Any] = {ZEROS: _zeros, MEAN: _mean, PERMUTED: _permuted}.get(name) or (lambda array: array)
    if name in (NOISE, RELATIVE):
        generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence([NOISE_SEED, sample])))
        if name == NOISE:
            make = lambda array: _noisy(array, level, generator)  # noqa: E731  # the generator carries on array to array
        elif policy.name == "ulp":
            make = lambda array: _units_off(array, int(level), generator)  # noqa: E731
        else:
            make = lambda array: _relative(array, level, generator)  # noqa: E731
    changed = False

    def replace(array: Any, where: str) -> Any:
        nonlocal changed
        if (place is not None and where != place) or (dtype is not None and array.dtype.name != dtype):
            return array
        wrong = make(array)
        if wrong is not array and not changed and _differs(wrong, array):
            changed = True
        return wrong

    found = substituted(expected, policy, replace)
    return found if changed else None


def _differs(wrong: Any, array: Any) -> bool:
    """Some element of ``wrong`` differs in value from ``array``'s (NaN equal to NaN), chunk by chunk."""
    import numpy as np

    ours, theirs = wrong.reshape(-1), array.reshape(-1)
    floating = array.dtype.kind not in "iub"
    for start in range(0, theirs.size, CHUNK):
        if not np.array_equal(ours[start:start + CHUNK], theirs[start:start + CHUNK], equal_nan=floating):
            return True
    return False


def _cast(values: Any, like: Any) -> Any:
    """Float64 values in ``like``'s dtype; integers rounded and held within the dtype's range."""
    import numpy as np

    if like.dtype.kind in "iu":
        info = np.iinfo(like.dtype)
        values = np.clip(np.rint(values), info.min, info.max)
    return values.astype(like.dtype)


def _finite(array: Any) -> Any:
    import numpy as np

    values = array.reshape(-1).astype(np.float64)
    return values[np.isfinite(values)]


def _zeros(array: Any) -> Any:
    import numpy as np

    return np.zeros(array.shape, dtype=array.dtype)


def _mean(array: Any) -> Any:
    """Every element the mean of the finite expected elements (none finite: the array as it is), summed as shares
    of the largest magnitude, so that values near float64's largest do not overflow the sum."""
    import numpy as np

    finite = _finite(array)
    if not finite.size:
        return array
    top = float(np.max(np.abs(finite)))
    mean = float(np.mean(finite / top)) * top if top else 0.0
    return np.full(array.shape, _cast(np.array(mean), array), dtype=array.dtype)


def _permuted(array: Any) -> Any:
    """The last axis rotated by one place: every element moves, and every row whose values are not all equal
    changes (a row equal to itself rotated by one is constant); a 0-d array has no axis to permute."""
    import numpy as np

    return np.roll(array, 1, axis=-1) if array.ndim else array


def rms(array: Any) -> float:
    """The root mean square of the finite elements (0 for none), summed as shares of the largest magnitude (a first
    pass), so that no square under- or overflows anywhere in float64's range."""
    import numpy as np

    flat = array.reshape(-1)
    parts = [slice(start, start + CHUNK) for start in range(0, flat.size, CHUNK)]
    top = 0.0
    for part in parts:
        values = flat[part].astype(np.float64)
        values = np.abs(values[np.isfinite(values)])
        top = max(top, float(values.max())) if values.size else top
    total, count = 0.0, 0
    for part in parts:
        values = flat[part].astype(np.float64)
        values = values[np.isfinite(values)]
        count += values.size
        if top:
            scaled = values / top
            total += float(np.dot(scaled, scaled))
    return top * (total / count) ** 0.5 if count else 0.0


def _noisy(array: Any, level: float, generator: Any) -> Any:
    """The array plus normal noise of standard deviation ``level`` × its RMS, drawn chunk by chunk in float64 and
    cast back; non-finite elements stay as they are."""
    import numpy as np

    scale = level * rms(array)
    if scale == 0.0:
        return array
    out = np.empty(array.shape, dtype=array.dtype)
    source, target = array.reshape(-1), out.reshape(-1)
    for start in range(0, source.size, CHUNK):
        part = source[start:start + CHUNK].astype(np.float64)
        noisy = part + scale * generator.standard_normal(part.size)
        noisy = np.where(np.isfinite(part), noisy, part)
        target[start:start + CHUNK] = _cast(noisy, array)
    return out


def _relative(array: Any, level: float, generator: Any) -> Any:
    """Each finite element e of a float array as e·(1 ± level), the sign seeded per element, cast back (integer
    arrays, such as token ids, as they are: relative noise is a float answer)."""
    import numpy as np

    if array.dtype.name not in ALLCLOSE_DEFAULTS:
        return array
    out = np.empty(array.shape, dtype=array.dtype)
    source, target = array.reshape(-1), out.reshape(-1)
    for start in range(0, source.size, CHUNK):
        part = source[start:start + CHUNK].astype(np.float64)
        moved = part * (1.0 + level * (generator.integers(0, 2, part.size) * 2.0 - 1.0))
        target[start:start + CHUNK] = _cast(np.where(np.isfinite(part), moved, part), array)
    return out


def _units_off(array: Any, units: int, generator: Any) -> Any:
    """Each finite element of a float array moved by ``units`` units in its last place, up or down (seeded), along
    the dtype's ordered values (through zero where it crosses it; held at the largest finite value)."""
    import numpy as np

    if array.dtype.name not in ALLCLOSE_DEFAULTS or units <= 0:
        return array
    unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}[array.dtype.itemsize]
    sign = np.uint64(1) << np.uint64(array.dtype.itemsize * 8 - 1)
    largest = int(np.array(np.inf, dtype=array.dtype).view(unsigned)) - 1  # the largest finite value's bits
    out = np.empty(array.shape, dtype=array.dtype)
    source, target = array.reshape(-1), out.reshape(-1)
    for start in range(0, source.size, CHUNK):
        part = source[start:start + CHUNK]
        bits = part.view(unsigned).astype(np.uint64)
        magnitude = (bits & ~sign).astype(np.int64)
        ordinal = np.where((bits & sign) != 0, -magnitude, magnitude)
        steps = (generator.integers(0, 2, part.size) * 2 - 1) * min(units, largest, 1 << 51)  # no int64 overflow
        moved = np.clip(ordinal + steps, -largest, largest)
        new_bits = np.abs(moved).astype(np.uint64) | np.where(moved < 0, sign, np.uint64(0))
        finite = np.isfinite(part.astype(np.float64))
        target[start:start + CHUNK] = np.where(finite, new_bits.astype(unsigned).view(array.dtype), part)
    return out
