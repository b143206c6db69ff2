"""A run against its history: store it, judge every figure, say what changed.

After ReFrame has run, :func:`store_and_judge` stores the run in the site's
results store (:mod:`hpcval.history.store`) with its samples and provenance, then
judges every figure of every passed case against the same figure in the last
K accepted runs of the same case (:mod:`hpcval.history.judging`, settings in
``site-configs/<site>/judging.yaml``). The verdicts are stored with the run and
shown beside the reference bands; ``regressed`` fails the run. A regressed run
is not accepted into later baselines until a person accepts it
(``hpcval history accept RUN``).
"""

from __future__ import annotations

import json
import math
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from hpcval.core.errors import HpcvalError, StoreError
from hpcval.core.fileio import atomic_write
from hpcval.history.store import HistoryPoint, Store, records_from_report
from hpcval.reporting.report import RunReport
from hpcval.run import procs
from hpcval.run.holds import (
    _held_text,
    _release_holds,
    _update_saved,
    _verdicts_file,
    figure_name,
    hold_reasons,
)
from hpcval.run.verdicttext import (
    LOUD,
    SANE_THRESHOLD,
    _inconclusive_line,
    _num,
    _pct,
    describe,
    sustained_text,
    verdict_text,
)
from hpcval.site import Site

#: re-exported: callers read them here
__all__ = ["FAILING", "INTERRUPTED_TEXT", "LOUD", "ORPHANED_TEXT", "QUIET", "SANE_THRESHOLD",
           "Judged", "_held_text", "_inconclusive_line", "_num", "_pct", "_release_holds",
           "_update_saved", "_verdicts_file", "baselines", "describe", "figure_name",
           "hold_reasons", "mark_interrupted", "mark_orphaned", "provenance", "store_and_judge",
           "stored", "sustained_text", "verdict_text", "window", "write_recorded_contract"]

#: Outcomes that say nothing is wrong with a figure.
QUIET = {"pass", "no-baseline"}
#: Outcomes that fail the run (``unstable`` unless judging.yaml says
#: ``unstable_fails: false``).
FAILING = {"regressed", "unstable"}


@dataclass
class Judged:
    """What judging a run produced, for the console, the HTML and the exit code."""

    text: str = ""
    html_sections: list[str] = field(default_factory=list)
    regressed: bool = False
    store_error: HpcvalError | None = None
    verdicts: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)


def provenance(report: RunReport) -> dict[str, Any]:
    """Where and on what a run ran, beyond what ReFrame's report says: this
    host's kernel and machine, and what the site config declares in its
    partitions' ``extras.provenance`` (e.g. the lab's fabric profile), as
    the run's checks recorded it (``site_provenance``)."""
    declared: dict[str, Any] = {}
    for case in report.cases:
        recorded = case.raw.get("site_provenance")
        if isinstance(recorded, dict):
            declared.update(recorded)
    return {"kernel": platform.release(), "machine": platform.machine(), **declared}


def window(points: list[HistoryPoint], n: int, level_runs: frozenset[str] = frozenset()
           ) -> tuple[list[list[float]], list[int]]:
    """Samples of the last ``n`` accepted runs of one figure (oldest first: the
    spread's window, the level from its last K) and the indexes where a new level
    begins: a run judged ``regressed``, or held (``level_runs``), that a person
    accepted (``hpcval history --accept``) starts one; the spread is pooled
    within levels."""
    accepted = [p for p in points if p.accepted and p.measured and p.samples][-n:]
    starts = [i for i, p in enumerate(accepted)
              if i > 0 and (p.run_result == "regressed" or p.run_id in level_runs)]
    return [p.samples for p in accepted], starts


def baselines(points: list[HistoryPoint], k: int) -> list[list[float]]:
    """Samples of the last ``k`` accepted runs of one figure (oldest first):
    runs not left out of baselines, in which the figure was measured (its case
    passed, or failed only its reference band)."""
    accepted = [p for p in points if p.accepted and p.measured and p.samples]
    return [p.samples for p in accepted[-k:]]


