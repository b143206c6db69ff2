"""The processes of a run, and stopping them all when hpcval is stopped.

Scheduled validation is stopped from outside all the time: ``timeout`` in a
cron line, a systemd stop, an administrator's ``kill``, a closed terminal.
While ReFrame runs, :class:`RunStopper` turns SIGTERM, SIGHUP and SIGINT into
an orderly stop:

1. the signal is passed to ReFrame's whole process group (ReFrame runs in a
   session of its own): ReFrame aborts as it does on its own, cancelling its
   scheduler jobs and killing its launches, and writes its run report with
   what finished;
2. after :data:`GRACE_ENV` seconds (default :data:`DEFAULT_GRACE`), or at a
   second signal, what is left is killed (SIGKILL);
3. when ReFrame is gone, every process that still carries the run's id in its
   environment (``HPCVAL_RUN_ID=<id>``: launcher daemons such as Hydra's
   proxies or ``orted`` leave ReFrame's process group, but not its
   environment) is killed, and the run's Slurm jobs still queued or running
   (their working directory is in the run's stage directory) are cancelled;
   hpcval waits until they are gone, so the site lock is released only then.

A signal that arrives after ReFrame finished (while the run is judged or
stored) is remembered: the storing completes (the store stays consistent)
and the run is then marked ``interrupted``. The exit code is the signal's,
``128 + N`` (docs/errors.md).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from hpcval.core.runid import ENV as RUN_ID_ENV

#: the signals that stop a run in order
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

#: seconds ReFrame gets to stop on its own after the first signal
GRACE_ENV = "HPCVAL_STOP_GRACE"
DEFAULT_GRACE = 30.0

#: seconds to wait for the run's leftover processes to exit after SIGKILL
KILL_WAIT = 10.0

#: test hook: ``HPCVAL_TEST_PAUSE=<phase>`` makes hpcval wait at that phase of
#: a run (``judging``, ``storing``) until a signal arrives (at most 120 s), so
#: that tests can send a real signal at a known point
PAUSE_ENV = "HPCVAL_TEST_PAUSE"


def grace_seconds() -> float:
    """:data:`GRACE_ENV` as a number of seconds (0 or more)."""
    text = os.environ.get(GRACE_ENV, "")
    if not text:
        return DEFAULT_GRACE
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        from hpcval.core.errors import InputError

        raise InputError(f"{GRACE_ENV}={text!r}: not a number of seconds; give 0 or more "
                         f"(default {DEFAULT_GRACE:g})")
    return value


def marked(run_id: str) -> list[int]:
    """The processes whose environment carries ``HPCVAL_RUN_ID=<run_id>``
    (hpcval itself excluded)."""
    needle = f"{RUN_ID_ENV}={run_id}".encode()
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
        except OSError:  # gone, or another user's
            continue
        if needle in env.split(b"\0"):
            found.append(int(entry))
    return sorted(found)


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z"


def _kill(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def slurm_jobs(stage_dir: Path) -> list[str]:
    """The Slurm jobs of this user whose working directory lies in the run's
    stage directory (none where Slurm is not installed)."""
    squeue = shutil.which("squeue")
    if squeue is None:
        return []
    try:
        out = subprocess.run([squeue, "--noheader", "--me", "-o", "%i|%Z"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    prefix = str(stage_dir.resolve())
    jobs = []
    for line in out.splitlines():
        job, _, workdir = line.partition("|")
        if workdir.strip() == prefix or workdir.strip().startswith(prefix + os.sep):
            jobs.append(job.strip())
    return jobs


class RunStopper:
    """Catches the stop signals for the length of a run (see the module's
    docstring); ``signum`` is the first signal received, or ``None``."""

    def __init__(self, run_id: str, stage_dir: Path | None = None,
                 grace: float | None = None) -> None:
        self.run_id = run_id
        self.stage_dir = stage_dir
        self.grace = grace_seconds() if grace is None else grace
        self.signum: int | None = None
        self.proc: subprocess.Popen[str] | None = None
        self._timer: threading.Timer | None = None
        self._old: dict[int, object] = {}
        #: what was still running when the run stopped, and what was killed
        self.left: list[int] = []
        self.killed: list[int] = []
        self.cancelled: list[str] = []
        #: where the run in progress is recorded (:data:`RUN_RECORD`), if anywhere
        self.record: Path | None = None

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or 0)

    @contextlib.contextmanager
    def installed(self) -> Iterator[RunStopper]:
        """The handlers for the block (the previous ones restored after it);
        only in the main thread, where Python delivers signals."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        for sig in STOP_SIGNALS:
            self._old[sig] = signal.signal(sig, self._on_signal)
        try:
            yield self
        finally:
            if self._timer is not None:
                self._timer.cancel()
            for sig, old in self._old.items():
                signal.signal(sig, old)  # type: ignore[arg-type]

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
            name = signal.Signals(signum).name
            with contextlib.suppress(OSError, ValueError):
                if signum == signal.SIGHUP:
                    # the terminal is gone: what hpcval still prints goes nowhere
                    null = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(null, 1)
                    os.dup2(null, 2)
                    os.close(null)
                print(f"hpcval: {name} received: stopping run {self.run_id} (ReFrame gets "
                      f"{self.grace:g} s, then what is left is killed)", file=sys.stderr,
                      flush=True)
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return  # ReFrame is done: the run is judged and stored, then marked
        if first:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signum)
            self._timer = threading.Timer(self.grace, self.force)
            self._timer.daemon = True
            self._timer.start()
        else:
            self.force()

    def force(self) -> None:
        """SIGKILL to ReFrame's process group and every marked process."""
        proc = self.proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        pids = marked(self.run_id)
        self.killed += pids
        _kill(pids, signal.SIGKILL)

    def reap(self) -> None:
        """After ReFrame exited on a signal: cancel the run's Slurm jobs, kill
        every process of the run still alive and wait until all are gone (at
        most the grace time and :data:`KILL_WAIT` seconds)."""
        if self._timer is not None:
            self._timer.cancel()
        if self.proc is not None:  # ReFrame's own group, if anything is left in it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.stage_dir is not None:
            self.cancelled = slurm_jobs(self.stage_dir)
            scancel = shutil.which("scancel")
            if self.cancelled and scancel:
                subprocess.run([scancel, *self.cancelled], capture_output=True, timeout=60,
                               check=False)
        deadline = time.monotonic() + min(self.grace, 5.0)
        left = [p for p in marked(self.run_id) if _alive(p)]
        while left and time.monotonic() < deadline:  # let launches end on their own
            time.sleep(0.1)
            left = [p for p in left if _alive(p)]
        if left:
            self.killed += left
            _kill(left, signal.SIGKILL)
        deadline = time.monotonic() + KILL_WAIT
        while time.monotonic() < deadline:
            left = [p for p in marked(self.run_id) if _alive(p)]
            if not left:
                break
            _kill(left, signal.SIGKILL)
            time.sleep(0.1)
        self.left = left
        if left:
            print(f"hpcval: error: processes of run {self.run_id} still alive after SIGKILL "
                  f"(pids {', '.join(map(str, left))}: stuck in the kernel?)",
                  file=sys.stderr, flush=True)

    def pause(self, phase: str) -> None:
        """The test hook :data:`PAUSE_ENV`: wait at *phase* until a signal
        arrives (at most 120 s)."""
        if os.environ.get(PAUSE_ENV) != phase:
            return
        print(f"hpcval: paused at {phase} ({PAUSE_ENV})", file=sys.stderr, flush=True)
        deadline = time.monotonic() + 120
        while self.signum is None and time.monotonic() < deadline:
            time.sleep(0.05)


