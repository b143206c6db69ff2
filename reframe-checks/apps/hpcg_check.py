"""HPCG: the High Performance Conjugate Gradients benchmark, judged on its official rating.

HPCG is pinned in every Spack environment of hpcval; this check runs it on the
CPUs of one node, ``samples`` times in one job (5 by default; a site may lower
it with ``-S samples=N`` for long runs), with a small problem by default (a
local grid of 16^3 points per rank, 5 s per run, about a minute in all; HPCG's
official rules ask for 1800 s, which ``-S run_time=1800`` gives) and judges the
median of HPCG's own GFLOP/s ratings. A run HPCG reports INVALID fails.
Skipped with the reason where HPCG is not installed or was built against
another MPI; how it is found and run: :mod:`hpcval.rfm.hpcg`."""

import reframe as rfm

from hpcval.rfm.hpcg import HpcgBase


@rfm.simple_test
class hpcg_check(HpcgBase):
    descr = "HPCG: official GFLOP/s rating on one node"
    valid_systems = ["*"]
    valid_prog_environs = ["+mpi"]
    tags = {"apps", "hpcg"}
