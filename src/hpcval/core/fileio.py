"""Writing files so that nothing is half-written, overwritten or lost.

Every file hpcval writes into a site or its results store goes through
:func:`atomic_write`: a uniquely named temporary file in the same directory,
flushed to disk, then renamed over the target. Readers see the old file or the
new one, never a mix; two writers never share a temporary file. Backups get a
unique name (:func:`keep_backup`), so two writers in one second keep both.
OS errors become one line naming the path: ``disk full`` for ENOSPC,
``read-only`` for EROFS/EACCES (exit 3, an environment fault).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hpcval.core.errors import EnvironmentFault
from hpcval.core.runid import new_run_id


def os_fault(path: str | Path, err: OSError, doing: str) -> EnvironmentFault:
    """An :class:`EnvironmentFault` naming ``path`` and what the OS said."""
    if err.errno == errno.ENOSPC:
        return EnvironmentFault(f"{path}: disk full while {doing}; free space on that file "
                                "system and run again (nothing stored was changed)")
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return EnvironmentFault(f"{path}: not writable ({err.strerror}) while {doing}; make "
                                "it writable or point HPCVAL_VAR at a writable directory")
    return EnvironmentFault(f"{path}: {err.strerror or err} while {doing}")


def atomic_write(path: str | Path, data: str | bytes, doing: str = "writing",
                 mode: int = 0o666) -> Path:
    """Write ``data`` to ``path`` atomically (temp file + fsync + rename).

    The file gets ``mode`` less the umask, as ``open()`` gives a new file (a
    temporary file alone would be 0600: a report or page others cannot read).
    The temporary file's name starts with a dot and ends in ``.tmp``."""
    path = Path(path)
    tmp: str | None = None
    umask = os.umask(0)
    os.umask(umask)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, mode & ~umask)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as err:
        raise os_fault(path, err, doing) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return path


def unused_name(path: str | Path, suffix: str) -> Path:
    """``<path>.<UTC time>-<random>.<suffix>``, a name no file has yet: a copy or
    rename to it never replaces another one kept the same second."""
    path = Path(path)
    while True:
        aside = path.with_name(f"{path.name}.{new_run_id()}.{suffix}")
        if not aside.exists():
            return aside


def keep_backup(path: str | Path) -> Path | None:
    """Copy ``path`` to ``<path>.<UTC time>-<random>.bak`` (:func:`unused_name`)
    before it is replaced; ``None`` when there is nothing to keep."""
    path = Path(path)
    if not path.exists():
        return None
    backup = unused_name(path, "bak")
    try:
        shutil.copy2(path, backup)
    except OSError as err:
        raise os_fault(backup, err, "keeping a backup") from None
    return backup


@contextlib.contextmanager
def warnings_to_log(log: str | Path, what: str = "") -> Iterator[None]:
    """Python warnings (scipy's and numpy's precision notes while judging,
    deprecations) appended to *log* for the block, with the time and *what*
    (the command), instead of printed among the verdicts; where the log
    cannot be written, they go to standard error as before."""
    import time
    import warnings

    path = Path(log)
    shown = warnings.showwarning

    def to_log(message: Warning | str, category: type[Warning], filename: str, lineno: int,
               file: Any = None, line: str | None = None) -> None:
        text = warnings.formatwarning(message, category, filename, lineno, line)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as f:
                f.write(f"[{time.strftime('%Y-%m-%dT%H:%M:%S')}] {what}: {text}")
        except OSError:
            shown(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.showwarning = to_log
        yield
