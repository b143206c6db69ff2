"""The sizing policy (hpcval.node.sizing) on recorded and constructed topologies of
real servers (tests/data/topology/, ReFrame's processor JSON): every rule
holds on every node, memory use stays bounded, time limits grow with the size,
and a rule that cannot be met says so."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hpcval.node import sizing
from hpcval.node.sizing import GIB, MIB, Node, SizingError
from hpcval.node.topology import of_processor

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"

#: file -> (node memory, CPUs, last-level cache of the whole node), as the
#: README states them
NODES = {
    "vm-2core-xeon-480mib-l3.json": (int(23.5 * GIB), 2, 480 * MIB),
    "vm-2core-epyc-32mib-l3.json": (24_684_096 * 1024, 2, 32 * MIB),
    "vm-16core-xeon-300mib-l3.json": (125 * GIB, 16, 300 * MIB),
    "amd-2x64-epyc-7763-smt.json": (512 * GIB, 256, 512 * MIB),
    "intel-2x56-xeon-8480-noht.json": (512 * GIB, 112, 210 * MIB),
}


def node(name: str) -> Node:
    info = json.loads((DATA / name).read_text())
    return Node.of(of_processor(info, f"tests/data/topology/{name}"), NODES[name][0])


@pytest.mark.parametrize("name", sorted(NODES))
def test_recorded_topologies_give_cpus_and_the_whole_nodes_cache(name: str) -> None:
    n = node(name)
    assert (n.cpus, n.llc_bytes) == NODES[name][1:]


@pytest.mark.parametrize("budget", sizing.BUDGETS)
@pytest.mark.parametrize("name", sorted(NODES))
def test_every_rule_holds_on_every_node(name: str, budget: str) -> None:
    n = node(name)
    ranks = n.cpus
    allowed = sizing.MEMORY_SHARE * n.mem_bytes

    stream = sizing.stream(n, budget)
    array = stream.params["array_size"] * 8
    assert array >= 4 * n.llc_bytes and array % MIB == 0
    assert 3 * array <= allowed

    triad = sizing.triad(n, ranks, budget)
    assert triad.params["triad_n"] * 8 * ranks >= 4 * n.llc_bytes
    assert triad.footprint_bytes <= allowed

    sten = sizing.stencil(n, ranks, budget)
    grid = sten.params["global_grid"]
    fields = 16 * math.prod(grid)
    # per rank: its two fields >= 4x its share of the cache
    assert fields / ranks >= 4 * n.llc_bytes / ranks
    assert sten.params["triad_n"] * 8 * ranks >= 4 * n.llc_bytes
    assert sten.footprint_bytes <= allowed
    assert grid[2] % 16 == 0 and grid[0] == grid[1] and grid[0] & (grid[0] - 1) == 0

    out = sizing.output(n, budget, free=10 * n.mem_bytes)
    file_bytes = 8 * math.prod(out.params["global_grid"])
    assert out.footprint_bytes <= allowed
    if budget == "full":
        # result files of hundreds of MB to GB ("SMBDirect BMT まとめ")
        assert 256 * MIB <= file_bytes <= 4.5 * GIB
    else:
        assert 32 * MIB <= file_bytes <= 64 * MIB
    assert "fsync" in out.reason

    rd = sizing.read(n, min(ranks, 8), budget, free=10 * n.mem_bytes)
    assert rd.params["read_mb"] >= 64 and "page cache" in rd.reason

    ior = sizing.ior(n, ranks, 1, budget, free=10 * n.mem_bytes)
    block = int(ior.params["block_size"].rstrip("m")) * MIB
    if budget == "full":
        # more than the node's memory: the read-back cannot come from its page cache
        assert block * ranks > n.mem_bytes
    else:
        assert block == 64 * MIB and "may come from the page cache" in ior.reason

    hpcg = sizing.hpcg(n, ranks, budget)
    nx = hpcg.params["local_grid"][0]
    assert nx % 8 == 0 and nx >= 16
    if budget == "full":
        assert hpcg.footprint_bytes >= sizing.HPCG_MEMORY_SHARE * n.mem_bytes
        assert hpcg.footprint_bytes <= allowed and hpcg.params["run_time"] == 1800


def test_the_issues_16_core_server_gets_a_grid_beyond_its_300_mib_cache() -> None:
    # the fixed 256 x 256 x 128 grid (2 x 64 MiB) sat in this cache and the stencil
    # beat the triad 2.6x; the sized grid holds 4x the cache
    n = node("vm-16core-xeon-300mib-l3.json")
    size = sizing.stencil(n, 16, "quick")
    assert size.params["global_grid"] == (512, 512, 304)
    assert 16 * math.prod(size.params["global_grid"]) >= 1200 * MIB
    assert "300 MiB" in size.reason and "19 MiB of 300 MiB over 16 ranks" in size.reason


def test_full_is_larger_and_takes_longer_than_quick() -> None:
    n = node("amd-2x64-epyc-7763-smt.json")
    for rule in (lambda b: sizing.stream(n, b), lambda b: sizing.output(n, b, free=None),
                 lambda b: sizing.ior(n, 256, 1, b), lambda b: sizing.hpcg(n, 256, b)):
        quick, full = rule("quick"), rule("full")
        assert full.footprint_bytes > quick.footprint_bytes
        assert full.time_limit_s >= quick.time_limit_s
    assert sizing.stream(n, "full").params["array_size"] * 8 >= 8 * n.llc_bytes


def test_time_limits_grow_with_the_size() -> None:
    small = Node(16, 32 * MIB, 64 * GIB)
    big = Node(16, 1024 * MIB, 1024 * GIB)
    assert sizing.stream(big, "quick").time_limit_s > sizing.stream(small, "quick").time_limit_s
    assert sizing.stream(small, "quick").time_limit_s == 600  # the check's default
    assert sizing.ior(big, 16, 1, "full").time_limit_s > sizing.ior(small, 16, 1,
                                                                     "full").time_limit_s


def test_a_rule_that_does_not_fit_in_memory_is_an_error_naming_the_sizes() -> None:
    n = Node(64, 1024 * MIB, 8 * GIB)  # 3 x 4 GiB arrays > half of 8 GiB
    with pytest.raises(SizingError, match=r"3 x 4 GiB .* 1 GiB last-level cache.* 8 GiB"):
        sizing.stream(n, "quick")
    # full falls back to 4x where 8x does not fit
    n = Node(64, 256 * MIB, 8 * GIB)
    assert sizing.stream(n, "full").params["array_size"] * 8 == 4 * 256 * MIB


def test_unknown_cache_keeps_the_defaults_and_says_why() -> None:
    n = Node(4, None, 16 * GIB)
    size = sizing.stencil(n, 4, "quick")
    assert size.params["global_grid"] == (256, 256, 128)
    assert "last-level cache unknown" in size.reason
    with pytest.raises(SizingError, match="last-level cache unknown"):
        sizing.stream(n, "quick")


def test_little_free_space_bounds_the_files_and_says_so() -> None:
    n = node("amd-2x64-epyc-7763-smt.json")
    out = sizing.output(n, "full", free=4 * GIB)
    assert 8 * math.prod(out.params["global_grid"]) <= 4 * GIB / 4
    assert "free space" in out.reason
    # never below the budget's least size, and never the disk filled: a disk
    # too small skips the case, saying so
    with pytest.raises(SizingError, match="do not fit in the 1 MiB usable"):
        sizing.output(n, "quick", free=1 * MIB)
    with pytest.raises(SizingError, match="do not fit"):
        sizing.read(n, 4, "quick", free=1 * MIB)
    with pytest.raises(SizingError, match="do not fit"):
        sizing.ior(n, 4, 1, "quick", free=100 * MIB)
    ior = sizing.ior(n, 128, 1, "full", free=100 * GIB)
    assert "may come from the page cache" in ior.reason


def test_budget_comes_from_the_run_then_the_environment_then_the_site() -> None:
    assert sizing.resolve_budget(None, None, None) == "quick"
    assert sizing.resolve_budget(None, None, "full") == "full"
    assert sizing.resolve_budget(None, "quick", "full") == "quick"
    assert sizing.resolve_budget("full", "quick", None) == "full"
    with pytest.raises(SizingError, match=r"partition x extras budget: 'fast' is not a budget"):
        sizing.resolve_budget(None, "", "fast", "partition x extras")


@pytest.mark.parametrize(("text", "value"), [("512GiB", 512 * GIB), ("512 GB", 512 * 10**9),
                                             (1024, 1024), ("64m", 64 * MIB)])
def test_memory_sizes_are_read_with_units(text: object, value: int) -> None:
    assert sizing.parse_bytes(text) == value


@pytest.mark.parametrize("bad", ["lots", "-5GiB", True, "12 parsecs"])
def test_a_wrong_memory_size_names_the_key(bad: object) -> None:
    with pytest.raises(SizingError, match="mem_per_node"):
        sizing.parse_bytes(bad)


def test_host_memory_reads_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683212 kB\nMemFree:  1 kB\n")
    assert sizing.host_memory(meminfo) == 24683212 * 1024
    assert sizing.host_memory(tmp_path / "absent") is None


def test_a_run_keeps_a_margin_of_free_space(tmp_path) -> None:
    """What a check may write is the free space less a margin (the larger of
    256 MiB and 5 % of the file system): never the disk written to 0 bytes."""
    import os

    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    margin = sizing.disk_margin(tmp_path)
    assert margin >= sizing.DISK_MARGIN_BYTES
    assert margin >= int(0.05 * st.f_blocks * st.f_frsize)
    usable = sizing.usable_bytes(tmp_path / "not" / "yet")
    assert usable is not None and 0 <= usable <= max(0, free - margin) + 64 * MIB
