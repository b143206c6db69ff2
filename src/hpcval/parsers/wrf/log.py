"""Parser for WRF's run logs (``rsl.error.0000`` / ``rsl.out.0000``) and its figure of merit.

With ``dmpar`` every MPI rank writes ``rsl.out.NNNN`` and ``rsl.error.NNNN``; rank 0's
files carry the timers (``frame/module_timing.F``)::

    Timing for main: time 0001-01-01_00:00:12 on domain   1:    0.53470 elapsed seconds
    Timing for Writing wrfout_d01_0001-01-01_00:30:00 for domain        1:    0.0487 elapsed seconds
    Timing for Writing restart for domain        1:    0.33120 elapsed seconds
    d01 0001-01-01_00:10:00 wrf: SUCCESS COMPLETE WRF

With an adaptive time step the main timer reads ``main (dt= 45.00): time ...``.
A FATAL that only sums up (``NOTE: 1 namelist settings are wrong``,
``ERRORS while reading one or more namelists``) is quoted after the
``--- ERROR`` lines printed above it, its cause.
A run that WRF stops itself prints ``-------------- FATAL CALLED ---------------``,
``FATAL CALLED FROM FILE:  <file>  LINE:  <n>`` and the reason; an unstable run
usually first prints ``N points exceeded v_cfl = 2 in domain d01 at time ...``.

Figure of merit (the rules and why; docs/checks.md repeats them for users):

* Only the outermost domain's steps are judged: its ``main`` timer spans the whole
  step, including every nest integrated inside it.
* The first step is excluded: it carries one-off start-up work (first history
  write at the initial time, physics initialisation, first-touch allocation).
* Steps that do file I/O are excluded: those that write history, restart or
  auxiliary output, and those that read the next lateral boundary conditions
  (real-data cases such as CONUS). Their time measures the file system, not the
  computation and halo exchange the figure is about. WRF writes output in
  ``med_before_solve_io`` inside the step's ``main`` timer
  (``frame/module_integrate.F``) and reads boundaries there too
  (``med_latbound_in``), so each ``Timing for Writing`` / ``Timing for
  processing lateral boundary`` line is printed *before* the ``Timing for main``
  line of the step that pays for it: a step is an I/O step when such a line for
  its domain lies between the previous ``main`` line of that domain and its own.
  For a history file this is the step that ends one time step after the time in
  the file name (checked by the tests); the position is used rather than the
  name because a file holding several frames (``frames_per_outfile`` > 1) keeps
  the name of its first frame, and the restart line carries no time at all.
* Mean and median step time are over the remaining ("steady") steps; simulation
  speed is model seconds per wall-clock second over them, i.e. ``time_step / mean
  step time`` for a fixed time step (with an adaptive step, the sum of the steps'
  ``dt`` over the sum of their times).
"""


from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hpcval.core.errors import ParseError

_TIME = r"\d{4,}-\d\d-\d\d_\d\d:\d\d:\d\d(?:\.\d+)?"
_MAIN_RE = re.compile(
    r"Timing for main(?: \(dt=\s*(?P<dt>[-+.\dEe]+)\))?: time (?P<time>" + _TIME + r")"
    r" on domain\s+(?P<domain>\d+):\s+(?P<secs>\S+) elapsed seconds"
)
_WRITE_RE = re.compile(
    r"Timing for Writing (?P<what>.+?) for domain\s+(?P<domain>\d+):"
    r"\s+(?P<secs>\S+) elapsed seconds"
)
_BOUNDARY_RE = re.compile(
    r"Timing for processing lateral boundary for domain\s+(?P<domain>\d+):"
    r"\s+(?P<secs>\S+) elapsed seconds"
)
_TIMING_RE = re.compile(r"Timing for (?P<what>.+?):\s+(?P<secs>\S+) elapsed seconds")
_FILE_TIME_RE = re.compile(r"_(?P<time>" + _TIME + r")$")
_SUCCESS_RE = re.compile(r"wrf: SUCCESS COMPLETE WRF")
_FATAL_FROM_RE = re.compile(r"FATAL CALLED FROM FILE:\s+(?P<file>\S+)\s+LINE:\s+(?P<line>\d+)")
#: The cause WRF prints on a line of its own before a FATAL that only sums up
#: (``--- ERROR: ...`` of the namelist checks, ``------ ERROR while reading
#: namelist physics ------``).
_ERROR_LINE_RE = re.compile(r"^\s*-{2,}\s*ERROR\b")
#: FATAL messages that only sum up the errors printed above them.
_SUMMING_FATAL_RE = re.compile(r"namelist settings are wrong|ERRORS while reading one or more "
                               r"namelists|namelist vs input data inconsistencies",
                               re.IGNORECASE)