def _as_dict(v: Any, unit: str) -> dict[str, Any]:
    d = {k: getattr(v, k) for k in ("better", "baseline_median", "current_median", "change",
                                    "ci_low", "ci_high", "p_value", "p_adjusted", "note",
                                    "threshold", "baseline_runs", "samples", "family",
                                    "spread", "spread_runs", "level_runs", "dispersion",
                                    "ci_level", "statistic", "slow_share")}
    d["unit"] = unit
    if v.needed is not None:
        d["needed"] = v.needed._asdict()
    return d


def _medians(points: list[HistoryPoint], current: list[float], run_id: str,
             level_runs: frozenset[str] = frozenset(), pending: frozenset[str] = frozenset(),
             verdict: Any = None, baseline: Sequence[Sequence[float]] = (),
             alpha: float = 0.05, rejected: frozenset[str] = frozenset()
             ) -> tuple[list[float], list[str]]:
    """Run values of a figure since its last accepted level, oldest first, this
    run last, with their run ids (what the sustained rule reads: docs/judging.md):
    the statistic its ``verdict`` judged (the median, or the fast mode of a
    two-moded figure, against the ``baseline`` window's slow-mode share:
    ``judging.modes.run_values``; a run whose fast level is unknown is left out,
    and when it is this run the series is empty). Every measured run counts,
    the ones called ``regressed``, ``unstable`` or held and not yet decided
    (``pending``) included (a sustained cut is called run after run and must
    still add up); runs a person left out (``rejected``: ``hpcval history
    --reject``), held runs the old level came back after, and interrupted runs
    do not."""
    from hpcval.history.judging.modes import run_values

    kept = [p for p in points if p.measured and p.samples and p.run_id not in rejected
            and (p.accepted or p.run_result in ("regressed", "unstable")
                 or p.run_id in pending)]
    # a run judged `regressed` (or held) that a person then accepted (`hpcval
    # history --accept`) is the first run of a new level: the step before it is
    # acknowledged, so the rule looks only at the runs from there on
    for i in range(len(kept) - 1, -1, -1):
        if kept[i].accepted and (kept[i].run_result == "regressed"
                                 or kept[i].run_id in level_runs):
            kept = kept[i:]
            break
    statistic = getattr(verdict, "statistic", "median")
    share = getattr(verdict, "slow_share", None)
    split_at = share.get("split") if isinstance(share, dict) else None
    better = getattr(verdict, "better", "higher")
    values = run_values([p.samples for p in kept] + [current], better, statistic, split_at,
                        baseline, alpha)
    if values[-1] is None:
        return [], []
    ids = [p.run_id for p in kept] + [run_id]
    pairs = [(v, i) for v, i in zip(values, ids, strict=True) if v is not None]
    return [v for v, _ in pairs], [i for _, i in pairs]


