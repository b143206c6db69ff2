"""Running ReFrame against a site and turning the run into a verdict.

``hpcval validate`` and scheduled validation both come through here:

1. check the site's files before spending time on benchmarks (exit 2 when
   they are wrong) and that its results store has room (exit 3 when not);
2. take the site's lock (validations of one site run one after another; the
   second waits, and gives up naming the holder);
3. run ReFrame under a unique run id (``HPCVAL_RUN_ID``): its report, stage
   and output directories are the run's own; ReFrame's tracebacks are kept in
   the run's log and summarised in one line;
4. print the verdict table, write the HTML report, store the run with its
   samples in the results store and judge every figure against its history
   (:mod:`hpcval.run.verdicts`); with ``record``, judge nothing and write the
   site's references and host expectations from the run instead.

Stopped by SIGTERM, SIGHUP or SIGINT, a run stops cleanly
(:mod:`hpcval.run.procs`): ReFrame aborts, no process of the run outlives hpcval
(the lock is released only then), what finished is stored as ``interrupted``
(judged against references, never a baseline) and the exit code is 128 + N.

Exit codes: :mod:`hpcval.core.errors`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from hpcval.core.errors import (
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_INPUT,
    EXIT_OK,
    EnvironmentFault,
    HpcvalError,
    InputError,
    input_failure,
)
from hpcval.core.fileio import atomic_write, os_fault
from hpcval.core.paths import start_log_environment
from hpcval.core.runid import ENV as RUN_ID_ENV
from hpcval.core.runid import new_run_id
from hpcval.reporting.htmlreport import write_html
from hpcval.reporting.report import RunHistory, RunReport, load_run_report, verdict_table
from hpcval.run import hostload, procs
from hpcval.run.earlier import keep_reframe_start_log, settle_earlier_run
from hpcval.run.lock import site_lock
from hpcval.run.outputlines import bounded_lines
from hpcval.run.procs import RunStopper
from hpcval.run.storecheck import (
    MIN_FREE_BYTES,
    SITE_FILES_STAMP,
    STORE_LOCK_WAIT,
    _preflight,
    _site_files_checked,
    _site_files_stamp,
    check_store,
)
from hpcval.run.storedrun import judged_report, latest_report, run_id_of, stored_result
from hpcval.site import Site

#: re-exported: callers and tests read them here
__all__ = ["DEFAULT_LOCK_TIMEOUT", "MIN_FREE_BYTES", "NOTHING_SELECTED", "RECORD_ENV",
           "SITE_FILES_STAMP", "STORE_LOCK_WAIT", "Outcome", "_preflight",
           "_site_files_checked", "_site_files_stamp", "check_store", "keep_reframe_start_log",
           "latest_report", "publish", "reframe_command", "republish", "republish_run",
           "run_reframe",
           "settle_earlier_run", "validate"]

#: Set for ReFrame by ``validate --record``: checks run and report their figures
#: without references (see :func:`hpcval.rfm.references.recording`).
RECORD_ENV = "HPCVAL_RECORD"  # the same name as hpcval.rfm.references.RECORD_ENV

#: Default wait for another validation of the same site, in seconds.
DEFAULT_LOCK_TIMEOUT = 4 * 3600.0


@dataclass
class Outcome:
    """What one validation run produced."""

    exit_code: int
    report: RunReport | None
    html: Path | None
    reframe_exit_code: int
    run_id: str = ""


def reframe_command() -> list[str]:
    """ReFrame from the Python environment that runs hpcval."""
    beside = Path(sys.executable).parent / "reframe"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("reframe")
    if found is None:
        raise EnvironmentFault("reframe not found: install hpcval's dependencies (make setup)")
    return [found]


def publish(report_path: Path, site: Site, out: IO[str] = sys.stdout,
            extra_sections: list[str] | None = None, extra_text: str = "",
            latest: bool = True, report: RunReport | None = None
            ) -> tuple[RunReport, Path]:
    """Print the verdict of a stored run and write its HTML report (and, when
    it is the site's ``latest`` run, ``latest.html``)."""
    report = load_run_report(report_path) if report is None else report
    history = RunHistory.load(site, report_path.stem.removeprefix("run-report-"), report)
    print(verdict_table(report, history) + extra_text, file=out)
    html = write_html(report, site.html_dir / f"{report_path.stem}.html", extra_sections,
                      history)
    try:
        if latest:
            atomic_write(site.html_dir / "latest.html", html.read_bytes(),
                         "writing latest.html")
    except OSError as err:
        raise os_fault(html, err, "reading the HTML report") from None
    print(f"HTML report: {html}", file=out)
    print(f"Run report:  {report_path}", file=out)
    return report, html


class _Console:
    """Forwards ReFrame's output line by line; a Python traceback is kept in
    the run's log and shown as one line naming its exception."""

    def __init__(self, out: IO[str], log: IO[str] | None, log_path: Path,
                 config: Path | None = None) -> None:
        self.out: IO[str] | None
        self.out, self.log, self.log_path, self.config = out, log, log_path, config
        self.in_traceback = False
        self.in_logging_error = False
        #: distinct exceptions Python's logging reported (each shown once)
        self.logging_errors: list[str] = []
        self.summaries: list[str] = []
        #: ReFrame's own ``ERROR:`` lines, without colour codes
        self.errors: list[str] = []
        #: how many checks ReFrame said it runs (``Running N check(s)``)
        self.checks_selected: int | None = None
        #: ReFrame's command-line errors (``reframe: error: ...``)
        self.usage_errors: list[str] = []
        #: a traceback passed through the site config (it raised while being read)
        self.config_raised = False
        self.returncode = 0
        #: the signal that stopped the run (see :mod:`hpcval.run.procs`), or None
        self.signum: int | None = None

    def write(self, text: str) -> None:
        """To the terminal; a terminal gone (closed, or a pipe nobody reads)
        loses the output, never the run (the log keeps it)."""
        if self.out is None:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except (OSError, ValueError):
            self.out = None

    def line(self, text: str) -> None:
        if self.log is not None:
            try:
                self.log.write(text)
            except OSError:
                self.log = None
        if text.startswith("--- Logging error ---"):
            # Python's logging could not write a record (a full disk): it
            # prints a traceback and the caller's stack, ending "Arguments:"
            self.in_logging_error = True
            return
        if self.in_logging_error:
            summary = text.strip()
            if text.startswith("Arguments:"):
                self.in_logging_error = False
                self.in_traceback = False
            elif (not text.startswith((" ", "\t")) and _EXCEPTION_LINE.match(summary)
                  and summary not in self.logging_errors):
                self.logging_errors.append(summary)
                self.write(f"reframe could not write a log record: {summary} (details in "
                           f"{self.log_path})\n")
            return
        if text.startswith("Traceback (most recent call last):"):
            self.in_traceback = True
            return
        if self.in_traceback:
            if text.startswith((" ", "\t")) or not text.strip():
                if self.config is not None and f'File "{self.config}"' in text:
                    self.config_raised = True
                return
            self.in_traceback = False
            summary = text.strip()
            if summary not in self.summaries:  # the same exception, shown once
                self.write(f"reframe raised: {summary} (traceback in {self.log_path})\n")
            self.summaries.append(summary)
            return
        plain = _ANSI.sub("", text).strip()
        if plain.startswith("ERROR:"):
            self.errors.append(plain.removeprefix("ERROR:").strip())
        if plain.startswith("reframe: error:"):
            self.usage_errors.append(plain.removeprefix("reframe: error:").strip())
        selected = _RUNNING.search(plain)
        if selected:
            self.checks_selected = int(selected.group(1))
        self.write(text)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Exit)\b.*")
