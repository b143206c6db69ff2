"""Base tests around hpcval's cfdio proxy (proxies/cfdio): they build it with
the environment's ``mpicc`` (or use a Spack-built ``cfdio``) and judge its
``CFDIO`` result line; final checks in ``reframe-checks/`` say what to run.

The proxy runs ``samples`` times in one job; each figure is the median of
the runs' values (:class:`hpcval.rfm.HpcvalTest`).
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.core.errors import HpcvalError
from hpcval.core.figures import Figure
from hpcval.core.paths import project_root
from hpcval.core.series import median
from hpcval.node import physics, sizing
from hpcval.parsers.cfdio import output_cost, parse_cfdio
from hpcval.rfm.base import HpcvalTest
from hpcval.rfm.programs import environ_path_dirs, locate_program, spack_prefix
from hpcval.rfm.sizing import SizedTest

#: Intel MPI's compiler wrappers find their headers through I_MPI_ROOT; derive
#: it from the wrapper on PATH when the environment does not set it.
_IMPI_ROOT = ('if [ -z "$I_MPI_ROOT" ] && [ -f "$(dirname "$(command -v mpicc)")/../include/'
              'mpi.h" ]; then export I_MPI_ROOT="$(dirname "$(dirname "$(command -v mpicc)")")";'
              ' fi')

#: Output of the proxy's run without output before the ``i``-th run with it.
BASELINE_OUTPUT = "baseline-{}.out"


def result_figure(name: str, unit: str, key: str, better: str | None = None) -> Figure:
    """A judged figure read from the ``key`` field of the proxy's result line."""
    return Figure(name, unit, column=key, better=better)


class CfdioBuild(rfm.CompileOnlyRegressionTest):
    """The cfdio program of one programming environment, made once for every
    cfdio case that runs with it (a ReFrame fixture of environment scope): the
    environment's Spack-built ``hpcval-cfdio`` where it offers one
    (``extras.spack``), else a ``cfdio`` on the environment's PATH, else
    proxies/cfdio built with ``make MPICC=<environment cc>``. One build per
    environment instead of one per case: fewer compilations beside the
    benchmarks that measure the node."""

    valid_systems = ["*"]
    valid_prog_environs = ["+mpi"]
    build_locally = True

    #: Path of the program the cases run (set in setup).
    program = variable(str, value="")
    #: Compiler flags of the source build; unset: the Makefile's own (portable,
    #: so a build on a login node runs on any compute node). Give the CPU's own
    #: flags where the build runs on the nodes it measures
    #: (``-S CfdioBuild.cflags=-O3,-march=native,-std=c99``): the portable
    #: build's stencil can be compute-bound (docs/checks.md, cfdio).
    cflags = variable(typ.List[str], type(None), value=None)

    @run_after("setup")
    def set_source(self) -> None:
        env = self.current_environ
        built, _ = locate_program("cfdio", spack_prefix=spack_prefix(self, "hpcval-cfdio"),
                                  environ=env.name, environ_dirs=environ_path_dirs(env.env_vars))
        if built:
            self.sourcesdir = None
            self.build_system = "CustomBuild"
            self.build_system.commands = ["true"]
            self.program = built
        else:
            self.sourcesdir = str(project_root() / "proxies" / "cfdio")
            self.build_system = "Make"
            self.build_system.flags_from_environ = False
            # a binary copied along with the sources may be from another MPI
            self.prebuild_cmds = [_IMPI_ROOT, "rm -f cfdio"]
            # the environment's MPI compiler wrapper (e.g. mpicc.openmpi)
            self.build_system.options = [f"MPICC={env.cc or 'mpicc'}"]
            if self.cflags is not None:
                self.build_system.options.append(shlex.quote("CFLAGS=" + " ".join(self.cflags)))
            self.program = str(Path(self.stagedir) / "cfdio")

    @sanity_function
    def program_there(self) -> object:
        return sn.assert_true(Path(self.program).is_file(),
                              msg=f"no cfdio program at {self.program} after the build")


