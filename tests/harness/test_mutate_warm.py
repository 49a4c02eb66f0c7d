"""The fast execution path of `gates mutate` (docs/mutation.md, "How a mutant is judged"): impl workers forked from a
warm server that imported the impl unmutated judge every mutant as a fresh import chain does, a mutant never leaks
into the next one's worker, and a hanging mutant costs its item's bound, not the whole --timeout.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from _vllm_gates.definitions.config import load_config
from _vllm_gates.definitions.project import Project
from _vllm_gates.mutation import mutate
from _vllm_gates.mutation.mutate_operators import Mutant
from _vllm_gates.mutation.mutate_warm import warm_plan

from .conftest import Example

pytestmark = pytest.mark.cpu

IMPL = "example_row/impl.py"
HELPER = "example_row/helper.py"
RETURN = "    return 2 * block_size * heads * head_size * dtype_bytes"


def _with_helper(example: Example) -> None:
    """The impl's product moved to a module of its own, imported as its package's attribute (`from example_row import
    helper`): a mutant there reaches the gate only through impl.py, which a warm worker must therefore load again too,
    and the package's attribute must not hand impl.py the server's unmutated module."""
    example.write(HELPER, '"""The page product (EX-1.1)."""\n\n\ndef product(block_size: int, heads: int, head_size: int,'
                          ' dtype_bytes: int) -> int:\n    _seen = block_size >= 0  # no item tells its mutants apart: survivors\n'
                          '    return 2 * block_size * heads * head_size * dtype_bytes\n')
    example.edit(RETURN, "    return helper.product(block_size, heads, head_size, dtype_bytes)", IMPL)
    example.write(IMPL, "from example_row import helper\n" + example.read(IMPL))


def _verdicts(example: Example, warm: bool, name: str) -> dict[str, tuple[Any, ...]]:
    """Every mutant of the row judged by `gates mutate` with (or without) the warm worker and the hang bound."""
    config = load_config(example.root)
    report = example.root / "reports" / f"{name}.json"
    options = mutate.Options(rows=("EXAMPLE-ROW",), max_mutants=None, timeout=60.0, json_path=report,
                             changed_since=None, seed=0, warm=warm, hang_factor=mutate.HANG_FACTOR if warm else None)
    assert mutate.run_mutate(Project(config), options) == 0
    rows = json.loads(report.read_text(encoding="utf-8"))["rows"]
    return {m["id"]: (m["status"], (m["killed_by"] or {}).get("gate"), (m["killed_by"] or {}).get("item"),
                      tuple(m["killing_gates"])) for m in rows[0]["mutants"]}


def test_the_warm_path_judges_every_mutant_as_a_fresh_import_chain_does(example: Example) -> None:
    _with_helper(example)
    cold = _verdicts(example, False, "cold")
    warm = _verdicts(example, True, "warm")
    assert warm == cold
    helper = {key: found for key, found in cold.items() if f":{HELPER}:" in key}
    statuses = [found[0] for found in cold.values()]
    # the comparison means something: both kinds of verdict, and kills of helper.py's mutants through impl.py
    assert "killed" in statuses and "survived" in statuses, statuses
    assert any(found[0] == "killed" for found in helper.values()), helper


def _hand_judge(example: Example, sources: list[tuple[str, str]], timeout: float, hang_factor: float | None,
                ) -> tuple[list[dict[str, Any]], float]:
    """Sessions.judge with the warm plan on hand-written mutants (file, whole text), on the line of the helper's
    return, in this order; their outcomes and the seconds the judging took."""
    config = load_config(example.root)
    gate_file = Project(config).gate_file("EXAMPLE-ROW")
    assert gate_file is not None
    files = [HELPER, IMPL]
    plan = warm_plan(config, gate_file, files)
    line = example.line("    return 2 * block_size", relative=HELPER)
    chosen = [Mutant(file, line, "hand", n, text, "", f"{n:x}" * 64) for n, (file, text) in enumerate(sources)]
    (example.root / "work").mkdir()
    sessions = mutate.Sessions(config, example.root / "work", 0)
    judged: list[dict[str, Any]] = []
    clock = time.monotonic()
    sessions.judge("EXAMPLE-ROW", "gates/rows/example/gate.yaml", files, sessions.python_specs("EXAMPLE-ROW", files, chosen, plan),
                   chosen, ["page-bytes"], False, timeout, lambda mutant, outcome: judged.append(outcome.to_data()),
                   warm=plan, hang_factor=hang_factor)
    return judged, time.monotonic() - clock


def test_a_mutant_never_leaks_into_the_next_mutants_worker(example: Example) -> None:
    _with_helper(example)
    helper = example.read(HELPER)
    wrong = helper.replace("    return 2 * block_size", "    return 3 * block_size")
    harmless = helper.replace("    return 2 * block_size", "    _unused = 1\n    return 2 * block_size")
    judged, _ = _hand_judge(example, [(HELPER, wrong), (HELPER, harmless), (HELPER, wrong), (HELPER, harmless)], 60, None)
    # a survivor after a kill: the killing text was not left in the warm server nor in a worker kept for it
    assert [j["status"] for j in judged] == ["killed", "survived", "killed", "survived"], judged
    assert judged[0]["killed_by"]["gate"] == "page-bytes"
    warm = json.loads(next((example.root / "work").rglob("control.json")).read_text(encoding="utf-8"))
    assert os.path.realpath(example.root / IMPL) in warm["warm_known"]


def test_a_process_the_impl_forks_shares_its_workers_modules(example: Example) -> None:
    """A worker's own child (a gloo world's rank) is not a worker: it keeps the modules, and the mutant, it was forked
    with, in the first pass (traced) as for each mutant."""
    _with_helper(example)
    forks = ("    import os\n    child = os.fork()\n    if child == 0:\n        os._exit(0)\n"
             "    if os.waitpid(child, 0)[1] != 0:\n        raise RuntimeError('the child failed')\n")
    example.edit("    _seen = block_size >= 0", forks + "    _seen = block_size >= 0", HELPER)
    helper = example.read(HELPER)
    wrong = helper.replace("    return 2 * block_size", "    return 3 * block_size")
    harmless = helper.replace("    return 2 * block_size", "    _unused = 1\n    return 2 * block_size")
    judged, _ = _hand_judge(example, [(HELPER, wrong), (HELPER, harmless)], 60, None)
    assert [j["status"] for j in judged] == ["killed", "survived"], judged


def test_a_hanging_mutant_costs_its_items_bound_not_the_timeout(example: Example, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_helper(example)
    monkeypatch.setattr(mutate, "HANG_FLOOR_S", 2.0)
    helper = example.read(HELPER)
    hanging = helper.replace("    return 2 * block_size", "    while True:\n        pass\n    return 2 * block_size")
    dropped = helper.replace("    return 2 * block_size", "    return 0 * block_size")
    timeout = 300.0
    judged, seconds = _hand_judge(example, [(HELPER, hanging), (HELPER, dropped)], timeout, 10.0)
    assert [j["status"] for j in judged] == ["timed_out", "killed"], judged
    # the fp16-page item takes well under a second unmutated: its bound (2 s floor) ends the hang, not --timeout
    assert seconds < timeout / 3, seconds


def test_the_warm_plan_purges_a_file_and_every_module_that_imports_it(example: Example) -> None:
    _with_helper(example)
    config = load_config(example.root)
    gate_file = Project(config).gate_file("EXAMPLE-ROW")
    assert gate_file is not None
    plan = warm_plan(config, gate_file, [HELPER, IMPL])
    real = {f: os.path.realpath(example.root / f) for f in (HELPER, IMPL)}
    assert set(plan.purge[real[HELPER]]) >= {real[HELPER], real[IMPL]}
    assert real[HELPER] not in plan.purge[real[IMPL]] and real[IMPL] in plan.purge[real[IMPL]]
    assert "example_row.impl" in plan.modules and not any(m.startswith("_vllm_gates") for m in plan.modules)
    assert all(Path(root).is_absolute() for root in plan.roots)
