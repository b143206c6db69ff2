"""History verdicts on the real lab: baseline runs with the links at a rate
where the link, not the CPU, limits the bandwidth, then the links 20 % slower:
the run is `regressed`, exit 1, naming the figure.

Needs root, Slurm, munge and Intel MPI with IMB; skips with the reason
otherwise. About two minutes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcval.lab import cluster

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
#: a rate the 2-core machine sustains with room to spare, and 20 % below it
BASE_RATE, SLOW_RATE = "200m", "160m"
CHECK = ["-n", "imb_pingpong_internode_check", "-S", "repetitions=20"]


@pytest.fixture(scope="module")
def lab_checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    if not (Path(sys.prefix) / "bin" / "IMB-MPI1").exists():
        pytest.skip("IMB-MPI1 not in the Python environment (pip install impi-rt impi-devel)")
    root = tmp_path_factory.mktemp("checkout")
    (root / "site-configs").mkdir()
    shutil.copytree(ROOT / "site-configs" / "lab", root / "site-configs" / "lab")
    (root / "reframe-checks").symlink_to(ROOT / "reframe-checks")
    # a short history for a short test; sites keep the default k = 5
    (root / "site-configs" / "lab" / "judging.yaml").write_text("k: 3\nalpha: 0.01\n")
    cluster.up(2, fabric=BASE_RATE, log=lambda *_: None)
    try:
        yield root
    finally:
        cluster.down(log=lambda *_: None)


def _validate(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HPCVAL_ROOT": str(root)}
    env.pop("HPCVAL_VAR", None)
    return subprocess.run([sys.executable, "-m", "hpcval.cli", "validate", "--site", "lab",
                           "--", *CHECK], cwd=root, env=env, text=True, capture_output=True,
                          timeout=900)


def test_slower_link_regressed_against_history(lab_checkout: Path):
    for _ in range(3):
        clean = _validate(lab_checkout)
        # bands are the lab's floors; the history decides here
        assert "REGRESSED" not in clean.stdout, clean.stdout + clean.stderr
    cluster.set_fabric(SLOW_RATE)
    slow = _validate(lab_checkout)
    assert slow.returncode == 1, slow.stdout + slow.stderr
    regressed = [ln for ln in slow.stdout.splitlines() if ln.strip().startswith("REGRESSED")]
    assert any("imb_pingpong_internode_check" in ln and "bw_1MiB" in ln for ln in regressed), \
        slow.stdout
