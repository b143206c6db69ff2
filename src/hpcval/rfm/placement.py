"""Placement: how many MPI ranks a check runs, on how many nodes.

The one writer of a check's task layout (``num_tasks``, ``num_tasks_per_node``,
``num_cpus_per_task``) and of the job's copy of it: a check states what it
needs through the policy inputs of :class:`hpcval.rfm.HpcvalTest` and never
sets those attributes itself (``tests/unit/test_placement.py`` walks every
check file to keep it so). The inputs:

* ``rank_count``: a number of ranks; ``"node"``, one per CPU of every node of
  the job (from the partition's topology, at least two, a multiple of
  ``rank_multiple``); ``"core"``, one per core of every node (the partition's
  core count as ReFrame knows it, one where unknown); ``None``, ``num_tasks``
  as given on the command line (``-S num_tasks=...``, else one);
* ``nodes``: nodes the ranks are spread over in equal blocks (``"internode"``:
  two on a partition with the ``internode`` feature, one elsewhere);
* ``ranks_per_node``: where set, the ranks of each node, whatever
  ``rank_count`` says.

A count per node (``"core"``, ``ranks_per_node``), or more than one node,
also sets ``num_tasks_per_node``; otherwise it is left as given (``-S
num_tasks_per_node=1`` spreads two ranks over two nodes). The sizing policy
(:mod:`hpcval.rfm.sizing`) reads the ranks of one node from here.

The functions that decide (:func:`node_count`, :func:`ranks_on`,
:func:`layout`, :func:`fits`) are plain: they take numbers and a
:class:`hpcval.node.topology.Topology`, not a test. The others take the test and are
what the mixin's hooks call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reframe.core.exceptions import ReframeError

from hpcval.node import topology

#: The attributes only this module writes, on a test or on its job.
TASK_ATTRIBUTES = ("num_tasks", "num_tasks_per_node", "num_cpus_per_task")

# Topologies of the partitions, by full name (detected once per ReFrame run).
_TOPOLOGIES: dict[str, topology.Topology] = {}


@dataclass(frozen=True)
class Layout:
    """The task layout of a job: ``num_tasks_per_node`` ``None`` where the
    policy leaves it as given."""

    num_tasks: int
    num_tasks_per_node: int | None = None


def node_count(nodes: int | str, features: list[str] | tuple[str, ...], check: str = "") -> int:
    """Nodes of a job asking for *nodes* on a partition with *features*."""
    if nodes == "internode":
        return 2 if "internode" in features else 1
    if isinstance(nodes, str):
        raise ReframeError(f"{check}: nodes must be a number or 'internode', not {nodes!r}")
    return int(nodes)


def _per_node(rank_count: int | str | None, ranks_per_node: int | None) -> bool:
    """True where the policy counts ranks per node."""
    return bool(ranks_per_node) or rank_count == "core"


def ranks_on(rank_count: int | str | None, topo: topology.Topology, nodes: int = 1, *,
             rank_multiple: int = 1, ranks_per_node: int | None = None,
             cores: int | None = None, check: str = "") -> int | None:
    """The job's MPI ranks on *nodes* nodes of topology *topo* (*cores*: the
    cores of one node); ``None`` where that depends on a CPU count that is
    unknown."""
    if ranks_per_node:
        return ranks_per_node * nodes
    if rank_count == "core":
        return (cores or 1) * nodes
    if rank_count == "node":
        if not topo.num_cpus:
            return None
        per_node = topo.num_cpus - topo.num_cpus % rank_multiple
        return max(2, per_node) * nodes
    if isinstance(rank_count, str):
        raise ReframeError(f"{check}: rank_count must be a number, 'node' or 'core', "
                           f"not {rank_count!r}")
    return int(rank_count or 1)


def layout(ranks: int, nodes: int, *, rank_count: int | str | None = None,
           ranks_per_node: int | None = None) -> Layout:
    """The layout of *ranks* ranks on *nodes* nodes."""
    if nodes > 1 or _per_node(rank_count, ranks_per_node):
        return Layout(ranks, ranks // nodes)
    return Layout(ranks)


def fits(ranks: int | None, topo: topology.Topology, nodes: int) -> bool:
    """Whether *ranks* ranks fit *nodes* nodes of *topo* (an unknown count fits)."""
    return ranks is None or not topo.num_cpus or ranks <= max(2, topo.num_cpus * nodes)


def unplaceable(ranks: int | None, topo: topology.Topology) -> bool:
    """Whether *ranks* cannot be placed: they depend on a CPU count that is
    unknown, or are more than two where the CPU count is unknown."""
    return ranks is None or (not topo.num_cpus and ranks > 2)


# -- the test's side: what the mixin's hooks call ------------------------------


def topology_of(partition: Any) -> topology.Topology:
    """The processor topology of *partition* (detected once per run)."""
    if partition.fullname not in _TOPOLOGIES:
        _TOPOLOGIES[partition.fullname] = topology.of_partition(partition)
    return _TOPOLOGIES[partition.fullname]


def nodes_of(test: Any, partition: Any = None) -> int:
    """Nodes of *test*'s job on *partition* (default: the current one)."""
    part = partition or test.current_partition
    return node_count(test.nodes, part.features, type(test).__name__)


