"""IMB Sendrecv and Exchange: a chain and a ring of neighbours exchanging
messages, the point-to-point pattern of halo exchanges (the CFD and weather
codes of "Getting higher MPI performance for HPC applications on Google
Cloud"). Each figure is the median of several runs; how:
:class:`hpcval.rfm.imb.ImbBase`."""

import reframe as rfm

from hpcval.rfm.imb import ImbBase, figure


@rfm.simple_test
class imb_sendrecv_exchange_check(ImbBase):
    descr = "IMB Sendrecv/Exchange: neighbour exchange time and bandwidth"
    valid_systems = ["*"]
    benchmarks = ["Sendrecv", "Exchange"]
    figures = (
        figure("sendrecv_t_8B", "Sendrecv", 8, "t_avg_usec"),
        figure("sendrecv_bw_1MiB", "Sendrecv", 1 << 20, "mbytes_per_sec"),
        figure("exchange_t_8B", "Exchange", 8, "t_avg_usec"),
        figure("exchange_bw_1MiB", "Exchange", 1 << 20, "mbytes_per_sec"),
    )
    tags = {"mpi", "imb", "p2p", "bandwidth"}
