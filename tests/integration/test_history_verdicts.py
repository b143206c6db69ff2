"""History verdicts for real on the `local` site: a history of clean runs, then
a run made worse on purpose (Intel MPI forced onto TCP over loopback instead of
shared memory: a real, slower path), which must be `regressed` with exit 1 and
a message naming the check, the figure, the medians, the change with its
interval and the p-value; a repeat of a clean run must not be."""

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


def test_regression_against_history(checkout: Path, hpcval: HpcvalRunner):
    site = checkout / "site-configs" / "local"
    (site / "judging.yaml").write_text("k: 3\nalpha: 0.01\n")
    for _ in range(3):
        clean = hpcval(checkout, "validate", "--site", "local", "--", *WARM)
        assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "no-baseline" in clean.stdout
    slow = hpcval(checkout, "validate", "--site", "local", "--", *WARM,
                  env={**os.environ, **DEGRADED})
    assert slow.returncode == 1, slow.stdout + slow.stderr
    line = next(ln for ln in slow.stdout.splitlines()
                if ln.strip().startswith("REGRESSED") and "bw_1MiB" in ln)
    assert "imb_pingpong_check %cache=warm" in line
    assert re.search(r"baseline median [\d.,]+ MB/s, now [\d.,]+ MB/s, change -\d", line)
    assert re.search(r"\[CI -?[\d.]+ % \.\. -?[\d.]+ %\], p = ", line)
    runs = Store(checkout / "var" / "local" / "history.sqlite").runs()
    assert runs[-1]["result"] == "regressed" and not runs[-1]["accepted"]
    # the regressed run stays out of the baseline: a clean run is judged against
    # the clean history, and passes
    again = hpcval(checkout, "validate", "--site", "local", "--", *WARM)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "REGRESSED" not in again.stdout
