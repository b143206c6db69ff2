"""Checks that run the fake benchmarks of tests/faults/bin through real ReFrame
on the `local` site, judged like imb_pingpong_check (its references), so that
every way a benchmark can fail is seen exactly as a real one would be."""

from pathlib import Path

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from hpcval.rfm.imb import ImbPingPongBase

FAKE_IMB = str(Path(__file__).resolve().parent.parent / "bin" / "fake-imb")

#: Fake IMB modes (tests/faults/bin/fake-imb) and the time limit each gets.
MODES = ["ok", "crash-after-table", "exit1-after-table", "exit255-after-table",
         "segv-after-table", "rank-sigkill", "rank-exit1", "garbage", "binary", "empty",
         "stderr-only", "truncated", "hang", "inf", "nan", "negative", "above-ceiling",
         "time-out-rows", "out-of-mem-rows"]


@rfm.simple_test
class fake_imb_check(ImbPingPongBase):
    """IMB PingPong as judged on the local site, with IMB replaced by fake-imb."""

    valid_systems = ["local"]
    valid_prog_environs = ["+mpi +imb"]
    reference_entry = "imb_pingpong_check"
    cache = parameter(inherit_params=True, filter_params=lambda values: values[:1])
    mode = parameter(MODES, loggable=True)
    time_limit = "8s"

    @run_after("setup")
    def run_fake(self) -> None:
        self.executable = FAKE_IMB
        self.executable_opts = [self.mode, *self.executable_opts]


@rfm.simple_test
class fake_rank_death_check(ImbPingPongBase):
    """One rank dies (SIGKILL or exit 1) while rank 0 waits: with every MPI
    stack of the machine, the launcher must end the job at once and the check
    must name how it ended."""

    valid_systems = ["local"]
    valid_prog_environs = ["+mpi"]
    reference_entry = "imb_pingpong_check"
    cache = parameter(inherit_params=True, filter_params=lambda values: values[:1])
    mode = parameter(["rank-sigkill", "mpi-rank-sigkill"], loggable=True)
    time_limit = "20s"

    @run_after("setup")
    def run_fake(self) -> None:
        self.executable = FAKE_IMB
        self.executable_opts = [self.mode, *self.executable_opts]
