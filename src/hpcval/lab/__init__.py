"""The lab: a real Slurm cluster on one machine.

One ``slurmd`` per Linux network namespace, the namespaces joined to a bridge
by veth links with addresses from 198.18.0.0/15 (the range reserved for
benchmarking), ``slurmctld`` and ``munged`` in the root namespace. MPI ranks on
different lab nodes talk over TCP across the veth links, whose bandwidth can be
shaped with ``tc`` to emulate a slower fabric (:mod:`hpcval.lab.fabric`).

Everything the lab creates is recorded in a state file as it is created, so
:func:`hpcval.lab.cluster.down` can undo a complete or a half-failed
:func:`hpcval.lab.cluster.up`.
"""

from hpcval.lab.cluster import current_fabric, down, set_fabric, status, up
from hpcval.lab.fabric import PROFILES, apply_profile
from hpcval.lab.layout import LabLayout

__all__ = [
    "LabLayout", "PROFILES", "apply_profile", "current_fabric", "down", "set_fabric", "status",
    "up",
]
