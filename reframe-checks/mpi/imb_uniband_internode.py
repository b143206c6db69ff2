"""Many pairs of ranks streaming from one node to another: aggregate bandwidth.

Seed 000 measures the aggregate unidirectional bandwidth between two VMs with
OMB ``osu_mbw_mr`` and 30 processes per node. This check does the same with
IMB-MPI1 ``Uniband`` (part of Intel MPI, so it runs wherever IMB does): with
``2 x P`` ranks, rank ``i`` sends windows of non-blocking messages to rank
``i + P``. Placed in blocks (Slurm's default, ``--distribution=block``), the
first ``P`` ranks are on the first node and the other ``P`` on the second, so
all ``P`` pairs share the link between the two nodes. ``-npmin`` makes IMB
run with all ranks only. ``P`` defaults to the CPUs of a node.
"""

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, sanity_function, variable

from hpcval.parsers.imb import check_complete, parse_imb
from hpcval.rfm import HpcvalTest

#: Judged aggregate bandwidths: variable -> message size in bytes.
BANDWIDTH_SIZES = {"bw_agg_64KiB": 65536, "bw_agg_256KiB": 1 << 18, "bw_agg_512KiB": 1 << 19}


@rfm.simple_test
class imb_uniband_internode_check(HpcvalTest, rfm.RunOnlyRegressionTest):
    descr = "IMB Uniband: aggregate bandwidth of many rank pairs across two nodes"
    valid_systems = ["+internode"]
    valid_prog_environs = ["+mpi +imb"]
    executable = "IMB-MPI1"
    num_nodes = 2
    time_limit = "10m"
    tags = {"mpi", "internode", "bandwidth", "multi-pair"}

    #: Rank pairs, i.e. ranks per node; ``None``: the CPUs of a node.
    #:
    #: :type: :class:`int` or :obj:`None`
    pairs = variable(int, type(None), value=None, loggable=True)

    #: Repetitions per message size (``-iter N -iter_policy off``). Each
    #: repetition streams windows of messages per pair; over 1 GbE five
    #: repetitions of 256 KiB with two pairs take ~11 s, so keep this small.
    #:
    #: :type: :class:`int`
    repetitions = variable(int, value=5, loggable=True)

    #: Largest message size as a power of two (19: 512 KiB).
    #:
    #: :type: :class:`int`
    max_log2_size = variable(int, value=19, loggable=True)

    #: IMB's time budget per message size in seconds (``-time``); the run
    #: stops with ``time-out`` after this times the number of sizes.
    #:
    #: :type: :class:`float`
    seconds_per_size = variable(float, value=60.0, loggable=True)

    @run_after("setup")
    def set_layout(self):
        if self.pairs is None:
            self.pairs = max(1, int(self.current_partition.processor.num_cpus or 1))
        self.num_tasks_per_node = self.pairs
        self.num_tasks = 2 * self.pairs
        self.executable_opts = [
            "Uniband",
            "-npmin", str(self.num_tasks),
            "-iter", str(self.repetitions), "-iter_policy", "off",
            "-msglog", f"10:{self.max_log2_size}",
            "-time", f"{self.seconds_per_size:g}",
            "-mem", "2",
        ]

    @run_before("run")
    def block_placement(self):
        if type(self.job.launcher).__name__ == "SrunLauncher":
            self.job.launcher.options += ["--distribution=block"]

    @run_after("init")
    def set_perf_variables(self):
        for name, size in BANDWIDTH_SIZES.items():
            self.perf_variables[name] = sn.make_performance_function(
                self.figure(size, "mbytes_per_sec"), "MB/s")

    def table(self):
        return self.parse_stdout(
            lambda text, source: check_complete(parse_imb(text, source), "Uniband",
                                                BANDWIDTH_SIZES.values(),
                                                processes=self.num_tasks, source=source))

    @sn.deferrable
    def figure(self, size, column):
        return self.table().value(size, column)

    @sanity_function
    def complete_table(self):
        table = self.table()
        self.record_series("Uniband", "message size", "B", {
            "aggregate bandwidth": ("MB/s", table.series("mbytes_per_sec")),
            "message rate": ("msg/s", table.series("msg_per_sec")),
        }, {v: ("aggregate bandwidth", s) for v, s in BANDWIDTH_SIZES.items()})
        return True
