"""Base tests for Intel MPI Benchmarks: they know how to run IMB and judge
its tables; final checks in ``reframe-checks/`` only say where and how many.
"""

from __future__ import annotations

import math
import statistics
from typing import NamedTuple

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable

from hpcval.errors import ParseError
from hpcval.parsers.imb import ImbTable, check_complete, parse_imb, parse_imb_runs
from hpcval.rfm.base import HpcvalTest, last_level_cache_bytes
from hpcval.tuning import MARKER


class ImbPingPongBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """IMB PingPong between two ranks: one-way latency and bandwidth per size.

    Repetitions are fixed (``-iter N -iter_policy off``) so runs compare. With
    ``cache = 'cold'``, ``-off_cache`` cycles through buffers larger than the
    detected last-level cache (seed 004: a reused buffer overstates real
    bandwidth several times).
    """

    spack_package = "intel-mpi-benchmarks"

    executable = "IMB-MPI1"
    num_tasks = 2
    valid_prog_environs = ["+mpi +imb"]
    time_limit = "10m"

    #: ``warm``: IMB reuses one buffer (best case); ``cold``: ``-off_cache``.
    cache = parameter(["warm", "cold"], loggable=True)

    #: Repetitions per message size (``-iter N -iter_policy off``).
    #:
    #: :type: :class:`int`
    repetitions = variable(int, value=500, loggable=True)

    #: Largest message size as a power of two (22: 4 MiB).
    #:
    #: :type: :class:`int`
    max_log2_size = variable(int, value=22, loggable=True)

    #: ``-off_cache`` size in MiB for ``cache = 'cold'``; derived from the
    #: detected last-level cache when not set (``-1``: IMB's built-in value,
    #: used when the topology is unknown).
    #:
    #: :type: :class:`float` or :obj:`None`
    off_cache_mib = variable(float, type(None), value=None, loggable=True)

    #: Judged one-way latencies: performance variable -> message size (bytes).
    #:
    #: :type: :class:`Dict[str, int]`
    latency_sizes = variable(typ.Dict[str, int], value={"lat_0B": 0, "lat_8B": 8})

    #: Judged bandwidths: performance variable -> message size (bytes); the
    #: defaults span the seed's 2 KiB-4 MiB range.
    #:
    #: :type: :class:`Dict[str, int]`
    bandwidth_sizes = variable(typ.Dict[str, int], value={
        "bw_2KiB": 2048, "bw_64KiB": 65536, "bw_1MiB": 1 << 20, "bw_4MiB": 4 << 20,
    })

    @run_after("init")
    def set_perf_variables(self) -> None:
        for name, size in self.latency_sizes.items():
            self.perf_variables[name] = sn.make_performance_function(
                self.figure(size, "t_usec"), "us")
        for name, size in self.bandwidth_sizes.items():
            self.perf_variables[name] = sn.make_performance_function(
                self.figure(size, "mbytes_per_sec"), "MB/s")

    @run_after("setup")
    def set_options(self) -> None:
        self.executable_opts = [
            "PingPong",
            "-iter", str(self.repetitions), "-iter_policy", "off",
            "-msglog", f"0:{self.max_log2_size}",
            # A cache-cold run touches more memory per message; let IMB have it.
            "-mem", "2",
        ]
        if self.cache == "cold":
            if self.off_cache_mib is None:
                llc = last_level_cache_bytes(self.current_partition.processor)
                self.off_cache_mib = float(math.ceil(llc / 2**20)) if llc else -1.0
            self.executable_opts += ["-off_cache", f"{self.off_cache_mib:g}"]

    def table(self) -> ImbTable:
        sizes = [*self.latency_sizes.values(), *self.bandwidth_sizes.values()]
        return self.parse_stdout(
            lambda text, source: check_complete(parse_imb(text, source), "PingPong", sizes,
                                                processes=2, source=source))

    @sn.deferrable
    def figure(self, size: int, column: str) -> float:
        return self.table().value(size, column)

    @sanity_function
    def complete_table(self) -> bool:
        table = self.table()
        judged = {v: ("one-way latency", s) for v, s in self.latency_sizes.items()}
        judged |= {v: ("bandwidth", s) for v, s in self.bandwidth_sizes.items()}
        self.record_series("PingPong", "message size", "B", {
            "one-way latency": ("us", table.series("t_usec")),
            "bandwidth": ("MB/s", table.series("mbytes_per_sec")),
        }, judged)
        return True


