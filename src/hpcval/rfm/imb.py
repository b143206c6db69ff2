"""Base tests for Intel MPI Benchmarks: they know how to run IMB and judge
its tables; final checks in ``reframe-checks/`` only say where and how many.
"""

from __future__ import annotations

import math

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, sanity_function, variable

from hpcval.parsers.imb import ImbTable, check_complete, parse_imb
from hpcval.rfm.base import HpcvalTest, last_level_cache_bytes


class ImbPingPongBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """IMB PingPong between two ranks: one-way latency and bandwidth per size.

    Repetitions are fixed (``-iter N -iter_policy off``) so runs compare. With
    ``cache = 'cold'``, ``-off_cache`` cycles through buffers larger than the
    detected last-level cache (seed 004: a reused buffer overstates real
    bandwidth several times).
    """

    executable = "IMB-MPI1"
    num_tasks = 2
    valid_prog_environs = ["+mpi +imb"]
    time_limit = "10m"

    #: ``warm``: IMB reuses one buffer (best case); ``cold``: ``-off_cache``.
    cache = parameter(["warm", "cold"], loggable=True)

    #: Repetitions per message size (``-iter N -iter_policy off``).
    #:
    #: :type: :class:`int`
    repetitions = variable(int, value=500, loggable=True)

    #: Largest message size as a power of two (22: 4 MiB).
    #:
    #: :type: :class:`int`
    max_log2_size = variable(int, value=22, loggable=True)

    #: ``-off_cache`` size in MiB for ``cache = 'cold'``; derived from the
    #: detected last-level cache when not set (``-1``: IMB's built-in value,
    #: used when the topology is unknown).
    #:
    #: :type: :class:`float` or :obj:`None`
    off_cache_mib = variable(float, type(None), value=None, loggable=True)

    #: Judged one-way latencies: performance variable -> message size (bytes).
    #:
    #: :type: :class:`Dict[str, int]`
    latency_sizes = variable(typ.Dict[str, int], value={"lat_0B": 0, "lat_8B": 8})

    #: Judged bandwidths: performance variable -> message size (bytes); the
    #: defaults span the seed's 2 KiB-4 MiB range.
    #:
    #: :type: :class:`Dict[str, int]`
    bandwidth_sizes = variable(typ.Dict[str, int], value={
        "bw_2KiB": 2048, "bw_64KiB": 65536, "bw_1MiB": 1 << 20, "bw_4MiB": 4 << 20,
    })

    @run_after("init")
    def set_perf_variables(self) -> None:
        for name, size in self.latency_sizes.items():
            self.perf_variables[name] = sn.make_performance_function(
                self.figure(size, "t_usec"), "us")
        for name, size in self.bandwidth_sizes.items():
            self.perf_variables[name] = sn.make_performance_function(
                self.figure(size, "mbytes_per_sec"), "MB/s")

    @run_after("setup")
    def set_options(self) -> None:
        self.executable_opts = [
            "PingPong",
            "-iter", str(self.repetitions), "-iter_policy", "off",
            "-msglog", f"0:{self.max_log2_size}",
            # A cache-cold run touches more memory per message; let IMB have it.
            "-mem", "2",
        ]
        if self.cache == "cold":
            if self.off_cache_mib is None:
                llc = last_level_cache_bytes(self.current_partition.processor)
                self.off_cache_mib = float(math.ceil(llc / 2**20)) if llc else -1.0
            self.executable_opts += ["-off_cache", f"{self.off_cache_mib:g}"]

    def table(self) -> ImbTable:
        sizes = [*self.latency_sizes.values(), *self.bandwidth_sizes.values()]
        return self.parse_stdout(
            lambda text, source: check_complete(parse_imb(text, source), "PingPong", sizes,
                                                processes=2, source=source))

    @sn.deferrable
    def figure(self, size: int, column: str) -> float:
        return self.table().value(size, column)

    @sanity_function
    def complete_table(self) -> bool:
        table = self.table()
        judged = {v: ("one-way latency", s) for v, s in self.latency_sizes.items()}
        judged |= {v: ("bandwidth", s) for v, s in self.bandwidth_sizes.items()}
        self.record_series("PingPong", "message size", "B", {
            "one-way latency": ("us", table.series("t_usec")),
            "bandwidth": ("MB/s", table.series("mbytes_per_sec")),
        }, judged)
        return True
