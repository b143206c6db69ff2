"""Every figure's history with its change points, as text and as HTML.

A series is one figure of one test case across the site's stored runs (the
run's median, and its samples). Change points are found on the run medians
by :func:`hpcval.history.judging.change_points` (e-divisive means, as MongoDB's and
Apache Otava's performance CI do), so a slow drift over many runs or a step
that one noisy run cannot show is still found.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from statistics import median
from typing import Any

from hpcval.history.judging.change import Change, sig3
from hpcval.history.store import HistoryPoint


@dataclass
class Series:
    case_key: str
    variable: str
    unit: str
    better: str
    points: list[HistoryPoint] = field(default_factory=list)
    #: found on the runs counted in baselines only; ``index`` is into ``points``
    change_points: list[Any] = field(default_factory=list)
    #: the newest run's stored history verdict ``(run id, outcome, detail)``
    latest: tuple[str, str, dict[str, Any]] | None = None

    def segment_runs(self) -> list[int]:
        """Indexes of the runs the change points' segments are made of: every
        run counted in baselines, and the runs after the last of them (the level
        the machine is at now, judged or held but not yet accepted). A run left
        out of baselines with accepted runs after it (regressed, held, rejected,
        interrupted, then the old level again) is no level: it is left out."""
        last = max((i for i, p in enumerate(self.points) if p.accepted), default=-1)
        return [i for i, p in enumerate(self.points) if p.accepted or i > last]

    @property
    def left_out(self) -> int:
        """Runs of the series not in the segments (see :meth:`segment_runs`)."""
        return len(self.points) - len(self.segment_runs())

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
        # the segments leave out the runs left out of baselines that the machine
        # came back from: an excursion is no level (Series.segment_runs)
        kept = s.segment_runs()
        medians = s.medians
        found = judging.change_points([medians[i] for i in kept])
        s.change_points = [replace(cp, index=kept[cp.index]) for cp in found]
    return [grouped[k] for k in sorted(grouped)]


def attach_verdicts(series: list[Series], store: Any) -> None:
    """Each series' newest run's stored verdict (``Series.latest``)."""
    cache: dict[str, dict[tuple[str, str], tuple[str, dict[str, Any]]]] = {}
    for s in series:
        run = s.points[-1].run_id
        if run not in cache:
            cache[run] = store.verdicts(run)
        found = cache[run].get((s.case_key, s.variable))
        if found is not None:
            s.latest = (run, found[0], found[1])


def pct(v: float | None) -> str:
    return f"{100 * v:+.1f} %" if v is not None else "-"


def text(series: list[Series]) -> str:
    """Per series: its runs (and how many are left out of the segments), the
    newest run's verdict with its change (the number validate printed), then
    each change point: the segments' levels and the step with its interval."""
    lines = []
    for s in series:
        head = f"{s.case_key}  {s.variable} [{s.unit}]: {len(s.points)} run(s)"
        if s.left_out:
            head += (f" ({s.left_out} left out of baselines before an accepted run: "
                     "not in the segments)")
        if s.latest is not None:
            run, outcome, detail = s.latest
            change = Change.from_detail(detail)
            if change is not None:
                head += f"; run {run}: {outcome} {change.text()}"
        if not s.change_points:
            lines.append(f"{head}; no change point")
            continue
        lines.append(f"{head}; {len(s.change_points)} change point(s):")
        for cp in s.change_points:
            run = s.points[cp.index].run_id
            lines.append(f"  at run {run}: {sig3(cp.before)} -> {sig3(cp.after)} {s.unit}, "
                         f"{cp.as_change().text()}, p = {cp.p_value:.2g}")
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
