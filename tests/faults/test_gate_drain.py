"""Faults of the per-node gate (`hpcval health`) a site meets: drain settings
given wrong, and a gate launched from a shell with a low ``ulimit -n``. Each
case is the real ``hpcval health`` command against stored vettings (the lab
runs recorded in tests/data/vet, as `hpcval vet` stores them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcval.vet.run import judge_recorded

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = ROOT / "tests" / "data" / "vet"

pytestmark = pytest.mark.integration


def checkout_var(tmp_path: Path, scale: float) -> Path:
    """The recorded lab runs stored as `hpcval vet` stores them, every per-node
    sample times ``scale``."""
    var = tmp_path / "var"
    for i, name in enumerate(["all-healthy", "one-bad-node", "one-bad-link", "slow-30pct"]):
        data = json.loads((DATA / f"{name}.json").read_text())
        for fig in data["node_samples"].values():
            for node, samples in fig.items():
                fig[node] = [scale * x for x in samples]
        rid = f"2026112{i}T000000Z-00000{i}"
        d = var / "lab" / "vet" / rid
        d.mkdir(parents=True)
        (d / "vet.json").write_text(json.dumps({
            "id": rid, "site": "lab", "partition": "lab",
            "verdict": judge_recorded(data).to_dict(), "node_samples": data["node_samples"]}))
    return var


def health(var: Path, *args: str, shell: str = "", timeout: float = 150
           ) -> subprocess.CompletedProcess[str]:
    cmd = " ".join([sys.executable, "-m", "hpcval.cli", "health", "--site", "lab", "--node",
                    "lab-n2", "--samples", "3", *args])
    env = dict(os.environ, HPCVAL_VAR=str(var), PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(["sh", "-c", f"{shell}exec {cmd}"], env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.mark.parametrize("args,says", [
    (["--drain-share", "0"], "--drain-share 0: a percentage above 0 and at most 100; exit 2"),
    (["--drain-share", "150"], "--drain-share 150: a percentage above 0 and at most 100"),
    (["--drain-window", "0"], "--drain-window 0: seconds above 0; exit 2"),
    (["--confirm-delay", "5", "2"], "--confirm-delay 5 2: LOW and HIGH seconds with 0 <= LOW "
                                    "<= HIGH; exit 2"),
    (["--spread", "-1"], "--spread -1: seconds, at least 0; exit 2"),
], ids=["share-0", "share-150", "window-0", "delay-reversed", "spread-negative"])
def test_drain_settings_given_wrong_say_which_and_measure_nothing(
        tmp_path: Path, args: list[str], says: str) -> None:
    var = checkout_var(tmp_path, 1.0)
    proc = health(var, "--drain", *args, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines
    assert "Traceback" not in proc.stderr
    assert not (var / "lab" / "health").exists()  # nothing measured, nothing stored


needs_mpi = pytest.mark.skipif(
    not (shutil.which("mpiexec", path=str(Path(sys.executable).parent))
         and shutil.which("IMB-MPI1", path=str(Path(sys.executable).parent))),
    reason="Intel MPI and IMB-MPI1 in the environment (make setup)")


@needs_mpi
def test_a_shells_ulimit_does_not_name_the_node(tmp_path: Path) -> None:
    """``ulimit -n 256`` in the shell that starts the gate: the tuning audit
    read the shell's limit and named the node (``tuning audit: rlimit_nofile
    found '256'``, exit 1). The gate now takes the node's own limits (its
    slurmd's, else PID 1's), or, where it may not raise the hard limit, leaves
    the limit unjudged and says so; the stored partition stands 100x below
    anything this machine measures, so nothing else can name it."""
    var = checkout_var(tmp_path, 0.01)
    proc = health(var, shell="ulimit -n 256 && ")
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout + proc.stderr
    assert "rlimit_nofile found '256'" not in lines[0], lines[0]
    assert proc.returncode in (0, 3), lines[0]  # 3: this machine too busy for the CPU share
    [saved] = (var / "lab" / "health").glob("*-lab-n2.json")
    notes = json.loads(saved.read_text())["verdict"]["notes"]
    assert any(n.startswith("limits of ") for n in notes), notes
