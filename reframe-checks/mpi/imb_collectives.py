"""IMB Allreduce and Alltoall at every process count from 2 up to the
partition's CPUs (``-npmin 2``): the collectives whose algorithms seed 002
tunes. Judged at the full count, averaged over ranks (IMB's min/avg/max per
count are kept in the stored series), as the median of several runs with its
spread; how: :class:`hpcval.rfm.imb.ImbSampledBase`."""

import reframe as rfm
from reframe.core.builtins import run_after

from hpcval.rfm.imb import ImbSampledBase, figure


@rfm.simple_test
class imb_collectives_check(ImbSampledBase):
    descr = "IMB Allreduce/Alltoall: collective time at 2..N ranks"
    valid_systems = ["*"]
    benchmarks = ["Allreduce", "Alltoall"]
    msglog = (3, 16)
    imb_options = ["-npmin", "2"]
    figures = (
        figure("allreduce_t_8B", "Allreduce", 8, "t_avg_usec"),
        figure("allreduce_t_64KiB", "Allreduce", 65536, "t_avg_usec"),
        figure("alltoall_t_8B", "Alltoall", 8, "t_avg_usec"),
        figure("alltoall_t_64KiB", "Alltoall", 65536, "t_avg_usec"),
    )
    tags = {"mpi", "imb", "collectives"}

    @run_after("setup")
    def use_every_cpu(self):
        self.num_tasks = max(2, int(self.current_partition.processor.num_cpus or 2))
