"""Base tests of the GPU checks (``reframe-checks/gpu/``).

A GPU check runs only on partitions with the ``gpu`` feature
(``valid_systems = ["+gpu"]``, written by ``hpcval site new`` where
``nvidia-smi`` finds GPUs, :mod:`hpcval.node.gpus`); it reads the node's GPUs
from the partition's ReFrame ``devices`` (``select_devices("gpu")``) and skips,
naming the reason, where the partition declares none or the program is
absent. Nothing here needs a GPU to be imported or listed.

:class:`PerGpuBase` runs a program once per GPU of the node (or per ordered
pair of GPUs), one process at a time, each into its own output file: a figure's
samples are those of the node's *worst* GPU (or pair), since a node is as fast
as its slowest GPU for a job that uses them all; every GPU's median is stored
as a series (x: the GPU's index, or ``source x GPUs + destination`` for
pairs), so the report and ``hpcval vet`` can name which one.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.core.errors import HpcvalError
from hpcval.core.figures import Figure
from hpcval.node.gpus import GPU_FEATURE, babelstream_array_elements
from hpcval.parsers import babelstream, gpubench, nccl_tests
from hpcval.rfm.base import HpcvalTest
from hpcval.rfm.imb import ImbBase
from hpcval.rfm.imb import figure as imb_figure
from hpcval.rfm.omb import OmbBase

#: Directories (colon-separated) searched for GPU programs before ``PATH``.
GPU_DIR_VAR = "HPCVAL_GPU_DIR"

#: Output files of the runs after the first (``gpu-run-<k>.out`` / ``.err``).
RUN_OUTPUT = "gpu-run-{}.{}"


def partition_gpus(partition: Any) -> int:
    """GPUs per node the partition declares (its ``devices`` of type ``gpu``)."""
    return sum(int(getattr(d, "num_devices", 1) or 0)
               for d in partition.select_devices("gpu"))


def links_cuda(program: str) -> bool:
    """True where *program* names the CUDA runtime among its libraries (an OMB
    or IMB build without CUDA cannot use GPU buffers)."""
    try:
        data = Path(program).read_bytes()
    except OSError:
        return False
    return b"libcudart" in data or b"libcuda.so" in data


class GpuBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """One process on one node of a ``gpu`` partition, the partition's GPUs known."""

    valid_systems = [f"+{GPU_FEATURE}"]
    valid_prog_environs = ["+plain"]
    rank_count = 1
    time_limit = "10m"

    #: GPUs per node, from the partition's ``devices``.
    #:
    #: :type: :class:`int`
    gpu_count = variable(int, value=0, loggable=True)

    #: Fewest GPUs per node the check needs (2 for GPU-to-GPU figures).
    #:
    #: :type: :class:`int`
    min_gpus = variable(int, value=1)

    #: Path of the program that ran.
    #:
    #: :type: :class:`str`
    program_path = variable(str, value="", loggable=True)

    @run_after("setup")
    def _gpu_setup(self) -> None:
        part = self.current_partition
        self.gpu_count = partition_gpus(part)
        self.skip_if(self.gpu_count == 0,
                     f"partition {part.fullname} has the '{GPU_FEATURE}' feature but no "
                     "devices of type 'gpu' in its site config: add "
                     "\"devices\": [{\"type\": \"gpu\", \"num_devices\": N}] "
                     "(docs/adding-a-gpu-partition.md)")
        self.skip_if(self.gpu_count < self.min_gpus,
                     f"partition {part.fullname} has {self.gpu_count} GPU(s) per node: "
                     f"this figure needs {self.min_gpus}")
        self.num_gpus_per_node = self.gpu_count
        self.job.launcher = getlauncher("local")()  # one process: no MPI launcher
        self.configure()

    def configure(self) -> None:
        """Find the program and set the options (a final base implements it)."""

    def gpu_program(self, name: str, package: str) -> str:
        """Path of *name* (Spack *package*), from ``$HPCVAL_GPU_DIR`` or
        ``PATH``; skips naming the package where absent."""
        self.program_path = self.find_program(name, GPU_DIR_VAR, package=package, mpi=False)
        return self.program_path


