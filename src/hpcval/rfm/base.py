"""The mixin every hpcval check derives from.

It gives a check its site's references (loaded and validated by
:mod:`hpcval.references`, never written in the check), makes a missing
reference a failure, records which MPI stack ran, and stores the full data
series a check measured so that reports can plot more than the judged points.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
from collections import OrderedDict
from pathlib import Path
from typing import Any

import reframe as rfm
import reframe.utility.osext as osext
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import ReframeError, SanityError
from reframe.core.launchers import JobLauncher

from hpcval import references as refs
from hpcval.errors import HpcvalError, SiteError
from hpcval.paths import project_root
from hpcval.rfm import outcome
from hpcval.rfm.site import (
    UnsafeConfigValue,
    check_env_name,
    check_script_option,
    is_plain_value,
    shell_value,
)

SERIES_FILE = "hpcval-series.json"

# Validated references files, keyed by (path, mtime), so that each file is read
# once per session however many checks use it.
_CACHE: dict[tuple[str, float], refs.ReferencesFile] = {}


#: Set by ``hpcval validate --record`` (see :mod:`hpcval.runner`).
RECORD_ENV = "HPCVAL_RECORD"


def recording() -> bool:
    """True in a ``hpcval validate --record`` run: measure, do not judge."""
    return os.environ.get(RECORD_ENV) == "1"


class ReferencesFailure(ReframeError):
    """A check's references are missing or wrong (shown as the failure reason)."""


class ConfigFailure(ReframeError):
    """A site config value that would reach a job script unsafely."""


def _known_check_names(test: Any) -> set[str]:
    names: set[str] = set()
    stack = list(HpcvalTest.__subclasses__())
    while stack:
        cls = stack.pop()
        names.add(cls.__name__)
        stack.extend(cls.__subclasses__())
    dirs = {Path(test.prefix)}
    try:
        dirs.add(project_root() / "reframe-checks")
    except SiteError:
        pass
    for d in dirs:
        names |= refs.check_names_in(d)
    return names


def site_references(test: Any) -> refs.ReferencesFile:
    """The validated references file of the site the test runs on."""
    partition = test.current_partition
    configured = partition.extras.get("references")
    if not configured:
        raise SiteError(
            f"partition {partition.fullname!r} has no extras.references in its site config: "
            "hpcval checks read their references from the file it names (use "
            "hpcval.rfm.site.partition_extras; see docs/references.md)"
        )
    path = Path(configured)
    if test.references_file != refs.REFERENCES_FILE:
        path = path.parent / test.references_file
    try:
        mtime = path.stat().st_mtime
    except OSError:
        raise refs.ReferencesError(str(path), "", "references file not found") from None
    key = (str(path), mtime)
    if key not in _CACHE:
        _CACHE[key] = refs.load_references(path, known_checks=_known_check_names(test))
    return _CACHE[key]


def _attribute(test: Any, name: str) -> Any:
    if name == "$system":
        return test.current_system.name
    if name == "$partition":
        return test.current_partition.fullname
    if name == "$environ":
        return test.current_environ.name
    if name.startswith("$processor."):
        return getattr(test.current_partition.processor, name.split(".", 1)[1])
    return getattr(test, name)


def last_level_cache_bytes(processor: Any) -> int | None:
    """Size of the largest cache in a ReFrame processor description, or None
    when the topology has not been detected."""
    topology = getattr(processor, "topology", None) or {}
    sizes = [c.get("size", 0) for c in topology.get("caches", [])]
    return max(sizes) if sizes else None


class _EnvironMpirun(JobLauncher):
    """``mpirun -np N`` with the programming environment's own ``mpirun``, so
    that two MPI stacks on one machine never launch each other's binaries."""

    def __init__(self, mpirun: str, options: list[str]) -> None:
        super().__init__()
        self._mpirun = mpirun
        self.options = list(options)

    def command(self, job: Any) -> list[str]:
        return [shlex.quote(self._mpirun), "-np", str(job.num_tasks)]


#: Partition extra naming a directory on the partition's shared (network) file
#: system; I/O checks write there instead of the stage directory when it is set.
SHARED_FS_EXTRA = "shared_fs_dir"

#: Written by :meth:`HpcvalTest.cleanup_cmds` in the stage directory.
LEFTOVERS_FILE = "leftovers.txt"


