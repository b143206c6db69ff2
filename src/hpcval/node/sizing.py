"""Problem sizes of hpcval's size-dependent checks, from the node they run on.

A figure that depends on the problem size means something only at a size the
node cannot hide: arrays in the last-level cache give cache bandwidth, files in
the page cache give memory bandwidth, and a size fixed for a 2-core workstation
measures the cache of a server with 300 MiB of L3. Every such check asks this
module for its size, from

* the node (:class:`Node`): its CPUs, its last-level cache (every instance of
  the highest level together, :attr:`hpcval.node.topology.Topology.llc_total_bytes`),
  its memory (which bounds both what a check may allocate and the page cache
  its files can hide in), and the ranks the check places on it;
* the budget: ``quick`` (minutes: CI, nightly runs, ``make validate`` on a
  workstation) or ``full`` (acceptance after maintenance). A site sets it in
  its partitions' ``extras`` (``budget``), a run overrides it
  (``hpcval validate --budget full``, which sets ``$HPCVAL_BUDGET``, or
  ReFrame's ``-S budget=full``).

The rules, each with its reason (the same words the checks record as the
``size_reason`` of a case, so the report says why a case ran at its size):

* **STREAM**: each array >= 4x the node's last-level cache (STREAM's own
  rule, McCalpin); ``full`` 8x where memory allows.
* **Triad kernel** (cfdio): each array, summed over the ranks of the node,
  >= 4x the last-level cache, for the same reason (``full``: 8x).
* **Stencil** (cfdio): the two fields of a rank >= 4x the last-level cache
  per rank (so the node's fields >= 4x its cache): a grid that fits in the
  cache measures the cache, and the stencil then beats the triad of the same
  job, which physics rules out (:mod:`hpcval.node.physics`).
* **Result output** (cfdio output cost): every output is ``fsync``'d, so the
  page cache cannot hide it; the size decides whether the cost is seconds (the
  experiment of "SMBDirect BMT まとめ", result files of hundreds of MB to GB)
  or milliseconds inside the noise. ``quick``: 1/256 of the node's memory per
  output (32-64 MiB, 2 outputs in 4 sweeps: a cost of a tenth of a second or
  more, well above the noise of a run without output), ``full``: 1/32 (256 MiB-4
  GiB, 3 outputs in 6 sweeps); both bounded by the free space where the
  files go (per-rank-then-gather holds the parts and the file at once), never
  below the budget's least size (a disk too small for it fails the run).
* **Post-processing read** (cfdio read): written with ``fsync``, dropped from
  the page cache and read back (what stayed resident is measured); ``quick``
  64-256 MiB per reader, ``full`` 1/8 of memory over the readers (1-4 GiB).
* **IOR**: one node reads back from its own page cache whatever is smaller
  than its memory (``-C`` only helps across nodes), so ``full`` writes more
  than the memory of the nodes (1.25x, bounded by half the free space);
  ``quick`` writes 64 MiB per rank and says that its read figure may be the
  cache.
* **HPCG**: ``full`` follows HPCG's rule for an official run: the problem
  occupies >= 25 % of the node's memory and runs 1800 s; ``quick`` a 16^3
  grid per rank for 5 s.
* **DGEMM**: the matrix order whose 2 n^3 FLOPs take 1 s (``full``: 4 s) at
  the node's computed peak (:mod:`hpcval.node.dgemm`; unknown: 40 GFLOP/s per
  CPU assumed), a multiple of 256 and at least 1024, the three matrices within
  the memory share below.
* **Memory**: nothing a check allocates may exceed half the node's memory
  (the other half is the system's and the page cache's); a rule that cannot
  be met within it is an error naming the sizes (:class:`SizingError`).
* **Time limits** grow with the size: the time the size takes at a
  pessimistic rate (:data:`SLOW_MEMORY_BPS`, :data:`SLOW_IO_BPS`) for every
  sample, at least the check's default.

Pure functions, no ReFrame: the ReFrame side is :mod:`hpcval.rfm.sizing`.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.errors import HpcvalError
from hpcval.node.topology import Topology

BUDGETS = ("quick", "full")
DEFAULT_BUDGET = "quick"
#: Set by ``hpcval validate --budget``; wins over the site's setting.
BUDGET_ENV = "HPCVAL_BUDGET"
#: Partition extra: the site's budget.
BUDGET_EXTRA = "budget"
#: Partition extra: memory of one node (bytes, or e.g. ``"512GiB"``), for
#: partitions whose nodes are not this host.
MEMORY_EXTRA = "mem_per_node"

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30

#: STREAM's rule: each array at least this many times the last-level cache.
CACHE_FACTOR = 4
#: ``full``: arrays and fields this many times the cache where memory allows.
FULL_CACHE_FACTOR = 8
#: Share of a node's memory a check may allocate.
MEMORY_SHARE = 0.5
#: Pessimistic rates for time limits: the slowest memory and I/O a node of a
#: cluster is expected to sustain (a time limit is a bound, not an estimate).
SLOW_MEMORY_BPS = 1e9
SLOW_IO_BPS = 100e6
#: HPCG's rule for an official run: the problem occupies >= 25 % of memory.
HPCG_MEMORY_SHARE = 0.25
#: Bytes HPCG 3.1 allocates per grid point (matrix of 27 nonzeros, vectors and
#: the multigrid levels; ~0.8 GB for 104^3 points per rank).
HPCG_BYTES_PER_POINT = 720


class SizingError(HpcvalError):
    """A rule cannot be met on the node (too little memory or disk)."""


@dataclass(frozen=True)
class Node:
    """What sizing needs of one node (``None``: unknown)."""

    cpus: int | None
    llc_bytes: int | None
    mem_bytes: int | None
    source: str = "unknown"

    @classmethod
    def of(cls, topo: Topology, mem_bytes: int | None) -> Node:
        return cls(topo.num_cpus, topo.llc_total_bytes or topo.llc_bytes, mem_bytes,
                   topo.source)

    def describe(self) -> str:
        return (f"{self.cpus or '?'} CPUs, last-level cache {_size(self.llc_bytes)}, "
                f"memory {_size(self.mem_bytes)}")


@dataclass(frozen=True)
class Size:
    """A check's problem size: the values it runs with, one line saying what
    they are, the rule behind them, and the time limit they need."""

    params: dict[str, Any]
    summary: str
    reason: str
    budget: str
    time_limit_s: int = 0
    footprint_bytes: int = 0
    notes: tuple[str, ...] = field(default=())


def _size(nbytes: float | None) -> str:
    if nbytes is None:
        return "unknown"
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) \
                else f"{value:.1f} {unit}"
    return f"{int(nbytes)} B"


def human(nbytes: float | None) -> str:
    """``480 MiB``, ``1.5 GiB``; ``unknown`` for none."""
    return _size(nbytes)


# -- budget and node facts ----------------------------------------------------

def resolve_budget(run: str | None, environ: str | None, site: str | None,
                   where: str = "partition extras") -> str:
    """The budget of a test case: the run's (``-S budget``), then
    ``$HPCVAL_BUDGET``, then the site's (``extras.budget``), else ``quick``."""
    for value, source in ((run, "-S budget"), (environ, f"${BUDGET_ENV}"),
                          (site, f"{where} {BUDGET_EXTRA}")):
        if value in (None, ""):
            continue
        if value not in BUDGETS:
            raise SizingError(f"{source}: {value!r} is not a budget: use one of "
                              f"{', '.join(BUDGETS)}")
        return str(value)
    return DEFAULT_BUDGET


