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
import subprocess
import sys
from pathlib import Path

import pytest

from hpcval.parsers import wrf

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CASE = wrf.find_case_dir("em_quarter_ss")


@pytest.mark.skipif(CASE is None, reason="no WRF em_quarter_ss case: set HPCVAL_WRF_DIR to "
                    "its directory or put wrf.exe on PATH (docs/checks.md, WRF)")
def test_idealized_check_runs_and_passes(tmp_path: Path):
    root = tmp_path / "hpcval"
    (root / "site-configs").mkdir(parents=True)
    shutil.copytree(ROOT / "site-configs" / "local", root / "site-configs" / "local")
    (root / "reframe-checks").symlink_to(ROOT / "reframe-checks")
    env = dict(os.environ, HPCVAL_ROOT=str(root), HPCVAL_WRF_DIR=str(CASE))
    env.pop("HPCVAL_VAR", None)
    # 10 minutes with history every 2: 50 steps, 4 output steps inside the run.
    proc = subprocess.run(
        [str(BIN / "hpcval"), "validate", "--site", "local", "--", "-n", "wrf_idealized_check",
         "-S", "run_minutes=10", "-S", "history_interval=2"],
        cwd=root, env=env, text=True, capture_output=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = list((root / "var" / "local" / "reports").glob("run-report-*.json"))
    cases = json.loads(reports[0].read_text())["runs"][-1]["testcases"]
    ran = [tc for tc in cases if tc["result"] == "pass"]
    assert ran, f"no environment ran the WRF check: {[tc['result'] for tc in cases]}"
    for tc in ran:
        perf = {k.rsplit(":", 1)[1]: v[0] for k, v in tc["perfvalues"].items()}
        assert set(perf) == {"mean_step", "median_step", "speed"}
        assert perf["mean_step"] > 0 and perf["speed"] == pytest.approx(12 / perf["mean_step"])
        log = wrf.parse_wrf_log((Path(tc["outputdir"]) / "rsl.error.0000").read_text())
        fig = wrf.figures(log)
        assert fig.steps_total == 50 and fig.steps_output == 4 and fig.steps_used == 45
