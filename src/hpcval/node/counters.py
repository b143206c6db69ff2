"""A node's cumulative error counters, read passively from ``/sys`` and ``/proc``.

:func:`read_counters` gives ``{name: count}``, names ``/``-separated by
category, ``None`` for a counter that exists but cannot be read (a file
without permission, or an RDMA device's ``N/A (no PMA)``: it keeps no such
count):

- ``memory/edac/<mc>/ce``, ``.../ue``, ``.../ce_noinfo``, ``.../ue_noinfo``:
  corrected and uncorrected memory errors of each EDAC memory controller
  (``/sys/devices/system/edac/mc/mc*/{ce,ue}_count``, ``*_noinfo_count``);
- ``network/ib/<dev>/<port>/<counter>``: ``symbol_error``,
  ``link_error_recovery``, ``link_downed``, ``port_rcv_errors`` of each
  RDMA port (``/sys/class/infiniband/<dev>/ports/<port>/counters/``);
- ``network/nic/<iface>/rx_errors``, ``.../tx_errors``: each physical
  network interface, one with a ``device`` (``/sys/class/net/<iface>/
  statistics/``; ``lo``, veths, bridges and bonds left out: their names can
  differ from node to node by nature, and their errors are their devices');
- ``cpu/mce/exceptions/count``, ``cpu/mce/threshold/count``,
  ``cpu/mce/deferred/count``: machine-check exceptions, corrected-error
  threshold and deferred-error interrupts, summed over the CPUs (the ``MCE``,
  ``THR`` and ``DFR`` lines of ``/proc/interrupts``; x86 only).

A source the node does not have (no EDAC driver, no RDMA device) gives no
name. The counters are cumulative since boot: a rate needs two readings.
"""

from __future__ import annotations

import re
from pathlib import Path

#: RDMA port counters read (the link's health, not its traffic)
IB_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors")

#: ``/proc/interrupts`` lines read, by counter name
MCE_LINES = {"MCE": "exceptions", "THR": "threshold", "DFR": "deferred"}


def _count(path: Path) -> int | None:
    """The file's integer; None when it cannot be read or holds none."""
    try:
        return int(path.read_text().split()[0], 0)
    except (OSError, ValueError, IndexError):
        return None


def edac_counters(root: Path) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for mc in sorted((root / "sys/devices/system/edac/mc").glob("mc[0-9]*")):
        for name in ("ce", "ue", "ce_noinfo", "ue_noinfo"):
            path = mc / f"{name}_count"
            if path.exists():
                out[f"memory/edac/{mc.name}/{name}"] = _count(path)
    return out


def ib_counters(root: Path) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for dev in sorted((root / "sys/class/infiniband").glob("*")):
        for port in sorted((dev / "ports").glob("*")):
            for name in IB_COUNTERS:
                path = port / "counters" / name
                if path.exists():
                    out[f"network/ib/{dev.name}/{port.name}/{name}"] = _count(path)
    return out


def nic_counters(root: Path) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for iface in sorted((root / "sys/class/net").glob("*")):
        if iface.name == "lo" or not (iface / "device").exists():
            continue  # virtual: veths, bridges, bonds (what they sit on is counted)
        for name in ("rx_errors", "tx_errors"):
            path = iface / "statistics" / name
            if path.exists():
                out[f"network/nic/{iface.name}/{name}"] = _count(path)
    return out


def mce_counters(root: Path) -> dict[str, int | None]:
    """Machine-check lines of ``/proc/interrupts``, summed over the CPUs."""
    path = root / "proc/interrupts"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError:
        return {f"cpu/mce/{name}/count": None for name in MCE_LINES.values()}
    out: dict[str, int | None] = {}
    for line in text.splitlines():
        m = re.match(r"\s*([A-Z]{3}):((?:\s+\d+)+)", line)
        if m and m.group(1) in MCE_LINES:
            out[f"cpu/mce/{MCE_LINES[m.group(1)]}/count"] = sum(
                int(v) for v in m.group(2).split())
    return out


def read_counters(root: Path = Path("/")) -> dict[str, int | None]:
    """Every counter of the module's doc this node has; never raises (a
    source that fails as a whole gives its counters as far as they were read)."""
    out: dict[str, int | None] = {}
    for read in (edac_counters, ib_counters, nic_counters, mce_counters):
        try:
            out.update(read(root))
        except Exception:  # noqa: BLE001 - a reader never raises; the next reading has it
            continue
    return out
