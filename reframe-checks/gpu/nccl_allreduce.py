"""NCCL all-reduce bus bandwidth over the GPUs of a node (nccl-tests'
``all_reduce_perf -b 8 -e 1G -f 2 -g N -c 1``, one process driving every GPU).

Bus bandwidth is nccl-tests' figure that compares across GPU counts (the
algorithm bandwidth times 2(n-1)/n for all-reduce); the judged one is the
out-of-place ``busbw`` at 1 GiB, where the NVLink/NVSwitch (or PCIe) fabric,
not the launch latency, sets it: a driver, CUDA or NCCL upgrade that slowed
collectives, or a link down, shows here. Results are checked (``-c 1``): a
wrong sum fails the check. Runs ``samples`` times in one job. Only on
partitions with the ``gpu`` feature and 2 or more GPUs per node; skipped with
the reason where nccl-tests (Spack ``nccl-tests``) is absent."""

import reframe as rfm

from hpcval.core.figures import Figure
from hpcval.rfm.gpu import NcclAllReduceBase


@rfm.simple_test
class nccl_allreduce_check(NcclAllReduceBase):
    descr = "nccl-tests all_reduce_perf: bus bandwidth over the GPUs of a node"
    figures = (Figure("busbw_1GiB", "GB/s", column="busbw", x=1 << 30),)
    tags = {"gpu", "nccl", "collectives", "bandwidth"}
