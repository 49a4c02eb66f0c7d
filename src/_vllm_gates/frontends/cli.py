"""The `gates` command. `run` and `audit` translate their arguments into one pytest run (the plugin judges);
`list`, `coverage`, `affected` and `check-independence` read the project's definitions without importing targets.
"""
from __future__ import annotations

import sys

try:  # Ctrl-C while the command is still starting: one line, as main() says it later, not a traceback
    import argparse
    import contextlib
    import io
    import os
    from collections.abc import Iterator
    from pathlib import Path
    from typing import TYPE_CHECKING

    from _vllm_gates.base.errors import DefinitionError, GatesError, Problem
    from _vllm_gates.base.tomlsource import SECTION
    from _vllm_gates.definitions.config import CONFIG_FILE, Config, find_config, implementation_refused, load_config
    from _vllm_gates.definitions.project import Project, unknown_row
    from _vllm_gates.run.exitcodes import ExitCode
    from _vllm_gates.run.feature_mutation import MUTATION, mutation_evidence
    from _vllm_gates.run.feature_reports import JSON, MARKDOWN
    from _vllm_gates.run.features import RunPlan, options, planned
    from _vllm_gates.run.profiles import PROFILES
    from _vllm_gates.run.selection import Handover, RowsRefused, requested_rows
except KeyboardInterrupt:
    sys.stderr.write("gates: interrupted (SIGINT) while starting\n")
    raise SystemExit(130) from None

if TYPE_CHECKING:
    from _vllm_gates.definitions.independence import Violation
    from _vllm_gates.run.evidence import GateEvidence
    from _vllm_gates.run.shard_merge import Merged

MARKER_CHOICES_HELP = "a marker of the project ([tool.vllm-gates] markers), or all"
EPILOG = ("claims: DONE needs every gate PASS, in this run or on evidence (gates verdict, --evidence); PARTIAL lets "
          "gpu gates be SKIPPED or UNPROVEN; ACTIVE, GATING and the other states tolerate FAIL; no state excuses ERROR, "
          "EMPTY or INCOMPLETE. A gate this run did not execute (--marker, row selection, --changed-since) is UNPROVEN "
          "unless evidence covers it. "
          "exit codes: 0 every row meets its claimed state; 1 a claim is not met; 2 usage error; "
          "3 a definition or harness error; 5 nothing ran; 6 claims unproven (nothing failed, but a claim rests on gates "
          "not executed here and not covered by evidence); 7 nothing could run here (every selected item was skipped "
          "because this machine lacks what its marker requires, e.g. CUDA for gpu); 130 interrupted")


class UsageError(GatesError):
    """Arguments that name something that does not exist."""


def _project_config(root_option: Path | None) -> Config:
    """The configuration of --root, or of the nearest gated project at or above the current folder (read once)."""
    if root_option:
        root, config = root_option.resolve(), load_config(root_option.resolve())
    else:
        found = find_config(Path.cwd())
        if found is None:
            raise UsageError(f"no {CONFIG_FILE} with a [{SECTION}] table in {Path.cwd()} or any parent folder (use --root)")
        root, config = found
    if config is None:
        raise UsageError(f"{root / CONFIG_FILE} has no [{SECTION}] table: not a gated project")
    return config


def _check_rows(project: Project, rows: list[str]) -> None:
    refused = unknown_row(project.roadmap, rows)
    if refused:
        raise UsageError(refused)


def _check_marker(config: Config, marker: str) -> None:
    if marker != "all" and marker not in config.marker_names:
        raise UsageError(f"--marker {marker!r} is not a marker of this project (markers: {', '.join(config.marker_names)}, all)")


def _print_broken(project: Project, rows: list[str] | None = None, later: list[Problem] | None = None) -> None:
    """Root causes first: each broken row's error, with the problems of ``later`` that follow from it (their `cause`
    is the row) folded into one line under it; then the other problems of ``later`` in full."""
    later = later or []
    for row, (_, message) in project.broken.items():
        if rows is None or row in rows:
            print(f"definition error in row {row}:\n  " + message.replace("\n", "\n  "), file=sys.stderr)
            after = [p for p in later if p.cause == f"row {row}"]
            if after:
                print(f"  and {len(after)} more caused by the error above (the first: {after[0]})", file=sys.stderr)
    roots = [p for p in later if not p.cause or p.cause.removeprefix("row ") not in project.broken]
    if roots:
        print("definition error:\n" + "\n".join(str(p) for p in roots), file=sys.stderr)


def _deviation_problems(project: Project) -> list[Problem]:
    """What is wrong in the deviations file (a malformed deviation is a definition error wherever it is read)."""
    from _vllm_gates.definitions.deviations import load_deviations

    try:
        load_deviations(project.config, project.gate_files, set(project.broken))
    except DefinitionError as error:
        return error.problems
    return []