def store_and_judge(site: Site, run_id: str, report: RunReport, record: bool = False,
                    tags: Mapping[str, str] | None = None) -> Judged:
    """Store the run (with ``tags``, ``validate --tag``); unless ``record``,
    judge it and store the verdicts."""
    judged = Judged()
    store = Store(site.history_db)
    run = records_from_report(report, run_id, site.name, _with_tags(provenance(report), tags))
    try:
        store.add_run(run)
        if tags:
            # the tags beside the run report too (`hpcval store rebuild` reads them
            # there); a judged run writes them again with its verdicts below
            _write_verdicts(site, run_id, {"result": run.result, "accepted": run.accepted,
                                           "verdicts": [], **_tags_entry(tags)})
    except HpcvalError as err:  # the store, or the file beside the report
        judged.store_error = err
        return judged
    procs.pause("judging")  # a test hook (HPCVAL_TEST_PAUSE); nothing otherwise
    if record:
        judged.text = ("\nRecorded: nothing judged (--record); every figure is stored with "
                       "its samples in the site's history.\n")
        try:  # the mark `store rebuild` imports a run by: hpcval stored it
            atomic_write(_verdicts_file(site, run_id),
                         json.dumps({"result": run.result, "accepted": run.accepted,
                                     "recorded": True, "verdicts": [], **_tags_entry(tags)},
                                    indent=1),
                         "writing the run's verdicts")
        except HpcvalError as err:
            judged.store_error = err
        return judged
    from hpcval.history import judging

    try:
        settings = site.load_judging()
        holds = store.holds()
        level_runs = frozenset(r for r, h in holds.items() if h.get("state") == "accepted")
        pending = frozenset(r for r, h in holds.items() if h.get("state") == "held")
        rejected = frozenset(r for r, h in holds.items() if h.get("state") == "rejected")
        figures: dict[str, Any] = {}
        where: dict[str, tuple[str, str, str, list[HistoryPoint], list[float], str]] = {}
        histories = store.history_of((c.key for c in run.cases), before=run_id)
        for case in run.cases:
            if case.result != "pass" and case.fail_phase != "performance":
                continue  # failed before its figures: judged by its failure alone
            for fig in case.figures:
                if not fig.samples:
                    continue
                name = figure_name(case.key, fig.variable)
                fs = settings.for_figure(name)
                hist = histories.get((case.key, fig.variable), [])
                runs, starts = window(hist, max(fs.spread_runs, fs.k), level_runs)
                figures[name] = judging.FigureData(runs, fig.samples, fig.better, fig.unit,
                                                   starts)
                where[name] = (case.key, fig.variable, fig.unit, hist, fig.samples, fig.better)
        results = judging.judge_run(figures, settings)
        # a worse level held over the last runs: Page's CUSUM on each family's
        # self-started scores (docs/judging.md)
        sustained = _sustained(judging, figures, where, settings, run_id, level_runs,
                               pending, results, rejected)
    except StoreError as err:
        judged.store_error = err
        return judged
    for name, verdict in results.items():
        case_key, variable, unit, hist, current, better = where[name]
        outcome, detail = verdict.outcome, _as_dict(verdict, unit)
        cp = sustained.get(name)
        if cp is not None and outcome == "regressed" and cp.get("runs_after", 0) < 2:
            cp = None  # called on its own: one run is no "sustained since" (itself)
        if cp is not None and _back(detail.get("current_median"), cp):
            cp = None  # this run is nearer the old level than the worse one: it came back
        if cp is not None and outcome != "no-baseline":
            # the figure has stayed beyond its old level since run cp["since"]
            detail["sustained"] = cp
            if outcome != "regressed":
                outcome = "regressed"
                detail["note"] = (f"sustained: the level moved from {cp['before']:.4g} to "
                                  f"{cp['after']:.4g} {unit} ({100 * cp['change']:+.1f} %) "
                                  f"over the last {cp['runs_after']} runs (CUSUM "
                                  f"{cp['cusum']:.1f} > {cp['limit']:g}; Welch p = "
                                  f"{cp['p']:.2g})")
        judged.verdicts.append((case_key, variable, outcome, detail))
    failing = FAILING if settings.unstable_fails else {"regressed"}
    judged.regressed = any(o in failing for _, _, o, _ in judged.verdicts)
    result = run.result
    if judged.regressed:
        result = ("regressed" if any(o == "regressed" for _, _, o, _ in judged.verdicts)
                  else "unstable")
    reasons = [] if judged.regressed or not run.accepted else hold_reasons(judged.verdicts,
                                                                           settings)
    hold = ({"state": "held", "reasons": [r for r, _ in reasons],
             "figures": [list(f) for _, f in reasons]} if reasons else None)
    accepted = run.accepted and not judged.regressed and hold is None
    released: list[str] = []
    try:
        store.set_verdicts(run_id, judged.verdicts, result, accepted=accepted)
        saved: dict[str, Any] = {"result": result, "accepted": accepted,
                                 "verdicts": judged.verdicts, **_tags_entry(tags)}
        if hold is not None:
            store.set_hold(run_id, hold)
            saved["held"] = hold
        atomic_write(_verdicts_file(site, run_id), json.dumps(saved, indent=1, default=str),
                     "writing the run's verdicts")
        if hold is None:
            released = _release_holds(site, store, holds, run_id, judged.verdicts)
    except HpcvalError as err:
        judged.store_error = err
    judged.text = (verdict_text(judged.verdicts) + _held_text(site, run_id, hold)
                   + "".join(f"run {r}: stays out of baselines: this run is at the old level "
                             "of the figures it was held for\n" for r in released)
                   + _unmatched_text(site, settings, where))
    # the HTML report draws every figure's row and history from the store
    # (hpcval.reporting.report.RunHistory): no section of its own here
    return judged


