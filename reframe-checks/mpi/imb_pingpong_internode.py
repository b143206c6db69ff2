"""IMB PingPong with one rank on each of two nodes: the network between them.

Seed 000 judges a cloud NIC by IMB PingPong between two VMs (latency and
bandwidth, 2 KiB-4 MiB); here the two ranks go to two different nodes of a
partition that can span nodes (feature ``internode``), so every message
crosses the fabric. Repetitions are fixed (``-iter N -iter_policy off``) so
that runs compare, and kept small: a 1 GbE link needs ~70 ms per 4 MiB round
trip.
"""

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, sanity_function, variable

from hpcval.parsers.imb import check_complete, parse_imb
from hpcval.rfm import HpcvalTest

#: Judged one-way latencies: variable -> message size in bytes.
LATENCY_SIZES = {"lat_0B": 0, "lat_8B": 8}
#: Judged bandwidths over the seed's 2 KiB-4 MiB range.
BANDWIDTH_SIZES = {"bw_64KiB": 65536, "bw_1MiB": 1 << 20, "bw_4MiB": 4 << 20}


@rfm.simple_test
class imb_pingpong_internode_check(HpcvalTest, rfm.RunOnlyRegressionTest):
    descr = "IMB PingPong between two nodes, one rank per node"
    valid_systems = ["+internode"]
    valid_prog_environs = ["+mpi +imb"]
    executable = "IMB-MPI1"
    num_tasks = 2
    num_tasks_per_node = 1
    time_limit = "10m"
    tags = {"mpi", "internode", "pingpong", "latency", "bandwidth"}

    #: Repetitions per message size (``-iter N -iter_policy off``).
    #:
    #: :type: :class:`int`
    repetitions = variable(int, value=100, loggable=True)

    #: Largest message size as a power of two (22: 4 MiB).
    #:
    #: :type: :class:`int`
    max_log2_size = variable(int, value=22, loggable=True)

    @run_after("setup")
    def set_options(self):
        self.executable_opts = [
            "PingPong",
            "-iter", str(self.repetitions), "-iter_policy", "off",
            "-msglog", f"0:{self.max_log2_size}",
            "-mem", "2",
        ]

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
