"""A localization rendered (docs/divergence.md): the per-tap table and the classification as text, and the JSON
report (`vllm-gates/diverge/1`)."""
from __future__ import annotations

import math
from typing import Any

from _vllm_gates.taps.divergence import Divergence, Judged, TapJudgement
from _vllm_gates.taps.divergence_shrink import Shrunk, tokens

FORMAT = "vllm-gates/diverge/1"
HEADINGS = ("tap", "dtype", "isolated max abs", "isolated rel L2", "accumulated max abs", "accumulated rel L2",
            "tolerance used", "verdict")


def verdict(tap: TapJudgement, divergence: Divergence) -> str:
    """One tap's verdict: BREAK (the localized break), fed (a feed point: the teacher-forced run fed it), FAIL
    (its isolated error fails after the break), over (its own error within tolerance, the accumulated error not),
    ok."""
    over = "" if tap.accumulated.passed else ", accumulated over"
    if divergence.broke and divergence.classification.tap == tap.name:
        return "BREAK"
    if tap.feed_point:
        return f"fed{over}"
    if not tap.isolated.passed:
        return f"FAIL{over}"
    return "over" if over else "ok"


def render_text(divergence: Divergence, title: str) -> str:
    """The tolerances, the table (the share of its tolerance each comparison used: isolated / accumulated, over 1
    fails), then the classification with its numeric report, the first divergent logits position and the dtype
    boundaries."""
    rows = [HEADINGS] + [(tap.name, tap.dtype if tap.dtype == tap.reference_dtype else f"{tap.dtype} (ref {tap.reference_dtype})",
                          _number(tap.isolated.figures.max_abs), _number(tap.isolated.figures.rel_l2),
                          _number(tap.accumulated.figures.max_abs), _number(tap.accumulated.figures.rel_l2),
                          f"{_number(tap.isolated.used)} / {_number(tap.accumulated.used)}", verdict(tap, divergence))
                         for tap in divergence.taps]
    widths = [max(len(row[column]) for row in rows) for column in range(len(HEADINGS))]
    tolerances = list(dict.fromkeys(tap.tolerance for tap in divergence.taps))
    lines = [title, f"tolerance: {'; '.join(tolerances)}", ""]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines += ["", divergence.classification.describe()]
    if divergence.classification.ranks is not None:
        lines.append(f"  ranks: {divergence.classification.ranks.text}")
    lines += [f"  {label}: {text}" for label, text in divergence.classification.report]
    if divergence.first_divergence is not None:
        lines.append(divergence.first_divergence.describe())
    if divergence.confident_without_break:
        lines.append("a confident divergence with no localized break: the tokens differ where the reference is sure, yet "
                     "every tap's own error is within tolerance (accumulated error, or a tolerance too loose to localize it)")
    if divergence.boundaries:
        lines.append("dtype boundaries:")
        lines += [f"  {boundary.describe()}" for boundary in divergence.boundaries]
    return "\n".join(lines) + "\n"


def render_shrink(shrunk: Shrunk, full: Divergence) -> str:
    """The shrinking of a localized break: each candidate run and what it showed, then the minimal reproduction with
    its break's isolated figures; nothing where the full run has no break."""
    if not full.broke:
        return ""
    lines = []
    if shrunk.sought:
        lines.append(f"shrinking: {len(shrunk.runs)} runs (at most {shrunk.max_runs}), the reference re-run on each")
        lines += [f"  {_layers(run.layers)}, {_prompt(run.tokens)}: {run.outcome}: {run.text}" for run in shrunk.runs]
        lines += [f"  {note}" for note in shrunk.notes]
    lines.append(shrunk.describe())
    broken = _broken_tap(shrunk)
    if broken is not None:
        figures = broken.isolated.figures
        lines.append(f"  isolated max abs {_number(figures.max_abs)}, rel L2 {_number(figures.rel_l2)}, tolerance used "
                     f"{_number(broken.isolated.used)}")
    return "\n".join(lines) + "\n"


def _layers(count: int | None) -> str:
    return f"{count} layers" if count is not None else "the case's layers"


