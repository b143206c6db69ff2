"""Base test for HPCG, the High Performance Conjugate Gradients benchmark.

``xhpcg`` is found with :meth:`~hpcval.rfm.HpcvalTest.find_program`, never at
a fixed path: the environment's Spack-built ``hpcg`` first, then the
directories of ``$HPCVAL_HPCG_DIR`` (colon-separated, each searched with its
subdirectories) in the environment ``$HPCVAL_HPCG_ENVIRON`` names (default
``impi``), then ``PATH``. A binary linked against another MPI than the
environment's (Open MPI's ``libmpi.so.40`` against the MPICH ABI of MPICH and
Intel MPI) is not launched: the check is skipped with the reason, as it is
where there is no HPCG at all.

The problem is written to ``hpcg.dat`` in the stage directory (every HPCG
version reads it): a local grid of ``local_grid`` points per rank and a
benchmark time of ``run_time`` seconds, small by default so that a validation
run lasts about a minute. HPCG writes its summary to
``HPCG-Benchmark_<version>_<date>.txt`` (3.1) or
``HPCG-Benchmark-<version>_<date>.yaml`` (3.0), or, for Intel MKL's
optimised HPCG (``program`` = ``xhpcg_skx``, ``xhpcg_avx2``...),
``n<nx>-<ranks>p-<threads>t[-_]V<version>_<date>.{yaml,txt}``; the job runs HPCG ``samples``
times (default 5, a site may lower it for long runs) and keeps each run's
summary as ``hpcg-<i>-<name>``; the check reads them with
:mod:`hpcval.parsers.hpcg`. The judged figure is HPCG's official rating
("HPCG result is VALID with a GFLOP/s rating of"), one sample per run, its
value their median; a run HPCG itself reports INVALID fails, whatever its
speed. HPCG's official rules ask for 1800 s; a validation run is shorter,
which HPCG notes and the check records (``hpcg_official``), without failing.
"""

from __future__ import annotations

from pathlib import Path

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.core.errors import HpcvalError
from hpcval.core.figures import Figure
from hpcval.node import sizing
from hpcval.parsers.hpcg import SUMMARY_NAME_RE, HpcgResult, check_valid, parse_hpcg
from hpcval.rfm.base import HpcvalTest
from hpcval.rfm.sizing import SizedTest

HPCG_DIR_VAR = "HPCVAL_HPCG_DIR"
PROGRAM = "xhpcg"
SUMMARY_GLOB = "HPCG-Benchmark*"
#: Intel MKL's optimised HPCG names its summary after the run: ``n104-4p-1t-V3.0_<date>.yaml``.
MKL_SUMMARY_GLOB = "n*-*p-*t[-_]V*"
SUMMARY_GLOBS = (SUMMARY_GLOB, MKL_SUMMARY_GLOB)
#: A run's summary, kept apart from the next run's: ``hpcg-<i>-<HPCG's name>``.
KEPT_SUMMARY = "hpcg-{}-"


def hpcg_dat(local_grid: tuple[int, int, int], run_time: int) -> str:
    """The ``hpcg.dat`` HPCG reads: two title lines, the local grid, the time."""
    nx, ny, nz = local_grid
    return (f"HPCG benchmark input file (written by hpcval)\n"
            f"Sandia National Laboratories; University of Tennessee, Knoxville\n"
            f"{nx} {ny} {nz}\n{run_time}\n")


def keep_summary(run: int) -> str:
    """Shell line renaming the summary run *run* wrote, so the next run's is apart."""
    return (f"for f in {' '.join(SUMMARY_GLOBS)}; do [ -e \"$f\" ] && "
            f"mv \"$f\" \"{KEPT_SUMMARY.format(run)}$f\"; done; true")


def kept_summaries(stagedir: Path, run: int) -> list[Path]:
    """The summaries run *run* wrote, as :func:`keep_summary` kept them: the
    reference HPCG's and Intel MKL's (not MKL's ``hpcg_log_*`` or
    ``hpcg<date>.txt`` logs)."""
    prefix = KEPT_SUMMARY.format(run)
    return sorted(path for glob in SUMMARY_GLOBS for path in stagedir.glob(f"{prefix}{glob}")
                  if SUMMARY_NAME_RE.match(path.name[len(prefix):]))


