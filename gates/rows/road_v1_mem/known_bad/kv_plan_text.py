"""Known-bad kv-plan commands for gate kv-plan-output: wrong units, streams, exit status or output format (MEM-2.12)."""
from __future__ import annotations

import re
from typing import Any

from ..subjects import kv_plan_cli


def mebibytes_as_megabytes(model: str, argv: list[str]) -> dict[str, Any]:
    """A block's size in MB of 10^6 bytes labelled MiB."""
    run = kv_plan_cli(model, argv)

    def megabytes(match: re.Match[str]) -> str:
        return f"{match[1]} ({int(match[1].replace(',', '')) / 1e6:.2f} MiB)"

    return {**run, "stdout": re.sub(r"([\d,]+) \([\d.]+ MiB\)", megabytes, run["stdout"])}


def warning_on_stdout(model: str, argv: list[str]) -> dict[str, Any]:
    """Warnings printed among the plan's lines instead of on stderr."""
    run = kv_plan_cli(model, argv)
    warnings = "".join(line for line in run["stderr"].splitlines(keepends=True) if line.startswith("WARNING: "))
    return {**run, "stdout": warnings + run["stdout"], "stderr": run["stderr"].replace(warnings, "")}


def refusal_exits_1(model: str, argv: list[str]) -> dict[str, Any]:
    """A refused flag or config ends with status 1, as an uncaught error would, not argparse's 2."""
    run = kv_plan_cli(model, argv)
    return {**run, "exit": 1} if run["exit"] == 2 else run


def json_flag_ignored(model: str, argv: list[str]) -> dict[str, Any]:
    """--json accepted but the text lines printed."""
    return kv_plan_cli(model, [arg for arg in argv if arg != "--json"])
