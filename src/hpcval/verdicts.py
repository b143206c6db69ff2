"""A run against its history: store it, judge every figure, say what changed.

After ReFrame has run, :func:`store_and_judge` stores the run in the site's
results store (:mod:`hpcval.store`) with its samples and provenance, then
judges every figure of every passed case against the same figure in the last
K accepted runs of the same case (:mod:`hpcval.judging`, settings in
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

from hpcval.errors import HpcvalError, StoreError
from hpcval.fileio import atomic_write
from hpcval.report import RunReport
from hpcval.site import Site
from hpcval.store import HistoryPoint, Store, records_from_report, verdicts_path

#: Outcomes that say nothing is wrong with a figure.
QUIET = {"pass", "no-baseline"}


@dataclass
class Judged:
    """What judging a run produced, for the console, the HTML and the exit code."""

    text: str = ""
    html_sections: list[str] = field(default_factory=list)
    regressed: bool = False
    store_error: HpcvalError | None = None
    verdicts: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)


def provenance(site: Site) -> dict[str, Any]:
    """Where and on what a run ran, beyond what ReFrame's report says."""
    prov: dict[str, Any] = {"kernel": platform.release(), "machine": platform.machine()}
    if site.name == "lab":
        try:
            from hpcval.lab.cluster import current_fabric

            prov["fabric"] = current_fabric()
        except Exception:  # noqa: BLE001 - the lab may be down; provenance is best effort
            prov["fabric"] = None
    return prov


def _verdicts_file(site: Site, run_id: str) -> Path:
    return verdicts_path(site.report_path(run_id))


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
                                    "threshold", "baseline_runs", "samples")}
    d["unit"] = unit
    if v.needed is not None:
        d["needed"] = v.needed._asdict()
    return d


def _medians(points: list[HistoryPoint], current: list[float]) -> list[float]:
    """Run medians of a figure's accepted history since the last accepted
    regression, oldest first, this run last (what the sustained rule was
    measured on: docs/judging.md)."""
    from statistics import median

    kept = [p for p in points if p.accepted and p.measured and p.samples]
    # a run judged `regressed` that a person then accepted (`hpcval history
    # --accept`) is the first run of a new level: the step before it is
    # acknowledged, so the rule looks only at the runs from there on
    for i in range(len(kept) - 1, -1, -1):
        if kept[i].run_result == "regressed":
            kept = kept[i:]
            break
    return [median(p.samples) for p in kept] + [median(current)]


def store_and_judge(site: Site, run_id: str, report: RunReport, record: bool = False
                    ) -> Judged:
    """Store the run; unless ``record``, judge it and store the verdicts."""
    judged = Judged()
    store = Store(site.history_db)
    run = records_from_report(report, run_id, site.name, provenance(site))
    try:
        store.add_run(run)
    except StoreError as err:
        judged.store_error = err
        return judged
    if record:
        judged.text = ("\nRecorded: nothing judged (--record); every figure is stored with "
                       "its samples in the site's history.\n")
        return judged
    from hpcval import judging

    try:
        settings = judging.JudgingSettings.load(site.judging)
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
                figures[name] = judging.FigureData(baselines(hist, fs.k), fig.samples,
                                                   fig.better)
                where[name] = (case.key, fig.variable, fig.unit, hist, fig.samples, fig.better)
        results = judging.judge_run(figures, settings)
        # a worse level held over the last runs, corrected across the run's figures
        sustained = judging.sustained_run(
            {name: (_medians(w[3], w[4]), w[5]) for name, w in where.items()}, settings)
    except StoreError as err:
        judged.store_error = err
        return judged
    for name, verdict in results.items():
        case_key, variable, unit, hist, current, better = where[name]
        outcome, detail = verdict.outcome, _as_dict(verdict, unit)
        if outcome not in ("regressed", "no-baseline"):
            cp = sustained.get(name)
            if cp is not None:
                outcome = "regressed"
                detail["note"] = (f"sustained: the level moved from {cp.before:.4g} to "
                                  f"{cp.after:.4g} {unit} ({100 * cp.change:+.1f} %, Welch "
                                  f"p = {cp.p_value:.2g}) over the last {cp.n_after} runs")
                detail["sustained"] = {"index": cp.index, "before": cp.before,
                                       "after": cp.after, "change": cp.change,
                                       "p_value": cp.p_value, "runs": cp.n_after}
        judged.verdicts.append((case_key, variable, outcome, detail))
    judged.regressed = any(o == "regressed" for _, _, o, _ in judged.verdicts)
    result = "regressed" if judged.regressed else run.result
    try:
        store.set_verdicts(run_id, judged.verdicts, result,
                           accepted=run.accepted and not judged.regressed)
        atomic_write(_verdicts_file(site, run_id),
                     json.dumps({"result": result,
                                 "accepted": run.accepted and not judged.regressed,
                                 "verdicts": judged.verdicts}, indent=1, default=str),
                     "writing the run's verdicts")
    except HpcvalError as err:
        judged.store_error = err
    judged.text = verdict_text(judged.verdicts) + _unmatched_text(site, settings, where)
    # the HTML report draws every figure's row and history from the store
    # (hpcval.report.RunHistory): no section of its own here
    return judged