class PerGpuBase(GpuBase):
    """A program run once per GPU (or pair of GPUs): a final base implements
    :meth:`runs` and :meth:`values`."""

    #: ``samples`` are the program's own repetitions (:attr:`HpcvalTest.samples`)
    #: where it prints one line per repetition, else runs of it per GPU.
    def runs(self) -> list[tuple[str, int, list[str]]]:
        """``(figure, x, argv)`` of every run, in order; x is the GPU (or pair)."""
        raise NotImplementedError

    def values(self, text: str, source: str, figure: str) -> list[float]:
        """The samples one run's output gives for *figure*."""
        raise NotImplementedError

    @run_before("run")
    def _write_runs(self) -> None:
        runs = self.runs()
        first = runs[0][2]
        self.executable, self.executable_opts = first[0], first[1:]
        self.postrun_cmds = [
            f"{self.launch_command(*argv)} > {RUN_OUTPUT.format(k, 'out')} "
            f"2> {RUN_OUTPUT.format(k, 'err')}"
            for k, (_, _, argv) in enumerate(runs[1:], start=2)]

    def sample_outputs(self, stream: str = "out") -> list[Path]:
        """Output of every run of the job, in the order of :meth:`runs`."""
        own = self.stdout if stream == "out" else self.stderr
        stage = Path(self.stagedir)
        return [stage / str(own.evaluate()),
                *(stage / RUN_OUTPUT.format(k, stream) for k in range(2, len(self.runs()) + 1))]

    def per_gpu(self) -> dict[str, dict[int, list[float]]]:
        """Samples of each figure, by GPU (or pair)."""
        cached: dict[str, dict[int, list[float]]] | None = getattr(self, "_gpu_samples", None)
        if cached is not None:
            return cached
        out: dict[str, dict[int, list[float]]] = {}
        for (fig, x, _), path in zip(self.runs(), self.sample_outputs(), strict=True):
            try:
                text = path.read_text(errors="replace")
            except OSError as err:
                raise SanityError(f"cannot read {path}: {err.strerror}") from None
            try:
                out.setdefault(fig, {}).setdefault(x, []).extend(
                    self.values(text, str(path), fig))
            except HpcvalError as err:
                raise SanityError(str(err)) from None
        self._gpu_samples = out
        return out

    def measure(self) -> dict[str, list[float]]:
        measured: dict[str, list[float]] = {}
        for fig in self.figures:
            by_x = self.per_gpu().get(fig.name, {})
            if not by_x:
                continue
            pick = min if fig.direction == "higher" else max
            worst = pick(by_x, key=lambda x: statistics.median(by_x[x]))
            measured[fig.name] = by_x[worst]
        return measured

    @sanity_function
    def measured(self) -> bool:
        data = self.per_gpu()
        pairs = any(x >= self.gpu_count for runs in data.values() for x in runs)
        label = "GPU pair (source x GPUs + destination)" if pairs else "GPU index"
        for fig in self.figures:
            by_x = data.get(fig.name, {})
            points = [(float(x), statistics.median(v)) for x, v in sorted(by_x.items())]
            self.record_series(f"{fig.name} per GPU (median of each)", label, "",
                               {fig.name: (fig.unit, points)})
        self.figure_samples()
        return True


