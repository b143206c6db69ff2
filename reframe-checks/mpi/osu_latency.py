"""OSU ``osu_latency``: one-way latency between two ranks.

M. Jayadevan and D. Wetherall ("Getting higher MPI performance for HPC
applications on Google Cloud") follow one-way latency from 28 to 8 us through
host and MPI tuning; this is the OMB view of the same figure next to IMB
PingPong, each figure the median of several runs in the job. Skipped with a
reason where OMB is not installed; how OMB is found and run:
:mod:`hpcval.rfm.omb`."""

import reframe as rfm

from hpcval.rfm.omb import OmbBase, figure


@rfm.simple_test
class osu_latency_check(OmbBase):
    descr = "OMB osu_latency: one-way latency between two ranks"
    valid_systems = ["*"]
    program = "osu_latency"
    message_sizes = (0, 65536)
    iterations = 200
    warmup = 20
    validation = True
    figures = (figure("lat_8B", "latency_us", 8), figure("lat_4KiB", "latency_us", 4096),
               figure("lat_64KiB", "latency_us", 65536))
    tags = {"mpi", "omb", "latency"}
