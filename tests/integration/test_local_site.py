"""Real runs of the `local` site: Intel MPI from PyPI, real IMB, real ReFrame.

Each test copies the site into a temporary checkout (checks linked, results
store in the temporary directory) so that references can be edited without
touching the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcval.rfm.site import intel_mpi_from_pypi

from .conftest import HpcvalRunner

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(intel_mpi_from_pypi() is None,
                       reason="Intel MPI from PyPI (impi-rt, impi-devel) is not installed in "
                              "this Python environment: run `make setup`"),
]

BIN = Path(sys.executable).parent
# Fewer repetitions per run than the default keep the runs short; figures are
# judged against the shipped floors.
QUICK = ["-S", "repetitions=40"]
WARM = ["-n", "imb_pingpong_check%cache=warm"]


def references(root: Path) -> Path:
    return root / "site-configs" / "local" / "references.yaml"


def test_validate_passes_and_writes_reports(checkout: Path, hpcval: HpcvalRunner):
    proc = hpcval(checkout, "validate", "--site", "local", "--", *QUICK, "-n",
                  "imb_pingpong_check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "imb_pingpong_check %cache=warm" in proc.stdout
    assert "imb_pingpong_check %cache=cold" in proc.stdout
    assert "2 passed, 0 failed, 0 skipped: PASS" in proc.stdout
    store = checkout / "var" / "local"
    report_files = list((store / "reports").glob("run-report-*.json"))
    assert len(report_files) == 1
    report = json.loads(report_files[0].read_text())
    cases = report["runs"][-1]["testcases"]
    assert {tc["result"] for tc in cases} == {"pass"}
    for tc in cases:
        assert tc["mpi_stack"].startswith("intel-mpi@")
        perf = {k.rsplit(":", 1)[1]: v for k, v in tc["perfvalues"].items()}
        assert set(perf) == {"lat_0B", "lat_8B", "bw_2KiB", "bw_64KiB", "bw_1MiB", "bw_4MiB"}
        assert all(v[0] > 0 for v in perf.values())
        series = json.loads((Path(tc["outputdir"]) / "hpcval-series.json").read_text())
        points = series["PingPong (np=2, median of 5)"]["columns"]["mbytes_per_sec"]["points"]
        assert [p[0] for p in points] == [0] + [2**i for i in range(23)]
    cold = next(tc for tc in cases if tc["cache"] == "cold")
    assert "-off_cache" in cold["executable_opts"]
    html = (store / "html" / "latest.html").read_text()
    assert "<svg" in html and "<polyline" in html and "PASS" in html
    assert (store / "history.sqlite").is_file()
    assert list((store / "perflogs").rglob("*.log"))
    # the stored run renders again, and the verdict is the same
    again = hpcval(checkout, "report", "--site", "local")
    assert again.returncode == 0 and "0 failed, 0 skipped: PASS" in again.stdout

    # capture references from the run and validate with them
    cap = hpcval(checkout, "references", "capture", "--site", "local", "--tolerance", "0.9",
                 "--write")
    assert cap.returncode == 0, cap.stderr
    assert list(references(checkout).parent.glob("references.yaml.*.bak"))
    text = references(checkout).read_text()
    assert "captured by `hpcval references capture --tolerance 0.9`" in text
    check = hpcval(checkout, "references", "check", "--site", "local")
    assert check.returncode == 0 and "imb_pingpong_check" in check.stdout


def test_impossible_reference_fails_naming_check_variable_value_and_bound(
        checkout: Path, hpcval: HpcvalRunner):
    path = references(checkout)
    warm_lat = "  warm:\n    lat_0B: [{}, null, 0.0, us]"
    path.write_text(path.read_text().replace(warm_lat.format("100.0"), warm_lat.format("0.001")))
    proc = hpcval(checkout, "validate", "--site", "local", "--", *QUICK, *WARM)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if "is outside" in ln)
    assert "imb_pingpong_check %cache=warm" in line
    assert "lat_0B" in line and "<= 0.001" in line
    assert "0 passed, 1 failed, 0 skipped: FAIL" in proc.stdout


def test_missing_reference_for_a_reported_variable_fails(checkout: Path,
                                                         hpcval: HpcvalRunner):
    path = references(checkout)
    text = path.read_text()
    path.write_text(text.replace("    bw_64KiB: [100.0, 0.0, null, MB/s]\n", "", 1))
    proc = hpcval(checkout, "validate", "--site", "local", "--", *QUICK, *WARM)
    # wrong input, found before any benchmark runs
    assert proc.returncode == 2
    said = proc.stdout + proc.stderr
    assert "missing reference for variable(s) bw_64KiB" in said
    assert str(path) in said


def test_plain_reframe_picks_up_the_site_references(checkout: Path):
    """`reframe -C site-configs/<site>/config.py -c reframe-checks -r` alone uses the
    site's references: a typo in them fails the check, naming file and key."""
    path = references(checkout)
    path.write_text(path.read_text().replace("imb_pingpong_check:", "imb_pingpong_chek:"))
    env = dict(os.environ, HPCVAL_ROOT=str(checkout))
    proc = subprocess.run(
        [str(BIN / "reframe"), "-C", "site-configs/local/config.py", "-c", "reframe-checks",
         "-r", *QUICK, *WARM],
        cwd=checkout, env=env, text=True, capture_output=True, timeout=600)
    assert proc.returncode != 0
    assert "no check named 'imb_pingpong_chek'; did you mean 'imb_pingpong_check'?" \
        in proc.stdout
    assert str(path) in proc.stdout