class BabelStreamBase(PerGpuBase):
    """BabelStream (CUDA build, Spack ``babelstream +cuda``) on each GPU: the
    Triad rate, arrays sized from the device's memory and L2
    (:func:`hpcval.node.gpus.babelstream_array_elements`)."""

    spack_package = "babelstream"
    figures = (Figure("triad", "MB/s", column="Triad"),)

    #: BabelStream's CUDA program (``cuda-stream`` as its CMake build names it).
    #:
    #: :type: :class:`str`
    program = variable(str, value="cuda-stream", loggable=True)

    #: Elements per array; from the partition's ``gpu_memory_bytes`` and
    #: ``gpu_l2_bytes`` extras when not set.
    #:
    #: :type: :class:`int` or :obj:`None`
    array_size = variable(int, type(None), value=None, loggable=True)

    #: BabelStream's own repetitions per run (``--numtimes``): it reports the best.
    #:
    #: :type: :class:`int`
    numtimes = variable(int, value=100, loggable=True)

    def configure(self) -> None:
        self.gpu_program(self.program, "babelstream")
        if self.array_size is None:
            extras = self.current_partition.extras
            try:
                self.array_size = babelstream_array_elements(
                    extras.get("gpu_memory_bytes"), extras.get("gpu_l2_bytes"))
            except HpcvalError as err:
                self.skip(f"partition {self.current_partition.fullname}: {err}")

    def runs(self) -> list[tuple[str, int, list[str]]]:
        return [("triad", d, [self.program_path, "--device", str(d), "--arraysize",
                              str(self.array_size), "--numtimes", str(self.numtimes)])
                for d in range(self.gpu_count) for _ in range(self.samples)]

    def values(self, text: str, source: str, figure: str) -> list[float]:
        result = babelstream.check_complete(babelstream.parse_babelstream(text, source))
        want_mb = (self.array_size or 0) * 8 / 1e6
        if result.array_mb is not None and abs(result.array_mb - want_mb) > 0.1 + 1e-3 * want_mb:
            raise SanityError(f"{source}: BabelStream ran arrays of {result.array_mb} MB, "
                              f"{want_mb:.1f} MB asked for (--arraysize {self.array_size})")
        return [result.rate("Triad")]


class GpuBenchBase(PerGpuBase):
    """hpcval's ``gpubench`` (``proxies/gpubench``, Spack ``hpcval-gpubench``):
    each run prints ``samples`` timed repetitions, one line each."""

    spack_package = "hpcval-gpubench"

    #: Bytes per copy (h2d, d2h, p2p): 256 MiB, far above any PCIe or NVLink
    #: latency term, so the figure is the link's streaming bandwidth.
    #:
    #: :type: :class:`int`
    copy_bytes = variable(int, value=256 << 20, loggable=True)

    #: Matrix order of the GEMM figures (8192: 1.1 TFLOP per DGEMM call).
    #:
    #: :type: :class:`int`
    gemm_n = variable(int, value=8192, loggable=True)

    def configure(self) -> None:
        self.gpu_program("gpubench", "hpcval-gpubench")

    def gpubench(self, mode: str, device: int, *extra: str) -> list[str]:
        return [self.program_path, mode, "--device", str(device), "--reps", str(self.samples),
                *extra]

    def values(self, text: str, source: str, figure: str) -> list[float]:
        # a figure is named after its mode: h2d_bw, d2h_bw, p2p_bw, dgemm, sgemm
        mode = "gemm" if figure.endswith("gemm") else figure.split("_")[0]
        return gpubench.check_complete(gpubench.parse_gpubench(text, source), mode).values


