"""IMB PingPong between two ranks on one node: one-way latency and bandwidth.

Google Cloud's "Accelerating MPI applications using Google Virtual NIC
(gVNIC)" judges a NIC by IMB PingPong between two VMs (2 KiB-4 MiB); Iwaida,
Suzuki and Midorikawa ("The Performance of Remote Memory Access over
InfiniBand") show that a buffer reused every iteration (cache-warm) overstates
real bandwidth several times, so the check runs cache-warm and cache-cold
(``-off_cache`` sized from the detected last-level cache). Each figure is the
median of several IMB runs in the job. How IMB is run and judged:
:class:`hpcval.rfm.imb.ImbPingPongBase`.
"""

import reframe as rfm

from hpcval.rfm.imb import ImbPingPongBase


@rfm.simple_test
class imb_pingpong_check(ImbPingPongBase):
    descr = "IMB PingPong: one-way latency and bandwidth between two ranks"
    valid_systems = ["*"]
    tags = {"mpi", "pingpong", "latency", "bandwidth"}
