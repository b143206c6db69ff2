"""The results store: every run of a site, its figures and their samples.

An embedded SQLite database, ``var/<site>/history.sqlite``, beside the JSON run
reports ReFrame writes (``var/<site>/reports/``). The reports are the record;
the database is an index over them that can be rebuilt from them at any time
(:func:`hpcval.history.rebuild.rebuild`), so a corrupt or lost database loses nothing. SQLite
needs no server, survives a crash mid-write (a transaction either lands whole
or not at all) and lets two runs finishing at once both write (WAL journal,
busy timeout). ReFrame's own results database does not keep samples within a
run, nor hpcval's verdicts and provenance; it is switched off in site configs.

Schema (one row per):
- ``runs``: run id, site, start/end, result, accepted (counted in baselines),
  report path, provenance (host, ReFrame, command, fabric, host fingerprint);
- ``cases``: test case of a run: check, parameters, system, partition,
  environment, MPI stack, software spec, result, failure phase and reason;
- ``figures``: judged figure of a case: value (the median of its samples),
  unit, direction, the samples themselves, reference band, band result;
  the direction is the one stored with the samples (declared by the check);
  a figure stored before directions were (no samples file) takes its unit's
  (times lower, bandwidths and rates higher) and is left out where the unit
  does not say (``%``, ``fraction``): no name is read to guess it;
- ``verdicts``: the statistical verdict of a figure against its history.

What a run report becomes before it is stored (the records, read back as
:class:`HistoryPoint`): :mod:`hpcval.history.records`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hpcval.core.errors import HpcvalError, InputError, StoreError
from hpcval.core.fileio import disk_full, os_fault
from hpcval.history.records import (
    CaseRecord,
    FigureRecord,
    HistoryPoint,
    RunRecord,
    _finite,
    case_key,
    records_from_report,
    run_reports,
    verdicts_path,
)

#: re-exported: callers read them here
__all__ = ["HOLD_KEY", "SCHEMA_VERSION", "CaseRecord", "FigureRecord", "HistoryPoint",
           "RunRecord", "Store", "case_key", "records_from_report", "run_reports",
           "verdicts_path"]

SCHEMA_VERSION = 1
#: ``meta`` key prefix of a run held out of baselines (``held <run id>``)
HOLD_KEY = "held "

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, site TEXT NOT NULL, started REAL, finished REAL,
    result TEXT NOT NULL, accepted INTEGER NOT NULL, report TEXT NOT NULL,
    provenance TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS cases (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    case_key TEXT NOT NULL, check_name TEXT NOT NULL, params TEXT NOT NULL,
    system TEXT, partition TEXT, environ TEXT, mpi_stack TEXT, software_spec TEXT,
    nodes TEXT, result TEXT NOT NULL, fail_phase TEXT, fail_reason TEXT,
    PRIMARY KEY (run_id, case_key));
CREATE TABLE IF NOT EXISTS figures (
    run_id TEXT NOT NULL, case_key TEXT NOT NULL, variable TEXT NOT NULL,
    unit TEXT, better TEXT, value REAL, samples TEXT NOT NULL,
    reference REAL, lower REAL, upper REAL, band_result TEXT,
    PRIMARY KEY (run_id, case_key, variable),
    FOREIGN KEY (run_id, case_key) REFERENCES cases(run_id, case_key) ON DELETE CASCADE);
CREATE TABLE IF NOT EXISTS verdicts (
    run_id TEXT NOT NULL, case_key TEXT NOT NULL, variable TEXT NOT NULL,
    outcome TEXT NOT NULL, detail TEXT NOT NULL,
    PRIMARY KEY (run_id, case_key, variable));
CREATE INDEX IF NOT EXISTS figures_by_series ON figures(case_key, variable);
"""
#: the tables of a store (a store that lost one is corrupt, not new)
_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", _SCHEMA))


def _integrity_problem(rows: list[Any]) -> str:
    """SQLite's ``quick_check`` answer as one line: its first problem and
    how many more there are."""
    problems = [ln.strip() for r in rows for ln in str(r[0]).splitlines()
                if ln.strip() and not ln.strip().startswith("***")]
    if not problems:
        return "integrity check: no answer"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"integrity check: {problems[0]}{more}"


#: Runs in the order they ran: their start time, then the order they were stored
#: (two run ids made in the same second do not sort by time).
_RUN_ORDER = "COALESCE(started, 0), rowid"


#: Every stored figure with its run and case, as :func:`_point` reads a row.
_POINTS = ("SELECT f.run_id, r.started, r.accepted, f.case_key, f.variable, f.unit, "
           "f.better, f.value, f.samples, f.band_result, c.result, c.fail_phase, r.result "
           "FROM figures f JOIN runs r ON r.run_id=f.run_id JOIN cases c ON "
           "c.run_id=f.run_id AND c.case_key=f.case_key")
_POINTS_ORDER = " ORDER BY " + _RUN_ORDER.replace("started", "r.started").replace(
    "rowid", "r.rowid")


