"""`gates report --html F`: one self-contained page (inline CSS and script, nothing fetched) from a run's JSON report
and the last mutation report (docs/reports.md), with a section per `gates diverge --json` report given
(divergence_page). Both are read by their typed readers (report_files, mutation_records): a missing report or a
malformed record is said on the page, naming the field and its value; every value is escaped, and long lists and
diffs are cut with a count of what was cut."""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from _vllm_gates.results.mutation_records import GateKills, Kill, MutationReport, MutationRow
from _vllm_gates.results.records import ItemResult, RecordError
from _vllm_gates.results.report_files import RunReportFile
from _vllm_gates.results.reports import RUN_SCHEMA
from _vllm_gates.results.verdicts import ClaimResult, GateResult, RowReport
from _vllm_gates.run.mutation_evidence import MUTATION_SCHEMA
from _vllm_gates.taps.divergence_page import STYLE as DIVERGE_STYLE, DivergeReport, diverge_section

MAX_ITEMS_PER_GATE = 200
MAX_MATRIX_ROWS = 400
MAX_SURVIVORS = 50
MAX_DIFF_CHARS = 4000
MAX_TEXT = 500  # a reason, a title, a detail

STATUS_CELL = {"killed": "k", "timed_out": "t", "survived": "s", "not_covered": "n", "equivalent": "e", "not_compiling": "c",
               "not_run_here": "h"}


@dataclass(frozen=True)
class Source:
    """A report the page is made from: its name as given, its document, or why there is none."""

    shown: str
    document: dict[str, Any] | None
    problem: str = ""


