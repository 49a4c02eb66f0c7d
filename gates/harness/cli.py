"""The `gates` command: list, run, audit, coverage and affected, over the same engine as `pytest`.

Exit codes: 0 every selected row meets its claimed state; 1 a claim is not met (FAIL, WEAK under DONE,
EMPTY gate or milestone, a known-bad that passes, an uncovered requirement); 2 usage error; 3 a definition
or harness ERROR; 5 nothing ran.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gates.harness.model import GateFile, Roadmap
from gates.harness.yamlsource import DefinitionError

EXIT_OK, EXIT_CLAIM_NOT_MET, EXIT_USAGE, EXIT_ERROR, EXIT_EMPTY = 0, 1, 2, 3, 5
ROADMAP = Path("spec/roadmap.yaml")
GATE_GLOB = "gates/rows/*.yaml"


class UsageError(Exception):
    """Arguments that name something that does not exist."""


@dataclass(frozen=True)
class Project:
    """The loaded definitions of a checkout: roadmap, gate files that load, and the files that do not."""

    root: Path
    roadmap: Roadmap
    gate_files: list[GateFile]
    paths: dict[str, Path]
    broken: dict[str, tuple[Path, str]]


def find_root(start: Path) -> Path:
    for candidate in (start, *start.parents):
        if (candidate / ROADMAP).is_file():
            return candidate
    raise UsageError(f"no {ROADMAP} found in {start} or any parent folder (use --root)")


def load_project(root: Path) -> Project:
    from gates.harness.gatefile import load_gate_file, peek_row_id
    from gates.harness.roadmap import load_roadmap

    roadmap = load_roadmap(root / ROADMAP, ROADMAP.as_posix())
    gate_files, paths, broken = [], {}, {}
    for path in sorted(root.glob(GATE_GLOB)):
        try:
            gate_file = load_gate_file(path, root, roadmap)
        except DefinitionError as error:
            broken[peek_row_id(path)] = (path, str(error))
            continue
        if gate_file.row in paths:
            where = gate_file.row_location or gate_file.path
            first = paths[gate_file.row].relative_to(root).as_posix()
            broken[gate_file.row] = (path, f"{where}: row: {gate_file.row} already has gate file {first}; a row has one gate file")
            continue
        gate_files.append(gate_file)
        paths[gate_file.row] = path
    return Project(root, roadmap, gate_files, paths, broken)


def _select_rows(project: Project, requested: list[str], changed_since: str | None) -> list[str]:
    known = [r.id for r in project.roadmap.rows]
    for row in requested:
        if row not in known:
            raise UsageError(f"unknown row {row!r} (rows: {', '.join(known)})")
    rows = requested or known + [row for row in project.broken if row not in known]  # a file naming no roadmap row is shown, not dropped
    if changed_since:
        from gates.harness.selection import SelectionError, affected_rows, changed_paths

        try:
            paths = changed_paths(project.root, changed_since)
        except SelectionError as error:
            raise UsageError(str(error)) from None
        affected = set(affected_rows(project.gate_files, paths)) | {r for r in project.broken}
        rows = [r for r in rows if r in affected]
    return rows


def _print_broken(project: Project, rows: list[str] | None = None) -> None:
    for row, (_, message) in project.broken.items():
        if rows is None or row in rows:
            print(f"definition error in row {row}:\n  " + message.replace("\n", "\n  "), file=sys.stderr)


def cmd_list(args: argparse.Namespace, project: Project) -> int:
    files = {gf.row: gf for gf in project.gate_files}
    for row in project.roadmap.rows:
        print(f"{row.id}  [{row.state}]  {row.title}")
        gate_file = files.get(row.id)
        for ms in row.milestones:
            print(f"  {ms.id}  [{ms.state}]  {ms.title}")
            for gate in gate_file.gates if gate_file else ():
                if gate.milestone == ms.id:
                    props = f", properties x{gate.properties.max_examples}" if gate.properties else ""
                    print(f"    {gate.id}  markers={','.join(gate.markers)}  covers={','.join(gate.covers)}  "
                          f"cases={len(gate.cases)}{props}, known_bad={len(gate.known_bad)}")
        if row.id not in files and row.id not in project.broken:
            print("  (no gate file)")
    _print_broken(project)
    return EXIT_ERROR if project.broken else EXIT_OK


def _gate_files_for(project: Project, rows: list[str]) -> list[Path]:
    files = [project.paths[r] for r in rows if r in project.paths]
    files += [path for row, (path, _) in project.broken.items() if row in rows]
    return files


def cmd_run(args: argparse.Namespace, project: Project) -> int:
    from gates.harness.reports import markdown, table, write_atomic, write_json
    from gates.harness.runner import run_pytest
    from gates.harness.verdicts import build_report, exit_code, with_unknown_rows

    rows = _select_rows(project, args.rows, args.changed_since)
    if not rows:
        print(f"no row is affected by changes since {args.changed_since}: nothing to gate")
        return EXIT_OK
    started = time.time()
    files = _gate_files_for(project, rows)
    run = run_pytest(project.root, files, marker=args.marker, junit=args.junit, profile=args.profile) if files else None
    wanted = set(_marker_gates(project, rows, args.marker)) if args.marker != "all" else None
    broken = {row: message for row, (_, message) in project.broken.items()}
    report = build_report(project.roadmap, project.gate_files, run.items if run else [], broken, rows, wanted)
    report = with_unknown_rows(report, {row: message for row, message in broken.items() if project.roadmap.row(row) is None})
    code = exit_code(report)
    if run and (run.collection_errors or run.exit_code in (2, 3, 4)):
        for error in run.collection_errors:
            print(f"collection error: {error}", file=sys.stderr)
        code = EXIT_ERROR
    print()
    print(table(report))
    print(f"\n{report.checks} checks in {time.time() - started:.1f}s; exit {code}")
    meta = {"marker": args.marker, "rows": rows, "profile": args.profile or ("ci" if os.environ.get("CI") else "dev"),
            "changed_since": args.changed_since}
    if args.json:
        write_json(Path(args.json), report, code, meta)
    if args.markdown:
        write_atomic(Path(args.markdown), markdown(report, code))
    return code


def _marker_gates(project: Project, rows: list[str], marker: str) -> list[tuple[str, str]]:
    return [(gf.row, g.id) for gf in project.gate_files if gf.row in rows for g in gf.gates if marker == "all" or marker in g.markers]


def cmd_audit(args: argparse.Namespace, project: Project) -> int:
    from gates.harness.runner import run_pytest

    rows = _select_rows(project, args.rows, None)
    files = _gate_files_for(project, rows)
    if not files:
        print("no gate file for the selected rows: nothing to audit", file=sys.stderr)
        return EXIT_EMPTY
    run = run_pytest(project.root, files, marker=args.marker, audit=True)
    by_gate: dict[tuple[str, str], list] = {}
    for item in run.items:
        by_gate.setdefault((item.row, item.gate), []).append(item)
    code = EXIT_OK
    print()
    print(f"{'row':24} {'gate':36} {'stand-in':50} known-bad")
    for (row, gate), items in sorted(by_gate.items()):
        audit = [i for i in items if i.kind == "audit"]
        known = [i for i in items if i.kind == "known_bad"]
        if any(i.outcome == "error" for i in items) or not audit:
            state, code = "ERROR: " + next((i.detail for i in items if i.outcome == "error"), "no audit item"), EXIT_ERROR
        elif audit[0].outcome == "skipped":
            state = "not audited: " + audit[0].detail
        elif audit[0].outcome == "failed":
            state, code = "STILL PASSES: the gate cannot fail", max(code, EXIT_CLAIM_NOT_MET)
        else:
            state = "fails (" + audit[0].detail.split(":")[0] + ")"
        if any(i.outcome == "failed" for i in known):
            code = max(code, EXIT_CLAIM_NOT_MET)
        rejected = sum(i.outcome == "passed" for i in known)
        print(f"{row:24} {gate:36} {state[:50]:50} {rejected}/{len(known)} rejected")
    if not by_gate:
        code = EXIT_EMPTY
    if any(row in rows for row in project.broken) or run.collection_errors:
        _print_broken(project, rows)
        code = EXIT_ERROR
    print(f"\naudit exit {code}")
    return code


def cmd_coverage(args: argparse.Namespace, project: Project) -> int:
    from gates.harness.specdoc import requirements_in

    covered = {req for gf in project.gate_files for g in gf.gates for req in g.covers}
    missing = []
    for spec in sorted((project.root / "spec").glob("*.md")):
        shown = spec.relative_to(project.root).as_posix()
        for requirement in requirements_in(spec, shown):
            if requirement.id not in covered:
                missing.append(requirement)
    for requirement in missing:
        print(f"{requirement.path}:{requirement.line}: {requirement.id} has no covering gate: {requirement.text[:80]}")
    total = len(covered)
    print(f"{len(missing)} requirement(s) without a gate; {total} covered")
    _print_broken(project)
    if project.broken:
        return EXIT_ERROR
    return EXIT_CLAIM_NOT_MET if missing else EXIT_OK


def cmd_affected(args: argparse.Namespace, project: Project) -> int:
    rows = _select_rows(project, [], args.base)
    for row in rows:
        print(row)
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="gates", description="Gate roadmap rows: implementations against independent oracles.",
                                  epilog="exit codes: 0 claims met, 1 a claim not met, 2 usage error, 3 definition/harness error, 5 nothing ran")
    top.add_argument("--root", type=Path, help="project root (default: the nearest folder holding spec/roadmap.yaml)")
    sub = top.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="rows, milestones, states and gates")
    run = sub.add_parser("run", help="run gates; one verdict per row; exit 0 only when every row meets its claimed state")
    run.add_argument("rows", nargs="*", help="rows to run (default: all)")
    run.add_argument("--marker", choices=["cpu", "gpu", "dist", "all"], default="all")
    run.add_argument("--changed-since", metavar="REF", help="only rows whose sources, gate file or spec changed since REF")
    run.add_argument("--profile", choices=["ci", "dev", "thorough"], help="hypothesis profile (default: ci when CI is set, else dev)")
    run.add_argument("--json", metavar="F")
    run.add_argument("--markdown", metavar="F")
    run.add_argument("--junit", metavar="F")
    audit = sub.add_parser("audit", help="show every gate can fail: a wrong-everywhere stand-in and each known-bad")
    audit.add_argument("rows", nargs="*")
    audit.add_argument("--marker", choices=["cpu", "gpu", "dist", "all"], default="all")
    sub.add_parser("coverage", help="requirement ids in spec/*.md that no gate covers")
    affected = sub.add_parser("affected", help="rows whose sources, gate file or spec changed since --base")
    affected.add_argument("--base", required=True, metavar="REF")
    return top


COMMANDS = {"list": cmd_list, "run": cmd_run, "audit": cmd_audit, "coverage": cmd_coverage, "affected": cmd_affected}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        root = args.root.resolve() if args.root else find_root(Path.cwd())
        if not (root / ROADMAP).is_file():
            raise UsageError(f"{root / ROADMAP} does not exist")
        try:
            project = load_project(root)
        except DefinitionError as error:
            print(f"definition error:\n{error}", file=sys.stderr)
            return EXIT_ERROR
        return COMMANDS[args.command](args, project)
    except UsageError as error:
        print(f"gates: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `gates list | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
