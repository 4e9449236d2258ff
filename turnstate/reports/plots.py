"""The reports' plots, drawn here as inline SVG: a page that needs no network, no script and no
plotting library, and reads the same offline, in a browser from a distro's packages, years later.

Three kinds, each a function of plain numbers that returns one `<svg>` element with the id it is
given (a test finds a plot by it):
- `timeline`: values per turn (areas or lines) on a shared turn axis, with point markers in a strip
  above the plot (retries, faults) and vertical lines across it (compactions, resumes);
- `interval_bars`: one row per label, a value with its interval (success rates, differences);
- `strips`: one row per label, one dot per run and the mean as a tick (tokens, cost, turns).
Every text is escaped here, so a caller may pass any label; every mark carries a `<title>`, which a
browser shows on hover, so a reader can get any plotted number without a script.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

FONT = 12  # px; the label widths below assume about 0.6 em per character
CHAR = FONT * 0.6
LABELS_MAX = 460  # px: the widest label column; a longer label is cut, whole in its tooltip
WIDTH = 1100  # px: every plot's width in the viewBox; the page scales it to fit

BLACK, BLUE, LIGHT_BLUE, ORANGE, RED, YELLOW, GREEN, PURPLE, GREY = (
    "#222222",
    "#4c78a8",
    "#9ecae9",
    "#f58518",
    "#e45756",
    "#d4a017",
    "#54a24b",
    "#b279a2",
    "#888888",
)


@dataclass(frozen=True)
class Series:
    """Values per turn: a filled area (drawn first, in the order given) or a line."""

    name: str
    values: Sequence[float]
    colour: str
    area: bool = False


@dataclass(frozen=True)
class Marker:
    """A point event at a turn, in its kind's row of the strip above the plot."""

    x: int
    kind: str
    colour: str
    note: str


@dataclass(frozen=True)
class Rule:
    """A vertical line across the plot at a turn: something that changed from there on."""

    x: int
    kind: str
    colour: str
    note: str


def number(value: float) -> str:
    """A compact figure for an axis or a label: 950, 12.3k, 4.1M, 0.0042."""
    if value == 0:
        return "0"
    size = abs(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if size >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}" if size >= 0.01 else f"{value:.2g}"


def ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round values from `low` to at least `high`, about `count` of them (1, 2 or 5 times a power of ten apart)."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(factor * power for factor in (1, 2, 5, 10) if factor * power >= raw)
    first = math.floor(low / step) * step
    values = [first]
    while values[-1] < high - step * 1e-9:
        values.append(first + step * len(values))
    return [round(value, 12) for value in values]


def _svg(svg_id: str, title: str, height: float, body: list[str]) -> str:
    return (
        f'<svg id="{escape(svg_id)}" class="plot" viewBox="0 0 {WIDTH} {height:.0f}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="{FONT}">'
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "start", **attributes: str) -> str:
    extra = "".join(f' {key.replace("_", "-")}="{escape(value)}"' for key, value in attributes.items())
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def _tip(note: str) -> str:
    return f"<title>{escape(note)}</title>"


def _legend(entries: Sequence[tuple[str, str, str]], x: float, y: float) -> list[str]:
    """Entries (name, colour, shape: "area", "line", "dot", "rule", "tick") in a row from (x, y)."""
    body = []
    for name, colour, shape in entries:
        if shape == "area":
            body.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="14" height="10" fill="{colour}"/>')
        elif shape == "tick":
            body.append(
                f'<line x1="{x + 7:.1f}" y1="{y - 10:.1f}" x2="{x + 7:.1f}" y2="{y + 2:.1f}" stroke="{colour}" stroke-width="2"/>'
            )
        elif shape == "dot":
            body.append(f'<circle cx="{x + 7:.1f}" cy="{y - 4:.1f}" r="4.5" fill="{colour}"/>')
        else:
            dash = ' stroke-dasharray="4 3"' if shape == "rule" else ""
            body.append(
                f'<line x1="{x:.1f}" y1="{y - 4:.1f}" x2="{x + 14:.1f}" y2="{y - 4:.1f}" stroke="{colour}" stroke-width="2"{dash}/>'
            )
        body.append(_text(x + 19, y, name))
        x += 19 + len(name) * CHAR + 18
    return body


