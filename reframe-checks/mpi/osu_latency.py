"""OSU ``osu_latency``: one-way latency between two ranks (seeds 000, 002).

Seed 002 follows one-way latency from 28 to 8 us through host and MPI
tuning; this is the OMB view of the same figure next to IMB PingPong.
Skipped with a reason where OMB is not installed; how OMB is found and run:
:mod:`hpcval.rfm.omb`."""

import reframe as rfm

from hpcval.rfm.omb import OmbBase


@rfm.simple_test
class osu_latency_check(OmbBase):
    descr = "OMB osu_latency: one-way latency between two ranks"
    valid_systems = ["*"]
    program = "osu_latency"
    num_tasks = 2
    message_sizes = (0, 65536)
    iterations = 1000
    warmup = 100
    validation = True
    figures = {"lat_8B": ("latency_us", 8), "lat_4KiB": ("latency_us", 4096),
               "lat_64KiB": ("latency_us", 65536)}
    tags = {"mpi", "omb", "latency"}
