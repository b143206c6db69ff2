"""Lab pieces that need neither root nor Slurm."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from hpcval.lab import cluster, system
from hpcval.lab.fabric import PROFILES, get_profile
from hpcval.lab.layout import BENCH_NET, MARKER, LabLayout
from hpcval.lab.network import remove_added_lines
from hpcval.lab.slurm import slurm_conf
from hpcval.lab.state import LabState
from hpcval.lab.system import LabError


def test_addresses_stay_in_the_benchmarking_range(tmp_path: Path) -> None:
    layout = LabLayout(nodes_count=4, state_dir=tmp_path, controller_host="ctl")
    addrs = [layout.bridge_address] + [n.address for n in layout.nodes]
    assert addrs == ["198.18.0.1", "198.18.0.11", "198.18.0.12", "198.18.0.13", "198.18.0.14"]
    assert all(ipaddress.ip_address(a) in BENCH_NET for a in addrs)
    assert layout.nodelist == "lab-n[1-4]"
    with pytest.raises(ValueError, match="outside"):
        LabLayout(nodes_count=2, state_dir=tmp_path, subnet="10.0.0.0/24")


def test_slurm_conf_has_what_debian_slurm_needs(tmp_path: Path) -> None:
    layout = LabLayout(nodes_count=2, state_dir=tmp_path, controller_host="myhost")
    text = slurm_conf(layout, cpus=2)
    assert text.startswith(MARKER)
    assert "SlurmctldHost=myhost(198.18.0.1)" in text
    assert "SlurmdParameters=config_overrides" in text
    assert "MailProg=/bin/true" in text
    assert "NodeName=lab-n2 NodeAddr=198.18.0.12" in text
    assert "PartitionName=lab Nodes=lab-n[1-2]" in text
    assert f"AuthInfo=socket={tmp_path}/munge/munge.socket.2" in text


def test_fabric_profiles() -> None:
    assert {"unshaped", "10g", "1g"} <= set(PROFILES)
    assert PROFILES["unshaped"].rate_bps is None
    args = get_profile("1g").tbf_args()
    assert args[:3] == ["tbf", "rate", "1000000000bit"]
    with pytest.raises(LabError, match="unknown fabric profile '2g'"):
        get_profile("2g")


def test_remove_added_lines_keeps_everything_else(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n198.18.0.11 lab-n1 # hpcval-lab\n::1 ip6\n"
                     f"198.18.0.12 lab-n2 {MARKER}\n")
    removed = remove_added_lines(hosts, ["198.18.0.11 lab-n1 # hpcval-lab"])
    assert removed == 2
    assert hosts.read_text() == "127.0.0.1 localhost\n::1 ip6\n"
    assert remove_added_lines(hosts, []) == 0
    assert remove_added_lines(tmp_path / "absent", ["x"]) == 0


def test_state_round_trip_and_torn_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    assert LabState.load(path) is None
    state = LabState(nodes=2, netns=["a"], daemons={"munged": {"pid": 1, "exe": "munged"}})
    state.save(path)
    assert LabState.load(path) == state
    path.write_text("{ torn")
    assert LabState.load(path) == LabState()


@pytest.mark.parametrize("action", ["up", "down", "fabric"])
def test_without_root_the_error_says_so(monkeypatch: pytest.MonkeyPatch, action: str) -> None:
    monkeypatch.setattr(system.os, "geteuid", lambda: 1000)
    with pytest.raises(LabError, match=f"'hpcval lab {action}' needs root"):
        if action == "up":
            cluster.up(2)
        elif action == "down":
            cluster.down()
        else:
            cluster.set_fabric("1g")


def test_stop_pid_never_signals_another_program() -> None:
    import subprocess

    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert system.stop_pid(proc.pid, "slurmd") is False
        assert proc.poll() is None
        assert system.stop_pid(proc.pid, "sleep") is True
    finally:
        proc.kill()
        proc.wait()


def test_service_node_gets_its_own_partition(tmp_path: Path) -> None:
    layout = LabLayout(nodes_count=2, state_dir=tmp_path, controller_host="h", service=True)
    assert [n.name for n in layout.all_nodes] == ["lab-n1", "lab-n2", "lab-svc"]
    assert layout.service_node is not None
    assert layout.service_node.address == "198.18.0.10"
    text = slurm_conf(layout, cpus=2)
    assert "NodeName=lab-svc NodeAddr=198.18.0.10 NodeHostname=lab-svc CPUs=1" in text
    assert "PartitionName=service Nodes=lab-svc Default=NO" in text
    assert "PartitionName=lab Nodes=lab-n[1-2] Default=YES" in text
    plain = LabLayout(nodes_count=2, state_dir=tmp_path, controller_host="h")
    assert "lab-svc" not in slurm_conf(plain, cpus=2)


def test_file_server_layout_config_and_mountinfo(tmp_path: Path) -> None:
    from hpcval.lab.fileserver import MOUNT_OPTIONS, parse_fuse_mounts, sshd_config

    layout = LabLayout(nodes_count=2, state_dir=tmp_path, controller_host="ctl",
                       file_server_enabled=True)
    fs = layout.file_server
    assert (fs.name, fs.netns, fs.address) == ("lab-fs", "hpcval-lab-fs", "198.18.0.9")
    assert ipaddress.ip_address(fs.address) in BENCH_NET
    assert [n.name for n in layout.shaped_nodes] == ["lab-n1", "lab-n2", "lab-fs"]
    assert fs not in layout.all_nodes  # not a Slurm node
    assert layout.shared_dir == tmp_path / "shared"
    text = sshd_config(layout)
    assert text.startswith(MARKER)
    assert "ListenAddress 198.18.0.9\n" in text
    assert f"HostKey {tmp_path}/fileserver/ssh_host_ed25519_key" in text
    assert "PasswordAuthentication no" in text and "ForceCommand internal-sftp" in text
    assert {"allow_other", "direct_io", "dir_cache=no"} <= set(MOUNT_OPTIONS.split(","))

    mountinfo = (
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        f"90 27 0:50 / {tmp_path}/shared rw,nosuid,nodev,relatime - fuse.sshfs "
        f"198.18.0.9:{tmp_path}/fileserver/export rw,user_id=0,group_id=0,allow_other\n"
        f"91 27 0:51 / {tmp_path}x/other rw - fuse.sshfs elsewhere:/ rw\n"
        "92 27 0:52 / /mnt/elsewhere rw - fuse.sshfs other:/ rw\n"
    )
    assert parse_fuse_mounts(mountinfo, tmp_path) == [f"{tmp_path}/shared"]
    assert parse_fuse_mounts("garbage line\n", tmp_path) == []


def test_one_node_profile_and_unknown_node(tmp_path: Path) -> None:
    assert PROFILES["70m"].rate_bps == 70_000_000
    assert PROFILES["100m"].rate_bps == 100_000_000
    layout = LabLayout(nodes_count=3, state_dir=tmp_path, controller_host="ctl")
    with pytest.raises(LabError, match="no lab node 'lab-n9' \\(nodes: lab-n1, lab-n2, lab-n3\\)"):
        from hpcval.lab.fabric import apply_profile
        apply_profile(layout, "100m", node="lab-n9")


def test_state_keeps_per_node_profiles(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    LabState(nodes=6, fabric="1g", node_fabric={"lab-n3": "100m"}, ready=True).save(path)
    assert cluster.node_fabrics(tmp_path) == {"lab-n3": "100m"}
