"""Hypothesis profiles of gate runs: `ci` (derandomized, chosen when CI is set), `dev` (default), `thorough`.

They are registered and loaded only when a run collects gate items, so a project without gates keeps its own.
"""
from __future__ import annotations

import os
from typing import Any, Callable

PROFILE_MULTIPLIER = {"ci": 1, "dev": 1, "thorough": 10}


def register_profiles() -> None:
    """Register the three profiles; no deadline anywhere (shared runners make deadlines flaky)."""
    from hypothesis import HealthCheck, settings

    quiet = [HealthCheck.too_slow, HealthCheck.data_too_large]
    settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True, suppress_health_check=quiet)
    settings.register_profile("dev", database=None, deadline=None, print_blob=True, suppress_health_check=quiet)
    settings.register_profile("thorough", database=None, deadline=None, print_blob=True, suppress_health_check=quiet)


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


def effective_max_examples(declared: int) -> int:
    """The gate's max_examples scaled by the loaded profile (thorough runs ten times more)."""
    return declared * PROFILE_MULTIPLIER.get(current_profile_name(), 1)


def settings_for(max_examples: int, hunting: bool = False) -> Callable[[Any], Any]:
    """Settings for one property run; a known-bad hunt is always derandomized and never shrinks."""
    from hypothesis import Phase, settings

    if hunting:
        return settings(max_examples=max_examples, derandomize=True, database=None, phases=[Phase.explicit, Phase.generate])
    return settings(max_examples=max_examples)
