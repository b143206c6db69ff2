"""Simulated fingerprints and error counters of a partition, with known faults.

Every node gets the same fingerprint (the shape the probe prints: category ->
key -> string) and two readings of its error counters an interval apart. A
healthy node's counters rise as healthy hardware's do: corrected ECC errors
on a few nodes (Poisson, ``ce_rate`` per hour on ``ce_share`` of the nodes),
the odd IB symbol error (``symbol_rate`` per hour on ``symbol_share``). Then
``share`` of the nodes (at least one) carry each fault of :data:`FAULTS`, one
fault per node, and the expected finding code of each faulty node is returned
(:func:`partition`), so that a test or a bench can count what the judging
names and what it misses.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

BASE: dict[str, dict[str, str]] = {
    "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480+", "microcode": "0x2b000590",
            "cores": "112", "sockets": "2", "threads_per_core": "1", "numa_nodes": "2",
            "avx512": "yes", "amx": "yes"},
    "memory": {"total_kb": "527958016", "dimm_count": "16", "dimm_size": "32 GB",
               "dimm_speed": "4800 MT/s", "edac_dimms": "16"},
    "firmware": {"bios_vendor": "Dell Inc.", "bios_version": "2.3.5",
                 "bios_date": "05/10/2024"},
    "kernel": {"release": "5.14.0-427.el9.x86_64",
               "cmdline": "ro crashkernel=auto intel_iommu=on", "modules": "ib_core,mlx5_core"},
    "network": {"ib/mlx5_0/model": "MT4129", "ib/mlx5_0/fw": "28.39.1002",
                "ib/mlx5_0/1/rate": "400 Gb/sec (4X NDR)", "ib/mlx5_0/1/state": "ACTIVE",
                "eth0/mtu": "9000"},
    "software": {"mpi": "Intel(R) MPI Library 2021.13", "spack/imb": "abcdef1",
                 "spack/cfdio": "1234567"},
    "mounts": {"/home": "nfs4", "/scratch": "lustre"},
}

COUNTERS = ["memory/edac/mc0/ce", "memory/edac/mc0/ue", "memory/edac/mc1/ce",
            "memory/edac/mc1/ue", "network/ib/mlx5_0/1/symbol_error",
            "network/ib/mlx5_0/1/link_error_recovery", "network/ib/mlx5_0/1/link_downed",
            "network/ib/mlx5_0/1/port_rcv_errors", "network/nic/eth0/rx_errors",
            "network/nic/eth0/tx_errors", "cpu/mce/0/count", "cpu/mce/1/count"]

#: fault -> the code it must be named with
FAULTS: dict[str, str] = {
    "cpu": "HC-UNI-CPU", "memory": "HC-UNI-MEMORY", "firmware": "HC-UNI-FIRMWARE",
    "kernel": "HC-UNI-KERNEL", "network": "HC-UNI-NETWORK", "software": "HC-UNI-SOFTWARE",
    "mounts": "HC-UNI-MOUNTS", "unreadable": "HC-UNI-UNKNOWN",
    "ecc_ue": "HC-ECC-UE", "ecc_ce": "HC-ECC-CE", "ib_symbol": "HC-IB-SYMBOL",
    "ib_recovery": "HC-IB-RECOVERY", "ib_downed": "HC-IB-DOWNED", "ib_rcv": "HC-IB-RCVERR",
    "nic": "HC-NIC-ERR", "mce": "HC-MCE", "counter_null": "HC-CNT-UNKNOWN",
}


@dataclass
class Partition:
    fingerprints: dict[str, dict[str, dict[str, str]]]
    unknown: dict[str, dict[str, list[str]]]
    now: dict[str, dict[str, Any]]
    previous: dict[str, dict[str, Any]]
    #: node -> the code it must be named with
    expected: dict[str, str] = field(default_factory=dict)


def _fault(kind: str, fp: dict[str, dict[str, str]], unknown: dict[str, list[str]],
           now: dict[str, Any]) -> None:
    if kind == "cpu":
        fp["cpu"]["microcode"] = "0x2b000461"
    elif kind == "memory":  # one DIMM fewer: total -1/16, DIMM and EDAC lists
        fp["memory"].update(total_kb="494960640", dimm_count="15", edac_dimms="15")
    elif kind == "firmware":
        fp["firmware"].update(bios_version="2.1.0", bios_date="11/02/2023")
    elif kind == "kernel":
        fp["kernel"]["cmdline"] += " nosmt"
    elif kind == "network":
        fp["network"]["ib/mlx5_0/fw"] = "28.36.1010"
    elif kind == "software":
        fp["software"]["spack/imb"] = "9f8e7d6"
    elif kind == "mounts":
        fp["mounts"]["/scratch"] = "nfs4"
    elif kind == "unreadable":
        del fp["memory"]["dimm_speed"]
        unknown.setdefault("memory", []).append("dimm_speed")
    elif kind == "ecc_ue":
        now["memory/edac/mc1/ue"] += 1
    elif kind == "ecc_ce":
        now["memory/edac/mc0/ce"] += 500
    elif kind == "ib_symbol":
        now["network/ib/mlx5_0/1/symbol_error"] += 1000
    elif kind == "ib_recovery":
        now["network/ib/mlx5_0/1/link_error_recovery"] += 3
    elif kind == "ib_downed":
        now["network/ib/mlx5_0/1/link_downed"] += 1
    elif kind == "ib_rcv":
        now["network/ib/mlx5_0/1/port_rcv_errors"] += 200
    elif kind == "nic":
        now["network/nic/eth0/rx_errors"] += 500
    elif kind == "mce":
        now["cpu/mce/1/count"] += 2
    elif kind == "counter_null":
        now["network/ib/mlx5_0/1/symbol_error"] = None
    else:
        raise ValueError(kind)


def partition(n: int, share: float = 0.001, hours: float = 1.0, seed: int = 0,
              ce_rate: float = 2.0, ce_share: float = 0.05, symbol_rate: float = 0.5,
              symbol_share: float = 0.02) -> Partition:
    rng = np.random.default_rng(seed)
    nodes = [f"node{i:05d}" for i in range(n)]
    t0, t1 = 1.8e9, 1.8e9 + hours * 3600
    base_counts = rng.integers(0, 50, size=(n, len(COUNTERS)))
    base_counts[:, [1, 3]] = 0  # no uncorrected errors on a healthy node
    ce = rng.poisson(ce_rate * hours, n) * (rng.random(n) < ce_share)
    sym = rng.poisson(symbol_rate * hours, n) * (rng.random(n) < symbol_share)
    fps: dict[str, dict[str, dict[str, str]]] = {}
    unknown: dict[str, dict[str, list[str]]] = {}
    now: dict[str, dict[str, Any]] = {}
    prev: dict[str, dict[str, Any]] = {}
    for i, node in enumerate(nodes):
        fps[node] = {c: dict(kv) for c, kv in BASE.items()}
        unknown[node] = {}
        before = dict(zip(COUNTERS, base_counts[i].tolist(), strict=True))
        after = dict(before)
        after["memory/edac/mc0/ce"] += int(ce[i])
        after["network/ib/mlx5_0/1/symbol_error"] += int(sym[i])
        prev[node] = {"time": t0, "values": before, "source": "vet simulated"}
        now[node] = {"time": t1, "values": after}
    per = max(1, round(share * n))
    faulty = rng.choice(n, size=per * len(FAULTS), replace=False)
    expected: dict[str, str] = {}
    for j, kind in enumerate(FAULTS):
        for i in faulty[j * per:(j + 1) * per]:
            node = nodes[int(i)]
            fps[node] = copy.deepcopy(fps[node])
            _fault(kind, fps[node], unknown[node], now[node]["values"])
            expected[node] = FAULTS[kind]
    return Partition(fps, unknown, now, prev, expected)
