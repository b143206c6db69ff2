"""Nothing reshapes a lab in use (hpcval.run.labguard): `hpcval lab fabric`
refuses while the lab site's validation lock is held, with one line naming the
holder and exit 3, reshapes with --force saying whom it disturbs, and holds the
lock itself while it reshapes. (A Slurm job on the lab: tests/lab/test_lab_delay.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcval.core.errors import LockTimeout
from hpcval.core.paths import project_root
from hpcval.run.labguard import LabInUse, parse_jobs, reshaping
from hpcval.run.lock import holder, site_lock
from hpcval.site import Site


@pytest.fixture
def lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCVAL_VAR", str(tmp_path))
    path = Site.load("lab", must_exist=False).lock_file
    assert path == tmp_path / "lab" / "validate.lock"
    path.parent.mkdir(parents=True)
    return path


def test_refused_while_a_validation_holds_the_lab(lock: Path) -> None:
    with site_lock(lock, "validate run 20261127T101500Z-abcdef", 0):
        with pytest.raises(LabInUse, match=r"validate run 20261127T101500Z-abcdef") as err:
            with reshaping("lab fabric", jobs=list):
                raise AssertionError("reshaped a lab in use")
        assert err.value.exit_code == 3
        told: list[str] = []
        with reshaping("lab fabric", force=True, log=told.append, jobs=list):
            pass
        assert len(told) == 1 and "--force" in told[0] and "20261127T101500Z-abcdef" in told[0]


def test_holds_the_lock_while_it_reshapes(lock: Path) -> None:
    with reshaping("lab fabric", jobs=list):
        assert "lab fabric" in holder(lock)
        with pytest.raises(LockTimeout, match="lab fabric"):
            with site_lock(lock, "validate run x", 0):
                pass
    with site_lock(lock, "validate run x", 0):  # and lets it go
        pass


def test_a_running_job_is_named(lock: Path) -> None:
    jobs = parse_jobs("42|rfm_imb_pingpong_internode_check|root|0:35|lab-n[1-2]\nbad line\n")
    with pytest.raises(LabInUse, match=r"Slurm job 42 \(rfm_imb_pingpong_internode_check, "
                       r"user root\) running for 0:35 on lab-n\[1-2\]"):
        with reshaping("lab fabric", jobs=lambda: jobs):
            pass
    assert parse_jobs("") == []


def test_the_command_exits_3_with_one_line(lock: Path) -> None:
    with site_lock(lock, "validate run 20261127T101500Z-abcdef", 0):
        proc = subprocess.run([sys.executable, "-m", "hpcval.cli", "lab", "fabric", "1g"],
                              capture_output=True, text=True, cwd=project_root(),
                              env={**os.environ}, check=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "the lab is in use" in lines[0] and \
        "validate run 20261127T101500Z-abcdef" in lines[0], lines
