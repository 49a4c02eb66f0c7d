"""The per-layer error plot of a `gates diverge` report (docs/divergence.md): per layer, the share of its tolerance
the worst tap used, isolated (teacher-forced) and accumulated (free-running), on a log scale against the tolerance
band (used <= 1), the break's layer marked; an inline SVG, nothing fetched, every text escaped."""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any

WIDTH, HEIGHT = 760, 340
LEFT, RIGHT = 70, 20
NOT_FINITE_Y, LOG_TOP, LOG_BOTTOM, ZERO_Y = 50.0, 72.0, 272.0, 292.0  # rows above and below the log area
MAX_LABELS = 24  # more groups than this: every k-th is labelled
MAX_DECADE_TICKS = 12  # more decades than this: a tick every k decades
SERIES = ("accumulated", "isolated")  # drawn in this order: the isolated points on top


@dataclass(frozen=True)
class Point:
    """The worst share of the tolerance one comparison used in a group, and the tap that used it."""

    used: float  # may be inf or nan (the report's non-finite strings)
    tap: str


@dataclass(frozen=True)
class TapGroup:
    """A run of consecutive taps of one layer (``layer`` None: taps outside the layers, such as the embedding or the
    logits, labelled by the run's first tap), with its worst isolated (feed points aside: they hold what was fed) and
    accumulated points; a point is None where no tap of the run reports a number."""

    label: str
    layer: int | None
    taps: tuple[str, ...]
    isolated: Point | None
    accumulated: Point | None


def used_of(value: Any) -> float | None:
    """A share of the tolerance as the JSON report writes it: a number, or `inf` / `nan`; None for anything else."""
    if type(value) in (int, float):
        return float(value)
    return float(value) if value in ("inf", "nan") else None


def groups(taps: list[dict[str, Any]]) -> tuple[TapGroup, ...]:
    """The report's taps (forward order) as runs of one layer each, with each run's worst isolated and accumulated
    share of the tolerance used."""
    runs: list[list[dict[str, Any]]] = []
    for tap in taps:
        layer = _layer(tap)
        if runs and _layer(runs[-1][0]) == layer:
            runs[-1].append(tap)
        else:
            runs.append([tap])
    return tuple(_group(run) for run in runs)


def _layer(tap: dict[str, Any]) -> int | None:
    layer = tap.get("layer")
    return layer if type(layer) is int else None


def _group(run: list[dict[str, Any]]) -> TapGroup:
    names = tuple(str(tap.get("name")) for tap in run)
    layer = _layer(run[0])
    own = [tap for tap in run if tap.get("feed_point") is not True]
    label = str(layer) if layer is not None else names[0] + ("…" if len(names) > 1 else "")
    return TapGroup(label, layer, names,
                 _worst(own, "isolated"), _worst(run, "accumulated"))


def _worst(run: list[dict[str, Any]], comparison: str) -> Point | None:
    """The largest share among the run's taps (inf and nan above every number); taps without a number left out."""
    found = []
    for tap in run:
        judged = tap.get(comparison)
        used = used_of(judged.get("used")) if isinstance(judged, dict) else None
        if used is not None:
            found.append(Point(used, str(tap.get("name"))))
    return max(found, key=lambda point: (not math.isfinite(point.used), point.used if math.isfinite(point.used) else 0.0),
               default=None)


@dataclass(frozen=True)
class LogScale:
    """Decades ``low`` to ``high`` (10**low at LOG_BOTTOM, 10**high at LOG_TOP); 0 on its own row below, inf and
    nan on a row above."""

    low: int
    high: int

    def y(self, used: float) -> float:
        if not math.isfinite(used):
            return NOT_FINITE_Y
        if used <= 0.0:
            return ZERO_Y
        share = (math.log10(used) - self.low) / (self.high - self.low)
        return LOG_BOTTOM - share * (LOG_BOTTOM - LOG_TOP)


def scale_for(found: tuple[TapGroup, ...]) -> LogScale:
    """The decades that hold every finite positive point, the tolerance (1) and a decade above it."""
    values = [point.used for group in found for point in (group.isolated, group.accumulated)
              if point is not None and math.isfinite(point.used) and point.used > 0.0] + [1.0, 10.0]
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    return LogScale(low, high)


def x_of(index: int, count: int) -> float:
    return LEFT + (index + 0.5) * (WIDTH - LEFT - RIGHT) / count


def svg(found: tuple[TapGroup, ...], break_tap: str | None, crossing_tap: str | None) -> str:
    """The plot: the tolerance band, a line and points per series, the break's group marked (``break_tap``), and the
    group where the accumulated error first crosses its bound (``crossing_tap``, drift) marked apart."""
    scale = scale_for(found)
    right = WIDTH - RIGHT
    parts = [f'<rect class="band" x="{LEFT}" y="{scale.y(1.0):.2f}" width="{right - LEFT}" '
             f'height="{ZERO_Y - scale.y(1.0):.2f}" fill="#e4f4e4"><title>within tolerance: used at most 1</title></rect>']
    parts += _y_axis(scale, right)
    parts += _x_axis(found)
    parts += _marker("crossing-marker", found, crossing_tap, "#777", "accumulated crosses")
    parts += _marker("break-marker", found, break_tap, "#c82828", "break")
    for series in SERIES:
        parts += _series(series, found, scale)
    parts += _legend()
    title = (f"the share of its tolerance each layer's worst tap used, isolated and accumulated, on a log scale "
             f"(10^{scale.low} to 10^{scale.high}); over 1 fails")
    return (f'<svg class="layer-plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}" '
            f'data-low-decade="{scale.low}" data-high-decade="{scale.high}"><title>{escape(title)}</title>'
            f'{"".join(parts)}</svg>')


