"""``hpcval store rebuild``: the results store made anew from the run reports,
losing nothing the old store holds.

The JSON run reports are the record and the store an index over them, but a
report can be damaged (a disk fault, a copy cut short, an edit), deleted, or
never written whole, and the verdicts file beside it (result, acceptance,
tags, hold) likewise. So a rebuild:

* imports every run report hpcval judged (a ``verdicts/<run id>.json`` beside
  it, or the run in the old store), as ``validate`` stored it;
* **carries over the old store's rows** of every run it holds that no report
  gives back (report unreadable, missing, or refused by the database): the
  run, its cases, figures, verdicts and hold, as they were; from a corrupt
  old store, what SQLite can still read of them (said so);
* takes a run's result, acceptance, tags and hold from the old store where
  its verdicts file is unreadable, and imports a run it cannot find there
  without acceptance (a person accepts it), never silently;
* leaves out NaN/inf samples (not measurements), counting them;
* always keeps the old store aside, named: ``history.sqlite.<id>.old`` (a
  healthy one, the newest :data:`KEEP_OLD` kept, older ones removed and
  named) or ``.broken`` (a corrupt one, never removed);
* says at the end what it could not read or import (:class:`Rebuilt`).

The new file is written beside (``history.sqlite.<id>.rebuilding``) and
moved in place, so a store is there at every instant; one left by a killed
rebuild is removed by the next command (:func:`leftovers`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.errors import HpcvalError, StoreError
from hpcval.core.fileio import os_fault, unused_name
from hpcval.history.records import records_from_report, verdicts_path
from hpcval.history.runreport import load_run_report
from hpcval.history.store import HOLD_KEY, Store

#: healthy old stores kept aside by rebuilds (``history.sqlite.<id>.old``), newest first
KEEP_OLD = 3
#: ReFrame run report format hpcval reads (``session_info.data_version``, major)
REPORT_MAJOR = "4"
#: the tables holding a run's rows besides ``runs``
_TABLES = ("cases", "figures", "verdicts")


@dataclass
class Rebuilt:
    """What a rebuild did, for the lines ``hpcval store rebuild`` prints."""

    #: runs in the new store
    stored: int = 0
    #: of them imported from their run reports
    imported: int = 0
    #: runs the old store held without a report, carried over (each: why; those
    #: whose report is damaged are in :attr:`damaged`)
    carried: list[str] = field(default_factory=list)
    #: reports hpcval never judged: not imported (each: why); nothing lost
    skipped: list[str] = field(default_factory=list)
    #: files that could not be read, each with what was done about its run
    damaged: list[str] = field(default_factory=list)
    #: runs neither imported nor carried over (each: why; their files are left as they are)
    not_imported: list[str] = field(default_factory=list)
    #: NaN/inf samples left out: (run id, figure, how many)
    nonfinite: list[tuple[str, str, int]] = field(default_factory=list)
    #: leftovers of an earlier, killed rebuild removed first
    cleaned: list[Path] = field(default_factory=list)
    #: where the old store went, and whether it was healthy
    kept: Path | None = None
    old_healthy: bool = True
    #: older healthy copies removed (beyond :data:`KEEP_OLD`); corrupt ones kept
    removed: list[Path] = field(default_factory=list)
    broken_kept: list[Path] = field(default_factory=list)

    @property
    def faulty(self) -> bool:
        """A file could not be read or a run could not be imported (exit 3)."""
        return bool(self.damaged or self.not_imported)


def leftovers(db: Path) -> list[Path]:
    """Files a rebuild killed before it ended left beside the store."""
    return sorted(db.parent.glob(f"{db.name}.*.rebuilding*"))


@dataclass
class _Old:
    """The old store, read as far as it reads."""

    path: Path
    healthy: bool = True
    #: run id -> its ``runs`` row (column -> value)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    holds: dict[str, str] = field(default_factory=dict)
    conn: sqlite3.Connection | None = None

    @classmethod
    def read(cls, store: Store) -> _Old:
        old = cls(store.path)
        if not store.path.exists():
            return old
        try:
            old.runs = {r["run_id"]: r for r in store.runs()}
            old.holds = {k: json.dumps(v) for k, v in store.holds().items()}
        except StoreError:
            old.healthy = False
        try:
            old.conn = sqlite3.connect(store.path, timeout=60.0)
        except sqlite3.Error:
            return old
        if not old.healthy:  # what SQLite can still read of it
            with contextlib.suppress(sqlite3.Error):
                old.conn.row_factory = sqlite3.Row
                old.runs = {r["run_id"]: dict(r) for r in old.conn.execute("SELECT * FROM runs")}
            with contextlib.suppress(sqlite3.Error):
                old.conn.row_factory = None
                old.holds = {k.removeprefix("held "): v for k, v in old.conn.execute(
                    "SELECT key, value FROM meta WHERE key LIKE 'held %'")}
            old.conn.row_factory = None
        return old

    def rows(self, run_id: str) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of run *run_id* by table (raises sqlite3.Error where unreadable)."""
        if self.conn is None:
            raise sqlite3.DatabaseError("the old store cannot be opened")
        self.conn.row_factory = None
        out = {"runs": self.conn.execute("SELECT * FROM runs WHERE run_id=?",
                                         (run_id,)).fetchall()}
        for table in _TABLES:
            try:
                out[table] = self.conn.execute(f"SELECT * FROM {table} WHERE run_id=? "
                                               "ORDER BY rowid", (run_id,)).fetchall()
            except sqlite3.Error:
                if table != "verdicts" or self.healthy:
                    raise
                out[table] = []  # a corrupt store's verdicts: the run without them
        return out

    def verdict_rows(self, run_id: str) -> list[tuple[Any, ...]]:
        if self.conn is None:
            return []
        with contextlib.suppress(sqlite3.Error):
            return self.conn.execute("SELECT * FROM verdicts WHERE run_id=?",
                                     (run_id,)).fetchall()
        return []

    def tags(self, run_id: str) -> dict[str, str] | None:
        try:
            prov = json.loads(self.runs[run_id].get("provenance") or "{}")
        except (KeyError, ValueError, TypeError):
            return None
        tags = prov.get("tags") if isinstance(prov, dict) else None
        return tags if isinstance(tags, dict) else None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _read_verdicts(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """A run's verdicts file: (its content, None), (None, None) where there is
    none, (None, why) where it cannot be read or has the wrong shape."""
    if not path.exists():
        return None, None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return None, f"not readable JSON ({err})"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    verdicts = data.get("verdicts", [])
    if not isinstance(verdicts, list) or any(
            not isinstance(v, list) or len(v) != 4 or not isinstance(v[3], dict)
            for v in verdicts):
        return None, "its 'verdicts' are not [case, figure, outcome, detail] entries"
    if "tags" in data and not isinstance(data["tags"], dict):
        return None, "its 'tags' are not a mapping"
    return data, None


def _report_problem(report: Any) -> str | None:
    """Why a readable report is not one hpcval stores (its format version)."""
    version = str(report.session.get("data_version", REPORT_MAJOR))
    if version.split(".")[0] != REPORT_MAJOR:
        return (f"run report format {version} (session_info.data_version); hpcval reads "
                f"ReFrame {REPORT_MAJOR}'s ({REPORT_MAJOR}.x)")
    return None


def rebuild(store: Store, reports: list[Path], site: str) -> Rebuilt:
    """Make *store*'s database anew from *reports* (module docstring); the
    caller holds the site's lock."""
    db: Path = store.path
    done = Rebuilt()
    for leftover in leftovers(db):
        with contextlib.suppress(OSError):
            leftover.unlink()
            done.cleaned.append(leftover)
    old = _Old.read(store)
    done.old_healthy = old.healthy
    source = "the old store" if old.healthy else "the corrupt old store (what SQLite could read)"
    entries: list[tuple[tuple[float, str], str, Any]] = []
    from_report: set[str] = set()
    unreadable: dict[str, str] = {}
    for path in sorted(reports):
        run_id = path.stem.removeprefix("run-report-")
        vpath = verdicts_path(path)
        if not vpath.exists() and run_id not in old.runs:
            done.skipped.append(f"{path}: never judged by hpcval (no {vpath}): a plain "
                                "ReFrame report, a dry run or a run whose hpcval died before "
                                "judging it; not imported")
            continue
        try:
            report = load_run_report(path)
            problem = _report_problem(report)
        except HpcvalError as err:
            unreadable[run_id] = str(err)
            continue
        if problem is not None:
            unreadable[run_id] = f"{path}: {problem}"
            continue
        start = report.session.get("time_start_unix")
        key = (start if isinstance(start, int | float) else 0.0, path.name)
        entries.append((key, "report", (path, run_id, report)))
        from_report.add(run_id)
    for run_id, row in old.runs.items():
        if run_id not in from_report:
            start = row.get("started")
            entries.append(((start if isinstance(start, int | float) else 0.0,
                             f"run-report-{run_id}.json"), "carry", run_id))
    for run_id, why in unreadable.items():
        if run_id not in old.runs:
            done.not_imported.append(f"{why}: no copy of run {run_id} in {source}; "
                                     "not imported")
    # stored in the order the runs ran, as they were when first stored
    entries.sort(key=lambda e: e[0])
    fresh = unused_name(db, "rebuilding")
    try:
        with Store(fresh).connect(write=True) as conn:
            for _, kind, item in entries:
                if kind == "report":
                    path, run_id, report = item
                    err = _import(conn, old, done, path, run_id, report, site, source,
                                  HOLD_KEY)
                    if err is None:
                        done.imported += 1
                        continue
                    unreadable[run_id] = err
                    if run_id not in old.runs:
                        done.not_imported.append(f"{err}; no copy of run {run_id} in "
                                                 f"{source}; not imported")
                        continue
                    item = run_id
                why = (f"its report is unreadable ({unreadable[item]})" if item in unreadable
                       else f"no run report {Path(old.runs[item].get('report') or '?').name} "
                       "in the reports directory")
                damaged = item in unreadable
                if _carry(conn, old, done, item, why, source, HOLD_KEY, note=not damaged) \
                        and damaged:
                    done.damaged.append(f"{unreadable[item]}: run {item} carried over from "
                                        f"{source}")
            done.stored = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        old.close()
        done.kept = _set_aside(db, old.healthy)
        os.replace(fresh, db)
    except OSError as err:
        raise os_fault(db, err, "rebuilding the results store") from None
    finally:
        old.close()
        for leftover in (fresh, *(fresh.with_name(fresh.name + s) for s in ("-wal", "-shm"))):
            with contextlib.suppress(OSError):
                leftover.unlink()
    done.removed, done.broken_kept = _prune(db)
    return done


def _import(conn: sqlite3.Connection, old: _Old, done: Rebuilt, path: Path, run_id: str,
            report: Any, site: str, source: str, hold_key: str) -> str | None:
    """Store one run from its report; None, or why the database refused it."""
    left_out: list[tuple[str, int]] = []
    run = records_from_report(report, run_id, site, nonfinite=left_out)
    vpath = verdicts_path(path)
    saved, vproblem = _read_verdicts(vpath)
    known = old.runs.get(run_id)
    hold = None
    verdict_rows: list[tuple[Any, ...]] = []
    if saved is not None:
        tags = saved.get("tags")
        run.result = str(saved.get("result", run.result))
        run.accepted = bool(saved.get("accepted", run.result != "regressed"))
        if isinstance(saved.get("held"), dict):
            hold = json.dumps(saved["held"])
        verdict_rows = [(run_id, k, v, o, json.dumps(d, default=str))
                        for k, v, o, d in saved.get("verdicts", [])]
    elif known is not None:
        # stored by hpcval: kept as the old store has it (verdicts file missing:
        # stored before it existed; or unreadable: said below)
        tags = old.tags(run_id)
        run.result = str(known["result"])
        run.accepted = bool(known["accepted"])
        verdict_rows = old.verdict_rows(run_id)
    else:  # a verdicts file that cannot be read, and no copy of the run
        tags = None
        run.accepted = False
    if isinstance(tags, dict):
        run.provenance["tags"] = {str(k): str(v) for k, v in tags.items()}
    if hold is None:
        hold = old.holds.get(run_id)
    conn.execute("SAVEPOINT run")
    try:
        Store._insert(conn, run)
        if hold is not None:
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (hold_key + run_id, hold))
        conn.executemany("INSERT OR REPLACE INTO verdicts VALUES (?,?,?,?,?)", verdict_rows)
    except sqlite3.IntegrityError as err:
        conn.execute("ROLLBACK TO run")
        conn.execute("RELEASE run")
        return f"{path}: the store refuses its cases ({err}: two cases of one name?)"
    conn.execute("RELEASE run")
    if vproblem is not None:
        what = (f"result, acceptance, tags and hold taken from {source}" if known is not None
                else "imported from its report without verdicts, tags or hold and NOT "
                f"accepted into baselines (`hpcval history --accept {run_id}` counts it)")
        done.damaged.append(f"{vpath}: {vproblem}: run {run_id} {what}")
    done.nonfinite.extend((run_id, name, n) for name, n in left_out)
    return None


