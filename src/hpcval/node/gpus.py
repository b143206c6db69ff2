"""A node's GPUs in ReFrame's own terms, from ``nvidia-smi --query-gpu``.

``hpcval site new`` asks ``nvidia-smi`` (or reads a recorded query with
``--gpus-csv``) and writes, for a partition with GPUs::

    "features": ["gpu", "nvidia"],
    "devices": [{"type": "gpu", "arch": "sm_90", "num_devices": 4}],
    "extras": partition_extras(SITE_DIR, gpu_model="NVIDIA H100 80GB HBM3",
                               gpu_memory_bytes=85520809984),

ReFrame's partition ``devices`` (``type``, ``arch``, ``num_devices``) is what
a test reads with ``current_partition.select_devices("gpu")``; the ``gpu``
feature is what GPU checks select with ``valid_systems = ["+gpu"]``, so a
partition without it gets no GPU test case. ``extras.gpu_l2_bytes`` is not
detected (``nvidia-smi`` does not report the L2 size): ``gpubench info``
prints it, and a site adds it by hand (docs/adding-a-gpu-partition.md);
checks sized from it assume :data:`ASSUMED_L2_BYTES` without it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcval.core.errors import EnvironmentFault, InputError, ParseError
from hpcval.parsers.nvidia_smi import QueryResult, parse_query_csv

#: Fields ``hpcval site new`` queries (``compute_cap`` needs a driver from 2021
#: on; without it the query is retried without that field).
QUERY_FIELDS = ("index", "name", "memory.total", "pci.bus_id", "compute_cap")

#: Partition feature of GPU partitions; GPU checks declare ``valid_systems = ["+gpu"]``.
GPU_FEATURE = "gpu"

#: Compute capability by model, where the query has no ``compute_cap`` (NVIDIA's
#: published list of CUDA GPUs); the first key found in the GPU's name wins.
COMPUTE_CAPABILITY = (
    ("GH200", "9.0"), ("H200", "9.0"), ("H100", "9.0"), ("B200", "10.0"), ("GB200", "10.0"),
    ("A100", "8.0"), ("A30", "8.0"), ("L40S", "8.9"), ("L40", "8.9"), ("L4", "8.9"),
    ("A40", "8.6"), ("A10", "8.6"), ("V100", "7.0"), ("P100", "6.0"),
    ("RTX 50", "12.0"), ("RTX 40", "8.9"), ("RTX 30", "8.6"),
)

#: L2 size assumed where the site declares none (``extras.gpu_l2_bytes``): an
#: upper bound, so arrays sized from it are large enough on any GPU listed above.
ASSUMED_L2_BYTES = 128 << 20


@dataclass(frozen=True)
class NodeGpus:
    """The GPUs of one node: one entry per model (a node rarely mixes them)."""

    models: tuple[tuple[str, str | None, int], ...]  # (name, arch, count)
    memory_bytes: int | None                        # the smallest GPU's memory

    @property
    def count(self) -> int:
        return sum(n for _, _, n in self.models)

    def devices(self) -> list[dict[str, Any]]:
        """ReFrame's partition ``devices``."""
        out: list[dict[str, Any]] = []
        for _, arch, count in self.models:
            entry: dict[str, Any] = {"type": "gpu", "num_devices": count}
            if arch:
                entry["arch"] = arch
            out.append(entry)
        return out

    def extras(self) -> dict[str, Any]:
        """The partition extras hpcval's GPU checks read."""
        extras: dict[str, Any] = {"gpu_model": ", ".join(name for name, _, _ in self.models)}
        if self.memory_bytes:
            extras["gpu_memory_bytes"] = self.memory_bytes
        return extras

    def partition_fields(self) -> dict[str, Any]:
        """``features``, ``devices`` and the GPU ``extras`` of a partition."""
        return {"features": [GPU_FEATURE, "nvidia"], "devices": self.devices(),
                "extras": self.extras()}


def arch_of(name: str, compute_cap: str | None) -> str | None:
    """``sm_XY`` from the compute capability ``X.Y`` (or the model's, by name)."""
    cap = compute_cap
    if not cap:
        cap = next((c for key, c in COMPUTE_CAPABILITY if key in name), None)
    if not cap:
        return None
    major, _, minor = cap.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return None
    return f"sm_{major}{minor}"


def node_gpus(query: QueryResult) -> NodeGpus:
    """A node's GPUs from its ``--query-gpu`` result (it must hold ``name``)."""
    if "name" not in query.fields:
        raise InputError(f"{query.source}: the query has no 'name' field: run nvidia-smi "
                         f"--query-gpu={','.join(QUERY_FIELDS)} --format=csv")
    counts: Counter[tuple[str, str | None]] = Counter()
    for row in query.rows:
        name = row["name"] or "unknown GPU"
        counts[(name, arch_of(name, row.get("compute_cap")))] += 1
    memory: int | None = None
    if "memory.total" in query.fields:
        unit = query.units.get("memory.total", "MiB")
        scale = {"MiB": 1 << 20, "GiB": 1 << 30}.get(unit)
        if scale is None:
            raise ParseError(f"{query.source}: memory.total in {unit!r}, not MiB")
        sizes = [query.number(i, "memory.total") for i in range(len(query.rows))]
        known = [int(s * scale) for s in sizes if s]
        memory = min(known) if known else None
    models = tuple((name, arch, n) for (name, arch), n in counts.items())
    return NodeGpus(models, memory)


def query_this_node(timeout: float = 30) -> NodeGpus | None:
    """This machine's GPUs, or ``None`` where ``nvidia-smi`` is absent or sees none."""
    program = shutil.which("nvidia-smi")
    if program is None:
        return None
    for fields in (QUERY_FIELDS, QUERY_FIELDS[:-1]):
        try:
            done = subprocess.run([program, f"--query-gpu={','.join(fields)}", "--format=csv"],
                                  capture_output=True, text=True, timeout=timeout, check=False)
        except (OSError, subprocess.SubprocessError) as err:
            raise EnvironmentFault(f"{program} --query-gpu did not run: {err}") from None
        if done.returncode == 0:
            try:
                return node_gpus(parse_query_csv(done.stdout, f"{program} --query-gpu"))
            except ParseError as err:
                if "no GPU row" in str(err):
                    return None
                raise
    return None  # a driver that answers no query: no GPU partition is written


def read_query(path: str | Path) -> NodeGpus:
    """A node's GPUs from a recorded ``nvidia-smi --query-gpu ... --format=csv`` file."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as err:
        raise InputError(f"{path}: cannot read the GPU query: {err.strerror}") from None
    try:
        return node_gpus(parse_query_csv(text, str(path)))
    except ParseError as err:
        raise InputError(str(err)) from None


def babelstream_array_elements(memory_bytes: int | None, l2_bytes: int | None,
                               word_bytes: int = 8) -> int:
    """Elements of each of BabelStream's three arrays: each at least 4x the L2
    (STREAM's rule, so no array stays in cache) and at least 1 GiB or a sixth of
    the device memory, whichever is smaller; the three arrays together take at
    most half the device memory. :class:`InputError` where both cannot hold."""
    l2 = l2_bytes or ASSUMED_L2_BYTES
    floor = 1 << 30 if not memory_bytes else min(1 << 30, memory_bytes // 6)
    array = max(4 * l2, floor)
    if memory_bytes and 3 * array > memory_bytes // 2:
        raise InputError(f"arrays of 4x the L2 ({4 * l2} bytes) do not fit in half of the "
                         f"device memory ({memory_bytes} bytes): check extras gpu_l2_bytes "
                         "and gpu_memory_bytes of the partition")
    return array // word_bytes
