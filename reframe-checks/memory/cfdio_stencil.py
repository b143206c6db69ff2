"""The cfdio proxy's stencil bandwidth against the STREAM-triad-like kernel, same
binary, same ranks, one run (the triad yardstick of "The Performance of Remote
Memory Access over InfiniBand"): the fraction tells whether the proxy loads
memory like the CFD codes it stands for (docs/performance.md). All CPUs of the
node as ranks; how: :class:`hpcval.rfm.cfdio.CfdioStencilBase`."""

import reframe as rfm

from hpcval.rfm.cfdio import CfdioStencilBase


@rfm.simple_test
class cfdio_stencil_check(CfdioStencilBase):
    descr = "cfdio stencil bandwidth as a fraction of triad bandwidth (same ranks)"
    valid_systems = ["*"]
    tags = {"memory", "stream", "triad", "cfdio"}
