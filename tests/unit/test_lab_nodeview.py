"""Node views of the lab without a lab: seeding, faults written into a view,
clearing, and the mount commands (src/hpcval/lab/nodeview.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.lab import nodeview
from hpcval.lab.layout import LabLayout
from hpcval.lab.system import LabError


@pytest.fixture
def layout(tmp_path: Path) -> LabLayout:
    lay = LabLayout(nodes_count=3, state_dir=tmp_path)
    meminfo = Path("/proc/meminfo").read_text()
    for n in lay.nodes:
        nodeview.seed(lay, n.name, meminfo)
    return lay


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _mem_total(lay: LabLayout, node: str) -> int:
    text = (nodeview.view_dir(lay, node) / "proc/meminfo").read_text()
    return int(next(ln for ln in text.splitlines() if ln.startswith("MemTotal:")).split()[1])


def test_seeded_views_are_identical_and_in_the_sysfs_layout(layout: LabLayout) -> None:
    views = [_tree(nodeview.view_dir(layout, n.name)) for n in layout.nodes]
    assert views[0] == views[1] == views[2]
    v = views[0]
    assert v["proc/cmdline"] == Path("/proc/cmdline").read_text()
    assert len([k for k in v if k.endswith("/dimm_ce_count")]) == nodeview.DIMMS
    assert v["sys/devices/system/edac/mc/mc0/ue_count"] == "0\n"
    assert v["sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error"] == "0\n"
    assert v["sys/class/infiniband/mlx5_0/fw_ver"] == nodeview.HCA_FIRMWARE + "\n"
    assert "sys/class/dmi/id/bios_version" in v
    # values that differ by nature are not in the view
    assert not any(k.endswith(("serial", "uuid", "guid")) for k in v)


def test_faults_change_only_their_node(layout: LabLayout) -> None:
    clean = _tree(nodeview.view_dir(layout, "lab-n1"))
    total = _mem_total(layout, "lab-n1")
    for fault in nodeview.FAULTS:
        if fault != "cpu-throttle":  # a cgroup, not a file of the view
            nodeview.inject(layout, "lab-n2", fault)
    v2 = _tree(nodeview.view_dir(layout, "lab-n2"))
    assert _tree(nodeview.view_dir(layout, "lab-n1")).keys() == clean.keys()
    assert v2["proc/cmdline"].strip().endswith(nodeview.CMDLINE_EXTRA)
    assert _mem_total(layout, "lab-n2") == total * 7 // 8
    text = (nodeview.view_dir(layout, "lab-n2") / "proc/meminfo").read_text()
    avail = int(next(ln for ln in text.splitlines() if ln.startswith("MemAvailable:"))
                .split()[1])
    assert 0 <= avail <= total * 7 // 8
    assert not any("dimm7/" in k for k in v2)
    assert v2["sys/class/infiniband/mlx5_0/fw_ver"] == nodeview.OLD_HCA_FIRMWARE + "\n"
    assert v2["sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error"] == "100\n"
    assert v2["sys/devices/system/edac/mc/mc0/ce_count"] == "100\n"
    assert v2["sys/devices/system/edac/mc/mc0/ue_count"] == "1\n"
    nodeview.inject(layout, "lab-n2", "ecc-uncorrected")
    assert (nodeview.view_dir(layout, "lab-n2")
            / "sys/devices/system/edac/mc/mc0/ue_count").read_text() == "2\n"
    assert sorted(nodeview.load_faults(layout, "lab-n2")) == sorted(
        f for f in nodeview.FAULTS if f != "cpu-throttle")


def test_clear_restores_the_view_and_keeps_counters(layout: LabLayout) -> None:
    view = nodeview.view_dir(layout, "lab-n3")
    cmdline_inode = (view / "proc/cmdline").stat().st_ino
    nodeview.inject(layout, "lab-n3", "dimm")
    nodeview.inject(layout, "lab-n3", "cmdline")
    nodeview.inject(layout, "lab-n3", "ecc-corrected", count=5)
    text = nodeview.clear(layout, "lab-n3")
    assert "cmdline" in text and "dimm" in text
    assert _mem_total(layout, "lab-n3") == _mem_total(layout, "lab-n1")
    assert (view / "sys/devices/system/edac/mc/mc0/dimm7").is_dir()
    assert (view / "sys/devices/system/edac/mc/mc0/ce_count").read_text() == "5\n"
    # files bind-mounted one by one are rewritten in place, never replaced
    assert (view / "proc/cmdline").stat().st_ino == cmdline_inode
    nodeview.clear(layout, "lab-n3", reset_counters=True)
    assert _tree(view) == _tree(nodeview.view_dir(layout, "lab-n1"))


def test_bad_node_fault_or_count_is_one_clear_error(layout: LabLayout) -> None:
    with pytest.raises(LabError, match="lab-n9.*not a compute node"):
        nodeview.inject(layout, "lab-n9", "dimm")
    with pytest.raises(LabError, match="fault 'nosuch': unknown; one of cmdline"):
        nodeview.inject(layout, "lab-n1", "nosuch")
    with pytest.raises(LabError, match="--count is for the counter faults"):
        nodeview.inject(layout, "lab-n1", "dimm", count=3)
    with pytest.raises(LabError, match="--cpus 0.5: for cpu-throttle only"):
        nodeview.inject(layout, "lab-n1", "dimm", cpus=0.5)
    with pytest.raises(LabError, match="--cpus 0.0: for cpu-throttle only"):
        nodeview.inject(layout, "lab-n1", "cpu-throttle", cpus=0.0)
    with pytest.raises(LabError, match="positive"):
        nodeview.inject(layout, "lab-n1", "ecc-corrected", count=0)


def test_mount_script_binds_every_view_path(layout: LabLayout) -> None:
    script = nodeview.mount_script(layout, "lab-n1")
    view = nodeview.view_dir(layout, "lab-n1")
    for rel in (*nodeview.VIEW_FILES, *nodeview.VIEW_DIRS):
        assert f"mount --bind {view / rel} /{rel}" in script
    # a directory this kernel lacks gets an overlay on its nearest existing parent
    for rel in nodeview.VIEW_DIRS:
        if not Path("/", rel).exists():
            assert f"mkdir -p /{rel}" in script and "-t overlay" in script


def test_status_names_each_nodes_faults(layout: LabLayout) -> None:
    from hpcval.lab import cluster
    from hpcval.lab.state import LabState

    LabState(nodes=3, subnet=layout.subnet, node_views=True, ready=True).save(layout.state_file)
    nodeview.inject(layout, "lab-n2", "hca-firmware")
    st = cluster.status(state_dir=layout.state_dir)
    assert st.node_views == {"lab-n1": [], "lab-n2": ["hca-firmware"], "lab-n3": []}