def cmd_list(args: argparse.Namespace, project: Project) -> int:
    gate_files = {gate_file.row: gate_file for gate_file in project.gate_files}  # a row has one (Project)
    for row in project.roadmap.rows:
        print(f"{row.id}  [{row.state}]  {row.title}")
        gate_file = gate_files.get(row.id)
        for ms in row.milestones:
            print(f"  {ms.id}  [{ms.state}]  {ms.title}")
            for gate in gate_file.gates if gate_file else ():
                if gate.milestone == ms.id:
                    props = f", properties x{gate.properties.max_examples}" if gate.properties else ""
                    print(f"    {gate.id}  markers={','.join(gate.markers)}  covers={','.join(gate.covers)}  "
                          f"cases={len(gate.cases)}{props}, known_bad={len(gate.known_bad)}"
                          + (f", known_good={len(gate.known_good)}" if gate.known_good else ""))
                    if gate.description:
                        print(f"      {gate.description}")
        if gate_file is None and row.id not in project.broken:
            print("  (no gate file)")
        if row.upstream:
            print(f"  upstream parity claimed: {project.config.upstream.package if project.config.upstream else '?'} {row.upstream}")
    later = _deviation_problems(project)
    _print_broken(project, later=later)
    return ExitCode.ERROR if project.broken or later else ExitCode.OK


@contextlib.contextmanager
def _in_folder(folder: Path) -> Iterator[None]:
    """pytest finds the project's configuration from the current folder: run it from the project root."""
    saved = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(saved)


def _pytest(handover: Handover, args: list[str], options: dict[str, object] | None = None,
            targets: list[str] | None = None, plugins: tuple[object, ...] = ()) -> int:
    """One pytest run over the project's gate files (or the node ids ``targets``); its exit status is the plugin's
    verdict. The plugin takes the snapshot and the rows and evidence resolved here from ``handover``.

    With no gate file at all there is nothing for pytest to collect: ``options`` (a run's) then judge the rows
    (EMPTY: no gate file) and write the same reports without it.
    """
    import pytest

    from _vllm_gates.frontends.selection_guard import SelectionGuard

    config = handover.project.config
    files = targets if targets is not None else [str(p) for p in config.gate_files()]
    if not files:
        print(f"no gate file matches rows = {list(config.rows)} in [{SECTION}]")
        if options is None:
            return ExitCode.EMPTY
        from _vllm_gates.run.session import judge_without_items

        return judge_without_items(handover.project, options)
    # the engine is already imported, so pytest cannot rewrite its asserts: say nothing about it
    base = ["--rootdir", str(config.root), "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning",
            "-q", "--no-header", "-rfE"]
    with _in_folder(config.root):
        code = int(pytest.main(files + base + args, plugins=[handover, SelectionGuard(), *plugins]))
    if code == 4:  # pytest's usage error (it printed why)
        return ExitCode.USAGE
    if code == 2:  # pytest's "interrupted" before the plugin judged anything (Ctrl-C while it started up)
        print("gates: interrupted (SIGINT): stopped before the run started", file=sys.stderr)
        return ExitCode.INTERRUPTED
    return code


def _marker_args(marker: str) -> list[str]:
    return [] if marker == "all" else ["-m", marker]


def _rows_to_judge(project: Project, rows: list[str], changed_since: str | None) -> list[str]:
    """The rows asked for (all when none), narrowed by --changed-since (selection.requested_rows); may be empty."""
    try:
        return list(requested_rows(project, rows, changed_since) or ())
    except RowsRefused as refused:  # an unknown row, or git's error
        raise UsageError(str(refused)) from None


def _row_args(rows: list[str]) -> list[str]:
    return [arg for row in rows for arg in ("--gates-row", row)]


def cmd_run(args: argparse.Namespace, project: Project) -> int:
    _check_marker(project.config, args.marker)
    rows = _rows_to_judge(project, args.rows, args.changed_since)
    if args.changed_since and not rows:  # judged without pytest: the reports are written, and say so
        from _vllm_gates.run.session import judge_without_items

        return judge_without_items(project, {"json": args.json, "markdown": args.markdown, "junit": args.junit,
                                                    "rows": [], "changed_since": args.changed_since})
    targets = _picked(project, rows, args) if args.gate or args.case else None
    plan = planned(RunPlan(UsageError, tuple(rows), _profile(args), _implementation(project.config, args.impl), targets,
                           args.seed), args, project)  # each feature's part (features.py): checked before anything runs
    extra = _marker_args(args.marker) + _row_args(rows)
    for flag, value in (("--hypothesis-profile", plan.profile), ("--hypothesis-seed", plan.seed),
                        ("--gates-changed-since", args.changed_since), ("--gates-impl", plan.impl)):
        if value:
            extra.append(f"{flag}={value}")
    extra += plan.pytest_args
    options = {"json": args.json, "markdown": args.markdown, "junit": args.junit, "rows": rows or None,
               "markexpr": "" if args.marker == "all" else args.marker}
    progress = _row_progress(extra) if args.shard else ()
    return _pytest(Handover(project, tuple(rows) or None, plan.evidence, plan.meta), extra, options, targets=plan.targets,
                   plugins=progress)


def _profile(args: argparse.Namespace) -> str | None:
    """--profile, or deep for --deep (the two may not disagree)."""
    if args.deep and args.profile not in (None, "deep"):
        raise UsageError(f"--deep runs the deep profile; it cannot be combined with --profile {args.profile}")
    return "deep" if args.deep else args.profile


