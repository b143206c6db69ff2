"""GPU-aware MPI point-to-point: messages between GPU buffers.

* ``osu_bw_cuda_check`` / ``osu_latency_cuda_check``: OMB ``osu_bw`` and
  ``osu_latency`` with ``-d cuda D D``, two ranks on one node, each on its own
  GPU (CUDA IPC / NVLink path of the MPI library).
* ``osu_bw_cuda_internode_check``: the same bandwidth between two nodes, one
  rank (and GPU) per node (GPUDirect RDMA, or staging through host memory
  where it is off: several times slower at large messages).
* ``imb_gpu_pingpong_check``: Intel MPI's ``IMB-MPI1-GPU`` PingPong with
  device buffers (``-mem_alloc_type device``, ``I_MPI_OFFLOAD=1``), with the
  Intel MPI from PyPI that every site has.

Only on partitions with the ``gpu`` feature and a GPU per rank; OMB skipped
with the reason where it is not a CUDA build (Spack:
``osu-micro-benchmarks +cuda``). How: :mod:`hpcval.rfm.gpu`."""

import reframe as rfm

from hpcval.rfm.gpu import ImbGpuPingPongBase, OmbCudaBase
from hpcval.rfm.omb import figure


@rfm.simple_test
class osu_bw_cuda_check(OmbCudaBase):
    descr = "OMB osu_bw -d cuda D D: bandwidth between GPU buffers of two GPUs of a node"
    program = "osu_bw"
    message_sizes = (1, 4 << 20)
    iterations = 20
    warmup = 5
    validation = True
    figures = (figure("bw_1MiB", "bandwidth_mb_per_s", 1 << 20),
               figure("bw_4MiB", "bandwidth_mb_per_s", 4 << 20))
    tags = {"gpu", "mpi", "omb", "bandwidth"}


@rfm.simple_test
class osu_latency_cuda_check(OmbCudaBase):
    descr = "OMB osu_latency -d cuda D D: latency between GPU buffers of two GPUs of a node"
    program = "osu_latency"
    message_sizes = (0, 65536)
    iterations = 200
    warmup = 20
    validation = True
    figures = (figure("lat_8B", "latency_us", 8), figure("lat_64KiB", "latency_us", 65536))
    tags = {"gpu", "mpi", "omb", "latency"}


@rfm.simple_test
class osu_bw_cuda_internode_check(OmbCudaBase):
    descr = "OMB osu_bw -d cuda D D between two nodes, one rank and GPU per node"
    valid_systems = ["+gpu +internode"]
    nodes = 2
    program = "osu_bw"
    message_sizes = (1, 4 << 20)
    iterations = 20
    warmup = 5
    validation = True
    figures = (figure("bw_1MiB", "bandwidth_mb_per_s", 1 << 20),
               figure("bw_4MiB", "bandwidth_mb_per_s", 4 << 20))
    tags = {"gpu", "mpi", "omb", "internode", "bandwidth"}


@rfm.simple_test
class imb_gpu_pingpong_check(ImbGpuPingPongBase):
    descr = "IMB-MPI1-GPU PingPong between device buffers of two GPUs of a node"
    tags = {"gpu", "mpi", "imb", "pingpong"}