def _unmatched_text(site: Site, settings: Any, names: Mapping[str, Any]) -> str:
    """A note for each ``figures:`` glob of judging.yaml that matched no figure of
    the run (a typo, or a name written as ``<check>/<variable>`` without the
    parameters and the partition), with one real name to copy."""
    if not names:
        return ""
    return "".join(f"note: {site.judging}: figures: '{pattern}' matches no figure of this "
                   f"run (figures are named like '{next(iter(names))}')\n"
                   for pattern in settings.unmatched(names))


def stored(site: Site, run_id: str, report: RunReport) -> Judged:
    """The verdicts stored with a run (for ``hpcval report``)."""
    path = _verdicts_file(site, run_id)
    judged = Judged()
    try:
        data = json.loads(path.read_text())
        judged.verdicts = [tuple(v) for v in data.get("verdicts", [])]  # type: ignore[misc]
    except (OSError, ValueError):
        return judged
    judged.regressed = any(v[2] == "regressed" for v in judged.verdicts)
    judged.text = verdict_text(judged.verdicts)
    return judged


def _num(v: Any) -> str:
    if not isinstance(v, int | float):
        return "-"
    mag = abs(v)
    return f"{v:,.0f}" if mag >= 1000 else f"{v:.1f}" if mag >= 10 else f"{v:.3g}"


def _pct(v: Any) -> str:
    return f"{100 * v:+.1f} %" if isinstance(v, int | float) else "-"


def describe(case_key: str, variable: str, outcome: str, d: dict[str, Any]) -> str:
    """One line a person reads: what changed, by how much, how sure."""
    unit = d.get("unit", "")
    text = (f"{outcome.upper()} {case_key} {variable}: baseline median "
            f"{_num(d.get('baseline_median'))} {unit}, now {_num(d.get('current_median'))} "
            f"{unit}".rstrip())
    if d.get("change") is not None:
        text += f", change {_pct(d.get('change'))}"
        if d.get("ci_low") is not None and d.get("ci_high") is not None:
            text += f" [CI {_pct(d['ci_low'])} .. {_pct(d['ci_high'])}]"
    if d.get("p_value") is not None:
        text += f", p = {d['p_value']:.2g}"
        if d.get("p_adjusted") is not None:
            text += f" (adjusted {d['p_adjusted']:.2g})"
    if d.get("note"):
        text += f"; {d['note']}"
    return text


def verdict_text(verdicts: list[tuple[str, str, str, dict[str, Any]]]) -> str:
    if not verdicts:
        return ""
    counts: dict[str, int] = {}
    for _, _, outcome, _ in verdicts:
        counts[outcome] = counts.get(outcome, 0) + 1
    order = ["regressed", "warn", "inconclusive", "improved", "pass", "no-baseline"]
    summary = ", ".join(f"{counts[o]} {o}" for o in order if o in counts)
    lines = [describe(k, v, o, d) for k, v, o, d in verdicts if o not in QUIET]
    out = "\nAgainst the site's history (docs/judging.md):\n"
    out += "".join(f"  {line}\n" for line in lines)
    return out + f"History verdicts: {summary}\n"


def write_recorded_contract(site: Site, run_id: str, report: RunReport, out: IO[str]) -> None:
    """After ``validate --record``: the site's references and host
    expectations from what this run measured (existing files are backed up)."""
    from hpcval import contract

    omitted: list[str] = []
    written = contract.write_from_history(site, runs=[run_id], margin=contract.RECORD_MARGIN,
                                          omitted=omitted)
    for path in written:
        print(f"wrote {path} (review it before committing)", file=out)
    if omitted:
        print(contract.omitted_note(site, omitted), file=out)
