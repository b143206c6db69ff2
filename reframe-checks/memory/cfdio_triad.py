"""Memory bandwidth of a node with a STREAM-triad-like kernel (the yardstick of
"The Performance of Remote Memory Access over InfiniBand"), all CPUs of the
node as MPI ranks; the cfdio proxy's stencil bandwidth is read against it
(docs/performance.md). How: :class:`hpcval.rfm.cfdio.CfdioTriadBase`."""

import reframe as rfm

from hpcval.rfm.cfdio import CfdioTriadBase


@rfm.simple_test
class cfdio_triad_check(CfdioTriadBase):
    descr = "STREAM-triad-like memory bandwidth of one node (cfdio --mode triad)"
    valid_systems = ["*"]
    tags = {"memory", "stream", "triad"}
