"""The run's report files (docs/reports.md): `--json F` and `--markdown F` (pytest: `--gates-json`, `--gates-markdown`),
written when the run is judged (session.GateRun.finish), and `gates run --junit F`, pytest's `--junitxml` with a test
case per claim."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from _vllm_gates.run.features import RunOption, RunPlan, hookimpl

JSON = RunOption("json", "write the verdicts as JSON", metavar="F")
MARKDOWN = RunOption("markdown", "write the verdicts as Markdown (a CI step summary)", metavar="F")
JUNIT = RunOption("junit", "write JUnit XML: a test case per gate item and per claim", metavar="F", pytest=False)


@hookimpl
def gates_add_options() -> list[RunOption]:
    return [JSON, MARKDOWN, JUNIT]


@hookimpl
def gates_plan_run(plan: RunPlan, args: Any, project: Any) -> RunPlan:
    junit = getattr(args, JUNIT.dest)
    found = JSON.pytest_args(getattr(args, JSON.dest)) + MARKDOWN.pytest_args(getattr(args, MARKDOWN.dest))
    return replace(plan, pytest_args=plan.pytest_args + tuple(found + ([f"--junitxml={junit}"] if junit else [])))


@hookimpl
def gates_run_values(config: Any, handed: Any, worker: bool) -> dict[str, Any]:
    return {"json_path": config.getoption(JSON.pytest_dest), "markdown_path": config.getoption(MARKDOWN.pytest_dest)}
