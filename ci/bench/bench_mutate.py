"""`gates mutate` throughput per row, today's path against the fast one, in one run (docs/mutation.md, "Figures").

Today's path: each mutant's impl workers import the implementation afresh, and a hang costs the whole --timeout.
The fast path: impl workers forked from a warm server that imported the implementation unmutated (only the mutated
module and those importing it load again), and a hang bounded by its item's unmutated seconds x HANG_FACTOR (at
least HANG_FLOOR_S). The same draw (--max-mutants, --seed, --first-kill by default) is judged both ways, one after the
other, each in a fresh session; printed per row: mutants/s over the whole run (start, first pass, known-bads and
judging), after the first pass, and judging (between the first verdict and the last), the ratio fast/today, whether the goal is met (5/s, 2/s for
BACKEND-DISTRIBUTED-TP) and whether every mutant got the same verdict. Exit 1 when a verdict differs.

Usage: python ci/bench/bench_mutate.py [ROW ...] [--max-mutants 30] [--seed 1] [--all-gates]   (from the repository root)
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from _vllm_gates.definitions.config import load_config
from _vllm_gates.definitions.project import load_project
from _vllm_gates.mutation import mutate

GOALS = {"ROAD-V1-MEM": 5.0, "CAPI-ABI": 5.0, "BACKEND-DISTRIBUTED-TP": 2.0}


class _Counted(mutate.Sessions):
    """Sessions that keep themselves, so the bench can read their first pass's seconds and when each verdict came."""

    made: ClassVar[list[_Counted]] = []

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.verdict_times: list[float] = []
        _Counted.made.append(self)

    def judge(self, row: str, gate_path: str, watch: list[str], specs: list[dict[str, Any]], chosen: list[Any],
              trace_gates: list[str], known_bads: bool, timeout: float, found: Callable[..., None], *args: Any,
              **kwargs: Any) -> dict[str, Any]:
        def timed(mutant: Any, outcome: dict[str, Any]) -> None:
            self.verdict_times.append(time.perf_counter())
            found(mutant, outcome)

        return super().judge(row, gate_path, watch, specs, chosen, trace_gates, known_bads, timeout, timed, *args, **kwargs)


def measure(row: str, fast: bool, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """One `gates mutate ROW` of the draw, by one path: wall seconds, first-pass seconds, verdicts by mutant id."""
    project = load_project(load_config(REPO))
    report = out / f"{row}-{'fast' if fast else 'today'}.json"
    options = mutate.Options(rows=(row,), max_mutants=args.max_mutants, timeout=args.timeout, json_path=report,
                             changed_since=None, seed=args.seed, first_kill=not args.all_gates, warm=fast,
                             hang_factor=mutate.HANG_FACTOR if fast else None)
    _Counted.made.clear()
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        mutate.run_mutate(project, options)
    wall = time.perf_counter() - started
    mutants = json.loads(report.read_text(encoding="utf-8"))["rows"][0]["mutants"]
    first_pass = sum(s.first_pass_seconds for s in _Counted.made)
    times = [t for s in _Counted.made for t in s.verdict_times]
    steady = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0
    return {"wall": wall, "first_pass": first_pass, "n": len(mutants), "steady": steady,
            "judged_s": sum(m.get("seconds") or 0.0 for m in mutants),
            "timed_out": sum(m["status"] == "timed_out" for m in mutants),
            "verdicts": {m["id"]: m["status"] for m in mutants}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", default=list(GOALS))
    parser.add_argument("--max-mutants", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0, help="--timeout of both paths (seconds per mutant)")
    parser.add_argument("--all-gates", action="store_true", help="without --first-kill")
    args = parser.parse_args()
    mutate.Sessions = _Counted  # type: ignore[misc]
    differ = 0
    print(f"--max-mutants {args.max_mutants} --seed {args.seed}{'' if args.all_gates else ' --first-kill'}, "
          f"hang bound x{mutate.HANG_FACTOR:g} (floor {mutate.HANG_FLOOR_S:g} s), --timeout {args.timeout:g}")
    print(f"{'row':<24} {'path':<6} {'mutants':>7} {'wall s':>7} {'/s':>6} {'first pass s':>12} {'/s after it':>11} "
          f"{'timed out':>9} {'judging /s':>10}")
    with tempfile.TemporaryDirectory(prefix="bench-mutate-") as folder:
        for row in args.rows:
            runs = {}
            for fast in (False, True):
                found = runs[fast] = measure(row, fast, args, Path(folder))
                after = max(found["wall"] - found["first_pass"], 1e-9)
                found["rate"], found["rate_after"] = found["n"] / found["wall"], found["n"] / after
                print(f"{row:<24} {'fast' if fast else 'today':<6} {found['n']:>7} {found['wall']:>7.1f} "
                      f"{found['rate']:>6.2f} {found['first_pass']:>12.1f} {found['rate_after']:>11.2f} {found['timed_out']:>9} {found['steady']:>10.2f}")
            today, fast = runs[False], runs[True]
            changed = sorted(k for k in today["verdicts"] if today["verdicts"][k] != fast["verdicts"].get(k))
            differ += len(changed)
            goal = GOALS.get(row)
            print(f"{row:<24} ratio fast/today: {fast['rate'] / today['rate']:.2f}x whole run, "
                  f"{fast['rate_after'] / today['rate_after']:.2f}x after the first pass, "
                  f"{fast['steady'] / today['steady'] if today['steady'] else 0:.2f}x judging; goal "
                  + (f"{goal:g}/s: {'met' if fast['rate'] >= goal else 'NOT met'} (whole run), "
                     f"{'met' if fast['rate_after'] >= goal else 'NOT met'} (after the first pass)" if goal else "none")
                  + "; verdicts " + ("the same" if not changed else "DIFFER: " + ", ".join(
                      f"{k} {today['verdicts'][k]} -> {fast['verdicts'].get(k)}" for k in changed)))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
