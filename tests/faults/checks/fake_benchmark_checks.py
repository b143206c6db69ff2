"""Checks that run the fake benchmarks of tests/faults/bin through real ReFrame
on the `local` site, judged like imb_pingpong_check (its references), so that
every way a benchmark can fail is seen exactly as a real one would be."""

from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function

from hpcval.rfm.base import HpcvalTest
from hpcval.rfm.imb import ImbPingPongBase

FAKE_IMB = str(Path(__file__).resolve().parent.parent / "bin" / "fake-imb")

#: Fake IMB modes (tests/faults/bin/fake-imb); a rank killed while the others
#: run is fake_rank_death_check's.
MODES = ["ok", "crash-after-table", "exit1-after-table", "exit255-after-table",
         "segv-after-table", "rank-exit1", "garbage", "binary", "empty",
         "stderr-only", "truncated", "hang", "inf", "nan", "negative", "above-ceiling",
         "time-out-rows", "out-of-mem-rows", "ok-env"]


class FakeImbBase(ImbPingPongBase):
    """IMB PingPong as judged on the local site (its references), with IMB
    replaced by fake-imb, two launches per job, cache-warm only."""

    reference_entry = "imb_pingpong_check"
    program = FAKE_IMB
    samples = 2
    cache = parameter(inherit_params=True, filter_params=lambda values: values[:1])


@rfm.simple_test
class fake_imb_check(FakeImbBase):
    """IMB PingPong as judged on the local site, with IMB replaced by fake-imb."""

    valid_systems = ["local"]
    valid_prog_environs = ["+mpi +imb"]
    mode = parameter(MODES, loggable=True)
    time_limit = "12s"

    @run_after("setup")
    def run_fake(self) -> None:
        self.executable_opts = [self.mode, *self.executable_opts]


@rfm.simple_test
class fake_built_check(HpcvalTest, rfm.RegressionTest):
    """A check with a build step (ReFrame loads the environments for the
    build job as well as for the run) that prints its ``PROBE_*`` variables
    (fake-imb's ``ok-env``)."""

    valid_systems = ["local"]
    valid_prog_environs = ["+mpi +imb"]
    sourcesdir = None
    build_system = "CustomBuild"
    build_locally = True
    executable = FAKE_IMB
    executable_opts = ["ok-env"]
    rank_count = 1
    time_limit = "12s"

    @run_before("compile")
    def build_nothing(self) -> None:
        self.build_system.commands = ["true"]

    @sanity_function
    def printed_env(self) -> bool:
        return sn.assert_found(r"^# env: PROBE_SPACE=", self.stdout)


@rfm.simple_test
class fake_disk_fill_check(FakeImbBase):
    """fake-imb fills the file system of ``$HPCVAL_VAR`` (the results store,
    ReFrame's log, stage and output directories) while it runs."""

    valid_systems = ["local"]
    valid_prog_environs = ["+mpi +imb"]
    time_limit = "12s"

    @run_after("setup")
    def run_fake(self) -> None:
        self.executable_opts = ["fill-disk", *self.executable_opts]


@rfm.simple_test
class fake_rank_death_check(FakeImbBase):
    """One rank is killed (SIGKILL) while rank 0 still runs: the launcher must
    end the job at once (well within the time limit) and the check must name
    the signal. Open MPI's and MPICH's mpirun end non-MPI ranks too; Intel
    MPI's hydra ends a job when an MPI rank dies (mode ``mpi-rank-sigkill``
    runs real IMB ranks), not when a plain process does."""

    valid_systems = ["local"]
    valid_prog_environs = ["+openmpi", "+mpich", "+impi"]
    time_limit = "30s"

    @run_after("setup")
    def run_fake(self) -> None:
        impi = "impi" in self.current_environ.features
        mode = "mpi-rank-sigkill" if impi else "rank-sigkill"
        self.executable_opts = [mode, *self.executable_opts]


@rfm.simple_test
class fake_lab_fault_check(FakeImbBase):
    """On the Slurm lab, one rank per node: ``mpi-rank-sigkill`` kills rank
    1's IMB mid-run (srun must end the step at once), ``hang`` runs into
    Slurm's time limit, ``mpi-long`` runs IMB for minutes (to kill a node's
    slurmd under it), ``ok`` is the control."""

    valid_systems = ["lab"]
    valid_prog_environs = ["+impi"]
    mode = parameter(["ok", "mpi-rank-sigkill", "hang", "mpi-long"], loggable=True)
    nodes = 2

    @run_after("setup")
    def run_fake(self) -> None:
        self.executable_opts = [self.mode, *self.executable_opts]
        self.time_limit = "1m" if self.mode == "hang" else "10m"


@rfm.simple_test
class fake_orphan_check(FakeImbBase):
    """A benchmark that runs for minutes (fake-imb ``hang``, a 5-minute time
    limit), one MPI stack: its hpcval is killed with SIGKILL under it, and the
    next validation must find and stop what is left (tests/faults/test_orphans.py)."""

    valid_systems = ["local"]
    valid_prog_environs = ["+impi +imb"]
    time_limit = "5m"

    @run_after("setup")
    def run_fake(self) -> None:
        self.executable_opts = ["hang", *self.executable_opts]
