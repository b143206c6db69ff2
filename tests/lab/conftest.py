"""Fixtures for the lab tests: a real 2-node Slurm lab, or a skip that says why."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from hpcval.lab import cluster
from hpcval.lab.layout import default_state_dir
from hpcval.lab.state import LabState


def lab_missing_reason() -> str | None:
    """Why the lab cannot run here, or None if it can."""
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, bridge, Slurm daemons)"
    for prog, pkg in (("slurmctld", "slurm-wlm"), ("slurmd", "slurm-wlm"),
                      ("munged", "munge"), ("srun", "slurm-client"), ("ip", "iproute2"),
                      ("tc", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(prog) is None:
            return f"'{prog}' not installed (apt-get install {pkg})"
    if not os.path.exists("/usr/lib/x86_64-linux-gnu/libpmi2.so.0"):
        return "libpmi2 not installed (apt-get install libpmi2-0)"
    recorded = LabState.load(default_state_dir() / "state.json")
    if recorded is not None and not cluster.abandoned(recorded):  # an abandoned one: up clears it
        return (f"a lab is already up ({default_state_dir()}); the tests bring up and take "
                "down their own lab, run 'hpcval lab down' first")
    if os.path.exists("/etc/slurm/slurm.conf"):
        from hpcval.lab.slurm import SLURM_CONF, owned_by_lab
        if not owned_by_lab(SLURM_CONF):
            return "/etc/slurm/slurm.conf belongs to a real Slurm installation"
    return None


@pytest.fixture(scope="session")
def lab_reason() -> str | None:
    return lab_missing_reason()


@pytest.fixture
def lab2() -> Iterator[None]:
    """A 2-node lab, up for one test, taken down after it."""
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    cluster.up(2, log=lambda *_: None)
    try:
        yield
    finally:
        cluster.down(log=lambda *_: None)
