"""Result-output cost of a CFD run (seed 001: V10, V11/POSIX and MPI-IO).

Output cost = run time with output − run time without, and the share of the
run spent writing, per strategy and rank count (strong scaling: the total grid
is fixed). ``none`` measures the noise of that difference (about zero). How the
proxy is built, run and judged: :class:`hpcval.rfm.cfdio.CfdioOutputCostBase`.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from hpcval.rfm.cfdio import CfdioOutputCostBase


@rfm.simple_test
class cfdio_output_cost_check(CfdioOutputCostBase):
    descr = "cfdio proxy: output cost and share per strategy and rank count"
    valid_systems = ["*"]
    tags = {"io", "cfdio", "output"}

    #: Output strategy of the proxy.
    strategy = parameter(["none", "per-rank-then-gather", "gather-to-root", "mpiio"],
                         loggable=True)
    #: MPI ranks (skipped above the partition's CPUs where those are known).
    ranks = parameter([1, 2, 4, 8, 16, 32, 64], loggable=True)

    @run_after("setup")
    def set_ranks(self) -> None:
        self.use_tasks(self.ranks)