class HpcgBase(SizedTest, HpcvalTest, rfm.RunOnlyRegressionTest):
    """``xhpcg`` on one MPI rank per CPU of a node, judged on its official
    GFLOP/s rating, ``samples`` runs in one job."""

    spack_package = "hpcg"
    time_limit = "30m"
    rank_count = "node"

    #: HPCG's official rating, one sample per run.
    figures = (Figure("gflops", "GFLOP/s", column="rating_gflops"),)

    #: Local grid per rank ``(nx, ny, nz)``; each a multiple of 8, at least 16.
    #:
    #: :type: :class:`Tuple[int, int, int]`
    local_grid = variable(typ.Tuple[int, int, int], value=(16, 16, 16), loggable=True)

    #: Benchmark time of each run in seconds (HPCG's official minimum is 1800).
    #:
    #: :type: :class:`int`
    run_time = variable(int, value=5, loggable=True)

    #: Program to run: the reference ``xhpcg``, or an Intel MKL optimised
    #: build (``xhpcg_skx``, ``xhpcg_avx2``...), found the same way.
    #:
    #: :type: :class:`str`
    program = variable(str, value=PROGRAM, loggable=True)

    #: Path of the program that ran.
    #:
    #: :type: :class:`str`
    hpcg_program_path = variable(str, value="", loggable=True)

    #: Every run lasted HPCG's official minimum (recorded, not judged).
    #:
    #: :type: :class:`bool`
    hpcg_official = variable(bool, value=False, loggable=True)

    @run_after("setup")
    def locate_program(self) -> None:
        self.hpcg_program_path = self.find_program(self.program, HPCG_DIR_VAR)
        self.skip_other_mpi(self.hpcg_program_path)
        self.executable = self.hpcg_program_path
        self.keep_files = [f"{KEPT_SUMMARY.format('*')}{glob}" for glob in SUMMARY_GLOBS] + [
            "hpcg.dat"]

    @run_after("setup")
    def size_problem(self) -> None:
        # the defaults are the quick size; at full, HPCG's rule (>= 25 % of memory, 1800 s)
        size = self.sized(sizing.hpcg, self.sizing_node(), self.sizing_ranks(),
                          self.sizing_budget())
        if size and (tuple(self.local_grid), self.run_time) == ((16, 16, 16), 5):
            self.local_grid, self.run_time = size.params["local_grid"], size.params["run_time"]
            self.apply_size(size)
        elif size:
            self.problem_size = (f"local grid {'x'.join(map(str, self.local_grid))} per rank, "
                                 f"{self.run_time} s (-S)")
            self.size_reason = f"set for this run; the rule would give: {size.summary}"

    @run_before("run")
    def write_input(self) -> None:
        if min(self.local_grid) < 16 or any(n % 8 for n in self.local_grid):
            raise SanityError(f"local_grid {self.local_grid}: HPCG needs each dimension a "
                              "multiple of 8 and at least 16")
        (Path(self.stagedir) / "hpcg.dat").write_text(hpcg_dat(self.local_grid, self.run_time))
        repeats = self.repeat_in_job()
        self.postrun_cmds = [keep_summary(1)]
        for run, line in enumerate(repeats, start=2):
            self.postrun_cmds += [line, keep_summary(run)]

    def summaries(self) -> list[HpcgResult]:
        """The summary of every run in the job."""
        results = []
        for run in range(1, self.samples + 1):
            found = kept_summaries(Path(self.stagedir), run)
            if not found:
                raise SanityError(f"HPCG run {run} of {self.samples} wrote no summary "
                                  f"({' or '.join(SUMMARY_GLOBS)}) in {self.stagedir}: it stopped "
                                  "before reporting (see the job output)")
            try:
                results.append(parse_hpcg(found[-1].read_text(errors="replace"),
                                          source=str(found[-1])))
            except HpcvalError as err:
                raise SanityError(str(err)) from None
        return results

    def measure(self) -> dict[str, list[float]]:
        results = self.summaries()
        return {f.name: [float(getattr(r, f.column)) for r in results] for f in self.figures}

    @sanity_function
    def valid_result(self) -> bool:
        results = self.summaries()
        for result in results:
            try:
                check_valid(result)
            except HpcvalError as err:
                raise SanityError(str(err)) from None
            if result.ranks is not None and result.ranks != self.num_tasks:
                raise SanityError(f"HPCG ran on {result.ranks} processes, {self.num_tasks} "
                                  f"asked ({result.source})")
        self.hpcg_official = all(r.official for r in results)
        self.figure_samples()
        return True