def test_broken_references_stop_validate_before_running(checkout: Path,
                                                        hpcval: HpcvalRunner):
    path = references(checkout)
    path.write_text(path.read_text().replace("bw_2KiB: [20.0,", "bw_2KiB: [twenty,"))
    proc = hpcval(checkout, "validate", "--site", "local")
    assert proc.returncode == 2
    assert f"{path}: imb_pingpong_check.warm.bw_2KiB: reference value must be a number" \
        in proc.stderr
    assert not (checkout / "var" / "local" / "reports").exists() or \
        not list((checkout / "var" / "local" / "reports").glob("*.json"))


def test_unknown_site_is_a_clear_error(checkout: Path, hpcval: HpcvalRunner):
    proc = hpcval(checkout, "validate", "--site", "nosuchsite")
    assert proc.returncode == 2
    assert "no such site (known sites: local)" in proc.stderr


def test_host_audit_fails_naming_setting_found_and_expected(checkout: Path,
                                                            hpcval: HpcvalRunner):
    expect = checkout / "site-configs" / "local" / "host-expectations.yaml"
    expect.write_text(expect.read_text() + "kernel.numa_balancing: 7\n")
    proc = hpcval(checkout, "validate", "--site", "local", "--", "-n", "host_tuning_audit_check")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 host setting(s) differ from" in proc.stdout
    assert "kernel.numa_balancing: found '" in proc.stdout and "expected '7'" in proc.stdout


def test_collective_sweep_tune_and_verify(checkout: Path, hpcval: HpcvalRunner):
    """The sweep yields an I_MPI_ADJUST_* setting for this configuration,
    `hpcval tune collectives --write` stores it, the verifying check passes."""
    quick = ["-S", "msglog=3,12", "-S", "repetitions=20"]
    sweep = hpcval(checkout, "validate", "--site", "local", "--", *quick,
                   "-n", "imb_collective_sweep_check%collective=Allreduce")
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    tune = hpcval(checkout, "tune", "collectives", "--site", "local", "--write")
    assert tune.returncode == 0, tune.stderr
    assert 'export I_MPI_ADJUST_ALLREDUCE="' in tune.stdout
    tuned = checkout / "site-configs" / "local" / "mpi-tuning.yaml"
    assert "setting: " in tuned.read_text()
    verify = hpcval(checkout, "validate", "--site", "local", "--", *quick,
                    "-n", "imb_tuned_collectives_check")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "imb_tuned_collectives_check %collective=Allreduce" in verify.stdout
    assert "tuned_vs_default" in verify.stdout
    # Bcast was not swept: its verification is skipped with the reason
    assert "1 skipped" in verify.stdout
    assert "1 x " in verify.stdout and "no tuned Bcast setting" in verify.stdout
