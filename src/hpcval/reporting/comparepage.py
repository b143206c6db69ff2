"""What a person reads of a run-set comparison (``hpcval compare``): the
terminal text (conclusion first, one line per family and per figure that
moved), the JSON for tools and the HTML page in the report's style, with a
per-size ratio plot (interval band, equivalence margin, every run's median)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpcval.history.judging.change import Change, sig3
from hpcval.history.judging.compare import FamilyComparison, FigureComparison, SetComparison

#: what the statistics are, in one line (docs/compare.md has the rest)
METHOD = ("ratio B/A of the geometric means of run medians; interval: Welch's t on log run "
          "medians (between-run spread of both sides, each pooled with the site's spread from "
          "accepted runs on neither side; paired t where both sides hold the same runs); one "
          "test per family, Holm across families; same = every figure's {lvl} "
          "interval inside +-{margin} (docs/compare.md)")


@dataclass
class SideInfo:
    """How a side was chosen and which runs it holds."""

    label: str
    spec: str
    runs: list[str]


def size_text(size: float | None) -> str:
    if size is None:
        return ""
    size = int(size)
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def _geo(values: Sequence[float]) -> float:
    return float(math.exp(np.mean(np.log(values)))) if values else math.nan


def _n(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _fig_short(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def figure_line(f: FigureComparison) -> str:
    """``  worse bw_1MiB: 24.7 -> 19.9 MB/s, -19.5 % [-23.0 .. -15.8] (95 %), 5 vs 5 runs``"""
    a, b = _geo(f.medians_a), _geo(f.medians_b)
    na, nb = f.runs
    return (f"  {f.outcome} {_fig_short(f.name)}: {sig3(a)} -> {sig3(b)} {f.unit}, "
            f"{f.change.text()}, {na} vs {nb} runs")


def family_line(fam: FamilyComparison) -> str:
    na, nb = fam.runs
    what = f"{len(fam.figures)} figure{'s' if len(fam.figures) != 1 else ''}"
    text = f"{fam.outcome.upper()} {fam.label}: {fam.change.text()}, {what}, {na} vs {nb} runs"
    if fam.p_adjusted is not None and fam.outcome in ("worse", "better"):
        text += (f", p={sig3(fam.p_adjusted)}" if fam.p_adjusted >= 0.001 else ", p<0.001")
    if fam.note:
        text += f"; {fam.note}"
    return text


def conclusion(comp: SetComparison) -> str:
    """One line: the outcome first, then what it rests on."""
    fams = comp.families
    n = len(fams)
    counts = {o: sum(1 for f in fams if f.outcome == o) for o in
              ("worse", "better", "same", "inconclusive")}
    margin = f"+-{comp.margin:.0%}"
    if comp.outcome in ("worse", "better"):
        moved = [f for f in fams if f.outcome == comp.outcome]
        first = moved[0]
        rest = f" and {len(moved) - 1} more" if len(moved) > 1 else ""
        other = ("; " + ", ".join(f"{v} {k}" for k, v in counts.items()
                                  if v and k != comp.outcome)) if n > len(moved) else ""
        return (f"{comp.outcome.upper()}: B is {comp.outcome} than A on {len(moved)} of {n} "
                f"famil{'ies' if n != 1 else 'y'}: {first.label} "
                f"{first.change.text()}{rest}{other}")
    if comp.outcome == "same":
        return (f"SAME: B is the same as A within {margin} on all {n} "
                f"famil{'ies' if n != 1 else 'y'}")
    if not comp.has_interval:
        return ("NO INTERVAL: one run per side gives changes without an interval; "
                "2 runs per side (3 in all) give one")
    return (f"INCONCLUSIVE: no family moved and not all are within {margin}; "
            + ", ".join(f"{v} {k}" for k, v in counts.items() if v))


def text(comp: SetComparison, sides: Sequence[SideInfo], only: Sequence[list[str]] = (),
         html_path: str | None = None) -> str:
    """The terminal text: conclusion first, the sides, one line per family and
    per figure that moved (``-v`` style detail is in the JSON and HTML)."""
    lines = [conclusion(comp)]
    for s in sides:
        shown = ", ".join(s.runs[:4]) + (f", ... ({len(s.runs)} runs)" if len(s.runs) > 4
                                          else "")
        lines.append(f"{s.label}: {s.spec}: {shown}")
    for fam in comp.families:
        lines.append(family_line(fam))
        for key in fam.figures:
            f = comp.figures[key]
            if f.outcome in ("worse", "better"):
                lines.append(figure_line(f))
    for r in comp.ranges:
        lines.append(f"mean change over {size_text(r.low)} - {size_text(r.high)}: "
                     f"{(r.case + ' ') if r.case else ''}{r.family} ({_n(len(r.sizes), 'size')}) "
                     f"{r.change.text()}")
    if only and any(only):
        lines.append("not compared: only in A: " + (", ".join(only[0]) or "-")
                     + "; only in B: " + (", ".join(only[1]) or "-"))
    lines.append("method: " + METHOD.format(lvl=f"{1 - 2 * comp.alpha:.0%}",
                                            margin=f"{comp.margin:.0%}"))
    if html_path:
        lines.append(f"HTML: {html_path}")
    return "\n".join(lines) + "\n"


def as_json(comp: SetComparison, sides: Sequence[SideInfo],
            only: Sequence[list[str]] = ()) -> dict[str, Any]:
    out = comp.as_dict()
    out["conclusion"] = conclusion(comp)
    out["sides"] = [{"label": s.label, "spec": s.spec, "runs": s.runs} for s in sides]
    if only:
        out["only_in_a"], out["only_in_b"] = list(only[0]), list(only[1])
    return out


# -- the plot ----------------------------------------------------------------

W, H = 640, 340
L, R, T, B = 64, 16, 26, 56
_TICKS = (-0.9, -0.75, -0.5, -0.3, -0.2, -0.1, -0.05, 0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0,
          4.0, 9.0, 19.0, 49.0, 99.0)


def ratio_plot(title: str, figures: Sequence[FigureComparison], margin: float) -> str:
    """Per figure (by message size): the change B/A - 1 on a log axis, its
    interval as a band, the equivalence margin, and every run's median relative
    to side A's geometric mean (A: blue circles, B: orange squares)."""
    figs = sorted(figures, key=lambda f: (f.size is None, f.size or 0, f.name))
    esc = html.escape
    ys: list[float] = [math.log1p(-margin), math.log1p(margin)]
    for f in figs:
        base = _geo(f.medians_a)
        ys += [math.log(v / base) for v in (*f.medians_a, *f.medians_b)]
        if f.change.has_interval:
            ys += [math.log1p(f.change.low), math.log1p(f.change.high)]  # type: ignore[arg-type]
    lo, hi = min(ys), max(ys)
    pad = (hi - lo) * 0.06 or 0.05
    lo, hi = lo - pad, hi + pad
    n = len(figs)

    def px(i: float) -> float:
        return L + (i + 0.5) * (W - L - R) / max(n, 1)

    def py(v: float) -> float:
        return T + (hi - v) / (hi - lo) * (H - T - B)

    # the title is the section's heading and the svg's label: a long case name
    # drawn inside the plot would run off a phone's screen
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {W} {H}' width='{W}' "
           f"height='{H}' font-family='sans-serif' font-size='11' role='img' "
           f"aria-label='{esc(title)}'>"]
    # the equivalence margin and no change
    y1, y2 = py(math.log1p(margin)), py(math.log1p(-margin))
    out.append(f"<rect x='{L}' y='{y1:.1f}' width='{W - L - R}' height='{y2 - y1:.1f}' "
               "fill='#2ca02c' fill-opacity='0.10'/>")
    for y in (y1, y2):
        out.append(f"<line x1='{L}' x2='{W - R}' y1='{y:.1f}' y2='{y:.1f}' stroke='#2ca02c' "
                   "stroke-dasharray='4 3'/>")
    ticks = [t for t in _TICKS if lo <= math.log1p(t) <= hi]
    if len(ticks) > 9:
        ticks = ticks[::2] if 0.0 in ticks[::2] else ticks[1::2]
    for t in ticks:
        y = py(math.log1p(t))
        label = "0" if t == 0 else f"{t:+.0%}"
        out.append(f"<line x1='{L}' x2='{W - R}' y1='{y:.1f}' y2='{y:.1f}' "
                   f"stroke='{'#888' if t == 0 else '#e4e4e4'}'/>"
                   f"<text x='{L - 5}' y='{y + 4:.1f}' text-anchor='end'>{label}</text>")
    out.append(f"<rect x='{L}' y='{T}' width='{W - L - R}' height='{H - T - B}' fill='none' "
               "stroke='#444'/>")
    # the interval band and the estimate
    band = [(i, f) for i, f in enumerate(figs) if f.change.has_interval]
    if len(band) > 1:
        top = " ".join(f"{px(i):.1f},{py(math.log1p(f.change.high)):.1f}"  # type: ignore[arg-type]
                       for i, f in band)
        bottom = " ".join(f"{px(i):.1f},{py(math.log1p(f.change.low)):.1f}"  # type: ignore[arg-type]
                          for i, f in reversed(band))
        out.append(f"<polygon points='{top} {bottom}' fill='#9467bd' fill-opacity='0.18'/>")
    for i, f in band:
        x = px(i)
        out.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{py(math.log1p(f.change.high)):.1f}' "
                   f"y2='{py(math.log1p(f.change.low)):.1f}' stroke='#9467bd' "
                   "stroke-width='3' stroke-opacity='0.6'/>")
    line = " ".join(f"{px(i):.1f},{py(math.log1p(f.change.change)):.1f}"
                    for i, f in enumerate(figs))
    if n > 1:
        out.append(f"<polyline points='{line}' fill='none' stroke='#9467bd' "
                   "stroke-width='1.5'/>")
    for i, f in enumerate(figs):
        x = px(i)
        base = _geo(f.medians_a)
        for v in f.medians_a:
            out.append(f"<circle cx='{x - 9:.1f}' cy='{py(math.log(v / base)):.1f}' r='3' "
                       "fill='#1f77b4' fill-opacity='0.7'/>")
        for v in f.medians_b:
            y = py(math.log(v / base))
            out.append(f"<rect x='{x + 6:.1f}' y='{y - 3:.1f}' width='6' height='6' "
                       "fill='#ff7f0e' fill-opacity='0.8'/>")
        out.append(f"<circle cx='{x:.1f}' cy='{py(math.log1p(f.change.change)):.1f}' r='4' "
                   "fill='#9467bd'/>")
        label = size_text(f.size) or _fig_short(f.name)
        out.append(f"<text x='{x:.1f}' y='{H - B + 16}' text-anchor='middle'>"
                   f"{esc(label)}</text>")
    out.append(f"<text x='{(L + W - R) / 2}' y='{H - 22}' text-anchor='middle'>"
               "message size (or figure)</text>")
    # horizontal: a rotated label measures wider than its box in Chromium
    out.append(f"<text x='4' y='{T - 8}'>B vs A</text>")
    out.append(f"<text x='{L + 4}' y='{H - 6}' fill='#1f77b4'>&#9679; runs of A</text>"
               f"<text x='{L + 90}' y='{H - 6}' fill='#ff7f0e'>&#9632; runs of B</text>"
               f"<text x='{L + 180}' y='{H - 6}' fill='#9467bd'>&#9679; B/A, band: "
               f"interval</text><text x='{L + 340}' y='{H - 6}' fill='#2ca02c'>"
               f"margin +-{margin:.0%}</text>")
    out.append("</svg>")
    return "".join(out)