def read_source(path: Path, shown: str, schema: str) -> Source:
    """A JSON report of ``schema``; a file that is not there, not JSON or of another schema is a Source with the reason."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Source(shown, None, f"{shown} does not exist")
    except OSError as exc:
        return Source(shown, None, f"{shown} cannot be read: {exc.strerror or exc}")
    except (UnicodeDecodeError, ValueError) as exc:
        return Source(shown, None, f"{shown} is not JSON: {exc}")
    found = document.get("schema") if isinstance(document, dict) else None
    if found != schema:
        return Source(shown, None, f"{shown} has schema {found!r}, expected {schema!r}")
    return Source(shown, document)


def _text(value: Any, limit: int = MAX_TEXT) -> str:
    shown = value if isinstance(value, str) else json.dumps(value) if value is not None else ""
    return escape(shown if len(shown) <= limit else shown[:limit] + f" … ({len(shown) - limit} more characters)")


def _number(value: Any) -> float:
    return float(value) if type(value) in (int, float) else 0.0


def _verdict(value: Any) -> str:
    text = value if isinstance(value, str) else "?"
    return f'<span class="v v-{escape(text.lower())}">{escape(text)}</span>'


def _cut(shown: int, total: int, what: str) -> str:
    return f'<p class="cut">{total - shown} more {what} not shown (first {shown} of {total})</p>' if total > shown else ""


def _claim(claim: ClaimResult) -> str:
    met = "not judged" if not claim.judged else "met" if claim.claim_met else "not met"
    return (f'{_verdict(claim.verdict.value)} claims <b>{_text(claim.state)}</b> '
            f'<span class="{"met" if met == "met" else "unmet"}">{met}</span> <span class="why">{_text(claim.reason)}</span>')


def _gate(gate: GateResult, items: list[ItemResult]) -> str:
    seconds = sum(i.duration for i in items)
    counts = (f'cases {gate.cases_passed}/{gate.cases_total}, examples {gate.examples}, '
              f'known-bad {gate.known_bad_rejected}/{gate.known_bad_total}, '
              + (f'known-good {gate.known_good_passed}/{gate.known_good_total}, ' if gate.known_good_total else "")
              + f'{gate.checks} checks, {seconds:.2f} s')
    rows = "".join(f'<tr><td>{_text(i.name)}</td><td>{_text(i.kind)}</td><td>{_text(i.outcome.value)}</td>'
                   f'<td>{i.duration:.3f}</td><td>{_text(i.detail)}</td></tr>'
                   for i in items[:MAX_ITEMS_PER_GATE])
    table = (f'<table><tr><th>item</th><th>kind</th><th>outcome</th><th>s</th><th>detail</th></tr>{rows}</table>'
             f'{_cut(min(len(items), MAX_ITEMS_PER_GATE), len(items), "items")}') if items else "<p>no item of this gate ran here</p>"
    return (f'<details class="gate"><summary>{_verdict(gate.verdict.value)} <code>{_text(gate.gate)}</code> '
            f'{counts} <span class="why">{_text(gate.reason)}</span></summary>{table}</details>')


def _row(row: RowReport, items: tuple[ItemResult, ...]) -> str:
    by_gate: dict[tuple[str, str], list[ItemResult]] = {}
    for item in items:
        by_gate.setdefault((item.row, item.gate), []).append(item)
    parts = []
    for milestone in row.milestones:
        mine = [g for g in row.gates if g.milestone == milestone.milestone]
        body = "".join(_gate(g, by_gate.get((g.row, g.gate), [])) for g in mine) or "<p>no gate</p>"
        parts.append(f'<details class="milestone"><summary><b>{_text(milestone.milestone)}</b> '
                     f'{_claim(milestone)}</summary>{body}</details>')
    return (f'<details class="row"><summary><b>{_text(row.row)}</b> {_text(row.title)} '
            f'{_claim(row.claim)}</summary>{"".join(parts) or "<p>no milestone</p>"}</details>')


def _section(anchor: str, title: str, head: str, rows: Iterable[str]) -> str:
    body = "".join(rows) or "<p>the report holds no row</p>"
    return f'<section id="{anchor}"><h2>{title}</h2>{head}{body}</section>'


def _absent(anchor: str, title: str, what: str, source: Source) -> str:
    return f'<section id="{anchor}"><h2>{title}</h2><p class="none">{what}: {_text(source.problem)}</p></section>'


def _run_report(run: Source) -> RunReportFile | Source:
    """The run report as its types, or a Source saying why there is none (absent, or a malformed record)."""
    if run.document is None:
        return run
    try:
        return RunReportFile.from_data(run.document, run.shown)
    except RecordError as malformed:
        return Source(run.shown, None, str(malformed))


def run_section(run: Source) -> str:
    """Rows, then milestones, then gates (each a <details>), with verdicts, counts and timings."""
    report = _run_report(run)
    if isinstance(report, Source):
        return _absent("run", "Gates", "Malformed run report" if run.document is not None else "No run report", report)
    head = (f'<p>{_text(run.shown)}: exit {report.exit_code}, {report.checks} checks, '
            f'marker {_text(report.meta.get("markexpr"))}</p>')
    return _section("run", "Gates", head, (_row(r, report.items) for r in report.rows))


def _matrix(row: MutationRow) -> str:
    """Mutants and known-bads down, gates across: the gate that rejected each first, the gates that ran it."""
    gates = [g.gate for g in row.gates]
    entries: list[tuple[str, str, Kill | None, tuple[str, ...], str]] = (
        [(m.id, m.verdict.status, m.verdict.killed_by, m.verdict.gates_run, "mutant") for m in row.mutants]
        + [(f"known-bad {k.gate}:{k.name}", "killed" if k.killed_by else "survived", k.killed_by, (), "known-bad")
           for k in row.known_bads])
    for _, _, killer, ran, _ in entries:
        for gate in [killer.gate if killer else None, *ran]:
            if gate is not None and gate not in gates:
                gates.append(gate)
    head = "".join(f'<th class="g"><span>{_text(g, 60)}</span></th>' for g in gates)
    kills = {g.gate: g for g in row.gates}
    most = max([g.killed for g in kills.values()] + [1])
    nothing = GateKills("", 0, 0, False)
    heat = "".join(f'<td class="heat" style="background: rgba(200,40,40,{kills.get(g, nothing).killed / most:.2f})" '
                   f'title="killed {kills.get(g, nothing).killed}, unique {kills.get(g, nothing).unique_kills}'
                   f'{", redundant" if kills.get(g, nothing).redundant else ""}">{kills.get(g, nothing).killed}</td>'
                   for g in gates)
    lines = []
    for label, status, killer, ran, kind in entries[:MAX_MATRIX_ROWS]:
        cells = []
        for gate in gates:
            if killer is not None and killer.gate == gate:
                cells.append(f'<td class="c c-k" title="{_text(killer.item)}">&#9632;</td>')
            elif gate in ran:
                cells.append(f'<td class="c c-{STATUS_CELL.get(status, "s") if status != "killed" else "r"}"></td>')
            else:
                cells.append('<td class="c c-0"></td>')
        lines.append(f'<tr class="{kind}"><th>{_text(label, 120)}</th><td>{_text(status)}</td>{"".join(cells)}</tr>')
    return (f'<table class="matrix"><tr><th>mutant / known-bad</th><th>status</th>{head}</tr>'
            f'<tr><th>kills per gate</th><td></td>{heat}</tr>{"".join(lines)}</table>'
            f'{_cut(min(len(entries), MAX_MATRIX_ROWS), len(entries), "mutants and known-bads")}')


def _diff(text: Any) -> str:
    diff = text if isinstance(text, str) else ""
    shown = diff[:MAX_DIFF_CHARS]
    lines = []
    for line in shown.splitlines():
        kind = "add" if line.startswith("+") and not line.startswith("+++") else \
            "del" if line.startswith("-") and not line.startswith("---") else "ctx"
        lines.append(f'<span class="{kind}">{escape(line)}</span>')
    cut = f'\n… {len(diff) - MAX_DIFF_CHARS} more characters of this diff not shown' if len(diff) > MAX_DIFF_CHARS else ""
    return f'<pre class="diff">{chr(10).join(lines)}{escape(cut)}</pre>'


def _survivors(row: MutationRow) -> str:
    found = [m for m in row.mutants if m.verdict.status == "survived"]
    if not found:
        return "<p>no survivor</p>"
    shown = "".join(f'<div class="survivor"><p><code>{_text(m.file)}:{m.line}</code> '
                    f'{_text(m.operator)}; gates that ran and passed it: '
                    f'{_text(", ".join(m.verdict.gates_run) or "none")}</p>{_diff(m.diff)}</div>'
                    for m in found[:MAX_SURVIVORS])
    return shown + _cut(min(len(found), MAX_SURVIVORS), len(found), "survivors")


def _mutation_row(row: MutationRow) -> str:
    shown = "no score" if row.score is None else f"{row.score:.1%}"
    counts = ", ".join(f"{key.replace('_', ' ')} {row.generated if key == 'generated' else row.counts[key]}" for key in
                       ("generated", "killed", "survived", "timed_out", "not_covered", "equivalent", "not_compiling",
                        "not_run_here"))
    redundant = [g.gate for g in row.gates if g.redundant]
    extra = f'<p>redundant gates (kill nothing another does not): {_text(", ".join(redundant))}</p>' if redundant else ""
    return (f'<details class="mrow"><summary><b>{_text(row.row)}</b> score <b>{shown}</b> ({counts})</summary>{extra}'
            f'<h4>Kill matrix</h4>{_matrix(row)}<h4>Survivors</h4>{_survivors(row)}</details>')


def mutation_section(mutation: Source) -> str:
    """Per row: the counts and score, the kill matrix as a heat map, the survivors with their diffs; a report whose
    records are malformed is said, naming the field and its value."""
    if mutation.document is None:
        return _absent("mutation", "Mutation", "No mutation run", mutation)
    try:
        report = MutationReport.from_data(mutation.document, mutation.shown)
    except RecordError as malformed:
        return _absent("mutation", "Mutation", "Malformed mutation report", Source(mutation.shown, None, str(malformed)))
    meta = report.meta
    head = (f'<p>{_text(mutation.shown)}: engine {_text(meta.get("engine"))}, started {_text(meta.get("started"))}, '
            f'{_number(meta.get("seconds")):.1f} s, seed {_text(meta.get("seed"))}, '
            f'{"lines changed since " + _text(meta.get("changed_since")) if meta.get("changed_since") else "every line"}</p>{LEGEND}')
    return _section("mutation", "Mutation", head, (_mutation_row(r) for r in report.rows))


def tolerance_section(run: Source) -> str:
    """How much of its tolerance each numeric gate used: a section only where a gate records it."""
    report = _run_report(run)
    gates = [] if isinstance(report, Source) else [g for g in report.gates() if g.tolerance_used is not None]
    if not gates:
        return ""
    rows = "".join(f'<tr><td><code>{_text(g.gate)}</code></td><td>{g.tolerance_used:.1%}</td></tr>' for g in gates)
    return f'<section id="tolerance"><h2>Numeric gates</h2><table><tr><th>gate</th><th>tolerance used</th></tr>{rows}</table></section>'


LEGEND = ('<p class="legend">kill matrix: <span class="c-k">&#9632;</span> rejected it first '
          '<span class="c-r">&nbsp;&nbsp;</span> ran it, not first <span class="c-s">&nbsp;&nbsp;</span> ran it and it survived '
          '<span class="c-t">&nbsp;&nbsp;</span> timed out <span class="c-e">&nbsp;&nbsp;</span> equivalent, not compiling or not covered '
          '<span class="c-h">&nbsp;&nbsp;</span> not run here (only gates this machine cannot run reach it)</p>')

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
details{margin:.2em 0 .2em 1.2em}summary{cursor:pointer}
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
.v{font-weight:bold;padding:0 4px;border-radius:3px}.v-pass{background:#c8f0c8}.v-fail,.v-error{background:#f6c0c0}
.v-unproven,.v-skipped,.v-weak,.v-incomplete,.v-empty,.v-not-implemented{background:#f3e5b0}
.met{color:#176317}.unmet{color:#a11;font-weight:bold}.why{color:#555}.cut,.none{color:#a60;font-style:italic}
.matrix td.c{width:14px;height:14px;padding:0}.c-k{background:#c82828;color:#fff;text-align:center;font-size:9px}
.c-r{background:#f0b4b4}.c-s{background:#f5d76e}.c-t{background:#b48cd2}.c-n,.c-e,.c-c{background:#ddd}.c-h{background:#cfe0f5}.c-0{background:#fafafa}
.matrix th.g{writing-mode:vertical-rl;font-weight:normal;font-size:11px}.matrix tr.known-bad th{color:#236}
pre.diff{background:#f6f6f6;padding:.4em;overflow:auto;max-height:30em}.add{color:#176317}.del{color:#a11}
"""

