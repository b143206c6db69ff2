"""The lab for real: up, Slurm, fabric shaping, and a down that leaves nothing behind.

Needs root, slurm-wlm, munge and iproute2; skips with the reason otherwise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hpcval.lab import cluster, slurm
from hpcval.lab.fileserver import lab_fuse_mounts
from hpcval.lab.layout import BRIDGE, MARKER, NODE_IFACE, default_state_dir
from hpcval.lab.network import existing_links, existing_netns
from hpcval.lab.state import LabState
from hpcval.lab.system import LabError, pid_alive

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab


def _leftovers() -> list[str]:
    """Everything a lab could leave behind, as readable strings (empty = clean)."""
    left = [f"netns {n}" for n in existing_netns() if cluster._lab_netns(n)]
    left += [f"link {lk}" for lk in existing_links() if lk.startswith(cluster.LINK_PREFIX)]
    left += [f"/etc/hosts: {ln}" for ln in Path("/etc/hosts").read_text().splitlines()
             if MARKER in ln]
    for conf in (slurm.SLURM_CONF, slurm.CGROUP_CONF):
        if slurm.owned_by_lab(conf):
            left.append(str(conf))
    if default_state_dir().exists():
        left.append(str(default_state_dir()))
    left += [f"mount {t}" for _, ts in lab_fuse_mounts(default_state_dir()).values() for t in ts]
    return left


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_up_gives_two_idle_nodes_then_down_leaves_nothing() -> None:
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    cluster.up(2, log=lambda *_: None)
    try:
        state = LabState.load(default_state_dir() / "state.json")
        assert state is not None and state.ready
        pids = [int(d["pid"]) for d in state.daemons.values()]
        assert sorted(state.daemons) == ["munged", "slurmctld", "slurmd-lab-n1",
                                         "slurmd-lab-n2"]
        assert all(pid_alive(p) for p in pids)

        sinfo = _run("sinfo", "-h", "-N", "-o", "%N %T")
        assert sinfo.stdout.split("\n")[:2] == ["lab-n1 idle", "lab-n2 idle"]
        # a job lands on both nodes, each in its own namespace with its own address
        srun = _run("srun", "-N", "2", "-n", "2", "sh", "-c",
                    f"echo $(hostname) $(cat /sys/class/net/{NODE_IFACE}/address)")
        assert srun.returncode == 0, srun.stderr
        lines = sorted(srun.stdout.split("\n")[:2])
        assert [ln.split()[0] for ln in lines] == ["lab-n1", "lab-n2"]
        assert lines[0].split()[1] != lines[1].split()[1]

        # the nodes pass through 'completing' after a job; then they are idle again
        slurm.wait_idle(cluster.layout_from_state(state, default_state_dir()), timeout=60)
        st = cluster.status()
        assert st.up and not st.problems
        assert [n.slurm_state for n in st.nodes] == ["idle", "idle"]

        with pytest.raises(LabError, match="already recorded"):
            cluster.up(2, log=lambda *_: None)
    finally:
        report = cluster.down(log=lambda *_: None)
    # the four Slurm daemons (plus the file server's sshd where sshfs is installed)
    assert sorted(s.split()[0] for s in report.stopped
                  if not s.startswith(("sshd", "sshfs"))) == sorted(state.daemons)
    assert not any(pid_alive(p) for p in pids)
    assert _leftovers() == []
    # down again is harmless
    again = cluster.down(log=lambda *_: None)
    assert again.stopped == [] and again.netns == [] and again.links == []
    assert _leftovers() == []


def test_fabric_profile_shapes_and_unshapes_every_link(lab2: None) -> None:
    cluster.set_fabric("1g")
    st = cluster.status()
    assert st.fabric == "1g"
    assert all("tbf" in n.qdisc and "1Gbit" in n.qdisc for n in st.nodes)
    bridge_ports = _run("tc", "qdisc", "show", "dev", "hvlab-n1", "root").stdout
    assert "rate 1Gbit" in bridge_ports
    cluster.set_fabric("unshaped")
    st = cluster.status()
    assert st.fabric == "unshaped"
    assert not any("tbf" in n.qdisc for n in st.nodes)


def test_half_failed_up_is_cleaned(monkeypatch: pytest.MonkeyPatch) -> None:
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)

    def broken_slurmctld(layout):  # noqa: ANN001
        raise LabError("slurmctld refused to start (simulated)")

    monkeypatch.setattr(slurm, "start_slurmctld", broken_slurmctld)
    with pytest.raises(LabError, match="simulated"):
        cluster.up(2, log=lambda *_: None)
    # up took the partial lab down itself; munged (already started) is gone too
    assert _leftovers() == []
    assert BRIDGE not in existing_links()


def test_down_after_a_crash_without_state_file() -> None:
    """A lab whose state file was lost (e.g. /run cleared) is still removed by name."""
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    cluster.up(2, log=lambda *_: None)
    (default_state_dir() / "state.json").unlink()
    cluster.down(log=lambda *_: None)
    assert _leftovers() == []


def test_up_clears_a_lab_whose_daemons_were_killed() -> None:
    """A lab left recorded by a killed session (state file and namespaces there,
    no daemon running: what a machine copied mid-run shows) does not block the
    next one: up takes what is left down and comes up; a running lab still blocks."""
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    cluster.up(2, log=lambda *_: None)
    try:
        state = LabState.load(default_state_dir() / "state.json")
        assert state is not None and not cluster.abandoned(state)
        pids = [int(d["pid"]) for d in state.daemons.values()]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cluster.abandoned(state)
        assert any(cluster._lab_netns(n) for n in existing_netns())
        assert lab_missing_reason() is None  # the lab tests run after such a session
        lines: list[str] = []
        cluster.up(2, log=lines.append)
        assert any("none of its daemons running" in ln for ln in lines), lines
        again = LabState.load(default_state_dir() / "state.json")
        assert again is not None and again.ready and not cluster.abandoned(again)
        assert _run("sinfo", "-h", "-N", "-o", "%N %T").stdout.split("\n")[:2] == [
            "lab-n1 idle", "lab-n2 idle"]
        with pytest.raises(LabError, match="already recorded"):
            cluster.up(2, log=lambda *_: None)
    finally:
        cluster.down(log=lambda *_: None)
    assert _leftovers() == []
