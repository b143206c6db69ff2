"""A real WRF idealized run through ReFrame on the `local` site.

Runs where WRF's idealized case is installed: ``$HPCVAL_WRF_DIR`` names the case
directory (e.g. ``WRF/test/em_quarter_ss`` holding ``wrf.exe``, ``ideal.exe``,
``namelist.input``) or the top of the WRF tree, or ``wrf.exe`` is on ``PATH``
(see docs/checks.md, "WRF"). Skipped elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from hpcval.parsers import wrf

from .conftest import HpcvalRunner

CASE = wrf.find_case_dir("em_quarter_ss")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CASE is None, reason="no WRF em_quarter_ss case: set HPCVAL_WRF_DIR to "
                       "its directory or put wrf.exe on PATH (docs/checks.md, WRF)"),
]

# 10 minutes with history every 2: 50 steps, 4 output steps inside the run.
SHORT = ["-n", "wrf_idealized_check", "-S", "run_minutes=10", "-S", "history_interval=2"]


def _validate(root: Path, hpcval: HpcvalRunner, *args: str):
    env = dict(os.environ, HPCVAL_WRF_DIR=str(CASE))
    return hpcval(root, "validate", "--site", "local", "--", *SHORT, *args, env=env,
                  timeout=1800)


def _cases(root: Path) -> list[dict]:
    reports = sorted((root / "var" / "local" / "reports").glob("run-report-*.json"))
    return json.loads(reports[-1].read_text())["runs"][-1]["testcases"]


def test_idealized_check_runs_and_passes(checkout: Path, hpcval: HpcvalRunner):
    proc = _validate(checkout, hpcval, "-p", "openmpi", "--keep-stage-files")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = [tc for tc in _cases(checkout) if tc["result"] == "pass"]
    assert ran, "no environment ran the WRF check"
    for tc in ran:
        perf = {k.rsplit(":", 1)[1]: v[0] for k, v in tc["perfvalues"].items()}
        assert set(perf) == {"step_time", "speed"}
        # 45 steady steps (odd): the median speed is the time step over the median time
        assert perf["step_time"] > 0 and perf["speed"] == pytest.approx(12 / perf["step_time"])
        samples = json.loads((Path(tc["outputdir"]) / "hpcval-samples.json").read_text())
        assert len(samples["step_time"]["samples"]) == 45
        log = wrf.parse_wrf_log((Path(tc["outputdir"]) / "rsl.error.0000").read_text())
        fig = wrf.figures(log)
        assert fig.steps_total == 50 and fig.steps_output == 4 and fig.steps_used == 45
        assert tc["output_verified"] == "no reference output configured"


def test_output_verified_against_a_reference(checkout: Path, tmp_path: Path,
                                             hpcval: HpcvalRunner):
    """A site pins a known-good wrfout; a run compares with it and passes, and
    a reference from another model time or a perturbed run fails naming why."""
    pytest.importorskip("netCDF4", reason="output verification needs netCDF4 (make setup)")
    first = _validate(checkout, hpcval, "-p", "openmpi", "--keep-stage-files")
    assert first.returncode == 0, first.stdout + first.stderr
    (case,) = [tc for tc in _cases(checkout) if tc["result"] == "pass"]
    outputs = sorted(Path(case["stagedir"]).glob("wrfout_d01_*"))
    reference = tmp_path / "reference.nc"
    shutil.copy(outputs[-1], reference)

    again = _validate(checkout, hpcval, "-p", "openmpi", "-S",
                      f"wrf_idealized_check.reference_output={reference}")
    assert again.returncode == 0, again.stdout + again.stderr
    (case,) = _cases(checkout)
    assert case["output_verified"].startswith("7 fields within")

    # a reference pinned for another run length: no output at this run's end time
    other_time = Path(__file__).resolve().parents[1] / "data" / "wrf" / \
        "quarter_ss_np1_wrfout_0005.nc"
    bad = _validate(checkout, hpcval, "-p", "openmpi", "-S",
                    f"wrf_idealized_check.reference_output={other_time}")
    assert bad.returncode == 1
    assert "has no output for" in bad.stdout + bad.stderr
