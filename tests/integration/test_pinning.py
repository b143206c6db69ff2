"""Ranks are bound to cores by every MPI stack the local site offers: MPICH's
Hydra, which leaves them free by default, is bound by its programming
environment's settings (``hpcval.rfm.site``)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from hpcval.rfm.site import MPICH_BINDING, mpich_from_system, open_mpi_from_system

PROBE = "grep Cpus_allowed_list /proc/self/status"


def _allowed(mpirun: str, env_vars: list[list[str]], ranks: int, *opts: str) -> list[str]:
    env = dict(os.environ)
    for key, value in env_vars:
        env[key] = value
    proc = subprocess.run([mpirun, *opts, "-np", str(ranks), "sh", "-c", PROBE], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return re.findall(r"Cpus_allowed_list:\s*(\S+)", proc.stdout)


def _cpus(spec: str) -> set[int]:
    out: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


@pytest.mark.skipif(mpich_from_system() is None, reason="Debian's MPICH (mpirun.mpich) is not "
                    "installed: `make system-deps`")
def test_mpich_ranks_are_bound_one_per_core() -> None:
    env = mpich_from_system()
    assert env is not None and ["HYDRA_BINDING", "core"] in env["env_vars"]
    ranks = min(2, os.cpu_count() or 1)
    allowed = [_cpus(s) for s in _allowed(env["extras"]["mpirun"], env["env_vars"], ranks)]
    assert len(allowed) == ranks and all(len(a) == 1 for a in allowed), allowed
    assert len(set().union(*allowed)) == ranks  # each rank on a core of its own
    if (os.cpu_count() or 1) > 1:
        # without the setting Hydra leaves every rank on every CPU: the setting is what binds
        free = [_cpus(s) for s in _allowed(env["extras"]["mpirun"], [], ranks)]
        assert all(len(a) == os.cpu_count() for a in free), free


@pytest.mark.skipif(open_mpi_from_system() is None, reason="Debian's Open MPI (mpirun.openmpi) "
                    "is not installed: `make system-deps`")
def test_open_mpi_binds_on_its_own() -> None:
    env = open_mpi_from_system()
    assert env is not None
    ranks = min(2, os.cpu_count() or 1)
    allowed = [_cpus(s) for s in _allowed(env["extras"]["mpirun"], env["env_vars"], ranks)]
    assert all(len(a) == 1 for a in allowed), allowed


def test_spack_mpich_gets_the_same_binding() -> None:
    from hpcval.rfm.site import SPACK_MPI_STACKS
    assert SPACK_MPI_STACKS["mpich"] == MPICH_BINDING