def _picked(project: Project, rows: list[str], args: argparse.Namespace) -> list[str]:
    """The node ids of the --gate (and --case) asked for: a partial selection of one row (docs/evidence.md §1)."""
    from _vllm_gates.run.pick import PickError, node_ids

    if not args.gate:
        raise UsageError("--case needs exactly one --gate, the gate whose items it names; got 0")
    try:
        return node_ids(project, rows, args.gate, args.case)
    except PickError as error:
        raise UsageError(str(error)) from None


def _evidence(paths: list[str], absolute: bool = False) -> list[GateEvidence]:
    """The gates of the --evidence files (evidence.load_evidence_files); UsageError naming a file that cannot be used."""
    from _vllm_gates.run.evidence import EvidenceError, load_evidence_files

    try:
        return load_evidence_files(paths, absolute)
    except EvidenceError as error:
        raise UsageError(str(error)) from None


def cmd_verdict(args: argparse.Namespace, project: Project) -> int:
    """Judge the claims from evidence files alone: nothing runs (README, "Evidence from several machines")."""
    from _vllm_gates.run.session import judge_on_evidence

    _check_rows(project, args.rows)
    found = _evidence(args.evidence)
    shards = _shards(args.evidence)
    rows = args.rows or list(shards.rows if shards is not None else ())
    for line in shards.missing if shards is not None else ():
        print(f"gates verdict: {line}", file=sys.stderr)
    options = {"json": args.json, "markdown": args.markdown, "junit": args.junit, "rows": rows,
               "unproven_shards": list(shards.missing) if shards is not None else [],
               "impl": _implementation(project.config, args.impl), "mutation": mutation_evidence(args.mutation, UsageError)}
    return judge_on_evidence(project, found, options)


def _shards(paths: list[str]) -> Merged | None:
    """The evidence files written by `gates run --shard`, checked to add up (shard_merge.merge); UsageError naming
    the files that do not belong together."""
    from _vllm_gates.run.shard_merge import ShardsRefused, merge, shard_files

    try:
        return merge(shard_files(paths))
    except ShardsRefused as error:
        raise UsageError(str(error)) from None


DEFAULT_RUN_REPORT = "reports/gates-cpu.json"  # what ci/cpu.sh writes (GATES_REPORTS=reports)
DEFAULT_MUTATION_REPORT = "reports/mutation.json"  # what `gates mutate` writes


def cmd_report(args: argparse.Namespace, project: Project) -> int:
    """`gates report --html F`: one self-contained page from a run's report and a mutation report (docs/reports.md),
    with a section per `--diverge F` report (docs/divergence.md)."""
    from _vllm_gates.frontends.html_report import problems, render_page, sources_for
    from _vllm_gates.results.reports import write_atomic
    from _vllm_gates.taps.divergence_page import DivergeReportRefused, read_diverge_report

    run, mutation = sources_for(project.config.root, args.run, args.mutation, DEFAULT_RUN_REPORT, DEFAULT_MUTATION_REPORT)
    refused = problems([("run", run, args.run is not None), ("mutation", mutation, args.mutation is not None)])
    diverge = []
    for given in args.diverge:
        try:
            diverge.append(read_diverge_report(Path(given), given))
        except DivergeReportRefused as error:
            refused.append(f"--diverge {error}")
    if refused:
        raise UsageError("; ".join(refused))
    try:
        write_atomic(Path(args.html), render_page(run, mutation, diverge))
    except OSError as exc:
        raise UsageError(f"--html {args.html}: cannot write it: {exc.strerror or exc}") from None
    print(f"gates report: wrote {args.html} (run: {run.shown if run.document else run.problem}; "
          f"mutation: {mutation.shown if mutation.document else mutation.problem}"
          + "".join(f"; diverge: {report.shown}" for report in diverge) + ")")
    return ExitCode.OK


def cmd_audit(args: argparse.Namespace, project: Project) -> int:
    _check_marker(project.config, args.marker)
    rows = _rows_to_judge(project, args.rows, None)
    impl = _implementation(project.config, args.impl)
    options = ["--gates-audit", *_marker_args(args.marker), *_row_args(rows), *([f"--gates-impl={impl}"] if impl else [])]
    handover = Handover(project, tuple(rows) or None)
    progress = _row_progress(options)
    if not args.evidence:
        return _pytest(handover, options, plugins=progress)
    from _vllm_gates.frontends.audit_evidence import audit_on_evidence
    from _vllm_gates.run.evidence import EvidenceError

    try:
        return audit_on_evidence(project, rows, "" if args.marker == "all" else args.marker, impl or "python",
                                 args.evidence, lambda nodes: _pytest(handover, options, targets=nodes, plugins=progress))
    except EvidenceError as error:
        raise UsageError(str(error)) from None


def _row_progress(args: list[str]) -> tuple[object, ...]:
    """A progress line per row (row_progress, docs/mutation.md "Progress"); on a terminal pytest's letters and
    percentages give way to it (``args`` gains the option that drops them)."""
    from _vllm_gates.frontends.row_progress import RowProgress

    progress = RowProgress()
    if progress.live:
        args += ["-o", "console_output_style=classic"]
    return (progress,)


def _implementation(config: Config, name: str | None) -> str | None:
    """The --impl value, checked against the configured implementations (UsageError naming the known ones)."""
    refused = implementation_refused(config, "--impl", name) if name is not None else None
    if refused:
        raise UsageError(refused)
    return name


