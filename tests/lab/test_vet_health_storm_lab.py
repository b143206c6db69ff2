"""One storm round of `hpcval health` as Slurm's real HealthCheckProgram on a
16-node lab: the partition vetted for real first (`hpcval vet`, its figures the
gate's yardstick), then `scontrol reconfigure` starts the gate on all 16 nodes
within seconds, 16 gates on the machine's cores. lab-n3's slurmd, and so every
gate and task it starts, is held by a cgroup to 25 % of one CPU; lab-n5 is
drained by an administrator ("admin: disk").

After the round: no node but lab-n3 carries hpcval's drain; lab-n5 is still
drained with the administrator's reason; lab-n3 is never judged OK: drained
for its CPU share (HC-CPUSHARE), or, where the machine's other work leaves no
half CPU to be fair (docs/vet.md), not judged and said so. Needs root, Slurm
and a cgroup CPU controller (v1 or v2); a few minutes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcval.lab import cluster
from hpcval.lab.slurm import SLURM_CONF
from hpcval.lab.system import run
from hpcval.vet.healthdrain import read_nodes

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab

NODES = [f"lab-n{i}" for i in range(1, 17)]
THROTTLED, ADMIN = "lab-n3", "lab-n5"
ROOT = Path(__file__).resolve().parent.parent.parent
CGROUP_V1 = Path("/sys/fs/cgroup/cpu")
CGROUP_V2 = Path("/sys/fs/cgroup")


def cgroup_missing_reason() -> str | None:
    if (CGROUP_V1 / "cpu.cfs_quota_us").exists():
        return None
    if "cpu" in (CGROUP_V2 / "cgroup.controllers").read_text().split() if (
            CGROUP_V2 / "cgroup.controllers").exists() else False:
        return None
    return "no cgroup CPU controller (cgroup v1 cpu or v2 cpu.max) to throttle a node"


def throttle(pid: int, name: str, percent: int) -> Path:
    """Put process ``pid`` (and what it starts later) in a cgroup of its own
    with ``percent`` % of one CPU per 100 ms period."""
    if (CGROUP_V1 / "cpu.cfs_quota_us").exists():
        cg = CGROUP_V1 / name
        cg.mkdir(exist_ok=True)
        (cg / "cpu.cfs_period_us").write_text("100000")
        (cg / "cpu.cfs_quota_us").write_text(str(percent * 1000))
    else:
        cg = CGROUP_V2 / name
        cg.mkdir(exist_ok=True)
        (cg / "cpu.max").write_text(f"{percent * 1000} 100000")
    (cg / "cgroup.procs").write_text(str(pid))
    return cg


def release(cg: Path) -> None:
    """Move what is left in the cgroup back to the root and remove it."""
    parent = cg.parent
    for _ in range(10):
        try:
            for pid in (cg / "cgroup.procs").read_text().split():
                try:
                    (parent / "cgroup.procs").write_text(pid)
                except OSError:
                    pass
            cg.rmdir()
            return
        except OSError:
            time.sleep(0.5)


def slurmd_pid(node: str) -> int:
    out = subprocess.run(["pgrep", "-f", f"slurmd .*-N {node}$"], capture_output=True,
                         text=True, check=False).stdout.split()
    assert out, f"no slurmd for {node}"
    return int(out[0])


@pytest.fixture
def lab16(tmp_path: Path) -> Iterator[Path]:
    reason = lab_missing_reason() or cgroup_missing_reason()
    if reason:
        pytest.skip(reason)
    cluster.up(16, log=lambda *_: None, file_server=False)
    try:
        yield tmp_path
    finally:
        cluster.down(log=lambda *_: None)


def round_lines(log: Path) -> dict[str, str]:
    """Each node's first line (a later round may have begun)."""
    text = log.read_text() if log.exists() else ""
    out: dict[str, str] = {}
    for ln in text.splitlines():
        if ln.startswith("health "):
            out.setdefault(ln.split()[1].rstrip(":"), ln)
    return out


def test_one_storm_round_drains_no_healthy_node(lab16: Path) -> None:
    var = lab16 / "var"
    env = dict(os.environ, HPCVAL_VAR=str(var), PYTHONPATH=str(ROOT / "src"))
    vet = subprocess.run([sys.executable, "-m", "hpcval.cli", "vet", "--site", "lab",
                          "--max-rounds", "1", "--quiet"], env=env, capture_output=True,
                         text=True, timeout=600, check=False)
    assert vet.returncode in (0, 1), vet.stdout + vet.stderr  # a complete vetting, named or not
    log = lab16 / "health.log"
    script = lab16 / "hpcval-health"
    script.write_text(f"""#!/bin/sh
HPCVAL_VAR={var} PYTHONPATH={ROOT / 'src'} exec {sys.executable} -m hpcval.cli health \\
  --site lab --drain --samples 3 --budget 50 >> {log} 2>&1
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    conf = SLURM_CONF.read_text()
    # slurmctld asks every node at once each interval (ANY, no CYCLE): the storm. A
    # reconfigure alone does not start it; 90 s leaves a round (<= 60 s) to itself
    SLURM_CONF.write_text(conf + f"HealthCheckProgram={script}\nHealthCheckInterval=90\n"
                          "HealthCheckNodeState=ANY\n")
    cg = throttle(slurmd_pid(THROTTLED), f"hpcval-lab-test-{os.getpid()}", 25)
    try:
        run(["scontrol", "update", f"nodename={ADMIN}", "state=drain", "reason=admin: disk"])
        load = os.getloadavg()[0]
        run(["scontrol", "reconfigure"])
        t0 = time.monotonic()
        while time.monotonic() - t0 < 200 and len(round_lines(log)) < len(NODES):
            time.sleep(3)
        lines = round_lines(log)
        nodes = read_nodes()
    finally:
        SLURM_CONF.write_text(conf)
        release(cg)
    text = log.read_text() if log.exists() else ""
    assert set(lines) == set(NODES), text
    drained = sorted(n for n in NODES if nodes[n].own)
    assert set(drained) <= {THROTTLED}, (drained, text)
    assert nodes[ADMIN].drained and nodes[ADMIN].reason == "admin: disk", nodes[ADMIN]
    said = lines[ADMIN].split()[2]
    if said == "OK":  # healthy, but not resumed: the drain is not hpcval's
        assert "left drained: drained by someone else ('admin: disk')" in lines[ADMIN]
    elif said == "NO":
        assert "not drained again: drained by someone else" in lines[ADMIN]
    mine = lines[THROTTLED]
    assert not mine.startswith(f"health {THROTTLED}: OK"), mine
    if drained:
        assert nodes[THROTTLED].own is not None
        assert "HC-CPUSHARE" in nodes[THROTTLED].own.codes, nodes[THROTTLED].reason
    else:
        assert "not judged" in mine and "busy" in mine, mine
    print(text)
    print(f"load before the round {load:.1f}; drained: {drained or 'none'}")
