"""A rank killed on the Slurm lab ends the whole job at once and the check
says so: srun runs with --kill-on-bad-exit=1 (hpcval.rfm.HpcvalTest), so the
other rank does not wait for the time limit, and the failure names the
killed task (docs/errors.md).

Needs root, Slurm, munge and Intel MPI with IMB in the Python environment;
skips with the reason otherwise. Brings up and takes down its own 2-node lab.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcval.lab import cluster

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "tests" / "faults" / "checks"
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


def test_killed_rank_ends_job_and_is_named(lab_store: Path) -> None:
    env = {**os.environ, "HPCVAL_VAR": str(lab_store)}
    proc = subprocess.run([*HPCVAL, "validate", "--site", "lab", "--", "-c", str(CHECKS),
                           "-n", "fake_lab_fault_check.*mode=mpi-rank-sigkill$"],
                          env=env, text=True, capture_output=True, timeout=900, cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "Traceback" not in out
    report = sorted((lab_store / "lab" / "reports").glob("run-report-*.json"))[-1]
    (tc,) = json.loads(report.read_text())["runs"][-1]["testcases"]
    assert tc["result"] == "fail"
    # ended by the task's death (sanity), not by the 10-minute time limit
    assert tc["fail_phase"] == "sanity", tc["fail_reason"]
    reason = tc["fail_reason"]
    assert "time limit" not in reason.lower(), reason
    assert "exit code 137 (128+9: killed by SIGKILL)" in reason or "SIGKILL" in reason, reason
    assert "rank 1" in reason, reason
    assert "--kill-on-bad-exit=1" in (Path(tc["outputdir"]) / "rfm_job.sh").read_text()
