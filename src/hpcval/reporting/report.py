"""Results a person reads: the rows of a run's figures and the verdict table
printed at the end of a run (the HTML report is :mod:`hpcval.reporting.htmlreport`).

Both are rendered from ReFrame's JSON run report (``var/<site>/reports/``),
so a report can be made again at any time from stored results. Nothing here
imports ReFrame or matplotlib.
"""

from __future__ import annotations

import contextlib
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.errors import HpcvalError
from hpcval.core.figures import BETTER, stored_direction
from hpcval.core.paths import CHECKS_DIR, checks_dir
from hpcval.history.judging.change import Change
from hpcval.history.runreport import CaseResult as CaseResult
from hpcval.history.runreport import PerfValue as PerfValue
from hpcval.history.runreport import RunReport as RunReport
from hpcval.history.runreport import load_run_report as load_run_report
from hpcval.history.runreport import skip_reason as skip_reason
from hpcval.site import checks


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


def change_text(detail: dict[str, Any]) -> str:
    """A stored verdict's change with its interval, as every surface prints it
    (:meth:`hpcval.history.judging.change.Change.text`); ``-`` without one."""
    change = Change.from_detail(detail)
    return change.text() if change is not None else "-"


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
    (:func:`hpcval.site.checks.class_areas`)."""
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
        A store that cannot be read raises :class:`hpcval.core.errors.StoreError`
        (exit 3 naming it): never a verdict without the history it needs."""
        from hpcval.core.errors import StoreError
        from hpcval.history.store import Store, case_key
        from hpcval.reporting import trend

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
        :func:`hpcval.core.figures.stored_direction`)."""
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
    from hpcval.history.store import case_key

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
        text = (f"{p.variable} = {num(p.value)} {p.unit} is outside {band_text(p)} "
                f"(reference {num(p.reference)})")
        if row.verdict and row.verdict not in ("pass", "no-baseline"):
            text += f"; history: {row.verdict} {change_text(d)}"
        return text
    text = (f"{p.variable}: {num(d.get('baseline_median'))} -> {num(d.get('current_median'))} "
            f"{p.unit}, {change_text(d)}")
    disp = d.get("dispersion")
    grown = d.get("run_spread")
    if row.verdict == "unstable" and isinstance(grown, dict):  # the runs scatter more
        disp = {"p": grown.get("p")}
        text += (f", run-to-run spread x{num(grown.get('ratio'))} [{num(grown.get('low'))} .. "
                 f"{num(grown.get('high'))}] since {grown.get('since')}")
    elif row.verdict == "unstable" and isinstance(disp, dict):
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
        if sustained.get("since"):
            text += f", sustained since {sustained['since']} ({runs} runs)"
        else:
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


#: The area count of a case ReFrame aborted when the run was stopped.
NOT_RUN = "not run"


def area_counts(rows: list[Row]) -> list[tuple[str, Counter[str], int, int]]:
    """Per area: outcome counts of its rows, how many cases it ran and how many
    figures they measured; areas with something wrong first."""
    counts: dict[str, Counter[str]] = {}
    cases: dict[str, set[str]] = {}
    figures: Counter[str] = Counter()
    for r in rows:  # a case aborted by a stop is not run, not skipped
        counts.setdefault(r.area, Counter())[NOT_RUN if r.case.aborted else r.outcome] += 1
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
    if report.all_skipped:  # nothing measured: never a PASS (reasons under "Skipped:")
        return "FAIL", (f"RESULT: NOTHING VALIDATED  every one of the {len(report.cases)} "
                        f"test case(s) was skipped{run}")
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
                        for o in (*ALARMS, "SKIP", NOT_RUN) if counts[o])
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
