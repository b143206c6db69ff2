"""STREAM and HPCG checks on the `local` site: skipped with a reason where the
programs are absent, run for real where ``$HPCVAL_STREAM_SRC`` /
``$HPCVAL_STREAM_DIR`` / ``$HPCVAL_HPCG_DIR`` (or PATH) offer them. A real run
stores >= 5 samples per figure (``hpcval-samples.json``)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from hpcval.core.series import MIN_SAMPLES, SAMPLES_FILE
from hpcval.node.mpi_abi import linked_mpi_libraries
from hpcval.rfm.hpcg import HPCG_DIR_VAR
from hpcval.rfm.programs import locate_program
from hpcval.rfm.stream import STREAM_DIR_VAR, STREAM_SRC_VAR

from .conftest import run_hpcval

pytestmark = [pytest.mark.integration]

BIN = Path(sys.executable).parent
BARE_ENV = {k: v for k, v in os.environ.items()
            if k not in (STREAM_DIR_VAR, STREAM_SRC_VAR, HPCG_DIR_VAR, "HPCVAL_HPCG_ENVIRON")}


def validate(root: Path, env: dict[str, str], *args: str, code: int = 0) -> str:
    proc = run_hpcval(root, "validate", "--site", "local", "--", *args, env=env, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == code, out
    return out


def stored_samples(root: Path, check: str) -> list[dict[str, dict]]:
    """The samples file of every case of *check* in the last run's output."""
    found = [p for p in (root / "var" / "local" / "output").rglob(SAMPLES_FILE)
             if check in str(p)]
    assert found, f"no {SAMPLES_FILE} of {check}"
    return [json.loads(p.read_text()) for p in found]


def test_skipped_with_reasons_without_stream_or_hpcg(checkout: Path) -> None:
    env = dict(BARE_ENV, PATH=f"{BIN}:/usr/bin:/bin")
    for program in ("stream_c.exe", "stream_f.exe", "xhpcg"):
        if shutil.which(program, path=env["PATH"]):
            pytest.skip(f"{program} is on the system PATH")
    # every case skipped: NOTHING VALIDATED, exit 1 (docs/errors.md)
    out = validate(checkout, env, "-n", "stream|hpcg_check", code=1)
    assert "SKIP" in out and "FAIL" not in out and "NOTHING VALIDATED" in out
    log = (checkout / "var" / "local" / "reframe.log").read_text()
    assert f"stream_c.exe not found in ${STREAM_DIR_VAR} (unset) or PATH" in log
    assert f"no STREAM sources: set {STREAM_SRC_VAR}" in log
    assert f"xhpcg not found in ${HPCG_DIR_VAR} (unset) or PATH" in log


def test_stream_built_from_the_caches_runs_for_real(checkout: Path) -> None:
    src = os.environ.get(STREAM_SRC_VAR)
    if not src or not (Path(src) / "stream.c").is_file():
        pytest.skip(f"no STREAM sources: set {STREAM_SRC_VAR} to a checkout of "
                    "github.com/jeffhammond/STREAM to run the STREAM check for real")
    out = validate(checkout, dict(os.environ), "-n", "stream_sized_check")
    assert "triad" in out and "PASS" in out
    build = next((checkout / "var" / "local" / "output").rglob("stream_sized_check/rfm_build.sh"))
    assert "-DSTREAM_ARRAY_SIZE=" in build.read_text()
    job = build.with_name("rfm_job.sh").read_text()
    assert "export OMP_PROC_BIND=spread" in job and "export OMP_PLACES=cores" in job
    for samples in stored_samples(checkout, "stream_sized_check"):
        assert set(samples) == {"copy", "scale", "add", "triad"}
        assert all(len(s["samples"]) >= MIN_SAMPLES and s["better"] == "higher"
                   for s in samples.values())


def test_installed_stream_runs_for_real(checkout: Path) -> None:
    if locate_program("stream_c.exe", dirs_var=STREAM_DIR_VAR)[0] is None:
        pytest.skip(f"no installed STREAM: set {STREAM_DIR_VAR} to a directory holding "
                    "stream_c.exe and stream_f.exe (built with arrays >= 4x the caches)")
    out = validate(checkout, dict(os.environ), "-n", "stream_check", "-p", "plain")
    assert "stream_check %program=stream_c.exe" in out and "copy" in out
    assert "PASS" in out and "FAIL" not in out
    for samples in stored_samples(checkout, "stream_check"):
        assert all(len(s["samples"]) >= MIN_SAMPLES for s in samples.values())


def test_hpcg_runs_for_real(checkout: Path) -> None:
    path = locate_program("xhpcg", dirs_var=HPCG_DIR_VAR)[0]
    if path is None:
        pytest.skip(f"no HPCG build: set {HPCG_DIR_VAR} to a directory holding xhpcg")
    # the environment of the MPI the build is linked against
    environ = os.environ.get("HPCVAL_HPCG_ENVIRON") or (
        "openmpi" if "libmpi.so.40" in linked_mpi_libraries(path) else "impi")
    env = dict(os.environ, HPCVAL_HPCG_ENVIRON=environ)
    out = validate(checkout, env, "-n", "hpcg_check", "-p", environ)
    assert "gflops" in out and "PASS" in out
    summaries = list((checkout / "var" / "local" / "output").rglob("hpcg-*-HPCG-Benchmark*"))
    assert len(summaries) >= MIN_SAMPLES
    assert all("HPCG result is VALID" in s.read_text() for s in summaries)
    (samples,) = stored_samples(checkout, "hpcg_check")
    assert len(samples["gflops"]["samples"]) >= MIN_SAMPLES
