"""Base test for IOR, the parallel I/O benchmark (POSIX and MPI-IO).

IOR is found through the environment, never at a fixed path
(:meth:`hpcval.rfm.HpcvalTest.find_program`): the Spack build the
programming environment offers, then the directories of ``$HPCVAL_IOR_DIR``
(colon-separated; each searched with its subdirectories, so an install prefix
works as well as a build tree), then the ``PATH`` entries the programming
environment sets (a Spack environment's view), then ``PATH``.
``$HPCVAL_IOR_ENVIRON`` names the programming
environment the ``$HPCVAL_IOR_DIR`` build was compiled with (default
``impi``); other environments do not use it, and skip rather than launch a
binary built against another MPI. Where IOR is absent the check is skipped
with a reason.

Each run writes and reads back ``block_size`` per rank in ``transfer_size``
pieces, ``repetitions`` times, with ``-C`` (every rank reads what its
neighbour wrote, so a node's own page cache does not serve the read where
ranks span nodes) and ``-e`` (fsync after the write phase, so the write
figure includes getting the data to the file system). The repetitions are
the samples: ``write_bw`` and ``read_bw`` are their medians. Figures come from
IOR's JSON summary (``-O summaryFormat=JSON``): IOR 4 prints ``Max Write``
only with ``-v``, and the text table is harder to read reliably.

The files go to the partition's ``extras.shared_fs_dir`` (a per-test
subdirectory) when the site has one, otherwise to the stage directory; IOR
removes them at the end of the run and the check removes the directory and
fails if files are left behind.
"""

from __future__ import annotations

from pathlib import Path

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from hpcval.core.errors import HpcvalError
from hpcval.core.figures import Figure
from hpcval.core.series import MIN_SAMPLES, median
from hpcval.node import physics, sizing
from hpcval.parsers.ior import IorResult, ior_errors, parse_ior_json
from hpcval.rfm.base import HpcvalTest
from hpcval.rfm.launch import SHARED_FS_EXTRA
from hpcval.rfm.sizing import SizedTest

IOR_DIR_VAR = "HPCVAL_IOR_DIR"
#: Partition extra naming a directory on the file system under test.
OUTPUT_DIR_EXTRA = SHARED_FS_EXTRA
SUMMARY_FILE = "ior-summary.json"
TEST_FILE = "ior-testfile"
LAYOUTS = {"file-per-process": ["-F"], "shared": []}


