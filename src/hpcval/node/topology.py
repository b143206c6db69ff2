"""Processor topology of a partition: CPUs, cores, sockets and the last-level
cache, which decide rank counts and the cache-cold buffer size.

ReFrame detects a partition's processor only where both its scheduler and its
launcher are ``local``; a workstation launching with ``mpirun`` is left
unknown. hpcval fills the gap: where the partition's jobs run on this host
(``local`` scheduler) it detects the host with ReFrame's own detection
(:func:`reframe.utility.cpuinfo.cpuinfo`, from ``/sys`` and the CPU), and
what the site config says about the processor wins over what is detected.
For a partition on other nodes, the site config's ``processor`` (or ReFrame's
``remote_detect``) is the source; :func:`processor_info` gives a site config
the dictionary to put there.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Topology:
    """What hpcval needs to know of a node's processor (``None``: unknown)."""

    num_cpus: int | None
    num_cores: int | None = None
    num_sockets: int | None = None
    llc_bytes: int | None = None
    source: str = "unknown"
    #: Last-level cache of the whole node: every instance of the highest cache
    #: level together (e.g. one L3 per socket or per CCX), what STREAM's
    #: "arrays >= 4x the caches" rule is about.
    llc_total_bytes: int | None = None

    @property
    def known(self) -> bool:
        return bool(self.num_cpus)

    def describe(self) -> str:
        parts = [f"{self.num_cpus or '?'} CPU(s)"]
        if self.llc_bytes:
            parts.append(f"last-level cache {self.llc_bytes // 2**20} MiB")
        return f"{', '.join(parts)} ({self.source})"


def _cache_level(cache: dict[str, Any]) -> int:
    match = re.fullmatch(r"L(\d+)", str(cache.get("type", "")))
    return int(match.group(1)) if match else 0


def total_last_level_cache(caches: list[dict[str, Any]]) -> int | None:
    """Bytes of last-level cache of a node from ReFrame's ``topology.caches``
    (read from sysfs by :func:`reframe.utility.cpuinfo.cpuinfo`): every entry
    of the highest level, its size times its instances (``cpusets``; one where
    a site config lists none); ``None`` without caches."""
    sized = [c for c in caches if c.get("size")]
    if not sized:
        return None
    top = max(_cache_level(c) for c in sized)
    return sum(int(c["size"]) * max(len(c.get("cpusets") or []), 1)
               for c in sized if _cache_level(c) == top)


def of_processor(info: dict[str, Any] | None, source: str = "site config") -> Topology:
    """A topology from a ReFrame processor description (possibly partial)."""
    info = info or {}
    topo = info.get("topology") or {}
    caches = [c.get("size", 0) for c in topo.get("caches", []) if c.get("size")]
    return Topology(
        num_cpus=info.get("num_cpus") or None,
        num_cores=len(topo.get("cores", [])) or None,
        num_sockets=info.get("num_sockets") or None,
        llc_bytes=max(caches) if caches else None,
        source=source if info else "unknown",
        llc_total_bytes=total_last_level_cache(topo.get("caches", [])),
    )


@functools.cache
def processor_info() -> dict[str, Any]:
    """This host's processor as ReFrame describes it (a site config may use it
    as a partition's ``processor``); only the CPU count where ReFrame's
    detection fails."""
    try:
        from reframe.utility.cpuinfo import cpuinfo

        info = dict(cpuinfo())
    except Exception:  # noqa: BLE001 - any failure of the detection: fall back
        info = {}
    if not info.get("num_cpus"):
        info["num_cpus"] = len(os.sched_getaffinity(0)) or os.cpu_count() or 1
    return info


def this_host() -> Topology:
    """The topology of the host this process runs on."""
    return of_processor(processor_info(), "detected on this host")


def merged(configured: Topology, detected: Topology) -> Topology:
    """``configured`` where it knows, ``detected`` for the rest."""
    if not configured.known and configured.llc_bytes is None:
        return detected
    return Topology(
        num_cpus=configured.num_cpus or detected.num_cpus,
        num_cores=configured.num_cores or detected.num_cores,
        num_sockets=configured.num_sockets or detected.num_sockets,
        llc_bytes=configured.llc_bytes or detected.llc_bytes,
        llc_total_bytes=configured.llc_total_bytes or detected.llc_total_bytes,
        source=f"{configured.source}, completed from {detected.source}",
    )


def of_partition(partition: Any) -> Topology:
    """The topology of a ReFrame partition's nodes: its processor info, and for
    a partition whose jobs run on this host what this host is."""
    configured = of_processor(getattr(partition.processor, "info", None))
    if partition.scheduler.registered_name == "local":
        if configured.known and configured.llc_bytes:
            return configured
        return merged(configured, this_host())
    return configured