def _prompt(count: int | None) -> str:
    return tokens(count) if count is not None else "the case's prompt"


def _broken_tap(shrunk: Shrunk) -> TapJudgement | None:
    """The minimal reproduction's broken tap, None where none was sought."""
    if shrunk.divergence is None:
        return None
    return next(tap for tap in shrunk.divergence.taps if tap.name == shrunk.divergence.classification.tap)


def shrink_as_json(shrunk: Shrunk) -> dict[str, Any]:
    """The shrinking in the JSON report: whether it was sought (else why not), the full run's size, the minimal
    reproduction (its layers, prompt ids, the break and its isolated figures) and every candidate run."""
    broken = _broken_tap(shrunk)
    minimal = None
    if broken is not None:
        assert shrunk.divergence is not None
        minimal = {"layers": shrunk.layers, "tokens": len(shrunk.ids) if shrunk.ids is not None else None,
                   "ids": list(shrunk.ids) if shrunk.ids is not None else None,
                   "tap": broken.name, "layer": broken.layer, "classification": shrunk.divergence.classification.kind,
                   "isolated": _judged(broken.isolated)}
    return {"sought": shrunk.sought, "reason": shrunk.reason,
            "full": {"layers": shrunk.full_layers, "tokens": len(shrunk.full_ids) if shrunk.full_ids is not None else None},
            "minimal": minimal, "max_runs": shrunk.max_runs,
            "runs": [{"layers": run.layers, "tokens": run.tokens, "outcome": run.outcome, "text": run.text}
                     for run in shrunk.runs],
            "notes": list(shrunk.notes), "text": shrunk.describe()}


def _number(value: float) -> str:
    return f"{value:.3g}"


def as_json(divergence: Divergence, context: dict[str, Any]) -> dict[str, Any]:
    """The JSON report: ``context`` (row, gate, case, impl, reference), every tap's figures and verdicts, the
    classification, the first divergence and the dtype boundaries; non-finite numbers as the strings inf, -inf, nan."""
    first = divergence.first_divergence
    return {
        "format": FORMAT, **context,
        "taps": [{"name": tap.name, "dtype": tap.dtype, "reference_dtype": tap.reference_dtype, "shape": list(tap.shape),
                  "layer": tap.layer, "feed_point": tap.feed_point, "tolerance": tap.tolerance,
                  "verdict": verdict(tap, divergence),
                  "isolated": _judged(tap.isolated), "accumulated": _judged(tap.accumulated)} for tap in divergence.taps],
        "classification": {"kind": divergence.classification.kind, "tap": divergence.classification.tap,
                           "layer": divergence.classification.layer, "rank": divergence.classification.rank,
                           "ranks": None if divergence.classification.ranks is None else
                           divergence.classification.ranks.text, "text": divergence.classification.describe(),
                           "report": [list(line) for line in divergence.classification.report]},
        "first_divergence": None if first is None else {
            "positions": first.positions, "position": first.position,
            "reference_id": first.reference_id if first.position is not None else None,
            "impl_id": first.impl_id if first.position is not None else None,
            "margin": _finite(first.margin) if first.position is not None else None,
            "band": _finite(first.band), "band_source": first.band_source,
            "judged": None if first.position is None else ("near-tie" if first.near_tie else "confident"),
            "text": first.describe()},
        "confident_without_break": divergence.confident_without_break,
        "dtype_boundaries": [{"tap": b.tap, "dtype": b.dtype, "reference_dtype": b.reference_dtype, "wider": b.wider,
                              "extra_bytes": b.extra_bytes, "text": b.describe()} for b in divergence.boundaries],
    }


def _judged(judged: Judged) -> dict[str, Any]:
    found = judged.figures
    return {"max_abs": _finite(found.max_abs), "rms": _finite(found.rms), "rel_l2": _finite(found.rel_l2),
            "cosine": _finite(found.cosine), "non_finite": found.non_finite, "passed": judged.passed,
            "used": _finite(judged.used)}


def _finite(value: float) -> float | str:
    return value if math.isfinite(value) else ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