def _carry(conn: sqlite3.Connection, old: _Old, done: Rebuilt, run_id: str, why: str,
           source: str, hold_key: str, note: bool = True) -> bool:
    """Copy run *run_id*'s rows from the old store into the new one (False:
    it cannot, said in ``done.not_imported``)."""
    try:
        rows = old.rows(run_id)
        if not rows["runs"]:
            raise sqlite3.DatabaseError("its row is gone")
        conn.execute("SAVEPOINT run")
        try:
            conn.executemany("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?)", rows["runs"])
            conn.executemany("INSERT INTO cases VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                             rows["cases"])
            conn.executemany("INSERT INTO figures VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                             rows["figures"])
            conn.executemany("INSERT OR REPLACE INTO verdicts VALUES (?,?,?,?,?)",
                             rows["verdicts"])
            if run_id in old.holds:
                conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                             (hold_key + run_id, old.holds[run_id]))
        except sqlite3.Error:
            conn.execute("ROLLBACK TO run")
            conn.execute("RELEASE run")
            raise
        conn.execute("RELEASE run")
    except sqlite3.Error as err:
        done.not_imported.append(f"run {run_id}: {why}, and {source} cannot give it back "
                                 f"({err}); not imported")
        return False
    if note:
        done.carried.append(f"run {run_id}: {why}")
    return True


def _set_aside(db: Path, healthy: bool) -> Path | None:
    """Keep the old store under a name of its own (a hard link: a store stays at
    ``db`` until the new one replaces it); its journal goes with it."""
    if not db.exists():
        return None
    if healthy:  # its journal into the file, so the copy is whole on its own
        with contextlib.suppress(sqlite3.Error), \
                contextlib.closing(sqlite3.connect(db, timeout=60.0)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    kept = unused_name(db, "old" if healthy else "broken")
    _link_or_copy(db, kept)
    for suffix in ("-wal", "-shm"):
        side = db.with_name(db.name + suffix)
        if side.exists():
            if not healthy:
                _link_or_copy(side, kept.with_name(kept.name + suffix))
            side.unlink()  # a journal must not meet the new file
    return kept


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _prune(db: Path) -> tuple[list[Path], list[Path]]:
    """Remove healthy old stores beyond the newest :data:`KEEP_OLD` (names sort
    by time); corrupt ones are never removed. Returns (removed, corrupt kept)."""
    olds = sorted(db.parent.glob(f"{db.name}.*.old"), reverse=True)
    removed = []
    for path in olds[KEEP_OLD:]:
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path)
    return removed, sorted(db.parent.glob(f"{db.name}.*.broken"))

