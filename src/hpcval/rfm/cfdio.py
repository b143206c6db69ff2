"""Base tests around hpcval's cfdio proxy (proxies/cfdio): they build it with
the environment's ``mpicc`` (or use a Spack-built ``cfdio`` on PATH) and judge
its ``CFDIO`` result line; final checks in ``reframe-checks/`` say what to run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (
    performance_function,
    run_after,
    run_before,
    sanity_function,
    variable,
)

from hpcval.parsers.cfdio import output_cost, parse_cfdio
from hpcval.paths import project_root
from hpcval.rfm.base import HpcvalTest

#: Intel MPI's compiler wrappers find their headers through I_MPI_ROOT; derive
#: it from the wrapper on PATH when the environment does not set it.
_IMPI_ROOT = ('if [ -z "$I_MPI_ROOT" ] && [ -f "$(dirname "$(command -v mpicc)")/../include/'
              'mpi.h" ]; then export I_MPI_ROOT="$(dirname "$(dirname "$(command -v mpicc)")")";'
              ' fi')


class CfdioBase(HpcvalTest, rfm.RegressionTest):
    """Runs the environment's Spack-built ``hpcval-cfdio`` where it offers one
    (``extras.spack``), else a ``cfdio`` on PATH, else builds proxies/cfdio with
    ``make MPICC=<environment cc>``."""

    valid_prog_environs = ["+mpi"]
    time_limit = "5m"
    build_locally = True
    spack_package = "hpcval-cfdio"

    @run_after("setup")
    def set_source(self) -> None:
        prefix = self.spack_prefix()
        built = f"{prefix}/bin/cfdio" if prefix else shutil.which("cfdio")
        if built:
            self.sourcesdir = None
            self.build_system = "CustomBuild"
            self.build_system.commands = ["true"]
            self.cfdio = built
        else:
            self.sourcesdir = str(project_root() / "proxies" / "cfdio")
            self.build_system = "Make"
            self.build_system.flags_from_environ = False
            # a binary copied along with the sources may be from another MPI
            self.prebuild_cmds = [_IMPI_ROOT, "rm -f cfdio"]
            self.cfdio = "./cfdio"
        self.executable = self.cfdio

    @run_before("compile")
    def set_compiler(self) -> None:
        if self.build_system.__class__.__name__ == "Make":
            # the environment's MPI compiler wrapper (e.g. mpicc.openmpi)
            self.build_system.options = [f"MPICC={self.current_environ.cc or 'mpicc'}"]

    def use_tasks(self, n: int, noun: str = "ranks") -> None:
        """Run with *n* MPI ranks (*noun*: what they are, for the skip reason);
        skipped above the partition's CPUs, and above 2 where those are unknown."""
        cpus = self.current_partition.processor.num_cpus
        self.skip_if(bool(cpus) and n > cpus, f"{n} {noun} exceed the partition's {cpus} CPUs")
        self.skip_if(not cpus and n > 2,
                     f"partition CPU count unknown: running 1 and 2 {noun} only")
        self.num_tasks = n

    def result(self, name: str | None = None) -> dict:
        """The parsed CFDIO line of the job's stdout (or of file *name*); when
        there is none, the error says what the proxy reported on stderr (the
        path and errno of a failed write, e.g. a full disk)."""
        from reframe.core.exceptions import SanityError

        from hpcval.errors import HpcvalError
        path = Path(self.stagedir) / name if name else self.stdout_path()
        try:
            text = path.read_text(errors="replace")
            if name is None:
                stderr = Path(self.stagedir) / str(self.stderr.evaluate())
                if stderr.is_file():
                    text += "\n" + stderr.read_text(errors="replace")
            return parse_cfdio(text, source=str(path))
        except (OSError, HpcvalError) as err:
            raise SanityError(str(err)) from None


class CfdioFilesBase(CfdioBase):
    """A cfdio run that writes files: to a per-test directory on the partition's
    shared file system (``extras.shared_fs_dir``) where it has one, else to the
    stage directory; what the proxy leaves behind is removed and fails the check."""

    #: Shell pattern of the files the proxy writes in ``output_dir``.
    files = "cfdio_*"

    @run_after("setup")
    def set_output_dir(self) -> None:
        self.output_dir = self.shared_fs_dir() or "."

    def no_leftovers(self) -> object:
        left = self.leftovers()
        return sn.assert_false(left, msg=f"result files left behind: {' '.join(left)}")


