"""BabelStream Triad on every GPU of a node: GPU memory bandwidth.

A GPU whose memory clock dropped (power or thermal throttling, a clock locked
low) or whose memory is degraded loses Triad bandwidth first. Each array is at
least 4x the L2 (so Triad streams from device memory, not cache) and at least
1 GiB, the three taking at most half the device memory (sizing:
:func:`hpcval.node.gpus.babelstream_array_elements`, from the partition's
``gpu_memory_bytes`` and ``gpu_l2_bytes`` extras). BabelStream reports the best
of ``--numtimes`` repetitions; it runs ``samples`` times per GPU, and the figure
is the slowest GPU's (every GPU's median is stored as a series). Only on
partitions with the ``gpu`` feature; skipped with the reason where the CUDA
BabelStream (Spack ``babelstream +cuda``) is absent. How: :mod:`hpcval.rfm.gpu`."""

import reframe as rfm

from hpcval.rfm.gpu import BabelStreamBase


@rfm.simple_test
class babelstream_triad_check(BabelStreamBase):
    descr = "BabelStream Triad (CUDA) on each GPU of a node: device memory bandwidth"
    tags = {"gpu", "memory", "babelstream"}