def _y_axis(scale: LogScale, right: int) -> list[str]:
    step = max(1, math.ceil((scale.high - scale.low) / MAX_DECADE_TICKS))
    parts = []
    for decade in range(scale.low, scale.high + 1, step):
        y = scale.y(10.0 ** decade)
        parts.append(f'<line class="tick" data-decade="{decade}" x1="{LEFT}" x2="{right}" y1="{y:.2f}" y2="{y:.2f}" '
                     f'stroke="#ddd"/><text x="{LEFT - 6}" y="{y + 4:.2f}" text-anchor="end" font-size="11">'
                     f'{10 ** decade if decade in (0, 1) else f"1e{decade}"}</text>')
    one = scale.y(1.0)
    parts.append(f'<line class="tolerance" x1="{LEFT}" x2="{right}" y1="{one:.2f}" y2="{one:.2f}" stroke="#2a7d2a" '
                 f'stroke-width="1.5"/><text x="{right - 4}" y="{one - 4:.2f}" text-anchor="end" font-size="11" '
                 f'fill="#2a7d2a">tolerance (used = 1)</text>')
    for y, label, row in ((NOT_FINITE_Y, "inf/nan", "not-finite-row"), (ZERO_Y, "0", "zero-row")):
        parts.append(f'<line class="{row}" x1="{LEFT}" x2="{right}" y1="{y}" y2="{y}" stroke="#ccc" '
                     f'stroke-dasharray="2 3"/><text x="{LEFT - 6}" y="{y + 4}" text-anchor="end" font-size="11">{label}</text>')
    parts.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{NOT_FINITE_Y}" y2="{ZERO_Y}" stroke="#888"/>'
                 f'<text transform="translate(14 {(LOG_TOP + LOG_BOTTOM) / 2}) rotate(-90)" text-anchor="middle" '
                 f'font-size="11">share of tolerance used</text>')
    return parts


def _x_axis(found: tuple[TapGroup, ...]) -> list[str]:
    step = max(1, math.ceil(len(found) / MAX_LABELS))
    parts = [f'<text class="group-label" x="{x_of(index, len(found)):.2f}" y="{ZERO_Y + 20}" text-anchor="middle" '
             f'font-size="11">{escape(group.label[:14])}</text>'
             for index, group in enumerate(found) if index % step == 0 or index == len(found) - 1]
    parts.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 6}" text-anchor="middle" font-size="11">'
                 f'layer (taps outside the layers: by their first tap)</text>')
    return parts


def _marker(kind: str, found: tuple[TapGroup, ...], tap: str | None, colour: str, said: str) -> list[str]:
    """A vertical line at the group holding ``tap``; nothing where no tap is named or none holds it."""
    index = next((index for index, group in enumerate(found) if tap is not None and tap in group.taps), None)
    if index is None:
        return []
    x, group = x_of(index, len(found)), found[index]
    layer = "" if group.layer is None else f' data-layer="{group.layer}"'
    return [f'<g class="{kind}" data-tap="{escape(str(tap))}"{layer}><line x1="{x:.2f}" x2="{x:.2f}" '
            f'y1="{NOT_FINITE_Y - 14}" y2="{ZERO_Y}" stroke="{colour}" stroke-width="1.5" stroke-dasharray="5 3"/>'
            f'<text x="{x + 4 if x < WIDTH / 2 else x - 4:.2f}" y="{NOT_FINITE_Y - 16}" font-size="11" fill="{colour}" '
            f'text-anchor="{"start" if x < WIDTH / 2 else "end"}">{escape(said)}: '
            f'{escape(str(tap)[:40])}</text></g>']


def _series(series: str, found: tuple[TapGroup, ...], scale: LogScale) -> list[str]:
    colour, radius, fill = ("#1f5fbf", 3.5, "#1f5fbf") if series == "isolated" else ("#e07b00", 5.5, "none")
    points = [(index, point) for index, group in enumerate(found)
              if (point := getattr(group, series)) is not None]
    line = " ".join(f"{x_of(index, len(found)):.2f},{scale.y(point.used):.2f}" for index, point in points)
    parts = [f'<polyline class="{series}-line" points="{line}" fill="none" stroke="{colour}" stroke-width="1.2"/>']
    for index, point in points:
        group = found[index]
        layer = "" if group.layer is None else f' data-layer="{group.layer}"'
        parts.append(f'<circle class="point {series}" data-group="{index}"{layer} data-tap="{escape(point.tap)}" '
                     f'data-used="{point.used!r}" cx="{x_of(index, len(found)):.2f}" cy="{scale.y(point.used):.2f}" '
                     f'r="{radius}" fill="{fill}" stroke="{colour}" stroke-width="1.5"><title>{escape(group.label)} '
                     f'{series}: {escape(point.tap)} used {point.used:.3g} of its tolerance</title></circle>')
    return parts


def _legend() -> list[str]:
    return [f'<circle cx="{LEFT + 8}" cy="14" r="3.5" fill="#1f5fbf"/><text x="{LEFT + 16}" y="18" font-size="11">'
            f'isolated (teacher-forced): the layer\'s own error</text>'
            f'<circle cx="{LEFT + 318}" cy="14" r="5.5" fill="none" stroke="#e07b00" stroke-width="1.5"/>'
            f'<text x="{LEFT + 328}" y="18" font-size="11">accumulated (free-running)</text>'
            f'<rect x="{LEFT + 502}" y="8" width="12" height="12" fill="#e4f4e4"/>'
            f'<text x="{LEFT + 518}" y="18" font-size="11">within tolerance</text>']
