"""The placement policy (:mod:`hpcval.rfm.placement`): how many ranks a check
runs on how many nodes, and that nothing else decides it."""

from __future__ import annotations

from pathlib import Path

import pytest
from reframe.core.exceptions import ReframeError

from hpcval.node.topology import Topology
from hpcval.rfm import placement
from hpcval.rfm.placement import Layout, fits, layout, node_count, ranks_on, unplaceable
from hpcval.site import checks

ROOT = Path(__file__).resolve().parents[2]
RFM = ROOT / "src" / "hpcval" / "rfm"

#: Every directory of check files: the checks, the base tests, the fault checks.
CHECK_DIRS = (ROOT / "reframe-checks", RFM, ROOT / "tests" / "faults" / "checks")

FOUR = Topology(num_cpus=4, num_cores=2)
UNKNOWN = Topology(num_cpus=None)


def test_nodes() -> None:
    assert node_count(1, []) == 1
    assert node_count(3, ["internode"]) == 3
    assert node_count("internode", ["internode"]) == 2
    assert node_count("internode", []) == 1
    with pytest.raises(ReframeError, match="nodes must be a number or 'internode'"):
        node_count("two", [], "x_check")


@pytest.mark.parametrize(("rank_count", "nodes", "kwargs", "ranks"), [
    (2, 1, {}, 2),                                  # a number is the total
    (None, 1, {}, 1),                               # unset: one
    ("node", 1, {}, 4),                             # every CPU
    ("node", 2, {}, 8),                             # of every node
    ("node", 1, {"rank_multiple": 3}, 3),           # a multiple of rank_multiple
    ("core", 1, {"cores": 2}, 2),                   # every core (WRF CONUS)
    ("core", 2, {"cores": 2}, 4),
    ("core", 2, {}, 2),                             # cores unknown: one per node
    ("core", 2, {"cores": 2, "ranks_per_node": 3}, 6),  # ranks_per_node wins
    (2, 2, {"ranks_per_node": 1}, 2),
])
def test_ranks(rank_count, nodes, kwargs, ranks) -> None:
    assert ranks_on(rank_count, FOUR, nodes, **kwargs) == ranks


def test_ranks_on_a_small_or_unknown_node() -> None:
    assert ranks_on("node", Topology(num_cpus=1), 1) == 2  # at least two
    assert ranks_on("node", UNKNOWN, 1) is None
    assert unplaceable(None, UNKNOWN) and unplaceable(3, UNKNOWN)
    assert not unplaceable(2, UNKNOWN) and not unplaceable(8, FOUR)
    with pytest.raises(ReframeError, match="rank_count must be a number, 'node' or 'core'"):
        ranks_on("all", FOUR, 1, check="x_check")


def test_layout_sets_ranks_per_node_only_where_the_policy_counts_them() -> None:
    assert layout(2, 1) == Layout(2, None)          # -S num_tasks_per_node=1 is kept
    assert layout(8, 2) == Layout(8, 4)
    assert layout(2, 1, rank_count="core") == Layout(2, 2)
    assert layout(3, 1, ranks_per_node=3) == Layout(3, 3)


def test_a_case_fits_the_cpus_of_its_nodes() -> None:
    assert fits(4, FOUR, 1) and fits(8, FOUR, 2) and fits(None, FOUR, 1)
    assert not fits(5, FOUR, 1)
    assert fits(2, Topology(num_cpus=1), 1)         # two ranks always fit
    assert fits(64, UNKNOWN, 1)                     # unknown: left to setup


def test_only_placement_writes_the_task_layout() -> None:
    """No check file or base test sets ``num_tasks``, ``num_tasks_per_node``
    or ``num_cpus_per_task`` (on the test or its job): it states its needs
    (``rank_count``, ``nodes``, ``ranks_per_node``) and placement decides."""
    own = RFM / "placement.py"
    writes = [(f, line, name) for f, line, name in checks.assignments(*CHECK_DIRS)
              if name in placement.TASK_ATTRIBUTES]
    others = [f"{f.relative_to(ROOT)}:{line}: sets {name}" for f, line, name in writes
              if f != own]
    assert not others, "set through hpcval.rfm.placement instead:\n" + "\n".join(others)
    assert {name for f, _, name in writes if f == own} >= {"num_tasks", "num_tasks_per_node"}


def test_the_walk_sees_every_way_of_assigning(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text(
        "class a_check:\n"
        "    num_tasks = 2\n"
        "    def f(self):\n"
        "        self.num_tasks_per_node = 1\n"
        "        self.job.num_tasks = 3\n"
        "        self.num_cpus_per_task += 1\n"
        "        a, self.b = 1, 2\n"
        "        setattr(self, 'c', 1)\n")
    names = [(line, name) for _, line, name in checks.assignments(tmp_path)]
    assert sorted(names) == [(2, "num_tasks"), (4, "num_tasks_per_node"), (5, "num_tasks"),
                             (6, "num_cpus_per_task"), (7, "a"), (7, "b"), (8, "c")]
