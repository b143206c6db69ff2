"""IOR check on the `local` site: skipped with a reason without IOR, run for
real where ``$HPCVAL_IOR_DIR`` (or PATH) offers an IOR built with Intel MPI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcval.rfm.ior import IOR_DIR_VAR
from hpcval.rfm.programs import locate_program
from hpcval.rfm.site import intel_mpi_from_pypi

from .conftest import run_hpcval

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(intel_mpi_from_pypi() is None,
                       reason="Intel MPI from PyPI is not installed: run `make setup`"),
]

BIN = Path(sys.executable).parent
SMALL = ("-S", "block_size=16m", "-S", "repetitions=2")


def validate(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_hpcval(root, "validate", "--site", "local", "--", *args, env=env, timeout=600)


def need_ior() -> None:
    if locate_program("ior", dirs_var=IOR_DIR_VAR, environ="impi")[0] is None:
        pytest.skip("no IOR build: set HPCVAL_IOR_DIR to an IOR built with Intel MPI's "
                    "mpicc (or put ior on PATH) to run the IOR check for real")


def test_skipped_with_reason_without_ior(checkout: Path) -> None:
    env = dict(os.environ, PATH=f"{BIN}:/usr/bin:/bin")
    env.pop("HPCVAL_IOR_DIR", None)
    if shutil.which("ior", path=env["PATH"]):
        pytest.skip("ior is on the system PATH")
    proc = validate(checkout, env, "-n", "ior_check", "-p", "impi")
    out = proc.stdout + proc.stderr
    # every case skipped: nothing validated, not a PASS (docs/errors.md)
    assert proc.returncode == 1, out
    assert "0 passed, 0 failed, 4 skipped: NOTHING VALIDATED" in out
    # the verdict says why (ReFrame's run report keeps no reason for a skip)
    assert "Skipped:\n  4 x ior not found in $HPCVAL_IOR_DIR (unset) or PATH" in proc.stdout
    log = (checkout / "var" / "local" / "reframe.log").read_text()
    assert "ior not found in $HPCVAL_IOR_DIR (unset) or PATH" in log


def test_runs_for_real_with_ior(checkout: Path) -> None:
    need_ior()
    proc = validate(checkout, dict(os.environ), "-n", "ior_check", "-p", "impi", *SMALL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for api in ("POSIX", "MPIIO"):
        for layout in ("file-per-process", "shared"):
            assert f"ior_check %api={api} %layout={layout}" in out
    assert out.count("write_bw ") == 4 and out.count("read_bw ") == 4, out
    assert "4 passed, 0 failed" in out
    # IOR's files are gone (stage directories of passed tests are removed too)
    assert not list((checkout / "var").rglob("ior-testfile*"))


def test_unwritable_output_fails_with_ior_error(checkout: Path, tmp_path: Path) -> None:
    need_ior()
    missing = tmp_path / "no-such-dir" / "x"
    proc = validate(checkout, dict(os.environ), "-n", "ior_check", "-p", "impi",
                    "-n", "POSIX", "-n", "shared", *SMALL, "-S", f"ior_options=-o,{missing}")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "IOR stopped before its summary" in out
    assert f'IOR said: ERROR: open64("{missing}"' in out
    assert not (tmp_path / "no-such-dir").exists()