class HpcvalTest(rfm.RegressionTestPlugin):
    """Base mixin of hpcval checks: ``class x_check(HpcvalTest, rfm.RunOnlyRegressionTest)``."""

    #: Name of this check's entry in the site's references file. Defaults to
    #: the class name; a site subclass may point it at its parent's entry.
    #:
    #: :type: :class:`str` or :obj:`None`
    reference_entry = variable(str, type(None), value=None)

    #: File name of the references, in the directory of the file the
    #: partition's ``extras.references`` names.
    #:
    #: :type: :class:`str`
    references_file = variable(str, value=refs.REFERENCES_FILE)

    #: MPI stack of the programming environment (its ``extras.mpi_stack``).
    #:
    #: :type: :class:`str`
    mpi_stack = variable(str, value="unknown", loggable=True)

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

    @run_after("init")
    def _hpcval_require_reference(self) -> None:
        # ``hpcval validate --record``: figures are measured and stored, not judged
        self.require_reference = not recording()

    @run_after("setup")
    def _hpcval_record_stack(self) -> None:
        self.mpi_stack = str(self.current_environ.extras.get("mpi_stack", "unknown"))
        if self.spack_package:
            entry = self._spack_entry(self.spack_package)
            self.software_spec = str(entry["spec"]) if entry else ""
        else:
            self.software_spec = str(self.current_environ.extras.get("spec", ""))

    def _spack_entry(self, package: str) -> dict[str, str] | None:
        """Prefix and spec of the Spack-built *package* the environment offers."""
        return self.current_environ.extras.get("spack", {}).get(package)

    def shared_fs_dir(self) -> str | None:
        """A directory for this test case's files on the partition's shared
        file system (``extras.shared_fs_dir``, e.g. the lab's file-server mount),
        unique per check, partition and environment; ``None`` where the partition
        has none (the stage directory is then the place)."""
        shared = self.current_partition.extras.get(SHARED_FS_EXTRA)
        if not shared:
            return None
        if any(c in str(shared) for c in "'\n\r\0"):
            raise ConfigFailure(
                f"partition {self.current_partition.fullname} extras.{SHARED_FS_EXTRA} "
                f"{str(shared)!r} holds a quote or a line break: name a plain directory")
        part, env = self.current_partition.name, self.current_environ.name
        return str(Path(str(shared)) / f"hpcval-{self.unique_name}-{part}-{env}")

    def spack_prefix(self, package: str | None = None) -> str | None:
        """Install prefix of the Spack-built *package* (default: ``spack_package``)
        the programming environment offers, or ``None``."""
        entry = self._spack_entry(package or self.spack_package)
        return str(entry["prefix"]) if entry else None

    def cleanup_cmds(self, output_dir: str, pattern: str) -> list[str]:
        """Post-run commands of a check whose program writes files matching the
        shell *pattern* in *output_dir*: list what the program left behind (it
        should remove its own; see :meth:`leftovers`), remove it, and remove
        *output_dir* itself where it is a per-test directory on a shared file
        system rather than the stage directory."""
        files = f"{shlex.quote(output_dir)}/{pattern}"
        cmds = [f"ls -1d {files} 2>/dev/null > {LEFTOVERS_FILE} || true", f"rm -f {files}"]
        if output_dir not in (".", str(self.stagedir)):
            cmds.append(f"rmdir {shlex.quote(output_dir)} 2>/dev/null || true")
        return cmds

    def leftovers(self) -> list[str]:
        """The files :meth:`cleanup_cmds` found left behind (and removed)."""
        path = Path(self.stagedir) / LEFTOVERS_FILE
        return path.read_text().split() if path.is_file() else []

    @run_before("run")
    def _hpcval_references(self) -> None:
        # After setup, so a check that skips itself (a tool or input missing)
        # needs no references; before the run, so a wrong references file
        # fails before any benchmark time is spent.
        if not self.perf_variables or recording():
            # a check judged by its sanity alone (e.g. an audit) has no figures;
            # a recording run measures without references
            self._hpcval_refs = {}
            return
        self._hpcval_refs = self._hpcval_resolve_references()
        self.reference = {"*": {v: r.as_reframe() for v, r in self._hpcval_refs.items()}}
        # variables and units are known now: a mismatch fails before the benchmark runs
        reported = {name: fn.unit for name, fn in self.perf_variables.items()}
        try:
            refs.check_variables(self._hpcval_refs, reported, self._hpcval_refs_path,
                                 self._hpcval_entry_name)
        except HpcvalError as err:
            raise ReferencesFailure(str(err)) from None

    @run_before("run")
    def _hpcval_launcher(self) -> None:
        """The environment's own ``mpirun``; every launch recorded by the
        wrapper script (:mod:`hpcval.rfm.outcome`); with ``srun``, one task's
        death ends the whole step at once. Idempotent: checks that write
        repeated launches call it before reading the launcher's command."""
        mpirun = self.current_environ.extras.get("mpirun")
        launcher = self.job.launcher
        if mpirun and type(launcher).__name__ == "MpirunLauncher":
            launcher = self.job.launcher = _EnvironMpirun(str(mpirun), launcher.options)
        where = f"partition {self.current_partition.fullname} launcher options"
        try:
            options = [check_script_option(o, where) for o in launcher.options]
        except UnsafeConfigValue as err:
            raise ConfigFailure(str(err)) from None
        if type(launcher).__name__ == "SrunLauncher" and not any(
                o.startswith(("--kill-on-bad-exit", "-K")) for o in options):
            # Slurm's default lets the other tasks run on after one dies
            # (until the time limit): end the step at once, naming the task.
            options.append("--kill-on-bad-exit=1")
        launcher.options = [o if o == shlex.quote(o) or o.startswith("'") else shlex.quote(o)
                            for o in options]
        if launcher.modifier != "sh" or not launcher.modifier_options[:1] or \
                not launcher.modifier_options[0].endswith(outcome.LAUNCH_SCRIPT):
            stage = Path(self.stagedir)
            script = stage / outcome.LAUNCH_SCRIPT
            script.write_text(outcome.LAUNCH_SCRIPT_TEXT)
            (stage / outcome.LAUNCH_STATUS).unlink(missing_ok=True)
            inner = [launcher.modifier, *launcher.modifier_options] if launcher.modifier else []
            launcher.modifier = "sh"
            launcher.modifier_options = [shlex.quote(str(script)),
                                         shlex.quote(str(stage / outcome.LAUNCH_STATUS)), *inner]

    @run_before("run")
    def _hpcval_quote_environment(self) -> None:
        """Config values that reach the job script's ``export K=V`` lines are
        quoted (``$NAME`` references stay expansions): nothing in a site
        config or a ``-S env_vars=`` is executed. Partition ``env_vars``
        (ReFrame's own, not copied per test) and scheduler ``access`` options
        are checked and rejected when unsafe."""
        env = self.current_environ
        where = f"environment {env.name!r} (site config) env_vars"
        part = self.current_partition
        try:
            quoted = OrderedDict((check_env_name(k, where), shell_value(v))
                                 for k, v in env.env_vars.items())
            for k, v in part.local_env.env_vars.items():
                check_env_name(k, f"partition {part.fullname} env_vars")
                if not is_plain_value(v):
                    raise UnsafeConfigValue(
                        f"partition {part.fullname} env_vars {k}: value {v!r} holds shell "
                        "characters (spaces, quotes, ;, $(...), backticks): set it in a "
                        "programming environment, where hpcval quotes it")
            for opt in [*part.access, *self.job.options]:
                check_script_option(opt, f"partition {part.fullname} access/job options")
            test_env = {check_env_name(k, f"{self.unique_name} env_vars"): shell_value(v)
                        for k, v in self.env_vars.items()}
        except UnsafeConfigValue as err:
            raise ConfigFailure(str(err)) from None
        safe = copy.copy(env)
        safe._env_vars = quoted
        self._current_environ = safe
        self.env_vars = test_env

    @run_before("sanity")
    def _hpcval_job_outcome(self) -> None:
        """Fail, naming the cause, where the job did not end well, whatever
        the output looks like: a launch with a non-zero exit status or a
        signal, a launch that never ended, a scheduler event (time limit,
        node failure, preemption, out of memory). The check's own sanity
        message follows the cause where it has one."""
        stage = Path(self.stagedir)
        launches = outcome.read_launches(stage / outcome.LAUNCH_STATUS)
        state = None
        sched = type(self.job.scheduler).__name__
        if "Slurm" in sched or "Squeue" in sched:
            info = outcome.slurm_job_state(str(self.job.jobid))
            state = info.get("JobState")
            self._hpcval_job_info = info
        program = Path(str(self.executable).split()[0]).name if self.executable else "job"
        why = outcome.job_failure(
            launches, exitcode=self.job.exitcode, signal_number=self.job.signal,
            scheduler_state=state, stderr=stage / str(self.stderr.evaluate()),
            program=program, stdout=self.stdout_path())
        if why is None:
            return
        own = ""
        if hasattr(self, "_rfm_sanity") and not hasattr(self, "sanity_patterns"):
            with osext.change_dir(str(stage)):
                try:
                    sn.evaluate(self._rfm_sanity())
                except Exception as err:  # noqa: BLE001 - any failure of the check's parse
                    own = f" (the check's own verdict: {str(err).splitlines()[0]})" \
                        if str(err) else ""
        raise SanityError(f"{why}{own}")

    @run_before("performance")
    def _hpcval_check_variables(self) -> None:
        reported = {name: fn.unit for name, fn in self.perf_variables.items()}
        if reported:
            # judged or recorded, an impossible figure is never a measurement
            self._hpcval_check_figures()
        if (not reported and not self._hpcval_refs) or recording():
            return
        try:
            refs.check_variables(self._hpcval_refs, reported, self._hpcval_refs_path,
                                 self._hpcval_entry_name)
        except HpcvalError as err:
            raise ReferencesFailure(str(err)) from None

    def _hpcval_check_figures(self) -> None:
        """Every figure is a finite, physically possible measurement (no
        ``inf``, no negative time or bandwidth, no bandwidth above the
        partition's ceiling): such a value passes every reference and must
        fail the check instead, named."""
        ceiling = self.current_partition.extras.get(
            "max_bandwidth_mbs", outcome.DEFAULT_MAX_BANDWIDTH_MBS)
        values: dict[str, tuple[object, str | None]] = {}
        with osext.change_dir(str(self.stagedir)):
            for name, fn in self.perf_variables.items():
                try:
                    values[name] = (sn.evaluate(fn), fn.unit)
                except SanityError:
                    raise
                except Exception as err:  # noqa: BLE001 - a figure that cannot be computed
                    raise SanityError(f"figure {name} cannot be computed: {err}") from None
        bad = outcome.impossible_figures(values, float(ceiling))
        if bad:
            raise SanityError("impossible figure(s), not a measurement: " + "; ".join(bad))

    def _hpcval_resolve_references(self) -> dict[str, refs.Reference]:
        name = self.reference_entry or type(self).__name__
        bases = [c.__name__ for c in type(self).__mro__[1:]]
        try:
            ref_file = site_references(self)
            entry = ref_file.entry(name, bases)
            resolved = refs.resolve(
                entry, ref_file.path, lambda a: _attribute(self, a),
                self.current_system.name, self.current_partition.name,
            )
        except HpcvalError as err:
            raise ReferencesFailure(str(err)) from None
        self._hpcval_refs_path = str(ref_file.path)
        self._hpcval_entry_name = name
        return resolved

    def stdout_path(self) -> Path:
        """The job's standard output in the stage directory."""
        return Path(self.stagedir) / str(self.stdout.evaluate())

    def parse_stdout(self, parser: Any) -> Any:
        """``parser(text, source=path)`` on the job's output; a parse failure
        (garbage, truncation, a benchmark's own error rows) becomes a sanity
        failure carrying the parser's message."""
        path = self.stdout_path()
        try:
            text = path.read_text(errors="replace")
        except OSError as err:
            raise SanityError(f"cannot read {path}: {err.strerror}") from None
        try:
            return parser(text, source=str(path))
        except HpcvalError as err:
            raise SanityError(str(err)) from None

    def record_series(self, name: str, x_label: str, x_unit: str,
                      columns: dict[str, tuple[str, list[tuple[float, float]]]],
                      judged: dict[str, tuple[str, float]] | None = None) -> None:
        """Store a measured series (e.g. time and bandwidth per message size)
        for the report; ``columns`` maps a label to (unit, [(x, y), ...]) and
        ``judged`` maps a performance variable to the (column, x) it judges,
        so the report can draw its reference band."""
        path = Path(self.stagedir) / SERIES_FILE
        data: dict[str, Any] = {}
        if path.exists():
            data = json.loads(path.read_text())
        data[name] = {
            "x_label": x_label,
            "x_unit": x_unit,
            "columns": {k: {"unit": u, "points": pts} for k, (u, pts) in columns.items()},
            "judged": {v: {"column": c, "x": x} for v, (c, x) in (judged or {}).items()},
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
        if SERIES_FILE not in self.keep_files:
            self.keep_files.append(SERIES_FILE)
