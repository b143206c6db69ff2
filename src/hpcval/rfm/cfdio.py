"""Base tests around hpcval's cfdio proxy (proxies/cfdio): they build it with
the environment's ``mpicc`` (or use a Spack-built ``cfdio`` on PATH) and judge
its ``CFDIO`` result line; final checks in ``reframe-checks/`` say what to run.
"""

from __future__ import annotations

import shutil

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, run_after, run_before, sanity_function

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

    def result(self, name: str | None = None) -> dict:
        """The parsed CFDIO line of the job's stdout (or of file *name*)."""
        if name is None:
            return self.parse_stdout(parse_cfdio)
        from pathlib import Path

        from reframe.core.exceptions import SanityError

        from hpcval.errors import HpcvalError
        path = Path(self.stagedir) / name
        try:
            return parse_cfdio(path.read_text(errors="replace"), source=str(path))
        except (OSError, HpcvalError) as err:
            raise SanityError(str(err)) from None


class CfdioOutputCostBase(CfdioBase):
    """Runs the proxy without output (``baseline.out``) and with ``strategy``
    at ``num_tasks`` ranks in one job; reports output cost (with − without),
    output share of the run and write bandwidth."""

    #: (set by the final check, usually as a parameter: ``strategy``, the
    #: output strategy; ``none`` gives the noise of the difference, ~0)
    #: Total grid (strong scaling: fixed while the ranks vary).
    global_grid = (64, 64, 64)
    steps = 20
    every = 5

    @run_before("run")
    def set_options(self) -> None:
        g = [str(x) for x in self.global_grid]
        common = ["--global", *g, "--steps", str(self.steps), "--every", str(self.every),
                  "--dir", "."]
        self.executable_opts = [*common, "--strategy", self.strategy]
        # the job's task count is filled in at submission; the baseline
        # launch needs it now
        self.job.num_tasks = self.num_tasks
        launch = " ".join(self.job.launcher.run_command(self.job).split())
        self.prerun_cmds = [f"{launch} {self.cfdio} {' '.join(common)} --strategy none "
                            "> baseline.out"]

    @sanity_function
    def validate(self) -> bool:
        base = self.result("baseline.out")
        run = self.result()
        return sn.all([sn.assert_eq(base["checksum"], run["checksum"],
                                    msg="field checksum differs between runs: {0} != {1}"),
                       sn.assert_true(not list(__import__("pathlib").Path(self.stagedir)
                                               .glob("cfdio_step*")),
                                      msg="result files left behind")])

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

    triad_n = 10_000_000
    reps = 10

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
