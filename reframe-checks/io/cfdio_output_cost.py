"""Result-output cost of a CFD run: the three output strategies of Software
Cradle's "SMBDirect BMT まとめ" (V10 per-rank-then-gather, V11/POSIX
gather-to-root, MPI-IO).

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
    #: MPI ranks (no case on a partition with fewer CPUs).
    ranks = parameter([1, 2, 4, 8, 16, 32, 64], loggable=True)

    @run_after("init")
    def set_ranks(self) -> None:
        self.rank_count = self.ranks
