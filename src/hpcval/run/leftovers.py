"""Files a ``hpcval store rebuild`` killed before it ended left beside the
store (``history.sqlite.<id>.rebuilding``, with its ``-wal``/``-shm``): the
next command of the site removes them when no rebuild holds the site lock,
and says so; while one holds it, they may be its own, and are left alone.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from hpcval.core.errors import LockTimeout
from hpcval.history.rebuild import leftovers
from hpcval.run.lock import holder, site_lock

#: what a rebuild writes in the site lock's holder record (``store rebuild``)
REBUILD_HOLDER = "store rebuild"


def settle_rebuild_leftovers(var: Path) -> str | None:
    """Remove what a killed rebuild left in the site's store *var*; returns
    the line to print, or None where there was nothing."""
    db = var / "history.sqlite"
    if not leftovers(db):
        return None
    lock = var / "validate.lock"
    try:
        with site_lock(lock, "removing what a killed store rebuild left", 0):
            found = leftovers(db)  # under the lock: no rebuild writes any of them now
            removed = []
            for path in found:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(path.name)
    except LockTimeout:
        who = holder(lock)
        if REBUILD_HOLDER in who:
            return None  # a rebuild at work: its own files
        return (f"hpcval: {len(leftovers(db))} file(s) in {var} left by a `store rebuild` "
                f"killed before it ended ({leftovers(db)[0].name}, ...); the site lock is "
                f"held ({who}): the next command removes them")
    if not removed:
        return None
    return (f"hpcval: removed {len(removed)} file(s) left in {var} by a `store rebuild` killed "
            f"before it ended: {', '.join(removed)}")
