"""CPU a blocking bandwidth transfer costs the application.

G. Shainer's "Offloading vs. onloading: the case of CPU utilization": at
~100 Gb/s an offloading interconnect used 0.8 % CPU, an onloading one 59 %
(CPU availability 99.2 % vs 40.4 %), measured during a bandwidth test rather
than a polling latency test. This check streams 1 MiB messages between two
ranks with IMB ``Uniband`` and measures each rank's CPU time over its run
(``getrusage``; instructions and cycles from ``perf stat`` where the kernel
exposes hardware counters, else reported as ``unsupported``/``unavailable``
in the ``counters`` field). ``wait_mode``: ``poll`` is the MPI library's
default; ``wait`` asks Intel MPI not to spin (``I_MPI_WAIT_MODE=1``), the
non-polling case the article asks for. On an ``internode`` partition the two
ranks run on two nodes. How: :class:`hpcval.rfm.imb.ImbCpuCostBase`."""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from hpcval.rfm.imb import ImbCpuCostBase


@rfm.simple_test
class imb_cpu_cost_check(ImbCpuCostBase):
    descr = "CPU time of a blocking 1 MiB stream between two ranks (IMB Uniband)"
    valid_systems = ["*"]
    nodes = "internode"
    tags = {"mpi", "imb", "cpu-cost"}

    #: ``poll``: the library's default progress; ``wait``: Intel MPI wait mode.
    wait_mode = parameter(["poll", "wait"], loggable=True)

    @run_after("setup")
    def set_wait_mode(self):
        impi = "impi" in self.current_environ.features
        self.skip_if(self.wait_mode == "wait" and not impi,
                     "wait mode is set through Intel MPI's I_MPI_WAIT_MODE")
        if impi:
            # explicit both ways: a site's environment may set either
            self.env_vars["I_MPI_WAIT_MODE"] = "1" if self.wait_mode == "wait" else "0"
