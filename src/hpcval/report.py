"""Results a person reads: the verdict table and the HTML report.

Both are rendered from ReFrame's JSON run report (``var/<site>/reports/``),
so a report can be made again at any time from stored results. Series a check
recorded with :meth:`hpcval.rfm.HpcvalTest.record_series` (for example the
whole IMB table) are plotted with the judged reference band. Nothing here
imports ReFrame or matplotlib: plots are inline SVG (:mod:`hpcval.svgplot`).
"""

from __future__ import annotations

import contextlib
import html
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval import checks, sizereport, svgplot
from hpcval.errors import HpcvalError
from hpcval.figures import BETTER, stored_direction
from hpcval.paths import CHECKS_DIR, checks_dir
from hpcval.runreport import CaseResult as CaseResult
from hpcval.runreport import PerfValue as PerfValue
from hpcval.runreport import RunReport as RunReport
from hpcval.runreport import load_run_report as load_run_report
from hpcval.runreport import skip_reason as skip_reason


def num(value: Any) -> str:
    """A number to 3 significant digits, thousands separated, trailing zeros
    dropped: ``18,700``, ``912``, ``0.13``, ``1.23e-05``; ``-`` for no number."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    if not math.isfinite(value):
        return str(value)
    rounded = float(f"{value:.3g}")
    return f"{rounded:,.0f}" if abs(rounded) >= 1000 else f"{rounded:.3g}"


def pct(value: Any) -> str:
    """A relative change as a signed percentage: ``-24.6 %``."""
    return f"{100 * value:+.1f} %" if isinstance(value, int | float) else "-"


def band_text(p: PerfValue) -> str:
    """The contract band: ``>= 100 MB/s``, ``<= 0.5 us``, ``40,500 .. 49,500``."""
    lo, hi = p.bounds()
    if lo is None and hi is None:
        return "unbounded"
    if lo is None:
        return f"<= {num(hi)}"
    if hi is None:
        return f">= {num(lo)}"
    return f"{num(lo)} .. {num(hi)}"


# -- areas: the folders of reframe-checks/ ---------------------------------

#: The order areas are shown in when nothing failed.
AREAS = ("mpi", "memory", "io", "apps", "host")


def check_areas(checks_dir: Path) -> dict[str, str]:
    """Each check class of ``reframe-checks/<area>/*.py`` with its area
    (:func:`hpcval.checks.class_areas`)."""
    return checks.class_areas(checks_dir)


def area_of(check: str, filename: str | None, areas: dict[str, str]) -> str:
    """The area of a check: from the check files' classes, else the folder of
    the file ReFrame loaded it from, else ``other``."""
    if check in areas:
        return areas[check]
    if filename and Path(filename).parent.parent.name == CHECKS_DIR:
        return Path(filename).parent.name
    return "other"


# -- a run with its history ------------------------------------------------

@dataclass
class RunHistory:
    """What the results store knows around one run: its verdicts, each
    figure's series up to this run (with change points) and the previous run."""

    run_id: str
    result: str | None = None
    verdicts: dict[tuple[str, str], tuple[str, dict[str, Any]]] = field(default_factory=dict)
    series: dict[tuple[str, str], Any] = field(default_factory=dict)
    previous_id: str | None = None
    #: the previous run's cases: case key -> (result, {variable: (value, outcome)})
    previous: dict[str, tuple[str, dict[str, tuple[Any, str | None]]]] = \
        field(default_factory=dict)
    areas: dict[str, str] = field(default_factory=dict)
    site: str = ""

    @classmethod
    def load(cls, site: Any, run_id: str, report: RunReport) -> RunHistory:
        """From the site's results store (an empty history when it has none).
        A store that cannot be read raises :class:`hpcval.errors.StoreError`
        (exit 3 naming it): never a verdict without the history it needs."""
        from hpcval import trend
        from hpcval.errors import StoreError
        from hpcval.store import Store, case_key

        hist = cls(run_id, areas=check_areas(site.checks_dir), site=site.name)
        if not site.history_db.exists():
            return hist
        store = Store(site.history_db)
        try:
            runs = [r for r in store.runs()]
            order = {r["run_id"]: i for i, r in enumerate(runs)}
            if run_id not in order:
                return hist
            index = order[run_id]
            hist.result = runs[index]["result"]
            hist.verdicts = store.verdicts(run_id)
            keys = {case_key(c.display_name, c.system, c.partition, c.environ)
                    for c in report.cases}
            points = [p for pts in store.history_of(keys).values() for p in pts
                      if order.get(p.run_id, index + 1) <= index]
            hist.series = {(s.case_key, s.variable): s for s in trend.build(points)}
            if index > 0:
                prev = runs[index - 1]["run_id"]
                hist.previous_id = prev
                prev_verdicts = store.verdicts(prev)
                for row in store.run_figures(prev):
                    result, figs = hist.previous.setdefault(row["case_key"],
                                                            (row["case_result"], {}))
                    if row["variable"] is not None:
                        outcome = prev_verdicts.get((row["case_key"], row["variable"]))
                        figs[row["variable"]] = (row["value"], outcome and outcome[0])
        except StoreError:
            raise
        except HpcvalError:
            return cls(run_id, areas=hist.areas, site=site.name)
        return hist


#: How alarming an outcome is (lowest first in every list).
RANK = {"FAIL": 0, "regressed": 1, "unstable": 2, "interrupted": 3, "warn": 4,
        "inconclusive": 5, "improved": 6, "no-baseline": 7, "pass": 8, "SKIP": 9}
#: Outcomes that need a person's attention on the first screen.
ALARMS = ("FAIL", "regressed", "unstable")
#: A contract band this many run-to-run spreads (or more) from the values cannot fail.
LOOSE_SPREADS = 5.0
#: Without a measured spread, a band this many times from the value cannot fail.
LOOSE_FACTOR = 10.0


@dataclass
class Row:
    """One figure of one case as a person reads it (or one case that failed
    before any figure was measured: ``perf`` is None)."""

    case: CaseResult
    key: str
    area: str
    perf: PerfValue | None
    outcome: str
    detail: dict[str, Any]
    series: Any = None
    #: the figure's history outcome (``outcome`` says ``FAIL`` when its band failed)
    verdict: str | None = None

    @property
    def name(self) -> str:
        return self.perf.variable if self.perf else "-"

    @property
    def where(self) -> str:
        return f"{self.case.partition}+{self.case.environ}"

    def spread(self) -> float | None:
        """The run-to-run spread (sd of log run medians): the verdict's, else
        the one of the figure's accepted runs before this one (3 or more)."""
        spread = self.detail.get("spread")
        if isinstance(spread, int | float):
            return float(spread)
        if self.series is None:
            return None
        # the runs before this one: the spread this run is measured against
        logs = [math.log(m) for p, m in zip(self.series.points[:-1], self.series.medians[:-1],
                                            strict=True)
                if p.accepted and isinstance(m, float) and m > 0 and math.isfinite(m)]
        return statistics.stdev(logs) if len(logs) >= 3 else None

    def loose(self) -> bool:
        """The contract band cannot fail (see :func:`loose_band`)."""
        if self.perf is None:
            return False
        return loose_band(self.perf, self.direction(), self.spread())

    def direction(self) -> str | None:
        """The figure's declared direction: its verdict's, its stored series',
        else the one stored with its samples in this run (or its unit's,
        :func:`hpcval.figures.stored_direction`)."""
        better = self.detail.get("better") or (self.series.better if self.series else None)
        if better in BETTER or self.perf is None:
            return better
        stored = self.case.samples().get(self.perf.variable)
        return stored_direction(stored.get("better") if isinstance(stored, dict) else None,
                                self.perf.unit)

    def log(self) -> str | None:
        return log_path(self.case)


def loose_band(p: PerfValue, better: str | None, spread: float | None) -> bool:
    """The contract band on the figure's worse side lies more than
    :data:`LOOSE_SPREADS` run-to-run spreads (sd of log run medians) from the
    value, or is open on that side: the band cannot fail. ``better`` is the
    figure's declared direction; without one (a run stored without its
    samples, in a unit with no direction) the band's open side is taken as
    the better one. Before a spread can
    be measured (3 earlier runs), a bound :data:`LOOSE_FACTOR` times or more
    away from the value is loose (only a collapse of the figure fails it)."""
    if not isinstance(p.value, int | float) or p.value <= 0:
        return False
    lo, hi = p.bounds()
    better = better or ("lower" if lo is None and hi is not None else "higher")
    bound = lo if better == "higher" else hi
    if bound is None:
        return p.reference is not None  # judged, yet unbounded on its worse side
    if bound <= 0:
        return True
    if not spread:
        return abs(math.log(p.value / bound)) > math.log(LOOSE_FACTOR)
    return abs(math.log(p.value / bound)) > LOOSE_SPREADS * spread


def log_path(case: CaseResult) -> str | None:
    """The case's job output (ReFrame keeps the stage directory of a failed
    case, and copies a passed one's to its output directory)."""
    stdout = str(case.raw.get("job_stdout") or "")
    candidates = [Path(d) / stdout for d in (case.stagedir, case.outputdir) if d and stdout]
    candidates += [Path(d) for d in (case.stagedir, case.outputdir) if d]
    for path in candidates:
        if path.exists():
            return str(path)
    return str(candidates[0]) if candidates else None


def figure_rows(report: RunReport, history: RunHistory | None = None) -> list[Row]:
    """Every figure of the run (and every case failed before its figures),
    most alarming first, then by check."""
    from hpcval.store import case_key

    if history is None:
        history = RunHistory("")
        with contextlib.suppress(HpcvalError, OSError):
            history.areas = check_areas(checks_dir())
    rows = []
    for c in report.cases:
        key = case_key(c.display_name, c.system, c.partition, c.environ)
        area = area_of(c.check, c.raw.get("filename"), history.areas)
        if c.skipped or c.aborted:  # aborted by a stop: not run, not failed
            rows.append(Row(c, key, area, None, "SKIP", {}))
            continue
        if not c.perf or (not c.passed and all(p.value is None for p in c.perf)):
            rows.append(Row(c, key, area, None, "pass" if c.passed else "FAIL", {}))
            continue
        for p in c.perf:
            verdict, detail = history.verdicts.get((key, p.variable), (None, {}))
            outcome = "FAIL" if p.result == "fail" else verdict
            rows.append(Row(c, key, area, p, outcome or "pass", detail or {},
                            history.series.get((key, p.variable)), verdict))
    rows.sort(key=lambda r: (RANK.get(r.outcome, 5), r.case.display_name, r.where, r.name))
    return rows


def evidence(row: Row) -> str:
    """Why a row needs attention, in one line: the value against its band, or
    the change against the baseline with its interval, or the case's failure."""
    p, d = row.perf, row.detail
    if p is None:
        reason = (row.case.fail_reason or "no reason given").splitlines()[0]
        return f"{row.case.fail_phase}: {reason}" if row.case.fail_phase else reason
    if row.outcome == "FAIL":
        return (f"{p.variable} = {num(p.value)} {p.unit} is outside {band_text(p)} "
                f"(reference {num(p.reference)})")
    text = (f"{p.variable}: {num(d.get('baseline_median'))} -> {num(d.get('current_median'))} "
            f"{p.unit}, {pct(d.get('change'))}")
    if d.get("ci_low") is not None and d.get("ci_high") is not None:
        level = d.get("ci_level")
        text += (f" [{pct(d['ci_low'])} .. {pct(d['ci_high'])}]"
                 + (f" ({100 * level:.0f} %)" if isinstance(level, int | float) else ""))
    disp = d.get("dispersion")
    if row.verdict == "unstable" and isinstance(disp, dict):
        text += f", spread within the run x{num(disp.get('ratio'))} the baseline's"
    if d.get("family"):
        text += f", family {d['family']}"
    p_value = d.get("p_adjusted", d.get("p_value"))
    if row.verdict == "unstable" and isinstance(disp, dict):
        p_value = disp.get("p", p_value)  # the stability test's p
    if isinstance(p_value, int | float):
        text += f", p={p_value:.2g}"
    sustained = d.get("sustained")
    if isinstance(sustained, dict):
        runs = sustained.get("runs_after", sustained.get("runs"))
        text += f", sustained over the last {runs} runs" if runs else ", sustained"
    return text


def changes_since_previous(report: RunReport, history: RunHistory,
                           rows: list[Row]) -> list[str]:
    """What differs from the previous run: cases that started or stopped
    failing, figures whose outcome changed, cases new or gone."""
    if history.previous_id is None:
        return []
    out = []
    now: dict[str, str] = {}
    for r in rows:
        now.setdefault(r.key, r.case.result)
    for key, result in sorted(now.items()):
        before = history.previous.get(key)
        if before is None:
            out.append(f"new case {key} ({result})")
        elif before[0] != result and result != "skip" and before[0] != "skip":
            out.append(f"{key}: {before[0]} -> {result}")
    for key in sorted(set(history.previous) - set(now)):
        out.append(f"{key} not run (was {history.previous[key][0]})")
    for r in rows:
        if r.perf is None or r.key not in history.previous:
            continue
        before = history.previous[r.key][1].get(r.perf.variable)
        outcome = history.verdicts.get((r.key, r.perf.variable), (None,))[0]
        if before is not None and before[1] and outcome and before[1] != outcome:
            change = ""
            if isinstance(before[0], int | float) and before[0] and \
                    isinstance(r.perf.value, int | float):
                change = f", {num(before[0])} -> {num(r.perf.value)} {r.perf.unit}"
            out.append(f"{r.case.display_name} ({r.where}) {r.perf.variable}: "
                       f"{before[1]} -> {outcome}{change}")
    return out


def area_counts(rows: list[Row]) -> list[tuple[str, Counter[str], int, int]]:
    """Per area: outcome counts of its rows, how many cases it ran and how many
    figures they measured; areas with something wrong first."""
    counts: dict[str, Counter[str]] = {}
    cases: dict[str, set[str]] = {}
    figures: Counter[str] = Counter()
    for r in rows:
        counts.setdefault(r.area, Counter())[r.outcome] += 1
        cases.setdefault(r.area, set()).add(r.key)
        figures[r.area] += r.perf is not None

    def order(area: str) -> tuple[int, int]:
        worst = min((RANK.get(o, 5) for o in counts[area]), default=9)
        return (0 if worst < RANK["warn"] else 1,
                AREAS.index(area) if area in AREAS else len(AREAS))

    return [(a, counts[a], len(cases[a]), figures[a]) for a in sorted(counts, key=order)]


def run_verdict(report: RunReport, rows: list[Row], run_id: str = "",
                run_result: str | None = None) -> tuple[str, str]:
    """``("FAIL", "RESULT: FAIL  2 failed, 1 regressed, 0 unstable of 120 figures
    (run ...)")``: failed counts the cases that failed, regressed and unstable
    the figures' history outcomes (a figure outside its band may be regressed
    too); figures are those measured."""
    figures = [r for r in rows if r.perf is not None]
    failed = len(report.failures)
    alarms = Counter(r.verdict for r in figures)
    run = f" (run {run_id})" if run_id else ""
    not_run = (f"{len(report.not_run)} not run (aborted by the stop), "
               if report.not_run else "")
    if run_result == "interrupted":  # stored, never accepted into baselines
        return "FAIL", (f"RESULT: INTERRUPTED  {failed} failed, {not_run}"
                        f"{alarms['regressed']} regressed, {alarms['unstable']} unstable of "
                        f"{len(figures)} figures measured before it stopped{run}")
    if run_result == "orphaned":  # its hpcval died: never judged, never a baseline
        return "FAIL", (f"RESULT: ORPHANED  {failed} failed of {len(report.cases)} test cases "
                        f"that ran on after hpcval died; not judged{run}")
    if failed or alarms["regressed"] or alarms["unstable"]:
        return "FAIL", (f"RESULT: FAIL  {failed} failed, {alarms['regressed']} regressed, "
                        f"{alarms['unstable']} unstable of {len(figures)} figures{run}")
    outcomes = Counter(r.outcome for r in figures)
    parts = ", ".join(f"{outcomes[o]} {o}" for o in sorted(outcomes,
                                                             key=lambda o: RANK.get(o, 5)))
    return "PASS", f"RESULT: PASS  {len(figures)} figures: {parts or 'none'}{run}"


def verdict_table(report: RunReport, history: RunHistory | None = None) -> str:
    """What the terminal shows after ReFrame's log: the run's verdict first,
    then each failure on one line with the path of its log, the counts per
    area and the skips; the full table is in the HTML report and the JSON."""
    rows = figure_rows(report, history)
    _, line = run_verdict(report, rows, history.run_id if history else "",
                          history.result if history else None)
    out = [line]
    failed = [r for r in rows if r.outcome == "FAIL"]
    if failed:
        out.append("Failures:")
        for r in failed:
            log = r.log()
            out.append(f"  {r.case.display_name} ({r.where}): {evidence(r)}"
                       + (f"  log: {log}" if log else ""))
    areas = []
    for area, counts, n_cases, figures in area_counts(rows):
        bad = ", ".join(f"{counts[o]} {'skipped' if o == 'SKIP' else o.lower()}"
                        for o in (*ALARMS, "SKIP") if counts[o])
        areas.append(f"{area} {n_cases} case{'s' * (n_cases != 1)}, {figures} "
                     f"figure{'s' * (figures != 1)}"
                     + (f" ({bad})" if bad else ""))
    if areas:
        out.append("Areas: " + "; ".join(areas))
    loose = [r for r in rows if r.outcome != "FAIL" and r.loose()]
    if loose:
        out.append(f"Loose contracts: {len(loose)} figure(s) whose band lies more than "
                   f"{LOOSE_SPREADS:g} run-to-run spreads (or {LOOSE_FACTOR:g}x) from the "
                   "values cannot fail; tighten with `hpcval references capture "
                   "--from-history`")
    skips = report.skip_reasons()
    if skips:
        out.append("Skipped:")
        out += [f"  {n} x {reason}" for reason, n in skips]
    return "\n".join(out) + f"\n{report.headline()}\n"


def _plot_case(case: CaseResult, name: str, spec: dict[str, Any]) -> list[str]:
    """One log-log SVG panel per column of a recorded series, with each judged
    point and its reference band."""
    perf = {p.variable: p for p in case.perf}
    panels = []
    for label, col in spec.get("columns", {}).items():
        judged = []
        for var, where in spec.get("judged", {}).items():
            p = perf.get(var)
            if p is None or where.get("column") != label:
                continue
            lo, hi = p.bounds()
            judged.append(svgplot.Judged(float(where.get("x", 0)), p.value, lo, hi,
                                         p.result != "fail"))
        svg = svgplot.panel(f"{name}: {label}",
                            f"{spec.get('x_label', 'x')} [{spec.get('x_unit', '')}]",
                            f"{label} [{col.get('unit', '')}]",
                            [(float(x), y) for x, y in col.get("points", [])], judged)
        if svg:
            panels.append(svg)
    return panels


PAGE_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:1.2em auto;padding:0 1em;color:#222;max-width:1360px}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.15em;margin:1.2em 0 .4em}
p,li,h2,h3{overflow-wrap:anywhere}#areas td{overflow-wrap:normal}#areas{overflow-x:auto}
@media(max-width:480px){td,th{padding:.2em .35em}}
table{border-collapse:collapse;font-size:.9em;max-width:100%}
td,th{border:1px solid #ccc;padding:.25em .6em;overflow-wrap:anywhere;text-align:left}
th{background:#f0f0f0;white-space:nowrap;overflow-wrap:normal}td.num{text-align:right}
.num{font-variant-numeric:tabular-nums}
.PASS,.pass{color:#176a1d}.FAIL,.ERROR,.regressed,.unstable{color:#b00020;font-weight:bold}
.warn,.inconclusive,.interrupted{color:#8a5a00}.improved{color:#0b5394}
.no-baseline,.SKIP{color:#666}
.banner{font-size:1.15em;padding:.5em .8em;border-radius:4px;font-weight:bold;margin:.4em 0;
overflow-wrap:anywhere}
.banner.PASS{background:#e3f4e4}.banner.FAIL{background:#fbe3e6;color:#7a0015}
ul.attn{padding-left:1.2em;margin:.3em 0}ul.attn li{margin:.2em 0;overflow-wrap:anywhere}
.facts{font-size:.85em;color:#555;overflow-wrap:anywhere}
pre{background:#f7f7f7;padding:.5em;white-space:pre-wrap;overflow-wrap:anywhere}
.plots{display:flex;flex-wrap:wrap;gap:1em}
figure{margin:0 0 1.5em 0;max-width:100%}svg{max-width:100%;height:auto}
figcaption{font-size:.85em;max-width:640px;overflow-wrap:anywhere}
.figs{border-top:1px solid #ccc;font-size:.9em}
.fig{border-bottom:1px solid #e4e4e4}
.fig>summary,.fighead{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,.6fr)
minmax(0,.8fr) minmax(0,1.2fr) minmax(0,1.3fr) minmax(0,1.2fr) minmax(0,.9fr) 124px;
gap:.2em .6em;align-items:center;padding:.25em .3em;list-style:none;cursor:pointer}
.fig>summary::-webkit-details-marker{display:none}
.fig>summary:hover{background:#f6f8fb}.fig[open]>summary{background:#eef3fa}
.fighead{font-weight:bold;background:#f0f0f0;cursor:default}
.fig>summary>span{overflow-wrap:anywhere;min-width:0}
.fig .sub{display:block;color:#666;font-size:.85em}
.loose{display:block;color:#8a5a00;font-size:.8em}
.fig>.plot{padding:.4em 0 .8em}
.spark{display:block}
.fighead button{font:inherit;border:0;background:none;padding:0;cursor:pointer;text-align:left}
@media (max-width:760px){
 body{padding:0 .5em;margin:.5em auto}
 .fighead{display:none}
 .fig>summary{grid-template-columns:minmax(0,1fr) minmax(0,1fr)}
 .fig>summary>span:first-child{grid-column:1/3}
 .fig>summary>span[data-l]::before{content:attr(data-l) ": ";color:#777}
 table{font-size:.8em}
}
"""

#: Full plots are kept in ``<template>`` elements and drawn only when their
#: row is opened; the figures' list is sorted by a header's button.
PAGE_JS = """
document.addEventListener('toggle',function(e){var d=e.target;if(!d.open)return;
var t=d.querySelector(':scope>template');if(t){d.appendChild(t.content.cloneNode(true));
t.remove();}},true);
function hpcvalSort(b){var list=document.getElementById(b.dataset.list),k=b.dataset.key,
dir=b.dataset.dir==='1'?-1:1;b.dataset.dir=dir===1?'1':'0';
var rows=Array.prototype.slice.call(list.querySelectorAll(':scope>details'));
rows.sort(function(x,y){var a=x.dataset[k],c=y.dataset[k],p=parseFloat(a),q=parseFloat(c);
if(!isNaN(p)&&!isNaN(q))return dir*(p-q);return dir*a.localeCompare(c);});
rows.forEach(function(r){list.appendChild(r);});}
"""

_COLOURS = {"FAIL": "#d62728", "regressed": "#d62728", "unstable": "#d62728",
            "warn": "#b07800", "inconclusive": "#b07800", "improved": "#1f77b4"}


@dataclass
class FigureView:
    """One figure as a row of the report's and the trend page's figure lists."""

    name: str
    sub: str
    unit: str
    value: str
    band: str
    history_band: str
    change: str
    outcome: str
    series: Any = None
    bands: list[tuple[float | None, float | None, str, str]] = field(default_factory=list)
    loose: bool = False
    data: dict[str, str] = field(default_factory=dict)


HEADINGS = ("figure", "unit", "value", "contract band", "history band", "change", "outcome",
            "runs")


def figure_list_html(views: list[FigureView], list_id: str, sortable: bool = False) -> str:
    """Figures as rows (``<details>``: the row opens to the full plot)."""
    esc = html.escape
    head = []
    for h in HEADINGS:
        key = {"change": "change", "outcome": "rank", "figure": "name"}.get(h)
        if sortable and key:
            head.append(f"<span><button type='button' data-list='{list_id}' data-key='{key}' "
                        f"onclick='hpcvalSort(this)'>{h} &#8645;</button></span>")
        else:
            head.append(f"<span>{h}</span>")
    parts = [f"<div class='figs' id='{esc(list_id)}'><div class='fighead'>{''.join(head)}</div>"]
    for v in views:
        from hpcval import trend

        spark, plot = "", ""
        if v.series is not None and v.series.points:
            colour = _COLOURS.get(v.outcome, "#1f77b4")
            spark = svgplot.sparkline(v.series.medians,
                                      [cp.index for cp in v.series.change_points], colour)
            plot = trend.plot(v.series, v.bands, compact=True)
        data = "".join(f" data-{k}='{esc(str(val))}'" for k, val in v.data.items())
        loose = ("<span class='loose'>cannot fail; tighten with <code>hpcval references "
                 "capture --from-history</code></span>" if v.loose else "")
        cells = [
            f"<span><b>{esc(v.name)}</b><span class='sub'>{esc(v.sub)}</span></span>",
            f"<span data-l='unit'>{esc(v.unit)}</span>",
            f"<span class='num' data-l='value'>{esc(v.value)}</span>",
            f"<span class='num' data-l='contract'>{esc(v.band)}{loose}</span>",
            f"<span class='num' data-l='history'>{esc(v.history_band)}</span>",
            f"<span class='num' data-l='change'>{esc(v.change)}</span>",
            f"<span class='{esc(v.outcome)}' data-l='outcome'>{esc(v.outcome)}</span>",
            f"<span>{spark}</span>",
        ]
        body = (f"<template><div class='plot'>{plot}</div></template>" if plot
                else "<div class='plot'>no history to plot</div>")
        parts.append(f"<details class='fig'{data}><summary>{''.join(cells)}</summary>"
                     f"{body}</details>")
    parts.append("</div>")
    return "".join(parts)


def history_band(detail: dict[str, Any], spread: float | None) -> str:
    """Baseline level and run-to-run spread: ``18,700 ± 1.5 % (5 runs)``."""
    level = detail.get("baseline_median")
    if not isinstance(level, int | float):
        return "-"
    runs = detail.get("level_runs", detail.get("baseline_runs"))
    text = f"{num(level)} ± {100 * spread:.1f} %" if spread else num(level)
    return text + (f" ({runs} run{'s' * (runs != 1)})" if isinstance(runs, int) else "")


def _view(r: Row) -> FigureView:
    p, d = r.perf, r.detail
    assert p is not None
    spread = r.spread()
    change = pct(d.get("change"))
    if d.get("ci_low") is not None and d.get("ci_high") is not None:
        change += f" [{pct(d['ci_low'])} .. {pct(d['ci_high'])}]"
    bands: list[tuple[float | None, float | None, str, str]] = []
    lo, hi = p.bounds()
    if lo is not None or hi is not None:
        bands.append((lo, hi, "#2ca02c", "contract band"))
    level = d.get("baseline_median")
    if isinstance(level, int | float) and spread:
        bands.append((level * math.exp(-2 * spread), level * math.exp(2 * spread), "#1f77b4",
                      "history band (±2 spreads)"))
    return FigureView(p.variable, f"{r.case.display_name} · {r.where}", p.unit, num(p.value),
                      band_text(p), history_band(d, spread), change, r.outcome, r.series,
                      bands, r.outcome != "FAIL" and r.loose())


def render_html(report: RunReport, extra_sections: list[str] | None = None,
                history: RunHistory | None = None) -> str:
    """A self-contained HTML page. Its first screen: the run's verdict, what
    failed, regressed or became unstable (with evidence and its log), what
    changed since the previous run, the counts per area. Then one section per
    area, failures first, a row per figure."""
    s = report.session
    esc = html.escape
    rows = figure_rows(report, history)
    verdict, line = run_verdict(report, rows, history.run_id if history else "",
                                history.result if history else None)
    facts = [
        ("host", s.get("hostname")), ("started", s.get("time_start")),
        ("elapsed", f"{s.get('time_elapsed', 0):.1f} s" if s.get("time_elapsed") else None),
        ("ReFrame", s.get("version")), ("command", s.get("cmdline")),
        ("run report", str(report.path)),
    ]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>hpcval {esc(verdict)} {esc(str(s.get('time_start', '')))}</title>",
        f"<style>{PAGE_CSS}</style></head><body>",
        "<h1>hpcval validation report</h1>",
        f"<p class='banner {verdict}' id='verdict'>{esc(line)}</p>",
        f"<p class='facts'>{esc(report.headline())} · "
        + " · ".join(f"{esc(k)}: {esc(str(v))}" for k, v in facts if v) + "</p>",
    ]
    alarms = [r for r in rows if r.outcome in ALARMS]
    parts.append("<section id='attention'><h2>Needs attention</h2>")
    if alarms:
        parts.append("<ul class='attn'>")
        for r in alarms:
            log = r.log()
            link = (f" <a href='{esc(Path(log).as_uri())}'>log</a>"
                    if log and Path(log).is_absolute() else "")
            parts.append(f"<li><span class='{esc(r.outcome)}'>{esc(r.outcome.upper())}</span> "
                         f"{esc(r.case.display_name)} ({esc(r.where)}): {esc(evidence(r))}"
                         f"{link}</li>")
        parts.append("</ul>")
    else:
        parts.append("<p>Nothing failed, regressed or became unstable.</p>")
    parts.append("</section>")
    if history is not None and history.previous_id is not None:
        changed = changes_since_previous(report, history, rows)
        parts.append(f"<section id='changes'><h2>Since the previous run "
                     f"({esc(history.previous_id)})</h2>")
        if changed:
            parts.append("<ul class='attn'>" + "".join(f"<li>{esc(c)}</li>"
                                                       for c in changed[:30]) + "</ul>")
            if len(changed) > 30:
                parts.append(f"<p>and {len(changed) - 30} more.</p>")
        else:
            parts.append("<p>No case changed its result, no figure its outcome.</p>")
        parts.append("</section>")
    counts = area_counts(rows)
    shown = [o for o in sorted({o for _, c, _, _ in counts for o in c},
                               key=lambda o: RANK.get(o, 5))]
    parts.append("<section id='areas'><h2>Areas</h2><table><tr><th>area</th><th>cases</th>"
                 "<th>figures</th>" + "".join(f"<th>{esc(o)}</th>" for o in shown) + "</tr>")
    for area, c, n_cases, n_figs in counts:
        parts.append(f"<tr><td><a href='#area-{esc(area)}'>{esc(area)}</a></td>"
                     f"<td class='num'>{n_cases}</td><td class='num'>{n_figs}</td>"
                     + "".join(f"<td class='num {esc(o) if c[o] else ''}'>{c[o]}</td>"
                               for o in shown) + "</tr>")
    parts.append("</table></section>")
    loose = sum(1 for r in rows if r.perf is not None and r.outcome != "FAIL" and r.loose())
    if loose:
        parts.append(f"<p class='warn'>{loose} contract band(s) lie more than "
                     f"{LOOSE_SPREADS:g} run-to-run spreads (or {LOOSE_FACTOR:g}x, before a "
                     "spread is measured) from the values: they cannot fail; tighten with "
                     "<code>hpcval references capture --from-history</code> "
                     "(docs/references.md).</p>")
    for area, _, _, _ in counts:
        area_rows = [r for r in rows if r.area == area]
        parts.append(f"<section><h2 id='area-{esc(area)}'>{esc(area)}</h2>")
        failed_cases = [r for r in area_rows if r.perf is None and r.outcome == "FAIL"]
        for r in failed_cases:
            parts.append(f"<p class='FAIL'>{esc(r.case.display_name)} ({esc(r.where)}) failed "
                         f"before its figures: {esc(evidence(r))}</p>")
        views = [_view(r) for r in area_rows if r.perf is not None]
        if views:
            parts.append(figure_list_html(views, f"figs-{area}"))
        parts.append("</section>")
    plots = []
    for case in sorted(report.cases, key=lambda c: (c.display_name, c.environ)):
        for name, spec in case.series().items():
            panels = _plot_case(case, name, spec)
            if panels:
                plots.append(f"<figure><div class='plots'>{''.join(panels)}</div><figcaption>"
                             f"{esc(case.display_name)} on {esc(case.partition)}+"
                             f"{esc(case.environ)} ({esc(case.mpi_stack)}). Diamonds: judged "
                             "figures (red: failed); shaded: reference band; sizes of 0 B are "
                             "judged but not drawn on the log axis.</figcaption></figure>")
    if plots:
        parts.append("<h2>Measured series</h2>" + "".join(plots))
    parts.extend(sizereport.sizes_html(report.cases))
    skips = report.skip_reasons()
    if skips:
        parts.append("<h2>Skipped</h2><table><tr><th>cases</th><th>reason</th></tr>"
                     + "".join(f"<tr><td class='num'>{n}</td><td>{esc(reason)}</td></tr>"
                               for reason, n in skips) + "</table>")
    fails = [c for c in report.failures if c.fail_reason]
    if fails:
        parts.append("<h2>Failures</h2>")
        for c in fails:
            parts.append(f"<h3>{esc(c.display_name)} ({esc(c.environ)}), phase "
                         f"{esc(str(c.fail_phase))}</h3><pre>{esc(c.fail_reason or '')}</pre>")
    parts.extend(extra_sections or [])
    parts.append(f"<script>{PAGE_JS}</script></body></html>")
    return "\n".join(parts)


def write_html(report: RunReport, out: str | Path,
               extra_sections: list[str] | None = None,
               history: RunHistory | None = None) -> Path:
    """Write the HTML report atomically (never a half-written file)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        tmp.write_text(render_html(report, extra_sections, history))
        tmp.replace(out)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise HpcvalError(f"{out}: cannot write the HTML report: {err.strerror}") from None
    return out
