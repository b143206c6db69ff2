"""How a check's job is launched, and what of a site config reaches its script.

Plain functions, each called by one hook of :class:`hpcval.rfm.HpcvalTest`
(or by a check through its methods), so that each can be tested alone:

* values that reach a job script: ``export K=V`` values quoted
  (:func:`shell_value`), names and options checked (:func:`check_env_name`,
  :func:`check_script_option`); an unsafe value is an :class:`UnsafeConfigValue`;
* the launch: the environment's own ``mpirun``, every launch wrapped so that
  its end is recorded (:func:`set_launcher`), the environment quoted
  (:func:`quote_environment`), the command line of repeated runs in one job
  (:func:`launch_command`, :func:`repeat_in_job`) and their outputs
  (:func:`sample_outputs`), and how the job ended (:func:`job_outcome`);
* the job's files: a directory on the shared file system
  (:func:`shared_fs_dir`), and what a program left behind (:func:`cleanup_cmds`,
  :func:`leftovers`).

A site config value that would reach a script unsafely fails the check as a
:class:`ConfigFailure`.
"""

from __future__ import annotations

import copy
import functools
import re
import shlex
from collections import OrderedDict
from pathlib import Path
from typing import Any

import reframe.utility.osext as osext
import reframe.utility.sanity as sn
from reframe.core.exceptions import ReframeError, SanityError
from reframe.core.launchers import JobLauncher

from hpcval.core.errors import SiteError
from hpcval.rfm import outcome, placement

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ENV_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
#: Characters a value may hold unquoted in ``export K=V`` without the shell
#: reading anything into it.
_PLAIN = re.compile(r"[A-Za-z0-9_./:,+@%=-]*\Z")


class UnsafeConfigValue(SiteError):
    """A config value would be run by the shell of a job script."""


def check_env_name(name: str, where: str) -> str:
    """An environment variable name, or a clear error naming ``where`` it is set."""
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise UnsafeConfigValue(
            f"{where}: env_vars name {name!r} is not a shell variable name "
            "([A-Za-z_][A-Za-z0-9_]*): fix the site config")
    return name


def shell_value(value: object) -> str:
    """``value`` as the right-hand side of ``export K=V`` in a job script:
    literal text, single-quoted, except ``$NAME``/``${NAME}`` references to
    other variables (``$PATH``), which stay expansions. ``$(...)``, backticks,
    ``;``, spaces and quotes reach the program as the characters they are."""
    text = str(value)
    if "\n" in text or "\0" in text:
        raise UnsafeConfigValue(f"value {text!r} holds a newline or NUL byte")
    if _PLAIN.match(text):
        return text or "''"
    parts: list[str] = []
    pos = 0
    for m in _ENV_REF.finditer(text):
        if m.start() > pos:
            parts.append(_literal(text[pos:m.start()]))
        parts.append('"${' + (m.group(1) or m.group(2)) + '}"')
        pos = m.end()
    if pos < len(text):
        parts.append(_literal(text[pos:]))
    return "".join(parts)


def _literal(text: str) -> str:
    """``text`` quoted for bash, written without ``$(`` and without a
    backtick: ReFrame itself runs those (``osext.expandvars``, in
    ``loadenv``) on every ``env_vars`` value before it writes the job
    script, whatever the shell quoting around them. ``$`` and ``(`` are
    quoted apart (``'$''('``); a backtick is bash's ``$'\\x60'``."""
    pieces: list[str] = []
    for i, chunk in enumerate(text.split("`")):
        if i:
            pieces.append("$'\\x60'")
        for j, part in enumerate(chunk.split("$(")):
            if j:
                pieces.append("'$''('")
            if part:
                pieces.append(shlex.quote(part))
    return "".join(pieces) or "''"


def is_plain_value(value: object) -> bool:
    """True where ``value`` is safe unquoted (letters, digits, ``_./:,+@%=-``
    and ``$NAME`` references only)."""
    text = _ENV_REF.sub("", str(value))
    return bool(_PLAIN.match(text))


