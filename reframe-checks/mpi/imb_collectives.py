"""IMB Allreduce and Alltoall at every process count from 2 up to the
partition's CPUs (``-npmin 2``): the collectives whose algorithms M.
Jayadevan and D. Wetherall tune in "Getting higher MPI performance for HPC
applications on Google Cloud". Judged at the full count, averaged over ranks
(IMB's min/avg/max per count are kept in the stored series), as the median of
several runs; how: :class:`hpcval.rfm.imb.ImbBase`."""

import reframe as rfm

from hpcval.rfm.imb import ImbBase, figure


@rfm.simple_test
class imb_collectives_check(ImbBase):
    descr = "IMB Allreduce/Alltoall: collective time at 2..N ranks"
    valid_systems = ["*"]
    rank_count = "node"
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
