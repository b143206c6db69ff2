"""DGEMM: the compute rate of a node (double precision, every core), as GFLOP/s
and as a share of the node's computed peak (cores x frequency x FLOPs per cycle
from the CPU flags). Intel Cluster Checker's ``dgemm_cpu_performance`` measured
the same per node. The BLAS is the Spack environment's OpenBLAS where it is
built, else numpy's; the matrix order comes from the node (one multiply about a
second at its peak, within half its memory). How it runs and the peak table:
:mod:`hpcval.rfm.dgemm`, :mod:`hpcval.node.dgemm`."""

import reframe as rfm

from hpcval.rfm.dgemm import DgemmBase


@rfm.simple_test
class dgemm_check(DgemmBase):
    descr = "DGEMM on one node: GFLOP/s and share of the computed peak"
    valid_systems = ["*"]
    valid_prog_environs = ["+plain"]
    tags = {"compute", "dgemm"}
