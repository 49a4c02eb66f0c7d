"""Render a run: the terminal table, JSON (written atomically) and Markdown for a CI step summary."""
from __future__ import annotations

import json
import os
import stat
import tempfile
import unicodedata
from dataclasses import asdict
from pathlib import Path
from typing import Any

from _vllm_gates.results.verdicts import RunReport

RUN_SCHEMA = "vllm-gates/run/3"  # docs/evidence.md; the JSON Schema is schema/run.schema.json

COLUMNS = ("row", "milestone", "gate", "cases", "examples", "values", "errors", "known-bad", "known-good", "verdict", "claimed",
           "upstream")


def _table(report: RunReport) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The header and lines of the row table; the known-good column only where some gate declares a known-good, the
    upstream column only where some row claims upstream parity."""
    lines = _rows(report)
    dropped = {COLUMNS.index(name) for name, shown in (
        ("known-good", any(gate.known_good_total for row in report.rows for gate in row.gates)),
        ("upstream", any(row.parity is not None for row in report.rows))) if not shown}
    keep = [i for i in range(len(COLUMNS)) if i not in dropped]
    return tuple(COLUMNS[i] for i in keep), [tuple(line[i] for i in keep) for line in lines]


def _rows(report: RunReport) -> list[tuple[str, ...]]:
    lines: list[tuple[str, ...]] = []
    for row in report.rows:
        claims = {m.milestone: m for m in row.milestones}
        parity = set(row.parity.gates) if row.parity else set()
        for gate in row.gates:
            claim = claims.get(gate.milestone)
            upstream = f"parity {row.parity.claimed}" if gate.gate in parity and row.parity else ""
            good = f"{gate.known_good_passed}/{gate.known_good_total}" if gate.known_good_total else ""
            lines.append((row.row, gate.milestone, gate.gate, f"{gate.cases_passed}/{gate.cases_total}", str(gate.examples),
                          str(gate.values_compared), str(gate.errors_agreed),
                          f"{gate.known_bad_rejected}/{gate.known_bad_total}", good, gate.verdict.value,
                          "" if upstream else (claim.state if claim else ""), upstream))
        if report.partial:  # no claim is judged: only a row whose gate file did not load says so here
            if not row.gates:
                lines.append((row.row, "", "(row)", "", "", "", "", "", "", row.claim.verdict.value, f"{row.claim.state} not judged", ""))
            continue
        for ms in row.milestones:
            mark = "ok" if ms.claim_met else "NOT MET"
            lines.append((row.row, ms.milestone or "", "(milestone)", "", "", "", "", "", "", ms.verdict.value, f"{ms.claimed} {mark}", ""))
        mark = "ok" if row.claim.claim_met else "NOT MET"
        lines.append((row.row, "", "(row)", "", "", "", "", "", "", row.claim.verdict.value, f"{row.claim.claimed} {mark}", parity_cell(row)))
    return lines


def parity_cell(row: Any) -> str:
    """The row's upstream-parity claim in a table cell: "0.33.0 ok", "0.33.0 NOT MET", "0.33.0 not checked here"."""
    if row.parity is None:
        return ""
    mark = {True: "ok", False: "NOT MET", None: "not checked here"}[row.parity.met]
    return f"{row.parity.claimed} {mark}"