_FATAL_BANNER = "-------------- FATAL CALLED ---------------"
_FATAL_END = "-------------------------------------------"
_SIGNAL_RE = re.compile(r"Program received signal (?P<sig>SIG\w+)(?::\s*(?P<what>.*))?")
_CFL_RE = re.compile(r"(?P<n>\d+)\s+points exceeded (?:v_)?cfl\s*=\s*\d+ in domain (?P<dom>\S+)"
                     r" at time (?P<time>\S+)")
_VERSION_RE = re.compile(r"WRF V(?P<version>\d+\.\d+(?:\.\d+)*)")
_DM_TASKS_RE = re.compile(r"Ntasks in X\s+(?P<x>\d+)\s*,\s*ntasks in Y\s+(?P<y>\d+)")


def model_seconds(stamp: str) -> float:
    """Seconds since 0001-01-01 of a WRF time string ``YYYY-MM-DD_hh:mm:ss[.ffff]``.

    WRF's idealized cases start in year 1, which :mod:`datetime` handles; the
    fraction (fractional time steps) is added separately.
    """
    whole, _, frac = stamp.partition(".")
    try:
        moment = datetime.strptime(whole, "%Y-%m-%d_%H:%M:%S")
    except ValueError:
        raise ParseError(f"not a WRF time string: {stamp!r}") from None
    base = (moment - datetime(1, 1, 1)).total_seconds()
    return base + (float("0." + frac) if frac else 0.0)


def format_model_time(seconds: float) -> str:
    """Inverse of :func:`model_seconds` for whole seconds: ``YYYY-MM-DD_hh:mm:ss``."""
    moment = datetime(1, 1, 1) + timedelta(seconds=round(seconds))
    return f"{moment.year:04d}-{moment:%m-%d_%H:%M:%S}"


@dataclass(frozen=True)
class WrfWrite:
    """One file-I/O timer inside a step: ``Timing for Writing ...`` (history,
    restart, auxiliary output) or ``Timing for processing lateral boundary``
    (reading the next boundary conditions): what and how long it took."""

    what: str
    domain: int
    seconds: float
    line: int

    @property
    def kind(self) -> str:
        """``history`` (``wrfout``), ``restart``, ``boundary`` (lateral boundary
        read), or the stream's file prefix."""
        name = self.what.split()[0]
        if self.what.startswith("lateral boundary"):
            return "boundary"
        if name == "restart" or name.startswith("wrfrst"):
            return "restart"
        if name.startswith("wrfout"):
            return "history"
        return name.split("_d0")[0]

    @property
    def model_time(self) -> str | None:
        """The time in the file name (the file's first frame), if there is one."""
        m = _FILE_TIME_RE.search(self.what.split()[0])
        return m.group("time") if m else None


@dataclass(frozen=True)
class WrfStep:
    """One ``Timing for main`` line: the step ending at ``model_time``."""

    model_time: str
    domain: int
    seconds: float
    line: int
    #: The adaptive time step printed with the timer, or None for a fixed step.
    dt: float | None = None
    #: File I/O inside this step: output written (history, restart, auxiliary
    #: streams) and lateral boundary conditions read.
    writes: tuple[WrfWrite, ...] = ()

    @property
    def writes_output(self) -> bool:
        return bool(self.writes)


@dataclass
class WrfLog:
    """Everything of interest in one rank's WRF log."""

    source: str
    steps: list[WrfStep] = field(default_factory=list)
    writes: list[WrfWrite] = field(default_factory=list)
    #: Other timers (``processing lateral boundary for domain 1`` etc.): (what, seconds).
    other_timings: list[tuple[str, float]] = field(default_factory=list)
    success: bool = False
    version: str | None = None
    #: MPI decomposition (tasks in x, tasks in y) when the log states it.
    decomposition: tuple[int, int] | None = None
    #: Text of the first FATAL message, with the file and line WRF named.
    fatal: str | None = None
    #: CFL warnings: (points, domain, model time).
    cfl_warnings: list[tuple[int, str, str]] = field(default_factory=list)
    #: Signal the runtime reported (gfortran's "Program received signal SIGSEGV: ...").
    signal: str | None = None
    last_line: str = ""

    def domain_steps(self, domain: int = 1) -> list[WrfStep]:
        return [s for s in self.steps if s.domain == domain]

    def time_step(self, domain: int = 1) -> float:
        """The model time step in seconds, from the first two steps' model times
        (or the adaptive ``dt`` printed with the first step)."""
        steps = self.domain_steps(domain)
        if steps and steps[0].dt is not None:
            return steps[0].dt
        if len(steps) < 2:
            raise ParseError(
                f"{self.source}: cannot tell the time step of domain {domain} from "
                f"{len(steps)} step(s)"
            )
        return model_seconds(steps[1].model_time) - model_seconds(steps[0].model_time)

    def failure(self) -> str | None:
        """Why the run did not complete, in words, or None if it completed."""
        if self.fatal:
            reason = f"WRF stopped with a fatal error: {self.fatal}"
        elif self.success:
            return None
        elif not self.steps:
            reason = "WRF log has no time step (it stopped before integrating)"
        elif self.signal:
            last = self.steps[-1]
            reason = (
                f"WRF crashed ({self.signal}) after step {len(self.steps)} "
                f"(model time {last.model_time}, domain {last.domain})"
            )
        else:
            last = self.steps[-1]
            reason = (
                f"WRF log ends without 'SUCCESS COMPLETE WRF' after step {len(self.steps)} "
                f"(model time {last.model_time}, domain {last.domain}): the run was killed, "
                "crashed or is still running"
            )
        if self.cfl_warnings:
            points, dom, when = self.cfl_warnings[-1]
            reason += (
                f"; {len(self.cfl_warnings)} CFL warning(s), the last: {points} points "
                f"exceeded the vertical CFL limit in {dom} at {when} (the time step is too "
                "large for the flow: reduce time_step)"
            )
        return reason