_RUNNING = re.compile(r"^\[=+\] Running (\d+) check\(s\)")

#: ReFrame's errors that mean the site config is wrong (exit 2, not 1).
_CONFIG_ERRORS = ("failed to load configuration", "failed to initialize runtime",
                  "could not find a configuration entry", "configuration error")


def run_reframe(cmd: list[str], env: dict[str, str], cwd: Path, out: IO[str],
                log_path: Path, config: Path | None = None,
                stopper: RunStopper | None = None) -> _Console:
    """Run ReFrame, streaming its output; returns what the console saw, with
    ReFrame's exit code as ``returncode``. ReFrame runs in a session of its
    own: a stop signal reaches it through *stopper*, which also reaps what
    the run leaves behind before this returns."""
    log: IO[str] | None
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(log_path, "w")  # noqa: SIM115 - closed below
    except OSError:
        log = None
    console = _Console(out, log, log_path, config)
    try:
        with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace",
                              bufsize=1, start_new_session=stopper is not None) as proc:
            if stopper is not None:
                stopper.proc = proc
                if stopper.record is not None:  # ReFrame's group, for the next run to find
                    with contextlib.suppress(HpcvalError):
                        procs.record_run(stopper.record, stopper.run_id, proc.pid)
            assert proc.stdout is not None
            for text in bounded_lines(proc.stdout):  # an 80 MB line: 4 KiB of it
                console.line(text)
            rc = proc.wait()
            if stopper is not None and stopper.signum is not None:
                stopper.reap()
                console.signum = stopper.signum
    except OSError as err:
        raise EnvironmentFault(f"{cmd[0]}: cannot start ReFrame: {err.strerror}") from None
    finally:
        if log is not None:
            with contextlib.suppress(OSError):
                log.close()
    console.returncode = rc
    return console


