"""The mixin every hpcval check derives from: its inputs and its hooks.

:class:`HpcvalTest` declares what a check may set (its references entry, its
Spack package, its figures and samples, the placement policy's inputs) and
hooks each of ReFrame's stages to one plain function of a concern module,
where the work is done and tested:

* :mod:`hpcval.rfm.placement`: how many MPI ranks run on how many nodes, the
  one writer of ``num_tasks``/``num_tasks_per_node`` (beside it,
  :mod:`hpcval.rfm.sizing`, the problem size for that layout);
* :mod:`hpcval.rfm.launch`: the launcher, what of a site config reaches the
  job script (quoted), repeated runs in one job, how the job ended, its files;
* :mod:`hpcval.rfm.samples`: declared figures as performance variables backed
  by stored samples, measured series, impossible figures;
* :mod:`hpcval.rfm.references`: the site's references, never written in the
  check; a missing one is a failure;
* :mod:`hpcval.rfm.programs`: where a benchmark program is, which Spack build
  and MPI stack ran.

The methods a check calls (``find_program``, ``repeat_in_job``,
``figure_samples``...) are the same one-line calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, variable

from hpcval.core.figures import Figure
from hpcval.core.series import MIN_SAMPLES
from hpcval.node import topology
from hpcval.rfm import launch, placement, programs, sitevalues
from hpcval.rfm import references as rfm_references
from hpcval.rfm import samples as rfm_samples


class HpcvalTest(rfm.RegressionTestPlugin):
    """Base mixin of hpcval checks: ``class x_check(HpcvalTest, rfm.RunOnlyRegressionTest)``."""

    #: Name of this check's entry in the site's references file. Defaults to
    #: the class name; a site subclass may point it at its parent's entry.
    #:
    #: :type: :class:`str` or :obj:`None`
    reference_entry = variable(str, type(None), value=None)

    #: MPI stack of the programming environment (its ``extras.mpi_stack``).
    #:
    #: :type: :class:`str`
    mpi_stack = variable(str, value="unknown", loggable=True)

    #: What the site config declares about the machine (the partition's
    #: ``extras.provenance``, e.g. the lab's fabric), kept with the stored run.
    site_provenance = variable(dict, value={}, loggable=True)

    #: Concrete spec of the benchmark and the MPI it ran with, where Spack built
    #: them (the environment's ``extras.spec``, see hpcval.spack.describe_spec);
    #: empty otherwise.
    #:
    #: :type: :class:`str`
    software_spec = variable(str, value="", loggable=True)

    #: Spack package of the program the check runs (e.g. ``intel-mpi-benchmarks``):
    #: where the programming environment offers it Spack-built (``extras.spack``,
    #: see :func:`hpcval.rfm.site.spack_environments`), the check runs that build
    #: and records its concrete spec as ``software_spec``.
    #:
    #: :type: :class:`str`
    spack_package = variable(str, value="")

    #: Judged figures, declared once (:class:`hpcval.core.figures.Figure`): each
    #: becomes a performance variable whose value is the median of its
    #: samples, stored with the run (``hpcval-samples.json``). A base test
    #: reads the samples in :meth:`measure`.
    figures: tuple[Figure, ...] = ()

    #: Runs of the measurement in one job (:meth:`repeat_in_job`), or
    #: repetitions a benchmark makes itself: the samples of every figure.
    #:
    #: :type: :class:`int`
    samples = variable(int, value=MIN_SAMPLES, loggable=True)

    #: MPI ranks of the job (:mod:`hpcval.rfm.placement`): a number, ``"node"``
    #: (one per CPU of every node of the job, from the partition's topology) or
    #: ``"core"`` (one per core of every node). ``None``: ``num_tasks`` as
    #: given on the command line. Partitions with too few CPUs get no test case.
    #:
    #: :type: :class:`int`, :class:`str` or :obj:`None`
    rank_count = variable(int, str, type(None), value=None, loggable=True)

    #: Nodes the ranks are spread over, in equal blocks; ``"internode"``: two
    #: on a partition with the ``internode`` feature, one elsewhere.
    #:
    #: :type: :class:`int` or :class:`str`
    nodes = variable(int, str, value=1, loggable=True)

    #: MPI ranks on each node, whatever ``rank_count`` says (``None``: as
    #: ``rank_count`` places them).
    #:
    #: :type: :class:`int` or :obj:`None`
    ranks_per_node = variable(int, type(None), value=None, loggable=True)

    #: The rank count is a multiple of this (2 for checks of rank pairs).
    #:
    #: :type: :class:`int`
    rank_multiple = variable(int, value=1)

    #: Why the test skipped itself (:meth:`skip`): ReFrame's JSON run report
    #: keeps no reason for a skipped case, so the report reads it from here.
    #:
    #: :type: :class:`str`
    skip_reason = variable(str, value="", loggable=True)

    def skip(self, msg: str | None = None) -> None:
        """Skip the test, keeping *msg* in the run report (:attr:`skip_reason`)."""
        self.skip_reason = str(msg or "")
        super().skip(msg)

    # -- hooks: one call each, in the order ReFrame runs them within a stage --

    @run_after("init")
    def _hpcval_require_reference(self) -> None:
        rfm_references.require_reference(self)

    @run_after("init", always_last=True)
    def _hpcval_fit_partitions(self) -> None:
        placement.fit_partitions(self)

    @run_after("init")
    def _hpcval_declare_figures(self) -> None:
        rfm_samples.declare_figures(self)

    @run_after("setup")
    def _hpcval_check_site_values(self) -> None:
        # plain ReFrame runs no `hpcval validate`: a site value no machine has
        # fails the check here, before any launch (hpcval.rfm.sitevalues)
        sitevalues.check_test(self)

    @run_after("setup")
    def _hpcval_record_stack(self) -> None:
        programs.record_stack(self)

    @run_after("setup")
    def _hpcval_set_tasks(self) -> None:
        placement.set_tasks(self)

    @run_before("compile")
    def _hpcval_quote_build_environment(self) -> None:
        # ReFrame loads the environments for the build job too (and runs any
        # ``$(...)`` or backticks in their values while doing so)
        launch.quote_environment(self)

    @run_before("run")
    def _hpcval_references(self) -> None:
        rfm_references.apply(self, HpcvalTest)

    @run_before("run")
    def _hpcval_launcher(self) -> None:
        launch.set_launcher(self)

    @run_before("run")
    def _hpcval_quote_environment(self) -> None:
        launch.quote_environment(self)

    @run_before("run")
    def _hpcval_check_bandwidth_ceiling(self) -> None:
        # a wrong ceiling fails before the benchmark runs, not after
        rfm_samples.bandwidth_ceiling(self.current_partition)

    @run_before("sanity")
    def _hpcval_job_outcome(self) -> None:
        launch.job_outcome(self)

    @run_before("performance")
    def _hpcval_check_figures(self) -> None:
        rfm_samples.check_figures(self)

    @run_before("performance")
    def _hpcval_check_variables(self) -> None:
        rfm_references.check_reported(self)

    # -- placement (hpcval.rfm.placement) ---------------------------------------

    def topology(self, partition: Any = None) -> topology.Topology:
        """The processor topology of *partition* (default: the current one)."""
        return placement.topology_of(partition or self.current_partition)

    def node_count(self, partition: Any = None) -> int:
        """Nodes of the job on *partition* (default: the current one)."""
        return placement.nodes_of(self, partition)

    def ranks_on(self, topo: topology.Topology, nodes: int = 1) -> int | None:
        """The job's MPI ranks on *nodes* nodes of topology *topo*; ``None``
        where that depends on a CPU count that is unknown."""
        return placement.wanted_ranks(self, topo, nodes)

    # -- programs (hpcval.rfm.programs) -----------------------------------------

    def spack_prefix(self, package: str | None = None) -> str | None:
        """Install prefix of the Spack-built *package* (default: ``spack_package``)
        the programming environment offers, or ``None``."""
        return programs.spack_prefix(self, package)

    def find_program(self, name: str, dirs_var: str | None = None,
                     package: str | None = None, mpi: bool = True) -> str:
        """Path of program *name* for this programming environment; skips the
        test with a reason where absent (:func:`hpcval.rfm.programs.find_program`)."""
        return programs.find_program(self, name, dirs_var, package, mpi)

    def skip_other_mpi(self, program: str) -> None:
        """Skip where *program* was linked against another MPI than the
        programming environment's (:func:`hpcval.rfm.programs.skip_other_mpi`)."""
        programs.skip_other_mpi(self, program)

    # -- launch and the job's files (hpcval.rfm.launch) -------------------------

    def launch_command(self, *argv: str) -> str:
        """The command line the job script runs for *argv* (default: the
        executable and its options), launcher included, as one string."""
        return launch.launch_command(self, *argv)

    def repeat_in_job(self, *argv: str) -> list[str]:
        """Shell lines running the job's command (or *argv*) ``samples - 1``
        more times, each into its own output files (:meth:`sample_outputs`)."""
        return launch.repeat_in_job(self, *argv)

    def sample_outputs(self, stream: str = "out") -> list[Path]:
        """Standard output (``"out"``) or error (``"err"``) of every run in the
        job: the job's own, then those of :meth:`repeat_in_job`."""
        return launch.sample_outputs(self, stream)

    def stdout_path(self) -> Path:
        """The job's standard output in the stage directory."""
        return launch.stdout_path(self)

    def shared_fs_dir(self) -> str | None:
        """This case's directory on the partition's shared file system, or
        ``None`` (:func:`hpcval.rfm.launch.shared_fs_dir`)."""
        return launch.shared_fs_dir(self)

    def cleanup_cmds(self, output_dir: str, pattern: str) -> list[str]:
        """Post-run commands removing what the program left in *output_dir*
        (:func:`hpcval.rfm.launch.cleanup_cmds`)."""
        return launch.cleanup_cmds(self.stagedir, output_dir, pattern)

    def leftovers(self) -> list[str]:
        """The files :meth:`cleanup_cmds` found left behind (and removed)."""
        return launch.leftovers(self.stagedir)

    # -- samples and figures (hpcval.rfm.samples) -------------------------------

    def measure(self) -> dict[str, list[float]]:
        """Samples of every declared figure, read from the job's outputs (a
        base test that declares figures implements it)."""
        raise NotImplementedError(f"{type(self).__name__} declares figures but no measure()")

    def parse_stdout(self, parser: Any) -> Any:
        """``parser(text, source=path)`` on the job's output; a parse failure
        becomes a sanity failure carrying the parser's message."""
        return rfm_samples.parse_output(launch.stdout_path(self), parser)

    def parse_samples(self, parser: Any, stream: str = "out") -> list[Any]:
        """``parser(text, source=path)`` on the output of every run in the job;
        a missing or unparsable output is a sanity failure naming the file."""
        return rfm_samples.parse_samples(self, parser, stream)

    def figure_samples(self) -> dict[str, list[float]]:
        """The samples of every declared figure, measured once and stored."""
        return rfm_samples.figure_samples(self)

    @sn.deferrable
    def figure_value(self, name: str) -> float:
        """A figure's value: the median of its samples."""
        return rfm_samples.figure_value(self, name)

    def record_samples(self, variable: str, values: list[float], unit: str,
                       better: str) -> None:
        """Store the samples of a judged figure with its declared direction
        (:func:`hpcval.rfm.samples.record_samples`)."""
        rfm_samples.record_samples(self, variable, values, unit, better)

    def record_series(self, name: str, x_label: str, x_unit: str,
                      columns: dict[str, tuple[str, list[tuple[float, float]]]],
                      judged: dict[str, tuple[str, float]] | None = None) -> None:
        """Store a measured series for the report
        (:func:`hpcval.rfm.samples.record_series`)."""
        rfm_samples.record_series(self, name, x_label, x_unit, columns, judged)