def _broken_specs(project: Project) -> tuple[dict[str, str], list[str]]:
    """The spec each broken row's gate file names ({spec path: row}), read from the file's `spec:` line as far as it
    can be read; and the broken rows whose spec could not be told."""
    from _vllm_gates.base.yamlsource import read_definition_text

    found: dict[str, str] = {}
    unknown = []
    for row, (path, _) in project.broken.items():
        shown = path.relative_to(project.config.root).as_posix() if path.is_relative_to(project.config.root) else str(path)
        try:
            text = read_definition_text(path, shown, "gate file")
        except DefinitionError:
            text = ""
        spec = next((line[5:].split(" #")[0].strip().strip("'\"") for line in text.splitlines() if line.startswith("spec:")), "")
        if spec:
            found[Path(spec).as_posix()] = row
        else:
            unknown.append(row)
    return found, unknown


def cmd_coverage(args: argparse.Namespace, project: Project) -> int:
    """Requirements declared in the spec files that no gate covers. A row whose gate file does not load is reported
    once, as broken: the requirements of its spec are neither covered nor uncovered (nothing is known of its gates)."""
    from _vllm_gates.definitions.specdoc import SpecRequirement, requirements_in

    covered = {req for gf in project.gate_files for g in gf.gates for req in g.covers}
    broken_specs, unknown = _broken_specs(project)
    missing: list[SpecRequirement] = []
    uncounted: dict[str, list[SpecRequirement]] = {}
    for spec in project.config.spec_files():
        shown = spec.relative_to(project.config.root).as_posix()
        for requirement in requirements_in(spec, shown):
            if requirement.id in covered:
                continue
            if shown in broken_specs:
                uncounted.setdefault(broken_specs[shown], []).append(requirement)
            else:
                missing.append(requirement)
    for requirement in missing:
        print(f"{requirement.path}:{requirement.line}: {requirement.id} has no covering gate: {requirement.text[:80]}")
    summary = f"{len(missing)} requirement(s) without a gate; {len(covered)} covered"
    for row in project.broken:
        summary += f"; row {row} is broken: its gate file does not load (the definition error is on stderr)"
        if row in uncounted:
            summary += (f", so the {len(uncounted[row])} requirement(s) of {uncounted[row][0].path} that no loaded gate "
                        "covers are not counted")
        elif row in unknown:
            summary += ", and its spec could not be told: its requirements may be listed above"
    print(summary)
    _print_broken(project)
    if project.broken:
        return ExitCode.ERROR
    return ExitCode.CLAIM_NOT_MET if missing else ExitCode.OK


def cmd_affected(args: argparse.Namespace, project: Project) -> int:
    """Print the rows affected by changes since --base, in roadmap order; with --explain, each with its reasons."""
    from _vllm_gates.run.selection import SelectionError, explain_affected

    try:
        explained = explain_affected(project, args.base)
    except SelectionError as error:
        raise UsageError(str(error)) from None
    for row, reasons in explained.items():
        print(row)
        for reason in reasons if args.explain else ():
            print(f"  {reason}")
    if args.explain and not explained:
        print(f"no row is affected by changes since {args.base}")
    return ExitCode.OK


def cmd_deviations(args: argparse.Namespace, project: Project) -> int:
    """The declared deviations from the pinned upstream release, and the upstream gate that checks each."""
    from _vllm_gates.definitions.deviations import load_deviations
    from _vllm_gates.results.reports import fixed_width

    _check_rows(project, args.rows)
    pin = project.config.upstream
    if pin is None:
        print(f"this project pins no upstream release ([{SECTION}.upstream] in {CONFIG_FILE}): no deviations to list")
        return ExitCode.OK
    if project.broken:
        later = _deviation_problems(project)
        if later:  # the broken rows' errors first, their entries here folded under them
            _print_broken(project, later=later)
            return ExitCode.ERROR
    found = [d for d in load_deviations(project.config, project.gate_files) if not args.rows or d.row in args.rows]
    if args.json:
        import json

        print(json.dumps({"upstream": {"package": pin.package, "version": pin.version},
                          "deviations": [{k: v for k, v in vars(d).items() if k != "location"} for d in found]}, indent=2))
        return ExitCode.OK
    print(f"deviations from {pin.package} {pin.version} ({pin.deviations}): {len(found)}")
    if found:
        print("\n".join(fixed_width(("id", "row", "operation", "checked by"), [(d.id, d.row, d.operation, d.checked_by) for d in found], rule=True)))
        for d in found:
            print(f"\n{d.id}\n  upstream: {d.upstream}\n  ours:     {d.ours}\n  why:      {d.why}")
    return ExitCode.OK


def _version_text(text: str) -> str:
    import re

    if not re.fullmatch(r"[0-9]+(\.[0-9]+){1,3}([a-z]+[0-9]*)?(\.post[0-9]+)?", text):
        raise argparse.ArgumentTypeError(f"expected an exact release such as 0.25.0, got {text!r}")
    return text


