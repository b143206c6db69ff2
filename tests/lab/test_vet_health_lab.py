"""`hpcval health` as Slurm's real HealthCheckProgram on a 4-node lab: slurmd
runs it on every node (outside any job, killed at 60 s), it measures the node
it runs on and judges it against the stored vettings of the partition; the
node that is off is drained by it with the evidence as the reason, the others
are untouched. The stored vettings are written by the test: the lab's nodes
share one machine's cores, so no node can be made slower than the others for
its triad or shared-memory bandwidth; instead lab-n2's own accepted history
stands 100x above anything the machine measures (a node whose figures
dropped), and the partition's figures 100x below (every node passes against
the partition). A few minutes."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcval.lab import cluster
from hpcval.lab.slurm import SLURM_CONF
from hpcval.lab.system import run
from hpcval.vet import slurm as vslurm

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab

NODES = ["lab-n1", "lab-n2", "lab-n3", "lab-n4"]
OFF = "lab-n2"
ROOT = Path(__file__).resolve().parent.parent.parent
#: what the lab measured (tests/data/vet/all-healthy.json, medians of its nodes)
TYPICAL = {"triad_bw": 27_000.0, "shm_pingpong_bw_1MiB": 2_100.0, "cpu_mhz": 2_596.0}


def stored_vets(var: Path) -> None:
    """Four vettings of the 4 nodes: lab-n2's figures 100x, the others' 1/100."""
    for i in range(4):
        rid = f"2026112{i}T000000Z-00000{i}"
        table = {n: {f: {"value": v * (100.0 if n == OFF else 0.01) * (1 + 0.01 * k)}
                     for f, v in TYPICAL.items()} for k, n in enumerate(NODES)}
        d = var / "lab" / "vet" / rid
        d.mkdir(parents=True)
        (d / "vet.json").write_text(json.dumps({
            "id": rid, "site": "lab", "partition": "lab",
            "verdict": {"nodes": NODES, "judged": True, "table": table, "named_nodes": []}}))


@pytest.fixture
def lab4(tmp_path: Path) -> Iterator[Path]:
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    cluster.up(4, log=lambda *_: None, file_server=False)
    try:
        yield tmp_path
    finally:
        cluster.down(log=lambda *_: None)


def test_slurm_runs_the_gate_and_drains_the_node_that_is_off(lab4: Path) -> None:
    var = lab4 / "var"
    stored_vets(var)
    log = lab4 / "health.log"
    script = lab4 / "hpcval-health"
    script.write_text(f"""#!/bin/sh
# slurmd runs this as root with no arguments, in the node's namespace
echo "$(date -u +%T) SLURMD_NODENAME=$SLURMD_NODENAME host=$(hostname)" >> {log}
HPCVAL_VAR={var} PYTHONPATH={ROOT / 'src'} exec {sys.executable} -m hpcval.cli health \\
  --site lab --drain --samples 3 --budget 50 >> {log} 2>&1
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    conf = SLURM_CONF.read_text()
    SLURM_CONF.write_text(conf + f"HealthCheckProgram={script}\nHealthCheckInterval=30\n"
                          "HealthCheckNodeState=ANY\n")
    run(["scontrol", "reconfigure"])
    t0 = time.monotonic()
    while time.monotonic() - t0 < 240:
        info = vslurm.nodes_info(NODES)
        ran = sorted({ln.split()[1].rstrip(":") for ln in log.read_text().splitlines()
                      if ln.startswith("health ")}) if log.exists() else []
        if "DRAIN" in info[OFF].state and ran == NODES:
            break
        time.sleep(5)
    text = log.read_text() if log.exists() else ""
    info = vslurm.nodes_info(NODES)
    assert "DRAIN" in info[OFF].state, text
    assert info[OFF].reason.startswith("hpcval health [HC-"), info[OFF].reason
    assert "below the own history median" in info[OFF].reason
    for n in NODES:
        if n != OFF:
            assert "DRAIN" not in info[n].state, (n, info[n], text)
    lines = [ln for ln in text.splitlines() if ln.startswith("health ")]
    assert {ln.split()[1].rstrip(":") for ln in lines} == set(NODES), text
    # judged every time, in slurmd's environment (no PATH), within slurmd's 60 s
    assert all(ln.split()[2] in ("OK", "NO") for ln in lines), text
    assert all(int(ln.split(" in ")[1].split()[0]) < 60 for ln in lines), text
    assert all(ln.startswith(f"health {OFF}: NO") for ln in lines if f" {OFF}:" in ln)
    assert all(ln.split()[2] == "OK" for ln in lines if f" {OFF}:" not in ln), text
    assert "SLURMD_NODENAME=lab-n1 host=lab-n1" in text  # slurmd names the node
    print(text)
    print(f"drained after {time.monotonic() - t0:.0f} s; load {os.getloadavg()[0]:.1f}")
