"""A per-site lock, so that validations of one site run one after another.

Two validations of a site at once would share the machine's cores and
distort each other's figures; both must still complete and be stored. The
second one waits for the first (``flock`` on ``var/<site>/validate.lock``)
and gives up after ``timeout`` seconds with a message naming the holder
(process, host, run id, since when). The kernel releases the lock when its
holder dies, so a crashed run never blocks the next one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from hpcval.core.errors import EnvironmentFault, LockTimeout


def seconds(text: str) -> float:
    """A ``--lock-timeout``: a number of seconds, 0 or more (``inf``: wait
    as long as it takes); ``nan`` or a negative number is refused."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "unknown holder"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.get("since", 0)))
    return (f"pid {info.get('pid', '?')} on {info.get('host', '?')}, "
            f"{info.get('what', '?')}, since {since}")


def write_holder(fd: int, what: str) -> None:
    """Record in a lock file that this process holds it, and for what (what
    :func:`holder` reads back for the next one)."""
    info = {"pid": os.getpid(), "host": socket.gethostname(), "what": what,
            "since": time.time()}
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)


@contextlib.contextmanager
def site_lock(path: Path, what: str, timeout: float, log=None) -> Iterator[None]:
    """Hold the lock file ``path`` for the block; ``what`` names the holder
    (e.g. ``validate run 20261123T193500Z-3fa2c1``) for whoever waits."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise EnvironmentFault(f"{path}: cannot create the site lock: {err.strerror}; "
                               "check that the results store is writable") from None
    try:
        deadline = time.monotonic() + timeout
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES):
                    raise EnvironmentFault(f"{path}: cannot lock: {err.strerror}") from None
            if time.monotonic() >= deadline:
                raise LockTimeout(
                    f"{path}: held by {holder(path)}; waited {timeout:g} s. Wait for it to "
                    "finish, or give --lock-timeout more seconds")
            if not told and log is not None:
                log(f"hpcval: waiting for the site lock {path} ({holder(path)})")
                told = True
            time.sleep(0.2)
        write_holder(fd, what)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