def ranks_of(test: Any, partition: Any = None) -> int | None:
    """*test*'s MPI ranks on *partition* (default: the current one)."""
    part = partition or test.current_partition
    return wanted_ranks(test, topology_of(part), nodes_of(test, part), part)


def wanted_ranks(test: Any, topo: topology.Topology, nodes: int = 1,
                  partition: Any = None) -> int | None:
    """*test*'s MPI ranks on *nodes* nodes of topology *topo*."""
    part = partition or test.current_partition
    wanted = test.rank_count if test.rank_count is not None else test.num_tasks
    return ranks_on(wanted, topo, nodes, rank_multiple=test.rank_multiple,
                    ranks_per_node=test.ranks_per_node,
                    cores=getattr(part.processor, "num_cores", None),
                    check=type(test).__name__)


def fit_partitions(test: Any) -> None:
    """Keep only the partitions *test*'s ranks fit: a case that cannot run on
    a partition (more ranks than its CPUs) is not generated there, rather than
    generated and skipped."""
    from reframe.core.runtime import valid_sysenv_comb

    partitions = list(valid_sysenv_comb(test.valid_systems, [], check_environs=False))
    fitting = [p for p in partitions
               if fits(ranks_of(test, p), topology_of(p), nodes_of(test, p))]
    if len(fitting) < len(partitions):
        test.valid_systems = [p.fullname for p in fitting]


def set_tasks(test: Any) -> None:
    """Set *test*'s task layout on its partition; skip it, with the fix,
    where the ranks cannot be placed."""
    topo, nodes = topology_of(test.current_partition), nodes_of(test)
    ranks = ranks_of(test)
    if unplaceable(ranks, topo):
        test.skip(f"partition {test.current_partition.fullname}: CPU count unknown, so "
                  f"{test.rank_count or ranks} ranks cannot be placed: give the partition a "
                  "`processor` in its site config (hpcval.node.topology.processor_info()) or "
                  "enable ReFrame's remote_detect")
    assert ranks is not None
    placed = layout(ranks, nodes, rank_count=test.rank_count,
                    ranks_per_node=test.ranks_per_node)
    test.num_tasks = placed.num_tasks
    if placed.num_tasks_per_node is not None:
        test.num_tasks_per_node = placed.num_tasks_per_node


def copy_to_job(test: Any) -> None:
    """The test's task counts into its job: ReFrame copies them only when it
    writes the script, and a launch line written before needs them now."""
    test.job.num_tasks = test.num_tasks
    test.job.num_tasks_per_node = test.num_tasks_per_node
