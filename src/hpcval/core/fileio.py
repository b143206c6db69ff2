"""Writing files so that nothing is half-written, overwritten or lost.

Every file hpcval writes into a site or its results store goes through
:func:`atomic_write`: a uniquely named temporary file in the same directory,
flushed to disk, then renamed over the target. Readers see the old file or the
new one, never a mix; two writers never share a temporary file. Backups get a
unique name (:func:`keep_backup`), so two writers in one second keep both.
OS errors become one line naming the path: ``disk full`` with the free space
for ENOSPC (:func:`disk_full`), ``read-only`` for EROFS/EACCES (exit 3, an
environment fault).
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

from hpcval.core.errors import EnvironmentFault, InputError
from hpcval.core.runid import new_run_id

#: Free space a results store needs to be written to (a run, its report and
#: pages); a store that fails to open or write with less is on a full disk.
MIN_FREE_BYTES = 64 << 20


def free_space(path: str | Path) -> int | None:
    """Bytes free to this user on the file system of ``path`` (its nearest
    existing parent); ``None`` when that cannot be read."""
    where = Path(path)
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        return shutil.disk_usage(where).free
    except OSError:
        return None


def _amount(free: int) -> str:
    return f"{free >> 20} MiB" if free >= 1 << 20 else f"{free >> 10} KiB"


def disk_full(path: str | Path, doing: str, need: int = MIN_FREE_BYTES,
              free: int | None = None) -> EnvironmentFault | None:
    """The fault ``<path>: disk full (N MiB free, ...) while <doing>`` when the
    file system of ``path`` has less than ``need`` bytes free (``free``: as
    already measured), else ``None``. Every command names a full disk so, with
    exit 3, never as wrong input or as a store to rebuild."""
    free = free_space(path) if free is None else free
    if free is None or free >= need:
        return None
    return EnvironmentFault(f"{path}: disk full ({_amount(free)} free, hpcval needs "
                            f"{_amount(need)}) while {doing}; free space on that file system "
                            "and run again (nothing stored was changed)")


def os_fault(path: str | Path, err: OSError, doing: str) -> EnvironmentFault:
    """An :class:`EnvironmentFault` naming ``path`` and what the OS said."""
    if err.errno == errno.ENOSPC:
        free = free_space(path)
        room = "" if free is None else f" ({_amount(free)} free)"
        return EnvironmentFault(f"{path}: disk full{room} while {doing}; free space on that "
                                "file system and run again (nothing stored was changed)")
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return EnvironmentFault(f"{path}: not writable ({err.strerror}) while {doing}; make "
                                "it writable or point HPCVAL_VAR at a writable directory")
    return EnvironmentFault(f"{path}: {err.strerror or err} while {doing}")


def output_file(path: str | Path, flag: str) -> Path:
    """A file to write named on the command line (``-o``, ``--html``): an
    empty name, a directory or anything but a regular file (a device such as
    ``/dev/full``, ``/dev/stdout``, a pipe: :func:`atomic_write` would rename
    a file over it) is wrong input (exit 2), said before any work. A symbolic
    link to a file is followed: the file it names is replaced."""
    if not str(path).strip():
        raise InputError(f"{flag}: an empty file name; give the file to write")
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{flag} {path}: a directory; give the file to write in it "
                         f"(e.g. {path / 'NAME'})")
    if path.exists() and not path.is_file():
        raise InputError(f"{flag} {path}: not a regular file (a device, a pipe or a "
                         "terminal); give a file path"
                         + (", or leave -o out to print to standard output"
                            if flag == "-o" else ""))
    if path.is_symlink():
        return path.resolve()
    return path


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
