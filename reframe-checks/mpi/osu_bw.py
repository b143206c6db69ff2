"""OSU ``osu_bw``: streaming bandwidth between two ranks (the NIC comparison of
"Accelerating MPI applications using Google Virtual NIC (gVNIC)" and the
bandwidth of "The Performance of Remote Memory Access over InfiniBand").

A window of non-blocking sends per iteration, one pair; each figure is the
median of several runs in the job. Skipped with a reason where OMB is not
installed; how OMB is found and run: :mod:`hpcval.rfm.omb`."""

import reframe as rfm

from hpcval.rfm.omb import OmbBase, figure


@rfm.simple_test
class osu_bw_check(OmbBase):
    descr = "OMB osu_bw: bandwidth between two ranks"
    valid_systems = ["*"]
    program = "osu_bw"
    message_sizes = (1, 4 << 20)
    iterations = 5
    warmup = 2
    validation = True
    figures = (figure("bw_8KiB", "bandwidth_mb_per_s", 8192),
               figure("bw_1MiB", "bandwidth_mb_per_s", 1 << 20),
               figure("bw_4MiB", "bandwidth_mb_per_s", 4 << 20))
    tags = {"mpi", "omb", "bandwidth"}