def cmd_upstream_drift(args: argparse.Namespace, project: Project) -> int:
    """What changed in the pinned upstream's behaviour, per row and operation, at another release (docs/upstream.md)."""
    import json

    from _vllm_gates.frontends.drift import DriftError, Side, as_json, drift, render_markdown, render_text
    from _vllm_gates.results.reports import write_atomic

    _check_rows(project, args.rows)
    pin = project.config.upstream
    if pin is None:
        raise UsageError(f"this project pins no upstream release ([{SECTION}.upstream] in {CONFIG_FILE}): nothing to compare")
    if args.to == pin.version and args.site is None:
        raise UsageError(f"--to {args.to} is the pinned release; name another one")
    if args.examples < 0:
        raise UsageError(f"--examples {args.examples}: expected a count >= 0")
    if not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g}: expected seconds > 0")
    site = (args.site or project.config.root / "build" / "upstream" / f"{pin.package}-{args.to}").resolve()
    if not site.is_dir():
        how = f" (bash ci/install-upstream-beside.sh {args.to} installs it there)" if args.site is None else ""
        raise UsageError(f"{pin.package} {args.to} is not installed beside the pin: no folder {site}{how}; or give --site DIR")
    from_site = args.from_site.resolve() if args.from_site else None
    if from_site is not None and not from_site.is_dir():
        raise UsageError(f"--from-site {args.from_site}: no such folder")
    try:
        report = drift(project.config, project.gate_files, Side(pin.version, from_site), Side(args.to, site), args.rows,
                       examples=args.examples, timeout=args.timeout)
    except DriftError as error:
        print(f"gates upstream-drift: {error}", file=sys.stderr)
        return ExitCode.ERROR
    print(render_text(report, pin.package), end="")
    if args.json:
        write_atomic(Path(args.json), json.dumps(as_json(report, pin.package), indent=2) + "\n")
    if args.markdown:
        write_atomic(Path(args.markdown), render_markdown(report, pin.package))
    return ExitCode.CLAIM_NOT_MET if args.check and report.drifted else ExitCode.OK


def cmd_diverge(args: argparse.Namespace, project: Project) -> int:
    """Where an implementation's forward diverges from a reference's, tap by tap (docs/divergence.md)."""
    from _vllm_gates.taps.diverge import DivergeUsage, Options, run_diverge

    try:
        return run_diverge(project, Options(args.row, args.gate, args.case, args.impl, args.against, args.json, args.dump,
                                            args.known_bad, shrink=not args.no_shrink))
    except DivergeUsage as error:
        raise UsageError(str(error)) from None


def known_goods_independent(project: Project) -> list[Violation]:
    """The known-goods' imports of a contract's package (independence.known_good_violations); the rows whose gate
    files do not load are named on stderr, their known-goods unchecked."""
    from _vllm_gates.definitions.independence import known_good_violations
    from _vllm_gates.definitions.sources import import_graph

    if project.broken:
        print(f"known-goods not checked in {', '.join(sorted(project.broken))}: the gate file does not load (see gates list)",
              file=sys.stderr)
    packages = [package for package, _ in project.config.independence]
    return known_good_violations(import_graph(project.config), project.gate_files, packages)


