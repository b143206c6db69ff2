"""The inter-node checks on a real 2-node lab: pass unshaped, fail at 1g naming
variable, value and bound, pass again unshaped; then compare the two runs.

Needs root, Slurm, munge and Intel MPI with IMB in the Python environment;
skips with the reason otherwise. Takes about three minutes (the 1g run moves
its data at 1 Gbit/s).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcval.core.paths import project_root
from hpcval.history.compare import compare_reports, comparison_text
from hpcval.lab import cluster

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab

HPCVAL = [sys.executable, "-m", "hpcval.cli"]
BANDWIDTH_VARS = {"imb_pingpong_internode_check": ["bw_256KiB", "bw_1MiB", "bw_4MiB"],
                  "imb_uniband_internode_check": ["bw_agg_64KiB", "bw_agg_256KiB",
                                                  "bw_agg_512KiB"]}


def _missing() -> str | None:
    reason = lab_missing_reason()
    if reason:
        return reason
    if not (Path(sys.prefix) / "bin" / "IMB-MPI1").exists():
        return "IMB-MPI1 not in the Python environment (pip install impi-rt impi-devel)"
    return None


@pytest.fixture(scope="module")
def lab_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 2-node lab and a private results store for this module's runs."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    store = tmp_path_factory.mktemp("var")
    cluster.up(2, log=lambda *_: None)
    try:
        yield store
    finally:
        cluster.down(log=lambda *_: None)


def _validate(store: Path) -> tuple[int, str, Path]:
    env = {**os.environ, "HPCVAL_VAR": str(store)}
    proc = subprocess.run([*HPCVAL, "validate", "--site", "lab", "--", "--tag", "internode"],
                          capture_output=True, text=True, env=env, cwd=project_root(),
                          timeout=900, check=False)
    out = proc.stdout + proc.stderr
    m = re.search(r"^Run report:\s+(\S+)$", out, re.MULTILINE)
    assert m, f"no run report in output:\n{out[-3000:]}"
    return proc.returncode, out, Path(m.group(1))


def _perf(report: Path) -> dict[str, dict[str, float]]:
    data = json.loads(report.read_text())
    out: dict[str, dict[str, float]] = {}
    for run in data["runs"]:
        for tc in run["testcases"]:
            name = tc["display_name"].split()[0]
            out[name] = {k.rsplit(":", 1)[-1]: v[0] for k, v in tc["perfvalues"].items()}
    return out


def test_1g_fails_the_bandwidth_checks_and_compare_reports_it(lab_store: Path) -> None:
    rc, out, unshaped = _validate(lab_store)
    assert rc == 0, out[-3000:]
    assert "2 passed, 0 failed, 0 skipped: PASS" in out

    cluster.set_fabric("1g")
    rc, out, shaped = _validate(lab_store)
    assert rc == 1
    # every bandwidth variable fails, and the message names variable, value and bound
    for variables in BANDWIDTH_VARS.values():
        for var in variables:
            assert re.search(rf"{var} = [\d.,]+ MB/s is outside >= [\d.,]+ \(reference", out), \
                f"{var} not reported as failing:\n{out[-3000:]}"
    perf_1g = _perf(shaped)
    # a 1 Gbit/s link carries at most 125 MB/s each way (part of a message can
    # pass within the token bucket's burst, hence the margin)
    assert all(perf_1g[c][v] < 200 for c, vs in BANDWIDTH_VARS.items() for v in vs)
    assert perf_1g["imb_pingpong_internode_check"]["bw_4MiB"] < 126

    cluster.set_fabric("unshaped")
    rc, out, _ = _validate(lab_store)
    assert rc == 0, out[-3000:]

    # A/B: the comparison's numbers are the two runs' stored figures
    comp = compare_reports(unshaped, shaped, 2048, 4 << 20)
    perf_a = _perf(unshaped)
    by_name = {(s.case.split()[0], s.column): s for s in comp.series}
    pp = by_name[("imb_pingpong_internode_check", "mbytes_per_sec")]
    points = {p.x: p for p in pp.points}
    for var, size in (("bw_1MiB", 1 << 20), ("bw_4MiB", 4 << 20)):
        assert points[size].a == pytest.approx(perf_a["imb_pingpong_internode_check"][var])
        assert points[size].b == pytest.approx(perf_1g["imb_pingpong_internode_check"][var])
        want = (points[size].b - points[size].a) / points[size].a * 100
        assert points[size].change_pct == pytest.approx(want)
    in_range = [p.change_pct for p in pp.points if 2048 <= p.x <= 4 << 20]
    assert pp.mean_change(2048, 4 << 20) == pytest.approx(sum(in_range) / len(in_range))
    assert pp.mean_change(1 << 20, 4 << 20) < -50  # 1g loses most of the bandwidth
    text = comparison_text(comp)
    assert "mean change over 2 KiB - 4 MiB" in text
    assert "worse" in text
