"""Many pairs of ranks streaming from one node to another: aggregate bandwidth.

Google Cloud's "Accelerating MPI applications using Google Virtual NIC
(gVNIC)" measures the aggregate unidirectional bandwidth between two VMs with
OMB ``osu_mbw_mr`` and 30 processes per node. This check does the same with
IMB-MPI1 ``Uniband`` (part of Intel MPI, so it runs wherever IMB does): with
``2 x P`` ranks, rank ``i`` sends windows of non-blocking messages to rank
``i + P``. Placed in blocks (Slurm's default), the first ``P`` ranks are on
the first node and the other ``P`` on the second, so all ``P`` pairs share
the link between the two nodes; ``P`` is the CPUs of a node. ``-npmin`` makes
IMB run with all ranks only. Each repetition streams windows of messages per
pair: over 1 GbE one repetition of 256 KiB with two pairs takes ~2 s, so a
run has few; the figures are medians of several runs (:class:`ImbBase`).
"""

import reframe as rfm
from reframe.core.builtins import run_after, run_before

from hpcval.rfm.imb import ImbBase, figure


@rfm.simple_test
class imb_uniband_internode_check(ImbBase):
    descr = "IMB Uniband: aggregate bandwidth of many rank pairs across two nodes"
    valid_systems = ["+internode"]
    rank_count = "node"
    nodes = 2
    repetitions = 2
    benchmarks = ["Uniband"]
    msglog = (10, 19)
    figures = (
        figure("bw_agg_64KiB", "Uniband", 65536, "mbytes_per_sec"),
        figure("bw_agg_256KiB", "Uniband", 1 << 18, "mbytes_per_sec"),
        figure("bw_agg_512KiB", "Uniband", 1 << 19, "mbytes_per_sec"),
    )
    tags = {"mpi", "internode", "bandwidth", "multi-pair"}

    @run_after("setup")
    def all_ranks_only(self):
        # IMB's time budget per size (-time, s): the run stops with time-out after it
        self.executable_opts += ["-npmin", str(self.num_tasks), "-time", "60", "-mem", "2"]

    @run_before("run")
    def block_placement(self):
        if type(self.job.launcher).__name__ == "SrunLauncher":
            self.job.launcher.options += ["--distribution=block"]