SCRIPT = """
document.getElementById('expand').addEventListener('click', function () {
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
});
document.getElementById('collapse').addEventListener('click', function () {
  document.querySelectorAll('details').forEach(function (d) { d.open = false; });
});
"""


def render_page(run: Source, mutation: Source, diverge: Sequence[DivergeReport] = ()) -> str:
    """The whole page: no external resource, every value from the reports escaped; a section per diverge report."""
    body = "".join((run_section(run), tolerance_section(run), mutation_section(mutation),
                    *(diverge_section(report, index) for index, report in enumerate(diverge))))
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'\">"
            f'<title>vllm-gates report</title><style>{STYLE}{DIVERGE_STYLE}</style></head><body><h1>vllm-gates report</h1>'
            '<p><button id="expand" type="button">expand all</button> <button id="collapse" type="button">collapse all</button></p>'
            f'{body}<script>{SCRIPT}</script></body></html>\n')


def sources_for(root: Path, run: str | None, mutation: str | None, default_run: str, default_mutation: str) -> tuple[Source, Source]:
    """The two reports as given (relative to the current folder) or their defaults under the project root; one whose
    records are malformed is a Source with the reason (the field and its value)."""
    def read(given: str | None, default: str, schema: str, reader: Any) -> Source:
        source = read_source(Path(given) if given else root / default, given or default, schema)
        try:
            if source.document is not None:
                reader(source.document, source.shown)
        except RecordError as malformed:
            return Source(source.shown, None, f"malformed: {malformed}")
        return source

    return (read(run, default_run, RUN_SCHEMA, RunReportFile.from_data),
            read(mutation, default_mutation, MUTATION_SCHEMA, MutationReport.from_data))


def problems(sources: Iterable[tuple[str, Source, bool]]) -> list[str]:
    """`--FLAG problem` for each report named explicitly that cannot be used (a default that cannot is said on the page)."""
    return [f"--{flag} {source.problem}" for flag, source, named in sources if named and source.document is None]