class CfdioBase(SizedTest, HpcvalTest, rfm.RunOnlyRegressionTest):
    """Runs hpcval's cfdio proxy, made once per environment by the
    :class:`CfdioBuild` fixture. Problem sizes come from :mod:`hpcval.node.sizing`
    (one hook per base test); figures that physics rules out fail
    (:mod:`hpcval.node.physics`)."""

    valid_prog_environs = ["+mpi"]
    time_limit = "5m"
    spack_package = "hpcval-cfdio"
    cfdio_build = fixture(CfdioBuild, scope="environment")

    @run_after("setup")
    def set_source(self) -> None:
        self.sourcesdir = None
        self.cfdio = self.cfdio_build.program
        self.executable = self.cfdio

    @run_before("run", always_last=True)
    def repeat_runs(self) -> None:
        self.postrun_cmds = [*self.repeat_lines(), *self.postrun_cmds]

    def repeat_lines(self) -> list[str]:
        """Shell lines of the runs after the first (:meth:`repeat_in_job`)."""
        return self.repeat_in_job()

    def result(self, path: Path) -> dict:
        """The parsed CFDIO line of output file *path*; when there is none, the
        error says what the proxy reported on its standard error (the path
        and errno of a failed write, e.g. a full disk)."""
        try:
            text = path.read_text(errors="replace")
            for err in (path.with_suffix(".err"),
                        Path(self.stagedir) / str(self.stderr.evaluate())):
                if path.suffix == ".out" and err.is_file() and err != path:
                    text += "\n" + err.read_text(errors="replace")
                    break
            return parse_cfdio(text, source=str(path))
        except (OSError, HpcvalError) as err:
            raise SanityError(str(err)) from None

    def results(self) -> list[dict]:
        """The result line of every run in the job."""
        return [self.result(path) for path in self.sample_outputs()]

    def measure(self) -> dict[str, list[float]]:
        results = self.results()
        return {f.name: [float(r[f.column]) for r in results] for f in self.figures}

    def ceiling(self, key: str) -> float | None:
        """A ceiling the partition states (``extras.<key>``, MB/s), or ``None``."""
        try:
            return physics.ceiling(self.current_partition.extras, key)
        except ValueError as err:
            raise SanityError(f"partition {self.current_partition.fullname} {err}") from None

    def guard(self, *reasons: str | None) -> None:
        """Fail with every reason physics gives against the figures."""
        bad = [r for r in reasons if r]
        if bad:
            raise SanityError("physically impossible: " + "; ".join(bad))

    def output_free_bytes(self) -> int | None:
        """Free space where the check's files go, less the margin a run
        keeps free (:func:`hpcval.node.sizing.usable_bytes`)."""
        return sizing.usable_bytes(self.shared_fs_dir() or str(self.stagedir))

    def every_run_valid(self, key: str = "valid") -> object:
        """Sanity: every run's result says ``<key>=1``; the samples are stored."""
        self.figure_samples()
        return sn.all([sn.assert_eq(r[key], 1, msg=f"run {i + 1}: {key}={{0}}, expected {{1}}")
                       for i, r in enumerate(self.results())])


class CfdioFilesBase(CfdioBase):
    """A cfdio run that writes files: to a per-test directory on the partition's
    shared file system (``extras.shared_fs_dir``) where it has one, else to the
    stage directory; what the proxy leaves behind is removed and fails the check."""

    #: Shell pattern of the files the proxy writes in ``output_dir``.
    files = "cfdio_*"

    @run_after("setup")
    def set_output_dir(self) -> None:
        self.output_dir = self.shared_fs_dir() or "."

    def no_leftovers(self) -> object:
        left = self.leftovers()
        return sn.assert_false(left, msg=f"result files left behind: {' '.join(left)}")


