"""Base tests for Intel MPI Benchmarks: they know how to run IMB and judge
its tables; final checks in ``reframe-checks/`` only say what and how many.

Every judged IMB figure is backed by samples: IMB runs ``samples`` times in
one job (each run with ``repetitions`` iterations per size), and a figure is
the median over the runs. The lesson of Iwaida, Suzuki and Midorikawa, "The
Performance of Remote Memory Access over InfiniBand": a figure without its
spread hides how much it varies.
"""

from __future__ import annotations

import math
import statistics
import sys

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.core.figures import Figure
from hpcval.node import physics, tuning
from hpcval.node.cpucost import cpu_available_pct, cpu_busy_pct, parse_cpucost
from hpcval.parsers.imb import ImbTable, check_complete, parse_imb
from hpcval.rfm.base import HpcvalTest

#: Units of IMB's columns.
COLUMN_UNITS = {"t_usec": "us", "t_avg_usec": "us", "t_min_usec": "us", "t_max_usec": "us",
                "mbytes_per_sec": "MB/s", "msg_per_sec": "msg/s", "overlap_pct": "%",
                "t_cpu_usec": "us", "t_ovrl_usec": "us", "t_pure_usec": "us"}


def figure(variable: str, benchmark: str, size: int, column: str,
           better: str | None = None) -> Figure:
    """A judged IMB figure: ``column`` of ``benchmark``'s table at ``size``
    bytes (at the job's full process count); ``better`` where the column's
    unit does not say (a percentage)."""
    return Figure(variable, COLUMN_UNITS[column], column=column, x=size, table=benchmark,
                  better=better)


class ImbBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """IMB run ``samples`` times in one job; a final check declares
    ``benchmarks``, ``figures`` and, where it differs, the IMB ``program``,
    ``rank_count`` and options. The full tables (median per size over the
    runs) are stored as series."""

    spack_package = "intel-mpi-benchmarks"
    valid_prog_environs = ["+mpi +imb"]
    time_limit = "10m"
    rank_count = 2

    #: IMB program (``IMB-MPI1``, ``IMB-P2P``, ``IMB-NBC``).
    #:
    #: :type: :class:`str`
    program = variable(str, value="IMB-MPI1", loggable=True)

    #: IMB benchmarks to run in one invocation.
    #:
    #: :type: :class:`List[str]`
    benchmarks = variable(typ.List[str], value=[])

    #: Repetitions per message size within a run (``-iter N``).
    #:
    #: :type: :class:`int`
    repetitions = variable(int, value=60, loggable=True)

    #: Message sizes as powers of two, ``(min, max)`` (``-msglog min:max``).
    #:
    #: :type: :class:`Tuple[int, int]`
    msglog = variable(typ.Tuple[int, int], value=(0, 20), loggable=True)

    #: Further IMB options (e.g. ``-npmin``).
    #:
    #: :type: :class:`List[str]`
    imb_options = variable(typ.List[str], value=[])

    @run_after("setup")
    def set_options(self) -> None:
        self.executable = self.find_program(self.program)
        self.executable_opts = [*self.benchmarks, "-iter", str(self.repetitions)]
        if self.program != "IMB-P2P":
            self.executable_opts += ["-iter_policy", "off"]
        self.executable_opts += ["-msglog", f"{self.msglog[0]}:{self.msglog[1]}",
                                 *self.imb_options]

    @run_before("run")
    def repeat_runs(self) -> None:
        self.postrun_cmds = self.repeat_in_job()

    def runs(self) -> list[dict[str, ImbTable]]:
        """The tables of every run, checked complete, keyed by benchmark."""

        def parse(text: str, source: str) -> dict[str, ImbTable]:
            result = parse_imb(text, source)
            tables = {}
            for bench in self.benchmarks:
                sizes = [int(f.x or 0) for f in self.figures if f.table == bench]
                tables[bench] = check_complete(result, bench, sizes, source=source)
            return tables

        return self.parse_samples(parse)

    def measure(self) -> dict[str, list[float]]:
        runs = self.runs()
        return {f.name: [run[f.table].value(int(f.x or 0), f.column) for run in runs]
                for f in self.figures}

    @sanity_function
    def complete_runs(self) -> bool:
        runs = self.runs()
        for bench in self.benchmarks:
            table = runs[0][bench]
            if table.processes != self.num_tasks:
                raise SanityError(f"IMB {bench} ran with {table.processes} processes, "
                                  f"{self.num_tasks} asked for")
            columns = {}
            for column in table.columns:
                if column not in COLUMN_UNITS:
                    continue
                points = [(size, statistics.median(r[bench].value(size, column) for r in runs))
                          for size in table.sizes()]
                columns[column] = (COLUMN_UNITS[column], points)
            judged = {f.name: (f.column, f.x or 0) for f in self.figures if f.table == bench}
            self.record_series(f"{bench} (np={table.processes}, median of {len(runs)})",
                               "message size", "B", columns, judged)
        samples = self.figure_samples()
        self.collectives_within_bounds(samples)
        return True

    def collectives_within_bounds(self, samples: dict[str, list[float]]) -> None:
        """A collective's time below its point-to-point bound over the link the
        partition states (``extras.link_bw_mbs``) fails (:mod:`hpcval.node.physics`)."""
        try:
            link = physics.ceiling(self.current_partition.extras, physics.LINK_CEILING_EXTRA)
        except ValueError as err:
            raise SanityError(f"partition {self.current_partition.fullname} {err}") from None
        bad = [physics.collective_faster_than_p2p(f.table or "", statistics.median(
            samples[f.name]), float(f.x or 0), int(self.num_tasks), link)
            for f in self.figures if f.column in ("t_avg_usec", "t_min_usec", "t_max_usec")]
        if any(bad):
            raise SanityError("physically impossible: " + "; ".join(b for b in bad if b))


