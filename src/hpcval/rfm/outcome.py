"""How a benchmark job ended, told in one line.

A benchmark can print a complete, plausible table and still have failed: a
rank crashed after its last row, the launcher exited non-zero, the scheduler
ended the job for its time limit or a node failure. :class:`hpcval.rfm.HpcvalTest`
asks this module, before judging any output, whether the job ended well, and
fails the check naming the cause (exit code, signal, scheduler event, the tail
of the job's standard error). Figures that are not finite or cannot be
physical (negative times, a bandwidth beyond any transport) are rejected here
too. Nothing here needs ReFrame: the functions take what the job left behind.

Every launch of the benchmark goes through :data:`LAUNCH_SCRIPT`, a small
POSIX shell wrapper written in the stage directory that appends ``start`` and
``end <exit status>`` to :data:`LAUNCH_STATUS`; a check that runs its
benchmark several times in one job (samples) so gets every launch judged,
whatever the job script's last command returned. Once a launch has failed,
the later launches of the job are skipped (the check fails anyway).
"""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# what no measurement can be is a fact of the figure vocabulary (hpcval.core.figures)
from hpcval.core.figures import BANDWIDTH_UNITS as BANDWIDTH_UNITS
from hpcval.core.figures import DEFAULT_MAX_BANDWIDTH_MBS as DEFAULT_MAX_BANDWIDTH_MBS
from hpcval.core.figures import TIME_UNITS as TIME_UNITS
from hpcval.core.figures import impossible_figure as impossible_figure
from hpcval.core.figures import impossible_figures as impossible_figures

LAUNCH_SCRIPT = "hpcval-launch.sh"
LAUNCH_STATUS = "hpcval-launch-status"

LAUNCH_SCRIPT_TEXT = """#!/bin/sh
# Written by hpcval (hpcval.rfm.outcome): runs one launch of the benchmark and
# records how it ended, so that a crash after a complete table fails the check.
status=$1
shift
if grep -q '^end [1-9]' "$status" 2>/dev/null; then
    # an earlier launch of this job failed: the check fails; spend no more time
    echo skip >> "$status"
    exit 125
fi
echo start >> "$status"
"$@"
rc=$?
echo "end $rc" >> "$status"
exit $rc
"""

#: Slurm job states that end a job for a reason of the scheduler or the
#: machine, with how hpcval names them.
SLURM_EVENTS: dict[str, str] = {
    "TIMEOUT": "time limit reached: Slurm cancelled the job (TIMEOUT)",
    "NODE_FAIL": "node failure: Slurm ended the job because a node failed (NODE_FAIL)",
    "PREEMPTED": "preempted: Slurm ended the job for another one (PREEMPTED)",
    "OUT_OF_MEMORY": "out of memory: the job was killed for exceeding its memory (OUT_OF_MEMORY)",
    "BOOT_FAIL": "node boot failure: the job could not start (BOOT_FAIL)",
    "DEADLINE": "deadline reached: Slurm cancelled the job (DEADLINE)",
    "CANCELLED": "cancelled: the job was cancelled (CANCELLED)",
}

#: Lines schedulers and launchers write to a job's standard error when they
#: end it, and what they mean.
STDERR_EVENTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"CANCELLED AT \S+ DUE TO TIME LIMIT"), "TIMEOUT"),
    (re.compile(r"CANCELLED AT \S+ DUE TO NODE FAIL"), "NODE_FAIL"),
    (re.compile(r"DUE TO PREEMPTION"), "PREEMPTED"),
    (re.compile(r"oom[-_ ]kill|Out Of Memory|OUT_OF_MEMORY", re.IGNORECASE), "OUT_OF_MEMORY"),
    (re.compile(r"JOB \S+ ON \S+ CANCELLED AT"), "CANCELLED"),
]


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 70`` where the number has no name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_status(code: int) -> str:
    """An exit status as a shell reports it: above 128 it is a signal."""
    if code > 128 and code - 128 < 65:
        return f"exit code {code} (128+{code - 128}: killed by {signal_name(code - 128)})"
    return f"exit code {code}"


@dataclass(frozen=True)
class Launch:
    """One launch of the benchmark: its exit status, or ``None`` if it never ended."""

    number: int
    status: int | None


