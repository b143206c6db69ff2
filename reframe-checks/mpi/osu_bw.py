"""OSU ``osu_bw``: streaming bandwidth between two ranks (seeds 000, 004).

A window of non-blocking sends per iteration, one pair. Skipped with a
reason where OMB is not installed; how OMB is found and run:
:mod:`hpcval.rfm.omb`."""

import reframe as rfm

from hpcval.rfm.omb import OmbBase


@rfm.simple_test
class osu_bw_check(OmbBase):
    descr = "OMB osu_bw: bandwidth between two ranks"
    valid_systems = ["*"]
    program = "osu_bw"
    num_tasks = 2
    message_sizes = (1, 4 << 20)
    iterations = 20
    warmup = 5
    validation = True
    figures = {"bw_8KiB": ("bandwidth_mb_per_s", 8192),
               "bw_1MiB": ("bandwidth_mb_per_s", 1 << 20),
               "bw_4MiB": ("bandwidth_mb_per_s", 4 << 20)}
    tags = {"mpi", "omb", "bandwidth"}
