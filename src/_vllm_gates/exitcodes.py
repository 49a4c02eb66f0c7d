"""The exit codes of `gates` and of a pytest run that collected gates (README, "Exit codes")."""
from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """0 claims met; 1 a claim not met; 2 usage; 3 a definition or harness error; 5 nothing ran; 6 claims unproven;
    7 nothing could run here; 130 interrupted. (4 is left to pytest's usage error, which `gates` reports as 2.)"""

    OK = 0
    CLAIM_NOT_MET = 1
    USAGE = 2
    ERROR = 3
    EMPTY = 5
    UNPROVEN = 6  # nothing that ran failed, but a claim rests on gates this run did not execute and no evidence covers
    NOT_RUNNABLE = 7  # items were selected, but every one was skipped for want of what its marker requires (CUDA)
    INTERRUPTED = 130  # SIGINT or SIGTERM stopped the run: its reports say `interrupted`, no claim is met
