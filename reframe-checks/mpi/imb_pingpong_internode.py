"""IMB PingPong with one rank on each of two nodes: the network between them.

Seed 000 judges a cloud NIC by IMB PingPong between two VMs (latency and
bandwidth, 2 KiB-4 MiB); here the two ranks go to two different nodes of a
partition that can span nodes (feature ``internode``), so every message
crosses the fabric. Repetitions are kept small: a 1 GbE link needs ~70 ms per
4 MiB round trip. Bandwidth is judged from 256 KiB up: a smaller message can
fit in a shaped link's burst allowance and pass at full speed. How IMB is run
and judged: :class:`hpcval.rfm.imb.ImbPingPongBase`.
"""

import reframe as rfm
from reframe.core.builtins import parameter

from hpcval.rfm.imb import ImbPingPongBase


@rfm.simple_test
class imb_pingpong_internode_check(ImbPingPongBase):
    descr = "IMB PingPong between two nodes, one rank per node"
    valid_systems = ["+internode"]
    num_tasks_per_node = 1
    repetitions = 100
    bandwidth_sizes = {"bw_256KiB": 1 << 18, "bw_1MiB": 1 << 20, "bw_4MiB": 4 << 20}
    tags = {"mpi", "internode", "pingpong", "latency", "bandwidth"}

    #: The network, not the memory system, is under test here: one buffer.
    cache = parameter(["warm"], loggable=True)
