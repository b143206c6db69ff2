"""Base tests for STREAM, the memory-bandwidth benchmark (McCalpin's reference code).

STREAM's rule: each of its three arrays must be at least four times the size of
all last-level caches of the node together, or the figures measure the cache.
The node's last-level cache comes from its detected topology
(:attr:`hpcval.node.topology.Topology.llc_total_bytes`: every instance of the
highest cache level, as ReFrame reads them from sysfs or the site config
states them). The array size is fixed when STREAM is compiled
(``-DSTREAM_ARRAY_SIZE``), so:

* :class:`StreamBuildBase` compiles ``stream.c`` itself with an array size
  from the caches (>= 4x, rounded up to a whole MiB per array): the sources
  are the directory named by ``$HPCVAL_STREAM_SRC`` (a checkout of
  github.com/jeffhammond/STREAM, the source Spack's ``stream`` package
  builds). Skipped with the reason where there is none.
* :class:`StreamBase` runs an installed ``stream_c.exe``/``stream_f.exe`` (the
  Spack ``stream`` package's programs), found with
  :meth:`~hpcval.rfm.HpcvalTest.find_program`: the environment's Spack build,
  ``$HPCVAL_STREAM_DIR`` or ``PATH``; skipped where there is none. It cannot
  resize the arrays, so its sanity fails when the arrays STREAM reports are
  smaller than the rule asks, naming the ``stream_array_size`` to build with.

Both run one process on one node, with ``OMP_NUM_THREADS`` set to the node's
CPUs (an OpenMP build uses them all; a serial one ignores it). STREAM reports
only the best of its ``NTIMES`` iterations, so the program runs ``samples``
times in one job: a figure's samples are the best rates of the runs (MB/s, as
STREAM prints them), its value their median. A run whose arrays fail STREAM's
own validation fails.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.core.figures import Figure
from hpcval.core.series import median
from hpcval.node import physics, sizing
from hpcval.parsers.stream import KERNELS, StreamResult, check_complete, parse_stream
from hpcval.rfm.base import HpcvalTest
from hpcval.rfm.sizing import SizedTest

STREAM_DIR_VAR = "HPCVAL_STREAM_DIR"
STREAM_SRC_VAR = "HPCVAL_STREAM_SRC"
#: STREAM's rule: each array at least this many times the last-level caches.
CACHE_FACTOR = sizing.CACHE_FACTOR
MIB = 1 << 20


def array_elements(cache_bytes: int, element_bytes: int = 8) -> int:
    """Elements per array for STREAM's rule (>= 4x the caches), whole MiB per array."""
    array_bytes = math.ceil(CACHE_FACTOR * cache_bytes / MIB) * MIB
    return array_bytes // element_bytes