class NcclAllReduceBase(GpuBase):
    """nccl-tests' ``all_reduce_perf`` over every GPU of the node from one
    process (``-g N``), ``samples`` runs in the job; the figure is the
    out-of-place bus bandwidth at one large size."""

    spack_package = "nccl-tests"
    min_gpus = 2

    #: Largest size of the sweep (bytes), and the judged one.
    #:
    #: :type: :class:`int`
    max_bytes = variable(int, value=1 << 30, loggable=True)

    def configure(self) -> None:
        self.executable = self.gpu_program("all_reduce_perf", "nccl-tests")
        self.executable_opts = ["-b", "8", "-e", str(self.max_bytes), "-f", "2",
                                "-g", str(self.gpu_count), "-c", "1"]

    @run_before("run")
    def repeat_runs(self) -> None:
        self.postrun_cmds = self.repeat_in_job()

    def results(self) -> list[nccl_tests.NcclResult]:
        return self.parse_samples(lambda text, source: nccl_tests.check_complete(
            nccl_tests.parse_nccl_tests(text, source), self.max_bytes))

    def measure(self) -> dict[str, list[float]]:
        results = self.results()
        return {f.name: [r.busbw(int(f.x or self.max_bytes)) for r in results]
                for f in self.figures}

    @sanity_function
    def complete(self) -> bool:
        results = self.results()
        for result in results:
            # a GPU hidden from the job (CUDA_VISIBLE_DEVICES, a GPU fallen off the bus)
            if result.devices and len(result.devices) != self.gpu_count:
                raise SanityError(f"{result.source}: all_reduce_perf ran on "
                                  f"{len(result.devices)} GPU(s), the node has "
                                  f"{self.gpu_count} (partition devices)")
        first = results[0]
        self.record_series(f"all_reduce_perf busbw, {self.gpu_count} GPUs "
                           f"(median of {len(results)})", "message size", "B",
                           {"busbw": ("GB/s", [(float(s), statistics.median(
                               r.busbw(s) for r in results)) for s in first.sizes()])},
                           {f.name: ("busbw", f.x or self.max_bytes) for f in self.figures})
        self.figure_samples()
        return True


def skip_without_cuda(test: HpcvalTest, program: str) -> None:
    """Skip *test* where *program* is not linked against CUDA."""
    test.skip_if(not links_cuda(program),
                 f"{program} is not linked against the CUDA runtime: GPU buffers need a CUDA "
                 "build (Spack: osu-micro-benchmarks +cuda)")



class _GpuMpiMixin(rfm.RegressionTestPlugin):
    """MPI ranks that each use a GPU of their node: skipped where the node has
    fewer GPUs than ranks on it (the final base selects ``gpu`` partitions)."""

    @run_after("setup")
    def _gpu_ranks(self) -> None:
        part = self.current_partition
        ranks = self.rank_count if isinstance(self.rank_count, int) else 2
        per_node = max(1, ranks // max(1, self.node_count()))
        gpus = partition_gpus(part)
        self.skip_if(gpus < per_node,
                     f"partition {part.fullname} has {gpus} GPU(s) per node, {per_node} "
                     "rank(s) per node need one each")
        self.num_gpus_per_node = per_node


class OmbCudaBase(_GpuMpiMixin, OmbBase):
    """An OMB point-to-point program between GPU buffers (``-d cuda D D``):
    each rank's buffers on its own GPU (OMB picks the GPU from the local rank),
    so the path measured is the MPI library's GPU path (CUDA IPC or NVLink
    within a node, GPUDirect RDMA between nodes, or staging through the host
    where neither works). Skipped where the OMB program is not a CUDA build."""

    valid_systems = [f"+{GPU_FEATURE}"]
    omb_options = ["-d", "cuda", "D", "D"]

    @run_before("run")
    def _cuda_build(self) -> None:
        if self.omb_program_path:
            skip_without_cuda(self, self.omb_program_path)


class ImbGpuPingPongBase(_GpuMpiMixin, ImbBase):
    """Intel MPI's ``IMB-MPI1-GPU`` (in the ``impi-devel`` wheel) PingPong with
    device buffers (``-mem_alloc_type device``) and Intel MPI's GPU buffer
    support on (``I_MPI_OFFLOAD=1``)."""

    valid_systems = [f"+{GPU_FEATURE}"]
    program = "IMB-MPI1-GPU"
    valid_prog_environs = ["+impi"]
    benchmarks = ["PingPong"]
    repetitions = 100
    msglog = (0, 22)
    imb_options = ["-mem_alloc_type", "device"]
    figures = (
        imb_figure("lat_8B", "PingPong", 8, "t_usec"),
        imb_figure("bw_1MiB", "PingPong", 1 << 20, "mbytes_per_sec"),
        imb_figure("bw_4MiB", "PingPong", 4 << 20, "mbytes_per_sec"),
    )

    @run_after("setup")
    def _offload(self) -> None:
        self.env_vars["I_MPI_OFFLOAD"] = "1"
