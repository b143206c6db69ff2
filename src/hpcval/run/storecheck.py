"""Checks a validation run makes before its first benchmark: the site's files
(skipped when nothing they depend on changed since they last passed: the
stamp in ``var/<site>/site-files.checked``), and the results store: writable,
with room, opened, checked and lockable (exit 3 when not).

Exit codes: :mod:`hpcval.core.errors`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import IO

from hpcval.core.fileio import MIN_FREE_BYTES, disk_full, os_fault
from hpcval.site import Site
from hpcval.site import references as refs

#: what the last successful check of a site's files saw (see :func:`_site_files_stamp`)
SITE_FILES_STAMP = "site-files.checked"


def _site_files_stamp(site: Site) -> str:
    """Every input of :meth:`hpcval.site.Site.check_files` (the site's files by
    content, the check files and hpcval's checking code by mtime and size) with
    the versions of hpcval and ReFrame: equal stamps, equal verdict."""
    from importlib import metadata

    from hpcval import site as site_module
    from hpcval.core import judgingsettings as settings
    from hpcval.core import yamlio
    from hpcval.node import audit, expectations, tuning

    parts = []
    for dist in ("hpcval", "ReFrame-HPC"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist} -")
    for site_file in site.checked_files:
        try:  # the site's own files by content: an edit is never missed
            parts.append(f"{site_file} {hashlib.sha256(site_file.read_bytes()).hexdigest()}")
        except OSError:
            parts.append(f"{site_file} -")
    files = [Path(m.__file__ or "") for m in (refs, audit, expectations, tuning, settings, yamlio,
                                                   site_module)]
    for directory in (site.checks_dir, Path(refs.__file__).resolve().parents[1] / "rfm"):
        files += sorted(directory.rglob("*.py"))
    for file in files:
        try:
            st = file.stat()
            parts.append(f"{file} {st.st_mtime_ns} {st.st_size}")
        except OSError:
            parts.append(f"{file} -")
    return "\n".join(parts) + "\n"


def _site_files_checked(site: Site, stamp: str) -> bool:
    try:
        return (site.var / SITE_FILES_STAMP).read_text() == stamp
    except (OSError, UnicodeDecodeError):
        return False


def _preflight(site: Site, store_wait: float = 60.0) -> None:
    try:
        site.var.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(site.var).free
        probe = site.var / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise os_fault(site.var, err, "preparing the results store") from None
    full = disk_full(site.var, "preparing the results store for a run", MIN_FREE_BYTES, free)
    if full is not None:
        raise full
    check_store(site, wait=store_wait)


#: seconds ``validate`` waits for another process's lock on the results store
STORE_LOCK_WAIT = 60.0


def check_store(site: Site, err: IO[str] = sys.stderr, wait: float = STORE_LOCK_WAIT) -> None:
    """The results store opened and checked (SQLite's integrity check, its
    tables, a write lock it can take) before the first benchmark runs: a
    corrupt, read-only or locked store is named (exit 3) before minutes of
    benchmarks, not after. Waiting on another process's lock is said."""
    import sqlite3

    from hpcval.core.errors import StoreError
    from hpcval.history.store import Store

    db = site.history_db
    if not db.exists():
        return  # made by the first run
    deadline = time.monotonic() + wait
    told = False
    while True:
        try:
            conn = sqlite3.connect(db, timeout=0.2)
        except sqlite3.Error:
            break  # named by Store.connect below
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.rollback()
            break
        except sqlite3.OperationalError as error:
            if "locked" not in str(error):
                break
            if time.monotonic() >= deadline:
                raise StoreError(f"{db}: the results store stayed locked by another process "
                                 f"for {wait:g} s; find it with `fuser {db}` and let it "
                                 "finish") from None
            if not told:
                print(f"hpcval: waiting for the results store {db}: locked by another "
                      f"process (at most {wait:g} s)", file=err, flush=True)
                told = True
            time.sleep(0.5)
        except sqlite3.DatabaseError:
            break  # corrupt: named by Store.connect below
        finally:
            conn.close()
    with Store(db).connect():
        pass  # integrity and schema: StoreError (exit 3) naming the store and the rebuild

