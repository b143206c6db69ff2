"""Base test for DGEMM, the compute figure of a node (:mod:`hpcval.node.dgemm`).

One process on one node multiplies two ``n x n`` matrices of doubles
``samples`` times on all the cores the job gives it, with the BLAS of the
programming environment's Spack build of ``openblas`` where it has one (through
``cblas_dgemm``), else numpy's. The order ``n`` comes from
:func:`hpcval.node.sizing.dgemm`: one multiply about a second at the node's
computed peak (``full``: four), the matrices within half the node's memory.
Figures: ``gflops`` (GFLOP/s of each multiply) and ``share_of_peak`` (each
multiply's share of cores x frequency x FLOPs per cycle from the CPU flags;
:data:`hpcval.node.dgemm.FLOPS_TABLE`). A rate above twice the computed peak
is impossible (a clock counted wrong, or a product not computed) and fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.core.figures import Figure
from hpcval.node import sizing
from hpcval.node.dgemm import node_peak
from hpcval.parsers.dgemm import DgemmResult, parse_dgemm
from hpcval.rfm.base import HpcvalTest
from hpcval.rfm.sizing import SizedTest

#: A rate beyond this many times the computed peak is physically impossible
#: (turbo clocks exceed the base clock the peak counts, never by 2x).
IMPOSSIBLE_SHARE = 2.0
#: The Spack package whose BLAS the check takes where the environment built it.
BLAS_PACKAGE = "openblas"


class DgemmBase(SizedTest, HpcvalTest, rfm.RunOnlyRegressionTest):
    """DGEMM on one node, every core, with the environment's BLAS."""

    rank_count = 1
    executable = sys.executable
    time_limit = "10m"

    figures = (Figure("gflops", "GFLOP/s"), Figure("share_of_peak", "fraction", better="higher"))

    #: Matrix order; unset: :func:`hpcval.node.sizing.dgemm` for the node.
    #:
    #: :type: :class:`int` or :obj:`None`
    n = variable(int, type(None), value=None, loggable=True)

    #: The BLAS that ran (library or numpy's), as the runner reports it.
    #:
    #: :type: :class:`str`
    blas = variable(str, value="", loggable=True)

    #: The computed peak, in words (cores x frequency x FLOPs per cycle).
    #:
    #: :type: :class:`str`
    peak = variable(str, value="", loggable=True)

    @run_after("setup")
    def size_and_run(self) -> None:
        # one process, no MPI: the node runs it without a launcher
        self.job.launcher = getlauncher("local")()
        node = self.sizing_node()
        local = self.current_partition.scheduler.registered_name == "local"
        if self.n is None:
            try:
                size = sizing.dgemm(node, self.sizing_budget(),
                                    node_peak().gflops if local else None, self.samples)
            except sizing.SizingError as err:
                self.skip(str(err))
                return
            self.apply_size(size)
            self.n = int(size.params["n"])
        self.executable_opts = ["-m", "hpcval.node.dgemm", f"--n={self.n}",
                                f"--samples={self.samples}"]
        prefix = self.spack_prefix(BLAS_PACKAGE)
        if prefix:
            libs = sorted(Path(prefix).glob("lib*/libopenblas.so*"))
            if libs:
                self.executable_opts.append(f"--blas-lib={libs[0]}")

    def result(self) -> DgemmResult:
        return self.parse_stdout(parse_dgemm)

    def measure(self) -> dict[str, list[float]]:
        r = self.result()
        return {"gflops": r.gflops, "share_of_peak": r.shares()}

    @sanity_function
    def computed(self) -> bool:
        r = self.result()
        self.blas, self.peak = r.blas, r.peak
        if r.peak_gflops is None:
            raise SanityError(f"the node's peak is unknown ({r.peak}): give the runner "
                              "--flops-per-cycle or a readable CPU frequency")
        if max(r.gflops) > IMPOSSIBLE_SHARE * r.peak_gflops:
            raise SanityError(f"physically impossible: {max(r.gflops):.1f} GFLOP/s is more "
                              f"than {IMPOSSIBLE_SHARE:g}x the computed peak {r.peak_gflops:.1f}"
                              f" ({r.peak})")
        return True
