"""STREAM array sizing (hpcval.rfm.stream): last-level cache from ReFrame's
detected topology or from sysfs, and STREAM's >= 4x rule."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from hpcval.rfm.stream import array_elements, host_last_level_cache, total_last_level_cache

MIB = 1 << 20


def sysfs(root: Path, caches: dict[int, list[tuple[int, str, str, str]]]) -> Path:
    """A /sys/devices/system/cpu tree: cpu -> [(level, type, size, shared_cpu_list)]."""
    for cpu, entries in caches.items():
        for i, (level, kind, size, shared) in enumerate(entries):
            d = root / f"cpu{cpu}" / "cache" / f"index{i}"
            d.mkdir(parents=True)
            for name, value in (("level", level), ("type", kind), ("size", size),
                                ("shared_cpu_list", shared)):
                (d / name).write_text(f"{value}\n")
    return root


def test_this_machines_layout(tmp_path: Path) -> None:
    """The 2-core VM the corpus was recorded on: private L1/L2, one shared 32 MiB L3."""
    per_cpu = [(1, "Data", "32K", "{c}"), (1, "Instruction", "32K", "{c}"),
               (2, "Unified", "1024K", "{c}"), (3, "Unified", "32768K", "0-1")]
    tree = sysfs(tmp_path, {c: [(lv, k, s, sh.format(c=c)) for lv, k, s, sh in per_cpu]
                            for c in (0, 1)})
    assert host_last_level_cache(tree) == 32 * MIB
    assert array_elements(32 * MIB) == 16_777_216  # 128 MiB of doubles


def test_two_sockets_add_their_caches(tmp_path: Path) -> None:
    tree = sysfs(tmp_path, {0: [(3, "Unified", "16384K", "0-1")],
                            1: [(3, "Unified", "16384K", "0-1")],
                            2: [(3, "Unified", "16384K", "2-3")],
                            3: [(3, "Unified", "16384K", "2-3")]})
    assert host_last_level_cache(tree) == 32 * MIB


def test_no_sysfs_caches(tmp_path: Path) -> None:
    assert host_last_level_cache(tmp_path) is None


def test_reframe_topology() -> None:
    l3 = {"type": "L3", "size": 32 * MIB, "linesize": 64, "associativity": 16,
          "num_cpus": 8, "cpusets": ["0xff", "0xff00"]}
    l2 = {"type": "L2", "size": MIB, "linesize": 64, "associativity": 8, "num_cpus": 1,
          "cpusets": [hex(1 << i) for i in range(16)]}
    processor = SimpleNamespace(topology={"caches": [l2, l3]})
    assert total_last_level_cache(processor) == 64 * MIB
    assert total_last_level_cache(SimpleNamespace(topology=None)) is None


def test_array_size_is_whole_mib_and_at_least_four_times() -> None:
    cache = 40 * MIB + 123
    elements = array_elements(cache)
    assert elements * 8 >= 4 * cache and (elements * 8) % MIB == 0
    assert array_elements(MIB, element_bytes=4) == MIB
