"""Hypothesis profiles of gate runs: `ci` (derandomized, chosen when CI is set), `dev` (default), `thorough`, `deep`.

They are registered and loaded only when a run collects gate items, so a project without gates keeps its own.
A profile that is not derandomized draws from a run seed (README, "Commands"): fresh each run and printed, or the one
`--hypothesis-seed` gives; each gate's properties draw from a seed derived from it and the gate alone.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

# deep: fifty times the declared examples. This repository's gates declare 20 to 400, so a deep run tries 1,000 to
# 20,000 inputs per gate from a new seed each time: the cpu gates' properties take ~80 s at 1x on two cores here,
# so about an hour at 50x, a nightly job's budget, reaching narrow input ranges that a 1x run meets only by luck.
PROFILE_MULTIPLIER = {"ci": 1, "dev": 1, "thorough": 10, "deep": 50}
PROFILES = tuple(PROFILE_MULTIPLIER)
SEED_OPTION = "--hypothesis-seed"  # Hypothesis's own pytest option: here it names the run seed


def register_profiles() -> None:
    """Register the four profiles; no deadline anywhere (shared runners make deadlines flaky)."""
    from hypothesis import HealthCheck, settings

    quiet = [HealthCheck.too_slow, HealthCheck.data_too_large]
    base = settings.get_profile("default")  # not the profile loaded now, which a profile would otherwise inherit from
    for name in PROFILES:
        settings.register_profile(name, base, derandomize=name == "ci", database=None, deadline=None, print_blob=True,
                                  suppress_health_check=quiet)


def default_profile_name() -> str:
    return "ci" if os.environ.get("CI") else "dev"


def load_default_profile() -> None:
    """Load `ci` or `dev` unless the user already chose a profile of their own."""
    from hypothesis import settings

    if settings.get_current_profile_name() == "default":
        settings.load_profile(default_profile_name())


def current_profile_name() -> str:
    from hypothesis import settings

    return settings.get_current_profile_name()


def derandomized() -> bool:
    """The loaded profile draws the same examples every run (`ci`): no seed is used or printed."""
    from hypothesis import settings

    return bool(settings.default.derandomize)  # type: ignore[union-attr]  # typed Optional; a profile is always loaded


def effective_max_examples(declared: int) -> int:
    """The gate's max_examples scaled by the loaded profile (thorough ten times, deep fifty times more)."""
    return declared * PROFILE_MULTIPLIER.get(current_profile_name(), 1)


@dataclass(frozen=True)
class RunSeed:
    """The seed of one run: the text of `--hypothesis-seed`, or drawn fresh; ``given`` says which."""

    value: str
    given: bool

    @classmethod
    def choose(cls, option: Any, inherited: str | None = None) -> RunSeed:
        """`--hypothesis-seed` when set; else the controller's (an xdist worker); else a fresh one."""
        if option is not None:
            return cls(str(option), True)
        if inherited is not None:
            return cls(inherited, False)
        return cls(str(secrets.randbelow(10**9)), False)

    def for_gate(self, row: str, gate: str) -> int:
        """The seed one gate's properties draw from: the same for the gate in a whole run and alone in a rerun."""
        return int.from_bytes(hashlib.sha256(f"{self.value}\0{row}\0{gate}".encode()).digest()[:16], "big")

    def replay(self, profile: str) -> str:
        """The pytest options that replay what this run drew under ``profile``."""
        if derandomized():
            return f"--hypothesis-profile={profile}"
        return f"--hypothesis-profile={profile} {SEED_OPTION}={self.value}"

    def drawn(self, profile: str) -> str:
        """How this run's examples were drawn: the profile, and the seed where it matters."""
        if derandomized():
            return f"hypothesis profile {profile} (derandomized: the same examples every run)"
        return f"hypothesis profile {profile}, seed {self.value}"

    def describe(self, profile: str) -> str:
        """One line for the summary: how the examples were drawn and, with a seed, the options that replay them."""
        return self.drawn(profile) if derandomized() else f"{self.drawn(profile)} (replay: {self.replay(profile)})"


def settings_for(max_examples: int, hunting: bool = False, seed: int | None = None, database: Any = None,
                 replay: bool = False) -> Callable[[Any], Any]:
    """Settings for one property run; a known-bad hunt is always derandomized and never shrinks. ``seed``: the
    gate's seed under a profile that is not derandomized (it would override derandomize, so a hunt takes none).
    ``database``: the run's example database (examples_db); the failures found are saved there, and it is read only
    with ``replay``, a run of the saved examples alone (reuse and shrink, nothing generated), so that the examples
    a run generates are those it draws without a database."""
    from hypothesis import Phase, seed as seeded, settings

    if hunting:
        return settings(max_examples=max_examples, derandomize=True, database=None, phases=[Phase.explicit, Phase.generate])
    chosen = settings(max_examples=max_examples)
    if database is not None:
        kept = (Phase.reuse, Phase.shrink) if replay else tuple(p for p in chosen.phases if p is not Phase.reuse)
        chosen = settings(chosen, database=database, phases=[p for p in chosen.phases if p in kept])
    if seed is None or chosen.derandomize:
        return chosen

    def seeded_test(test: Any) -> Any:
        test = seeded(seed)(chosen(test))
        if database is not None:  # hypothesis.seed turns the test's database off: the run's is put back
            test._hypothesis_internal_use_settings = settings(test._hypothesis_internal_use_settings, database=database)
        return test

    return seeded_test


@contextlib.contextmanager
def examples_of_the_gate_alone() -> Iterator[None]:
    """Hypothesis also draws constants it finds in the project's modules loaded so far (hypothesis >= 6.131), so
    what a property draws would depend on what the session imported before it. While a gate's properties run, that
    pool is empty: its examples depend only on the seed, the profile and its strategy, and a rerun of the gate alone
    draws what the whole run drew. Without that internal hook (another Hypothesis), nothing is changed."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without the module
        yield
        return
    original = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    constants = getattr(providers, "Constants", None)
    if original is None or cache is None or constants is None:
        yield
        return
    empty = constants()
    cache.cache.clear()
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.cache.clear()