def cmd_check_independence(args: argparse.Namespace, project: Project) -> int:
    from _vllm_gates.definitions.independence import violations

    found, files = violations(project.config.root, dict(project.config.independence))
    found += known_goods_independent(project)
    contracts = "; ".join(f"{pkg} imports none of {', '.join(forbidden)}" for pkg, forbidden in project.config.independence)
    for violation in found:
        print(f"{violation}  (contract: {violation.package} must not import {violation.imported.split('.')[0]})")
    if not files:
        print(f"no Python file under the packages of the independence contracts ({contracts}): nothing checked", file=sys.stderr)
        return ExitCode.EMPTY
    print(f"{len(found)} violation(s) in {files} file(s); contracts: {contracts}")
    return ExitCode.CLAIM_NOT_MET if found else ExitCode.OK


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="gates", description="Gate roadmap rows: implementations against independent oracles.",
                                  epilog=EPILOG)
    top.add_argument("--root", type=Path, help=f"project root (default: the nearest folder whose {CONFIG_FILE} has [{SECTION}])")
    sub = top.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="rows, milestones, states and gates (imports no target)")
    run = sub.add_parser("run", help="run gates; one verdict per row; exit 0 only when every row meets its claimed state",
                         epilog=EPILOG)
    run.add_argument("rows", nargs="*", help="rows to run (default: all)")
    run.add_argument("--marker", default="all", help=MARKER_CHOICES_HELP + " (default: all)")
    run.add_argument("--changed-since", metavar="REF", help="only rows that changes since REF can affect (see `gates affected`)")
    run.add_argument("--gate", action="append", default=[], metavar="ID",
                     help="only this gate of the one ROW (repeatable): a partial selection, judged on what it ran; "
                          "no claim is judged")
    run.add_argument("--case", action="append", default=[], metavar="NAME",
                     help="only this item of the one --gate (repeatable): a named case, properties, known_bad[NAME], known_good[NAME], audit or strength")
    run.add_argument("--profile", choices=list(PROFILES),
                     help="hypothesis profile: ci (derandomized), dev, thorough (10x examples), deep (50x, a fresh seed "
                          "printed); default: ci when CI is set, else dev")
    run.add_argument("--seed", type=int, metavar="N", help="the run seed (pytest: --hypothesis-seed): replays what a run "
                                                          "that printed it drew, under the same profile (default: a fresh one)")
    run.add_argument("--deep", action="store_true", help="the deep profile (--profile deep): fifty times each gate's "
                                                          "examples, drawn from a fresh seed that the summary prints")
    run.add_argument("--impl", metavar="NAME", help="the implementation to judge: python (default) or one declared under "
                                                    "[tool.vllm-gates.implementations]; built first when out of date")
    for option in options("cli"):  # each feature's (features.py): --json, --examples-db, --evidence, --mutation, --shard, ...
        option.add_to_cli(run)
    verdict = sub.add_parser("verdict", help="judge the claims from evidence files (--json reports of earlier runs); runs nothing",
                             epilog=EPILOG)
    verdict.add_argument("rows", nargs="*", help="rows to judge (default: all)")
    verdict.add_argument("--evidence", action="append", required=True, metavar="F",
                         help="a run's --json report; repeat it to merge machines (the CPU job's and the GPU job's)")
    verdict.add_argument("--impl", metavar="NAME", help="the implementation the claims are judged for (default: python); "
                                                        "evidence of another implementation is not used")
    JSON.add_to_cli(verdict)
    MARKDOWN.add_to_cli(verdict)
    verdict.add_argument("--junit", metavar="F", help="write JUnit XML: a test case per claim")
    MUTATION.add_to_cli(verdict)
    report = sub.add_parser("report", help="one self-contained HTML page from a run's JSON report, a mutation report "
                                           "and `gates diverge` reports")
    report.add_argument("--html", metavar="F", required=True, help="the page to write")
    report.add_argument("--run", metavar="F", help=f"a run's --json report (default: {DEFAULT_RUN_REPORT} under the project root)")
    report.add_argument("--mutation", metavar="F", help=f"a `gates mutate` report (default: {DEFAULT_MUTATION_REPORT}; "
                                                        "none there: the page says no mutation run)")
    report.add_argument("--diverge", action="append", default=[], metavar="F",
                        help="a `gates diverge --json` report: a section with its per-tap table, classification and "
                             "per-layer error plot (repeatable; docs/divergence.md)")
    audit = sub.add_parser("audit", help="show every gate can fail (the wrong-everywhere stand-in and each known-bad) and passes each known-good")
    audit.add_argument("rows", nargs="*")
    audit.add_argument("--marker", default="all", help=MARKER_CHOICES_HELP + " (default: all)")
    audit.add_argument("--impl", metavar="NAME", help="the implementation whose worker answers the audit stand-in (default: python)")
    audit.add_argument("--evidence", action="append", default=[], metavar="F",
                       help="a run's --json report: the gates it judged under their current fingerprints are audited "
                            "from its items, not run again; the others run (repeatable)")
    sub.add_parser("coverage", help="requirement ids in the spec files that no gate covers")
    affected = sub.add_parser("affected", help="rows that changes since --base can affect: files their gates import, their "
                                               "sources, row folder, gate file, spec or roadmap entry; every row when the "
                                               "harness, pyproject.toml or a package __init__.py changes")
    affected.add_argument("--base", required=True, metavar="REF", help="a git ref: changes since it, committed or not")
    affected.add_argument("--explain", action="store_true", help="print under each row the reasons it is affected")
    deviations = sub.add_parser("deviations", help="the declared deviations from the pinned upstream release (spec/deviations.yaml)")
    deviations.add_argument("rows", nargs="*", help="rows to list (default: all)")
    deviations.add_argument("--json", action="store_true", help="print them as JSON")
    drift = sub.add_parser("upstream-drift", help="what changed between the pinned upstream release and another one, per row "
                                                  "and operation: every upstream gate's oracle asked the same inputs under both")
    drift.add_argument("rows", nargs="*", help="rows to compare (default: all)")
    drift.add_argument("--to", required=True, type=_version_text, metavar="VERSION", help="the other release, e.g. 0.25.0")
    drift.add_argument("--site", type=Path, metavar="DIR", help="the folder it is installed in (default: "
                                                                "build/upstream/vllm-VERSION, as ci/install-upstream-beside.sh puts it)")
    drift.add_argument("--from-site", type=Path, metavar="DIR", help="a folder holding the pinned release (default: this environment's install)")
    drift.add_argument("--examples", type=int, default=25, metavar="N", help="examples drawn per gate from its strategy, a fixed seed (default 25)")
    drift.add_argument("--timeout", type=float, default=900.0, metavar="S", help="seconds each release's probe may take (default 900)")
    drift.add_argument("--json", metavar="F", help="write the report as JSON")
    drift.add_argument("--markdown", metavar="F", help="write the report as Markdown")
    drift.add_argument("--check", action="store_true", help="exit 1 when anything changed or could not run (default: exit 0, a report)")
    diverge = sub.add_parser("diverge", help="where an implementation diverges from a reference, tap by tap: a localized "
                                             "break or drift (docs/divergence.md); exit 0 no break, 1 a localized break")
    diverge.add_argument("row", metavar="ROW", help="the row whose gate declares `taps:`")
    diverge.add_argument("--gate", required=True, metavar="ID", help="a gate of ROW with `taps:`")
    diverge.add_argument("--case", metavar="NAME", help="the case whose input is run (default: the gate's first)")
    diverge.add_argument("--impl", metavar="NAME", help="the implementation (default: python)")
    diverge.add_argument("--against", default="oracle", metavar="REF", help="oracle (default), a recorded dump "
                         "FILE.safetensors, or a reference target module:function called with the oracle's builder")
    diverge.add_argument("--known-bad", metavar="NAME", help="judge the gate's known-bad NAME in place of the "
                                                            "implementation (where a planted defect is localized)")
    diverge.add_argument("--json", metavar="F", help="write the report as JSON")
    diverge.add_argument("--dump", metavar="F", help="record the reference's taps, the ids and the weights' fingerprint "
                         "in F (.safetensors)")
    diverge.add_argument("--no-shrink", action="store_true", help="on a localized break, do not seek the fewest layers "
                         "and the shortest prompt that keep it (each a run of the reference and the implementation)")
    sub.add_parser("check-independence", help="packages that import what an independence contract forbids (impl, oracles)")
    new_row = sub.add_parser("new-row", help="write a new row that passes as written: spec, roadmap entry, gate file, "
                                             "operations.yaml, helper module, port and oracle stubs (docs/gating-a-port.md)")
    new_row.add_argument("name", metavar="NAME", help="the row id, e.g. DEMO or KV-OFFLOAD (upper case, digits, dashes)")
    mutate = sub.add_parser("mutate", help="mutants of the implementation each row's sources name, run through the gates "
                                           "that reach their line: killed, survived, kill matrix (docs/mutation.md)")
    mutate.add_argument("rows", nargs="*", help="rows to mutate (default: all)")
    mutate.add_argument("--impl", default="python", help="the implementation to mutate: python (the in-repo port, default) "
                        "or an external C++ one (its sources mutated, each mutant built once and cached under "
                        "build/mutants/IMPL)")
    mutate.add_argument("--first-kill", action="store_true", help="stop judging a mutant at the first gate that kills "
                        "it, cheapest gates first (faster; the kill matrix then counts only that gate)")
    mutate.add_argument("--budget", type=float, metavar="S", help="seconds per row (judging the Python port's mutants, "
                        "in a random order, or building an external implementation's); the mutants left when it is "
                        "spent are not judged (reported), the score is over those judged, with its standard error")
    mutate.add_argument("--max-mutants", type=int, metavar="N", help="at most N mutants per row, drawn with --seed")
    mutate.add_argument("--per-line", type=int, metavar="1", help="one mutant per line, drawn with --seed: an "
                        "estimate of the whole population's score, printed with its standard error")
    mutate.add_argument("--family", action="append", default=[], metavar="NAME", help="only the mutants of this "
                        "operator family (repeatable; e.g. precision: casts and dtypes, docs/mutation.md)")
    mutate.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds one mutant's gate run may "
                                                                                   "take before it is timed_out (default: 60)")
    mutate.add_argument("--json", metavar="F", default="reports/mutation.json", help="the report (default: "
                                                                                     "reports/mutation.json); a rerun resumes from it")
    mutate.add_argument("--since", "--changed-since", dest="changed_since", metavar="REV",
                        help="only lines changed since REV (git diff -U0, the working tree included)")
    mutate.add_argument("--annotations", metavar="F", help="also write each survivor as a GitHub annotation "
                        "(::warning file=...,line=...::...) to F, or to stdout with -")
    mutate.add_argument("--schema-report", metavar="F", help="also write the report in the "
                        "mutation-testing-report-schema JSON (Stryker's dashboard reads it) to F")
    mutate.add_argument("--seed", type=int, default=0, metavar="N", help="the seed of the --max-mutants draw and of "
                                                                         "the gates' examples (default: 0)")
    return top


