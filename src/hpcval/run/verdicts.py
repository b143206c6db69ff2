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
from typing import IO, Any

from hpcval.core.errors import HpcvalError, StoreError
from hpcval.core.fileio import atomic_write
from hpcval.history.store import Store, records_from_report
from hpcval.reporting.report import RunReport
from hpcval.run import procs
from hpcval.run.decide import FAILING, _as_dict, baselines, decide, window
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
           "Judged", "_as_dict", "_held_text", "_inconclusive_line", "_num", "_pct",
           "_release_holds", "_update_saved", "_verdicts_file", "baselines", "describe",
           "figure_name", "hold_reasons", "mark_interrupted", "mark_orphaned", "provenance",
           "store_and_judge", "stored", "sustained_text", "verdict_text", "window",
           "write_recorded_contract"]

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
    try:
        settings = site.load_judging()
        holds = store.holds()
        histories = store.history_of((c.key for c in run.cases), before=run_id)
        decision = decide(settings, run_id, run.cases, histories, holds,
                          run_result=run.result, run_accepted=run.accepted)
    except StoreError as err:
        judged.store_error = err
        return judged
    judged.verdicts, judged.regressed = decision.verdicts, decision.regressed
    result, accepted, hold = decision.result, decision.accepted, decision.hold
    where = decision.where
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