class CfdioOutputCostBase(CfdioFilesBase):
    """Runs the proxy without output (``baseline.out``) and with ``strategy``
    at ``num_tasks`` ranks in one job; reports output cost (with − without),
    output share of the run and write bandwidth."""

    #: (set by the final check, usually as a parameter: ``strategy``, the
    #: output strategy; ``none`` gives the noise of the difference, ~0)
    #: Total grid (strong scaling: fixed while the ranks vary).
    global_grid = (64, 64, 64)
    steps = 20
    every = 5
    files = "cfdio_step*"

    @run_before("run")
    def set_options(self) -> None:
        g = [str(x) for x in self.global_grid]
        common = ["--global", *g, "--steps", str(self.steps), "--every", str(self.every),
                  "--dir", self.output_dir]
        self.executable_opts = [*common, "--strategy", self.strategy]
        # the job's task count is filled in at submission; the baseline
        # launch needs it now
        self.job.num_tasks = self.num_tasks
        launch = " ".join(self.job.launcher.run_command(self.job).split())
        self.prerun_cmds = [f"mkdir -p '{self.output_dir}'",
                            f"{launch} {self.cfdio} {' '.join(common)} --strategy none "
                            "> baseline.out"]
        self.postrun_cmds = self.cleanup_cmds(self.output_dir, self.files)

    @sanity_function
    def validate(self) -> bool:
        base = self.result("baseline.out")
        run = self.result()
        return sn.all([sn.assert_eq(base["checksum"], run["checksum"],
                                    msg="field checksum differs between runs: {0} != {1}"),
                       self.no_leftovers()])

    @performance_function("s")
    def output_cost(self) -> float:
        return output_cost(self.result(), self.result("baseline.out"))[0]

    @performance_function("fraction")
    def output_share(self) -> float:
        return output_cost(self.result(), self.result("baseline.out"))[1]

    @performance_function("MB/s")
    def write_bw(self) -> float:
        return float(self.result()["write_MBs"])


class CfdioTriadBase(CfdioBase):
    """STREAM-triad-like kernel of the proxy: memory bandwidth of the node
    (all ranks together), best of ``--reps``."""

    #: Doubles per array and rank.
    triad_n = variable(int, value=10_000_000)
    #: Repetitions; the best counts.
    reps = variable(int, value=10)

    @run_before("run")
    def set_options(self) -> None:
        self.executable_opts = ["--mode", "triad", "--triad-n", str(self.triad_n),
                                "--reps", str(self.reps)]

    @sanity_function
    def validate(self) -> bool:
        return sn.assert_eq(self.result()["valid"], 1)

    @performance_function("MB/s")
    def triad_bw(self) -> float:
        return float(self.result()["triad_MBs"])


class CfdioStencilBase(CfdioBase):
    """The proxy's stencil (no output) and the triad kernel in one run with
    the same ranks: stencil and triad bandwidth and their ratio, the issue's
    yardstick of whether the proxy stresses memory like a real CFD code.

    The grid is sized well beyond the caches (a 2 x 64 MiB field), so both
    kernels run from memory."""

    global_grid = (256, 256, 128)
    steps = 20
    #: Doubles per array and rank of the triad.
    triad_n = variable(int, value=20_000_000)
    #: Triad repetitions; the best counts.
    reps = variable(int, value=5)

    @run_before("run")
    def set_options(self) -> None:
        self.executable_opts = ["--global", *[str(x) for x in self.global_grid],
                                "--steps", str(self.steps), "--strategy", "none",
                                "--with-triad", "--triad-n", str(self.triad_n),
                                "--reps", str(self.reps)]

    @sanity_function
    def validate(self) -> bool:
        return sn.assert_eq(self.result()["valid"], 1)

    @performance_function("MB/s")
    def stencil_bw(self) -> float:
        return float(self.result()["stencil_MBs"])

    @performance_function("MB/s")
    def triad_bw(self) -> float:
        return float(self.result()["triad_MBs"])

    @performance_function("fraction")
    def stencil_fraction_of_triad(self) -> float:
        return float(self.result()["stencil_fraction"])


class CfdioReadBase(CfdioFilesBase):
    """Post-processing read (seed 001): ``num_tasks`` readers each write a
    result file of ``read_mb`` MiB, drop it from the page cache, then all read
    back at once. Reports per-reader (slowest, fastest) and aggregate read
    bandwidth, so saturation of the file server's link under concurrent
    readers shows; the files go to the partition's shared file system where it
    has one (``extras.shared_fs_dir``)."""

    #: MiB each reader writes and reads back.
    read_mb = variable(int, value=256)
    files = "cfdio_read*"

    @run_before("run")
    def set_options(self) -> None:
        self.executable_opts = ["--mode", "read", "--read-mb", str(self.read_mb),
                                "--dir", self.output_dir]
        self.prerun_cmds = [f"mkdir -p '{self.output_dir}'"]
        self.postrun_cmds = self.cleanup_cmds(self.output_dir, self.files)

    @sanity_function
    def validate(self) -> bool:
        return sn.all([sn.assert_eq(self.result()["verified"], 1), self.no_leftovers()])

    @performance_function("MB/s")
    def aggregate_read_bw(self) -> float:
        return float(self.result()["aggregate_MBs"])

    @performance_function("MB/s")
    def min_reader_bw(self) -> float:
        return float(self.result()["min_reader_MBs"])

    @performance_function("MB/s")
    def max_reader_bw(self) -> float:
        return float(self.result()["max_reader_MBs"])

    @performance_function("fraction")
    def cache_resident(self) -> float:
        """Share of the files still in the page cache when the read began (0 =
        read from the device or server; -1 = could not be measured)."""
        return float(self.result()["cache_resident"])
