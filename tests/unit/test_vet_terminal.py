"""The terminal text of `hpcval vet` (hpcval.vet.terminal): the whole per-node
table up to 64 nodes; above, the result, the culprits with their evidence, the
unmeasured and one line per figure, while vet.txt keeps one line per node."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hpcval.vet import report, terminal
from hpcval.vet.judge import FIGURES
from hpcval.vet.simulate import simulated_result


@pytest.fixture(scope="module")
def big() -> dict[str, Any]:
    result = simulated_result(512, seed=1)
    result["unmeasured"] = [{"kind": "node", "name": "n005",
                             "cause": "triad: the task was killed (signal 9)"}]
    result["verdict"]["notes"] = [f"n{i:03d}: no CPU frequency samples" for i in range(30)]
    return result


def test_small_partitions_print_the_whole_table() -> None:
    result = simulated_result(64, seed=1)
    assert terminal.text(result) == report.text(result)
    assert sum(1 for line in terminal.text(result).splitlines()
               if line.split(" ", 1)[0] in result["verdict"]["nodes"]) == 64


def test_large_partitions_print_the_result_not_a_line_per_node(big: dict[str, Any]) -> None:
    out = terminal.text(big)
    lines = out.splitlines()
    assert len(lines) < 60
    assert lines[0] == report.head_line(big)
    # no per-node table line (a line that starts with a node's name)
    assert not [line for line in lines if line.split(" ", 1)[0] in big["verdict"]["nodes"]]
    # every culprit with its evidence, the unmeasured with their cause
    culprits = big["verdict"]["culprits"]
    assert culprits
    for c in culprits:
        assert f"  {c['kind']:<6} {c['evidence']}" in lines
    assert "Unmeasured (1): the vetting is incomplete (exit 4)" in lines
    assert "  node   n005: triad: the task was killed (signal 9)" in lines
    # one line per figure measured, with median, spread, worst and best node
    for fig in ("pingpong_bw_1MiB", "triad_bw", "shm_pingpong_bw_1MiB", "cpu_mhz"):
        line = next(x for x in lines if x.startswith(f"  {FIGURES[fig].label}: "))
        assert "median" in line and "spread" in line and "worst" in line and "best" in line
    assert "  nodes: 476 ok, 35 named, 1 unmeasured, 0 not measured (Slurm)" in lines
    # notes: the first 20, and how many more
    assert "Note: n019: no CPU frequency samples" in lines
    assert "Note: n020: no CPU frequency samples" not in lines
    assert "Note: ... 10 more notes in vet.txt" in lines


def test_the_figure_line_names_the_worst_node() -> None:
    result = copy.deepcopy(simulated_result(128, seed=3))
    table = result["verdict"]["table"]
    table["n017"]["triad_bw"]["value"] = 1.0  # the lowest triad of the partition
    line = terminal.figure_line(result, "triad_bw")
    assert line is not None and "worst n017 1," in line
    lat = terminal.figure_line(result, "shm_pingpong_lat_8B")
    assert lat is not None and lat.endswith("shown, not judged")


def test_vet_txt_keeps_one_line_per_node(big: dict[str, Any]) -> None:
    full = report.text(big)
    nodes = set(big["verdict"]["nodes"])
    assert sum(1 for line in full.splitlines() if line.split(" ", 1)[0] in nodes) == 512
    assert all(f"Note: {n}" in full for n in big["verdict"]["notes"])
    assert terminal.text(big, table_up_to=512) == full
