"""Base test for OSU Micro-Benchmarks (OMB) point-to-point programs.

OMB is found through the environment, never at a fixed path: first in the
directories of ``$HPCVAL_OMB_DIR`` (colon-separated; each searched with its
subdirectories, so a Spack or ``make install`` prefix works as well as a
build tree), then on ``PATH`` (a Spack environment with
``osu-micro-benchmarks`` puts its ``libexec/.../pt2pt`` there). Where the
program is absent the check is skipped with a reason. ``$HPCVAL_OMB_ENVIRON``
names the programming environment the ``$HPCVAL_OMB_DIR`` build was compiled
with (default ``impi``); other environments look on ``PATH`` only, and skip
rather than launch a binary built against another MPI.
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

from hpcval.parsers.omb import OmbResult, check_complete, parse_omb
from hpcval.rfm.base import HpcvalTest

OMB_DIR_VAR = "HPCVAL_OMB_DIR"
OMB_ENVIRON_VAR = "HPCVAL_OMB_ENVIRON"

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


def find_omb_program(name: str, environ: str | None = None,
                     spack_prefix: str | None = None) -> tuple[str | None, str]:
    """Path of OMB program ``name`` and where it was looked for: the Spack-built
    OMB of the environment first (its programs live under ``libexec/``)."""
    if spack_prefix:
        for found in sorted(Path(spack_prefix).rglob(name)):
            if found.is_file() and os.access(found, os.X_OK):
                return str(found), f"the environment's Spack build ({spack_prefix})"
    omb_dirs = [d for d in os.environ.get(OMB_DIR_VAR, "").split(":") if d]
    wanted = os.environ.get(OMB_ENVIRON_VAR, "impi")
    if omb_dirs and (environ is None or wanted == environ):
        for d in omb_dirs:
            root = Path(d)
            if (root / name).is_file():
                return str(root / name), f"${OMB_DIR_VAR}"
            for found in sorted(root.rglob(name)) if root.is_dir() else []:
                if found.is_file() and os.access(found, os.X_OK):
                    return str(found), f"${OMB_DIR_VAR}"
    where = f"${OMB_DIR_VAR} ({os.environ.get(OMB_DIR_VAR, 'unset')}) or PATH"
    return shutil.which(name), where


class OmbBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """One OMB point-to-point program; a final check declares ``program``,
    options and its judged figures (variable -> (column, message size))."""

    spack_package = "osu-micro-benchmarks"

    valid_prog_environs = ["+mpi"]
    time_limit = "10m"

    #: OMB program name (``osu_latency``, ``osu_bw``, ``osu_mbw_mr``).
    #:
    #: :type: :class:`str`
    program = variable(str, value="")

    #: Judged figures: performance variable -> (column, message size in bytes).
    #:
    #: :type: :class:`Dict[str, Tuple[str, int]]`
    figures = variable(typ.Dict[str, typ.Tuple[str, int]], value={})

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
    #: stored with the run (seed 004: the spread, not only the mean).
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

    @run_after("init")
    def set_perf_variables(self) -> None:
        for name, (column, size) in self.figures.items():
            self.perf_variables[name] = sn.make_performance_function(
                self.figure(column, size), COLUMN_UNITS[column])

    @run_after("setup")
    def locate_program(self) -> None:
        path, where = find_omb_program(self.program, self.current_environ.name,
                                       self.spack_prefix())
        self.skip_if(path is None,
                     f"{self.program} not found in {where}: build OSU Micro-Benchmarks "
                     f"(e.g. spack install osu-micro-benchmarks) and put it on PATH, or "
                     f"set {OMB_DIR_VAR} to its directory")
        self.omb_program_path = str(path)
        self.executable = str(path)
        self.executable_opts = [
            "-m", f"{self.message_sizes[0]}:{self.message_sizes[1]}",
            "-i", str(self.iterations), "-x", str(self.warmup),
            *(["-c"] if self.validation else []), *(["-z"] if self.tail_latencies else []),
            *self.omb_options,
        ]

    def result(self) -> OmbResult:
        def parse(text: str, source: str) -> OmbResult:
            return check_complete(parse_omb(text, source), self.message_sizes[1], source)
        return self.parse_stdout(parse)

    @sn.deferrable
    def figure(self, column: str, size: int) -> float:
        return self.result().value(column, size)

    @sanity_function
    def complete_output(self) -> bool:
        return self.verify()

    def verify(self) -> bool:
        """Sanity: a complete table, validation passed; stores the series."""
        result = self.result()
        failed = result.validation_failures()
        if failed:
            raise SanityError(f"{self.program}: data validation failed at sizes {failed}")
        columns = {c: (str(column_unit(c)), [(float(s), v) for s, v in result.column(c).items()])
                   for c in result.columns if column_unit(c)}
        judged = {v: (result.resolve(c), s) for v, (c, s) in self.figures.items()}
        self.record_series(result.title, "message size", "B", columns, judged)
        return True


class OmbMultiPairBase(OmbBase):
    """``osu_mbw_mr``: ``pairs`` pairs, rank ``r`` streams to ``r + pairs``.

    OMB relies on block ordering of the ranks. On a partition with the
    ``internode`` feature the job takes two nodes with ``pairs`` ranks each,
    placed in blocks, so every pair crosses the link between them; the
    sanity asserts from the job's node list that it did.
    """

    program = "osu_mbw_mr"

    #: Rank pairs; ``None``: half the CPUs of a node on one node, all CPUs
    #: of a node across two nodes.
    #:
    #: :type: :class:`int` or :obj:`None`
    pairs = variable(int, type(None), value=None, loggable=True)

    #: Messages in flight per pair before an acknowledgement (``-W``).
    #:
    #: :type: :class:`int`
    window = variable(int, value=64, loggable=True)

    @run_after("setup")
    def set_layout(self) -> None:
        internode = "internode" in self.current_partition.features
        cpus = int(self.current_partition.processor.num_cpus or 2)
        if self.pairs is None:
            self.pairs = max(1, cpus if internode else cpus // 2)
        self.num_tasks = 2 * self.pairs
        if internode:
            self.num_nodes = 2
            self.num_tasks_per_node = self.pairs
        if self.executable_opts:
            self.executable_opts += ["-p", str(self.pairs), "-W", str(self.window)]

    @run_before("run")
    def block_placement(self) -> None:
        if type(self.job.launcher).__name__ == "SrunLauncher":
            self.job.launcher.options += ["--distribution=block"]

    def verify(self) -> bool:
        result = self.result()
        if result.pairs is not None and result.pairs != self.pairs:
            raise SanityError(f"osu_mbw_mr ran {result.pairs} pairs, {self.pairs} asked for")
        if "internode" in self.current_partition.features:
            nodes = sorted(set(self.job.nodelist or []))
            if len(nodes) != 2:
                raise SanityError(f"pairs must cross two nodes; the job ran on {nodes}")
        return super().verify()
