"""Inline SVG charts drawn in Python: the HTML report is one file that opens offline, so no chart library.

Each mark carries its numbers in data-* attributes and a <title> tooltip (tests and readers can check what is
drawn). Every piece of text is escaped: category names come from scenario files and run names from users.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from services.consumers.report.stats import Histogram

WIDTH, HEIGHT = 520, 280
LEFT, RIGHT, TOP, BOTTOM = 48, 16, 44, 72  # the title and the legend sit above TOP
LEGEND_CHAR_PX = 6.0  # width of a legend character at 10px, generously
COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759")


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]  # bar charts: one per category
    color: str | None = None  # default: the palette in order
    intervals: Sequence[Sequence[float] | None] = ()  # each value's 95 % [lo, hi]: an error bar


@dataclass(frozen=True)
class Curve:
    name: str
    points: Sequence[tuple[float, float]]
    intervals: Sequence[Sequence[float] | None] = ()  # each point's 95 % [lo, hi]: an error bar


def _num(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def _open(title: str, kind: str, height: int = HEIGHT) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{escape(kind)}" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" aria-label="{escape(title)}">',
        f'<text class="chart-title" x="{LEFT}" y="18">{escape(title)}</text>',
    ]


def _legend(names: Sequence[str], colors: Sequence[str | None] = ()) -> list[str]:
    if len(names) < 2:
        return []
    out = []
    per = (WIDTH - LEFT - RIGHT) / len(names)  # one line under the title, an equal share per name
    fits = max(4, int((per - 24) / LEGEND_CHAR_PX))
    for i, name in enumerate(names):
        color, x = (colors[i] if i < len(colors) else None) or COLORS[i % len(COLORS)], LEFT + per * i
        shown = name if len(name) <= fits else name[: fits - 1] + "…"
        out.append(
            f'<rect class="legend" x="{x:.1f}" y="24" width="10" height="10" fill="{color}"/>'
            f'<text x="{x + 14:.1f}" y="33" class="legend-label">{escape(shown)}<title>{escape(name)}</title>'
            "</text>"
        )
    return out


def _error_bar(x: float, bounds: Sequence[float] | None, scale: Callable[[float], float], series: str,
               color: str = "#222") -> str:
    """The interval [lo, hi] as a capped vertical line at x; `scale` maps a value to its y pixel."""
    if not bounds:
        return ""
    lo, hi = bounds[0], bounds[1]
    y_lo, y_hi = scale(lo), scale(hi)
    return (f'<g class="error-bar" data-series="{escape(series)}" data-lo="{lo:.6f}" data-hi="{hi:.6f}">'
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y_hi:.1f}" y2="{y_lo:.1f}" stroke="{color}"/>'
            f'<line x1="{x - 4:.1f}" x2="{x + 4:.1f}" y1="{y_hi:.1f}" y2="{y_hi:.1f}" stroke="{color}"/>'
            f'<line x1="{x - 4:.1f}" x2="{x + 4:.1f}" y1="{y_lo:.1f}" y2="{y_lo:.1f}" stroke="{color}"/>'
            f"<title>{escape(series)}: 95 % interval {lo:.3f}–{hi:.3f}</title></g>")


def _y_axis(y_max: float, plot_h: float, ticks: int = 4, fmt: str = "{:.2f}") -> list[str]:
    out = []
    for i in range(ticks + 1):
        value = y_max * i / ticks
        y = TOP + plot_h - plot_h * i / ticks
        out.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt.format(value)}</text>'
        )
    return out


def bar_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    y_max: float = 1.0,
    y_label: str = "",
    number: str = "{:.2f}",  # how values and ticks are written ("{:.0f}" for counts)
) -> str:
    """Grouped vertical bars, one group per category and one bar per series; None is drawn as 'n/a'."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    out = _open(title, "bar") + _legend([s.name for s in series], [s.color for s in series])
    out += _y_axis(y_max, plot_h, fmt=number)
    if y_label:
        out.append(
            f'<text class="axis-label" x="12" y="{TOP + plot_h / 2:.1f}" '
            f'transform="rotate(-90 12 {TOP + plot_h / 2:.1f})" text-anchor="middle">{escape(y_label)}</text>'
        )
    if not categories:
        out.append(
            f'<text class="empty" x="{WIDTH / 2}" y="{TOP + plot_h / 2}" text-anchor="middle">no data</text>'
        )
    group_w = plot_w / max(1, len(categories))
    bar_w = min(42.0, group_w * 0.8 / max(1, len(series)))

    def scale(v: float) -> float:  # a value's y pixel
        return TOP + plot_h - (plot_h * max(0.0, min(v, y_max)) / y_max if y_max > 0 else 0.0)

    for ci, category in enumerate(categories):
        gx = LEFT + group_w * ci + (group_w - bar_w * len(series)) / 2
        for si, s in enumerate(series):
            value = s.values[ci] if ci < len(s.values) else None
            x = gx + bar_w * si
            label = f"{category} · {s.name}: {'n/a' if value is None else f'{value:.3f}'}"
            if value is None:
                out.append(
                    f'<text class="na" x="{x + bar_w / 2:.1f}" y="{TOP + plot_h - 4:.1f}" '
                    f'text-anchor="middle">n/a</text>'
                )
                continue
            h = TOP + plot_h - scale(value)
            bounds = s.intervals[ci] if ci < len(s.intervals) else None
            label_y = min(TOP + plot_h - h, scale(bounds[1]) if bounds else TOP + plot_h) - 3
            out.append(
                f'<rect class="bar" data-category="{escape(category)}" data-series="{escape(s.name)}" '
                f'data-value="{value:.6f}" x="{x:.1f}" y="{TOP + plot_h - h:.1f}" width="{bar_w:.1f}" '
                f'height="{h:.1f}" fill="{s.color or COLORS[si % len(COLORS)]}">'
                f"<title>{escape(label)}</title></rect>"
                f'<text class="bar-value" x="{x + bar_w / 2:.1f}" y="{label_y:.1f}" '
                f'text-anchor="middle">{number.format(value)}</text>'
                + _error_bar(x + bar_w / 2, bounds, scale, s.name)
            )
        short = category if len(category) <= 18 else category[:17] + "…"
        cx, cy = LEFT + group_w * (ci + 0.5), TOP + plot_h + 14
        out.append(
            f'<text class="category" x="{cx:.1f}" y="{cy:.1f}" text-anchor="end" '
            f'transform="rotate(-25 {cx:.1f} {cy:.1f})">{escape(short)}'
            f"<title>{escape(category)}</title></text>"
        )
    out.append("</svg>")
    return "".join(out)


