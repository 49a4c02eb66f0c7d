"""The shared example database (README, "A shared example database"): `--examples-db DIR` and
`--examples-db-read-only DIR` (pytest: `--gates-examples-db`, `--gates-examples-db-read-only`), else the project's
`examples-db` keys, opened once per run (examples_db.open_shared_examples) for the gate items to replay and save."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from _vllm_gates.run.features import RunOption, RunPlan, hookimpl

WRITTEN = RunOption("examples-db", "the example database read first and written: each gate's failing examples are "
                                   "saved in DIR and replayed before any generated one (pyproject: examples-db)",
                    metavar="DIR")
READ_ONLY = RunOption("examples-db-read-only", "an example database only read, e.g. a nightly job's artifact "
                                               "(repeatable; pyproject: examples-db-read-only)", metavar="DIR", repeat=True)


@hookimpl
def gates_add_options() -> list[RunOption]:
    return [WRITTEN, READ_ONLY]


@hookimpl
def gates_plan_run(plan: RunPlan, args: Any, project: Any) -> RunPlan:
    """Handed to pytest absolute (pytest runs in the project root)."""
    given, read = getattr(args, WRITTEN.dest), getattr(args, READ_ONLY.dest)
    found = WRITTEN.pytest_args(Path(given).resolve() if given else None)
    found += READ_ONLY.pytest_args([Path(entry).resolve() for entry in read])
    return replace(plan, pytest_args=plan.pytest_args + tuple(found))


@hookimpl
def gates_configure(run: Any, config: Any) -> None:
    """The run's example database, for its items (items.EXAMPLES). A directory that cannot be used is left out and
    said once, under the row table (by an xdist controller, not by each worker); the database in use is named there too."""
    from _vllm_gates.run import xdist_run
    from _vllm_gates.run.examples_db import DatabasePath, open_shared_examples
    from _vllm_gates.run.items import EXAMPLES

    project = run.project
    given, read = config.getoption(WRITTEN.pytest_dest), list(config.getoption(READ_ONLY.pytest_dest) or ())
    if given:
        written: DatabasePath | None = DatabasePath(Path(given).resolve(), "--gates-examples-db, gates run --examples-db")
    else:
        written = DatabasePath(project.root / project.examples_db, "examples-db in pyproject.toml") if project.examples_db else None
    if read:
        read_only = [DatabasePath(Path(entry).resolve(), "--gates-examples-db-read-only, gates run --examples-db-read-only")
                     for entry in read]
    else:
        read_only = [DatabasePath(project.root / entry, "examples-db-read-only in pyproject.toml")
                     for entry in project.examples_db_read_only]
    shared, refusals = open_shared_examples(written, read_only)
    config.stash[EXAMPLES] = shared
    if not xdist_run.is_worker(config):
        for note in refusals + ([f"example database: {shared.shown}"] if shared is not None else []):
            run.tell(note)
        if shared is not None:
            run.note_meta("examples_db", shared.shown)