class IorBase(SizedTest, HpcvalTest, rfm.RunOnlyRegressionTest):
    """One IOR run: ``api`` × ``layout``, write then read back, JSON summary.

    The final check declares ``api`` (``POSIX``, ``MPIIO``; IOR's ``-a``) and
    ``layout`` (``file-per-process`` or ``shared``), usually as parameters.

    Figures: ``write_bw``/``read_bw``, MiB/s, the median of the repetitions.
    """

    spack_package = "ior"

    valid_prog_environs = ["+mpi"]
    time_limit = "10m"

    #: Bytes each rank writes (``-b``; IOR size syntax, e.g. ``64m``); unset:
    #: from the budget and the nodes' memory (:func:`hpcval.node.sizing.ior`).
    #:
    #: :type: :class:`str` or :obj:`None`
    block_size = variable(str, type(None), value=None, loggable=True)

    #: Bytes per I/O call (``-t``).
    #:
    #: :type: :class:`str`
    transfer_size = variable(str, value="1m", loggable=True)

    #: Repetitions (``-i``): the samples of the figures.
    #:
    #: :type: :class:`int`
    repetitions = variable(int, value=MIN_SAMPLES, loggable=True)

    #: Further IOR options.
    #:
    #: :type: :class:`List[str]`
    ior_options = variable(typ.List[str], value=[])

    #: Directory the test files went to (partition extra or stage directory).
    #:
    #: :type: :class:`str`
    output_dir = variable(str, value="", loggable=True)

    #: Path of the IOR that ran.
    #:
    #: :type: :class:`str`
    ior_path = variable(str, value="", loggable=True)

    rank_count = 2
    figures = (Figure("write_bw", "MiB/s", column="write"),
               Figure("read_bw", "MiB/s", column="read"))

    @run_after("setup")
    def locate_ior(self) -> None:
        self.ior_path = self.find_program("ior", IOR_DIR_VAR)
        self.executable = self.ior_path

    @run_after("setup")
    def set_output_dir(self) -> None:
        self.output_dir = self.shared_fs_dir() or str(self.stagedir)

    @run_after("setup")
    def size_problem(self) -> None:
        size = self.sized(sizing.ior, self.sizing_node(), self.sizing_ranks(),
                          self.node_count(), self.sizing_budget(),
                          free=sizing.usable_bytes(self.output_dir),
                          repetitions=self.repetitions)
        if size and self.block_size is None:
            self.block_size = size.params["block_size"]
            self.apply_size(size)
        elif size:
            self.problem_size = f"{self.block_size} per rank (-S block_size)"
            self.size_reason = f"set for this run; the rule would give: {size.summary}"

    @run_before("run")
    def set_options(self) -> None:
        test_file = str(Path(self.output_dir) / TEST_FILE)
        self.executable_opts = [
            "-a", self.api, *LAYOUTS[self.layout], "-C", "-e", "-w", "-r",
            "-b", self.block_size, "-t", self.transfer_size, "-i", str(self.repetitions),
            "-o", test_file,
            "-O", "summaryFormat=JSON", "-O", f"summaryFile={SUMMARY_FILE}",
            *self.ior_options,
        ]
        self.prerun_cmds = [f"mkdir -p '{self.output_dir}'", f"rm -f '{test_file}'*"]
        # IOR removes its files at the end of a good run; after a failed one
        # the check removes what is left, and counts it first (sanity).
        self.postrun_cmds = self.cleanup_cmds(self.output_dir, f"{TEST_FILE}*")

    def result(self) -> IorResult:
        path = Path(self.stagedir) / SUMMARY_FILE
        output = ""
        for name in (self.stdout.evaluate(), self.stderr.evaluate()):
            try:
                output += (Path(self.stagedir) / str(name)).read_text(errors="replace")
            except OSError:
                pass
        errors = [e for e in ior_errors(output) if not e.startswith("WARNING")]
        try:
            text = path.read_text(errors="replace")
        except OSError as err:
            hint = f"; IOR said: {errors[0]}" if errors else ""
            raise SanityError(f"no IOR summary {path}: {err.strerror}{hint}") from None
        try:
            return parse_ior_json(text, str(path))
        except HpcvalError as err:
            hint = f"; IOR said: {errors[0]}" if errors else ""
            raise SanityError(f"{err}{hint}") from None

    def measure(self) -> dict[str, list[float]]:
        result = self.result()
        return {f.name: list(result.op(f.column).repetitions_mib) for f in self.figures}

    @sanity_function
    def complete_summary(self) -> bool:
        result = self.result()
        if result.api != self.api:
            raise SanityError(f"IOR ran API {result.api}, {self.api} asked for")
        if result.layout != self.layout:
            raise SanityError(f"IOR ran {result.layout}, {self.layout} asked for")
        if result.num_tasks != self.num_tasks:
            raise SanityError(f"IOR ran {result.num_tasks} tasks, {self.num_tasks} asked for")
        if not result.reorder_tasks:
            raise SanityError("IOR ran without -C (reorderTasks): reads may come from cache")
        left = self.leftovers()
        if left:
            raise SanityError(f"IOR left {len(left)} test file(s) behind (removed now): "
                              f"{', '.join(left[:3])}")
        columns = {f"{op} MiB/s": ("MiB/s", [(float(i + 1), v)
                                             for i, v in enumerate(o.repetitions_mib)])
                   for op, o in result.operations.items()}
        self.record_series(f"IOR {self.api} {self.layout}", "repetition", "", columns)
        samples = self.figure_samples()
        try:
            ceiling = physics.ceiling(self.current_partition.extras, physics.IO_CEILING_EXTRA)
        except ValueError as err:
            raise SanityError(f"partition {self.current_partition.fullname} {err}") from None
        bad = [physics.above_ceiling(f.name, median(samples[f.name]) * physics.MIB_TO_MB,
                                     ceiling, "device or link ceiling (extras "
                                     f"{physics.IO_CEILING_EXTRA})") for f in self.figures]
        if any(bad):
            raise SanityError("physically impossible: " + "; ".join(b for b in bad if b))
        return True