def cmd_mutate(args: argparse.Namespace, project: Project) -> int:
    """`gates mutate`: its options checked in the user's words, then mutate.run_mutate."""
    from _vllm_gates.definitions.config import implementation_refused
    from _vllm_gates.mutation.mutate import Options, run_mutate
    from _vllm_gates.mutation.mutate_operators import FAMILIES
    from _vllm_gates.mutation.mutate_report import MutationError

    refused = implementation_refused(project.config, "--impl", args.impl)
    if refused:
        raise UsageError(refused)
    if args.budget is not None and not args.budget > 0:
        raise UsageError(f"--budget {args.budget}: must be a positive number of seconds")
    if args.max_mutants is not None and args.max_mutants < 1:
        raise UsageError(f"--max-mutants {args.max_mutants}: must be at least 1")
    if args.per_line is not None and args.per_line != 1:
        raise UsageError(f"--per-line {args.per_line}: only 1 (one mutant per line) is supported")
    if not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout}: must be a positive number of seconds")
    unknown = [name for name in args.family if name not in FAMILIES]
    if unknown:
        raise UsageError(f"--family {unknown[0]}: unknown operator family (known: {', '.join(FAMILIES)})")
    _check_rows(project, args.rows)
    path = Path(args.json) if Path(args.json).is_absolute() else project.config.root / args.json
    schema_report = None if args.schema_report is None else project.config.root / args.schema_report
    annotations = args.annotations if args.annotations in (None, "-") else str(project.config.root / args.annotations)
    for flag, given, target in (("--schema-report", args.schema_report, schema_report),
                                ("--annotations", args.annotations, None if annotations in (None, "-") else Path(annotations))):
        if target is not None and target.is_dir():
            raise UsageError(f"{flag} {given}: is a folder; name a file")
        if target is not None and target.resolve() == path.resolve():
            raise UsageError(f"{flag} {given}: is the --json report, which a rerun reads; name another file")
    options = Options(tuple(args.rows), args.max_mutants, args.timeout, path, args.changed_since, args.seed, args.impl,
                      args.budget, args.first_kill, tuple(dict.fromkeys(args.family)), args.per_line == 1,
                      annotations, schema_report)
    try:
        return run_mutate(project, options)
    except MutationError as error:
        print(f"gates mutate: {error}", file=sys.stderr)
        return ExitCode.ERROR


