"""STREAM and HPCG checks on the `local` site: skipped with a reason where the
programs are absent, run for real where ``$HPCVAL_STREAM_SRC`` /
``$HPCVAL_STREAM_DIR`` / ``$HPCVAL_HPCG_DIR`` (or PATH) offer them."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from hpcval.rfm.hpcg import find_hpcg
from hpcval.rfm.stream import STREAM_SRC_VAR, find_stream_program

from .conftest import run_hpcval

pytestmark = [pytest.mark.integration]

BIN = Path(sys.executable).parent
BARE_ENV = {k: v for k, v in os.environ.items()
            if k not in ("HPCVAL_STREAM_DIR", "HPCVAL_STREAM_SRC", "HPCVAL_HPCG_DIR")}


def validate(root: Path, env: dict[str, str], *args: str) -> str:
    proc = run_hpcval(root, "validate", "--site", "local", "--", *args, env=env, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return out


def test_skipped_with_reasons_without_stream_or_hpcg(checkout: Path) -> None:
    env = dict(BARE_ENV, PATH=f"{BIN}:/usr/bin:/bin")
    for program in ("stream_c.exe", "stream_f.exe", "xhpcg"):
        if shutil.which(program, path=env["PATH"]):
            pytest.skip(f"{program} is on the system PATH")
    out = validate(checkout, env, "-n", "stream|hpcg_check")
    assert "SKIP" in out and "FAIL" not in out
    log = (checkout / "var" / "local" / "reframe.log").read_text()
    assert "stream_c.exe not found in the Spack environment, $HPCVAL_STREAM_DIR" in log
    assert f"no STREAM sources: set {STREAM_SRC_VAR}" in log
    assert "xhpcg not found in the Spack environment, $HPCVAL_HPCG_DIR" in log


def test_stream_built_from_the_caches_runs_for_real(checkout: Path) -> None:
    src = os.environ.get(STREAM_SRC_VAR)
    if not src or not (Path(src) / "stream.c").is_file():
        pytest.skip(f"no STREAM sources: set {STREAM_SRC_VAR} to a checkout of "
                    "github.com/jeffhammond/STREAM to run the STREAM check for real")
    out = validate(checkout, dict(os.environ), "-n", "stream_sized_check")
    assert "triad" in out and "PASS" in out
    build = next((checkout / "var" / "local" / "output").rglob("stream_sized_check/rfm_build.sh"))
    assert "-DSTREAM_ARRAY_SIZE=" in build.read_text()


def test_installed_stream_runs_for_real(checkout: Path) -> None:
    if find_stream_program("stream_c.exe")[0] is None:
        pytest.skip("no installed STREAM: set HPCVAL_STREAM_DIR to a directory holding "
                    "stream_c.exe and stream_f.exe")
    out = validate(checkout, dict(os.environ), "-n", "stream_check")
    assert "stream_check %program=stream_c.exe" in out and "copy" in out


def test_hpcg_runs_for_real(checkout: Path) -> None:
    if find_hpcg()[0] is None:
        pytest.skip("no HPCG build: set HPCVAL_HPCG_DIR to a directory holding xhpcg")
    out = validate(checkout, dict(os.environ), "-n", "hpcg_check",
                   "-S", "local_grid=16,16,16", "-S", "run_time=5")
    assert "gflops" in out and "PASS" in out
    summary = next((checkout / "var" / "local" / "output").rglob("HPCG-Benchmark*"))
    assert "HPCG result is VALID" in summary.read_text()
