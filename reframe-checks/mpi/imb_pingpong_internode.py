"""IMB PingPong with one rank on each of two nodes: the network between them.

Google Cloud's "Accelerating MPI applications using Google Virtual NIC
(gVNIC)" judges a cloud NIC by IMB PingPong between two VMs (latency and
bandwidth, 2 KiB-4 MiB); here the two ranks go to two different nodes of a
partition that can span nodes (feature ``internode``), so every message
crosses the fabric. Repetitions per run are kept small: a 1 GbE link needs
~70 ms per 4 MiB round trip. Bandwidth is judged from 256 KiB up: a smaller
message can fit in a shaped link's burst allowance and pass at full speed.
How IMB is run and judged: :class:`hpcval.rfm.imb.ImbPingPongBase`.
"""

import reframe as rfm
from reframe.core.builtins import parameter

from hpcval.rfm.imb import ImbPingPongBase, figure


@rfm.simple_test
class imb_pingpong_internode_check(ImbPingPongBase):
    descr = "IMB PingPong between two nodes, one rank per node"
    valid_systems = ["+internode"]
    nodes = 2
    repetitions = 20
    figures = (
        figure("lat_0B", "PingPong", 0, "t_usec"),
        figure("lat_8B", "PingPong", 8, "t_usec"),
        figure("bw_256KiB", "PingPong", 1 << 18, "mbytes_per_sec"),
        figure("bw_1MiB", "PingPong", 1 << 20, "mbytes_per_sec"),
        figure("bw_4MiB", "PingPong", 4 << 20, "mbytes_per_sec"),
    )
    tags = {"mpi", "internode", "pingpong", "latency", "bandwidth"}

    #: The network, not the memory system, is under test here: one buffer.
    cache = parameter(["warm"], loggable=True)
