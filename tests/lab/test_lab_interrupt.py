"""An interrupted validation on the Slurm lab leaves no job behind: SIGTERM
while a benchmark's job runs; hpcval passes it to ReFrame, which cancels its
jobs, cancels what is left of the run's jobs itself, and exits 143 with the
run stored as `interrupted` (docs/errors.md).

Needs root, Slurm, munge and Intel MPI with IMB in the Python environment;
skips with the reason otherwise. Brings up and takes down its own 2-node lab.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcval.lab import cluster
from hpcval.run.procs import marked, slurm_jobs

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
HPCVAL = [sys.executable, "-m", "hpcval.cli"]


@pytest.fixture(scope="module")
def lab_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    if not (Path(sys.prefix) / "bin" / "IMB-MPI1").exists():
        pytest.skip("IMB-MPI1 not in the Python environment (pip install impi-rt impi-devel)")
    store = tmp_path_factory.mktemp("var")
    cluster.up(2, log=lambda *_: None)
    try:
        yield store
    finally:
        cluster.down(log=lambda *_: None)


def test_sigterm_while_a_job_runs_cancels_the_runs_jobs(lab_store: Path) -> None:
    env = {**os.environ, "HPCVAL_VAR": str(lab_store)}
    proc = subprocess.Popen([*HPCVAL, "validate", "--site", "lab", "--", "-n",
                             "imb_pingpong_internode_check"], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    run_id = ""
    for line in proc.stdout:
        m = re.search(r"hpcval: run (\S+) on site", line)
        if m:
            run_id = m.group(1)
            break
    assert run_id, "hpcval did not start a run"
    stage = lab_store / "lab" / "stage" / run_id
    deadline = time.monotonic() + 600
    while not slurm_jobs(stage):  # a job of this run queued or running
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "no Slurm job of the run in 10 minutes"
        time.sleep(0.5)
    time.sleep(2)  # let the job start its launch
    proc.send_signal(signal.SIGTERM)
    out = proc.stdout.read()
    assert proc.wait(timeout=300) == 143, out
    assert slurm_jobs(stage) == [], "a Slurm job of the interrupted run is still there"
    assert marked(run_id) == []
    verdicts = json.loads((lab_store / "lab" / "verdicts" / f"{run_id}.json").read_text())
    assert (verdicts["result"], verdicts["accepted"]) == ("interrupted", False), out
