"""History verdicts for real on the `local` site: a history of clean runs, a
clean repeat judged against it, then a run made worse on purpose (Intel MPI
forced onto TCP over loopback instead of shared memory: a real path, 8-byte
latency about 25 times longer). The clean repeat is not `regressed`; the slow
run is, exits 1, names the check, the figure, the medians, the change with its
interval and the p-value, and stays out of later baselines.

The settings are the defaults (K = 5 baseline runs, alpha 0.05, Holm) with a
practical threshold of 50 %, and 95 % for bandwidth: on a shared 2-core VM,
IMB's 1-4 MiB shared-memory bandwidth is bimodal between launches (some run at
~25 GB/s, others at ~2 GB/s, as slow as TCP: docs/judging.md, "The local
site"), so a clean run can really be ten times slower there, and bandwidth
cannot tell the degraded path from an unlucky launch. The statistics
themselves are tested on seeded samples in tests/unit/test_judging.py, their
false-alarm and miss rates measured on the lab (docs/judging.md)."""

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
K = 5
VERDICT = re.compile(r"^\s*(REGRESSED|INCONCLUSIVE|WARN|IMPROVED) (\S+ %\S+)@(\S+) (\w+): (.*)$",
                     re.MULTILINE)


def _verdicts(out: str) -> list[tuple[str, str, str, str]]:
    """(outcome, check, figure, message) of every verdict line printed."""
    return [(m[1], m[2], m[4], m[5]) for m in VERDICT.finditer(out)]


def test_regression_against_history(checkout: Path, hpcval: HpcvalRunner):
    site = checkout / "site-configs" / "local"
    (site / "judging.yaml").write_text(
        f"k: {K}\nthreshold: 50%\nfigures:\n  '*/bw_*': {{threshold: 95%}}\n")
    for _ in range(K):
        clean = hpcval(checkout, "validate", "--site", "local", "--", *WARM)
        assert clean.returncode == 0, clean.stdout + clean.stderr
        # fewer than K accepted runs before it: no baseline, never a pass
        assert "no-baseline" in clean.stdout, clean.stdout
        assert not _verdicts(clean.stdout)

    repeat = hpcval(checkout, "validate", "--site", "local", "--", *WARM)
    out = repeat.stdout + repeat.stderr
    assert "no-baseline" not in repeat.stdout, out
    assert not [v for v in _verdicts(out) if v[0] == "REGRESSED"], out
    assert repeat.returncode == 0, out

    slow = hpcval(checkout, "validate", "--site", "local", "--", *WARM,
                  env={**os.environ, **DEGRADED})
    out = slow.stdout + slow.stderr
    regressed = [v for v in _verdicts(out) if v[0] == "REGRESSED"]
    assert "lat_8B" in [v[2] for v in regressed], out
    assert slow.returncode == 1, out
    for _, check, figure, message in regressed:
        assert check == "imb_pingpong_check %cache=warm"
        assert figure.startswith(("bw_", "lat_")), figure
        direction = "-" if figure.startswith("bw_") else r"\+"
        assert re.match(rf"baseline median [\d.,]+ (MB/s|us), now [\d.,]+ (MB/s|us), "
                        rf"change {direction}[\d.,]+ % \[CI [-+][\d.,]+ % \.\. [-+][\d.,]+ %\], "
                        r"p = [\d.e-]+ \(adjusted [\d.e-]+\)", message), message
    assert re.search(r"History verdicts: \d+ regressed", out), out

    runs = Store(checkout / "var" / "local" / "history.sqlite").runs()
    assert runs[-1]["result"] == "regressed" and not runs[-1]["accepted"]
    assert all(r["accepted"] for r in runs[:-1])