def line_chart(
    title: str,
    curves: Sequence[Curve],
    x_range: tuple[float, float],
    y_max: float = 1.0,
    x_label: str = "",
    y_label: str = "",
    markers: Sequence[float] = (),
    integer_x: bool = False,
) -> str:
    """Curves as polylines with a circle at every point; `markers` draws dashed vertical lines (e.g. τ)."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM + 24
    x0, x1 = x_range
    span = (x1 - x0) or 1.0

    def sx(x: float) -> float:
        return LEFT + plot_w * (x - x0) / span

    def sy(y: float) -> float:
        return TOP + plot_h - plot_h * max(0.0, min(y, y_max)) / y_max

    out = _open(title, "line") + _legend([c.name for c in curves]) + _y_axis(y_max, plot_h)
    ticks = (
        sorted({int(x0), *range(int(x0), int(x1) + 1)})
        if integer_x
        else [x0 + span * i / 5 for i in range(6)]
    )
    for t in ticks:
        out.append(
            f'<text class="tick" x="{sx(t):.1f}" y="{TOP + plot_h + 16:.1f}" text-anchor="middle">'
            f"{_num(t)}</text>"
        )
    for m in markers:
        out.append(
            f'<line class="marker" data-x="{m}" x1="{sx(m):.1f}" x2="{sx(m):.1f}" y1="{TOP}" '
            f'y2="{TOP + plot_h}"/><text class="tick" x="{sx(m) + 3:.1f}" y="{TOP + 10}">τ={_num(m)}</text>'
        )
    if x_label:
        out.append(
            f'<text class="axis-label" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" '
            f'text-anchor="middle">{escape(x_label)}</text>'
        )
    if y_label:
        out.append(
            f'<text class="axis-label" x="12" y="{TOP + plot_h / 2:.1f}" '
            f'transform="rotate(-90 12 {TOP + plot_h / 2:.1f})" text-anchor="middle">{escape(y_label)}</text>'
        )
    if not any(c.points for c in curves):
        out.append(
            f'<text class="empty" x="{WIDTH / 2}" y="{TOP + plot_h / 2}" text-anchor="middle">no data</text>'
        )
    for ci, curve in enumerate(curves):
        color = COLORS[ci % len(COLORS)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in curve.points)
        out.append(
            f'<polyline class="curve" data-series="{escape(curve.name)}" points="{coords}" fill="none" '
            f'stroke="{color}" stroke-width="2"/>'
        )
        r = 3.5 if len(curve.points) <= 20 else 1.6
        for i, (x, _) in enumerate(curve.points):
            if i < len(curve.intervals):
                out.append(_error_bar(sx(x), curve.intervals[i], sy, curve.name, color))
        for x, y in curve.points:
            out.append(
                f'<circle class="point" data-series="{escape(curve.name)}" data-x="{x:.4f}" data-y="{y:.6f}" '
                f'cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="{r}" fill="{color}">'
                f"<title>{escape(curve.name)}: {_num(round(x, 4))} → {y:.3f}</title></circle>"
            )
    out.append("</svg>")
    return "".join(out)


def histogram_chart(title: str, hists: Sequence[tuple[str, Histogram]], x_label: str = "") -> str:
    """Bins of each histogram side by side within the bin (all histograms must share the edges)."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM + 24
    edges = next((h.edges for _, h in hists if h.edges), [])
    top = max((c for _, h in hists for c in h.counts), default=0) or 1
    ticks = min(4, top)
    y_max = -(-top // ticks) * ticks  # whole-number ticks
    out = _open(title, "histogram") + _legend([name for name, _ in hists])
    out += _y_axis(float(y_max), plot_h, ticks=ticks, fmt="{:.0f}")
    if not edges:
        out.append(
            f'<text class="empty" x="{WIDTH / 2}" y="{TOP + plot_h / 2}" text-anchor="middle">no data</text>'
        )
    else:
        bins = len(edges) - 1
        bin_w = plot_w / bins
        for hi, (name, h) in enumerate(hists):
            w = bin_w / len(hists)
            for b, count in enumerate(h.counts):
                bh = plot_h * count / y_max
                x = LEFT + bin_w * b + w * hi
                out.append(
                    f'<rect class="bin" data-series="{escape(name)}" data-count="{count}" '
                    f'data-lo="{edges[b]:.3f}" data-hi="{edges[b + 1]:.3f}" x="{x:.1f}" '
                    f'y="{TOP + plot_h - bh:.1f}" width="{max(w - 1, 0.5):.1f}" height="{bh:.1f}" '
                    f'fill="{COLORS[hi % len(COLORS)]}"><title>{escape(name)}: {count} calls, '
                    f"{edges[b]:.1f}–{edges[b + 1]:.1f} ms</title></rect>"
                )
        for i in range(0, bins + 1, max(1, bins // 5)):
            out.append(
                f'<text class="tick" x="{LEFT + bin_w * i:.1f}" y="{TOP + plot_h + 16:.1f}" '
                f'text-anchor="middle">{edges[i]:.0f}</text>'
            )
    if x_label:
        out.append(
            f'<text class="axis-label" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" '
            f'text-anchor="middle">{escape(x_label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)
