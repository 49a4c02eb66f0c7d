"""The feature host: each feature of a gate run (evidence, mutation claims, the strength audit, shards, the example
database, interrupts, requirement skips) is one module registered here, answering the hooks below (pluggy, as
pytest-xdist adds its hooks with `pytest_addhooks`; docs/architecture.md, "Adding a feature").

A feature module owns its options (declared once: `gates run --NAME` and pytest's `--gates-NAME`), its state (a
key in the run's ``stash``) and its passes over the run's report. It is imported by the pytest entry to declare its
options, in every pytest session: at its top it imports only this module; the engine inside its hooks.
"""
from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pluggy

PROJECT = "vllm_gates"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

FEATURES = (  # the registration: a new feature is its module and a line here (this order: their plans, items, notes)
    "_vllm_gates.run.feature_reports",
    "_vllm_gates.run.feature_shards",
    "_vllm_gates.run.feature_examples_db",
    "_vllm_gates.run.feature_evidence",
    "_vllm_gates.run.feature_mutation",
    "_vllm_gates.run.feature_strength",
    "_vllm_gates.run.feature_tolerance_use",
    "_vllm_gates.run.feature_interrupts",
    "_vllm_gates.run.feature_requirements",
    "_vllm_gates.run.feature_run_passes",
)


