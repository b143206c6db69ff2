"""Files a ``hpcval store rebuild`` killed before it ended left beside the
store (``history.sqlite.<id>.rebuilding``, with its ``-wal``/``-shm``): the
next command of the site removes them when no rebuild holds the site lock,
and says so; while one holds it, they may be its own, and are left alone.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from hpcval.core.errors import EnvironmentFault, LockTimeout
from hpcval.history.rebuild import leftovers
from hpcval.run.lock import holder, site_lock

#: what a rebuild writes in the site lock's holder record (``store rebuild``)
REBUILD_HOLDER = "store rebuild"
#: what this module writes there while it removes them
CLEANER = "removing what a killed rebuild left"


def settle_rebuild_leftovers(var: Path) -> str | None:
    """Remove what a killed rebuild left in the site's store *var*; returns
    the line to print, or None where there was nothing."""
    db = var / "history.sqlite"
    if not leftovers(db):
        return None
    lock = var / "validate.lock"
    try:
        with site_lock(lock, CLEANER, 0):
            found = leftovers(db)  # under the lock: no rebuild writes any of them now
            removed = []
            for path in found:
                with contextlib.suppress(OSError):  # a read-only store: named below
                    path.unlink()
                    removed.append(path.name)
    except LockTimeout:
        who, left = holder(lock), leftovers(db)
        if REBUILD_HOLDER in who or CLEANER in who or not left:
            return None  # a rebuild at work (its own files), or another command removing them
        return (f"hpcval: {len(left)} file(s) in {var} left by a `store rebuild` killed "
                f"before it ended ({left[0].name}, ...); the site lock is held ({who}): the "
                "next command removes them")
    except EnvironmentFault as err:  # the lock cannot be made: a read-only store
        left = leftovers(db)
        return (f"hpcval: {len(left)} file(s) in {var} left by a `store rebuild` killed before "
                f"it ended ({left[0].name if left else '-'}, ...): not removed ({err})")
    if len(removed) < len(found):
        return (f"hpcval: {len(found) - len(removed)} file(s) in {var} left by a `store "
                f"rebuild` killed before it ended could not be removed "
                f"({', '.join(p.name for p in found if p.name not in removed)}): remove them")
    if not removed:
        return None
    return (f"hpcval: removed {len(removed)} file(s) left in {var} by a `store rebuild` killed "
            f"before it ended: {', '.join(removed)}")