def check_script_option(option: object, where: str) -> str:
    """A scheduler option (``#SBATCH`` line) or launcher option: one line, no NUL."""
    text = str(option)
    if "\n" in text or "\r" in text or "\0" in text:
        raise UnsafeConfigValue(f"{where}: option {text!r} holds a line break: one option, "
                                "one line (fix the site config)")
    return text


# --- The launch of a check's job ----------------------------------------------


class ConfigFailure(ReframeError):
    """A site config value that would reach a job script unsafely."""


#: Partition extra naming a directory on the partition's shared (network) file
#: system; I/O checks write there instead of the stage directory when it is set.
SHARED_FS_EXTRA = "shared_fs_dir"

#: Written by :func:`cleanup_cmds` in the stage directory.
LEFTOVERS_FILE = "leftovers.txt"

#: Stage-directory files of the runs after the first in one job
#: (:func:`repeat_in_job`): ``sample-<i>.out`` / ``sample-<i>.err``.
SAMPLE_OUTPUT = "sample-{}.{}"


class _EnvironMpirun(JobLauncher):
    """``mpirun -np N`` with the programming environment's own ``mpirun``, so
    that two MPI stacks on one machine never launch each other's binaries."""

    def __init__(self, mpirun: str, options: list[str]) -> None:
        super().__init__()
        self._mpirun = mpirun
        self.options = list(options)

    def command(self, job: Any) -> list[str]:
        return [shlex.quote(self._mpirun), "-np", str(job.num_tasks)]


def set_launcher(test: Any) -> None:
    """The environment's own ``mpirun``; every launch recorded by the
    wrapper script (:mod:`hpcval.rfm.outcome`); with ``srun``, one task's
    death ends the whole step at once. Idempotent: checks that write
    repeated launches call it before reading the launcher's command."""
    mpirun = test.current_environ.extras.get("mpirun")
    launcher = test.job.launcher
    if mpirun and type(launcher).__name__ == "MpirunLauncher":
        launcher = test.job.launcher = _EnvironMpirun(str(mpirun), launcher.options)
    where = f"partition {test.current_partition.fullname} launcher options"
    try:
        options = [check_script_option(o, where) for o in launcher.options]
    except UnsafeConfigValue as err:
        raise ConfigFailure(str(err)) from None
    if "impi" in test.current_environ.features or str(
            test.current_environ.extras.get("mpi_stack", "")).startswith("intel"):
        # hydra ends the other ranks with SIGTERM, not SIGKILL: the rank that
        # died first (often by SIGKILL) is then told apart (outcome.rank_death)
        test.env_vars.setdefault(outcome.HYDRA_ABORT_SIGNAL_ENV,
                                 str(outcome.HYDRA_CLEANUP_SIGNAL))
    sched = type(test.job.scheduler).__name__
    if ("Slurm" in sched or "Squeue" in sched) and "--no-requeue" not in test.job.options:
        # a node failure must end the job and be named (NODE_FAIL), not
        # requeue it out of sight, pending until nodes come back
        test.job.options.append("--no-requeue")
    if type(launcher).__name__ in ("SrunLauncher", "SrunAllocationLauncher") and not any(
            o.startswith(("--kill-on-bad-exit", "-K")) for o in options):
        # Slurm's default lets the other tasks run on after one dies
        # (until the time limit): end the step at once, naming the task.
        options.append("--kill-on-bad-exit=1")
    launcher.options = [o if o == shlex.quote(o) or o.startswith("'") else shlex.quote(o)
                        for o in options]
    if launcher.modifier != "sh" or not launcher.modifier_options[:1] or \
            outcome.LAUNCH_SCRIPT not in launcher.modifier_options[0]:
        stage = Path(test.stagedir)
        script = stage / outcome.LAUNCH_SCRIPT
        script.write_text(outcome.LAUNCH_SCRIPT_TEXT)
        (stage / outcome.LAUNCH_STATUS).unlink(missing_ok=True)
        inner = [launcher.modifier, *launcher.modifier_options] if launcher.modifier else []
        launcher.modifier = "sh"
        launcher.modifier_options = [shlex.quote(str(script)),
                                     shlex.quote(str(stage / outcome.LAUNCH_STATUS)), *inner]