def free_space_check(directory: str, need_bytes: int) -> str:
    """A job-script line that, just before the files are written, stops the
    job (exit 28, ENOSPC) naming the disk when *directory*'s file system has
    less than *need_bytes* free (what the job writes plus the margin a run
    keeps free, :func:`hpcval.node.sizing.disk_margin`): sizing checked at setup,
    but other jobs may have filled the disk since. Where ``df`` cannot say,
    nothing is checked."""
    need_kib = max(1, need_bytes // 1024)
    where = shlex.quote(directory)
    return (f"free=$(df -Pk {where} 2>/dev/null | awk 'NR==2 {{print $4}}'); "
            f'if [ -n "$free" ] && [ "$free" -lt {need_kib} ]; then '
            f'echo "hpcval: {directory}: $((free / 1024)) MiB free, less than the '
            f'{need_kib // 1024} MiB this job writes plus the margin kept free: No space '
            f'left on device (checked before writing)" >&2; exit 28; fi')


class CfdioOutputCostBase(CfdioFilesBase):
    """Runs the proxy without output and with ``strategy`` at ``num_tasks``
    ranks, in pairs, ``samples`` pairs in one job; reports output cost (with −
    without), output share of the run and write bandwidth, per pair."""

    #: (set by the final check, usually as a parameter: ``strategy``, the
    #: output strategy; ``none`` gives the noise of the difference, ~0)
    #: Total grid (strong scaling: fixed while the ranks vary); sized from
    #: the node's memory and the budget (:func:`hpcval.node.sizing.output`).
    global_grid = (64, 64, 64)
    steps = 20
    every = 5
    files = "cfdio_step*"
    figures = (Figure("output_cost", "s", better="lower"),
               Figure("output_share", "fraction", better="lower"),
               result_figure("write_bw", "MB/s", "write_MBs"))

    @run_after("setup")
    def size_problem(self) -> None:
        size = self.sized(sizing.output, self.sizing_node(), self.sizing_budget(),
                          free=self.output_free_bytes(), samples=self.samples)
        if size:
            self.global_grid = size.params["global_grid"]
            self.steps, self.every = size.params["steps"], size.params["every"]
            self.apply_size(size)

    @run_before("run")
    def set_options(self) -> None:
        g = [str(x) for x in self.global_grid]
        common = ["--global", *g, "--steps", str(self.steps), "--every", str(self.every),
                  "--dir", self.output_dir]
        self.executable_opts = [*common, "--strategy", self.strategy]
        self.baseline = self.launch_command(self.cfdio, *common, "--strategy", "none")
        # per-rank-then-gather holds the parts and the merged file at once
        need = 2 * 8 * math.prod(self.global_grid) + sizing.disk_margin(self.output_dir)
        self.prerun_cmds = [f"mkdir -p '{self.output_dir}'",
                            free_space_check(self.output_dir, need),
                            f"{self.baseline} > {BASELINE_OUTPUT.format(1)}"]
        self.postrun_cmds = self.cleanup_cmds(self.output_dir, self.files)

    def repeat_lines(self) -> list[str]:
        lines = []
        for i, line in enumerate(self.repeat_in_job(), start=2):
            lines += [f"{self.baseline} > {BASELINE_OUTPUT.format(i)}", line]
        return lines

    def baselines(self) -> list[dict]:
        stage = Path(self.stagedir)
        return [self.result(stage / BASELINE_OUTPUT.format(i))
                for i in range(1, self.samples + 1)]

    def measure(self) -> dict[str, list[float]]:
        pairs = [output_cost(run, base) for run, base in zip(self.results(), self.baselines(),
                                                             strict=True)]
        return {"output_cost": [cost for cost, _ in pairs],
                "output_share": [share for _, share in pairs],
                "write_bw": [float(r["write_MBs"]) for r in self.results()]}

    @sanity_function
    def validate(self) -> bool:
        checks = [sn.assert_eq(base["checksum"], run["checksum"],
                               msg="field checksum differs between runs: {0} != {1}")
                  for run, base in zip(self.results(), self.baselines(), strict=True)]
        samples = self.figure_samples()
        io_ceiling = self.ceiling(physics.IO_CEILING_EXTRA)
        impossible = None
        if self.strategy != "none":
            baselines = [float(b["total_s"]) for b in self.baselines()]
            impossible = physics.output_cost_below_noise(samples["output_cost"], baselines)
            # a cost inside the noise is indistinguishable from 0: said beside the
            # size (the HTML report shows it), never a failure
            note = physics.output_cost_in_noise(samples["output_cost"], baselines)
            if note and note not in self.size_reason:
                self.size_reason = "; ".join(filter(None, [self.size_reason, note]))
        self.guard(impossible, physics.above_ceiling("write_bw", median(samples["write_bw"]),
                                                io_ceiling, "device or link ceiling "
                                                f"(extras {physics.IO_CEILING_EXTRA})"))
        return sn.all([*checks, self.no_leftovers()])


class CfdioTriadBase(CfdioBase):
    """STREAM-triad-like kernel of the proxy: memory bandwidth of the node
    (all ranks together), best of ``--reps`` in each run."""

    rank_count = "node"
    figures = (result_figure("triad_bw", "MB/s", "triad_MBs"),)

    #: Doubles per array and rank; unset: sized beyond the node's last-level
    #: cache (:func:`hpcval.node.sizing.triad`).
    triad_n = variable(int, type(None), value=None)
    #: Repetitions per run; the best counts (unset: from the budget).
    reps = variable(int, type(None), value=None)

    @run_after("setup")
    def size_problem(self) -> None:
        size = self.sized(sizing.triad, self.sizing_node(), self.sizing_ranks(),
                          self.sizing_budget(), samples=self.samples)
        if size:
            if self.triad_n is None:
                self.triad_n = size.params["triad_n"]
                self.apply_size(size)
            else:
                self.problem_size = f"{self.triad_n:,} doubles per array and rank (-S triad_n)"
                self.size_reason = f"set for this run; the rule would give: {size.reason}"
            self.reps = self.reps or size.params["reps"]

    @run_before("run")
    def set_options(self) -> None:
        self.executable_opts = ["--mode", "triad", "--triad-n", str(self.triad_n),
                                "--reps", str(self.reps)]

    @sanity_function
    def validate(self) -> bool:
        valid = self.every_run_valid()
        samples = self.figure_samples()
        self.guard(physics.above_ceiling(
            "triad_bw", median(samples["triad_bw"]), self.ceiling(physics.MEMORY_CEILING_EXTRA),
            f"node's memory bandwidth (extras {physics.MEMORY_CEILING_EXTRA})"))
        return valid


class CfdioStencilBase(CfdioBase):
    """The proxy's stencil (no output) and the triad kernel in one run with
    the same ranks: stencil and triad bandwidth and their ratio, the yardstick
    of whether the proxy stresses memory like a real CFD code.

    The grid and the triad's arrays are sized beyond the node's last-level
    cache (:func:`hpcval.node.sizing.stencil`: fields >= 4x the cache per rank), so
    both kernels run from memory; a stencil faster than the triad of the same
    job (cache-resident) fails."""

    rank_count = "node"
    #: Total grid; unset: sized beyond the node's last-level cache.
    global_grid = variable(typ.Tuple[int, int, int], type(None), value=None)
    #: Stencil sweeps per run; unset: from the budget.
    steps = variable(int, type(None), value=None)
    figures = (result_figure("stencil_bw", "MB/s", "stencil_MBs"),
               result_figure("triad_bw", "MB/s", "triad_MBs"),
               result_figure("stencil_fraction_of_triad", "fraction", "stencil_fraction",
                             better="higher"))
    #: Doubles per array and rank of the triad (unset: sized with the grid).
    triad_n = variable(int, type(None), value=None)
    #: Triad repetitions per run; the best counts (unset: from the budget).
    reps = variable(int, type(None), value=None)

    @run_after("setup")
    def size_problem(self) -> None:
        size = self.sized(sizing.stencil, self.sizing_node(), self.sizing_ranks(),
                          self.sizing_budget(), samples=self.samples)
        if size:
            fixed = [f"-S {name}" for name in ("global_grid", "steps", "triad_n")
                     if getattr(self, name) is not None]
            self.global_grid = self.global_grid or size.params["global_grid"]
            self.steps = self.steps or size.params["steps"]
            self.triad_n = self.triad_n or size.params["triad_n"]
            self.reps = self.reps or size.params["reps"]
            self.apply_size(size)
            if fixed:
                self.problem_size = (f"grid {'x'.join(map(str, self.global_grid))}, "
                                     f"{self.steps} sweeps, triad {self.triad_n:,} doubles per "
                                     f"array and rank ({', '.join(fixed)})")
                self.size_reason = f"set for this run; the rule would give: {size.summary}"

    @run_before("run")
    def set_options(self) -> None:
        self.executable_opts = ["--global", *[str(x) for x in self.global_grid],
                                "--steps", str(self.steps), "--strategy", "none",
                                "--with-triad", "--triad-n", str(self.triad_n),
                                "--reps", str(self.reps)]

    @sanity_function
    def validate(self) -> bool:
        valid = self.every_run_valid()
        samples = self.figure_samples()
        stencil, triad = median(samples["stencil_bw"]), median(samples["triad_bw"])
        ceiling = self.ceiling(physics.MEMORY_CEILING_EXTRA)
        what = f"node's memory bandwidth (extras {physics.MEMORY_CEILING_EXTRA})"
        self.guard(physics.cache_resident_stencil(stencil, triad),
                   physics.above_ceiling("stencil_bw", stencil, ceiling, what),
                   physics.above_ceiling("triad_bw", triad, ceiling, what))
        return valid


class CfdioReadBase(CfdioFilesBase):
    """Post-processing read (Software Cradle's "SMBDirect BMT まとめ"):
    ``num_tasks`` readers each write a result file of ``read_mb`` MiB, drop it
    from the page cache, then all read back at once. Reports per-reader
    (slowest, fastest) and aggregate read bandwidth, so saturation of the file
    server's link under concurrent readers shows; the files go to the
    partition's shared file system where it has one (``extras.shared_fs_dir``).
    ``cache_resident`` is the share of the files still in the page cache when
    the read began (0 = read from the device or server; -1 = not measurable)."""

    #: MiB each reader writes and reads back (unset: :func:`hpcval.node.sizing.read`).
    read_mb = variable(int, type(None), value=None)
    files = "cfdio_read*"
    figures = (result_figure("aggregate_read_bw", "MB/s", "aggregate_MBs"),
               result_figure("min_reader_bw", "MB/s", "min_reader_MBs"),
               result_figure("max_reader_bw", "MB/s", "max_reader_MBs"),
               result_figure("cache_resident", "fraction", "cache_resident", better="lower"))

    @run_after("setup")
    def size_problem(self) -> None:
        size = self.sized(sizing.read, self.sizing_node(), self.sizing_ranks(),
                          self.sizing_budget(), free=self.output_free_bytes(),
                          samples=self.samples)
        if size and self.read_mb is None:
            self.read_mb = size.params["read_mb"]
            self.apply_size(size)
        elif size:
            self.problem_size = f"{self.read_mb} MiB per reader (-S read_mb)"
            self.size_reason = f"set for this run; the rule would give: {size.summary}"

    @run_before("run")
    def set_options(self) -> None:
        self.executable_opts = ["--mode", "read", "--read-mb", str(self.read_mb),
                                "--dir", self.output_dir]
        self.prerun_cmds = [f"mkdir -p '{self.output_dir}'"]
        self.postrun_cmds = self.cleanup_cmds(self.output_dir, self.files)

    @sanity_function
    def validate(self) -> bool:
        valid = sn.all([self.every_run_valid("verified"), self.no_leftovers()])
        samples = self.figure_samples()
        self.guard(physics.above_ceiling(
            "aggregate_read_bw", median(samples["aggregate_read_bw"]),
            self.ceiling(physics.IO_CEILING_EXTRA),
            f"device or link ceiling (extras {physics.IO_CEILING_EXTRA})"))
        return valid
