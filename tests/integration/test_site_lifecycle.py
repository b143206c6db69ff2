"""A site's life on this machine, for real: scaffold, record, validate, and
two validations started at the same moment."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from hpcval.history.store import Store
from hpcval.rfm.site import intel_mpi_from_pypi

from .conftest import BIN, HpcvalRunner, make_checkout

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(intel_mpi_from_pypi() is None,
                       reason="Intel MPI from PyPI (impi-rt, impi-devel) is not installed in "
                              "this Python environment: run `make setup`"),
]

QUICK = ["-n", "imb_pingpong_check", "-n", "host_tuning_audit_check",
         "-S", "repetitions=100"]


def test_new_site_records_then_validates_green(tmp_path: Path, hpcval: HpcvalRunner):
    root = make_checkout(tmp_path)
    (root / "environments").mkdir()
    made = hpcval(root, "site", "new", "newsite", "--scheduler", "local")
    assert made.returncode == 0, made.stderr
    site_dir = root / "site-configs" / "newsite"
    assert (site_dir / "config.py").is_file() and not (site_dir / "references.yaml").exists()
    # without references, validate says what to do
    first = hpcval(root, "validate", "--site", "newsite", "--", *QUICK)
    assert first.returncode == 2 and "--record" in first.stderr
    recorded = hpcval(root, "validate", "--site", "newsite", "--record", "--", *QUICK)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert (site_dir / "references.yaml").is_file()
    assert (site_dir / "host-expectations.yaml").is_file()
    checked = hpcval(root, "references", "check", "--site", "newsite")
    assert checked.returncode == 0, checked.stderr
    second = hpcval(root, "validate", "--site", "newsite", "--", *QUICK)
    db = root / "var" / "newsite" / "history.sqlite"
    runs = Store(db).runs()
    assert len(runs) == 2 and runs[0]["accepted"]
    if second.returncode == 0:
        assert "0 failed" in second.stdout
        assert runs[1]["accepted"]
        return
    # One run's recording cannot foresee a slower mode of the machine. This machine's
    # 1-4 MiB shared-memory bandwidth is bimodal between launches (docs/judging.md, "The
    # local site": 20-27 GB/s or 1.7-7 GB/s), so the second run may land below a quarter of
    # the first run's worst sample. Then, and only then, the run must fail its band on
    # exactly those bandwidth figures, named, with nothing else failing.
    assert second.returncode == 1, second.stdout + second.stderr
    with sqlite3.connect(db) as conn:
        cases = conn.execute("SELECT case_key, result, fail_phase FROM cases WHERE run_id=?",
                             (runs[1]["run_id"],)).fetchall()
        failed = conn.execute(
            "SELECT case_key, variable, value, reference * (1 + lower) FROM figures "
            "WHERE run_id=? AND band_result='fail'", (runs[1]["run_id"],)).fetchall()
    assert all(res == "pass" or phase == "performance" for _, res, phase in cases), cases
    assert failed, second.stdout
    for key, variable, value, floor in failed:
        assert "imb_pingpong_check" in key and variable in ("bw_1MiB", "bw_4MiB"), failed
        assert value < floor, failed
        assert variable in second.stdout


def test_two_validations_started_together_both_stored(checkout: Path):
    env_cmd = [str(BIN / "hpcval"), "validate", "--site", "local", "--", "-n",
               "host_tuning_audit_check"]
    env = dict(os.environ, HPCVAL_ROOT=str(checkout))
    env.pop("HPCVAL_VAR", None)
    procs = [subprocess.Popen(env_cmd, cwd=checkout, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, out + err
    store = checkout / "var" / "local"
    reports = sorted((store / "reports").glob("run-report-*.json"))
    assert len(reports) == 2
    for r in reports:
        cases = json.loads(r.read_text())["runs"][-1]["testcases"]
        assert [c["result"] for c in cases] == ["pass"]
    stages = {json.loads(r.read_text())["runs"][-1]["testcases"][0]["stagedir"]
              for r in reports}
    assert len(stages) == 2
    assert len(Store(store / "history.sqlite").runs()) == 2
    # each run printed its own run id and verdict
    ids = {line.split()[2] for out, _ in outs for line in out.splitlines()
           if line.startswith("hpcval: run ")}
    assert len(ids) == 2
