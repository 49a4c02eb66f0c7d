"""The exit codes of `gates` and of a pytest run that collected gates (README, "Exit codes")."""
from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """0 claims met; 1 a claim not met; 2 usage; 3 a definition or harness error; 5 nothing ran; 130 interrupted."""

    OK = 0
    CLAIM_NOT_MET = 1
    USAGE = 2
    ERROR = 3
    EMPTY = 5
    INTERRUPTED = 130  # SIGINT or SIGTERM stopped the run: its reports say `interrupted`, no claim is met