def validate(site_name: str, reframe_args: list[str] | None = None,
             root: Path | None = None, out: IO[str] = sys.stdout, record: bool = False,
             lock_timeout: float = DEFAULT_LOCK_TIMEOUT, wait_earlier: bool = False,
             tags: dict[str, str] | None = None) -> Outcome:
    """Run every check on the site (or those ``reframe_args`` select), store
    the run and judge it; with ``record``, write references instead. ``tags``
    (``--tag KEY=VALUE``) are stored with the run (``hpcval compare tag:...``)."""
    site = Site.load(site_name, root)
    stamp = ""
    if not record:
        if not site.references.exists():
            raise InputError(
                f"{site.references}: the site has no references yet; run `hpcval validate "
                f"--site {site.name} --record` once to measure and write them")
        # every site file a run reads (references, host expectations, judging,
        # MPI tuning): a wrong one stops here, before any benchmark runs (exit 2).
        # The full check parses every check file and imports ReFrame: skipped
        # when none of its inputs changed since it last passed
        stamp = _site_files_stamp(site)
        if _site_files_checked(site, stamp):
            stamp = ""
        else:
            site.check_files()
    # every value of the site config a run sizes or launches with (topology,
    # budget from every source, extras): exit 2 (3 for a missing tool) now,
    # not failed checks later
    from hpcval.rfm.sitevalues import check_site_values, host_cpus

    config = site.reframe_config()
    check_site_values(site, reframe_args or [], config)
    _preflight(site, min(lock_timeout, STORE_LOCK_WAIT))
    if not record and stamp:
        with contextlib.suppress(HpcvalError, OSError):  # only a cache
            atomic_write(site.var / SITE_FILES_STAMP, stamp, "noting the checked site files")
    run_id = new_run_id()
    report_path = site.report_path(run_id)
    cmd = [*reframe_command(), "-C", str(site.config), "-c", str(site.checks_dir),
           "-R", "-r", "--report-file", str(report_path), *(reframe_args or [])]
    env = {**os.environ, RUN_ID_ENV: run_id,
           **start_log_environment(site.run_log(run_id).parent)}
    if record:
        env[RECORD_ENV] = "1"
    else:
        env.pop(RECORD_ENV, None)
    stopper = RunStopper(run_id, site.stage_dir(run_id))
    # the lock is released only after the run's last process is gone
    with site_lock(site.lock_file, f"validate run {run_id}", lock_timeout,
                   log=lambda m: print(m, file=sys.stderr, flush=True)), stopper.installed():
        procs.current = stopper
        stopper.record = site.var / procs.RUN_RECORD
        try:
            settle_earlier_run(site, wait=lock_timeout if wait_earlier else 0.0)
            procs.record_run(stopper.record, run_id)
            print(f"hpcval: run {run_id} on site {site.name}", file=out)
            print("+ " + " ".join(cmd), file=out, flush=True)
            started = time.time()
            load = hostload.HostLoad.start()
            console = run_reframe(cmd, env, site.root, out,
                                  site.run_log(run_id), site.config, stopper)
            others = load.others()
            keep_reframe_start_log(site, run_id, started)
            outcome = _conclude(site, run_id, report_path, console, record, out,
                                reframe_args or [], stopper, tags)
            if outcome.exit_code == EXIT_FAILED and hostload.runs_here(config):
                print(hostload.note(others, host_cpus()), end="", file=out, flush=True)
        finally:
            procs.current = None
            if not stopper.left:  # else the next run finds and stops them
                procs.forget_run(stopper.record, run_id)
    return outcome


