"""Memory bandwidth of a node with a STREAM-triad-like kernel (seed 004's
yardstick), all CPUs of the node as MPI ranks; the cfdio proxy's stencil
bandwidth is read against it (docs/performance.md)."""

import reframe as rfm
from reframe.core.builtins import run_after

from hpcval.rfm.cfdio import CfdioTriadBase


@rfm.simple_test
class cfdio_triad_check(CfdioTriadBase):
    descr = "STREAM-triad-like memory bandwidth of one node (cfdio --mode triad)"
    valid_systems = ["*"]
    tags = {"memory", "stream", "triad"}

    @run_after("setup")
    def set_ranks(self) -> None:
        self.num_tasks = self.current_partition.processor.num_cpus or 1
