"""OMB checks on the `local` site: skipped with a reason without OMB, run for
real where ``$HPCVAL_OMB_DIR`` (or PATH) offers an OMB build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcval.rfm.omb import OMB_DIR_VAR
from hpcval.rfm.programs import locate_program
from hpcval.rfm.site import intel_mpi_from_pypi

from .conftest import run_hpcval

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(intel_mpi_from_pypi() is None,
                       reason="Intel MPI from PyPI is not installed: run `make setup`"),
]

BIN = Path(sys.executable).parent


def validate(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_hpcval(root, "validate", "--site", "local", "--", *args, env=env, timeout=600)


def test_skipped_with_reason_without_omb(checkout: Path, tmp_path: Path) -> None:
    env = dict(os.environ, PATH=f"{BIN}:/usr/bin:/bin")
    env.pop("HPCVAL_OMB_DIR", None)
    if shutil.which("osu_latency", path=env["PATH"]):
        pytest.skip("osu_latency is on the system PATH")
    proc = validate(checkout, env, "-n", "osu_latency_check", "-p", "impi")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out  # every case skipped: NOTHING VALIDATED
    assert "SKIP" in out and "NOTHING VALIDATED" in out
    log = (checkout / "var" / "local" / "reframe.log").read_text()
    assert "osu_latency not found in $HPCVAL_OMB_DIR" in log


def test_runs_for_real_with_omb(checkout: Path) -> None:
    if locate_program("osu_latency", dirs_var=OMB_DIR_VAR, environ="impi")[0] is None:
        pytest.skip("no OSU Micro-Benchmarks build: set HPCVAL_OMB_DIR to one built with "
                    "Intel MPI's mpicc to run the OMB checks for real")
    proc = validate(checkout, dict(os.environ), "-n", "osu_latency_check", "-p", "impi",
                    "-S", "iterations=200")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "lat_8B" in out and "PASS" in out
