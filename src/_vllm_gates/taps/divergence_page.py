"""A `gates diverge --json` report as a section of `gates report --html` (docs/divergence.md): the classification,
the first divergent token with the reference's top-2 margin, the dtype boundaries, the per-layer plot and the per-tap
table. The report is read defensively: a file that is not a diverge report is refused naming it; a field of the
wrong type shows as a blank; every value is escaped."""
from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from _vllm_gates.base.errors import GatesError
from _vllm_gates.taps.divergence import LOCALIZED_BREAK
from _vllm_gates.taps.divergence_plot import groups, svg
from _vllm_gates.taps.divergence_report import FORMAT

MAX_TAPS = 1000  # table lines; the plot takes every tap
MAX_TEXT = 300
FIGURES = ("max_abs", "rel_l2", "rms", "cosine", "used")
FIGURE_HEADINGS = ("max abs", "rel L2", "RMS", "cosine", "tolerance used")


class DivergeReportRefused(GatesError):
    """A file given as a diverge report that cannot be one: missing, not JSON, another format, no taps."""


@dataclass(frozen=True)
class DivergeReport:
    """A `gates diverge --json` report as read: its name as given and its document."""

    shown: str
    document: dict[str, Any]


def read_diverge_report(path: Path, shown: str) -> DivergeReport:
    """The report at ``path`` (``shown``: as the user named it); DivergeReportRefused naming it and what is wrong."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DivergeReportRefused(f"{shown} does not exist") from None
    except OSError as exc:
        raise DivergeReportRefused(f"{shown} cannot be read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise DivergeReportRefused(f"{shown} is not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise DivergeReportRefused(f"{shown} is not a `gates diverge --json` report: {_format_of(document)}, "
                                   f"expected format {FORMAT!r}")
    taps = document.get("taps")
    if not isinstance(taps, list) or not taps or not all(isinstance(tap, dict) for tap in taps):
        raise DivergeReportRefused(f"{shown}: its \"taps\" is not a non-empty list of taps ({_kind(taps)})")
    if not isinstance(document.get("classification"), dict):
        raise DivergeReportRefused(f"{shown}: its \"classification\" is not an object "
                                   f"({_kind(document.get('classification'))})")
    return DivergeReport(shown, document)


def _format_of(document: Any) -> str:
    if not isinstance(document, dict):
        return f"it holds a JSON {type(document).__name__}"
    if "format" in document:
        return f"its format is {document['format']!r}"
    return f"its schema is {document['schema']!r}" if "schema" in document else "it names no format"


def _kind(value: Any) -> str:
    return "absent" if value is None else f"{type(value).__name__} of {len(value)}" if isinstance(value, list) \
        else type(value).__name__


def _text(value: Any, limit: int = MAX_TEXT) -> str:
    shown = value if isinstance(value, str) else "" if value is None else json.dumps(value)
    return escape(shown if len(shown) <= limit else shown[:limit] + f" … ({len(shown) - limit} more characters)")


def _figure(value: Any) -> str:
    """A number of the report as the text table shows it (3 significant digits); inf, -inf, nan as written."""
    if type(value) in (int, float):
        return f"{value:.3g}"
    return escape(value) if value in ("inf", "-inf", "nan") else ""


def diverge_section(report: DivergeReport, index: int) -> str:
    """One report: what was judged, the classification, the first divergence, the dtype boundaries, the plot and
    the table."""
    doc = report.document
    taps, classification = doc["taps"], doc["classification"]
    broke = classification.get("kind") == LOCALIZED_BREAK
    named = classification.get("tap") if isinstance(classification.get("tap"), str) else None
    tap_names = [tap.get("name") for tap in taps]
    head = (f'<p>{_text(report.shown)}: <b>{_text(doc.get("impl"))}</b> against {_text(doc.get("reference"))}, '
            f'case <code>{_text(doc.get("case"))}</code>, exit {_text(doc.get("exit_code"))}</p>')
    missing = (f'<p class="none">the classification names tap {_text(named)}, which is not among the report\'s taps</p>'
               if named is not None and named not in tap_names else "")
    plot = svg(groups(taps), named if broke else None, None if broke else named)
    return (f'<section id="diverge-{index}" class="diverge"><h2>Divergence: {_text(doc.get("row"))} '
            f'<code>{_text(doc.get("gate"))}</code></h2>{head}{_classification(classification)}{missing}'
            f'{_first_divergence(doc.get("first_divergence"), doc.get("confident_without_break") is True)}'
            f'{_boundaries(doc.get("dtype_boundaries"))}<h3>Per-layer error</h3><figure>{plot}<figcaption>{CAPTION}'
            f'</figcaption></figure><h3>Per tap</h3>{_table(taps, named if broke else None)}</section>')


CAPTION = ("Per layer, the share of its tolerance the worst tap used (over 1 fails): isolated, each sub-block fed the "
           "reference's input, so its own error; accumulated, free-running, everything before it included. Feed "
           "points are left out of the isolated points (they hold what was fed). A dashed red line marks the "
           "localized break's layer; a grey one, in drift, the layer where the accumulated error first crosses "
           "its bound.")


def _classification(classification: dict[str, Any]) -> str:
    kind, tap, layer = classification.get("kind"), classification.get("tap"), classification.get("layer")
    where = f"layer {_text(layer)}" if type(layer) is int else "outside the layers"
    if kind == LOCALIZED_BREAK:
        said = (f'<b>LOCALIZED BREAK</b> at {where}, tap <code>{_text(tap)}</code>: its isolated (teacher-forced) '
                f'error exceeds the tolerance')
    elif kind == "drift":
        crossing = (f"the accumulated error first crosses the bound at <code>{_text(tap)}</code>"
                    + (f" ({where})" if type(layer) is int else "")) if isinstance(tap, str) else \
            "the accumulated error is within bounds throughout"
        said = f"<b>DRIFT</b>, no localized break: every isolated error is within tolerance; {crossing}"
    else:
        said = f"an unknown classification {_text(kind)}"
    report = classification.get("report")
    lines = [line for line in report if isinstance(line, list) and len(line) == 2] if isinstance(report, list) else []
    table = ("<table class=\"numeric\">" + "".join(f"<tr><th>{_text(label)}</th><td>{_text(text)}</td></tr>"
                                                   for label, text in lines) + "</table>") if lines else ""
    css = "break" if kind == LOCALIZED_BREAK else "drift"
    return f'<p class="classification {css}">{said}</p>{table}'


def _first_divergence(first: Any, confident_without_break: bool) -> str:
    if not isinstance(first, dict):
        return '<p class="first-divergence">no logits tap: no token divergence to report</p>'
    positions = _text(first.get("positions"))
    if first.get("position") is None:
        return f'<p class="first-divergence">logits: the argmax agrees at all {positions} positions</p>'
    judged = _text(first.get("judged"))
    said = (f'<p class="first-divergence">logits: first divergent position <b>{_text(first.get("position"))}</b> of '
            f'{positions}: reference id <b>{_text(first.get("reference_id"))}</b>, implementation id '
            f'<b>{_text(first.get("impl_id"))}</b>; the reference\'s top-2 margin there is '
            f'<span class="margin">{_figure(first.get("margin"))}</span>, <span class="judged {judged}">{judged}</span> '
            f'(the band is {_figure(first.get("band"))}, {_text(first.get("band_source"))})</p>')
    if confident_without_break:
        said += ('<p class="confident-without-break">a confident divergence with no localized break: the tokens differ '
                 'where the reference is sure, yet every tap\'s own error is within tolerance</p>')
    return said


def _boundaries(found: Any) -> str:
    entries = [entry for entry in found if isinstance(entry, dict)] if isinstance(found, list) else []
    if not entries:
        return ('<h3>Dtype boundaries</h3><p class="boundaries">none: every tap has the reference\'s dtype (a float64 '
                'reference is the oracle\'s precision and is not compared)</p>')
    items = "".join(f'<li class="{"wider" if entry.get("wider") is True else "narrower"}"><code>{_text(entry.get("tap"))}'
                    f'</code>: {_text(entry.get("dtype"))} where the reference has {_text(entry.get("reference_dtype"))}: '
                    + (f'{_text(entry.get("extra_bytes"))} bytes more' if entry.get("wider") is True else
                       '<b>likely break</b>') + '</li>' for entry in entries)
    return f'<h3>Dtype boundaries</h3><ul class="boundaries">{items}</ul>'


def _table(taps: list[dict[str, Any]], break_tap: str | None) -> str:
    heads = "".join(f"<th>{heading}</th>" for heading in FIGURE_HEADINGS)
    rows = []
    for tap in taps[:MAX_TAPS]:
        dtype, reference = tap.get("dtype"), tap.get("reference_dtype")
        shown = _text(dtype) + (f" (ref {_text(reference)})" if reference != dtype else "")
        cells = "".join(f"<td>{_figure(tap[side].get(figure) if isinstance(tap.get(side), dict) else None)}</td>"
                        for side in ("isolated", "accumulated") for figure in FIGURES)
        written = tap.get("verdict")
        verdict = written if isinstance(written, str) else ""
        css = ' class="break"' if break_tap is not None and tap.get("name") == break_tap else ""
        rows.append(f'<tr{css}><td><code>{_text(tap.get("name"))}</code></td><td>{shown}</td>'
                    f'<td>{_text(tap.get("tolerance"))}</td>{cells}<td><span class="tv tv-{escape(verdict.split(",")[0])}">'
                    f'{escape(verdict)}</span></td></tr>')
    cut = (f'<p class="cut">{len(taps) - MAX_TAPS} more taps not shown (first {MAX_TAPS} of {len(taps)})</p>'
           if len(taps) > MAX_TAPS else "")
    return (f'<table class="taps"><tr><th rowspan="2">tap</th><th rowspan="2">dtype</th><th rowspan="2">tolerance</th>'
            f'<th colspan="5">isolated (teacher-forced)</th><th colspan="5">accumulated (free-running)</th>'
            f'<th rowspan="2">verdict</th></tr><tr>{heads}{heads}</tr>{"".join(rows)}</table>{cut}')


STYLE = """
section.diverge figure{margin:.4em 0}section.diverge figcaption{color:#555;max-width:760px}
p.classification.break{background:#f6c0c0;padding:2px 6px}p.classification.drift{background:#c8f0c8;padding:2px 6px}
table.taps td{font-variant-numeric:tabular-nums;white-space:nowrap}table.taps tr.break td{background:#f6c0c0}
.tv{font-weight:bold}.tv-BREAK,.tv-FAIL{color:#a11}.tv-over{color:#a60}.tv-fed{color:#555;font-weight:normal}
ul.boundaries li.narrower{color:#a11}
"""
