"""``namelist.input``: reading and editing entries, and the run length and
step count a namelist asks for.

A run's length is ``run_days``/``run_hours``/``run_minutes``/``run_seconds``
when any of them is positive; when all are zero (as in many real-data
namelists, e.g. WRF's own ``test/em_real/namelist.input_1day``) WRF runs from
the outer domain's ``start_*`` date to its ``end_*`` date, and so does
:func:`run_seconds`. Many namelists leave out ``start_minute``,
``start_second``, ``end_minute`` and ``end_second`` (WRF's own
``test/em_real/namelist.input`` of WRF 4 does); WRF then takes them as 00,
and so do :func:`start_time` and :func:`end_time`. A date without its year,
month, day or hour is refused: WRF would fill in a default date that is not
the run's.
"""

from __future__ import annotations

import math
import re

from hpcval.core.errors import ParseError
from hpcval.parsers.wrf.log import model_seconds

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


#: Date fields WRF takes as 00 when a namelist leaves them out.
_ZERO_DEFAULT = ("minute", "second")


def _date(text: str, prefix: str, source: str = "namelist.input") -> str:
    """The outer domain's ``<prefix>_year`` ... ``<prefix>_second`` as a WRF
    time string; an absent minute or second is 00, as in WRF."""
    parts = []
    for unit in ("year", "month", "day", "hour", "minute", "second"):
        key = f"{prefix}_{unit}"
        try:
            value = namelist_value(text, key)
        except ParseError:
            if unit in _ZERO_DEFAULT:
                parts.append(0)
                continue
            raise ParseError(f"{source}: no {key}: the {prefix} date needs its year, month, day "
                             f"and hour; add {key} to &time_control") from None
        try:
            parts.append(int(float(value)))
        except (ValueError, OverflowError):
            raise ParseError(f"{source} {key} is not a number: {value!r}") from None
    return "{:04d}-{:02d}-{:02d}_{:02d}:{:02d}:{:02d}".format(*parts)


def start_time(text: str, source: str = "namelist.input") -> str:
    """The outer domain's start (``start_*``), ``YYYY-MM-DD_hh:mm:ss``."""
    return _date(text, "start", source)


def end_time(text: str, source: str = "namelist.input") -> str:
    """The outer domain's end (``end_*``), ``YYYY-MM-DD_hh:mm:ss``."""
    return _date(text, "end", source)


def run_seconds(text: str, source: str = "namelist.input") -> int:
    """Length of the run a namelist.input asks for, in seconds: ``run_days`` ...
    ``run_seconds`` when any is positive (WRF then ignores the ``end_*``
    dates), otherwise the outer domain's ``end_*`` date minus its ``start_*``
    (an absent minute or second is 00, as in WRF)."""
    total = 0
    for key, factor in (("run_days", 86400), ("run_hours", 3600), ("run_minutes", 60),
                        ("run_seconds", 1)):
        try:
            namelist_value(text, key)
        except ParseError:
            continue  # absent: 0
        total += int(_number(text, key)) * factor
    if total > 0:
        return total
    try:
        start, end = start_time(text, source), end_time(text, source)
    except ParseError as err:
        raise ParseError(f"{source}: sets no positive run_days/hours/minutes/seconds and no "
                         f"usable start/end date: {str(err).removeprefix(source + ': ')}") \
            from None
    length = model_seconds(end) - model_seconds(start)
    if length <= 0:
        raise ParseError(f"{source}: all run_* are 0 and end {end} is not after start "
                         f"{start}: the run has no length; set the end_* date or run_hours")
    return int(round(length))


def _number(text: str, key: str) -> float:
    value = namelist_value(text, key)
    try:
        number = float(value)
    except ValueError:
        raise ParseError(f"namelist.input {key} is not a number: {value!r}") from None
    if not math.isfinite(number):
        raise ParseError(f"namelist.input {key} is not a finite number: {value!r}")
    return number


def model_step(text: str) -> float:
    """The outer domain's time step in seconds: ``time_step`` plus
    ``time_step_fract_num / time_step_fract_den``."""
    step = _number(text, "time_step")
    try:
        num = _number(text, "time_step_fract_num")
        den = _number(text, "time_step_fract_den") or 1.0
        step += num / den
    except ParseError:
        pass
    if step <= 0:
        raise ParseError(f"namelist.input time_step {step} is not positive")
    return step


def expected_steps(text: str, source: str = "namelist.input") -> int:
    """Number of outer-domain steps a namelist.input makes: run length / time step."""
    step = model_step(text)
    length = run_seconds(text, source)
    steps = length / step
    if abs(steps - round(steps)) > 1e-6:
        raise ParseError(f"{source}: run length {length} s is not a multiple of time_step "
                         f"{step}")
    return int(round(steps))
