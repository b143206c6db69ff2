"""Parser for WRF's run logs (``rsl.error.0000`` / ``rsl.out.0000``) and its figure of merit.

With ``dmpar`` every MPI rank writes ``rsl.out.NNNN`` and ``rsl.error.NNNN``; rank 0's
files carry the timers (``frame/module_timing.F``)::

    Timing for main: time 0001-01-01_00:00:12 on domain   1:    0.53470 elapsed seconds
    Timing for Writing wrfout_d01_0001-01-01_00:30:00 for domain        1:    0.0487 elapsed seconds
    Timing for Writing restart for domain        1:    0.33120 elapsed seconds
    d01 0001-01-01_00:10:00 wrf: SUCCESS COMPLETE WRF

With an adaptive time step the main timer reads ``main (dt= 45.00): time ...``.
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

import hashlib
import os
import re
import shutil
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hpcval.errors import ParseError

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
                    log.fatal = _fatal_text(fatal_lines)
            elif line.strip():
                fatal_lines.append(line.strip())
            continue
        if m := _MAIN_RE.search(line):
            seen_wrf = True
            domain = int(m.group("domain"))
            dt = float(m.group("dt")) if m.group("dt") else None
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
        log.fatal = _fatal_text(fatal_lines)
    if not seen_wrf:
        raise ParseError(
            f"{source}: no WRF timer, completion or fatal-error line: not a WRF rsl log "
            "(or WRF stopped before its first time step; see the other rsl.error.* files)"
        )
    return log


def _fatal_text(lines: list[str]) -> str:
    where = ""
    message: list[str] = []
    for text in lines:
        if m := _FATAL_FROM_RE.search(text):
            where = f" (FATAL CALLED FROM FILE {m.group('file')} LINE {m.group('line')})"
        else:
            message.append(text)
    return (" ".join(message) or "no message") + where


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
    model = sum(s.dt if s.dt is not None else time_step for s in steady)
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
    )


# --- namelist.input -------------------------------------------------------------------------

_NML_ENTRY_RE = r"^(?P<lead>\s*{key}\s*=\s*)(?P<value>[^\n!/]*?)(?P<tail>\s*(?:!.*)?)$"


def _fortran_value(value: object) -> str:
    if isinstance(value, bool):
        return ".true." if value else ".false."
    if isinstance(value, (list, tuple)):
        return ", ".join(_fortran_value(v) for v in value) + ","
    if isinstance(value, str) and not value.startswith("'"):
        return f"'{value}'"
    return f"{value}"


def namelist_value(text: str, key: str) -> str:
    """The first value of ``key`` in a namelist.input (as written: ``72``,
    ``.true.``, ``'wrfout'``); :class:`ParseError` if the key is absent."""
    m = re.search(_NML_ENTRY_RE.format(key=re.escape(key)), text, re.MULTILINE | re.IGNORECASE)
    if not m:
        raise ParseError(f"namelist.input has no entry {key!r}")
    return m.group("value").split(",")[0].strip()


def edit_namelist(text: str, changes: dict[str, object], group: str | None = None) -> str:
    """``namelist.input`` with the entries in ``changes`` replaced.

    A number or bool sets the first domain's value and keeps the others (so
    ``history_interval=5`` keeps the nests' intervals); a list sets all domains.
    An entry that is not in the file is added to ``group`` (``time_control``,
    ``domains``...) if given, else it is an error: a misspelt key must not be
    ignored silently, as WRF itself would stop on it.
    """
    for key, value in changes.items():
        pattern = re.compile(_NML_ENTRY_RE.format(key=re.escape(key)),
                             re.MULTILINE | re.IGNORECASE)
        m = pattern.search(text)
        if m:
            old = [v.strip() for v in m.group("value").split(",")]
            if isinstance(value, (list, tuple)):
                new = _fortran_value(value)
            else:
                rest = [v for v in old[1:] if v]
                new = ", ".join([_fortran_value(value), *rest]) + ","
            text = text[:m.start("value")] + new + text[m.end("value"):]
            continue
        if group is None:
            raise ParseError(f"namelist.input has no entry {key!r} to change")
        gm = re.search(rf"^\s*&{re.escape(group)}\s*$", text, re.MULTILINE | re.IGNORECASE)
        if not gm:
            raise ParseError(f"namelist.input has no group &{group} to add {key!r} to")
        line = f" {key:<36}= {_fortran_value(value).rstrip(',')},\n"
        text = text[:gm.end() + 1] + line + text[gm.end() + 1:]
    return text


def run_seconds(text: str) -> int:
    """Length of the run a namelist.input asks for (``run_days`` ... ``run_seconds``)."""
    total = 0
    for key, factor in (("run_days", 86400), ("run_hours", 3600), ("run_minutes", 60),
                        ("run_seconds", 1)):
        try:
            total += int(float(namelist_value(text, key))) * factor
        except ParseError:
            continue
    if total <= 0:
        raise ParseError("namelist.input sets no positive run_days/hours/minutes/seconds "
                         "(a run to end_* dates is not supported here)")
    return total


def model_step(text: str) -> float:
    """The outer domain's time step in seconds: ``time_step`` plus
    ``time_step_fract_num / time_step_fract_den``."""
    step = float(namelist_value(text, "time_step"))
    try:
        num = float(namelist_value(text, "time_step_fract_num"))
        den = float(namelist_value(text, "time_step_fract_den")) or 1.0
        step += num / den
    except ParseError:
        pass
    if step <= 0:
        raise ParseError(f"namelist.input time_step {step} is not positive")
    return step


def expected_steps(text: str) -> int:
    """Number of outer-domain steps a namelist.input makes: run length / time step."""
    step = model_step(text)
    steps = run_seconds(text) / step
    if abs(steps - round(steps)) > 1e-6:
        raise ParseError(f"run length {run_seconds(text)} s is not a multiple of time_step {step}")
    return int(round(steps))


# --- output verification --------------------------------------------------------------------

#: Prognostic 3-D/2-D fields compared by default: winds, potential temperature
#: perturbation, geopotential perturbation, dry-air mass perturbation, vapour.
DEFAULT_FIELDS = ("U", "V", "W", "T", "PH", "MU", "QVAPOR")


@dataclass(frozen=True)
class FieldDifference:
    """How one field of a run differs from the reference output."""

    name: str
    #: rms(run - ref) / rms(ref): the judged measure; 0 for identical fields.
    rms_rel_diff: float
    #: max |run - ref| / max |ref|: reported, not judged (one grid point of a
    #: convective cell may differ much after an hour of chaotic growth).
    max_rel_diff: float
    max_abs_diff: float
    ref_scale: float

    def within(self, tolerance: float) -> bool:
        return self.rms_rel_diff <= tolerance


def _times(ds: Any) -> list[str]:
    """The ``Times`` of a WRF output (``YYYY-MM-DD_hh:mm:ss`` per record)."""
    if "Times" not in ds.variables:
        return []
    return ["".join(c.decode() if isinstance(c, bytes) else str(c) for c in row).strip()
            for row in ds.variables["Times"][:].tolist()]


def compare_output(run_file: str, reference_file: str, fields: tuple[str, ...] = DEFAULT_FIELDS,
                   time_index: int = -1) -> list[FieldDifference]:
    """Field-by-field difference of one time of two WRF netCDF outputs: record
    ``time_index`` of the run, and the reference's record of the same model time
    (``Times``; an error if the reference has no such time).

    The judged measure is the root-mean-square difference divided by the
    root-mean-square of the reference field: a relative difference that stays
    finite where a field crosses zero (winds) and is not dominated by one grid
    point; the largest pointwise difference is reported beside it. Raises :class:`ParseError`
    when a file cannot be read, a field is missing or the shapes differ.
    Needs the ``netCDF4`` package (``pip install hpcval[wrf]``).
    """
    try:
        import netCDF4
        import numpy as np
    except ImportError as err:
        raise ParseError(
            f"output verification needs netCDF4 (pip install netCDF4): {err}") from None
    result: list[FieldDifference] = []
    try:
        run_ds = netCDF4.Dataset(run_file)
    except OSError as err:
        raise ParseError(f"cannot read WRF output {run_file}: {err}") from None
    try:
        try:
            ref_ds = netCDF4.Dataset(reference_file)
        except OSError as err:
            raise ParseError(f"cannot read reference output {reference_file}: {err}") from None
        try:
            ref_index = time_index
            run_times, ref_times = _times(run_ds), _times(ref_ds)
            if run_times and ref_times:
                when = run_times[time_index]
                if when not in ref_times:
                    raise ParseError(
                        f"{reference_file} has no output for {when} (it holds "
                        f"{', '.join(ref_times)}): not a reference for this run")
                ref_index = ref_times.index(when)
            for name in fields:
                for path, ds in ((run_file, run_ds), (reference_file, ref_ds)):
                    if name not in ds.variables:
                        raise ParseError(f"{path}: no field {name!r}")
                run_var = np.asarray(run_ds.variables[name][time_index], dtype="f8")
                ref_var = np.asarray(ref_ds.variables[name][ref_index], dtype="f8")
                if run_var.shape != ref_var.shape:
                    raise ParseError(
                        f"field {name}: shape {run_var.shape} in {run_file} but "
                        f"{ref_var.shape} in {reference_file}"
                    )
                if not np.all(np.isfinite(run_var)):
                    raise ParseError(f"{run_file}: field {name} holds NaN or Inf")
                delta = run_var - ref_var
                diff = float(np.max(np.abs(delta))) if delta.size else 0.0
                scale = float(np.max(np.abs(ref_var))) if ref_var.size else 0.0
                rms_diff = float(np.sqrt(np.mean(delta**2))) if delta.size else 0.0
                rms_ref = float(np.sqrt(np.mean(ref_var**2))) if ref_var.size else 0.0
                result.append(FieldDifference(
                    name, _ratio(rms_diff, rms_ref), _ratio(diff, scale), diff, scale))
        finally:
            ref_ds.close()
    finally:
        run_ds.close()
    return result


def _ratio(diff: float, scale: float) -> float:
    if scale > 0:
        return diff / scale
    return 0.0 if diff == 0 else float("inf")


def check_output(differences: list[FieldDifference], tolerance: float,
                 run_file: str = "run", reference_file: str = "reference") -> None:
    """:class:`ParseError` naming every field whose relative difference exceeds ``tolerance``."""
    bad = [d for d in differences if not d.within(tolerance)]
    if bad:
        detail = "; ".join(
            f"{d.name}: rms rel diff {d.rms_rel_diff:.3g} (max rel {d.max_rel_diff:.3g}, "
            f"max abs {d.max_abs_diff:.3g}, field max {d.ref_scale:.3g})" for d in bad)
        raise ParseError(
            f"{run_file} differs from {reference_file} beyond the tolerance {tolerance:g}: {detail}"
        )


# --- locating an installation and its inputs ---------------------------------------------------

#: Environment variable naming a WRF directory (a case directory such as
#: ``WRF/test/em_quarter_ss`` holding ``wrf.exe``, or the top of a WRF tree).
WRF_DIR_VARIABLE = "HPCVAL_WRF_DIR"

_MPI_SONAME_RE = re.compile(rb"(libmpi(?:_mpifh|_usempif08|fort)?\.so\.\d+)")


def find_case_dir(case: str, wrf_dir: str | None = None, path: str | None = None) -> Path | None:
    """The directory to run an idealized ``case`` from: it holds ``wrf.exe``,
    ``ideal.exe`` (links are fine) and the case's inputs (``namelist.input``,
    ``input_sounding``...).

    Looked for, in order: ``wrf_dir`` (or ``$HPCVAL_WRF_DIR``) itself or its
    ``test/<case>``; then ``wrf.exe`` on ``PATH`` (``path``) and the
    ``test/<case>`` of the tree it belongs to (``<tree>/main/wrf.exe``, as a
    Spack ``wrf`` installation lays it out). None when there is no such directory.
    """
    candidates: list[Path] = []
    root = wrf_dir if wrf_dir is not None else os.environ.get(WRF_DIR_VARIABLE)
    if root:
        candidates += [Path(root), Path(root) / "test" / case]
    exe = shutil.which("wrf.exe", path=path)
    if exe:
        tree = Path(exe).resolve().parent.parent
        candidates += [tree / "test" / case, Path(exe).parent]
    for cand in candidates:
        if (cand / "wrf.exe").exists() and (cand / "ideal.exe").exists() \
                and (cand / "namelist.input").exists():
            return cand
    return None


def find_run_dir(wrf_dir: str | None = None, path: str | None = None) -> Path | None:
    """WRF's ``run`` directory for real-data cases: ``wrf.exe`` plus the physics
    tables (``LANDUSE.TBL``, ``RRTMG_*_DATA``...) a run links in.

    Looked for in ``wrf_dir`` (or ``$HPCVAL_WRF_DIR``) itself or its ``run/``,
    then beside ``wrf.exe`` on ``PATH`` and in ``<tree>/run`` of the tree it
    belongs to. None when there is none.
    """
    candidates: list[Path] = []
    root = wrf_dir if wrf_dir is not None else os.environ.get(WRF_DIR_VARIABLE)
    if root:
        candidates += [Path(root), Path(root) / "run"]
    exe = shutil.which("wrf.exe", path=path)
    if exe:
        candidates += [Path(exe).parent, Path(exe).resolve().parent.parent / "run"]
    for cand in candidates:
        if (cand / "wrf.exe").exists() and (cand / "LANDUSE.TBL").exists():
            return cand
    return None


def linked_mpi_libraries(binary: str | Path) -> set[str]:
    """MPI shared libraries a binary was linked against (``libmpi.so.40`` for
    Open MPI, ``libmpi.so.12`` for the MPICH ABI shared by MPICH and Intel
    MPI), read from its dynamic string table; empty for a static binary."""
    data = Path(binary).read_bytes()
    return {m.decode() for m in _MPI_SONAME_RE.findall(data)}


#: MPI ABI (C library soname) of an environment's MPI stack, by feature.
MPI_ABI_BY_FEATURE = {"openmpi": "libmpi.so.40", "impi": "libmpi.so.12", "mpich": "libmpi.so.12"}


def mpi_mismatch(binary: str | Path, features: list[str] | set[str]) -> str | None:
    """Why ``binary`` cannot run with an environment of these ``features``, or
    None when it can (or when it cannot be told: no known ABI feature, static binary)."""
    wanted = {MPI_ABI_BY_FEATURE[f] for f in features if f in MPI_ABI_BY_FEATURE}
    linked = {lib for lib in linked_mpi_libraries(binary) if lib.startswith("libmpi.so.")}
    if not wanted or not linked or wanted & linked:
        return None
    return (f"{binary} is linked against {', '.join(sorted(linked))}, this environment's MPI "
            f"provides {', '.join(sorted(wanted))}")


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


#: Manifest a data package writes into its prefix: ``<sha256>  <relative path>``
#: per file, computed at install time from the tarball whose published sha256
#: Spack has verified.
MANIFEST = "hpcval-sha256.txt"


def read_manifest(data_dir: str | Path) -> dict[str, str]:
    """``{relative path: sha256}`` from a data directory's manifest."""
    path = Path(data_dir) / MANIFEST
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise ParseError(
            f"{path}: cannot read the input manifest ({err.strerror}); reinstall the data "
            "package so that its inputs can be verified"
        ) from None
    manifest: dict[str, str] = {}
    for n, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if len(parts) != 2 or not re.fullmatch(r"[0-9a-f]{64}", parts[0]):
            raise ParseError(f"{path}:{n}: not '<sha256>  <file>': {line!r}")
        manifest[parts[1].strip()] = parts[0]
    if not manifest:
        raise ParseError(f"{path}: the input manifest lists no file")
    return manifest


def verify_inputs(data_dir: str | Path, names: list[str] | None = None) -> dict[str, str]:
    """Check the data directory's files against its manifest (all of them, or
    ``names``); :class:`ParseError` naming each missing or corrupt file."""
    data_dir = Path(data_dir)
    manifest = read_manifest(data_dir)
    problems: list[str] = []
    for name in names if names is not None else sorted(manifest):
        if name not in manifest:
            problems.append(f"{name}: not in the manifest")
            continue
        path = data_dir / name
        if not path.is_file():
            problems.append(f"{name}: missing")
            continue
        got = sha256_file(path)
        if got != manifest[name]:
            problems.append(f"{name}: sha256 {got} != {manifest[name]} (corrupt or truncated)")
    if problems:
        raise ParseError(f"inputs in {data_dir} fail verification: " + "; ".join(problems))
    return manifest