#: the stopper of the run in progress in this process (for :func:`pause`)
current: RunStopper | None = None


def pause(phase: str) -> None:
    """:meth:`RunStopper.pause` of the run in progress, if any."""
    if current is not None:
        current.pause(phase)


# -- a run that outlived its hpcval (SIGKILL, an OOM kill) ------------------
#
# SIGKILL cannot be caught: ReFrame, its launchers and ranks run on without
# hpcval, and the kernel frees the site lock at once. So every validation
# records its run id and ReFrame's process group in ``var/<site>/run.json``
# (removed when it ends), and the next validation (or ``store rebuild``)
# looks there first, under the site lock: a record left behind names a run
# whose hpcval died; its processes still alive are stopped before anything
# else runs, and the run is marked ``orphaned`` (hpcval.run.verdicts.mark_orphaned).

#: the record of the validation in progress, in ``var/<site>/``
RUN_RECORD = "run.json"


def record_run(path: Path, run_id: str, pgid: int | None = None) -> None:
    """Note (atomically) that run *run_id* is in progress: this hpcval's pid,
    host and ReFrame's process group (once ReFrame started)."""
    import json
    import socket

    from hpcval.core.fileio import atomic_write

    atomic_write(path, json.dumps({"run_id": run_id, "hpcval_pid": os.getpid(),
                                   "host": socket.gethostname(), "pgid": pgid,
                                   "since": time.time()}), "recording the run in progress")


def forget_run(path: Path, run_id: str) -> None:
    """Remove the record of *run_id* (a record of another run is left alone)."""
    rec = read_run_record(path)
    if rec is not None and rec.get("run_id") == run_id:
        with contextlib.suppress(OSError):
            path.unlink()


def read_run_record(path: Path) -> dict[str, object] | None:
    """The record at *path*, or None (none, or unreadable: then removed)."""
    import json

    from hpcval.core.runid import valid

    try:
        rec = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        rec = None
    if not isinstance(rec, dict) or not valid(str(rec.get("run_id", ""))):
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return rec


def group_members(pgid: int) -> list[int]:
    """The processes of process group *pgid* (hpcval itself excluded)."""
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] != b"Z":
            found.append(int(entry))
    return sorted(found)


def run_processes(run_id: str, pgid: int | None = None) -> list[int]:
    """Every live process of run *run_id*: those carrying its id in their
    environment and those of ReFrame's process group *pgid*."""
    pids = set(marked(run_id))
    if pgid:
        pids.update(group_members(pgid))
    return sorted(p for p in pids if _alive(p))


def stop_run(run_id: str, pgid: int | None, stage_dir: Path | None,
             grace: float = 5.0) -> list[int]:
    """Stop what is left of run *run_id*: SIGTERM (ReFrame aborts, cancelling
    its jobs), after *grace* seconds SIGKILL, its Slurm jobs cancelled; waits
    until every process is gone (at most :data:`KILL_WAIT` more seconds).
    Returns the processes found alive at first."""
    first = run_processes(run_id, pgid)
    if pgid and first:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    _kill(first, signal.SIGTERM)
    if stage_dir is not None:
        jobs = slurm_jobs(stage_dir)
        scancel = shutil.which("scancel")
        if jobs and scancel:
            subprocess.run([scancel, *jobs], capture_output=True, timeout=60, check=False)
    deadline = time.monotonic() + grace
    left = run_processes(run_id, pgid)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = run_processes(run_id, pgid)
    deadline = time.monotonic() + KILL_WAIT
    while left and time.monotonic() < deadline:
        if pgid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        _kill(left, signal.SIGKILL)
        time.sleep(0.1)
        left = run_processes(run_id, pgid)
    return first
