"""Nothing reshapes a lab in use.

A fabric profile or a delay changed while a validation, a vet or any Slurm job
measures on the lab makes that run measure two fabrics and be stored as one
(docs/compare.md had such a run). So :func:`reshaping` refuses (exit 3, one
line naming the holder) while

- the ``lab`` site's lock (``var/lab/validate.lock``, what ``hpcval validate
  --site lab`` holds for its whole run: :mod:`hpcval.run.lock`) is held, or
- a Slurm job of the lab runs (``squeue``): a vet's allocation, a validation
  with another results store (``HPCVAL_VAR``), a plain ``srun``/``sbatch``;

and otherwise holds the site lock while it reshapes, so that a validation
starting meanwhile waits for it (and reads ``lab fabric`` as the holder).
``force`` reshapes anyway, saying whom it disturbs.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hpcval.core.errors import EnvironmentFault, HpcvalError
from hpcval.run.lock import holder, write_holder


class LabInUse(EnvironmentFault):
    """The lab is measuring (a validation's site lock, a Slurm job): exit 3."""


@dataclass(frozen=True)
class Job:
    job_id: str
    name: str
    user: str
    elapsed: str
    nodes: str

    def text(self) -> str:
        return (f"Slurm job {self.job_id} ({self.name}, user {self.user}) running for "
                f"{self.elapsed} on {self.nodes}")


#: ``squeue`` output format that :func:`parse_jobs` reads
SQUEUE_FORMAT = "%i|%j|%u|%M|%N"


def parse_jobs(text: str) -> list[Job]:
    """Jobs from ``squeue -h -o SQUEUE_FORMAT`` output (malformed lines skipped)."""
    jobs = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5 and parts[0]:
            jobs.append(Job(*parts))
    return jobs


def running_jobs() -> list[Job]:
    """Jobs running on the lab's Slurm (a completing one has measured); none where it
    does not answer."""
    try:
        proc = subprocess.run(["squeue", "-h", "-t", "R", "-o", SQUEUE_FORMAT],
                              capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_jobs(proc.stdout) if proc.returncode == 0 else []


def lab_site_lock() -> Path | None:
    """The ``lab`` site's lock file (under ``$HPCVAL_VAR`` or the checkout's
    ``var/``), or None outside a checkout."""
    from hpcval.site import Site

    try:
        return Site.load("lab", must_exist=False).lock_file
    except HpcvalError:
        return None


@contextlib.contextmanager
def reshaping(action: str, force: bool = False, log: Callable[[str], None] = print,
              lock: Path | None = None,
              jobs: Callable[[], list[Job]] = running_jobs) -> Iterator[None]:
    """Hold the lab site's lock for the block, or refuse while the lab is in use
    (:class:`LabInUse`, exit 3). ``action`` names the command, e.g. ``lab fabric``."""
    lock = lock if lock is not None else lab_site_lock()
    fd: int | None = None
    holders: list[str] = []
    if lock is not None and lock.parent.is_dir():
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            fd = None
            if err.errno not in (errno.EAGAIN, errno.EACCES):
                raise EnvironmentFault(f"{lock}: cannot lock: {err.strerror}") from None
            holders.append(f"{lock} is held by {holder(lock)}")
    holders += [job.text() for job in jobs()]
    if holders:
        more = f" (and {len(holders) - 1} more)" if len(holders) > 1 else ""
        if not force:
            if fd is not None:
                os.close(fd)
            raise LabInUse(f"{action}: the lab is in use: {holders[0]}{more}; wait until it "
                           "ends (or give --force: what it measures then spans two fabrics)")
        log(f"{action}: --force: reshaping the lab in use: {holders[0]}{more}")
    try:
        if fd is not None:
            write_holder(fd, action)
        yield
    finally:
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
