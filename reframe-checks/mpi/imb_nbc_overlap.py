"""CPU left to the application during non-blocking collectives.

G. Shainer's "Offloading vs. onloading: the case of CPU utilization" contrasts
an offloading interconnect (0.8 % CPU at ~100 Gb/s) with an onloading one
(59 %). IMB-NBC measures it without busy-polling benchmarks: it times a
non-blocking collective alone (``t_pure``), then overlapped with computation
(``t_ovrl``), and reports ``overlap[%]``, the share of the collective the CPU
could spend computing, and ``t_CPU``. Median of several runs; how:
:class:`hpcval.rfm.imb.ImbBase`."""

import reframe as rfm

from hpcval.rfm.imb import ImbBase, figure


@rfm.simple_test
class imb_nbc_overlap_check(ImbBase):
    descr = "IMB-NBC Iallreduce/Ialltoall: computation/communication overlap"
    valid_systems = ["*"]
    program = "IMB-NBC"
    benchmarks = ["Iallreduce", "Ialltoall"]
    msglog = (10, 20)
    figures = (
        figure("iallreduce_overlap_1MiB", "Iallreduce", 1 << 20, "overlap_pct", "higher"),
        figure("iallreduce_t_pure_1MiB", "Iallreduce", 1 << 20, "t_pure_usec"),
        figure("ialltoall_overlap_1MiB", "Ialltoall", 1 << 20, "overlap_pct", "higher"),
        figure("ialltoall_t_pure_1MiB", "Ialltoall", 1 << 20, "t_pure_usec"),
    )
    tags = {"mpi", "imb", "nbc", "cpu-cost"}
