"""A lab node sees this machine's cgroup file systems, as a cluster node does.

`ip netns exec` mounts a fresh /sys without them, so `hpcval health` on a lab
node could not read its cgroup's throttle count (docs/vet.md, "A gate that
cannot drain in a storm"). `cgroup_mounts` reads the machine's mountinfo and
mounts the same hierarchies again before the node's slurmd starts."""

from __future__ import annotations

from hpcval.lab.slurm import cgroup_mounts

# /proc/self/mountinfo of a cgroup v1 machine (a Debian container, abridged)
V1 = """\
24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
"""
# and of a cgroup v2 machine
V2 = """\
24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
25 24 0:23 / /sys/fs/cgroup rw,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
"""


def test_v1_hierarchies_are_mounted_again_under_a_tmpfs() -> None:
    cmds = cgroup_mounts(V1).split(" && ")
    assert cmds[0] == "mount -t tmpfs -o mode=755 hpcval-lab-cgroup /sys/fs/cgroup"
    assert "mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu" in cmds
    assert "mount -t cgroup -o cpu,cpuacct cgroup /sys/fs/cgroup/cpu,cpuacct" in cmds
    assert "mount -t cgroup -o xattr,name=systemd cgroup /sys/fs/cgroup/systemd" in cmds
    assert "mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified" in cmds
    assert not any("sysfs" in c for c in cmds)


def test_v2_is_one_mount() -> None:
    assert cgroup_mounts(V2) == "mount -t cgroup2 cgroup2 /sys/fs/cgroup"


def test_nothing_where_the_machine_mounts_no_cgroups() -> None:
    assert cgroup_mounts("24 30 0:22 / /sys rw - sysfs sysfs rw\n") == ""
    assert cgroup_mounts("") == ""
