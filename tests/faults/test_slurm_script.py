"""The Slurm side without a Slurm: ReFrame's dry run of a fault check on the
lab's site config writes the job script hpcval would submit. Every launch
goes through the recording wrapper and srun ends the step when a task dies;
the failure hooks do not trip over a Slurm job (no local exit code or
signal). The real thing: tests/lab/test_lab_faults.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .conftest import BIN, CHECKS, ROOT


def test_lab_job_script(tmp_path: Path) -> None:
    env = {**os.environ, "HPCVAL_VAR": str(tmp_path)}
    proc = subprocess.run(
        [str(BIN / "reframe"), "-C", str(ROOT / "site-configs" / "lab" / "config.py"),
         "-c", str(CHECKS), "-n", "fake_lab_fault_check.*mode=mpi-rank-sigkill$",
         "--dry-run"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    if "Found 0 check" in proc.stdout or "Ran 0/0" in proc.stdout:
        pytest.skip("the lab's site config selects no Intel MPI environment here")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (script,) = list(tmp_path.rglob("rfm_job.sh"))
    launches = [ln for ln in script.read_text().splitlines() if "fake-imb" in ln]
    assert len(launches) == 2  # samples = 2
    for line in launches:
        assert "hpcval-launch.sh" in line and "hpcval-launch-status" in line
        assert "srun --kill-on-bad-exit=1 " in line
