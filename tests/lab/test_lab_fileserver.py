"""The lab's file server for real: sshfs from lab-fs mounted on every compute
node, a file written on one node read back on another, shaping of its link, a
dead mount reported, and a down that leaves no mount behind.

Needs root, Slurm, munge, sshfs and openssh-server; skips with the reason
otherwise. About 10 s.
"""

from __future__ import annotations

import hashlib
import os
import runpy
import subprocess
from pathlib import Path

import pytest

from hpcval.core.paths import project_root
from hpcval.lab import cluster, fileserver
from hpcval.lab.layout import default_state_dir, shared_dir
from hpcval.lab.state import LabState
from hpcval.lab.system import pid_alive

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab


def _srun(node: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["srun", "-w", node, "-N", "1", "-n", "1", "sh", "-c", script],
                          capture_output=True, text=True, timeout=120, check=False)


def test_shared_mount_on_every_node_and_down_leaves_no_mount() -> None:
    reason = lab_missing_reason() or fileserver.missing_reason()
    if reason:
        pytest.skip(reason)
    privsep_existed = fileserver.PRIVSEP_DIR.exists()
    layout = cluster.up(2, file_server=True, log=lambda *_: None)
    mnt = shared_dir()
    try:
        assert layout.shared_dir == mnt
        state = LabState.load(default_state_dir() / "state.json")
        assert state is not None
        pids = [int(state.fileserver["sshd"])] + [
            int(m["pid"]) for m in state.fileserver["mounts"].values()]

        # a job on every node sees the sshfs mount at the same path
        for node in ("lab-n1", "lab-n2"):
            out = _srun(node, f"hostname; grep ' {mnt} ' /proc/self/mountinfo")
            assert out.returncode == 0, out.stderr
            lines = out.stdout.splitlines()
            assert lines[0] == node
            assert "fuse.sshfs" in lines[1] and f"{layout.file_server.address}:" in lines[1]

        # written on lab-n1, read on lab-n2: same bytes, stored on the file server
        data = os.urandom(3 * 1024 * 1024 + 17)
        digest = hashlib.sha256(data).hexdigest()
        src = layout.export_dir / "src.bin"
        src.write_bytes(data)
        wrote = _srun("lab-n1", f"cat {src} > {mnt}/from-n1.bin && sha256sum {mnt}/from-n1.bin")
        assert wrote.returncode == 0, wrote.stderr
        read = _srun("lab-n2", f"sha256sum {mnt}/from-n1.bin")
        assert read.returncode == 0, read.stderr
        assert read.stdout.split()[0] == digest == wrote.stdout.split()[0]
        assert (layout.export_dir / "from-n1.bin").read_bytes() == data
        # and the data crossed the lab links: the file server received it
        st = cluster.status()
        assert st.fileserver is not None and st.fileserver.rx_bytes > len(data)
        assert all(v.startswith("mounted") for v in st.fileserver.mounts.values())
        assert not st.problems

        # the lab site config offers the mount to I/O checks
        config = runpy.run_path(str(project_root() / "site-configs" / "lab" / "config.py"))
        extras = config["site_configuration"]["systems"][0]["partitions"][0]["extras"]
        assert extras["shared_fs_dir"] == str(mnt)

        # fabric profiles shape the file server's link too
        cluster.set_fabric("1g")
        assert "rate 1Gbit" in cluster.status().fileserver.qdisc
        cluster.set_fabric("unshaped")

        # a mount whose sshfs died is reported, not hidden
        os.kill(int(state.fileserver["mounts"]["lab-n2"]["pid"]), 9)
        st = cluster.status()
        assert st.fileserver.mounts["lab-n2"].startswith("NOT CONNECTED")
        assert any("lab-n2" in p for p in st.problems)
    finally:
        report = cluster.down(log=lambda *_: None)
    # both mounts detached (the dead one too), sshd and sshfs gone, nothing left
    assert len(report.unmounted) == 2
    assert fileserver.lab_fuse_mounts(default_state_dir()) == {}
    assert not any(pid_alive(p) for p in pids)
    assert not default_state_dir().exists()
    assert fileserver.PRIVSEP_DIR.exists() == privsep_existed
    hosts = Path("/etc/hosts").read_text()
    assert "lab-fs" not in hosts
