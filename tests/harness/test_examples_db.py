"""The shared example database (README, "A shared example database"): a failure a nightly-profile run found is
saved in a directory database; a fresh run with another seed that reads it (read only) fails on that example before
any generated one and says it came from the database; the examples a run generates are the same with or without a
database; a directory that cannot be used is refused once, with the reason, and the run goes on without it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.harness.conftest import log_beside
from tests.harness.test_replay import _failure_block, _hypothesis_state_restored, add_logged_gate  # noqa: F401

pytestmark = pytest.mark.cpu

GATE_FILE = "gates/rows/example/gate.yaml"
PROPERTIES = f"{GATE_FILE}::page-bytes::properties"
NARROW_INPUT = "{block_size: 3, heads: 4, head_size: 0, dtype_bytes: 1}"
DATABASE_LINE = "  database: a failing example saved in the example database ("


def plant_logged_narrow_bug(example) -> Path:
    """The impl wrong on 1 geometry in 30 (some seeds find it in 50 examples, some do not), logging each input it
    gets (block_size heads) to a file beside the project; that file."""
    log = log_beside(example.root, "impl.log")
    example.edit("    return 2 * block_size",
                 f"    with open({str(log)!r}, 'a', encoding='utf-8') as drawn:\n"
                 f"        drawn.write(f'{{block_size}} {{heads}}\\n')\n"
                 "    return (1 if heads == 4 and block_size == 3 else 0) + 2 * block_size", "example_row/impl.py")
    return log


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _seed_that(example, fails: bool, profile: str, *extra: str, after: int = 0) -> tuple[int, object]:
    """The first of 60 seeds after ``after`` whose run of the properties alone fails (or passes) as asked, and that run."""
    for seed in range(after + 1, after + 61):
        run = example.pytest(f"--hypothesis-profile={profile}", f"--hypothesis-seed={seed}", *extra, PROPERTIES)
        if (run.ret == 1) == fails:
            return seed, run
    raise AssertionError(f"no seed of 60 {'finds' if fails else 'misses'} the narrow bug under {profile}")


def test_a_failure_the_nightly_profile_found_replays_first_from_a_read_only_database(example, tmp_path_factory):
    log = plant_logged_narrow_bug(example)
    shared = tmp_path_factory.mktemp("nightly-artifact") / "examples"
    nightly, run = _seed_that(example, True, "deep", f"--gates-examples-db={shared}")
    assert f"  input : {NARROW_INPUT}" in _failure_block(run.outlines)
    assert DATABASE_LINE not in run.stdout.str()  # found by generating: nothing was saved before
    saved = _files(shared)
    assert saved, "the failure the deep run found is saved in the database"

    missed, run = _seed_that(example, False, "dev", after=nightly)  # another seed, which does not draw the narrow input
    assert run.ret == 0
    log.unlink()
    replay = example.pytest("--hypothesis-profile=dev", f"--hypothesis-seed={missed}",
                            f"--gates-examples-db-read-only={shared}", PROPERTIES)
    assert replay.ret == 1, replay.stdout.str()
    block = _failure_block(replay.outlines)
    assert f"  input   : {NARROW_INPUT}" in block
    assert any(line.startswith(DATABASE_LINE) and f"{shared} (read only)" in line for line in block), block
    assert log.read_text(encoding="utf-8").splitlines()[0] == "3 4"  # the saved example was the first the impl got
    assert _files(shared) == saved  # read only: nothing added, nothing deleted
    assert f"example database: {shared} (read only)" in replay.stdout.str()


def test_the_derandomized_ci_profile_replays_the_saved_failure_too(example, tmp_path_factory):
    plant_logged_narrow_bug(example)
    shared = tmp_path_factory.mktemp("db") / "examples"
    _seed_that(example, True, "thorough", f"--gates-examples-db={shared}")
    local = tmp_path_factory.mktemp("local") / "examples"
    run = example.pytest("--hypothesis-profile=ci", f"--gates-examples-db={local}", f"--gates-examples-db-read-only={shared}",
                         PROPERTIES)
    assert run.ret == 1, run.stdout.str()
    block = _failure_block(run.outlines)
    assert f"  input   : {NARROW_INPUT}" in block and any(line.startswith(DATABASE_LINE) for line in block), block
    assert f"example database: {local} (read and written), {shared} (read only)" in run.stdout.str()
    assert _files(local), "the replayed failure is saved in the writable database beside the shared one"


@pytest.mark.parametrize("profile", ["dev", "ci"])
def test_the_examples_a_run_generates_are_the_same_with_or_without_a_database(example, tmp_path_factory, profile):
    """The database only adds examples to try first: what a run generates after them is what it draws without one."""
    log = add_logged_gate(example)
    node = f"{GATE_FILE}::wide::properties"

    def drawn(*extra: str, code: int = 0) -> list[str]:
        log.unlink(missing_ok=True)
        run = example.pytest(f"--hypothesis-profile={profile}", "--hypothesis-seed=7", *extra, node)
        assert run.ret == code, run.stdout.str()
        return log.read_text(encoding="utf-8").splitlines()

    without = drawn()
    database = tmp_path_factory.mktemp("db") / "examples"
    assert drawn(f"--gates-examples-db={database}") == without and len(without) == 60
    wrong = "    return 2 * block_size * heads * head_size * dtype_bytes"
    example.edit(wrong, "    return (1 if heads > 1000 else 0) + 2 * block_size * heads * head_size * dtype_bytes",
                 "example_row/wide.py")
    drawn(f"--gates-examples-db={database}", code=1)  # a failure, saved
    example.edit("    return (1 if heads > 1000 else 0) + 2", "    return 2", "example_row/wide.py")  # fixed again
    with_saved = drawn(f"--gates-examples-db={database}")
    assert len(with_saved) > 60 and with_saved[-60:] == without  # the saved ones first, then the same 60 as ever


def test_a_directory_that_cannot_be_used_is_refused_once_and_the_run_goes_on(example, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad")
    a_file = folder / "a-file"
    a_file.write_text("not a database\n", encoding="utf-8")
    missing = folder / "missing"
    result = example.gates("run", "--examples-db", str(a_file), "--examples-db-read-only", str(missing),
                           "--examples-db-read-only", str(a_file / "below"))
    assert result.code == 0, result.text
    for path, why in ((a_file, "cannot be read and written: it is not a directory"),
                      (missing, "cannot be read: no such directory"), (a_file / "below", "cannot be read: no such directory")):
        line = f"example database {path} ("
        assert result.text.count(line) == 1, result.text
        shown = next(text for text in result.text.splitlines() if text.startswith(line))
        assert why in shown and shown.endswith("; the run goes on without it"), shown
        assert "--examples-db" in shown
    assert "example database: " not in result.text  # none could be used


def test_an_unwritable_path_is_refused_with_the_reason(example, tmp_path_factory):
    blocked = tmp_path_factory.mktemp("bad") / "a-file"
    blocked.write_text("", encoding="utf-8")
    result = example.gates("run", "--examples-db", str(blocked / "below"))
    assert result.code == 0, result.text
    line = next(text for text in result.text.splitlines() if text.startswith(f"example database {blocked / 'below'} ("))
    assert re.search(r"cannot be read and written: it is not writable \(.+\); the run goes on without it$", line), line


def test_the_project_keys_name_the_databases_relative_to_its_root(example):
    example.edit("[tool.vllm-gates]\n", "[tool.vllm-gates]\nexamples-db = \"reports/examples\"\n"
                 "examples-db-read-only = [\"artifacts/missing\"]\n", "pyproject.toml")
    result = example.gates("run")
    assert result.code == 0, result.text
    assert f"example database: {example.root / 'reports/examples'} (read and written)" in result.text
    assert (f"example database {example.root / 'artifacts/missing'} (examples-db-read-only in pyproject.toml) cannot be "
            "read: no such directory; the run goes on without it") in result.text
    assert (example.root / "reports/examples").is_dir()


def test_a_key_of_the_wrong_type_is_a_definition_error(example):
    example.edit("[tool.vllm-gates]\n", "[tool.vllm-gates]\nexamples-db = 3\n", "pyproject.toml")
    result = example.gates("list")
    assert result.code != 0
    assert "examples-db" in result.text and "expected a non-empty string, got 3" in result.text


@pytest.mark.parametrize("ending, headline", [("import os; os._exit(3)", "impl crashed: its worker"),
                                              ("import time; time.sleep(60)", "impl hung: its worker timed out")])
def test_a_crash_or_a_hang_of_the_implementation_is_saved_and_replayed(example, tmp_path_factory, ending, headline):
    """A worker that died is a failing example Hypothesis saves; a hang ends the run before it would, and is saved too."""
    example.edit("    markers: [cpu]\n", "    markers: [cpu]\n    timeout: 2\n")
    example.edit("    return 2 * block_size", f"    if heads == 4 and block_size == 3:\n        {ending}\n"
                 "    return 2 * block_size", "example_row/impl.py")
    shared = tmp_path_factory.mktemp("db") / "examples"
    nightly, run = _seed_that(example, True, "deep", f"--gates-examples-db={shared}")
    assert headline in run.stdout.str()
    assert _files(shared), "the failing example is saved"
    missed, _ = _seed_that(example, False, "dev", after=nightly)
    replay = example.pytest("--hypothesis-profile=dev", f"--hypothesis-seed={missed}",
                            f"--gates-examples-db-read-only={shared}", PROPERTIES)
    assert replay.ret == 1, replay.stdout.str()
    text = replay.stdout.str()
    assert headline in text and re.search(r"^  database +: a failing example saved in the example database \(", text, re.M), text
    found = re.search(r"^  input +: (.*)$", run.stdout.str(), re.M).group(1)
    assert "heads: 4" in found and "block_size: 3" in found
    assert re.search(r"^  input +: (.*)$", text, re.M).group(1) == found  # the example the nightly run found


def test_a_profile_without_the_reuse_phase_uses_no_database(tmp_path):
    """`gates mutate`'s profile (explicit and generate only) neither reads nor writes the database: mutants never
    land in it; the run's own profiles do."""
    from hypothesis import settings

    from _vllm_gates.mutation.mutate_hook import PROFILE, _register_profile
    from _vllm_gates.run.examples_db import DatabasePath, open_shared_examples
    from _vllm_gates.run.profiles import register_profiles

    shared, refusals = open_shared_examples(DatabasePath(tmp_path / "db", "--examples-db"), [])
    assert refusals == [] and shared is not None
    register_profiles()
    _register_profile()
    settings.load_profile("ci")
    gate = shared.for_gate("EXAMPLE-ROW", "page-bytes", "python")
    assert gate is not None and gate.key != shared.for_gate("EXAMPLE-ROW", "page-bytes", "cpp").key
    settings.load_profile(PROFILE)
    assert shared.for_gate("EXAMPLE-ROW", "page-bytes", "python") is None
