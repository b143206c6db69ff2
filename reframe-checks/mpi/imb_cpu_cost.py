"""CPU a blocking bandwidth transfer costs the application (seed 003).

Seed 003: at ~100 Gb/s an offloading interconnect used 0.8 % CPU, an
onloading one 59 % (CPU availability 99.2 % vs 40.4 %), measured during a
bandwidth test rather than a polling latency test. This check streams 1 MiB
messages between two ranks with IMB ``Uniband`` and measures each rank's CPU
time over its run (``getrusage``; instructions and cycles from ``perf stat``
where the kernel exposes hardware counters, else reported as
``unsupported``/``unavailable`` in the ``counters`` field). ``wait_mode``:
``poll`` is the MPI library's default; ``wait`` asks Intel MPI not to spin
(``I_MPI_WAIT_MODE=1``), the non-polling case seed 003 asks for. Figures:
CPU busy and CPU available (% of a core, median over ranks) and the
bandwidth the transfer reached. On an ``internode`` partition the two ranks
run on two nodes. Logic: :mod:`hpcval.cpucost`."""

import sys
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.cpucost import cpu_available_pct, cpu_busy_pct, parse_cpucost
from hpcval.errors import HpcvalError
from hpcval.parsers.imb import check_complete, parse_imb
from hpcval.rfm import HpcvalTest

SIZE = 1 << 20


@rfm.simple_test
class imb_cpu_cost_check(HpcvalTest, rfm.RunOnlyRegressionTest):
    descr = "CPU time of a blocking 1 MiB stream between two ranks (IMB Uniband)"
    valid_systems = ["*"]
    valid_prog_environs = ["+mpi +imb"]
    num_tasks = 2
    executable = sys.executable
    time_limit = "10m"
    tags = {"mpi", "imb", "cpu-cost"}

    #: ``poll``: the library's default progress; ``wait``: Intel MPI wait mode.
    wait_mode = parameter(["poll", "wait"], loggable=True)

    #: Repetitions of the 1 MiB window (64 messages each): the stream must
    #: outlast MPI start-up, which the CPU time also covers.
    #:
    #: :type: :class:`int`
    repetitions = variable(int, value=60, loggable=True)

    #: Hardware counter state reported by the ranks (ok/unsupported/unavailable).
    #:
    #: :type: :class:`str`
    counters = variable(str, value="unknown", loggable=True)

    @run_after("setup")
    def set_command(self):
        impi = "impi" in self.current_environ.features
        self.skip_if(self.wait_mode == "wait" and not impi,
                     "wait mode is set through Intel MPI's I_MPI_WAIT_MODE")
        if impi:
            # explicit both ways: a site's environment may set either
            self.env_vars["I_MPI_WAIT_MODE"] = "1" if self.wait_mode == "wait" else "0"
        if "internode" in self.current_partition.features:
            # one rank per node: the stream crosses the network
            self.num_tasks_per_node = 1
        self.executable_opts = [
            "-m", "hpcval.cpucost", "--", "IMB-MPI1", "Uniband", "-npmin", str(self.num_tasks),
            "-msglog", "20:20", "-iter", str(self.repetitions), "-iter_policy", "off",
            "-time", "120",
        ]

    @run_after("init")
    def set_perf_variables(self):
        self.perf_variables["cpu_busy"] = sn.make_performance_function(
            self.figure("busy"), "%")
        self.perf_variables["cpu_available"] = sn.make_performance_function(
            self.figure("available"), "%")
        self.perf_variables["bw_1MiB"] = sn.make_performance_function(
            self.figure("bandwidth"), "MB/s")

    def records(self):
        path = Path(self.stagedir) / str(self.stderr.evaluate())
        try:
            records = parse_cpucost(path.read_text(errors="replace"), str(path))
        except (OSError, HpcvalError) as err:
            raise SanityError(str(err)) from None
        if len(records) != self.num_tasks:
            raise SanityError(f"{path}: CPU cost of {len(records)} rank(s), "
                              f"{self.num_tasks} expected")
        return records

    @sn.deferrable
    def figure(self, which):
        if which == "bandwidth":
            return self.parse_stdout(lambda text, source: check_complete(
                parse_imb(text, source), "Uniband", [SIZE], processes=self.num_tasks,
                source=source)).value(SIZE, "mbytes_per_sec")
        records = self.records()
        return cpu_busy_pct(records) if which == "busy" else cpu_available_pct(records)

    @sanity_function
    def measured(self):
        records = self.records()
        self.counters = ",".join(sorted({r.counters for r in records}))
        if "internode" in self.current_partition.features:
            nodes = sorted(set(self.job.nodelist or []))
            if len(nodes) != 2:
                raise SanityError(f"the ranks must run on two nodes; the job ran on {nodes}")
        self.figure("bandwidth").evaluate()
        return True
