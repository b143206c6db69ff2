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
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from hpcval.core.errors import HpcvalError, StoreError
from hpcval.core.fileio import atomic_write
from hpcval.history.judging import modes
from hpcval.history.judging.change import Change, sig3
from hpcval.history.store import HistoryPoint, Store, records_from_report, verdicts_path
from hpcval.reporting.report import RunReport
from hpcval.run import procs
from hpcval.site import Site

#: Outcomes that say nothing is wrong with a figure.
QUIET = {"pass", "no-baseline"}
#: Outcomes that fail the run (``unstable`` unless judging.yaml says
#: ``unstable_fails: false``).
FAILING = {"regressed", "unstable"}
#: Outcomes with one terminal line per figure.
LOUD = ("regressed", "unstable", "improved")


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


def _verdicts_file(site: Site, run_id: str) -> Path:
    return verdicts_path(site.report_path(run_id))


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


def figure_name(case_key: str, variable: str) -> str:
    """The name judging settings match their globs on:
    ``<check> [%param=value...]@<system>:<partition>+<environ>/<variable>``."""
    return f"{case_key}/{variable}"


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
             level_runs: frozenset[str] = frozenset(), pending: frozenset[str] = frozenset()
             ) -> tuple[list[float], list[str]]:
    """Run medians of a figure since its last accepted level, oldest first, this
    run last, with their run ids (what the sustained rule reads: docs/judging.md).
    Every measured run counts, the ones called ``regressed``, ``unstable`` or
    held and not yet decided (``pending``) included (a sustained cut is called
    run after run and must still add up); runs a person left out, held runs
    the old level came back after, and interrupted runs do not."""
    from statistics import median

    kept = [p for p in points if p.measured and p.samples
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
    return ([median(p.samples) for p in kept] + [median(current)],
            [p.run_id for p in kept] + [run_id])


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
                                     "recorded": True, "verdicts": []}, indent=1),
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
                               pending)
    except StoreError as err:
        judged.store_error = err
        return judged
    for name, verdict in results.items():
        case_key, variable, unit, hist, current, better = where[name]
        outcome, detail = verdict.outcome, _as_dict(verdict, unit)
        cp = sustained.get(name)
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


def hold_reasons(verdicts: list[tuple[str, str, str, dict[str, Any]]], settings: Any
                 ) -> list[tuple[str, tuple[str, str]]]:
    """Why a run that regressed nothing is still not accepted automatically
    (:func:`hpcval.history.judging.modes.hold_reason`): a figure that moved by
    the site's ``hold_factor`` (2x by default) either way, or one inconclusive
    where one run cannot resolve even 50 %. Returns ``(reason, (case key,
    variable))``."""
    from hpcval.history.judging.modes import hold_reason

    out = []
    for case_key, variable, outcome, d in verdicts:
        fs = settings.for_figure(figure_name(case_key, variable))
        change = Change.from_detail(d)
        thr = (d.get("needed") or {}).get("threshold")
        why = hold_reason(outcome, change.change if change else None,
                          thr if isinstance(thr, int | float) else None, fs.hold_factor)
        if why is not None:
            out.append((f"{variable} {why}", (case_key, variable)))
    return out


def _held_text(site: Site, run_id: str, hold: dict[str, Any] | None) -> str:
    if hold is None:
        return ""
    return (f"HELD run {run_id}: not accepted into baselines ({'; '.join(hold['reasons'])}); "
            f"`hpcval history --site {site.name} --accept {run_id}` accepts it as the new "
            "level, a run at the old level leaves it out\n")


def _release_holds(site: Site, store: Store, holds: Mapping[str, dict[str, Any]],
                   run_id: str, verdicts: list[tuple[str, str, str, dict[str, Any]]]
                   ) -> list[str]:
    """Held runs this run decides: each held figure of theirs judged ``pass`` here
    (against the baselines they are not in) is the old level confirmed; the held
    run stays out of baselines for good (state ``outlier``)."""
    now = {(k, v): o for k, v, o, _ in verdicts}
    released = []
    for held_id, hold in holds.items():
        figs = [tuple(f) for f in hold.get("figures", []) if isinstance(f, list) and len(f) == 2]
        if hold.get("state") != "held" or held_id == run_id or not figs:
            continue
        if all(now.get(f) == "pass" for f in figs):
            new = {**hold, "state": "outlier", "confirmed_by": run_id}
            store.set_hold(held_id, new)
            _update_saved(site, held_id, held=new)
            released.append(held_id)
    return released


