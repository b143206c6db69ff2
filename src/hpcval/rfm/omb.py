"""Base test for OSU Micro-Benchmarks (OMB) point-to-point programs.

OMB is found through the environment, never at a fixed path
(:meth:`hpcval.rfm.HpcvalTest.find_program`): the Spack build the
programming environment offers, then the directories of ``$HPCVAL_OMB_DIR``
(colon-separated; each searched with its subdirectories, so a Spack or
``make install`` prefix works as well as a build tree), then the
environment's ``PATH`` and ``PATH``. ``$HPCVAL_OMB_ENVIRON`` names the
programming environment the ``$HPCVAL_OMB_DIR`` build was compiled with
(default ``impi``); other environments do not use it, and skip rather than
launch a binary built against another MPI. Where the program is absent the
check is skipped with a reason.

The program runs ``samples`` times in one job; each judged figure is the
median over the runs, and the series stored is the median per size.
"""

from __future__ import annotations

import statistics

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.core.figures import Figure
from hpcval.parsers.omb import OmbResult, check_complete, parse_omb
from hpcval.rfm.base import HpcvalTest

OMB_DIR_VAR = "HPCVAL_OMB_DIR"

#: Units of OMB's judged columns (normalised header names).
COLUMN_UNITS = {"latency_us": "us", "bandwidth_mb_per_s": "MB/s", "mb_per_s": "MB/s",
                "messages_per_s": "msg/s"}


def column_unit(column: str) -> str | None:
    """Unit of any OMB column, tail percentiles included (``p99_tail_lat_us``)."""
    if column in COLUMN_UNITS:
        return COLUMN_UNITS[column]
    for suffix, unit in (("_us", "us"), ("_mb_per_s", "MB/s"), ("messages_per_s", "msg/s")):
        if column.endswith(suffix):
            return unit
    return None


def figure(variable: str, column: str, size: int) -> Figure:
    """A judged OMB figure: ``column`` at message ``size`` bytes."""
    return Figure(variable, COLUMN_UNITS[column], column=column, x=size)


class OmbBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """One OMB point-to-point program; a final check declares ``program``,
    options and its judged ``figures`` (:func:`figure`)."""

    spack_package = "osu-micro-benchmarks"

    valid_prog_environs = ["+mpi"]
    time_limit = "10m"
    rank_count = 2

    #: OMB program name (``osu_latency``, ``osu_bw``, ``osu_mbw_mr``).
    #:
    #: :type: :class:`str`
    program = variable(str, value="")
    #: Message sizes ``(min, max)`` in bytes (``-m min:max``; OMB >= 5.4).
    #:
    #: :type: :class:`Tuple[int, int]`
    message_sizes = variable(typ.Tuple[int, int], value=(1, 1 << 20), loggable=True)

    #: Timed iterations per size (``-i``) and warm-up iterations (``-x``).
    #:
    #: :type: :class:`int`
    iterations = variable(int, value=100, loggable=True)

    #: Warm-up iterations (``-x``).
    #:
    #: :type: :class:`int`
    warmup = variable(int, value=10, loggable=True)

    #: Check the received data (``-c``, OMB >= 7.0); a ``Fail`` row fails the check.
    #:
    #: :type: :class:`bool`
    validation = variable(bool, value=False, loggable=True)

    #: Print tail percentiles (``-z``, OMB >= 7.3): P50/P90/P99 columns,
    #: stored with the run ("The Performance of Remote Memory Access over InfiniBand": the spread,
    #: not only the mean).
    #:
    #: :type: :class:`bool`
    tail_latencies = variable(bool, value=False, loggable=True)

    #: Further OMB options.
    #:
    #: :type: :class:`List[str]`
    omb_options = variable(typ.List[str], value=[])

    #: Path of the program that ran (found through the environment).
    #:
    #: :type: :class:`str`
    omb_program_path = variable(str, value="", loggable=True)

    @run_after("setup")
    def set_options(self) -> None:
        self.omb_program_path = self.find_program(self.program, OMB_DIR_VAR)
        self.executable = self.omb_program_path
        self.executable_opts = [
            "-m", f"{self.message_sizes[0]}:{self.message_sizes[1]}",
            "-i", str(self.iterations), "-x", str(self.warmup),
            *(["-c"] if self.validation else []), *(["-z"] if self.tail_latencies else []),
            *self.omb_options,
        ]

    @run_before("run")
    def repeat_runs(self) -> None:
        self.postrun_cmds = self.repeat_in_job()

    def results(self) -> list[OmbResult]:
        """The complete table of every run in the job."""
        return self.parse_samples(lambda text, source: check_complete(
            parse_omb(text, source), self.message_sizes[1], source))

    def measure(self) -> dict[str, list[float]]:
        results = self.results()
        return {f.name: [r.value(f.column, int(f.x or 0)) for r in results]
                for f in self.figures}

    @sanity_function
    def complete_output(self) -> bool:
        return self.verify()

    def verify(self) -> bool:
        """Sanity: complete tables, validation passed; stores the series
        (median per size over the runs) and the samples."""
        results = self.results()
        for i, result in enumerate(results):
            failed = result.validation_failures()
            if failed:
                raise SanityError(f"{self.program} (run {i + 1}): data validation failed at "
                                  f"sizes {failed}")
        first = results[0]
        columns = {c: (str(column_unit(c)),
                       [(float(s), statistics.median(r.column(c)[s] for r in results))
                        for s in first.column(c)])
                   for c in first.columns if column_unit(c)}
        judged = {f.name: (first.resolve(f.column), f.x or 0) for f in self.figures}
        self.record_series(f"{first.title} (median of {len(results)})", "message size", "B",
                           columns, judged)
        self.figure_samples()
        return True


class OmbMultiPairBase(OmbBase):
    """``osu_mbw_mr``: ``pairs`` pairs, rank ``r`` streams to ``r + pairs``.

    OMB relies on block ordering of the ranks. On a partition with the
    ``internode`` feature the job takes two nodes with ``pairs`` ranks each,
    placed in blocks, so every pair crosses the link between them; the
    sanity asserts from the job's node list that it did.
    """

    program = "osu_mbw_mr"

    rank_count = "node"
    rank_multiple = 2
    nodes = "internode"

    #: Rank pairs; ``None``: half the CPUs of a node on one node, all CPUs
    #: of a node across two nodes (the rank policy of :class:`HpcvalTest`).
    #:
    #: :type: :class:`int` or :obj:`None`
    pairs = variable(int, type(None), value=None, loggable=True)

    #: Messages in flight per pair before an acknowledgement (``-W``).
    #:
    #: :type: :class:`int`
    window = variable(int, value=64, loggable=True)

    @run_after("init")
    def ranks_from_pairs(self) -> None:
        if self.pairs is not None:
            self.rank_count = 2 * self.pairs

    @run_after("setup")
    def set_pairs(self) -> None:
        self.pairs = self.num_tasks // 2
        self.executable_opts += ["-p", str(self.pairs), "-W", str(self.window)]

    @run_before("run")
    def block_placement(self) -> None:
        if type(self.job.launcher).__name__ == "SrunLauncher":
            self.job.launcher.options += ["--distribution=block"]

    def verify(self) -> bool:
        for result in self.results():
            if result.pairs is not None and result.pairs != self.pairs:
                raise SanityError(f"osu_mbw_mr ran {result.pairs} pairs, {self.pairs} asked for")
        if self.num_tasks_per_node:
            nodes = sorted(set(self.job.nodelist or []))
            if len(nodes) != self.num_tasks // self.num_tasks_per_node:
                raise SanityError(f"pairs must cross two nodes; the job ran on {nodes}")
        return super().verify()
