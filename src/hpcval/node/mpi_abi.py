"""Which MPI a program was linked against, and whether it fits an environment.

Two MPI stacks on one machine must never launch each other's binaries: Open
MPI's ``libmpi.so.40`` and the MPICH ABI (``libmpi.so.12``, shared by MPICH and
Intel MPI) are not interchangeable. A check that found a program through the
environment asks :func:`mpi_mismatch` before launching it
(:meth:`hpcval.rfm.HpcvalTest.skip_other_mpi`).
"""

from __future__ import annotations

import re
from pathlib import Path

_MPI_SONAME_RE = re.compile(rb"(libmpi(?:_mpifh|_usempif08|fort)?\.so\.\d+)")

#: MPI ABI (C library soname) of an environment's MPI stack, by feature.
MPI_ABI_BY_FEATURE = {"openmpi": "libmpi.so.40", "impi": "libmpi.so.12", "mpich": "libmpi.so.12"}


def linked_mpi_libraries(binary: str | Path) -> set[str]:
    """MPI shared libraries a binary was linked against (``libmpi.so.40`` for
    Open MPI, ``libmpi.so.12`` for the MPICH ABI shared by MPICH and Intel
    MPI), read from its dynamic string table; empty for a static binary."""
    data = Path(binary).read_bytes()
    return {m.decode() for m in _MPI_SONAME_RE.findall(data)}


def mpi_mismatch(binary: str | Path, features: list[str] | set[str]) -> str | None:
    """Why ``binary`` cannot run with an environment of these ``features``, or
    None when it can (or when it cannot be told: no known ABI feature, static binary)."""
    wanted = {MPI_ABI_BY_FEATURE[f] for f in features if f in MPI_ABI_BY_FEATURE}
    linked = {lib for lib in linked_mpi_libraries(binary) if lib.startswith("libmpi.so.")}
    if not wanted or not linked or wanted & linked:
        return None
    return (f"{binary} is linked against {', '.join(sorted(linked))}, this environment's MPI "
            f"provides {', '.join(sorted(wanted))}")
