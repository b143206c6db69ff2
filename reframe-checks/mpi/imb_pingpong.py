"""IMB PingPong between two ranks: one-way latency and bandwidth per message size.

Seed 000 judges a cloud NIC by IMB PingPong between two VMs (2 KiB-4 MiB);
seed 004 shows that a buffer reused every iteration (cache-warm) overstates
real bandwidth several times, so the check also runs cache-cold with
``-off_cache`` sized from the detected last-level cache. Repetitions are
fixed (``-iter N -iter_policy off``) so that runs compare.
"""

import math

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, sanity_function, variable

from hpcval.parsers.imb import check_complete, parse_imb
from hpcval.rfm import HpcvalTest, last_level_cache_bytes

#: Judged one-way latencies: variable -> message size in bytes.
LATENCY_SIZES = {"lat_0B": 0, "lat_8B": 8}
#: Judged bandwidths over the seed's 2 KiB-4 MiB range.
BANDWIDTH_SIZES = {"bw_2KiB": 2048, "bw_64KiB": 65536, "bw_1MiB": 1 << 20, "bw_4MiB": 4 << 20}


@rfm.simple_test
class imb_pingpong_check(HpcvalTest, rfm.RunOnlyRegressionTest):
    descr = "IMB PingPong: one-way latency and bandwidth between two ranks"
    valid_systems = ["*"]
    valid_prog_environs = ["+mpi +imb"]
    executable = "IMB-MPI1"
    num_tasks = 2
    time_limit = "10m"
    tags = {"mpi", "pingpong", "latency", "bandwidth"}

    #: ``warm``: IMB reuses one buffer (best case); ``cold``: ``-off_cache``
    #: cycles through buffers larger than the last-level cache.
    cache = parameter(["warm", "cold"], loggable=True)

    #: Repetitions per message size (``-iter N -iter_policy off``).
    #:
    #: :type: :class:`int`
    repetitions = variable(int, value=500, loggable=True)

    #: Largest message size as a power of two (22: 4 MiB).
    #:
    #: :type: :class:`int`
    max_log2_size = variable(int, value=22, loggable=True)

    #: ``-off_cache`` size in MiB; derived from the detected last-level cache
    #: when not set. ``-1`` makes IMB use its built-in value.
    #:
    #: :type: :class:`float` or :obj:`None`
    off_cache_mib = variable(float, type(None), value=None, loggable=True)

    @run_after("setup")
    def set_options(self):
        self.executable_opts = [
            "PingPong",
            "-iter", str(self.repetitions), "-iter_policy", "off",
            "-msglog", f"0:{self.max_log2_size}",
        ]
        if self.cache == "cold":
            if self.off_cache_mib is None:
                llc = last_level_cache_bytes(self.current_partition.processor)
                self.off_cache_mib = float(math.ceil(llc / 2**20)) if llc else -1.0
            self.executable_opts += ["-off_cache", f"{self.off_cache_mib:g}"]
        # A cache-cold run touches more memory per message; let IMB have it.
        self.executable_opts += ["-mem", "2"]

    @run_after("init")
    def set_perf_variables(self):
        for name, size in LATENCY_SIZES.items():
            self.perf_variables[name] = sn.make_performance_function(
                self.figure(size, "t_usec"), "us")
        for name, size in BANDWIDTH_SIZES.items():
            self.perf_variables[name] = sn.make_performance_function(
                self.figure(size, "mbytes_per_sec"), "MB/s")

    def table(self):
        sizes = [*LATENCY_SIZES.values(), *BANDWIDTH_SIZES.values()]
        return self.parse_stdout(
            lambda text, source: check_complete(parse_imb(text, source), "PingPong", sizes,
                                                processes=2, source=source))

    @sn.deferrable
    def figure(self, size, column):
        return self.table().value(size, column)

    @sanity_function
    def complete_table(self):
        table = self.table()
        judged = {v: ("one-way latency", s) for v, s in LATENCY_SIZES.items()}
        judged |= {v: ("bandwidth", s) for v, s in BANDWIDTH_SIZES.items()}
        self.record_series("PingPong", "message size", "B", {
            "one-way latency": ("us", table.series("t_usec")),
            "bandwidth": ("MB/s", table.series("mbytes_per_sec")),
        }, judged)
        return True
