"""OSU ``osu_mbw_mr``: aggregate bandwidth and message rate of many pairs.

Google Cloud's "Accelerating MPI applications using Google Virtual NIC
(gVNIC)" runs ``osu_mbw_mr`` with 30 processes per node on two VMs and
compares the aggregate unidirectional bandwidth of two NICs (+57 % at
100 Gbps). Rank ``r`` streams windows of messages to rank ``r + pairs``; on
a partition with the ``internode`` feature the job takes two nodes with
``pairs`` ranks each in block placement, so every pair crosses the network,
and the sanity asserts the node list. ``window`` is a parameter: a small
window shows latency-bound streaming, the default 64 the bandwidth bound.
Each figure is the median of several runs in the job. Skipped with a reason
where OMB is not installed: :mod:`hpcval.rfm.omb`."""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from hpcval.rfm.omb import OmbMultiPairBase, figure


@rfm.simple_test
class osu_mbw_mr_check(OmbMultiPairBase):
    descr = "OMB osu_mbw_mr: aggregate bandwidth and message rate of rank pairs"
    valid_systems = ["*"]

    #: Messages in flight per pair (``-W``).
    window_size = parameter([16, 64], loggable=True)

    message_sizes = (1, 1 << 20)
    iterations = 5
    warmup = 2
    figures = (figure("msg_rate_8B", "messages_per_s", 8),
               figure("bw_agg_64KiB", "mb_per_s", 65536),
               figure("bw_agg_1MiB", "mb_per_s", 1 << 20))
    tags = {"mpi", "omb", "bandwidth", "multi-pair"}

    @run_after("init")
    def set_window(self):
        self.window = self.window_size