_UNITS = {"": 1, "b": 1, "k": KIB, "kb": 1000, "kib": KIB, "m": MIB, "mb": 1000**2,
          "mib": MIB, "g": GIB, "gb": 1000**3, "gib": GIB, "t": 1 << 40, "tb": 1000**4,
          "tib": 1 << 40}


def parse_bytes(value: object, where: str = MEMORY_EXTRA) -> int:
    """Bytes from ``536870912``, ``"512GiB"``, ``"512 GB"``, ``"64m"``."""
    if isinstance(value, bool):
        value = None
    if isinstance(value, int | float) and value > 0:
        return int(value)
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(value))
    if not match or match.group(2).lower() not in _UNITS or float(match.group(1)) <= 0:
        raise SizingError(f"{where}: {value!r} is not a size: give bytes or e.g. '512GiB'")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def host_memory(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """Memory of this host (``MemTotal``), ``None`` where unreadable."""
    try:
        text = Path(meminfo).read_text()
    except OSError:
        return None
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    return int(match.group(1)) * KIB if match else None


def _statvfs(path: str | Path) -> os.statvfs_result | None:
    """The file system *path* is on (its nearest existing parent, for a
    directory a job creates), ``None`` where unknown."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return os.statvfs(p)
    except OSError:
        return None


def free_bytes(path: str | Path) -> int | None:
    """Free bytes of the file system *path* is on, ``None`` where unknown."""
    st = _statvfs(path)
    return None if st is None else st.f_bavail * st.f_frsize


#: What a run leaves free on a file system it writes to: the larger of these
#: bytes and this share of the file system (the results store, logs and
#: other users of the disk need room; a disk written to 0 bytes free fails
#: in ways that do not say so).
DISK_MARGIN_BYTES = 256 * MIB
DISK_MARGIN_SHARE = 0.05


def disk_margin(path: str | Path) -> int:
    """Bytes :func:`usable_bytes` keeps free on *path*'s file system."""
    st = _statvfs(path)
    if st is None:
        return DISK_MARGIN_BYTES
    return max(DISK_MARGIN_BYTES, int(DISK_MARGIN_SHARE * st.f_blocks * st.f_frsize))


def usable_bytes(path: str | Path) -> int | None:
    """What a check may write on *path*'s file system: its free bytes less
    :func:`disk_margin` (0 at least), ``None`` where unknown. Sizing rules
    take this as their ``free``."""
    free = free_bytes(path)
    return None if free is None else max(0, free - disk_margin(path))


def _check_budget(budget: str) -> str:
    if budget not in BUDGETS:
        raise SizingError(f"budget {budget!r}: use one of {', '.join(BUDGETS)}")
    return budget


def _time_limit(seconds: float, default_s: int) -> int:
    """At least *default_s*; rounded up to a whole minute."""
    return max(default_s, int(math.ceil(seconds / 60.0)) * 60)


def _allowed(node: Node) -> int | None:
    return int(node.mem_bytes * MEMORY_SHARE) if node.mem_bytes else None


def _fit_cache_factor(node: Node, budget: str, copies: int, what: str) -> tuple[int, int]:
    """(bytes of one array or field set, factor) for a rule ">= 4x the cache"
    (``full``: 8x where it fits) with *copies* of it in memory."""
    assert node.llc_bytes
    allowed = _allowed(node)
    factors = [FULL_CACHE_FACTOR, CACHE_FACTOR] if budget == "full" else [CACHE_FACTOR]
    for factor in factors:
        need = factor * node.llc_bytes
        if allowed is None or copies * need <= allowed:
            return need, factor
    need = CACHE_FACTOR * node.llc_bytes
    raise SizingError(
        f"{what}: {copies} x {_size(need)} (>= {CACHE_FACTOR}x the {_size(node.llc_bytes)} "
        f"last-level cache) exceed {MEMORY_SHARE:.0%} of the node's {_size(node.mem_bytes)}: "
        "no size both beats the cache and fits in memory")


# -- the rules ----------------------------------------------------------------

def stream(node: Node, budget: str, samples: int = 5, default_s: int = 600) -> Size:
    """STREAM's ``STREAM_ARRAY_SIZE`` (elements of 8 bytes, whole MiB per array)."""
    _check_budget(budget)
    if not node.llc_bytes:
        raise SizingError(f"last-level cache unknown ({node.source}): give the partition a "
                          "`processor` with its caches in the site config "
                          "(hpcval.node.topology.processor_info()), or set array_size")
    need, factor = _fit_cache_factor(node, budget, 3, "STREAM's three arrays")
    array_bytes = math.ceil(need / MIB) * MIB
    elements = array_bytes // 8
    # 10 iterations of 4 kernels moving 2-3 arrays each, per run
    seconds = samples * 100 * array_bytes / SLOW_MEMORY_BPS
    return Size({"array_size": elements},
                f"{elements:,} elements per array ({_size(array_bytes)} each)",
                f"each array >= {factor}x the node's {_size(node.llc_bytes)} last-level cache "
                f"(STREAM's rule{', 8x at full' if factor == FULL_CACHE_FACTOR else ''})",
                budget, _time_limit(seconds, default_s), 3 * array_bytes)


def triad(node: Node, ranks: int, budget: str, samples: int = 5,
          default_s: int = 300, _extra_copies: int = 0) -> Size:
    """cfdio's triad kernel: doubles per array and rank (``triad_n``), reps."""
    _check_budget(budget)
    reps = 2 if budget == "quick" else 5
    if not node.llc_bytes:
        n = 10_000_000
        return Size({"triad_n": n, "reps": reps}, f"{n:,} doubles per array and rank",
                    "last-level cache unknown: the fixed default; give the partition a "
                    "`processor` with its caches so the arrays can be sized beyond them",
                    budget, default_s, 24 * n * ranks)
    # the stencil's two fields come with it in one job: _extra_copies of the same size
    need, factor = _fit_cache_factor(node, budget, 3 + _extra_copies,
                                     "the triad's three arrays" if not _extra_copies else
                                     "the stencil's fields and the triad's three arrays")
    n = max(1_000_000, math.ceil(need / (8 * ranks) / 1000) * 1000)
    total = 3 * 8 * n * ranks
    seconds = samples * (reps + 1) * total / SLOW_MEMORY_BPS
    return Size({"triad_n": n, "reps": reps},
                f"{n:,} doubles per array and rank ({_size(8 * n * ranks)} per array on "
                f"{ranks} rank{'s' * (ranks != 1)}), best of {reps}",
                f"each array over the node's ranks >= {factor}x its {_size(node.llc_bytes)} "
                "last-level cache (STREAM's rule)",
                budget, _time_limit(seconds, default_s), total,
                notes=(f"factor {factor}",))


def grid_for(points: int) -> tuple[int, int, int]:
    """A grid of at least *points*: x = y a power of two near the cube root,
    z a multiple of 16 (so it splits evenly over many ranks)."""
    side = 1 << max(4, math.ceil(math.log2(max(points, 1)) / 3))
    z = max(16, math.ceil(points / (side * side) / 16) * 16)
    return side, side, z


def stencil(node: Node, ranks: int, budget: str, samples: int = 5,
            default_s: int = 300) -> Size:
    """cfdio's stencil grid (``global_grid``), sweeps, and the triad of the same job."""
    _check_budget(budget)
    steps = 10 if budget == "quick" else 50
    tri = triad(node, ranks, budget, samples, default_s, _extra_copies=1)
    if not node.llc_bytes:
        grid = (256, 256, 128)
        reason = ("last-level cache unknown: the fixed default grid (2 x 64 MiB fields); give "
                  "the partition a `processor` with its caches so the grid can be sized "
                  "beyond them")
        fields = 16 * math.prod(grid)
    else:
        # the fields at the triad's factor (4x, or 8x at full where both fit)
        factor = int(tri.notes[0].split()[-1])
        grid = grid_for(math.ceil(factor * node.llc_bytes / 16))
        fields = 16 * math.prod(grid)
        reason = (f"the two fields of each rank >= {factor}x the last-level cache per rank "
                  f"({_size(node.llc_bytes / ranks)} of {_size(node.llc_bytes)} over {ranks} "
                  f"rank{'s' * (ranks != 1)}): a grid in the cache measures the cache")
    allowed = _allowed(node)
    if allowed is not None and fields + tri.footprint_bytes > allowed:
        raise SizingError(f"the stencil's fields ({_size(fields)}) and the triad's arrays "
                          f"({_size(tri.footprint_bytes)}) exceed {MEMORY_SHARE:.0%} of the "
                          f"node's {_size(node.mem_bytes)}")
    seconds = samples * (steps * fields + 2 * fields) / SLOW_MEMORY_BPS
    return Size({"global_grid": grid, "steps": steps, **tri.params},
                f"grid {'x'.join(map(str, grid))} (2 fields, {_size(fields)}), {steps} sweeps; "
                f"triad {tri.summary}",
                f"{reason}; triad: {tri.reason}",
                budget, _time_limit(seconds, default_s) + max(0, tri.time_limit_s - default_s),
                fields + tri.footprint_bytes)


def output(node: Node, budget: str, free: int | None = None, samples: int = 5,
           default_s: int = 300) -> Size:
    """cfdio's output-cost run: the global grid (one output file is the grid
    in doubles), sweeps and outputs."""
    _check_budget(budget)
    mem = node.mem_bytes or 8 * GIB
    if budget == "quick":
        target, lo, hi, steps, every = mem / 256, 32 * MIB, 64 * MIB, 4, 2
    else:
        target, lo, hi, steps, every = mem / 32, 256 * MIB, 4 * GIB, 6, 2
    file_bytes = int(min(max(target, lo), hi))
    notes = []
    outputs = steps // every
    # per-rank-then-gather holds the parts and the merged file at once
    if free is not None and 2 * lo > free:
        # never below the budget's least size (a smaller file would measure
        # nothing), and never the disk filled: the case is skipped, saying why
        raise SizingError(f"output files of at least {_size(lo)} (twice that at once) do not "
                          f"fit in the {_size(free)} usable where the files go (free space "
                          "less a margin kept free): free space, or give the partition an "
                          "extras.shared_fs_dir with room")
    if free is not None and 2 * file_bytes > free / 4:
        file_bytes = max(lo, int(free / 8))
        notes.append(f"bounded by the free space where the files go ({_size(free)} usable)")
    grid = grid_for(max(1, file_bytes // 8))
    file_bytes = 8 * math.prod(grid)
    memory = 3 * file_bytes  # two fields over the ranks and rank 0's whole grid
    allowed = _allowed(node)
    if allowed is not None and memory > allowed:
        raise SizingError(f"output files of {_size(file_bytes)} need {_size(memory)}, more "
                          f"than {MEMORY_SHARE:.0%} of the node's {_size(node.mem_bytes)}")
    share = "1/256" if budget == "quick" else "1/32"
    reason = (f"{share} of the node's {_size(node.mem_bytes)} memory per output "
              f"({_size(lo)}-{_size(hi)}); every output is fsync'd, so the page cache "
              "cannot hide it")
    if budget == "full":
        reason += ("; result files of hundreds of MB to GB, as in \"SMBDirect BMT まとめ\", "
                   "so output costs seconds")
    if notes:
        reason += "; " + "; ".join(notes)
    # each sample: the run with output (per-rank-then-gather writes 3x) and the baseline
    seconds = samples * (2 * (steps + 2) * 2 * file_bytes / SLOW_MEMORY_BPS
                         + 3 * outputs * file_bytes / SLOW_IO_BPS)
    return Size({"global_grid": grid, "steps": steps, "every": every},
                f"grid {'x'.join(map(str, grid))}, {outputs} outputs of {_size(file_bytes)} "
                f"({steps} sweeps)",
                reason, budget, _time_limit(seconds, default_s), memory)


def read(node: Node, readers: int, budget: str, free: int | None = None, samples: int = 5,
         default_s: int = 300) -> Size:
    """cfdio's post-processing read: MiB per reader (``read_mb``)."""
    _check_budget(budget)
    mem = node.mem_bytes or 8 * GIB
    if budget == "quick":
        per = min(max(mem / (64 * readers), 64 * MIB), 256 * MIB)
    else:
        per = min(max(mem / (8 * readers), GIB), 4 * GIB)
    notes = []
    if free is not None and 2 * readers * MIB > free:
        raise SizingError(f"{readers} reader file(s) do not fit in the {_size(free)} usable "
                          "where the files go (free space less a margin kept free): free space")
    if free is not None and readers * per > free / 2:
        per = max(MIB, free / (2 * readers))
        notes.append(f"bounded by the free space where the files go ({_size(free)})")
    read_mb = max(1, int(per // MIB))
    reason = ("written with fsync, dropped from the page cache and read back (the share "
              "still resident is measured: cache_resident)")
    if notes:
        reason += "; " + "; ".join(notes)
    seconds = samples * 2 * readers * read_mb * MIB / SLOW_IO_BPS
    return Size({"read_mb": read_mb}, f"{read_mb} MiB per reader, {readers} reader(s)",
                reason, budget, _time_limit(seconds, default_s), readers * read_mb * MIB)


def ior(node: Node, ranks: int, nodes: int, budget: str, free: int | None = None,
        repetitions: int = 5, default_s: int = 600) -> Size:
    """IOR's block size per rank (``-b``, in MiB)."""
    _check_budget(budget)
    notes = []
    if budget == "quick" or not node.mem_bytes:
        block_mib = 64
        if free is not None and block_mib * MIB * ranks > free:
            raise SizingError(f"IOR's files ({_size(block_mib * MIB * ranks)}) do not fit in "
                              f"the {_size(free)} usable where they go (free space less a "
                              "margin kept free): free space")
        cache = node.mem_bytes * nodes if node.mem_bytes else None
        reason = (f"{block_mib} MiB per rank; fsync'd writes (-e); the read-back may come "
                  f"from the page cache ({_size(block_mib * MIB * ranks)} written, page cache "
                  f"up to {_size(cache)})")
    else:
        total = 1.25 * node.mem_bytes * nodes
        if free is not None and total > free / 2:
            total = free / 2
            notes.append(f"bounded by the free space ({_size(free)}): the read-back may come "
                         "from the page cache")
        block_mib = max(1, math.ceil(total / ranks / MIB))
        reason = (f"the files ({_size(block_mib * MIB * ranks)}) exceed the memory of the "
                  f"{nodes} node(s) ({_size(node.mem_bytes * nodes)}), so the read-back "
                  "cannot come from the page cache; fsync'd writes (-e)"
                  if not notes else "; ".join(notes))
    seconds = repetitions * 2 * block_mib * MIB * ranks / SLOW_IO_BPS / max(nodes, 1)
    return Size({"block_size": f"{block_mib}m"},
                f"{block_mib} MiB per rank x {ranks} ranks ({_size(block_mib * MIB * ranks)})",
                reason, budget, _time_limit(seconds, default_s), block_mib * MIB)


def hpcg(node: Node, ranks: int, budget: str, default_s: int = 1800) -> Size:
    """HPCG's local grid per rank and run time."""
    _check_budget(budget)
    if budget == "quick" or not node.mem_bytes:
        grid, run_time = (16, 16, 16), 5
        reason = ("16^3 points per rank for 5 s: a smoke run, not an official one (HPCG "
                  "asks >= 25 % of memory for 1800 s: budget full)")
    else:
        points = HPCG_MEMORY_SHARE * node.mem_bytes / (ranks * HPCG_BYTES_PER_POINT)
        side = max(16, int(round(points ** (1 / 3) / 8)) * 8)
        if side ** 3 * HPCG_BYTES_PER_POINT * ranks < HPCG_MEMORY_SHARE * node.mem_bytes:
            side += 8
        grid, run_time = (side, side, side), 1800
        reason = (f"HPCG's rule for an official run: the problem >= {HPCG_MEMORY_SHARE:.0%} "
                  f"of the node's {_size(node.mem_bytes)} "
                  f"(~{HPCG_BYTES_PER_POINT} B per point), 1800 s")
    footprint = math.prod(grid) * HPCG_BYTES_PER_POINT * ranks
    return Size({"local_grid": grid, "run_time": run_time},
                f"local grid {'x'.join(map(str, grid))} per rank, {run_time} s",
                reason, budget, _time_limit(2.5 * run_time * 5 + 300, default_s), footprint)


#: ``dgemm``: seconds one multiply takes at the node's computed peak (a BLAS
#: reaches 50-90 % of it on its large matrices, so a sample takes 1-2x this).
DGEMM_SECONDS = {"quick": 1.0, "full": 4.0}
#: ``dgemm`` on a node whose peak is unknown: FLOPs per cycle and GHz assumed per
#: CPU (AVX2 with two FMA units at 2.5 GHz).
DGEMM_ASSUMED_GFLOPS_PER_CPU = 16 * 2.5
#: ``dgemm``: matrix orders are multiples of this (BLAS blocks), never below the least.
DGEMM_STEP, DGEMM_LEAST = 256, 1024


def dgemm(node: Node, budget: str, peak_gflops: float | None = None, samples: int = 5,
          default_s: int = 300) -> Size:
    """DGEMM's matrix order ``n`` (``C = A B``, three ``n x n`` doubles): one multiply
    takes :data:`DGEMM_SECONDS` of the budget at the node's peak (2 n^3 FLOPs), so a
    sample is seconds, long beside the BLAS's start-up and short beside the budget;
    the three matrices within :data:`MEMORY_SHARE` of the memory."""
    _check_budget(budget)
    if peak_gflops and peak_gflops > 0:
        rate, basis = peak_gflops, f"the node's computed peak {peak_gflops:,.0f} GFLOP/s"
    else:
        rate = DGEMM_ASSUMED_GFLOPS_PER_CPU * (node.cpus or 1)
        basis = (f"an assumed peak of {DGEMM_ASSUMED_GFLOPS_PER_CPU:.0f} GFLOP/s per CPU "
                 f"x {node.cpus or 1} (peak unknown)")
    target = DGEMM_SECONDS[budget]
    n = max(DGEMM_LEAST, int((target * rate * 1e9 / 2) ** (1 / 3)) // DGEMM_STEP * DGEMM_STEP)
    notes = []
    allowed = _allowed(node)
    if allowed is not None and 24 * n * n > allowed:
        fit = int(math.sqrt(allowed / 24)) // DGEMM_STEP * DGEMM_STEP
        if fit < DGEMM_LEAST:
            raise SizingError(f"DGEMM's three matrices of order {DGEMM_LEAST} "
                              f"({_size(24 * DGEMM_LEAST ** 2)}) exceed {MEMORY_SHARE:.0%} "
                              f"of the node's {_size(node.mem_bytes)}")
        n = fit
        notes.append(f"bounded by {MEMORY_SHARE:.0%} of the node's {_size(node.mem_bytes)}")
    reason = (f"one multiply ~{target:g} s at {basis} (2 n^3 FLOPs); three matrices "
              f"{_size(24 * n * n)}" + (f"; {notes[0]}" if notes else ""))
    # time limit: every sample at a twentieth of the rate, and a warm-up
    seconds = (samples + 1) * 2 * n ** 3 / (rate * 1e9 / 20)
    return Size({"n": n}, f"n = {n:,} ({_size(8 * n * n)} per matrix)", reason, budget,
                _time_limit(seconds, default_s), 24 * n * n, tuple(notes))
