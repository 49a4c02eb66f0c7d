"""The audit's stand-in (README, `gates audit`): put in the impl's place, it returns a result equal to nothing."""
from __future__ import annotations

from typing import Any

WRONG_RESULT = object()  # the worker answers it as the protocol's {"$wrong": true}


def wrong_everywhere(*args: Any, **kwargs: Any) -> object:
    """Whatever it is called with, a result no expectation or oracle can equal."""
    return WRONG_RESULT
