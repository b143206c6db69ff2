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
    esc = html.escape
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {WIDTH} {HEIGHT}' "
           f"width='{WIDTH}' height='{HEIGHT}' font-family='sans-serif' font-size='11'>",
           f"<text x='{WIDTH / 2}' y='16' text-anchor='middle'>{esc(title)}</text>",
           f"<rect x='{LEFT}' y='{TOP}' width='{WIDTH - LEFT - RIGHT}' "
           f"height='{HEIGHT - TOP - BOTTOM}' fill='none' stroke='#444'/>"]
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
    out.append(f"<text x='{(LEFT + WIDTH - RIGHT) / 2}' y='{HEIGHT - 10}' "
               f"text-anchor='middle'>{esc(x_label)}</text>")
    out.append(f"<text transform='translate(14 {(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)' "
               f"text-anchor='middle'>{esc(y_label)}</text>")
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
