"""Base test for HPCG, the High Performance Conjugate Gradients benchmark.

``xhpcg`` is found through the environment, never at a fixed path: the
environment's Spack-built ``hpcg`` first, then the directories of
``$HPCVAL_HPCG_DIR`` (colon-separated, each searched with ``bin/``), then
``PATH``. A binary linked against another MPI than the environment's (Open
MPI's ``libmpi.so.40`` against the MPICH ABI of MPICH and Intel MPI) is not
launched: the check is skipped with the reason, as it is where there is no
HPCG at all.

The problem is written to ``hpcg.dat`` in the stage directory (every HPCG
version reads it; 3.1 also takes ``--nx``/``--rt``): a local grid of
``local_grid`` points per rank and a benchmark time of ``run_time`` seconds.
HPCG writes its summary to ``HPCG-Benchmark_<version>_<date>.txt`` (3.1) or
``HPCG-Benchmark-<version>_<date>.yaml`` (3.0) there; the check reads it with
:mod:`hpcval.parsers.hpcg`. The judged figure is HPCG's official rating
("HPCG result is VALID with a GFLOP/s rating of"); a run HPCG itself reports
INVALID fails, whatever its speed. HPCG's official rules ask for 1800 s; a
validation run is shorter, which HPCG notes and the check records
(``hpcg_official``), without failing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.errors import HpcvalError
from hpcval.parsers.hpcg import HpcgResult, check_valid, parse_hpcg
from hpcval.parsers.wrf.binaries import mpi_mismatch
from hpcval.rfm.base import HpcvalTest

HPCG_DIR_VAR = "HPCVAL_HPCG_DIR"
PROGRAM = "xhpcg"
SUMMARY_GLOB = "HPCG-Benchmark*"


def find_hpcg(spack_prefix: str | None = None, name: str = PROGRAM) -> tuple[str | None, str]:
    """Path of ``xhpcg`` and where it was looked for."""
    dirs = [str(Path(spack_prefix) / "bin")] if spack_prefix else []
    dirs += [d for d in os.environ.get(HPCG_DIR_VAR, "").split(":") if d]
    for d in dirs:
        for candidate in (Path(d) / name, Path(d) / "bin" / name):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate), d
    where = f"the Spack environment, ${HPCG_DIR_VAR} ({os.environ.get(HPCG_DIR_VAR, 'unset')})"
    return shutil.which(name), f"{where} or PATH"


def hpcg_dat(local_grid: tuple[int, int, int], run_time: int) -> str:
    """The ``hpcg.dat`` HPCG reads: two title lines, the local grid, the time."""
    nx, ny, nz = local_grid
    return (f"HPCG benchmark input file (written by hpcval)\n"
            f"Sandia National Laboratories; University of Tennessee, Knoxville\n"
            f"{nx} {ny} {nz}\n{run_time}\n")


class HpcgBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """``xhpcg`` on ``ranks`` MPI ranks, judged on its official GFLOP/s rating."""

    spack_package = "hpcg"
    time_limit = "30m"

    #: Local grid per rank ``(nx, ny, nz)``; each a multiple of 8, at least 16.
    #:
    #: :type: :class:`Tuple[int, int, int]`
    local_grid = variable(typ.Tuple[int, int, int], value=(32, 32, 32), loggable=True)

    #: Benchmark time in seconds (HPCG's official minimum is 1800).
    #:
    #: :type: :class:`int`
    run_time = variable(int, value=60, loggable=True)

    #: MPI ranks; the node's CPUs when unset.
    #:
    #: :type: :class:`int` or :obj:`None`
    ranks = variable(int, type(None), value=None, loggable=True)

    #: Path of the program that ran.
    #:
    #: :type: :class:`str`
    hpcg_program_path = variable(str, value="", loggable=True)

    #: The run lasted HPCG's official minimum (recorded, not judged).
    #:
    #: :type: :class:`bool`
    hpcg_official = variable(bool, value=False, loggable=True)

    @run_after("init")
    def set_perf_variables(self) -> None:
        self.perf_variables["gflops"] = sn.make_performance_function(
            self.figure("rating_gflops"), "GFLOP/s")

    @run_after("setup")
    def locate_program(self) -> None:
        path, where = find_hpcg(self.spack_prefix())
        self.skip_if(path is None,
                     f"{PROGRAM} not found in {where}: install HPCG (spack install hpcg) and "
                     f"put it on PATH, or set {HPCG_DIR_VAR} to its directory")
        mismatch = mpi_mismatch(str(path), self.current_environ.features)
        self.skip_if(mismatch is not None,
                     f"{mismatch} (environment {self.current_environ.name})")
        self.hpcg_program_path = str(path)
        self.executable = str(path)
        cpus = self.current_partition.processor.num_cpus or os.cpu_count() or 1
        self.num_tasks = self.ranks or cpus
        self.keep_files = [SUMMARY_GLOB, "hpcg.dat"]

    @run_before("run")
    def write_input(self) -> None:
        if min(self.local_grid) < 16 or any(n % 8 for n in self.local_grid):
            raise SanityError(f"local_grid {self.local_grid}: HPCG needs each dimension a "
                              "multiple of 8 and at least 16")
        (Path(self.stagedir) / "hpcg.dat").write_text(hpcg_dat(self.local_grid, self.run_time))

    def summary(self) -> HpcgResult:
        found = sorted(Path(self.stagedir).glob(SUMMARY_GLOB), key=lambda p: p.stat().st_mtime)
        if not found:
            raise SanityError(f"HPCG wrote no {SUMMARY_GLOB} summary in {self.stagedir}: it "
                              "stopped before reporting (see the job output)")
        path = found[-1]
        try:
            return parse_hpcg(path.read_text(errors="replace"), source=str(path))
        except HpcvalError as err:
            raise SanityError(str(err)) from None

    @sn.deferrable
    def figure(self, name: str) -> float:
        return getattr(self.summary(), name)

    @sanity_function
    def valid_result(self) -> bool:
        result = self.summary()
        try:
            check_valid(result)
        except HpcvalError as err:
            raise SanityError(str(err)) from None
        if result.ranks is not None and result.ranks != self.num_tasks:
            raise SanityError(f"HPCG ran on {result.ranks} processes, {self.num_tasks} asked")
        self.hpcg_official = result.official
        return True
