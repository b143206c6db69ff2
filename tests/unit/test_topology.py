"""Topology: from a ReFrame processor description, and detected on this host."""

from __future__ import annotations

import os

from hpcval.node.topology import Topology, merged, of_processor, this_host


def test_of_processor_reads_cpus_cores_and_the_largest_cache() -> None:
    topo = of_processor({
        "num_cpus": 8, "num_sockets": 1,
        "topology": {"cores": ["0x3", "0xc", "0x30", "0xc0"],
                     "caches": [{"type": "L1", "size": 32768}, {"type": "L3", "size": 2**25},
                                {"type": "L2", "size": 2**20}]},
    })
    assert (topo.num_cpus, topo.num_cores, topo.num_sockets) == (8, 4, 1)
    assert topo.llc_bytes == 2**25 and topo.known


def test_partial_description_is_completed_from_detection() -> None:
    configured = of_processor({"num_cpus": 4})
    assert configured.llc_bytes is None
    full = merged(configured, Topology(2, 2, 1, 2**24, "detected on this host"))
    assert full.num_cpus == 4 and full.llc_bytes == 2**24
    assert "completed from detected on this host" in full.source
    assert not of_processor(None).known and of_processor({}).source == "unknown"


def test_this_host_is_detected() -> None:
    topo = this_host()
    assert topo.num_cpus == os.cpu_count()
    if os.path.isdir("/sys/devices/system/cpu/cpu0/cache"):
        assert topo.llc_bytes and topo.llc_bytes >= 2**16
