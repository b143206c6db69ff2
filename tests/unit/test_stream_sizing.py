"""STREAM array sizing: the node's last-level cache from its topology
(hpcval.node.topology, ReFrame's cache description) and STREAM's >= 4x rule
(hpcval.rfm.stream)."""

from __future__ import annotations

import os

from hpcval.node.topology import merged, of_processor, this_host, total_last_level_cache
from hpcval.rfm.stream import array_elements

MIB = 1 << 20


def cache(level: int, size: int, cpusets: list[str] | None) -> dict:
    entry: dict = {"type": f"L{level}", "size": size, "linesize": 64, "associativity": 16}
    if cpusets is not None:
        entry["cpusets"] = cpusets
    return entry


def test_this_machines_layout() -> None:
    """The 2-core VM this was written on, as ReFrame's detection describes it:
    private L1/L2, one 32 MiB L3 shared by both CPUs."""
    caches = [cache(2, MIB, ["0x1", "0x2"]), cache(1, 32 * 1024, ["0x1", "0x2"]),
              cache(3, 32 * MIB, ["0x3"])]
    assert total_last_level_cache(caches) == 32 * MIB
    assert array_elements(32 * MIB) == 16_777_216  # 128 MiB of doubles


def test_two_sockets_add_their_caches() -> None:
    caches = [cache(3, 16 * MIB, ["0xf", "0xf0"]), cache(2, MIB, [hex(1 << i) for i in range(8)])]
    topo = of_processor({"num_cpus": 8, "topology": {"caches": caches}})
    assert topo.llc_total_bytes == 32 * MIB and topo.llc_bytes == 16 * MIB


def test_highest_level_wins_over_a_larger_lower_level() -> None:
    # a large private L2 beside a small shared L3: the L3 is the last level
    caches = [cache(2, 4 * MIB, [hex(1 << i) for i in range(4)]), cache(3, 2 * MIB, ["0xf"])]
    assert total_last_level_cache(caches) == 2 * MIB


def test_site_config_caches_without_cpusets_count_once() -> None:
    assert total_last_level_cache([cache(3, 8 * MIB, None)]) == 8 * MIB


def test_no_caches() -> None:
    assert total_last_level_cache([]) is None
    assert of_processor({"num_cpus": 4}).llc_total_bytes is None
    assert of_processor(None).llc_total_bytes is None


def test_configured_topology_completed_with_detected_caches() -> None:
    detected = of_processor({"num_cpus": 2, "topology": {"caches": [cache(3, 32 * MIB, ["0x3"])]}},
                            "detected on this host")
    full = merged(of_processor({"num_cpus": 4}), detected)
    assert full.num_cpus == 4 and full.llc_total_bytes == 32 * MIB


def test_this_host_has_a_last_level_cache_where_sysfs_lists_one() -> None:
    topo = this_host()
    if os.path.isdir("/sys/devices/system/cpu/cpu0/cache"):
        assert topo.llc_total_bytes is not None and topo.llc_bytes is not None
        assert topo.llc_total_bytes >= topo.llc_bytes


def test_array_size_is_whole_mib_and_at_least_four_times() -> None:
    size = 40 * MIB + 123
    elements = array_elements(size)
    assert elements * 8 >= 4 * size and (elements * 8) % MIB == 0
    assert array_elements(MIB, element_bytes=4) == MIB
