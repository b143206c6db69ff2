"""IMB-P2P PingPong and Unirandom: the point-to-point suite's own ping-pong
and random-partner streaming, with message rate. Median of several runs; how:
:class:`hpcval.rfm.imb.ImbBase`."""

import reframe as rfm

from hpcval.rfm.imb import ImbBase, figure


@rfm.simple_test
class imb_p2p_check(ImbBase):
    descr = "IMB-P2P PingPong/Unirandom: bandwidth and message rate"
    valid_systems = ["*"]
    program = "IMB-P2P"
    benchmarks = ["PingPong", "Unirandom"]
    msglog = (10, 20)
    figures = (
        figure("p2p_pingpong_bw_1MiB", "PingPong", 1 << 20, "mbytes_per_sec"),
        figure("unirandom_bw_1MiB", "Unirandom", 1 << 20, "mbytes_per_sec"),
        figure("unirandom_rate_1KiB", "Unirandom", 1024, "msg_per_sec"),
    )
    tags = {"mpi", "imb", "p2p", "message-rate"}
