"""Base test for IOR, the parallel I/O benchmark (POSIX and MPI-IO).

IOR is found through the environment, never at a fixed path: first in the
directories of ``$HPCVAL_IOR_DIR`` (colon-separated; each searched with its
subdirectories, so an install prefix works as well as a build tree), then in
the ``PATH`` entries the programming environment sets (a Spack environment's
view), then on ``PATH``. ``$HPCVAL_IOR_ENVIRON`` names the programming
environment the ``$HPCVAL_IOR_DIR`` build was compiled with (default
``impi``); other environments do not use it, and skip rather than launch a
binary built against another MPI. Where IOR is absent the check is skipped
with a reason.

Each run writes and reads back ``block_size`` per rank in ``transfer_size``
pieces, ``repetitions`` times, with ``-C`` (every rank reads what its
neighbour wrote, so a node's own page cache does not serve the read where
ranks span nodes) and ``-e`` (fsync after the write phase, so the write
figure includes getting the data to the file system). Figures come from
IOR's JSON summary (``-O summaryFormat=JSON``): IOR 4 prints ``Max Write``
only with ``-v``, and the text table is harder to read reliably.

The files go to the partition's ``extras.shared_fs_dir`` (a per-test
subdirectory) when the site has one, otherwise to the stage directory; IOR
removes them at the end of the run and the check removes the directory and
fails if files are left behind.
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
from hpcval.parsers.ior import IorResult, ior_errors, parse_ior_json
from hpcval.rfm.base import SHARED_FS_EXTRA, HpcvalTest

IOR_DIR_VAR = "HPCVAL_IOR_DIR"
IOR_ENVIRON_VAR = "HPCVAL_IOR_ENVIRON"
#: Partition extra naming a directory on the file system under test.
OUTPUT_DIR_EXTRA = SHARED_FS_EXTRA
SUMMARY_FILE = "ior-summary.json"
TEST_FILE = "ior-testfile"
LAYOUTS = {"file-per-process": ["-F"], "shared": []}


def _search(dirs: list[str], name: str) -> str | None:
    for d in dirs:
        root = Path(d)
        for candidate in (root / name, root / "bin" / name):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
        for found in sorted(root.rglob(name)) if root.is_dir() else []:
            if found.is_file() and os.access(found, os.X_OK):
                return str(found)
    return None


def environ_path_dirs(env_vars: object) -> list[str]:
    """Directories a programming environment puts on ``PATH`` (its
    ``env_vars``), without the inherited ``$PATH``."""
    items = env_vars.items() if hasattr(env_vars, "items") else env_vars or []
    dirs: list[str] = []
    for item in items:  # type: ignore[attr-defined]
        name, value = (item[0], item[1]) if isinstance(item, (list, tuple)) else (item, "")
        if name == "PATH":
            dirs += [d for d in str(value).split(":") if d and "$" not in d]
    return dirs


def find_ior(environ: str | None = None, environ_dirs: list[str] | None = None,
             name: str = "ior") -> tuple[str | None, str]:
    """Path of IOR and where it was looked for."""
    ior_dirs = [d for d in os.environ.get(IOR_DIR_VAR, "").split(":") if d]
    wanted = os.environ.get(IOR_ENVIRON_VAR, "impi")
    if ior_dirs and (environ is None or wanted == environ):
        found = _search(ior_dirs, name)
        if found:
            return found, f"${IOR_DIR_VAR}"
    for d in environ_dirs or []:
        if (Path(d) / name).is_file() and os.access(Path(d) / name, os.X_OK):
            return str(Path(d) / name), "the environment's PATH"
    where = f"${IOR_DIR_VAR} ({os.environ.get(IOR_DIR_VAR, 'unset')}) or PATH"
    return shutil.which(name), where


class IorBase(HpcvalTest, rfm.RunOnlyRegressionTest):
    """One IOR run: ``api`` × ``layout``, write then read back, JSON summary.

    The final check declares ``api`` (``POSIX``, ``MPIIO``; IOR's ``-a``) and
    ``layout`` (``file-per-process`` or ``shared``), usually as parameters.

    Performance variables: ``write_bw``/``read_bw`` (IOR's Max Write/Max
    Read over the repetitions) and ``write_bw_mean``/``read_bw_mean``, MiB/s.
    """

    spack_package = "ior"

    valid_prog_environs = ["+mpi"]
    time_limit = "10m"

    #: Bytes each rank writes (``-b``; IOR size syntax, e.g. ``64m``).
    #:
    #: :type: :class:`str`
    block_size = variable(str, value="64m", loggable=True)

    #: Bytes per I/O call (``-t``).
    #:
    #: :type: :class:`str`
    transfer_size = variable(str, value="1m", loggable=True)

    #: Repetitions (``-i``); the figures are the maximum and mean over them.
    #:
    #: :type: :class:`int`
    repetitions = variable(int, value=3, loggable=True)

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

    num_tasks = 2

    @run_after("init")
    def set_perf_variables(self) -> None:
        for op in ("write", "read"):
            self.perf_variables[f"{op}_bw"] = sn.make_performance_function(
                self.bandwidth(op, "max"), "MiB/s")
            self.perf_variables[f"{op}_bw_mean"] = sn.make_performance_function(
                self.bandwidth(op, "mean"), "MiB/s")

    @run_after("setup")
    def locate_ior(self) -> None:
        env = self.current_environ
        path, where = find_ior(env.name, environ_path_dirs(env.env_vars))
        self.skip_if(path is None,
                     f"ior not found in {where}: install IOR (e.g. spack install ior, "
                     f"in the site's Spack environment) and put it on PATH, or set "
                     f"{IOR_DIR_VAR} to its prefix")
        self.ior_path = str(path)
        self.executable = str(path)

    @run_after("setup")
    def set_output_dir(self) -> None:
        self.output_dir = self.shared_fs_dir() or str(self.stagedir)

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

    @sn.deferrable
    def bandwidth(self, op: str, stat: str) -> float:
        result = self.result()
        return result.max_mib(op) if stat == "max" else result.mean_mib(op)

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
        judged = {f"{op}_bw": (f"{op} MiB/s", float(o.repetitions_mib.index(o.bw_max_mib) + 1))
                  for op, o in result.operations.items()
                  if o.bw_max_mib in o.repetitions_mib}
        self.record_series(f"IOR {self.api} {self.layout}", "repetition", "", columns, judged)
        return True