def quote_environment(test: Any) -> None:
    """Config values that reach the job script's ``export K=V`` lines are
    quoted (``$NAME`` references stay expansions): nothing in a site
    config or a ``-S env_vars=`` is executed. Partition ``env_vars``
    (ReFrame's own, not copied per test) and scheduler ``access`` options
    are checked and rejected when unsafe. Runs before the build and again
    before the run (for values a hook set in between): a value quoted
    once is kept as it is."""
    #: the test's env_vars as quoted by an earlier pass, None before the first
    done: dict[str, str] | None = getattr(test, "_hpcval_quoted_env", None)
    env = test.current_environ
    where = f"environment {env.name!r} (site config) env_vars"
    part = test.current_partition
    try:
        quoted = env.env_vars if done is not None else OrderedDict(
            (check_env_name(k, where), shell_value(v)) for k, v in env.env_vars.items())
        for k, v in part.local_env.env_vars.items():
            check_env_name(k, f"partition {part.fullname} env_vars")
            if not is_plain_value(v):
                raise UnsafeConfigValue(
                    f"partition {part.fullname} env_vars {k}: value {v!r} holds shell "
                    "characters (spaces, quotes, ;, $(...), backticks): set it in a "
                    "programming environment, where hpcval quotes it")
        for opt in [*part.access, *test.job.options]:
            check_script_option(opt, f"partition {part.fullname} access/job options")
        test_env = {check_env_name(k, f"{test.unique_name} env_vars"):
                    v if done is not None and done.get(k) == v else shell_value(v)
                    for k, v in test.env_vars.items()}
    except UnsafeConfigValue as err:
        raise ConfigFailure(str(err)) from None
    if done is None:
        safe = copy.copy(env)
        safe._env_vars = quoted
        test._current_environ = safe
    test.env_vars = test_env
    test._hpcval_quoted_env = dict(test_env)


def launch_command(test: Any, *argv: str) -> str:
    """The command line the job script runs for *argv* (default: the
    executable and its options), launcher included, as one string."""
    set_launcher(test)
    placement.copy_to_job(test)
    launch = " ".join(test.job.launcher.run_command(test.job).split())
    return " ".join([launch, *(argv or (test.executable, *test.executable_opts))])


def repeat_in_job(test: Any, *argv: str) -> list[str]:
    """Shell lines running the job's command (or *argv*) ``samples - 1``
    more times, each into its own output files (:func:`sample_outputs`)."""
    line = launch_command(test, *argv)
    return [f"{line} > {SAMPLE_OUTPUT.format(i, 'out')} 2> {SAMPLE_OUTPUT.format(i, 'err')}"
            for i in range(2, test.samples + 1)]


def sample_outputs(test: Any, stream: str = "out") -> list[Path]:
    """Standard output (``"out"``) or error (``"err"``) of every run in the
    job: the job's own, then those of :func:`repeat_in_job`."""
    own = test.stdout if stream == "out" else test.stderr
    stage = Path(test.stagedir)
    return [stage / str(own.evaluate()),
            *(stage / SAMPLE_OUTPUT.format(i, stream) for i in range(2, test.samples + 1))]


def stdout_path(test: Any) -> Path:
    """The job's standard output in the stage directory."""
    return Path(test.stagedir) / str(test.stdout.evaluate())


def launch_outputs(test: Any, number: int) -> tuple[Path, Path]:
    """Standard output and error of launch *number* of the job (the
    samples of :func:`repeat_in_job` write their own)."""
    outs, errs = sample_outputs(test, "out"), sample_outputs(test, "err")
    if 0 < number <= len(outs):
        return outs[number - 1], errs[number - 1]
    return stdout_path(test), Path(test.stagedir) / str(test.stderr.evaluate())


