"""Base tests for STREAM, the memory-bandwidth benchmark (McCalpin's reference code).

STREAM's rule: each of its three arrays must be at least four times the size of
all last-level caches together, or the figures measure the cache. The array
size is fixed when STREAM is compiled (``-DSTREAM_ARRAY_SIZE``), so:

* :class:`StreamBuildBase` compiles ``stream.c`` itself with an array size
  from the partition's detected caches (>= 4x the last-level caches, rounded
  up to a whole MiB per array): the sources are the directory named by
  ``$HPCVAL_STREAM_SRC`` (a checkout of github.com/jeffhammond/STREAM, the
  source Spack's ``stream`` package builds). Skipped with the reason where
  there is none.
* :class:`StreamBase` runs an installed ``stream_c.exe``/``stream_f.exe`` (the
  Spack ``stream`` package's programs): from the environment's Spack build,
  ``$HPCVAL_STREAM_DIR`` or ``PATH``, skipped where there is none. It cannot
  resize the arrays, so its sanity fails when the arrays STREAM reports are
  smaller than the rule asks, naming the ``stream_array_size`` to build with.

Both run one process on one node, with ``OMP_NUM_THREADS`` set to the node's
CPUs (an OpenMP build uses them all; a serial one ignores it), and judge the
best rate of each kernel (MB/s, as STREAM prints it). A run whose arrays fail
STREAM's own validation fails.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import Any

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.parsers.stream import KERNELS, StreamResult, check_complete, parse_stream
from hpcval.rfm.base import HpcvalTest, last_level_cache_bytes

STREAM_DIR_VAR = "HPCVAL_STREAM_DIR"
STREAM_SRC_VAR = "HPCVAL_STREAM_SRC"
#: STREAM's rule: each array at least this many times the last-level caches.
CACHE_FACTOR = 4
MIB = 1 << 20


def total_last_level_cache(processor: Any) -> int | None:
    """Bytes of last-level cache of a node: the largest cache level's size times
    its instances (``cpusets`` in ReFrame's detected topology), or None when the
    topology is unknown."""
    topology = getattr(processor, "topology", None) or {}
    caches = topology.get("caches", [])
    size = last_level_cache_bytes(processor)
    if not size:
        return None
    levels = [c for c in caches if c.get("size") == size]
    instances = max((len(c.get("cpusets") or [0]) for c in levels), default=1)
    return int(size) * max(instances, 1)


def host_last_level_cache(sys_cpu: str | Path = "/sys/devices/system/cpu") -> int | None:
    """Bytes of last-level cache of *this* machine from sysfs: the highest
    level's size times the number of distinct instances (``shared_cpu_list``)."""
    best: dict[int, dict[str, int]] = {}
    for index in Path(sys_cpu).glob("cpu[0-9]*/cache/index[0-9]*"):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size_text = (index / "size").read_text().strip()
            shared = (index / "shared_cpu_list").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        factor = {"K": 1024, "M": MIB, "G": 1 << 30}.get(size_text[-1:], 1)
        size = int(size_text.rstrip("KMG")) * factor
        best.setdefault(level, {})[shared] = size
    if not best:
        return None
    return sum(best[max(best)].values())


def array_elements(cache_bytes: int, element_bytes: int = 8) -> int:
    """Elements per array for STREAM's rule (>= 4x the caches), whole MiB per array."""
    array_bytes = math.ceil(CACHE_FACTOR * cache_bytes / MIB) * MIB
    return array_bytes // element_bytes


class _StreamRun(HpcvalTest):
    """What both STREAM tests share: one process, threads, figures, sanity."""

    #: Threads (``OMP_NUM_THREADS``); the node's CPUs when unset.
    #:
    #: :type: :class:`int` or :obj:`None`
    threads = variable(int, type(None), value=None, loggable=True)

    #: Bytes of last-level cache the array size is judged against (detected).
    #:
    #: :type: :class:`int`
    cache_bytes = variable(int, value=0, loggable=True)

    @run_after("init")
    def set_perf_variables(self) -> None:
        for kernel in KERNELS:
            self.perf_variables[kernel.lower()] = sn.make_performance_function(
                self.rate(kernel), "MB/s")

    def detect_cache(self) -> int | None:
        processor = self.current_partition.processor
        found = total_last_level_cache(processor)
        if found is None and self.current_partition.scheduler.registered_name == "local":
            found = host_last_level_cache()  # the partition is this machine
        return found

    @run_after("setup")
    def set_threads(self) -> None:
        cpus = self.threads or self.current_partition.processor.num_cpus or os.cpu_count() or 1
        self.env_vars["OMP_NUM_THREADS"] = str(cpus)

    @run_before("run")
    def run_directly(self) -> None:
        # one process, no MPI: the scheduler's node runs it without a launcher
        self.job.launcher = getlauncher("local")()

    def result(self) -> StreamResult:
        return self.parse_stdout(lambda text, source: check_complete(parse_stream(text, source)))

    @sn.deferrable
    def rate(self, kernel: str) -> float:
        return self.result().rate(kernel)

    @sanity_function
    def validated(self) -> bool:
        result = self.result()
        need = CACHE_FACTOR * self.cache_bytes
        if result.array_bytes is not None and self.cache_bytes and result.array_bytes < need:
            elements = array_elements(self.cache_bytes, result.bytes_per_element)
            raise SanityError(
                f"STREAM's arrays are {result.array_bytes / MIB:.0f} MiB, smaller than "
                f"{CACHE_FACTOR}x the {self.cache_bytes / MIB:.0f} MiB last-level cache: "
                f"the figures would measure the cache; rebuild with "
                f"-DSTREAM_ARRAY_SIZE={elements} (Spack: stream stream_array_size={elements})")
        return True


class StreamBase(_StreamRun, rfm.RunOnlyRegressionTest):
    """An installed STREAM program (``program``: ``stream_c.exe`` or ``stream_f.exe``)."""

    spack_package = "stream"
    num_tasks = 1
    time_limit = "10m"

    #: Program as the Spack ``stream`` package installs it: C or Fortran.
    program = parameter(["stream_c.exe", "stream_f.exe"], loggable=True)

    #: Path of the program that ran.
    #:
    #: :type: :class:`str`
    stream_program_path = variable(str, value="", loggable=True)

    @run_after("setup")
    def locate_program(self) -> None:
        path, where = find_stream_program(self.program, self.spack_prefix())
        self.skip_if(path is None,
                     f"{self.program} not found in {where}: install STREAM (spack install "
                     f"stream) and put it on PATH, or set {STREAM_DIR_VAR} to its directory")
        self.stream_program_path = str(path)
        self.executable = str(path)
        self.cache_bytes = self.detect_cache() or 0
        if self.program == "stream_f.exe":
            # the Fortran arrays are static and large: the default stack is too small
            self.prerun_cmds = ["ulimit -s unlimited || ulimit -s hard"]


class StreamBuildBase(_StreamRun, rfm.RegressionTest):
    """``stream.c`` compiled with arrays sized from the detected caches."""

    num_tasks = 1
    time_limit = "10m"

    build_system = "SingleSource"
    sourcepath = "stream.c"
    executable = "./stream"

    #: Directory holding ``stream.c``; ``$HPCVAL_STREAM_SRC`` when unset.
    #:
    #: :type: :class:`str` or :obj:`None`
    stream_src = variable(str, type(None), value=None)

    #: Elements per array; from the detected last-level caches when unset.
    #:
    #: :type: :class:`int` or :obj:`None`
    array_size = variable(int, type(None), value=None, loggable=True)

    #: Compiler flags (OpenMP on: one thread per CPU).
    #:
    #: :type: :class:`List[str]`
    stream_cflags = variable(typ.List[str], value=["-O2", "-fopenmp"])

    @run_after("setup")
    def configure_build(self) -> None:
        src = self.stream_src or os.environ.get(STREAM_SRC_VAR)
        self.skip_if(not src or not (Path(src) / "stream.c").is_file(),
                     f"no STREAM sources: set {STREAM_SRC_VAR} (or stream_src) to a directory "
                     "holding stream.c (github.com/jeffhammond/STREAM)")
        self.cache_bytes = self.detect_cache() or 0
        if self.array_size is None:
            self.skip_if(not self.cache_bytes,
                         "cache sizes unknown (no detected processor topology on this "
                         "partition): set array_size")
            self.array_size = array_elements(self.cache_bytes)
        self.sourcesdir = str(src)
        self.build_system.executable = "stream"
        self.build_system.cflags = list(self.stream_cflags)
        self.build_system.cppflags = [f"-DSTREAM_ARRAY_SIZE={self.array_size}"]


def find_stream_program(name: str, spack_prefix: str | None = None) -> tuple[str | None, str]:
    """Path of an installed STREAM program and where it was looked for: the
    environment's Spack build, then ``$HPCVAL_STREAM_DIR``, then ``PATH``."""
    dirs = [str(Path(spack_prefix) / "bin")] if spack_prefix else []
    dirs += [d for d in os.environ.get(STREAM_DIR_VAR, "").split(":") if d]
    for d in dirs:
        candidate = Path(d) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate), d
    where = f"the Spack environment, ${STREAM_DIR_VAR} ({os.environ.get(STREAM_DIR_VAR, 'unset')})"
    return shutil.which(name), f"{where} or PATH"