_CSS_EXTRA = """
.banner.worse{background:#fbe3e6;color:#7a0015}.banner.better{background:#e3edf9;color:#0b3d91}
.banner.same{background:#e3f4e4;color:#176a1d}.banner.inconclusive{background:#fdf1d8;color:#6b4500}
.worse{color:#b00020;font-weight:bold}.better{color:#0b5394;font-weight:bold}
.same{color:#176a1d}
table.cmp{width:100%;table-layout:fixed}table.cmp th{white-space:normal;overflow-wrap:anywhere}
ul.fams{padding-left:1.2em;margin:.3em 0}ul.fams li{margin:.25em 0;overflow-wrap:anywhere}
ul.fams ul{padding-left:1.2em}
"""


def page(comp: SetComparison, sides: Sequence[SideInfo], title: str = "",
         only: Sequence[list[str]] = ()) -> str:
    """A self-contained HTML page: the conclusion first (banner), the sides,
    one line per family and moved figure, then per family a ratio plot and a
    table of its figures."""
    from hpcval.reporting.htmlreport import PAGE_CSS

    esc = html.escape
    head = conclusion(comp)
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             "<meta name='viewport' content='width=device-width,initial-scale=1'>",
             f"<title>hpcval compare {esc(comp.outcome)} {esc(title)}</title>",
             f"<style>{PAGE_CSS}{_CSS_EXTRA}</style></head><body>",
             "<h1>hpcval comparison: B against A</h1>",
             f"<p class='banner {esc(comp.outcome)}' id='verdict'>{esc(head)}</p>",
             "<p class='facts'>" + " · ".join(
                 f"{esc(s.label)}: {esc(s.spec)} ({len(s.runs)} run"
                 f"{'s' if len(s.runs) != 1 else ''}: {esc(', '.join(s.runs[:3]))}"
                 f"{', ...' if len(s.runs) > 3 else ''})" for s in sides)
             + f" · margin +-{comp.margin:.0%} · alpha {comp.alpha:g}</p>",
             "<section id='families'><h2>Families</h2><ul class='fams'>"]
    for fam in comp.families:
        parts.append(f"<li><span class='{esc(fam.outcome)}'>{esc(fam.outcome.upper())}</span> "
                     f"{esc(family_line(fam).split(' ', 1)[1])}")
        moved = [comp.figures[k] for k in fam.figures
                 if comp.figures[k].outcome in ("worse", "better")]
        if moved:
            parts.append("<ul>" + "".join(
                f"<li><span class='{esc(f.outcome)}'>{esc(f.outcome)}</span> "
                f"{esc(figure_line(f).strip().split(' ', 1)[1])}</li>" for f in moved) + "</ul>")
        parts.append("</li>")
    parts.append("</ul>")
    for r in comp.ranges:
        parts.append(f"<p>Mean change over {esc(size_text(r.low))} - {esc(size_text(r.high))}"
                     f", {esc(r.case)} {esc(r.family)} ({_n(len(r.sizes), 'size')}): "
                     f"<b>{esc(r.change.text())}</b></p>")
    parts.append("</section>")
    method = METHOD.format(lvl=f"{1 - 2 * comp.alpha:.0%}", margin=f"{comp.margin:.0%}")
    parts.append(f"<p class='facts'>{esc(method)}</p>")
    for fam in comp.families:
        figs = [comp.figures[k] for k in fam.figures]
        parts.append(f"<section><h2>{esc(fam.label)}</h2>")
        parts.append(f"<figure>{ratio_plot(fam.label, figs, comp.margin)}<figcaption>"
                     f"{esc(fam.outcome)}: {esc(fam.change.text())}. Points: each run's "
                     "median relative to A's geometric mean; band: each figure's 95 % "
                     f"interval of B/A; green: the +-{comp.margin:.0%} equivalence margin."
                     "</figcaption></figure>")
        parts.append("<table class='cmp'><tr><th>figure</th><th>A</th><th>B</th>"
                     "<th>B vs A</th><th>outcome</th><th>runs</th><th>for +-margin</th></tr>")
        for f in sorted(figs, key=lambda f: (f.size is None, f.size or 0, f.name)):
            na, nb = f.runs
            parts.append(
                f"<tr><td>{esc(_fig_short(f.name))}</td>"
                f"<td class='num'>{esc(sig3(_geo(f.medians_a)))} {esc(f.unit)}</td>"
                f"<td class='num'>{esc(sig3(_geo(f.medians_b)))} {esc(f.unit)}</td>"
                f"<td class='num'>{esc(f.change.text())}</td>"
                f"<td class='{esc(f.outcome)}'>{esc(f.outcome)}</td>"
                f"<td class='num'>{na} vs {nb}</td>"
                f"<td class='num'>{f.needed if f.needed else '-'}</td></tr>")
        parts.append("</table></section>")
    if only and any(only):
        parts.append("<p class='facts'>Not compared: only in A: "
                     f"{esc(', '.join(only[0]) or '-')}; only in B: "
                     f"{esc(', '.join(only[1]) or '-')}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


__all__ = ["Change", "SideInfo", "as_json", "conclusion", "page", "ratio_plot", "text"]
