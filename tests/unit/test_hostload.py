"""Other work on this host while a run's checks ran (hpcval.run.hostload): the
CPU time of processes that are not the run's counts, the run's own (its
reaped children included) does not."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcval.run import hostload

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")


def _state_and_cpu(pid: int) -> tuple[str, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[0], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_process_that_is_not_the_runs_counts_as_other_work() -> None:
    load = hostload.HostLoad.start()
    # another user's job: a process whose CPU time never reaches this
    # process's RUSAGE_CHILDREN while it is measured
    other = subprocess.Popen([sys.executable, "-c", BURN.format(s=1.0)],
                             start_new_session=True)
    # read, never reaped before the end (a reaped child's time is the run's own):
    # until it is a zombie, its CPU time as /proc says it
    while True:
        state, burnt = _state_and_cpu(other.pid)
        if state == "Z":
            break
        time.sleep(0.05)
    wall = time.monotonic() - load.wall
    others = load.others()
    other.wait()
    assert others is not None
    # its CPU time (read while it ran) is in the other work, whatever else ran
    assert others * wall >= 0.8 * burnt


def test_the_runs_own_children_are_not_other_work() -> None:
    load = hostload.HostLoad.start()
    host0 = hostload._host_busy_seconds()
    subprocess.run([sys.executable, "-c", BURN.format(s=1.0)], check=True)
    others = load.others()
    wall = time.monotonic() - load.wall
    host1 = hostload._host_busy_seconds()
    assert others is not None and host0 is not None and host1 is not None
    # the child's second of CPU is taken off what the host spent
    assert others * wall <= (host1 - host0) - 0.8


def test_the_note_names_the_cpus_and_is_silent_below_half_a_cpu() -> None:
    assert hostload.note(0.3, 2) == ""
    assert hostload.note(None, 2) == ""
    line = hostload.note(5.94, 2)
    assert line.startswith("Other work on this host used 5.9 of its 2 CPUs on average")
    assert line.endswith("(docs/errors.md)\n")


def test_only_sites_whose_jobs_run_here() -> None:
    local = {"systems": [{"partitions": [{"scheduler": "local"}]}]}
    slurm = {"systems": [{"partitions": [{"scheduler": "local"}, {"scheduler": "slurm"}]}]}
    assert hostload.runs_here(local) and not hostload.runs_here(slurm)
    assert not hostload.runs_here({"systems": []})