def one_line(text: str) -> str:
    """A table cell's text on one line: control characters (newline, tab, escape, ...) and line separators written
    as escapes."""
    if text.isascii() and text.isprintable():  # the common cell: nothing to escape
        return text
    return "".join(ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch
                   for ch in text)


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes: wide (East Asian) characters two, combining and format characters none."""
    if text.isascii():  # no ASCII character is wide, combining or a format character
        return len(text)
    width = 0
    for ch in text:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def fit(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` columns, ending in "…" where it was cut."""
    if display_width(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        step = display_width(ch)
        if used + step > width - 1:
            break
        out.append(ch)
        used += step
    return "".join(out) + "…"


def fixed_width(header: tuple[str, ...], body: list[tuple[str, ...]], limits: dict[int, int] | None = None,
                rule: bool = False) -> list[str]:
    """Lines of a table whose columns are as wide as their widest cell (in terminal columns), two spaces apart, so
    no cell runs into the next; a column in ``limits`` is cut to that width (the caller shows the whole text)."""
    limits = limits or {}
    cells = [tuple(fit(one_line(c), limits[i]) if i in limits else one_line(c) for i, c in enumerate(row)) for row in [header, *body]]
    widths = [max(display_width(row[i]) for row in cells) for i in range(len(header))]
    render = lambda row: "  ".join(c + " " * (w - display_width(c)) for c, w in zip(row, widths, strict=False)).rstrip()  # noqa: E731
    lines = [render(row) for row in cells]
    if rule:
        lines.insert(1, render(tuple("-" * w for w in widths)))
    return lines


def table(report: RunReport) -> str:
    """A fixed-width table, one line per gate, milestone and row, then the reasons of unmet claims."""
    out = fixed_width(*_table(report), rule=True)
    counts = operation_lines(report)
    if counts:
        out += ["", *counts]
    near_edge = tolerance_lines(report)
    if near_edge:
        out += ["", *near_edge]
    reasons = _unmet(report)
    if reasons:
        out += ["", *reasons]
    return "\n".join(out)


NEAR_EDGE = 0.5  # a gate whose passing comparisons used more than this share of their tolerance is listed


def tolerance_lines(report: RunReport) -> list[str]:
    """The gates that used more than half of their comparison policy's tolerance, so that drift toward the edge
    is seen before it fails (docs/numeric-gates.md §4)."""
    found = [f"  {row.row}::{gate.gate}: {gate.tolerance_used:.0%} of its tolerance"
             + (f" ({used_at_text(gate.tolerance_at)})" if used_at_text(gate.tolerance_at) else "")
             for row in report.rows for gate in row.gates if gate.tolerance_used is not None and gate.tolerance_used > NEAR_EDGE]
    return ["used more than half of their tolerance:", *found] if found else []


def used_at_text(at: Any) -> str:
    """Where a gate used the most of its tolerance, as the list names it: "case 'x', result[0] (float16)"."""
    if not isinstance(at, dict):
        return ""
    return f"{at.get('where', '')}, {at.get('output', '')} ({at.get('dtype', '')})".lstrip(", ")


def tolerance_properties(report: RunReport, row_id: str, milestone: str | None) -> list[tuple[str, str]]:
    """JUnit properties of a claim's test case: the tolerance each of its gates used, and how many of its known-goods
    it passed (a row's claim: every gate)."""
    gates = [gate for row in report.rows if row.row == row_id for gate in row.gates if milestone in (None, gate.milestone)]
    return [(f"tolerance_used[{gate.gate}]", f"{gate.tolerance_used:.6g}") for gate in gates if gate.tolerance_used is not None] \
        + [(f"known_good[{gate.gate}]", f"{gate.known_good_passed}/{gate.known_good_total} passed") for gate in gates
           if gate.known_good_total]


def operation_lines(report: RunReport) -> list[str]:
    """Per row, how many of its operations the judged implementation answers: "ROW: myport: 2/17 operations implemented"."""
    return [f"{row.row}: {row.operations.text}" for row in report.rows if row.operations is not None]


PARTIAL_NOTE = ("partial selection: only the gates selected are shown, each judged on its selected items; no claim is "
                "judged, and a gate run in part is no evidence")


def _unmet(report: RunReport) -> list[str]:
    if report.partial:
        return [*(f"{row.row}::{gate.gate}: {gate.verdict.value}: {gate.reason}" for row in report.rows for gate in row.gates
                  if gate.reason), *(f"{row.row}: {row.claim.reason}" for row in report.rows if not row.gates), PARTIAL_NOTE]
    reasons = []
    for row in report.rows:
        for ms in row.milestones:
            if not ms.claim_met:
                reasons.append(f"{row.row} {ms.milestone}: {ms.reason}")
        if not row.claim.claim_met:
            reasons.append(f"{row.row}: {row.claim.reason}")
        if row.parity is not None and row.parity.met is not True:
            reasons.append(f"{row.row}: upstream {row.parity.claimed}: {row.parity.reason}")
        for gate in row.gates:
            if gate.reason and (gate.verdict.value != "PASS" or not gate.executed):  # a PASS on evidence says which
                reasons.append(f"{row.row}::{gate.gate}: {gate.verdict.value}: {gate.reason}")
    return reasons


def to_json(report: RunReport, exit_code: int, meta: dict[str, Any], evidence: dict[str, Any] | None = None) -> dict[str, Any]:
    """A stable document (docs/evidence.md): rows in roadmap order, gates in file order, items sorted by node id;
    ``evidence``: the run-wide record (implementation, harness, device, the hash of every input)."""
    def verdicts(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: verdicts(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [verdicts(v) for v in obj]
        return obj.value if hasattr(obj, "value") and obj.__class__.__name__ == "Verdict" else obj

    return {
        "schema": RUN_SCHEMA,
        "meta": meta,
        "evidence": evidence or {"impl": "python", "harness": "", "device": None, "simulated": False, "environment": {},
                                 "inputs": {}, "from": []},
        "interrupted": report.interrupted,
        "exit_code": exit_code,
        "checks": report.checks,
        "rows": verdicts([asdict(r) for r in report.rows]),
        "items": [i.to_report() for i in sorted(report.items, key=lambda i: i.nodeid)],
    }


def _umask() -> int:
    """The process's umask, read without changing it where Linux tells it (/proc), else set and restored at once."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def report_mode(path: Path) -> int:
    """The mode a report gets, as if opened for writing the ordinary way: an existing file's mode is kept; a new file
    gets 0666 less the umask (0644 under the usual 022), as pytest's JUnit file does."""
    try:
        info = os.stat(path)
        if stat.S_ISREG(info.st_mode):
            return stat.S_IMODE(info.st_mode)
    except OSError:
        pass
    return 0o666 & ~_umask()


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file in the same folder and rename it over the target, with the mode an ordinarily
    written file would have (report_mode): every report, JSON, Markdown and JUnit, gets the same."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = report_mode(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # 0600 until it is complete
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fchmod(stream.fileno(), mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json(path: Path, report: RunReport, exit_code: int, meta: dict[str, Any], evidence: dict[str, Any] | None = None) -> None:
    write_atomic(path, json.dumps(to_json(report, exit_code, meta, evidence), indent=2, sort_keys=False) + "\n")


def markdown(report: RunReport, exit_code: int) -> str:
    """A GitHub-flavoured summary: a verdict line per row, then the gate table and unmet claims."""
    icon = {"PASS": "✅", "SKIPPED": "⏭️", "UNPROVEN": "❔", "WEAK": "⚠️", "EMPTY": "⬜", "INCOMPLETE": "⏸️", "FAIL": "❌", "ERROR": "💥",
            "NOT-IMPLEMENTED": "🚧"}
    stopped = [f"**interrupted by {report.interrupted}**: the gates below are what ran before it; no claim is met", ""] if report.interrupted else []
    parity = any(row.parity is not None for row in report.rows)  # the upstream column only where a row claims parity
    head = (("| row | verdict | claimed | claim | upstream |", "|---|---|---|---|---|") if parity
            else ("| row | verdict | claimed | claim |", "|---|---|---|---|"))
    lines = [f"## vllm-gates: exit {exit_code}", "", *stopped, *head]
    for row in report.rows:
        met = "not judged" if not row.claim.judged else "met" if row.claim.claim_met else "**not met**"
        lines.append(f"| {row.row} | {icon.get(row.claim.verdict.value, '')} {row.claim.verdict.value} | {row.claim.claimed} | {met} |"
                     + (f" {parity_cell(row) or '-'} |" if parity else ""))
    counts = operation_lines(report)
    if counts:
        lines += ["", *[f"- {one_line(line)}" for line in counts]]
    near_edge = tolerance_lines(report)
    if near_edge:
        lines += ["", near_edge[0], *[f"- {line.strip()}" for line in near_edge[1:]]]
    header, body = _table(report)
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(one_line(cell).replace("|", "\\|") for cell in r) + " |" for r in body]
    reasons = _unmet(report)
    if reasons:
        lines += ["", "### Why", *[f"- {r}" for r in reasons]]
    return "\n".join(lines) + "\n"


def junit_claims(report: RunReport) -> str:
    """JUnit XML with one test case per row and milestone claim, for runs in which pytest collected nothing."""
    from xml.sax.saxutils import quoteattr

    cases = []
    for row in report.rows:
        for claim in (c for c in (*row.milestones, row.claim) if c.judged):
            name = quoteattr(f"{row.row}::{claim.milestone or '(row)'}::claim[{claim.claimed}]")
            properties = "".join(f"<property name={quoteattr(key)} value={quoteattr(value)}/>"
                                 for key, value in tolerance_properties(report, row.row, claim.milestone))
            body = f"<properties>{properties}</properties>" if properties else ""
            if not claim.claim_met:
                body += f"<failure message={quoteattr(f'{claim.verdict.value}: {claim.reason}')}/>"
            cases.append(f'  <testcase classname="vllm-gates" name={name} time="0">{body}</testcase>' if body else
                         f'  <testcase classname="vllm-gates" name={name} time="0"/>')
    failures = sum(c.judged and not c.claim_met for r in report.rows for c in (*r.milestones, r.claim))
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            f'<testsuites><testsuite name="vllm-gates" tests="{len(cases)}" failures="{failures}" errors="0" skipped="0">\n'
            + "\n".join(cases) + "\n</testsuite></testsuites>\n")
