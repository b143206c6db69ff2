"""hpcval's gpubench on every GPU of a node: host<->device copies on pinned
memory, GEMM throughput, and copies between every ordered pair of GPUs.

* ``gpubench_copy_check``: ``h2d_bw`` and ``d2h_bw`` (GB/s, 256 MiB per copy
  from/to pinned host memory): a PCIe link trained at a lower width or
  generation, a GPU on the far socket, a slow host memory path.
* ``gpubench_gemm_check``: ``dgemm`` and ``sgemm`` (TFLOP/s, cuBLAS, N = 8192):
  the GPU's compute clocks (power cap, thermal slowdown, clocks locked low).
* ``gpubench_p2p_check``: ``p2p_bw`` (GB/s, 256 MiB per copy), every ordered
  pair of GPUs of a node with two or more: an NVLink or PCIe peer path that
  is down or slow.

Each figure is the slowest GPU's (or pair's) repetitions; every GPU's median is
stored as a series. Only on partitions with the ``gpu`` feature; skipped with
the reason where gpubench (Spack ``hpcval-gpubench``, ``proxies/gpubench``) is
absent. How: :mod:`hpcval.rfm.gpu`."""

import reframe as rfm

from hpcval.core.figures import Figure
from hpcval.rfm.gpu import GpuBenchBase


@rfm.simple_test
class gpubench_copy_check(GpuBenchBase):
    descr = "gpubench: host-to-device and device-to-host bandwidth on pinned memory"
    figures = (Figure("h2d_bw", "GB/s"), Figure("d2h_bw", "GB/s"))
    tags = {"gpu", "pcie", "bandwidth", "gpubench"}

    def runs(self) -> list[tuple[str, int, list[str]]]:
        size = ["--bytes", str(self.copy_bytes)]
        return [(f"{mode}_bw", d, self.gpubench(mode, d, *size))
                for mode in ("h2d", "d2h") for d in range(self.gpu_count)]


@rfm.simple_test
class gpubench_gemm_check(GpuBenchBase):
    descr = "gpubench: cuBLAS DGEMM and SGEMM throughput of each GPU"
    figures = (Figure("dgemm", "TFLOP/s"), Figure("sgemm", "TFLOP/s"))
    tags = {"gpu", "compute", "gemm", "gpubench"}

    def runs(self) -> list[tuple[str, int, list[str]]]:
        return [(name, d, self.gpubench("gemm", d, "--n", str(self.gemm_n),
                                        "--precision", precision))
                for name, precision in (("dgemm", "double"), ("sgemm", "single"))
                for d in range(self.gpu_count)]


@rfm.simple_test
class gpubench_p2p_check(GpuBenchBase):
    descr = "gpubench: copy bandwidth between every ordered pair of GPUs of a node"
    figures = (Figure("p2p_bw", "GB/s"),)
    min_gpus = 2
    tags = {"gpu", "nvlink", "bandwidth", "gpubench"}

    def runs(self) -> list[tuple[str, int, list[str]]]:
        n = self.gpu_count
        return [("p2p_bw", src * n + dst,
                 self.gpubench("p2p", src, "--peer", str(dst), "--bytes", str(self.copy_bytes)))
                for src in range(n) for dst in range(n) if src != dst]