class Store:
    """The results store of one site (``var/<site>/history.sqlite``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    # -- connection -------------------------------------------------------
    def _repair_hint(self) -> str:
        site = self.path.parent.name
        return (f"rebuild it from the run reports with `hpcval store rebuild --site {site}` "
                "(the broken file is kept aside)")

    @contextlib.contextmanager
    def connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        if not write and not self.path.exists():
            raise InputError(f"{self.path}: no results store yet; run "
                             f"`hpcval validate --site {self.path.parent.name}` first")
        try:
            if write:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=60.0)
        except sqlite3.Error as err:
            raise StoreError(f"{self.path}: cannot open the results store: {err}") from None
        except OSError as err:
            raise os_fault(self.path, err, "opening the results store") from None
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            if write:
                conn.execute("PRAGMA journal_mode = WAL")
            ok = conn.execute("PRAGMA quick_check").fetchall()
            if [tuple(r) for r in ok] != [("ok",)]:
                raise sqlite3.DatabaseError(_integrity_problem(ok))
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            missing = sorted(_TABLES - tables)
            if "meta" in tables and missing:
                # the schema below would make them anew, empty: data lost unseen
                raise sqlite3.DatabaseError(f"table(s) {', '.join(missing)} missing")
            if write:
                conn.executescript(_SCHEMA)
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)",
                             (str(SCHEMA_VERSION),))
            version = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if version is None or int(version[0]) != SCHEMA_VERSION:
                raise sqlite3.DatabaseError(f"schema version {version and version[0]}, "
                                            f"expected {SCHEMA_VERSION}")
            yield conn
            conn.commit()
        except sqlite3.OperationalError as err:
            conn.rollback()
            text = str(err)
            full = disk_full(self.path, f"{'writing' if write else 'reading'} the results "
                             "store") if "disk" in text else None
            if full is not None or ("disk" in text and "full" in text):
                # SQLite makes its -shm file even to read: "disk I/O error" on a full disk
                raise StoreError(str(full or os_fault(
                    self.path, OSError(errno.ENOSPC, "disk full"), "writing the results store"))
                ) from None
            if "readonly" in text or "read-only" in text or (
                    "unable to open" in text and not os.access(self.path.parent, os.W_OK)):
                # SQLite writes its -wal and -shm files beside the store even to read it
                raise StoreError(f"{self.path}: the results store is read-only (SQLite "
                                 "writes its -wal and -shm files beside it, even to read); "
                                 f"make {self.path.parent} writable") from None
            if "locked" in text:
                raise StoreError(f"{self.path}: the results store stayed locked by another "
                                 "process for 60 s") from None
            raise StoreError(f"{self.path}: results store unusable ({text}); "
                             f"{self._repair_hint()}") from None
        except sqlite3.DatabaseError as err:
            raise StoreError(f"{self.path}: results store is corrupt ({err}); "
                             f"{self._repair_hint()}") from None
        finally:
            conn.close()

    # -- writing ----------------------------------------------------------
    def add_run(self, run: RunRecord) -> None:
        """Store a run in one transaction (all of it or nothing). A run id
        already stored is an error: nothing stored is ever overwritten."""
        with self.connect(write=True) as conn:
            if conn.execute("SELECT 1 FROM runs WHERE run_id=?", (run.run_id,)).fetchone():
                raise StoreError(f"{self.path}: run {run.run_id} is stored already")
            self._insert(conn, run)

    @staticmethod
    def _insert(conn: sqlite3.Connection, run: RunRecord) -> None:
        conn.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?)",
                     (run.run_id, run.site, run.started, run.finished, run.result,
                      int(run.accepted), run.report, json.dumps(run.provenance, default=str)))
        for c in run.cases:
            conn.execute("INSERT INTO cases VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                         (run.run_id, c.key, c.check, json.dumps(c.params, sort_keys=True),
                          c.system, c.partition, c.environ, c.mpi_stack, c.software_spec,
                          c.nodes, c.result, c.fail_phase, c.fail_reason))
            for f in c.figures:
                conn.execute("INSERT INTO figures VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                             (run.run_id, c.key, f.variable, f.unit, f.better, f.value,
                              json.dumps(f.samples), f.reference, f.lower, f.upper,
                              f.band_result))

    def set_verdicts(self, run_id: str, verdicts: list[tuple[str, str, str, dict[str, Any]]],
                     result: str, accepted: bool) -> None:
        """Store a run's verdicts (case key, variable, outcome, detail) and its
        overall result; a run with a regression is not accepted into baselines."""
        with self.connect(write=True) as conn:
            conn.executemany("INSERT OR REPLACE INTO verdicts VALUES (?,?,?,?,?)",
                             [(run_id, k, v, o, json.dumps(d, default=str))
                              for k, v, o, d in verdicts])
            conn.execute("UPDATE runs SET result=?, accepted=? WHERE run_id=?",
                         (result, int(accepted), run_id))

    def set_accepted(self, run_id: str, accepted: bool) -> None:
        with self.connect(write=True) as conn:
            cur = conn.execute("UPDATE runs SET accepted=? WHERE run_id=?",
                               (int(accepted), run_id))
            if cur.rowcount == 0:
                raise HpcvalError(f"{self.path}: no run {run_id!r} (see `hpcval history`)")

    def set_hold(self, run_id: str, hold: dict[str, Any]) -> None:
        """Record a run held out of baselines (``hold``: ``{"state": "held" |
        "accepted" | "outlier" | "rejected", "reasons": [...], ...}``), kept in the
        ``meta`` table under ``held <run id>`` (and beside the report by the
        caller, for ``store rebuild``)."""
        with self.connect(write=True) as conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                         (f"{HOLD_KEY}{run_id}", json.dumps(hold, default=str)))

    def holds(self) -> dict[str, dict[str, Any]]:
        """Every run that was held, with its hold (see :meth:`set_hold`)."""
        if not self.path.exists():
            return {}
        with self.connect() as conn:
            rows = conn.execute("SELECT key, value FROM meta WHERE key LIKE ?",
                                (f"{HOLD_KEY}%",)).fetchall()
        out = {}
        for key, value in rows:
            try:
                out[key.removeprefix(HOLD_KEY)] = json.loads(value)
            except ValueError:
                continue
        return out

    # -- reading ----------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        with self.connect() as conn:
            conn.row_factory = sqlite3.Row
            return [dict(r) for r in conn.execute(f"SELECT * FROM runs ORDER BY {_RUN_ORDER}")]

    def history(self, check: str | None = None, variable: str | None = None,
                case: str | None = None, before: str | None = None) -> list[HistoryPoint]:
        """Figures of every stored run, oldest first, of cases whose check passed
        its sanity (a case that failed before producing figures has none)."""
        query = _POINTS + " WHERE 1=1"
        args: list[Any] = []
        for clause, value in (("c.check_name=?", check), ("f.variable=?", variable),
                              ("f.case_key=?", case),
                              ("r.rowid<(SELECT rowid FROM runs WHERE run_id=?)", before)):
            if value is not None:
                query += f" AND {clause}"
                args.append(value)
        with self.connect() as conn:
            rows = conn.execute(query + _POINTS_ORDER, args).fetchall()
        return [_point(r) for r in rows]

    def history_of(self, case_keys: Iterable[str], before: str | None = None
                   ) -> dict[tuple[str, str], list[HistoryPoint]]:
        """:meth:`history` of every figure of the cases ``case_keys`` (in runs
        stored before run ``before``, if given), by (case, variable): one query
        for a whole run's figures rather than one per figure."""
        keys = sorted(set(case_keys))
        out: dict[tuple[str, str], list[HistoryPoint]] = {}
        with self.connect() as conn:
            for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
                chunk = keys[start:start + 500]
                where = f" WHERE f.case_key IN ({','.join('?' * len(chunk))})"
                if before is not None:
                    where += " AND r.rowid<(SELECT rowid FROM runs WHERE run_id=?)"
                rows = conn.execute(_POINTS + where + _POINTS_ORDER,
                                    [*chunk, *([before] if before is not None else [])]
                                    ).fetchall()
                for r in rows:
                    out.setdefault((r[3], r[4]), []).append(_point(r))
        return out

    def verdicts(self, run_id: str) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
        with self.connect() as conn:
            rows = conn.execute("SELECT case_key, variable, outcome, detail FROM verdicts "
                                "WHERE run_id=?", (run_id,)).fetchall()
        return {(r[0], r[1]): (r[2], json.loads(r[3])) for r in rows}

    def run_figures(self, run_id: str) -> list[dict[str, Any]]:
        """Every figure of one run with its case (check, parameters, system,
        partition, environment, MPI stack, case result), oldest case first;
        a case without figures comes as one row whose ``variable`` is None.
        For exports and reports that show one run, not a series."""
        with self.connect() as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute(
                "SELECT c.case_key, c.check_name, c.params, c.system, c.partition, c.environ, "
                "c.mpi_stack, c.result AS case_result, c.fail_phase, f.variable, f.unit, "
                "f.better, f.value, f.samples, f.reference, f.lower, f.upper, f.band_result "
                "FROM cases c LEFT JOIN figures f ON f.run_id=c.run_id AND "
                "f.case_key=c.case_key WHERE c.run_id=? ORDER BY c.rowid, f.rowid",
                (run_id,)).fetchall()
        out = []
        for r in rows:
            d = dict(r)
            d["params"] = json.loads(d["params"] or "{}")
            d["samples"] = _finite(json.loads(d["samples"])) if d["samples"] else []
            out.append(d)
        return out


def _point(r: Any) -> HistoryPoint:
    return HistoryPoint(r[0], r[1], bool(r[2]), r[3], r[4], r[5] or "", r[6] or "higher",
                        r[7], _finite(json.loads(r[8])), r[9], r[10], r[11], r[12])
