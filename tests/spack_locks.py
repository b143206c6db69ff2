"""What the tests read from a Spack lock beyond what hpcval itself reads."""

from __future__ import annotations

from typing import Any

from hpcval import spack


def root_mpi_pairs(lock: dict[str, Any]) -> set[tuple[str, str]]:
    """(root package, MPI package) for every root of a lock that links an MPI."""
    specs = lock["concrete_specs"]
    pairs = set()
    for node in spack.lock_roots(lock):
        for dep in node.get("dependencies", []):
            if "mpi" in dep.get("parameters", {}).get("virtuals", []):
                pairs.add((node["name"], specs[dep["hash"]]["name"]))
    return pairs