class ImbPingPongBase(ImbBase):
    """IMB PingPong between two ranks: one-way latency and bandwidth per size,
    2 KiB-4 MiB as Google Cloud's "Accelerating MPI applications using Google
    Virtual NIC (gVNIC)" judges a NIC.

    Repetitions are fixed (``-iter N -iter_policy off``) so runs compare. With
    ``cache = 'cold'``, ``-off_cache`` cycles through buffers the size of the
    detected last-level cache: a reused buffer overstates real bandwidth
    several times ("The Performance of Remote Memory Access over InfiniBand").
    """

    benchmarks = ["PingPong"]
    repetitions = 100
    msglog = (0, 22)
    figures = (
        figure("lat_0B", "PingPong", 0, "t_usec"),
        figure("lat_8B", "PingPong", 8, "t_usec"),
        figure("bw_2KiB", "PingPong", 2048, "mbytes_per_sec"),
        figure("bw_64KiB", "PingPong", 65536, "mbytes_per_sec"),
        figure("bw_1MiB", "PingPong", 1 << 20, "mbytes_per_sec"),
        figure("bw_4MiB", "PingPong", 4 << 20, "mbytes_per_sec"),
    )

    #: ``warm``: IMB reuses one buffer (best case); ``cold``: ``-off_cache``.
    cache = parameter(["warm", "cold"], loggable=True)

    #: ``-off_cache`` size in MiB for ``cache = 'cold'``; from the partition's
    #: last-level cache when not set.
    #:
    #: :type: :class:`float` or :obj:`None`
    off_cache_mib = variable(float, type(None), value=None, loggable=True)

    @run_after("setup")
    def set_cache_options(self) -> None:
        # a cache-cold run touches more memory per message; let IMB have it
        self.executable_opts += ["-mem", "2"]
        if self.cache != "cold":
            return
        if self.off_cache_mib is None:
            topo = self.topology()
            self.skip_if(not topo.llc_bytes,
                         f"partition {self.current_partition.fullname}: last-level cache "
                         f"unknown ({topo.describe()}), so a cache-cold buffer cannot be "
                         "sized: give the partition a `processor` with its caches in the "
                         "site config, or set off_cache_mib")
            self.off_cache_mib = float(math.ceil((topo.llc_bytes or 0) / 2**20))
        self.executable_opts += ["-off_cache", f"{self.off_cache_mib:g}"]


class ImbLabelledRunsBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """One IMB collective run several times in one job, each run under its
    own environment (e.g. an ``I_MPI_ADJUST_*`` setting) and preceded by a
    ``HPCVAL-ALGORITHM <label>`` line (:func:`hpcval.node.tuning.parse_labelled_runs`).
    The first run is IMB with the job's own environment, labelled 0; a final
    check adds the others in :meth:`labelled_runs`."""

    spack_package = "intel-mpi-benchmarks"
    valid_prog_environs = ["+impi +imb"]
    time_limit = "20m"
    rank_count = "node"

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
        self.executable = self.find_program("IMB-MPI1")
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
        self.prerun_cmds = [f'echo "{tuning.MARKER} 0"']
        self.postrun_cmds = self.labelled_runs(self.launch_command())

    def labelled(self) -> list[tuple[int, dict[int, float]]]:
        """[(label, {message size: time in us})] of every run in the job."""
        return self.parse_stdout(
            lambda text, source: tuning.parse_labelled_runs(text, self.collective, source))


class ImbCpuCostBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """A blocking 1 MiB stream between two ranks (IMB ``Uniband``), each rank
    run under ``python -m hpcval.node.cpucost`` (:mod:`hpcval.node.cpucost`), ``samples``
    times in one job. Figures per run: CPU busy and CPU available (% of a
    core, median over ranks) and the bandwidth reached."""

    spack_package = "intel-mpi-benchmarks"
    valid_prog_environs = ["+mpi +imb"]
    time_limit = "10m"
    rank_count = 2
    size = 1 << 20
    figures = (
        Figure("cpu_busy", "%", better="lower"),
        Figure("cpu_available", "%", better="higher"),
        figure("bw_1MiB", "Uniband", 1 << 20, "mbytes_per_sec"),
    )

    #: Repetitions of the 1 MiB window (64 messages each) per run: the stream
    #: must outlast MPI start-up, which the CPU time also covers.
    #:
    #: :type: :class:`int`
    repetitions = variable(int, value=60, loggable=True)

    #: Hardware counter state reported by the ranks (ok/unsupported/unavailable).
    #:
    #: :type: :class:`str`
    counters = variable(str, value="unknown", loggable=True)

    @run_after("setup")
    def set_command(self) -> None:
        imb = self.find_program("IMB-MPI1")
        self.executable = sys.executable
        self.executable_opts = [
            "-m", "hpcval.node.cpucost", "--", imb, "Uniband", "-npmin", str(self.num_tasks),
            "-msglog", "20:20", "-iter", str(self.repetitions), "-iter_policy", "off",
            "-time", "120",
        ]

    @run_before("run")
    def repeat_runs(self) -> None:
        self.postrun_cmds = self.repeat_in_job()

    def measure(self) -> dict[str, list[float]]:
        costs = self.parse_samples(parse_cpucost, "err")
        for i, records in enumerate(costs):
            if len(records) != self.num_tasks:
                raise SanityError(f"run {i + 1}: CPU cost of {len(records)} rank(s), "
                                  f"{self.num_tasks} expected")
        self.counters = ",".join(sorted({r.counters for rs in costs for r in rs}))
        bandwidth = self.parse_samples(lambda text, source: check_complete(
            parse_imb(text, source), "Uniband", [self.size], processes=self.num_tasks,
            source=source).value(self.size, "mbytes_per_sec"))
        return {"cpu_busy": [cpu_busy_pct(r) for r in costs],
                "cpu_available": [cpu_available_pct(r) for r in costs],
                "bw_1MiB": bandwidth}

    @sanity_function
    def measured(self) -> bool:
        wanted = self.node_count()
        if wanted > 1:
            nodes = sorted(set(self.job.nodelist or []))
            if len(nodes) != wanted:
                raise SanityError(f"the ranks must run on {wanted} nodes; the job ran on "
                                  f"{nodes}")
        self.figure_samples()
        return True