def job_outcome(test: Any) -> None:
    """Fail, naming the cause, where the job did not end well, whatever
    the output looks like: a launch with a non-zero exit status or a
    signal, a launch that never ended, a scheduler event (time limit,
    node failure, preemption, out of memory). The check's own sanity
    message follows the cause where it has one."""
    if test.is_dry_run():
        return
    stage = Path(test.stagedir)
    launches = outcome.read_launches(stage / outcome.LAUNCH_STATUS)
    state = None
    failed_nodes: list[str] = []
    sched = type(test.job.scheduler).__name__
    if "Slurm" in sched or "Squeue" in sched:
        info = outcome.slurm_job_state(str(test.job.jobid))
        state = info.get("JobState")
        nodes = getattr(test.job, "nodelist", None) or []
        failed_nodes = outcome.slurm_failed_nodes(
            info.get("NodeList") or ",".join(nodes if isinstance(nodes, list) else [nodes]))
    program = Path(str(test.executable).split()[0]).name if test.executable else "job"
    try:  # the signal hydra ends the other ranks with (set by set_launcher)
        cleanup = int(str(test.env_vars.get(outcome.HYDRA_ABORT_SIGNAL_ENV, "9")).strip("'"))
    except ValueError:
        cleanup = 9
    why = outcome.job_failure(
        launches, exitcode=test.job.exitcode,
        signal_number=getattr(test.job, "signal", None),  # Slurm jobs have none
        scheduler_state=state, stderr=stage / str(test.stderr.evaluate()),
        program=program, stdout=stdout_path(test),
        outputs=functools.partial(launch_outputs, test), failed_nodes=failed_nodes,
        cleanup_signal=cleanup)
    if why is None:
        return
    own = ""
    skipped = outcome.skipped_launches(stage / outcome.LAUNCH_STATUS)
    if skipped:
        own = f" ({skipped} later launch(es) of the job skipped)"
    elif hasattr(test, "_rfm_sanity") and not hasattr(test, "sanity_patterns"):
        with osext.change_dir(str(stage)):
            try:
                sn.evaluate(test._rfm_sanity())
            except Exception as err:  # noqa: BLE001 - any failure of the check's parse
                own = f" (the check's own verdict: {str(err).splitlines()[0]})" \
                    if str(err) else ""
    raise SanityError(f"{why}{own}")


# --- The files of a check's job -----------------------------------------------


def shared_fs_dir(test: Any) -> str | None:
    """A directory for this test case's files on the partition's shared
    file system (``extras.shared_fs_dir``, e.g. the lab's file-server mount),
    unique per check, partition and environment; ``None`` where the partition
    has none (the stage directory is then the place)."""
    shared = test.current_partition.extras.get(SHARED_FS_EXTRA)
    if not shared:
        return None
    if any(c in str(shared) for c in "'\n\r\0"):
        raise ConfigFailure(
            f"partition {test.current_partition.fullname} extras.{SHARED_FS_EXTRA} "
            f"{str(shared)!r} holds a quote or a line break: name a plain directory")
    part, env = test.current_partition.name, test.current_environ.name
    return str(Path(str(shared)) / f"hpcval-{test.unique_name}-{part}-{env}")


def cleanup_cmds(stagedir: str, output_dir: str, pattern: str) -> list[str]:
    """Post-run commands of a check whose program writes files matching the
    shell *pattern* in *output_dir*: list what the program left behind (it
    should remove its own; see :func:`leftovers`), remove it, and remove
    *output_dir* itself where it is a per-test directory on a shared file
    system rather than the stage directory *stagedir*."""
    files = f"{shlex.quote(output_dir)}/{pattern}"
    cmds = [f"ls -1d {files} 2>/dev/null > {LEFTOVERS_FILE} || true", f"rm -f {files}"]
    if output_dir not in (".", str(stagedir)):
        cmds.append(f"rmdir {shlex.quote(output_dir)} 2>/dev/null || true")
    return cmds


def leftovers(stagedir: str) -> list[str]:
    """The files :func:`cleanup_cmds` found left behind (and removed)."""
    path = Path(stagedir) / LEFTOVERS_FILE
    return path.read_text().split() if path.is_file() else []