def timeline(
    svg_id: str,
    title: str,
    turns: Sequence[int],
    series: Sequence[Series],
    *,
    markers: Sequence[Marker] = (),
    rules: Sequence[Rule] = (),
    y_label: str = "",
    hover: Callable[[int], str] | None = None,
    height: float = 240,
    x_range: tuple[int, int] | None = None,
) -> str:
    """Values per turn, `turns` the x of each value (a run's step numbers, gaps allowed). The strip
    above the plot holds one row per marker kind (and per rule kind, past RULES_MAX rules); `hover(i)`
    is the tooltip of the i-th turn's column. The x axis spans every turn, marker and rule, and
    `x_range` (plots stacked on one turn axis pass the same)."""
    dense = len(rules) > RULES_MAX
    kinds = list(dict.fromkeys(marker.kind for marker in markers))
    rows = kinds + list(dict.fromkeys(rule.kind for rule in rules if dense))
    legend_y, strip_top = 16.0, 30.0
    top = strip_top + 14 * len(rows) + (8 if rows else 0)
    left, right, bottom = 64.0, WIDTH - 16.0, top + height
    xs = [*turns, *(marker.x for marker in markers), *(rule.x for rule in rules), *(x_range or ())]
    first, last = (min(xs), max(xs)) if xs else (1, 1)
    span = max(last - first, 1)
    pad = 0.5 if last - first < 40 else 0.0  # a few turns: half a turn of room either side

    def x_of(turn: float) -> float:
        return left + (turn - first + pad) / (span + 2 * pad) * (right - left)

    highest = max((value for one in series for value in one.values), default=0.0)
    y_ticks = ticks(0, highest or 1)
    y_top = y_ticks[-1]

    def y_of(value: float) -> float:
        return bottom - value / y_top * (bottom - top)

    body = [f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="#fafafa"/>']
    for tick in y_ticks:
        y = y_of(tick)
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        body.append(_text(left - 6, y + 4, number(tick), "end", fill="#555"))
    for tick in ticks(first, last, 10):
        if first <= tick <= last and tick == int(tick):
            x = x_of(tick)
            body.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" stroke="#555"/>')
            body.append(_text(x, bottom + 17, str(int(tick)), "middle", fill="#555"))
    body.append(_text((left + right) / 2, bottom + 34, "turn (step)", "middle", fill="#333"))
    if y_label:
        body.append(
            _text(14, (top + bottom) / 2, y_label, "middle", transform=f"rotate(-90 14 {(top + bottom) / 2:.1f})")
        )
    for one in sorted(series, key=lambda one: not one.area):
        points = " ".join(f"{x_of(turn):.1f},{y_of(value):.1f}" for turn, value in zip(turns, one.values, strict=True))
        if one.area and turns:
            base = f"{x_of(turns[-1]):.1f},{bottom} {x_of(turns[0]):.1f},{bottom}"
            body.append(
                f'<polygon points="{points} {base}" fill="{one.colour}" fill-opacity="0.85">{_tip(one.name)}</polygon>'
            )
        elif turns:
            body.append(
                f'<polyline points="{points}" fill="none" stroke="{one.colour}" stroke-width="2">{_tip(one.name)}</polyline>'
            )
            if len(turns) <= 60:
                body += [
                    f'<circle cx="{x_of(turn):.1f}" cy="{y_of(value):.1f}" r="2.5" fill="{one.colour}"/>'
                    for turn, value in zip(turns, one.values, strict=True)
                ]
    for rule in () if dense else rules:
        x = x_of(rule.x)
        body.append(
            f'<line x1="{x:.1f}" y1="{strip_top - 4}" x2="{x:.1f}" y2="{bottom}" stroke="{rule.colour}" '
            f'stroke-width="1.5" stroke-dasharray="4 3">{_tip(rule.note)}</line>'
        )
    for row, kind in enumerate(rows):  # the legend names each row's kind by its colour
        y = strip_top + 14 * row + 4
        body += [
            f'<circle cx="{x_of(marker.x):.1f}" cy="{y:.1f}" r="4.5" fill="{marker.colour}">{_tip(marker.note)}</circle>'
            for marker in markers
            if marker.kind == kind
        ]
        body += [
            f'<line x1="{x_of(rule.x):.1f}" y1="{y - 6:.1f}" x2="{x_of(rule.x):.1f}" y2="{y + 6:.1f}" '
            f'stroke="{rule.colour}" stroke-width="2">{_tip(rule.note)}</line>'
            for rule in rules
            if dense and rule.kind == kind
        ]
    if hover is not None and turns:
        width = max((right - left) / (span + 2 * pad), 1.0)
        body += [
            f'<rect x="{x_of(turn) - width / 2:.1f}" y="{top}" width="{width:.1f}" height="{bottom - top}" '
            f'fill="transparent">{_tip(hover(index))}</rect>'
            for index, turn in enumerate(turns)
        ]
    shapes = [(one.name, one.colour, "area" if one.area else "line") for one in series]
    shapes += [(kind, next(m.colour for m in markers if m.kind == kind), "dot") for kind in kinds]
    shapes += [
        (kind, colour, "tick" if dense else "rule") for kind, colour in dict.fromkeys((r.kind, r.colour) for r in rules)
    ]
    body += _legend(shapes, left, legend_y)
    return _svg(svg_id, title, bottom + 44, body)


def _label_column(labels: Sequence[str]) -> float:
    return min(max((len(label) for label in labels), default=0) * CHAR + 16, LABELS_MAX)


def _row_label(label: str, x: float, y: float, width: float) -> str:
    """A row's label, right-aligned at `x`, cut to fit `width` (its whole text in a tooltip)."""
    fits = max(round((width - 16) / CHAR), 4)
    shown = label if len(label) <= fits else label[: fits - 1] + "…"
    return f"<g>{_tip(label)}{_text(x, y, shown, 'end')}</g>"


def _axis(
    low: float, high: float, left: float, right: float, top: float, bottom: float, show: Callable[[float], str]
) -> tuple[Callable[[float], float], list[str]]:
    """A horizontal value axis under rows: its scale and its grid, labels and frame."""
    values = ticks(low, high)
    low, high = min(low, values[0]), max(high, values[-1])

    def x_of(value: float) -> float:
        return left + (value - low) / (high - low) * (right - left)

    body = []
    for value in values:
        x = x_of(value)
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#e3e3e3"/>')
        body.append(_text(x, bottom + 16, show(value), "middle", fill="#555"))
    return x_of, body


ROW = 30.0  # px per label row
RULES_MAX = 40
"""More lines than this across a timeline would hide it: they are drawn as ticks in the strip above instead."""


def interval_bars(
    svg_id: str,
    title: str,
    labels: Sequence[str],
    values: Sequence[float | None],
    intervals: Sequence[tuple[float, float] | None],
    *,
    domain: tuple[float, float] = (0.0, 1.0),
    show: Callable[[float], str] = lambda value: f"{value:.0%}",
    bars: bool = True,
    axis_label: str = "",
) -> str:
    """One row per label: the value as a bar from the domain's start (or, without `bars`, a dot),
    its interval as a whisker, and the figures at the right. A zero inside the domain is drawn. A
    row without a value (no run ended) has only its label and "no value"."""
    left = _label_column(labels)
    right = WIDTH - 190.0
    top, bottom = 10.0, 10.0 + ROW * len(labels)
    x_of, body = _axis(*domain, left, right, top, bottom, show)
    if domain[0] < 0 < domain[1]:
        body.append(f'<line x1="{x_of(0):.1f}" y1="{top}" x2="{x_of(0):.1f}" y2="{bottom}" stroke="#333"/>')
    for row, (label, value, interval) in enumerate(zip(labels, values, intervals, strict=True)):
        middle = top + ROW * row + ROW / 2
        body.append(_row_label(label, left - 8, middle + 4, left))
        if value is None:
            body.append(_text(right + 12, middle + 4, "no value", fill="#888"))
            continue
        figures = show(value) + (f"  [{show(interval[0])}, {show(interval[1])}]" if interval else "")
        tip = _tip(f"{label}: {figures}")
        if bars:
            start = x_of(max(domain[0], 0))
            body.append(
                f'<rect x="{min(start, x_of(value)):.1f}" y="{middle - 8:.1f}" width="{abs(x_of(value) - start):.1f}" '
                f'height="16" fill="{LIGHT_BLUE}">{tip}</rect>'
            )
        if interval is not None:
            low, high = x_of(interval[0]), x_of(interval[1])
            body.append(
                f'<path d="M{low:.1f},{middle:.1f}H{high:.1f}M{low:.1f},{middle - 6:.1f}V{middle + 6:.1f}'
                f'M{high:.1f},{middle - 6:.1f}V{middle + 6:.1f}" stroke="#222" stroke-width="1.5" fill="none">{tip}</path>'
            )
        body.append(f'<circle cx="{x_of(value):.1f}" cy="{middle:.1f}" r="4" fill="{BLUE}">{tip}</circle>')
        body.append(_text(right + 12, middle + 4, figures))
    if axis_label:
        body.append(_text((left + right) / 2, bottom + 34, axis_label, "middle", fill="#333"))
    return _svg(svg_id, title, bottom + 44, body)


def strips(
    svg_id: str,
    title: str,
    labels: Sequence[str],
    values: Sequence[Sequence[float]],
    *,
    show: Callable[[float], str] = number,
    axis_label: str = "",
    colour: str = BLUE,
) -> str:
    """One row per label: each of its values a dot (spread over the row's height so that equal values
    stay countable), the mean a dark tick with its figure at the right."""
    left = _label_column(labels)
    right = WIDTH - 120.0
    top, bottom = 10.0, 10.0 + ROW * len(labels)
    highest = max((value for row in values for value in row), default=0.0)
    x_of, body = _axis(0.0, highest or 1.0, left, right, top, bottom, show)
    for row, (label, points) in enumerate(zip(labels, values, strict=True)):
        middle = top + ROW * row + ROW / 2
        body.append(_row_label(label, left - 8, middle + 4, left))
        for index, value in enumerate(points):
            offset = ((index * 7) % 11 - 5) * 1.6  # a fixed spread: the page is the same every time
            body.append(
                f'<circle cx="{x_of(value):.1f}" cy="{middle + offset:.1f}" r="4" fill="{colour}" '
                f'fill-opacity="0.6">{_tip(f"{label}: {show(value)}")}</circle>'
            )
        if points:
            mean = sum(points) / len(points)
            body.append(
                f'<line x1="{x_of(mean):.1f}" y1="{middle - 11:.1f}" x2="{x_of(mean):.1f}" y2="{middle + 11:.1f}" '
                f'stroke="#222" stroke-width="2.5">{_tip(f"{label}: mean {show(mean)} over {len(points)} runs")}</line>'
            )
            body.append(_text(right + 12, middle + 4, f"mean {show(mean)}"))
    if axis_label:
        body.append(_text((left + right) / 2, bottom + 34, axis_label, "middle", fill="#333"))
    return _svg(svg_id, title, bottom + 44, body)
