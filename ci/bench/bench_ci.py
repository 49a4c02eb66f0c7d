"""`.ci/run` at this commit against a baseline commit, side by side on one machine (issue 15: CI at least 25% faster).

Clones the repository twice into a temporary folder (HEAD, or --commit, and --baseline), then runs each clone's
`.ci/run` from scratch (its own fresh virtual environment, C++ build and vLLM install), alternating which goes
first in each round, and reports the wall time of each, every `== step` line's time within it, and the ratio.
Exit 1 when a run fails or the commit's median is not at most TARGET of the baseline's.

Usage: python ci/bench/bench_ci.py --baseline REF [--commit REF] [--rounds N] [--keep DIR]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET = 0.75  # at least 25% faster


@dataclass(frozen=True)
class CiRun:
    """One `.ci/run`: its exit status, wall seconds, and the seconds from each `== step` line to the next."""

    status: int
    wall: float
    steps: tuple[tuple[str, float], ...]


def clone(ref: str, folder: Path) -> None:
    """A clean checkout of ``ref`` (what CI gets: tracked files only)."""
    subprocess.run(["git", "clone", "-q", str(REPO), str(folder)], check=True)
    subprocess.run(["git", "-C", str(folder), "checkout", "-q", ref], check=True)


def run_ci(folder: Path, log: Path) -> CiRun:
    """Run ``folder``'s `.ci/run`, timing each line that starts a step (`== ...`), its output kept in ``log``."""
    started = time.perf_counter()
    marks: list[tuple[str, float]] = [("set-up (venv, torch, project, toolchain)", started)]
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(["bash", ".ci/run"], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        assert process.stdout is not None
        for line in process.stdout:
            out.write(line)
            if line.startswith("== ") or line.startswith("ci/install-upstream.sh: the pinned list"):
                marks.append((line.strip()[:70], time.perf_counter()))
        status = process.wait()
    ended = time.perf_counter()
    steps = tuple((name, (marks[i + 1][1] if i + 1 < len(marks) else ended) - at) for i, (name, at) in enumerate(marks))
    return CiRun(status, ended - started, steps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, metavar="REF", help="the commit to compare with")
    parser.add_argument("--commit", default="HEAD", metavar="REF", help="the commit measured (default HEAD)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each (default 1)")
    parser.add_argument("--keep", type=Path, help="keep the clones and logs here instead of a temporary folder")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    refs = {"commit": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.commit], check=True,
                                     capture_output=True, text=True).stdout.strip(),
            "baseline": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.baseline], check=True,
                                       capture_output=True, text=True).stdout.strip()}
    runs: dict[str, list[CiRun]] = {"commit": [], "baseline": []}
    with tempfile.TemporaryDirectory(prefix="bench-ci-") as tmp:
        base = args.keep or Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        for round_ in range(args.rounds):
            for which in (("baseline", "commit") if round_ % 2 == 0 else ("commit", "baseline")):
                folder = base / f"{which}-{round_}"
                clone(refs[which], folder)
                result = run_ci(folder, base / f"{which}-{round_}.log")
                runs[which].append(result)
                print(f"round {round_ + 1}: {which} {refs[which]}: exit {result.status}, {result.wall:.0f} s", flush=True)
                for name, seconds in result.steps:
                    print(f"    {seconds:7.1f} s  {name}", flush=True)
    median = {which: statistics.median(r.wall for r in found) for which, found in runs.items()}
    ratio = median["commit"] / median["baseline"]
    failed = [which for which, found in runs.items() for r in found if r.status != 0]
    print(f".ci/run wall time, {refs['commit']} / {refs['baseline']}: {median['commit']:.0f} s / "
          f"{median['baseline']:.0f} s = {ratio:.2f} (target <= {TARGET}) {'ok' if ratio <= TARGET else 'MISSED'}")
    if failed:
        print(f"a run FAILED: {', '.join(sorted(set(failed)))}")
    return 0 if ratio <= TARGET and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
