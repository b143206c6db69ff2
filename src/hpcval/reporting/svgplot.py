"""Small inline SVG plots for the HTML report: a measured series on log axes
with the judged points and their reference bands.

Written by hand rather than with matplotlib so that rendering a report costs
milliseconds per plot and imports nothing heavy (a validation run renders its
report every time); the page scales them to the window.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

WIDTH, HEIGHT = 520, 330
LEFT, RIGHT, TOP, BOTTOM = 70, 15, 30, 50


@dataclass(frozen=True)
class Judged:
    """A judged point: where, its value, its band (None: unbounded), passed or not."""

    x: float
    value: float | None
    lower: float | None
    upper: float | None
    passed: bool


class _LogAxis:
    def __init__(self, values: list[float], base: float, lo_px: float, hi_px: float) -> None:
        self.base = base
        lo, hi = math.log(min(values), base), math.log(max(values), base)
        if hi - lo < 1e-9:
            lo, hi = lo - 1, hi + 1
        pad = (hi - lo) * 0.05
        self.lo, self.hi, self.lo_px, self.hi_px = lo - pad, hi + pad, lo_px, hi_px

    def px(self, v: float) -> float:
        t = (math.log(v, self.base) - self.lo) / (self.hi - self.lo)
        return self.lo_px + t * (self.hi_px - self.lo_px)

    def ticks(self, most: int = 8) -> list[int]:
        first, last = math.ceil(self.lo), math.floor(self.hi)
        step = max(1, math.ceil((last - first + 1) / most))
        return list(range(first, last + 1, step))


def _label(base: float, exponent: int) -> str:
    if base == 2:
        return f"2<tspan dy='-6' font-size='9'>{exponent}</tspan>"
    value = 10.0 ** exponent
    return f"{value:g}" if -3 <= exponent <= 5 else f"1e{exponent}"


def _drawable(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def _frame(title: str) -> list[str]:
    """The opening of a panel: the ``<svg>`` element, its title and the plot frame."""
    return [f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {WIDTH} {HEIGHT}' "
            f"width='{WIDTH}' height='{HEIGHT}' font-family='sans-serif' font-size='11'>",
            f"<text x='{WIDTH / 2}' y='16' text-anchor='middle'>{html.escape(title)}</text>",
            f"<rect x='{LEFT}' y='{TOP}' width='{WIDTH - LEFT - RIGHT}' "
            f"height='{HEIGHT - TOP - BOTTOM}' fill='none' stroke='#444'/>"]


def _axis_labels(x_label: str, y_label: str) -> list[str]:
    return [f"<text x='{(LEFT + WIDTH - RIGHT) / 2}' y='{HEIGHT - 10}' "
            f"text-anchor='middle'>{html.escape(x_label)}</text>",
            f"<text transform='translate(14 {(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)' "
            f"text-anchor='middle'>{html.escape(y_label)}</text>"]


def panel(title: str, x_label: str, y_label: str, points: list[tuple[float, float]],
          judged: list[Judged]) -> str | None:
    """One log-log panel as an ``<svg>`` element, or None with nothing to draw."""
    # a log axis shows positive finite numbers; inf, NaN, 0 and negative figures
    # are reported in the verdict table, not drawn
    pts = [(x, y) for x, y in points if _drawable(x) and _drawable(y)]
    marks = [j for j in judged if _drawable(j.x) and _drawable(j.value)]
    if not pts and not marks:
        return None
    ys = [y for _, y in pts] + [j.value for j in marks if j.value]
    xs = [x for x, _ in pts] + [j.x for j in marks]
    ax = _LogAxis(xs, 2, LEFT, WIDTH - RIGHT)
    ay = _LogAxis(ys, 10, HEIGHT - BOTTOM, TOP)
    out = _frame(title)
    for e in ax.ticks():
        x = ax.px(2.0 ** e)
        out.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{TOP}' y2='{HEIGHT - BOTTOM}' "
                   f"stroke='#ddd'/><text x='{x:.1f}' y='{HEIGHT - BOTTOM + 16}' "
                   f"text-anchor='middle'>{_label(2, e)}</text>")
    for e in ay.ticks(6):
        y = ay.px(10.0 ** e)
        out.append(f"<line x1='{LEFT}' x2='{WIDTH - RIGHT}' y1='{y:.1f}' y2='{y:.1f}' "
                   f"stroke='#ddd'/><text x='{LEFT - 5}' y='{y + 4:.1f}' "
                   f"text-anchor='end'>{_label(10, e)}</text>")
    out += _axis_labels(x_label, y_label)
    for j in marks:
        top = ay.px(j.upper) if j.upper and j.upper > 0 else TOP
        bottom = ay.px(j.lower) if j.lower and j.lower > 0 else HEIGHT - BOTTOM
        top, bottom = max(TOP, min(top, HEIGHT - BOTTOM)), min(HEIGHT - BOTTOM, max(bottom, TOP))
        out.append(f"<rect x='{ax.px(j.x) - 6:.1f}' y='{top:.1f}' width='12' "
                   f"height='{max(0.0, bottom - top):.1f}' fill='#2ca02c' fill-opacity='0.2'/>")
    if pts:
        path = " ".join(f"{ax.px(x):.1f},{ay.px(y):.1f}" for x, y in sorted(pts))
        out.append(f"<polyline points='{path}' fill='none' stroke='#1f77b4' stroke-width='1.5'/>")
        out += [f"<circle cx='{ax.px(x):.1f}' cy='{ay.px(y):.1f}' r='2' fill='#1f77b4'/>"
                for x, y in pts]
    for j in marks:
        x, y = ax.px(j.x), ay.px(j.value or 1)
        colour = "#2ca02c" if j.passed else "#d62728"
        out.append(f"<path d='M{x:.1f} {y - 6:.1f} L{x + 6:.1f} {y:.1f} L{x:.1f} {y + 6:.1f} "
                   f"L{x - 6:.1f} {y:.1f} Z' fill='{colour}'/>")
    out.append("</svg>")
    return "".join(out)


def history_panel(title: str, y_label: str, runs: list[list[float]], medians: list[float],
                  change_at: list[tuple[int, str]], rejected: list[int],
                  bands: list[tuple[float | None, float | None, str, str]] = (),
                  compact: bool = False) -> str | None:
    """One figure's history as an ``<svg>``: every run's samples (grey dots), the
    run medians (line), change points (red lines before run index, labelled)
    and runs left out of baselines (red crosses); linear axes, oldest run left.
    ``bands``: (low, high, colour, label) drawn as shaded horizontal bands
    (None: open on that side), clipped to the data's range so that a loose
    band does not squash the data. ``compact``: samples and medians drawn as
    two paths of dots rather than one element each."""
    finite = [v for vs in runs for v in vs if math.isfinite(v)]
    finite += [v for v in medians if math.isfinite(v)]
    if not finite or not runs:
        return None
    lo, hi = min(finite), max(finite)
    if hi - lo < 1e-12 * max(1.0, abs(hi)):
        lo, hi = lo - max(1.0, abs(lo)) * 0.05, hi + max(1.0, abs(hi)) * 0.05
    pad = (hi - lo) * 0.08
    lo, hi = lo - pad, hi + pad
    n = len(runs)
    left, right, top, bottom = LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM

    def px(i: float) -> float:
        return left + (i + 0.5) / n * (right - left)

    def py(v: float) -> float:
        return bottom - (v - lo) / (hi - lo) * (bottom - top)

    out = _frame(title)
    for k in range(6):
        v = lo + (hi - lo) * k / 5
        out.append(f"<line x1='{left}' x2='{right}' y1='{py(v):.1f}' y2='{py(v):.1f}' "
                   f"stroke='#ddd'/><text x='{left - 5}' y='{py(v) + 4:.1f}' "
                   f"text-anchor='end'>{v:.4g}</text>")
    step = max(1, math.ceil(n / 10))
    for i in range(0, n, step):
        out.append(f"<text x='{px(i):.1f}' y='{bottom + 16}' text-anchor='middle'>{i + 1}</text>")
    out += _axis_labels("run (oldest first)", y_label)
    for k, (b_lo, b_hi, colour, label) in enumerate(bands):
        y_top = top if b_hi is None else max(top, min(bottom, py(b_hi)))
        y_bottom = bottom if b_lo is None else max(top, min(bottom, py(b_lo)))
        if y_bottom - y_top < 0.5:
            continue
        out.append(f"<rect x='{left}' y='{y_top:.1f}' width='{right - left}' "
                   f"height='{y_bottom - y_top:.1f}' fill='{colour}' fill-opacity='0.15'/>"
                   f"<text x='{right - 4}' y='{y_top + 12 + 12 * k:.1f}' text-anchor='end' "
                   f"fill='{colour}'>{html.escape(label)}</text>")
    line = [(px(i), py(m)) for i, m in enumerate(medians) if math.isfinite(m)]
    if compact:
        # one path of round dots for all samples, one for the medians: a page
        # of hundreds of plots stays a few kilobytes per plot
        dots = "".join(f"M{px(i):.1f} {py(v):.1f}h0" for i, samples in enumerate(runs)
                       for v in samples if math.isfinite(v))
        out.append(f"<path d='{dots}' stroke='#888' stroke-opacity='0.5' stroke-width='3.2' "
                   "stroke-linecap='round'/>")
    else:
        for i, samples in enumerate(runs):
            out += [f"<circle cx='{px(i):.1f}' cy='{py(v):.1f}' r='1.6' fill='#888' "
                    "fill-opacity='0.5'/>" for v in samples if math.isfinite(v)]
    if line:
        out.append("<polyline points='" + " ".join(f"{x:.1f},{y:.1f}" for x, y in line)
                   + "' fill='none' stroke='#1f77b4' stroke-width='1.5'/>")
        if compact:
            out.append("<path d='" + "".join(f"M{x:.1f} {y:.1f}h0" for x, y in line)
                       + "' stroke='#1f77b4' stroke-width='5' stroke-linecap='round'/>")
        else:
            out += [f"<circle cx='{x:.1f}' cy='{y:.1f}' r='2.5' fill='#1f77b4'/>"
                    for x, y in line]
    for index, label in change_at:
        x = px(index - 0.5)
        out.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{top}' y2='{bottom}' "
                   f"stroke='#d62728' stroke-width='1.5'/><text x='{x + 3:.1f}' y='{top + 12}' "
                   f"fill='#d62728'>{html.escape(label)}</text>")
    for i in rejected:
        if 0 <= i < len(medians) and math.isfinite(medians[i]):
            x, y = px(i), py(medians[i])
            out.append(f"<path d='M{x - 5:.1f} {y - 5:.1f} L{x + 5:.1f} {y + 5:.1f} "
                       f"M{x - 5:.1f} {y + 5:.1f} L{x + 5:.1f} {y - 5:.1f}' stroke='#d62728' "
                       "stroke-width='2'/>")
    out.append("</svg>")
    return "".join(out)


def sparkline(medians: list[float], change_at: list[int], colour: str = "#1f77b4",
              width: int = 120, height: int = 26) -> str:
    """A figure's run medians as a small inline ``<svg>`` for a table row:
    oldest run left, the last run a dot in ``colour`` (its outcome), change
    points as red ticks before the run they start at. No axes: the value and
    band columns beside it give the numbers."""
    values = [v for v in medians if isinstance(v, int | float) and math.isfinite(v)]
    if not values:
        return ""
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12 * max(1.0, abs(hi)):
        lo, hi = lo - max(abs(lo), 1e-12) * 0.05, hi + max(abs(hi), 1e-12) * 0.05
    n = len(medians)

    def px(i: float) -> float:
        return 3 + (i + 0.5) / n * (width - 6)

    def py(v: float) -> float:
        return height - 3 - (v - lo) / (hi - lo) * (height - 6)

    out = [f"<svg class='spark' xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} "
           f"{height}' width='{width}' height='{height}'>"]
    for i in change_at:
        out.append(f"<line x1='{px(i - 0.5):.1f}' x2='{px(i - 0.5):.1f}' y1='0' y2='{height}' "
                   "stroke='#d62728' stroke-width='1.5'/>")
    pts = [(px(i), py(v)) for i, v in enumerate(medians)
           if isinstance(v, int | float) and math.isfinite(v)]
    if len(pts) > 1:
        out.append("<polyline points='" + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
                   + "' fill='none' stroke='#555' stroke-width='1.2'/>")
    x, y = pts[-1]
    out.append(f"<circle cx='{x:.1f}' cy='{y:.1f}' r='2.8' fill='{colour}'/></svg>")
    return "".join(out)
