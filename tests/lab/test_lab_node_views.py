"""Node views for real (``hpcval lab up --node-views``): each node's slurmd in a
mount namespace of its own, where /proc/cmdline, /proc/meminfo and the DMI,
EDAC and InfiniBand sysfs directories are the node's own files; a fault written
into one node's view is seen by that node's job steps and not by the other's,
and ``down`` leaves no view mounted and no cgroup behind.

Opt-in (it brings up a lab of its own, ~10 s): HPCVAL_LAB_NODE_VIEWS=1; needs
root, Slurm, munge and a cgroup CPU controller."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hpcval.lab import cluster, nodeview
from hpcval.lab.layout import default_state_dir
from hpcval.lab.state import LabState

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab

READ = ("cat /proc/cmdline; grep MemTotal /proc/meminfo; "
        "ls /sys/devices/system/edac/mc/mc0 | grep -c dimm; "
        "cat /sys/class/infiniband/mlx5_0/fw_ver /sys/class/dmi/id/bios_vendor")


def _on(node: str) -> list[str]:
    proc = subprocess.run(["srun", "-N1", "-w", node, "sh", "-c", READ], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_each_node_sees_its_own_view_and_down_leaves_nothing() -> None:
    if os.environ.get("HPCVAL_LAB_NODE_VIEWS") != "1":
        pytest.skip("opt-in: HPCVAL_LAB_NODE_VIEWS=1 (brings up a 2-node lab)")
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    if not nodeview.cgroup_dir("x").parent.parent.is_dir():
        pytest.skip("no cgroup CPU controller")
    layout = cluster.up(2, log=lambda *_: None, file_server=False, node_views=True)
    try:
        state = LabState.load(default_state_dir() / "state.json")
        assert state is not None
        pids = [int(state.daemons[f"slurmd-lab-n{i}"]["pid"]) for i in (1, 2)]
        namespaces = {os.readlink(f"/proc/{p}/ns/mnt") for p in pids}
        assert len(namespaces) == 2 and os.readlink("/proc/self/ns/mnt") not in namespaces

        before = _on("lab-n1")
        assert before == _on("lab-n2")  # seeded identical
        assert before[2:] == [str(nodeview.DIMMS), nodeview.HCA_FIRMWARE,
                              nodeview.DMI["bios_vendor"]]

        nodeview.inject(layout, "lab-n2", "cmdline")
        nodeview.inject(layout, "lab-n2", "dimm")
        nodeview.inject(layout, "lab-n2", "hca-firmware")
        n1, n2 = _on("lab-n1"), _on("lab-n2")
        assert n2[0].endswith(nodeview.CMDLINE_EXTRA) and not n1[0].endswith(
            nodeview.CMDLINE_EXTRA)
        total = [int(x.split()[1]) for x in (n1[1], n2[1])]
        assert total[1] == total[0] * (nodeview.DIMMS - 1) // nodeview.DIMMS
        assert (n1[2], n2[2]) == (str(nodeview.DIMMS), str(nodeview.DIMMS - 1))
        assert (n1[3], n2[3]) == (nodeview.HCA_FIRMWARE, nodeview.OLD_HCA_FIRMWARE)
        # the machine itself is untouched
        with open("/proc/cmdline") as f:
            assert not f.read().strip().endswith(nodeview.CMDLINE_EXTRA)

        nodeview.clear(layout, "lab-n2")
        assert _on("lab-n2") == _on("lab-n1")
    finally:
        cluster.down(log=lambda *_: None)
    assert nodeview.leftover_mounts(default_state_dir()) == {}
    assert not nodeview.cgroup_dir("x").parent.exists()
    assert not default_state_dir().exists()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