def _update_saved(site: Site, run_id: str, **values: Any) -> None:
    """Change keys of a run's verdicts file (what ``store rebuild`` reads)."""
    path = _verdicts_file(site, run_id)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data.update(values)
    atomic_write(path, json.dumps(data, indent=1, default=str), "recording the hold")


def _sustained(judging: Any, figures: Mapping[str, Any], where: Mapping[str, Any],
               settings: Any, run_id: str, level_runs: frozenset[str],
               pending: frozenset[str]) -> dict[str, dict[str, Any]]:
    """Figures of the families whose CUSUM is beyond its limit at this run, with
    the run since which they stayed beyond their old level (``since``)."""
    series = {name: _medians(w[3], w[4], run_id, level_runs, pending)
              for name, w in where.items()}
    medians = {name: (m, where[name][5]) for name, (m, _) in series.items()}
    found = judging.sustained_families(judging.families(figures, settings), medians, settings)
    for name, cp in found.items():
        ids = series[name][1]
        cp["since"] = ids[max(len(ids) - int(cp["runs_after"]), 0)]
    return found


def _unmatched_text(site: Site, settings: Any, names: Mapping[str, Any]) -> str:
    """A note for each ``figures:`` glob of judging.yaml that matched no figure of
    the run (a typo, or a name written as ``<check>/<variable>`` without the
    parameters and the partition), with one real name to copy."""
    if not names:
        return ""
    return "".join(f"note: {site.judging}: figures: '{pattern}' matches no figure of this "
                   f"run (figures are named like '{next(iter(names))}')\n"
                   for pattern in settings.unmatched(names))


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
    judged.text = verdict_text(judged.verdicts)
    if data.get("result") == "interrupted":
        judged.text += INTERRUPTED_TEXT
    if data.get("result") == "orphaned":
        judged.text += ORPHANED_TEXT
    return judged


def _num(v: Any) -> str:  # the HTML table's numbers (report.py takes them over)
    if not isinstance(v, int | float):
        return "-"
    mag = abs(v)
    return f"{v:,.0f}" if mag >= 1000 else f"{v:.1f}" if mag >= 10 else f"{v:.3g}"


def _pct(v: Any) -> str:
    return f"{100 * v:+.1f} %" if isinstance(v, int | float) else "-"


def describe(case_key: str, variable: str, outcome: str, d: dict[str, Any]) -> str:
    """One line a person reads: what changed, by how much, how sure, which family."""
    unit = d.get("unit", "")
    text = (f"{outcome.upper()} {case_key} {variable}: {sig3(d.get('baseline_median'))} -> "
            f"{sig3(d.get('current_median'))} {unit}".rstrip())
    share = d.get("slow_share")
    if outcome == "unstable" and d.get("dispersion") and not isinstance(share, dict):
        disp = d["dispersion"]
        text += (f", within-run spread {sig3(100 * disp['baseline'])} -> "
                 f"{sig3(100 * disp['current'])} % ({sig3(disp['ratio'])}x)")
    change = Change.from_detail(d)
    if change is not None:
        text += f", {change.text()}"
    if d.get("family"):
        text += f", family {d['family']}"
    p = d.get("p_adjusted", d.get("p_value"))
    if outcome == "unstable" and str(d.get("note", "")).startswith("slow-mode share"):
        p = share.get("p", p) if isinstance(share, dict) else p  # the share test's p
    elif outcome == "unstable" and isinstance(d.get("dispersion"), dict):
        p = d["dispersion"].get("p", p)  # the stability test's p, not the change's
    if isinstance(p, int | float):
        text += f", p={p:.2g}"
    if d.get("statistic") == "fast":  # a two-moded figure: its fast mode and slow share
        text += ", fast mode"
        if isinstance(share, dict):
            text += (f", slow-mode share {sig3(100 * share['before'])} -> "
                     f"{sig3(100 * share['now'])} % [{100 * share['low']:+.0f} .. "
                     f"{100 * share['high']:+.0f} points]")
    sus = d.get("sustained")
    if isinstance(sus, dict):
        text += f"; {sustained_text(sus)}"
    return text


def sustained_text(sus: dict[str, Any]) -> str:
    """``sustained since <run> (4 runs, CUSUM 6.2 > 5)``: the figure has stayed
    beyond its old level since that run (called runs included)."""
    runs = sus.get("runs_after")
    cusum, limit = sus.get("cusum"), sus.get("limit")
    extra = f"{runs} runs" if isinstance(runs, int) else ""
    if isinstance(cusum, int | float) and isinstance(limit, int | float):
        extra += f"{', ' if extra else ''}CUSUM {cusum:.1f} > {limit:g}"
    since = sus.get("since")
    head = f"sustained since {since}" if since else "sustained"
    return f"{head} ({extra})" if extra else head