def read_launches(path: Path) -> list[Launch] | None:
    """The launches recorded in a :data:`LAUNCH_STATUS` file, ``None`` where
    there is no such file (the job never ran the wrapper)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    launches: list[Launch] = []
    for line in lines:
        words = line.split()
        if words[:1] == ["start"]:
            launches.append(Launch(len(launches) + 1, None))
        elif words[:1] == ["end"] and launches and launches[-1].status is None:
            try:
                code = int(words[1])
            except (IndexError, ValueError):
                code = 255
            launches[-1] = Launch(launches[-1].number, code)
    return launches


#: How launchers say that one rank died, with the rank and the signal or code.
RANK_DEATH: list[re.Pattern[str]] = [
    # Intel MPI / MPICH hydra
    re.compile(r"RANK (?P<rank>\d+) PID \d+ RUNNING AT (?P<node>\S+)\s*\n\s*=\s*"
               r"(?:KILLED BY SIGNAL: (?P<signal>\d+)|EXIT STATUS: (?P<code>\d+))"),
    re.compile(r"EXIT STRING: .*\(signal (?P<signal>\d+)\)"),
    # Open MPI
    re.compile(r"process rank (?P<rank>\d+) with PID \d+ on node (?P<node>\S+) exited on "
               r"signal (?P<signal>\d+)"),
    re.compile(r"Process name: \[\[\d+,\d+\],(?P<rank>\d+)\]\s*\n\s*Exit code:\s*(?P<code>\d+)"),
    # srun
    re.compile(r"srun: error: (?P<node>\S+): tasks? (?P<rank>[\d,-]+): (?P<what>[A-Z][\w ]+)"),
]


#: Intel MPI's variable for the signal hydra sends the other ranks when one
#: dies (hydra's default: SIGKILL); hpcval sets it for Intel MPI launches
#: (:func:`hpcval.rfm.launch.set_launcher`) so that the rank that died first
#: is told from the ranks hydra then ended
HYDRA_ABORT_SIGNAL_ENV = "I_MPI_JOB_ABORT_SIGNAL"
#: the value hpcval gives it
HYDRA_CLEANUP_SIGNAL = int(signal.SIGTERM)

_HYDRA_BLOCK = RANK_DEATH[0]


def first_hydra_death(text: str, cleanup: int = int(signal.SIGKILL)) -> str | None:
    """Of hydra's ``BAD TERMINATION`` blocks (one per rank that ended badly,
    in rank order, not in the order they died), the rank that died first:
    one that exited non-zero, else one killed by another signal than the one
    hydra ends the other ranks with (*cleanup*). Where every block carries
    the clean-up signal, which rank died first is not in the output, and the
    line says so rather than blame the first rank listed."""
    blocks = list(_HYDRA_BLOCK.finditer(text))
    if not blocks:
        return None

    def who(m: re.Match[str]) -> str:
        return f"rank {m.group('rank')} on {m.group('node')}"

    cause = next((m for m in blocks if m.group("code") is not None), None) or next(
        (m for m in blocks if m.group("signal") and int(m.group("signal")) != cleanup), None)
    ended = [m for m in blocks if m is not cause]
    then = (f" (hydra then ended {', '.join(who(m) for m in ended)} with "
            f"{signal_name(cleanup)})") if ended else ""
    if cause is not None and cause.group("code") is not None:
        return f"{who(cause)} exited with {describe_status(int(cause.group('code')))}{then}"
    if cause is not None:
        return f"{who(cause)} was killed by {signal_name(int(cause.group('signal')))}{then}"
    if len(blocks) == 1 and cleanup == int(signal.SIGKILL):
        return f"{who(blocks[0])} was killed by SIGKILL"
    if len(blocks) == 1:
        return (f"{who(blocks[0])} was ended by hydra ({signal_name(cleanup)}) after another "
                "rank ended first (that rank's exit is not in the launcher's output)")
    return (f"{' and '.join(who(m) for m in blocks)} were killed by {signal_name(cleanup)}, "
            f"the signal hydra ends the other ranks with: which one died first is not in the "
            "launcher's output")


def rank_death(*paths: Path, cleanup: int = int(signal.SIGKILL)) -> str | None:
    """What the launcher said about the rank that died first (its rank, node
    and signal or exit code), from the job's output files, or ``None``;
    *cleanup*: the signal hydra ends the other ranks with
    (:func:`first_hydra_death`)."""
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        hydra = first_hydra_death(text, cleanup)
        if hydra is not None:
            return hydra
        for pattern in RANK_DEATH[1:]:
            m = pattern.search(text)
            if not m:
                continue
            found = m.groupdict()
            who = f"rank {found['rank']}" if found.get("rank") else "a rank"
            if found.get("node"):
                who += f" on {found['node']}"
            if found.get("signal"):
                return f"{who} was killed by {signal_name(int(found['signal']))}"
            if found.get("code"):
                return f"{who} exited with code {found['code']}"
            what = (found.get("what") or "").strip()
            code = re.fullmatch(r"Exited with exit code (\d+)", what)
            if code:
                return f"{who} exited with {describe_status(int(code.group(1)))}"
            if what:
                return f"{who}: {what}"
    return None


#: What programs and the C library print when a write finds the disk full.
_DISK_FULL = re.compile(r"No space left on device|Disk quota exceeded|\bENOSPC\b|\bEDQUOT\b")


def disk_full(*paths: Path, width: int = 300) -> str | None:
    """The first line of the job's output files that says a write found the
    disk (or the quota) full, or ``None``."""
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if _DISK_FULL.search(line):
                line = line.strip()
                return line if len(line) <= width else line[:width] + "..."
    return None


def skipped_launches(path: Path) -> int:
    """Launches the wrapper skipped because an earlier one had failed."""
    try:
        return path.read_text(errors="replace").split().count("skip")
    except OSError:
        return 0


def stderr_tail(path: Path, lines: int = 3, width: int = 300) -> str:
    """The last non-empty lines of a job's standard error, joined with `` | ``."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    tail = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    joined = " | ".join(tail)
    return joined if len(joined) <= width else "..." + joined[-width:]