class _StreamRun(SizedTest, HpcvalTest):
    """What both STREAM tests share: one process, threads, repeated runs,
    figures, sanity."""

    rank_count = 1

    #: The best rate of each kernel (MB/s), one sample per run.
    figures = tuple(Figure(kernel.lower(), "MB/s", column=kernel) for kernel in KERNELS)

    #: Threads (``OMP_NUM_THREADS``); the node's CPUs when unset.
    #:
    #: :type: :class:`int` or :obj:`None`
    threads = variable(int, type(None), value=None, loggable=True)

    #: Bytes of last-level cache of the node the array size is judged against
    #: (detected; 0: unknown).
    #:
    #: :type: :class:`int`
    cache_bytes = variable(int, value=0, loggable=True)

    @run_after("setup")
    def run_directly(self) -> None:
        # one process, no MPI: the node runs it without a launcher
        self.job.launcher = getlauncher("local")()
        topo = self.topology()
        self.cache_bytes = topo.llc_total_bytes or 0
        self.env_vars["OMP_NUM_THREADS"] = str(self.threads or topo.num_cpus or 1)
        # threads bound to cores and spread over the sockets, as STREAM is run for its
        # figures: unbound threads migrate and read memory of another socket
        # (`-S env_vars=OMP_PROC_BIND:close` and the like win)
        self.env_vars.setdefault("OMP_PROC_BIND", "spread")
        self.env_vars.setdefault("OMP_PLACES", "cores")

    @run_before("run")
    def repeat_runs(self) -> None:
        self.postrun_cmds = self.repeat_in_job()

    def results(self) -> list[StreamResult]:
        """Every run of the job, each complete and validated by STREAM."""
        return self.parse_samples(
            lambda text, source: check_complete(parse_stream(text, source)))

    def measure(self) -> dict[str, list[float]]:
        results = self.results()
        return {f.name: [r.rate(f.column) for r in results] for f in self.figures}

    @sanity_function
    def validated(self) -> bool:
        result = self.results()[0]
        need = CACHE_FACTOR * self.cache_bytes
        if result.array_bytes is not None and self.cache_bytes and result.array_bytes < need:
            elements = array_elements(self.cache_bytes, result.bytes_per_element)
            raise SanityError(
                f"STREAM's arrays are {result.array_bytes / MIB:.0f} MiB, smaller than "
                f"{CACHE_FACTOR}x the {self.cache_bytes / MIB:.0f} MiB last-level cache: "
                f"the figures would measure the cache; rebuild with "
                f"-DSTREAM_ARRAY_SIZE={elements} (Spack: stream stream_array_size={elements})")
        samples = self.figure_samples()
        try:
            ceiling = physics.ceiling(self.current_partition.extras,
                                      physics.MEMORY_CEILING_EXTRA)
        except ValueError as err:
            raise SanityError(f"partition {self.current_partition.fullname} {err}") from None
        bad = [physics.above_ceiling(
            f.name, median(samples[f.name]), ceiling,
            f"node's memory bandwidth (extras {physics.MEMORY_CEILING_EXTRA})")
            for f in self.figures]
        if any(bad):
            raise SanityError("physically impossible: " + "; ".join(b for b in bad if b))
        return True


class StreamBase(_StreamRun, rfm.RunOnlyRegressionTest):
    """An installed STREAM program (``program``: ``stream_c.exe`` or ``stream_f.exe``)."""

    spack_package = "stream"
    time_limit = "10m"

    #: Program as the Spack ``stream`` package installs it: C or Fortran.
    program = parameter(["stream_c.exe", "stream_f.exe"], loggable=True)

    #: Path of the program that ran.
    #:
    #: :type: :class:`str`
    stream_program_path = variable(str, value="", loggable=True)

    @run_after("setup")
    def locate_program(self) -> None:
        self.stream_program_path = self.find_program(self.program, STREAM_DIR_VAR, mpi=False)
        self.executable = self.stream_program_path
        self.problem_size = "fixed when the program was built (STREAM_ARRAY_SIZE)"
        self.size_reason = (f"the sanity fails below {CACHE_FACTOR}x the node's last-level "
                            f"cache ({sizing.human(self.cache_bytes)}), STREAM's rule")
        if self.program == "stream_f.exe":
            # the Fortran arrays are static and large: the default stack is too small
            self.prerun_cmds = ["ulimit -s unlimited || ulimit -s hard"]


class StreamBuildBase(_StreamRun, rfm.RegressionTest):
    """``stream.c`` compiled with arrays sized from the detected caches."""

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
        self.skip_if(not src or not (Path(str(src)) / "stream.c").is_file(),
                     f"no STREAM sources: set {STREAM_SRC_VAR} (or stream_src) to a directory "
                     "holding stream.c (github.com/jeffhammond/STREAM)")
        if self.array_size is None:
            size = self.sized(sizing.stream, self.sizing_node(), self.sizing_budget(),
                              samples=self.samples)
            if size:
                self.array_size = size.params["array_size"]
                self.apply_size(size)
        self.sourcesdir = str(src)
        self.build_system.executable = "stream"
        self.build_system.cflags = list(self.stream_cflags)
        self.build_system.cppflags = [f"-DSTREAM_ARRAY_SIZE={self.array_size}"]