#: The largest threshold an inconclusive line suggests: beyond it the run-to-run
#: spread is no noise around one level but runs jumping between levels (modes),
#: and a threshold that wide would hide every real fault.
SANE_THRESHOLD = modes.SANE_THRESHOLD


def _inconclusive_line(case_key: str, items: list[tuple[str, dict[str, Any]]]) -> str:
    """One line per check with inconclusive figures, with one action a person
    can take: a few more runs (the sustained rule judges them together) when
    that is at most 5; more samples per run when they resolve it; a threshold
    one run resolves when it is a sane one (at most 50 %); else the figure's
    runs jump between levels: judge its fast mode (``statistic: fast`` in
    judging.yaml) or put it in a family with the figures that share its cause.
    The run is held out of the baselines until a person accepts it."""
    names = ", ".join(v for v, _ in items)
    worse = [abs(d["change"]) for _, d in items if isinstance(d.get("change"), int | float)]
    span = (f"{sig3(100 * min(worse))}-{sig3(100 * max(worse))} %" if len(worse) > 1
            else f"{sig3(100 * worse[0])} %" if worse else "beyond the threshold")
    needed = [d.get("needed") or {} for _, d in items]
    runs = [n.get("runs") for n in needed]
    samples = [n.get("samples") for n in needed]
    thr = [n.get("threshold") for n in needed if isinstance(n.get("threshold"), float)]
    if runs and all(isinstance(r, int) for r in runs) and max(runs) <= 5:
        action = (f"{max(runs)} more runs at this level resolve it (the sustained rule "
                  "judges them together)")
    elif samples and all(isinstance(n, int) for n in samples) and max(samples) <= 1000:
        action = (f"{max(samples)} samples per run resolve it (the check's sample count; "
                  "the run-to-run spread allows it)")
    elif thr and max(thr) <= SANE_THRESHOLD:
        action = (f"raise the threshold to {sig3(100 * max(thr))} % in judging.yaml (what one "
                  "run resolves at this noise)")
    else:
        spread = [d.get("spread") for _, d in items if isinstance(d.get("spread"), float)]
        wide = f" ({sig3(100 * max(spread))} % run to run)" if spread else ""
        action = (f"its runs jump between levels{wide}: judge the fast mode "
                  "(figures: {'<glob>': {statistic: fast}} in judging.yaml) or group it "
                  "with the figures that share its cause (families: in judging.yaml)")
    count = f"{len(items)} figure{'s' if len(items) > 1 else ''}"
    return (f"INCONCLUSIVE {case_key}: {count} ({names}) worse by {span} within the noise; "
            f"{action}")


def verdict_text(verdicts: list[tuple[str, str, str, dict[str, Any]]]) -> str:
    """The history verdicts a person reads after ReFrame's log (docs/judging.md):
    one line per regressed, unstable or improved figure, one per check with
    inconclusive figures, then one line of counts (the only line on a clean run)."""
    if not verdicts:
        return ""
    counts: dict[str, int] = {}
    for _, _, outcome, _ in verdicts:
        counts[outcome] = counts.get(outcome, 0) + 1
    order = ["regressed", "unstable", "improved", "warn", "inconclusive", "pass", "no-baseline"]
    summary = ", ".join(f"{counts[o]} {o}" for o in order if o in counts)
    lines = [describe(k, v, o, d) for o_want in LOUD
             for k, v, o, d in verdicts if o == o_want]
    pending: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for k, v, o, d in verdicts:
        if o == "inconclusive":
            pending.setdefault(k, []).append((v, d))
    lines += [_inconclusive_line(k, items) for k, items in pending.items()]
    return "".join(f"{line}\n" for line in lines) + \
        f"History verdicts: {summary} (docs/judging.md)\n"


def write_recorded_contract(site: Site, run_id: str, report: RunReport, out: IO[str]) -> None:
    """After ``validate --record``: the site's references and host
    expectations from what this run measured (existing files are backed up)."""
    from hpcval.history import contract

    omitted: list[str] = []
    written = contract.write_from_history(site, runs=[run_id], margin=contract.RECORD_MARGIN,
                                          omitted=omitted)
    for path in written:
        print(f"wrote {path} (review it before committing)", file=out)
    if omitted:
        print(contract.omitted_note(site, omitted), file=out)