def cmd_new_row(args: argparse.Namespace, project: Project) -> int:
    """`gates new-row NAME`: new_row writes the files; a refusal is a usage error naming why, and nothing is written."""
    from _vllm_gates.frontends.new_row import NewRowRefused, new_row

    try:
        written = new_row(project.config, args.name, tuple(row.id for row in project.roadmap.rows))
    except NewRowRefused as error:
        raise UsageError(str(error)) from None
    width = max(len(path) for path, _ in written)
    print(f"gates new-row {args.name}: the row's files (docs/gating-a-port.md, \"A row's files\"):")
    for path, what in written:
        print(f"  {path:<{width}}  {what}")
    print(f"next: gates run {args.name}; gates audit {args.name}; gates mutate {args.name} --max-mutants 10; then replace "
          "the stub operation by the row's own")
    return ExitCode.OK


COMMANDS = {"list": cmd_list, "run": cmd_run, "verdict": cmd_verdict, "report": cmd_report, "audit": cmd_audit,
            "coverage": cmd_coverage, "affected": cmd_affected,
            "deviations": cmd_deviations, "upstream-drift": cmd_upstream_drift, "check-independence": cmd_check_independence,
            "mutate": cmd_mutate, "diverge": cmd_diverge, "new-row": cmd_new_row}


class _QuietPipe(io.RawIOBase):
    """Writes to a file descriptor; once its reader has gone (EPIPE: `gates list | head -1`), the descriptor is
    pointed at os.devnull and every write, that one included, succeeds unseen. The command runs on to its own exit
    status (a gate run writes its reports), with no BrokenPipeError and no "Exception ignored" at exit."""

    def __init__(self, fd: int):
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: bytes) -> int:  # type: ignore[override]
        """Write all of ``data`` (or drop it once the reader is gone); return its length."""
        view = memoryview(data).cast("B")
        total = len(view)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except BrokenPipeError:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._fd)
            finally:
                os.close(null)
        return total


@contextlib.contextmanager
def _quiet_pipes() -> Iterator[None]:
    """sys.stdout and sys.stderr through _QuietPipe while a command runs, where they are the process's own streams
    (not a test's or an embedding program's replacement); put back, flushed, afterwards."""
    saved = {}
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or stream is not getattr(sys, f"__{name}__") or not isinstance(stream, io.TextIOWrapper):
            continue
        try:
            fd = stream.fileno()
            stream.flush()
        except (OSError, ValueError):
            continue
        saved[name] = stream
        raw = _QuietPipe(fd)
        if isinstance(stream.buffer, io.BufferedWriter):  # buffered as before: by line on a terminal, else by block
            replacement = io.TextIOWrapper(io.BufferedWriter(raw), encoding=stream.encoding, errors=stream.errors,  # type: ignore[type-var]  # a RawIOBase; the stubs want a buffer type
                                           line_buffering=stream.line_buffering, write_through=stream.write_through)
        else:  # unbuffered (python -u, PYTHONUNBUFFERED): every write goes straight through, as before
            replacement = io.TextIOWrapper(raw, encoding=stream.encoding, errors=stream.errors, write_through=True)  # type: ignore[arg-type]
        setattr(sys, name, replacement)
    try:
        yield
    finally:
        for name, stream in saved.items():
            replacement = getattr(sys, name)
            with contextlib.suppress(OSError, ValueError):
                replacement.flush()
            setattr(sys, name, stream)


def main(argv: list[str] | None = None) -> int:
    """Run one `gates` command and return its exit status. A closed pipe is not an error (the command finishes and
    its status stands); Ctrl-C outside a gate run is one line on stderr and exit 130 (in `gates run` and `gates
    audit`, pytest handles it: the reports say `interrupted`)."""
    with _quiet_pipes():
        try:
            return _main(argv)
        except KeyboardInterrupt:
            print("gates: interrupted (SIGINT): stopped before it finished", file=sys.stderr)
            return ExitCode.INTERRUPTED


def _main(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    try:
        project = Project(_project_config(args.root))  # the run's one snapshot: what is read, is read once
        if args.command != "check-independence":
            project.roadmap  # noqa: B018 - a roadmap that does not load is every other command's definition error
        return int(COMMANDS[args.command](args, project))
    except DefinitionError as error:
        print(f"definition error:\n{error}", file=sys.stderr)
        return ExitCode.ERROR
    except UsageError as error:
        print(f"gates: error: {error}", file=sys.stderr)
        return ExitCode.USAGE
    except BrokenPipeError:  # streams _quiet_pipes could not take over (`gates list | head`): the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