NOTHING_SELECTED = ("no check ran: nothing selected for this site (check the names given "
                    "with -n, the site's environments and the options given; a case needing "
                    "more ranks than a partition's CPUs is not generated)")


def _conclude(site: Site, run_id: str, report_path: Path, console: _Console,
              record: bool, out: IO[str], reframe_args: list[str],
              stopper: RunStopper | None = None,
              tags: dict[str, str] | None = None) -> Outcome:
    from hpcval.run import verdicts

    rc = console.returncode
    if stopper is not None and stopper.signum is not None:
        return _interrupted(site, run_id, report_path, console, out, stopper, tags=tags)
    if not report_path.is_file() or report_path.stat().st_size == 0:
        free = shutil.disk_usage(site.var).free if site.var.exists() else 0
        log = site.run_log(run_id)
        config_error = next((e for e in console.errors
                             if any(k in e for k in _CONFIG_ERRORS)), None)
        if free < MIN_FREE_BYTES:
            code, why = EXIT_ENVIRONMENT, f"disk full on {site.var} ({free >> 20} MiB free)"
        elif (rc == 0 and console.checks_selected == 0) or console.usage_errors:
            # ReFrame writes no report when it runs no test case ("Running 0 check(s)")
            given = " ".join(shlex.quote(a) for a in reframe_args) or "(none)"
            lister = shlex.join([*reframe_command(), "-C", str(site.config), "-c",
                                 str(site.checks_dir), "-R", "-l"])
            listing = f"`{lister}` lists the checks"
            why = (f"ReFrame refused them: {console.usage_errors[-1]}" if console.usage_errors
                   else "they select none of the checks this site runs (-n selects by "
                   "name, -t by tag; a case needing more ranks than a partition's CPUs is "
                   "not generated)")
            print(f"hpcval: error: ReFrame options after --: {given}: {why}; {listing}; "
                  "nothing was run or stored", file=sys.stderr)
            return Outcome(EXIT_INPUT, None, None, rc, run_id)
        elif config_error or console.config_raised:
            code = EXIT_INPUT
            why = (f"{site.config}: ReFrame cannot use the site config: "
                   f"{config_error or console.summaries[-1]}; fix the file (traceback, if "
                   f"any, in {log})")
        else:
            code = EXIT_FAILED
            why = (console.summaries or console.errors or [f"see {log}"])[-1]
        print(f"hpcval: error: ReFrame exited with {rc} and wrote no run report: {why}",
              file=sys.stderr)
        return Outcome(code, None, None, rc, run_id)
    report = load_run_report(report_path)
    if not report.cases:
        publish(report_path, site, out)
        print(f"hpcval: error: {NOTHING_SELECTED}", file=sys.stderr)
        return Outcome(EXIT_FAILED, report, None, rc, run_id)
    if stopper is not None:
        stopper.pause("storing")  # a test hook (HPCVAL_TEST_PAUSE); nothing otherwise
    judged = verdicts.store_and_judge(site, run_id, report, record=record, tags=tags)
    if stopper is not None and stopper.signum is not None:
        # stopped while it was judged or stored: the storing completed; the run
        # is marked, never a baseline
        return _interrupted(site, run_id, report_path, console, out, stopper, stored=True,
                            tags=tags)
    if judged.store_error is not None:  # no verdict without the history it needs
        print(f"hpcval: error: {judged.store_error} (this run is kept in {report_path})",
              file=sys.stderr)
        return Outcome(EXIT_ENVIRONMENT, report, None, rc, run_id)
    report, html = publish(report_path, site, out, judged.html_sections, judged.text)
    if stopper is not None and stopper.signum is not None:
        return _interrupted(site, run_id, report_path, console, out, stopper, stored=True,
                            tags=tags)
    if record:
        verdicts.write_recorded_contract(site, run_id, report, out)
    failed = bool(report.failures) or rc != 0 or judged.regressed or report.all_skipped
    if judged.store_error is not None:
        print(f"hpcval: error: {judged.store_error} (this run is kept in {report_path})",
              file=sys.stderr)
        return Outcome(EXIT_ENVIRONMENT, report, html, rc, run_id)
    wrong = next((c for c in report.failures if input_failure(c.fail_reason)), None)
    if wrong is not None:
        # references or site config found wrong while the run was set up: input, exit 2
        print(f"hpcval: error: {wrong.display_name}: {(wrong.fail_reason or '').splitlines()[0]}",
              file=sys.stderr)
        return Outcome(EXIT_INPUT, report, html, rc, run_id)
    return Outcome(EXIT_FAILED if failed else EXIT_OK, report, html, rc, run_id)


