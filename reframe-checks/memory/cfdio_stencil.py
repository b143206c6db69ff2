"""The cfdio proxy's stencil bandwidth against the STREAM-triad kernel, same
binary, same ranks, one run (seed 004's yardstick): the fraction tells whether
the proxy loads memory like the CFD codes it stands for (docs/performance.md)."""

import reframe as rfm
from reframe.core.builtins import run_after

from hpcval.rfm.cfdio import CfdioStencilBase


@rfm.simple_test
class cfdio_stencil_check(CfdioStencilBase):
    descr = "cfdio stencil bandwidth as a fraction of triad bandwidth (same ranks)"
    valid_systems = ["*"]
    tags = {"memory", "stream", "triad", "cfdio"}

    @run_after("setup")
    def set_ranks(self) -> None:
        self.num_tasks = self.current_partition.processor.num_cpus or 1
