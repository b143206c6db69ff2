"""IMB Uniband and Biband: a window of non-blocking messages in one and in
both directions: sustained bandwidth and message rate rather than PingPong's
round trips. Median of several runs; how: :class:`hpcval.rfm.imb.ImbBase`."""

import reframe as rfm

from hpcval.rfm.imb import ImbBase, figure


@rfm.simple_test
class imb_uniband_biband_check(ImbBase):
    descr = "IMB Uniband/Biband: windowed bandwidth and message rate"
    valid_systems = ["*"]
    benchmarks = ["Uniband", "Biband"]
    msglog = (0, 20)
    figures = (
        figure("uniband_rate_8B", "Uniband", 8, "msg_per_sec"),
        figure("uniband_bw_1MiB", "Uniband", 1 << 20, "mbytes_per_sec"),
        figure("biband_bw_1MiB", "Biband", 1 << 20, "mbytes_per_sec"),
    )
    tags = {"mpi", "imb", "bandwidth", "message-rate"}