def _number(token: str, line_no: int, source: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise ParseError(
            f"{source}:{line_no}: not a number in a WRF timing line: {token!r}"
        ) from None
    if value != value or value < 0:  # NaN or negative
        raise ParseError(f"{source}:{line_no}: impossible elapsed time {token!r}")
    return value


def parse_wrf_log(text: str, source: str = "WRF log") -> WrfLog:
    """Parse one ``rsl.error.NNNN`` / ``rsl.out.NNNN``.

    Raises :class:`ParseError` when the text has no WRF timer at all and no
    fatal error (not a WRF log, or an empty file), or a timer carries something
    other than a number. A truncated or failed run parses; :func:`check_complete`
    turns it into an error.
    """
    log = WrfLog(source=source)
    pending: dict[int, list[WrfWrite]] = {}
    in_fatal = False
    fatal_lines: list[str] = []
    #: ERROR lines printed since the last step: the cause of a summing FATAL
    errors: list[str] = []
    seen_wrf = False

    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if line.strip():
            log.last_line = line.strip()
        if log.version is None and (m := _VERSION_RE.search(line)):
            log.version = m.group("version")
        if log.decomposition is None and (m := _DM_TASKS_RE.search(line)):
            log.decomposition = (int(m.group("x")), int(m.group("y")))
        if _FATAL_BANNER in line:
            in_fatal, seen_wrf = True, True
            fatal_lines = []
            continue
        if in_fatal:
            if line.strip() == _FATAL_END:
                in_fatal = False
                if log.fatal is None:
                    log.fatal = _fatal_text(fatal_lines, errors)
            elif line.strip():
                fatal_lines.append(line.strip())
            continue
        if _ERROR_LINE_RE.match(line):
            errors.append(line.strip())
            continue
        if m := _MAIN_RE.search(line):
            seen_wrf = True
            errors = []
            domain = int(m.group("domain"))
            dt = _number(m.group("dt"), line_no, source) if m.group("dt") else None
            log.steps.append(WrfStep(
                model_time=m.group("time"), domain=domain,
                seconds=_number(m.group("secs"), line_no, source), line=line_no, dt=dt,
                writes=tuple(pending.pop(domain, [])),
            ))
            continue
        if (m := _WRITE_RE.search(line)) or (b := _BOUNDARY_RE.search(line)):
            seen_wrf = True
            what = m.group("what").strip() if m else "lateral boundary (read)"
            hit = m or b
            write = WrfWrite(what, int(hit.group("domain")),
                             _number(hit.group("secs"), line_no, source), line_no)
            log.writes.append(write)
            pending.setdefault(write.domain, []).append(write)
            continue
        if m := _TIMING_RE.search(line):
            seen_wrf = True
            log.other_timings.append(
                (m.group("what").strip(), _number(m.group("secs"), line_no, source)))
            continue
        if _SUCCESS_RE.search(line):
            log.success, seen_wrf = True, True
            continue
        if m := _CFL_RE.search(line):
            log.cfl_warnings.append((int(m.group("n")), m.group("dom"), m.group("time")))
        elif log.signal is None and (m := _SIGNAL_RE.search(line)):
            what = (m.group("what") or "").strip()
            log.signal = m.group("sig") + (f": {what}" if what else "")

    if in_fatal and log.fatal is None:
        log.fatal = _fatal_text(fatal_lines, errors)
    if not seen_wrf:
        raise ParseError(
            f"{source}: no WRF timer, completion or fatal-error line: not a WRF rsl log "
            "(or WRF stopped before its first time step; see the other rsl.error.* files)"
        )
    return log


def _fatal_text(lines: list[str], errors: list[str] | None = None) -> str:
    """WRF's FATAL message with its file and line; where the message only
    sums up (``NOTE: 1 namelist settings are wrong``, ``ERRORS while reading
    one or more namelists``), the ERROR lines printed above it come first:
    they are the cause."""
    where = ""
    message: list[str] = []
    for text in lines:
        if m := _FATAL_FROM_RE.search(text):
            where = f" (FATAL CALLED FROM FILE {m.group('file')} LINE {m.group('line')})"
        else:
            message.append(text)
    said = " ".join(message) or "no message"
    if errors and _SUMMING_FATAL_RE.search(said):
        cause = " ".join(e.strip("- ").strip() for e in errors)
        return f"{cause} [WRF: {said}]{where}"
    return said + where


def check_complete(log: WrfLog, expected_steps: int | None = None, domain: int = 1) -> WrfLog:
    """The log, or :class:`ParseError` naming what is wrong: a fatal error (with
    WRF's message and file/line), CFL instability, truncation (no ``SUCCESS
    COMPLETE WRF``), or a step count other than ``expected_steps`` on ``domain``."""
    reason = log.failure()
    if reason:
        raise ParseError(f"{log.source}: {reason}")
    if expected_steps is not None:
        got = len(log.domain_steps(domain))
        if got != expected_steps:
            raise ParseError(
                f"{log.source}: domain {domain} ran {got} time steps, expected {expected_steps} "
                "(run_* length / time_step in namelist.input)"
            )
    return log


@dataclass(frozen=True)
class WrfFigures:
    """Figure of merit over the steady-state steps of one domain."""

    #: Model time step in seconds (first step's; see :meth:`WrfLog.time_step`).
    time_step: float
    steps_total: int
    #: Steps judged: all but the first and the output-writing ones.
    steps_used: int
    steps_output: int
    mean_step: float
    median_step: float
    min_step: float
    max_step: float
    #: Model seconds per wall-clock second over the steady steps.
    speed: float
    #: Mean time of the excluded output-writing steps (None if there were none).
    mean_output_step: float | None
    first_step: float
    #: Wall time of all steps of the domain.
    total_seconds: float
    #: Wall time of each steady step (s): the samples of the step time.
    step_times: tuple[float, ...] = ()
    #: Model seconds per wall-clock second of each steady step (those the timer
    #: shows as 0 s left out): the samples of the speed.
    step_speeds: tuple[float, ...] = ()


def figures(log: WrfLog, domain: int = 1, time_step: float | None = None) -> WrfFigures:
    """Mean/median step time and simulation speed over the steady steps.

    ``time_step`` overrides the step inferred from the log (use the namelist's
    value where it is known). Raises :class:`ParseError` when no steady step is
    left to judge.
    """
    steps = log.domain_steps(domain)
    if not steps:
        raise ParseError(f"{log.source}: no 'Timing for main' line for domain {domain}")
    if time_step is None:
        time_step = log.time_step(domain)
    if time_step <= 0:
        raise ParseError(f"{log.source}: time step {time_step} s is not positive")
    output = [s for s in steps[1:] if s.writes_output]
    steady = [s for s in steps[1:] if not s.writes_output]
    if not steady:
        raise ParseError(
            f"{log.source}: no steady-state step on domain {domain}: {len(steps)} step(s), "
            f"the first and {len(output)} output-writing step(s) are excluded; run longer or "
            "write history less often"
        )
    times = [s.seconds for s in steady]
    wall = sum(times)
    if wall <= 0:
        raise ParseError(f"{log.source}: steady steps took 0 s in total: timer resolution?")
    model_steps = [s.dt if s.dt is not None else time_step for s in steady]
    model = sum(model_steps)
    return WrfFigures(
        time_step=time_step,
        steps_total=len(steps),
        steps_used=len(steady),
        steps_output=len(output),
        mean_step=statistics.fmean(times),
        median_step=statistics.median(times),
        min_step=min(times),
        max_step=max(times),
        speed=model / wall,
        mean_output_step=statistics.fmean(s.seconds for s in output) if output else None,
        first_step=steps[0].seconds,
        total_seconds=sum(s.seconds for s in steps),
        step_times=tuple(times),
        # a step the timer shows as 0 s has no finite speed: left out
        step_speeds=tuple(m / t for m, t in zip(model_steps, times, strict=True) if t > 0),
    )