def _interrupted(site: Site, run_id: str, report_path: Path, console: _Console,
                 out: IO[str], stopper: RunStopper, stored: bool = False,
                 tags: dict[str, str] | None = None) -> Outcome:
    """A run stopped by a signal: what finished is stored as ``interrupted``
    (judged against its references by ReFrame, never accepted into
    baselines); exit 128 + N."""
    import signal as signal_

    from hpcval.run import verdicts

    name = signal_.Signals(stopper.signum or 0).name
    code = stopper.exit_code
    report = None
    html = None
    if report_path.is_file() and report_path.stat().st_size > 0:
        try:
            report = load_run_report(report_path)
        except HpcvalError as err:
            print(f"hpcval: error: {err}", file=sys.stderr)
    if report is None or not report.cases:
        print(f"hpcval: run {run_id} stopped by {name} before any test case finished: nothing "
              f"stored (ReFrame's output is in {site.run_log(run_id)})",
              file=sys.stderr)
        return Outcome(code, None, None, console.returncode, run_id)
    judged = verdicts.mark_interrupted(site, run_id, report, stored=stored, tags=tags)
    if judged.store_error is not None:
        print(f"hpcval: error: {judged.store_error} (this run is kept in {report_path})",
              file=sys.stderr)
        return Outcome(code, report, None, console.returncode, run_id)
    with contextlib.suppress(OSError, ValueError):  # a terminal gone loses the print only
        report, html = publish(report_path, site, out, judged.html_sections, judged.text)
    print(f"hpcval: run {run_id} stopped by {name}: stored as interrupted with the "
          f"{len(report.cases)} test case(s) ReFrame reported (never a baseline); exit {code}",
          file=sys.stderr)
    return Outcome(code, report, html, console.returncode, run_id)


def republish(site: Site, report_path: Path, out: IO[str] = sys.stdout) -> RunReport:
    """The verdict and HTML of a stored run again, with its stored verdicts."""
    return republish_run(site, report_path, out)[0]


def republish_run(site: Site, report_path: Path, out: IO[str] = sys.stdout,
                  latest: bool = True) -> tuple[RunReport, bool]:
    """:func:`republish`, and whether the run failed (its exit code 1): a case
    failed or was not run, a figure regressed, it was stopped, or every case
    was skipped. A report that is no run hpcval judged for the site (a dry
    run, another site's, never stored, orphaned) is refused (exit 2,
    :mod:`hpcval.run.storedrun`), its page never written."""
    from hpcval.run import verdicts

    run_id = run_id_of(report_path)
    report = judged_report(site, report_path)
    judged = verdicts.stored(site, run_id, report)
    report, _ = publish(report_path, site, out, judged.html_sections, judged.text,
                        latest=latest, report=report)
    failed = (bool(report.failures or report.not_run) or report.all_skipped
              or judged.regressed or stored_result(site, run_id) in FAILED_RESULTS)
    return report, failed


#: stored results of a run that fails it whatever its cases say
FAILED_RESULTS = ("regressed", "unstable", "interrupted")