def _with_tags(prov: dict[str, Any], tags: Mapping[str, str] | None) -> dict[str, Any]:
    return {**prov, "tags": dict(tags)} if tags else prov


def _tags_entry(tags: Mapping[str, str] | None) -> dict[str, Any]:
    return {"tags": dict(tags)} if tags else {}


def _write_verdicts(site: Site, run_id: str, data: dict[str, Any]) -> None:
    atomic_write(_verdicts_file(site, run_id), json.dumps(data, indent=1, default=str),
                 "writing the run's verdicts")



def _back(current: Any, cp: Mapping[str, Any]) -> bool:
    """Whether this run's value lies nearer the level before a sustained move
    than the level after it (log scale): the figure came back, and the run is
    not called for the runs before it."""
    before, after = cp.get("before"), cp.get("after")
    if not all(isinstance(v, int | float) and v > 0 for v in (current, before, after)):
        return False
    here = math.log(current)
    return abs(here - math.log(before)) < abs(here - math.log(after))


def _sustained(judging: Any, figures: Mapping[str, Any], where: Mapping[str, Any],
               settings: Any, run_id: str, level_runs: frozenset[str],
               pending: frozenset[str], results: Mapping[str, Any],
               rejected: frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """Figures of the families whose CUSUM is beyond its limit at this run, with
    the run since which they stayed beyond their old level (``since``); each
    figure's runs read through the statistic its verdict judged."""
    series = {name: _medians(w[3], w[4], run_id, level_runs, pending, results.get(name),
                             figures[name].baseline_runs, settings.for_figure(name).alpha,
                             rejected)
              for name, w in where.items()}
    medians = {name: (m, where[name][5]) for name, (m, _) in series.items()}
    found = judging.sustained_families(judging.families(figures, settings), medians, settings)
    for name, cp in found.items():
        ids = series[name][1]
        cp["since"] = ids[max(len(ids) - int(cp["runs_after"]), 0)]
    return found


def _unmatched_text(site: Site, settings: Any, names: Mapping[str, Any]) -> str:
    """A note for each ``figures:`` or ``families:`` glob of judging.yaml that
    matched no figure of the run (a typo, or a name written as
    ``<check>/<variable>`` without the parameters and the partition), naming
    the key it is under, with one real name to copy."""
    if not names:
        return ""
    return "".join(f"note: {site.judging}: {key}: '{pattern}' matches no figure of this "
                   f"run (figures are named like '{next(iter(names))}')\n"
                   for key, pattern in settings.unmatched(names))


#: what an interrupted run says after its verdict table
INTERRUPTED_TEXT = ("\nInterrupted: the figures of the test cases that finished are judged "
                    "against the site's references only; the run is stored as `interrupted` "
                    "and never counts in a baseline.\n")


def mark_interrupted(site: Site, run_id: str, report: RunReport, stored: bool = False,
                     tags: Mapping[str, str] | None = None) -> Judged:
    """Store a run stopped by a signal as ``interrupted``, never accepted into
    baselines (``stored``: it was stored and maybe judged before the signal;
    its verdicts are kept, its result becomes ``interrupted``). The mark is
    written beside the run report too, so ``hpcval store rebuild`` keeps it."""
    judged = Judged(text=INTERRUPTED_TEXT)
    store = Store(site.history_db)
    path = _verdicts_file(site, run_id)
    try:
        if stored:
            try:
                judged.verdicts = [tuple(v) for v in  # type: ignore[misc]
                                   json.loads(path.read_text()).get("verdicts", [])]
            except (OSError, ValueError):
                judged.verdicts = []
        else:
            run = records_from_report(report, run_id, site.name,
                                      _with_tags(provenance(report), tags))
            run.result, run.accepted = "interrupted", False
            store.add_run(run)
        store.set_verdicts(run_id, judged.verdicts, "interrupted", accepted=False)
        atomic_write(path, json.dumps({"result": "interrupted", "accepted": False,
                                       "verdicts": judged.verdicts, **_tags_entry(tags)},
                                      indent=1, default=str),
                     "writing the run's verdicts")
    except HpcvalError as err:
        judged.store_error = err
    return judged


#: what an orphaned run says after its verdict table
ORPHANED_TEXT = ("\nOrphaned: hpcval died (SIGKILL, an out-of-memory kill) while this run's "
                 "benchmarks ran on; the next validation stopped what was left and stored the "
                 "run as `orphaned`: never judged, never a baseline.\n")


def mark_orphaned(site: Site, run_id: str) -> str:
    """Mark run *run_id*, whose hpcval died before judging it, ``orphaned``:
    never accepted into baselines, also after ``hpcval store rebuild`` (the
    mark is kept in ``verdicts/<run id>.json``). A run judged before hpcval
    died keeps its verdicts. Returns what was done, for one line of output."""
    path = _verdicts_file(site, run_id)
    if path.exists():
        return "it had been judged and stored before hpcval died: kept as it was"
    atomic_write(path, json.dumps({"result": "orphaned", "accepted": False, "verdicts": []},
                                  indent=1), "marking the run orphaned")
    report_path = site.report_path(run_id)
    if not site.history_db.exists():
        return "marked orphaned"
    store = Store(site.history_db)
    if any(r["run_id"] == run_id for r in store.runs()):
        store.set_verdicts(run_id, [], "orphaned", accepted=False)
        return "stored as orphaned (never a baseline)"
    if not report_path.is_file() or report_path.stat().st_size == 0:
        return "it wrote no run report: nothing stored"
    from hpcval.reporting.report import load_run_report

    try:
        report = load_run_report(report_path)
    except HpcvalError as err:
        return f"its run report is unreadable ({err}): nothing stored"
    run = records_from_report(report, run_id, site.name, provenance(report))
    run.result, run.accepted = "orphaned", False
    store.add_run(run)
    return "stored as orphaned (never a baseline)"


def stored(site: Site, run_id: str, report: RunReport) -> Judged:
    """The verdicts stored with a run (for ``hpcval report``)."""
    path = _verdicts_file(site, run_id)
    judged = Judged()
    try:
        data = json.loads(path.read_text())
        judged.verdicts = [tuple(v) for v in data.get("verdicts", [])]  # type: ignore[misc]
    except (OSError, ValueError):
        return judged
    judged.regressed = any(v[2] == "regressed" for v in judged.verdicts) or (
        data.get("result") == "unstable")
    judged.text = verdict_text(judged.verdicts, inconclusive_lines=True)
    if data.get("result") == "interrupted":
        judged.text += INTERRUPTED_TEXT
    if data.get("result") == "orphaned":
        judged.text += ORPHANED_TEXT
    return judged


def write_recorded_contract(site: Site, run_id: str, report: RunReport, out: IO[str]) -> None:
    """After ``validate --record``: the site's references and host
    expectations from what this run measured (existing files are backed up).
    A run whose every case that ran failed writes nothing and says so: the
    failures are the answer (exit 1), not wrong input."""
    from hpcval.history import contract

    omitted: list[str] = []
    backups: list[tuple[Any, Any]] = []
    try:
        written = contract.write_from_history(site, runs=[run_id],
                                              margin=contract.RECORD_MARGIN, omitted=omitted,
                                              backups=backups)
    except contract.NoPassedCase as err:
        if not report.failures:
            raise
        print(f"No references written: {err}: every case that ran failed (Failures above); "
              f"{site.references.name} and {site.host_expectations.name} are unchanged",
              file=out)
        return
    for path in written:
        print(f"wrote {path} (review it before committing)", file=out)
    for path, backup in backups:
        print(f"previous {path.name} kept as {backup}", file=out)
    if omitted:
        print(contract.omitted_note(site, omitted), file=out)