class Figure(NamedTuple):
    """One judged IMB figure: a column of one benchmark's table at one size
    (at the largest process count unless ``processes`` is given)."""

    variable: str
    benchmark: str
    size: int
    column: str
    unit: str


#: Units of IMB's columns.
COLUMN_UNITS = {"t_usec": "us", "t_avg_usec": "us", "t_min_usec": "us", "t_max_usec": "us",
                "mbytes_per_sec": "MB/s", "msg_per_sec": "msg/s", "overlap_pct": "%",
                "t_cpu_usec": "us", "t_ovrl_usec": "us", "t_pure_usec": "us"}


def figure(variable: str, benchmark: str, size: int, column: str) -> Figure:
    return Figure(variable, benchmark, size, column, COLUMN_UNITS[column])


class ImbSampledBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """An IMB run repeated ``samples`` times in one job.

    Each judged figure is the median over the runs, and ``<figure>_spread``
    is (max − min) / median in % over the runs: seed 004's lesson that a
    figure without its spread hides how much it varies. Collectives keep
    IMB's per-rank min/avg/max in the stored series. A final check declares
    ``executable``, ``benchmarks``, ``figures`` and options.
    """

    spack_package = "intel-mpi-benchmarks"

    executable = "IMB-MPI1"
    valid_prog_environs = ["+mpi +imb"]
    time_limit = "10m"

    #: IMB benchmarks to run in one invocation.
    #:
    #: :type: :class:`List[str]`
    benchmarks = variable(typ.List[str], value=[])

    #: Judged figures: (variable, benchmark, size, column, unit).
    figures: tuple[Figure, ...] = ()

    #: Runs of the benchmark in one job; every judged figure is their median.
    #:
    #: :type: :class:`int`
    samples = variable(int, value=3, loggable=True)

    #: Repetitions per message size within a run (``-iter N``).
    #:
    #: :type: :class:`int`
    repetitions = variable(int, value=100, loggable=True)

    #: Message sizes as powers of two, ``(min, max)`` (``-msglog min:max``).
    #:
    #: :type: :class:`Tuple[int, int]`
    msglog = variable(typ.Tuple[int, int], value=(0, 20), loggable=True)

    #: Further IMB options (e.g. ``-npmin``).
    #:
    #: :type: :class:`List[str]`
    imb_options = variable(typ.List[str], value=[])

    @run_after("init")
    def set_perf_variables(self) -> None:
        for f in self.figures:
            self.perf_variables[f.variable] = sn.make_performance_function(
                self.sampled(f, "median"), f.unit)
            self.perf_variables[f"{f.variable}_spread"] = sn.make_performance_function(
                self.sampled(f, "spread"), "%")

    @run_after("setup")
    def set_options(self) -> None:
        self.executable_opts = [*self.benchmarks, "-iter", str(self.repetitions)]
        if self.executable != "IMB-P2P":
            self.executable_opts += ["-iter_policy", "off"]
        self.executable_opts += ["-msglog", f"{self.msglog[0]}:{self.msglog[1]}",
                                 *self.imb_options]

    @run_before("run")
    def repeat_in_job(self) -> None:
        self._hpcval_launcher()
        # ReFrame copies the task counts into the job only when it writes the
        # script; the repeated launches need them now.
        self.job.num_tasks = self.num_tasks
        self.job.num_tasks_per_node = self.num_tasks_per_node
        launch = " ".join(self.job.launcher.run_command(self.job).split())
        command = " ".join([launch, self.executable, *self.executable_opts])
        self.postrun_cmds = [command] * (self.samples - 1)

    def runs(self) -> list[dict[str, ImbTable]]:
        """The tables of every run, checked complete, keyed by benchmark."""

        def parse(text: str, source: str) -> list[dict[str, ImbTable]]:
            results = parse_imb_runs(text, source)
            if len(results) != self.samples:
                raise ParseError(f"{source}: {len(results)} IMB run(s) in the output, "
                                 f"{self.samples} expected")
            runs = []
            for i, result in enumerate(results):
                tables = {}
                for bench in self.benchmarks:
                    sizes = [f.size for f in self.figures if f.benchmark == bench]
                    tables[bench] = check_complete(result, bench, sizes,
                                                   source=f"{source} (run {i + 1})")
                runs.append(tables)
            return runs

        return self.parse_stdout(parse)

    @sn.deferrable
    def sampled(self, fig: Figure, statistic: str) -> float:
        values = [run[fig.benchmark].value(fig.size, fig.column) for run in self.runs()]
        median = statistics.median(values)
        if statistic == "median":
            return median
        return 100.0 * (max(values) - min(values)) / median if median else 0.0

    @sanity_function
    def complete_runs(self) -> bool:
        runs = self.runs()
        for bench in self.benchmarks:
            table = runs[0][bench]
            columns = {}
            for column in table.columns:
                if column in ("bytes", "repetitions") or column not in COLUMN_UNITS:
                    continue
                points = [(size, statistics.median(r[bench].value(size, column) for r in runs))
                          for size in table.sizes()]
                columns[column] = (COLUMN_UNITS[column], points)
            judged = {f.variable: (f.column, f.size) for f in self.figures
                      if f.benchmark == bench}
            self.record_series(f"{bench} (np={table.processes}, median of {len(runs)})",
                               "message size", "B", columns, judged)
        return True


class ImbLabelledRunsBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """One IMB collective run several times in one job, each run under its
    own environment (e.g. an ``I_MPI_ADJUST_*`` setting) and preceded by a
    ``HPCVAL-ALGORITHM <label>`` line (:func:`hpcval.tuning.parse_labelled_runs`).
    The first run is IMB with the job's own environment, labelled 0; a final
    check adds the others in :meth:`labelled_runs`."""

    spack_package = "intel-mpi-benchmarks"

    executable = "IMB-MPI1"
    valid_prog_environs = ["+impi +imb"]
    time_limit = "20m"

    #: IMB collective under test.
    collective = parameter(["Allreduce", "Bcast"], loggable=True)

    #: Repetitions per message size (``-iter N``).
    #:
    #: :type: :class:`int`
    repetitions = variable(int, value=50, loggable=True)

    #: Message sizes as powers of two (``-msglog min:max``).
    #:
    #: :type: :class:`Tuple[int, int]`
    msglog = variable(typ.Tuple[int, int], value=(3, 16), loggable=True)

    @run_after("setup")
    def set_options(self) -> None:
        self.num_tasks = max(2, int(self.current_partition.processor.num_cpus or 2))
        self.executable_opts = [
            self.collective, "-npmin", str(self.num_tasks), "-iter", str(self.repetitions),
            "-iter_policy", "off", "-msglog", f"{self.msglog[0]}:{self.msglog[1]}",
        ]

    def labelled_runs(self, launch: str) -> list[str]:
        """Shell lines of the runs after the first (``launch`` is the full
        launcher-and-IMB command)."""
        raise NotImplementedError

    @run_before("run")
    def write_labelled_runs(self) -> None:
        self._hpcval_launcher()
        self.job.num_tasks = self.num_tasks
        launcher = " ".join(self.job.launcher.run_command(self.job).split())
        command = " ".join([launcher, self.executable, *self.executable_opts])
        self.prerun_cmds = [f'echo "{MARKER} 0"']
        self.postrun_cmds = self.labelled_runs(command)