def stderr_event(path: Path) -> str | None:
    """A scheduler event (a key of :data:`SLURM_EVENTS`) written in the job's stderr."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    for pattern, event in STDERR_EVENTS:
        if pattern.search(text):
            return event
    return None


def slurm_job_state(jobid: str, timeout: float = 10) -> dict[str, str]:
    """``scontrol show job -o`` as a mapping (``JobState``, ``Reason``,
    ``ExitCode``, ...); empty where Slurm no longer knows the job (it forgets
    finished jobs after ``MinJobAge``) or cannot be asked. Works without an
    accounting database, unlike ``sacct``."""
    try:
        out = subprocess.run(["scontrol", "show", "job", "-o", str(jobid)], capture_output=True,
                             text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0:
        return {}
    fields: dict[str, str] = {}
    for word in out.stdout.split():
        key, sep, value = word.partition("=")
        if sep and key not in fields:
            fields[key] = value
    return fields


#: Slurm node states that mean the node failed under the job.
_NODE_FAILED = ("DOWN", "NOT_RESPONDING", "FAIL", "POWERED_DOWN", "REBOOT")


def slurm_failed_nodes(nodelist: str, timeout: float = 10) -> list[str]:
    """Nodes of ``nodelist`` (a Slurm hostlist, e.g. ``lab-n[1-2]``) that
    Slurm reports down or not responding, each as ``name STATE (reason)``."""
    if not nodelist or nodelist == "(null)":
        return []
    try:
        out = subprocess.run(["scontrol", "show", "node", "-o", nodelist], capture_output=True,
                             text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    failed = []
    for line in out.stdout.splitlines():
        fields = dict(w.partition("=")[::2] for w in line.split() if "=" in w)
        state = fields.get("State", "")
        if any(s in state.split("+") or state.startswith(s) for s in _NODE_FAILED):
            reason = re.search(r"Reason=(.*?)(?: \[|$)", line)
            failed.append(f"{fields.get('NodeName', '?')} {state}"
                          + (f" ({reason.group(1).strip()})" if reason else ""))
    return failed


def job_failure(launches: list[Launch] | None, *, exitcode: int | None, signal_number: int | None,
                scheduler_state: str | None, stderr: Path, program: str,
                stdout: Path | None = None,
                outputs: Callable[[int], tuple[Path, Path]] | None = None,
                failed_nodes: list[str] | None = None,
                cleanup_signal: int = int(signal.SIGKILL)) -> str | None:
    """Why the job failed, in one line, or ``None`` if it ended well.

    ``launches`` come from :func:`read_launches`; ``exitcode``/``signal_number``
    are the job script's as the scheduler reports them (``None`` where it does
    not, e.g. Slurm without accounting); ``scheduler_state`` is Slurm's job
    state where known; ``outputs(n)``, where launches write their own files,
    gives launch *n*'s (stdout, stderr); ``failed_nodes`` are the job's nodes
    Slurm reports down (:func:`slurm_failed_nodes`); ``cleanup_signal`` the
    signal hydra ends the other ranks with when one dies (:func:`rank_death`)."""
    causes: list[str] = []
    job_stderr = stderr
    event = None
    state = (scheduler_state or "").split()[0] if scheduler_state else ""
    if state in SLURM_EVENTS:
        event = state
    else:
        event = stderr_event(stderr)
    if event is not None:
        causes.append(SLURM_EVENTS[event])
    if failed_nodes and event != "NODE_FAIL":
        causes.append(f"node failure: {', '.join(failed_nodes)} under the job")
    if launches:
        total = len(launches)
        for launch in launches:
            if launch.status != 0 and outputs is not None and launch.number > 1:
                stdout, launch_err = outputs(launch.number)
                stderr = launch_err if launch_err.exists() else stderr
            which = f"{program} (launch {launch.number} of {total})" if total > 1 else program
            if launch.status is None:
                if event is None:
                    causes.append(f"{which} never ended: the job was killed while it ran")
                break
            if launch.status != 0:
                causes.append(f"{which} ended with {describe_status(launch.status)}")
                break
    if not causes:
        if signal_number:
            causes.append(f"the job script was killed by {signal_name(signal_number)}")
        elif exitcode:
            causes.append(f"the job script ended with {describe_status(exitcode)}")
        elif state == "FAILED":
            causes.append("Slurm reports the job FAILED")
    if not causes:
        return None
    full = disk_full(stderr, *([stdout] if stdout else []), job_stderr)
    if full is not None:  # the cause, before how the launch ended
        causes.insert(0, f"disk full: {full}")
    death = rank_death(stderr, *([stdout] if stdout else []), cleanup=cleanup_signal)
    if death:
        causes.append(death)
    # the failing launch's own error output, else the job's (launches of a job
    # that share its output files write there)
    tail = stderr_tail(stderr) or (stderr_tail(job_stderr) if stderr != job_stderr else "")
    return "; ".join(causes) + (f"; stderr: {tail}" if tail else "")
