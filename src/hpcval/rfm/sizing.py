"""The ReFrame side of :mod:`hpcval.node.sizing`: a mixin that gives a check its
budget, its node (topology, memory) and records the size it ran at. The node
and the ranks on it come from the placement policy
(:mod:`hpcval.rfm.placement`), so a problem is sized for the layout the job runs.

A base test with a size-dependent figure derives from :class:`SizedTest` and
sizes itself in one ``run_after("setup")`` hook::

    size = sizing.stencil(self.sizing_node(), self.sizing_ranks(), self.sizing_budget())
    self.apply_size(size)

:meth:`SizedTest.apply_size` records ``problem_size`` and ``size_reason``
(loggable, so they are in the run report and the HTML report shows them) and
raises the time limit to what the size needs. A rule that cannot be met (too
little memory) skips the case with the reason.
"""

from __future__ import annotations

import os
from typing import Any

import reframe as rfm
from reframe.core.builtins import variable

from hpcval.node import sizing
from hpcval.rfm import placement


class SizedTest(rfm.RegressionTestPlugin):
    """Budget, node and recorded size of a check (with :class:`hpcval.rfm.HpcvalTest`)."""

    #: ``quick`` or ``full`` (``-S budget=full``); unset: ``$HPCVAL_BUDGET``,
    #: then the partition's ``extras.budget``, else ``quick``. After setup:
    #: the budget the case ran with.
    #:
    #: :type: :class:`str` or :obj:`None`
    budget = variable(str, type(None), value=None, loggable=True)

    #: The problem size the case ran at, in words (:mod:`hpcval.node.sizing`).
    #:
    #: :type: :class:`str`
    problem_size = variable(str, value="", loggable=True)

    #: Why the case ran at that size: the rule and the node's figures.
    #:
    #: :type: :class:`str`
    size_reason = variable(str, value="", loggable=True)

    def sizing_budget(self) -> str:
        """The case's budget (:func:`hpcval.node.sizing.resolve_budget`); a wrong
        value fails the case naming where it came from."""
        part = self.current_partition
        self.budget = sizing.resolve_budget(
            self.budget, os.environ.get(sizing.BUDGET_ENV),
            part.extras.get(sizing.BUDGET_EXTRA), f"partition {part.fullname} extras")
        return self.budget

    def sizing_memory(self) -> int | None:
        """Memory of one node: the partition's ``extras.mem_per_node``, else,
        for a partition whose jobs run on this host, this host's."""
        part = self.current_partition
        configured = part.extras.get(sizing.MEMORY_EXTRA)
        if configured is not None:
            return sizing.parse_bytes(configured,
                                      f"partition {part.fullname} extras {sizing.MEMORY_EXTRA}")
        if part.scheduler.registered_name == "local":
            return sizing.host_memory()
        return None

    def sizing_node(self) -> sizing.Node:
        """One node of the job: its topology and memory."""
        return sizing.Node.of(placement.topology_of(self.current_partition),
                              self.sizing_memory())

    def sizing_ranks(self) -> int:
        """Ranks of the job on one node (:mod:`hpcval.rfm.placement`)."""
        nodes = placement.nodes_of(self)
        return max(1, int(placement.ranks_of(self) or 1) // max(1, nodes))

    def sized(self, rule: Any, *args: Any, **kwargs: Any) -> sizing.Size | None:
        """``rule(*args, **kwargs)``; where it cannot be met, the case is
        skipped with the reason and ``None`` returned."""
        try:
            return rule(*args, **kwargs)
        except sizing.SizingError as err:
            self.skip(f"problem size: {err}")  # type: ignore[attr-defined]
            return None

    def apply_size(self, size: sizing.Size) -> None:
        """Record *size* (``problem_size``, ``size_reason``) and raise the time
        limit to what it needs."""
        self.problem_size = f"{size.summary} [{size.budget}]"
        self.size_reason = size.reason
        current = self.time_limit
        seconds = current.total_seconds() if hasattr(current, "total_seconds") \
            else float(current or 0)
        if size.time_limit_s > seconds:
            self.time_limit = f"{size.time_limit_s}s"