@dataclass(frozen=True)
class RunOption:
    """One run option, declared once: `gates run --NAME` (``cli``) and pytest's `--gates-NAME` (``pytest``)."""

    name: str  # without dashes: "examples-db"
    help: str
    metavar: str | None = None
    repeat: bool = False  # given again for each value (a list)
    cli: bool = True
    pytest: bool = True
    narrows: str = ""  # what it changes of the verdicts: `gates run` refuses it from PYTEST_ADDOPTS (selection_guard)

    @property
    def dest(self) -> str:
        """The attribute `gates run`'s arguments hold it in."""
        return self.name.replace("-", "_")

    @property
    def pytest_dest(self) -> str:
        """The name `config.getoption` reads it by."""
        return f"gates_{self.dest}"

    def _spelling(self) -> dict[str, Any]:
        return {"help": self.help, "metavar": self.metavar,
                **({"action": "append", "default": []} if self.repeat else {})}

    def add_to_cli(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(f"--{self.name}", **self._spelling())

    def add_to_pytest(self, group: Any) -> None:
        group.addoption(f"--gates-{self.name}", dest=self.pytest_dest, **self._spelling())

    def pytest_args(self, value: Any) -> list[str]:
        """`gates run`'s value as the arguments of the pytest run it starts (none where it was not given)."""
        values = value if self.repeat else [value] if value else []
        return [f"--gates-{self.name}={entry}" for entry in values]


@dataclass(frozen=True)
class RunPlan:
    """What `gates run` starts pytest with, as its features change it (``gates_plan_run``): the rows, profile and
    implementation asked for, the node ids (None: the gate files), the run seed, the pytest arguments they add, the evidence it hands over, the report's `meta`
    entries; ``refused`` makes the usage error that names a flag and its value."""

    refused: Callable[[str], Exception]
    rows: tuple[str, ...] = ()  # the rows asked for (none: all)
    profile: str | None = None  # --profile (or deep for --deep); None: the project's default
    impl: str | None = None  # --impl, checked; None: python
    targets: list[str] | None = None
    seed: int | None = None
    pytest_args: tuple[str, ...] = ()
    evidence: tuple[Any, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReportPass:
    """A pass over the judged run report: ``apply(report, judging)`` returns the report it becomes. Passes run in the
    order of ``order`` (no two share one), after the verdicts are built."""

    order: int
    name: str
    apply: Callable[[Any, Judging], Any]


@dataclass(frozen=True)
class Judging:
    """What the passes over a run's report judge with (session.GateRun.judge): the run, its roadmap and the roadmap
    as the implementation claims it, the scope, the partial selection (None: whole rows), the gates' fingerprints, and the
    operations each row's implementation answers on evidence (filled before the verdicts are built)."""

    run: Any
    roadmap: Any
    claimed: Any
    scope: Any
    partial: Any
    fingerprints: Any
    answered: dict[str, frozenset[str]]


class FeatureSpec:
    """The hooks a feature module may answer (each a module-level function marked ``@hookimpl``)."""

    @hookspec
    def gates_add_options(self) -> Sequence[RunOption]:
        """The run options this feature adds."""
        return ()

    @hookspec
    def gates_run_values(self, config: Any, handed: Any, worker: bool) -> dict[str, Any] | None:
        """The values of the run's own fields this feature sets from its options, before the run starts (pytest's
        ``config``; ``handed``: what `gates run` resolved (selection.Handover), or None; ``worker``: an xdist worker)."""

    @hookspec
    def gates_configure(self, run: Any, config: Any) -> None:
        """The run is made: keep this feature's state in ``run.stash``, register its pytest side."""

    @hookspec
    def gates_plan_run(self, plan: Any, args: argparse.Namespace, project: Any) -> Any:
        """`gates run`'s plan (cli.RunPlan) as this feature changes it, or None to leave it."""

    @hookspec
    def gates_gate_items(self, node: Any, resolved: Any, common: dict[str, Any]) -> Sequence[Any]:
        """The items this feature adds to a gate's (after the gate's own)."""
        return ()

    @hookspec
    def gates_item_properties(self, record: Any) -> Sequence[tuple[str, str]]:
        """The JUnit properties a gate item's record adds to its test case."""
        return ()

    @hookspec
    def gates_before_verdicts(self, judging: Judging) -> None:
        """What this feature adds to the scope before the verdicts are built (evidence: the gates it covers)."""

    @hookspec
    def gates_report_passes(self) -> Sequence[ReportPass]:
        """This feature's passes over the finished run report."""
        return ()


_HOST: pluggy.PluginManager | None = None


def host() -> pluggy.PluginManager:
    """The plugin manager with every registered feature (made once per process)."""
    global _HOST
    if _HOST is None:
        manager = pluggy.PluginManager(PROJECT)
        manager.add_hookspecs(FeatureSpec)
        for name in FEATURES:
            manager.register(importlib.import_module(name), name)
        _HOST = manager
    return _HOST


def gathered(hook: str, **kwargs: Any) -> list[Any]:
    """Every feature's answer to ``hook``, flattened, in the order of registration."""
    answers = reversed(getattr(host().hook, hook)(**kwargs))  # pluggy calls the last registered first
    return [entry for answer in answers for entry in (answer if isinstance(answer, (list, tuple)) else [answer])]


def options(where: str) -> list[RunOption]:
    """The features' run options `gates run` (``cli``) or pytest (``pytest``) has."""
    return [option for option in gathered("gates_add_options") if getattr(option, where)]


def run_values(config: Any, handed: Any, worker: bool) -> dict[str, Any]:
    """The run's fields as the features set them from their options."""
    values: dict[str, Any] = {}
    for answer in reversed(host().hook.gates_run_values(config=config, handed=handed, worker=worker)):
        values.update(answer)
    return values


def planned(plan: Any, args: argparse.Namespace, project: Any) -> Any:
    """`gates run`'s plan as each feature changes it, in the order of registration."""
    for feature in host().hook.gates_plan_run.get_hookimpls():
        plan = feature.function(plan=plan, args=args, project=project) or plan
    return plan


def report_passes() -> list[ReportPass]:
    """Every feature's passes over the run report, in their declared order; two with one order are refused."""
    passes = sorted(gathered("gates_report_passes"), key=lambda entry: entry.order)
    for before, after in zip(passes, passes[1:], strict=False):
        if before.order == after.order:
            raise ValueError(f"report passes {before.name!r} and {after.name!r} both declare order {before.order}")
    return passes
