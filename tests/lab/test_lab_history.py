"""History verdicts on the real lab: five runs on 200 Mbit/s links make the
baseline, then a run on links 20 % slower (160 Mbit/s) is `regressed`, naming
the bandwidth figures with their baseline and current medians, the change with
its interval and the p-value, and stays out of later baselines.

200 Mbit/s is the rate of the detection experiment (docs/judging.md): the link,
not the CPU, limits the bandwidth there, so 160 Mbit/s moves it by 20 %. The
links carry no competing traffic here (the experiment adds some to reach the
run-to-run spread of a shared network); the false-alarm and miss rates with it
are measured by bench/detection.sh, not asserted here. The reference bands of
the `lab` site describe unshaped links, so every run here also fails its hard
contract (exit 1) while its figures are judged against their history side by
side: the test reads the verdicts and the store.

Needs root, Slurm, munge and Intel MPI with IMB in the Python environment;
skips with the reason otherwise. About four minutes (six runs of five samples).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcval.core.paths import project_root
from hpcval.history.store import Store
from hpcval.lab import cluster

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab

HPCVAL = [sys.executable, "-m", "hpcval.cli"]
#: five IMB repetitions per size (a 4 MiB round trip takes ~0.35 s at 200 Mbit/s)
RUN = ["-n", "imb_pingpong_internode_check", "-S", "repetitions=5"]
K = 5
VERDICT = re.compile(r"^\s*(REGRESSED|INCONCLUSIVE|WARN|IMPROVED) (.+?)@(\S+) (\w+): (.*)$",
                     re.MULTILINE)


@pytest.fixture(scope="module")
def lab_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 2-node lab on 200 Mbit/s links and a private results store."""
    reason = lab_missing_reason()
    if reason is None and not (Path(sys.prefix) / "bin" / "IMB-MPI1").exists():
        reason = "IMB-MPI1 not in the Python environment (pip install impi-rt impi-devel)"
    if reason:
        pytest.skip(reason)
    store = tmp_path_factory.mktemp("var")
    cluster.up(2, log=lambda *_: None)
    try:
        cluster.set_fabric("200m")
        yield store
    finally:
        cluster.down(log=lambda *_: None)


def _validate(store: Path) -> str:
    env = {**os.environ, "HPCVAL_VAR": str(store)}
    proc = subprocess.run([*HPCVAL, "validate", "--site", "lab", "--", *RUN],
                          capture_output=True, text=True, env=env, cwd=project_root(),
                          timeout=900, check=False)
    out = proc.stdout + proc.stderr
    # the figures were measured (the run may fail the unshaped bands, never more)
    assert proc.returncode in (0, 1), out[-3000:]
    assert "History verdicts:" in out, out[-3000:]
    return out


def test_a_20_percent_slower_link_is_regressed(lab_store: Path) -> None:
    for _ in range(K):
        out = _validate(lab_store)
        assert "no-baseline" in out, out[-3000:]
        assert not VERDICT.findall(out), out[-3000:]

    cluster.set_fabric("160m")
    out = _validate(lab_store)
    regressed = {m[4]: m[5] for m in VERDICT.finditer(out) if m[1] == "REGRESSED"}
    bandwidth = {f: msg for f, msg in regressed.items() if f.startswith("bw_")}
    assert bandwidth, out[-3000:]
    for figure, message in bandwidth.items():
        # before -> now, the change with its interval at the decision's level, the
        # family, p (docs/judging.md, "What a person reads")
        m = re.match(r"([\d.,]+) -> ([\d.,]+) MB/s, -([\d.]+) % \[[-+][\d.,]+ \.\. "
                     r"[-+][\d.,]+\] \([\d.]+ %\), family \w+, p=[\d.e-]+$", message)
        assert m, f"{figure}: {message}"
        # the link lost 20 % of its rate: the figure lost about that much
        assert 10 < float(m[3]) < 30, f"{figure}: {message}"
    runs = Store(lab_store / "lab" / "history.sqlite").runs()
    assert len(runs) == K + 1
    assert runs[-1]["result"] == "regressed" and not runs[-1]["accepted"]
    assert all(r["accepted"] for r in runs[:-1])
