"""History verdicts for real on the `local` site: a history of clean runs, then
a run made worse on purpose (Intel MPI forced onto TCP over loopback instead of
shared memory: a real, slower path). Its verdict names the check, the figure,
the medians, the change with its interval and the p-value, says the figure got
worse, and a `regressed` verdict fails the run and leaves it out of baselines.
Whether three baseline runs resolve the change depends on how much this
machine's clean runs differ (docs/judging.md); the statistics themselves are
tested on seeded samples in tests/unit/test_judging.py."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from hpcval.rfm.site import intel_mpi_from_pypi
from hpcval.store import Store

from .conftest import HpcvalRunner

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(intel_mpi_from_pypi() is None,
                       reason="Intel MPI from PyPI (impi-rt, impi-devel) is not installed in "
                              "this Python environment: run `make setup`"),
]

WARM = ["-n", "imb_pingpong_check%cache=warm", "-S", "repetitions=100"]
#: a slower path that is really there: TCP over loopback instead of shared memory
DEGRADED = {"I_MPI_FABRICS": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo"}


def _verdict_lines(out: str, figure: str) -> list[str]:
    return [ln.strip() for ln in out.splitlines()
            if ln.strip().split(" ", 1)[0] in ("REGRESSED", "INCONCLUSIVE", "WARN", "IMPROVED")
            and f" {figure}:" in ln]


def test_regression_against_history(checkout: Path, hpcval: HpcvalRunner):
    site = checkout / "site-configs" / "local"
    (site / "judging.yaml").write_text("k: 3\nalpha: 0.05\n")
    for _ in range(3):
        clean = hpcval(checkout, "validate", "--site", "local", "--", *WARM)
        assert "REGRESSED" not in clean.stdout, clean.stdout + clean.stderr
    assert "no-baseline" in clean.stdout
    slow = hpcval(checkout, "validate", "--site", "local", "--", *WARM,
                  env={**os.environ, **DEGRADED})
    out = slow.stdout + slow.stderr
    # TCP over loopback is several times slower than shared memory: the figure
    # moved for the worse, and the verdict says by how much and how sure; on a
    # machine whose clean runs already differ several times over, three
    # baseline runs may not resolve it (INCONCLUSIVE, with what would)
    (line,) = _verdict_lines(out, "bw_1MiB")
    assert line.startswith(("REGRESSED", "INCONCLUSIVE")), out
    assert "imb_pingpong_check %cache=warm" in line
    assert re.search(r"baseline median [\d.,]+ MB/s, now [\d.,]+ MB/s, change -\d", line), line
    assert re.search(r"\[CI -?[\d.,]+ % \.\. [-+]?[\d.,]+ %\], p = ", line), line
    runs = Store(checkout / "var" / "local" / "history.sqlite").runs()
    if any(ln.startswith("REGRESSED") for ln in _verdict_lines(out, "bw_1MiB")):
        # a regression fails the run and stays out of later baselines
        assert slow.returncode == 1
        assert runs[-1]["result"] == "regressed" and not runs[-1]["accepted"]
    else:
        assert runs[-1]["result"] != "regressed" and runs[-1]["accepted"]
