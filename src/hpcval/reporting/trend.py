"""Every figure's history with its change points, as text and as HTML.

A series is one figure of one test case across the site's stored runs (the
run's median, and its samples). Change points are found on the run medians
by :func:`hpcval.history.judging.change_points` (e-divisive means, as MongoDB's and
Apache Otava's performance CI do), so a slow drift over many runs or a step
that one noisy run cannot show is still found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Any

from hpcval.history.store import HistoryPoint


@dataclass
class Series:
    case_key: str
    variable: str
    unit: str
    better: str
    points: list[HistoryPoint] = field(default_factory=list)
    change_points: list[Any] = field(default_factory=list)

    @property
    def worse_now(self) -> bool:
        """The latest change point moved the figure in its worse direction."""
        if not self.change_points:
            return False
        change = self.change_points[-1].change
        return change < 0 if self.better == "higher" else change > 0

    @property
    def medians(self) -> list[float]:
        return [median(p.samples) if p.samples else float("nan") for p in self.points]


def build(points: list[HistoryPoint]) -> list[Series]:
    """Group stored figures into series and find their change points."""
    from hpcval.history import judging

    grouped: dict[tuple[str, str], Series] = {}
    for p in points:
        if not p.samples:
            continue
        s = grouped.setdefault((p.case_key, p.variable),
                               Series(p.case_key, p.variable, p.unit, p.better))
        s.points.append(p)
    for s in grouped.values():
        s.change_points = judging.change_points(s.medians)
    return [grouped[k] for k in sorted(grouped)]


def pct(v: float | None) -> str:
    return f"{100 * v:+.1f} %" if v is not None else "-"


def text(series: list[Series]) -> str:
    lines = []
    for s in series:
        head = f"{s.case_key}  {s.variable} [{s.unit}]: {len(s.points)} run(s)"
        if not s.change_points:
            lines.append(f"{head}, no change point")
            continue
        lines.append(f"{head}, {len(s.change_points)} change point(s):")
        for cp in s.change_points:
            run = s.points[cp.index].run_id
            lines.append(f"  at run {run}: {cp.before:.4g} -> {cp.after:.4g} {s.unit} "
                         f"({pct(cp.change)}, p = {cp.p_value:.2g})")
    return "\n".join(lines) + "\n"


def plot(s: Series, bands: list[tuple[float | None, float | None, str, str]] = (),
         compact: bool = False) -> str:
    """One figure as inline SVG: samples (grey dots), run medians (line),
    change points (red lines), runs left out of baselines (red crosses) and
    ``bands`` (the contract band, the history band: see
    :func:`hpcval.reporting.svgplot.history_panel`). Drawn by :mod:`hpcval.reporting.svgplot`:
    milliseconds per figure, nothing heavy imported, so a validation can
    afford it for every figure."""
    from hpcval.reporting import svgplot

    return svgplot.history_panel(
        s.case_key, f"{s.variable} [{s.unit}]", [list(p.samples) for p in s.points],
        s.medians, [(cp.index, pct(cp.change)) for cp in s.change_points],
        [i for i, p in enumerate(s.points) if not p.accepted], bands, compact) or ""
